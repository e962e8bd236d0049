//! Everything that looks for secrets in text an agent or a CLI produced, in one place for every
//! scanner (diagnostics excerpts, session logs and messages, the proposal gate): `patterns` knows
//! the shapes of secrets in general, in one table of named rules read two ways (`redact` masks,
//! erring on hiding; `find` and `scan_line` name what a gate refuses), `known` finds the values
//! the daemon itself injected, `fingerprint` keeps those values as keyed hashes for the review
//! gates, `excerpt` cuts what was printed to what an operator is shown.

pub mod excerpt;
pub mod fingerprint;
pub mod known;
pub mod patterns;

pub use known::KnownSecrets;
pub use patterns::{Found, REDACTED, find, redact, scan_line};
