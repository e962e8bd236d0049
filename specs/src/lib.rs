//! Roundtable's API: resource kinds, list envelopes, parsing with source spans, validation and
//! built-in adapter templates. It does no IO beyond being handed text.

pub mod adapter;
pub mod admission;
pub mod assignment;
pub mod brief;
pub mod builtins;
pub mod catalog;
pub mod contract;
pub mod diagnostics;
pub mod digest;
pub mod egress;
pub mod layout;
pub mod legacy;
pub mod meta;
pub mod names;
pub mod output;
pub mod parse;
pub mod policy;
pub mod resource;
pub mod resume;
pub mod schema;
pub mod secrets;
pub mod session;
pub mod units;
pub mod validate;
mod wire;
pub mod yaml;

pub use catalog::Catalog;
pub use meta::{API_VERSION, Kind, ObjectKey, ObjectMeta};
pub use output::{List, ListItem, Severity, ValidationError};
pub use parse::{Object, ParsedFile, Spec, parse_file};
pub use validate::validate;
