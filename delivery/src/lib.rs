//! Roundtable's path from a pending proposal to a branch (docs/delivery.md): an accept as one
//! claimed step that undoes what it made on any failure (`accept.rs`), what a proposal adds
//! (`added.rs`, read from its git objects by `changes.rs`), the held credentials' scanner
//! (`held.rs`; the secret shapes are `specs::secrets`), the review gates and their one decision
//! (`gates.rs`), the commit made in a scratch index and the push (`branch.rs`), and signed
//! provenance (`provenance.rs`). The controller never calls any of it: only an operator's accept
//! turns a proposal into a commit.

pub mod accept;
pub mod added;
pub mod branch;
pub mod changes;
pub mod gates;
pub mod held;
pub mod provenance;
