//! Everything that looks for secrets in text an agent or a CLI produced, in one place for every
//! scanner (diagnostics excerpts, session logs and messages, proposals): `patterns` knows the
//! shapes of secrets in general, `known` finds the values the daemon itself injected,
//! `fingerprint` keeps those values as keyed hashes for the review gates, `excerpt` cuts what was
//! printed to what an operator is shown.

pub mod excerpt;
pub mod fingerprint;
pub mod known;
pub mod patterns;

pub use known::KnownSecrets;
pub use patterns::{REDACTED, redact};
