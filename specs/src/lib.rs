//! Roundtable's API: resource kinds, list envelopes, parsing with source spans, validation and
//! built-in adapter templates. It does no IO beyond being handed text.

pub mod adapter;
pub mod admission;
pub mod assignment;
pub mod audit;
pub mod brief;
pub mod broker;
pub mod builtins;
pub mod catalog;
pub mod contract;
pub mod delivery;
pub mod diagnostics;
pub mod digest;
pub mod egress;
pub mod events;
pub mod field_patterns;
pub mod finding;
pub mod layout;
pub mod legacy;
pub mod list;
pub mod meta;
pub mod names;
pub mod object;
pub mod output;
pub mod parse;
pub mod policy;
pub mod protected;
pub mod resource;
pub mod resume;
pub mod runtime;
pub mod schema;
pub mod secrets;
pub mod session;
pub mod sidecar;
pub mod units;
pub mod validate;
mod wire;
pub mod words;
pub mod yaml;

pub use catalog::Catalog;
pub use finding::{Severity, ValidationError};
pub use list::{List, ListItem};
pub use meta::{API_VERSION, Kind, ObjectKey, ObjectMeta};
pub use object::{Object, Spec};
pub use parse::{ParsedFile, parse_file};
pub use validate::validate;
