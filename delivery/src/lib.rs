//! Roundtable's path from a pending proposal to a branch (docs/delivery.md): what a patch adds
//! (`added.rs`), the secrets scanner (`secrets.rs`) and the held credentials' (`held.rs`), the review gates and their one decision
//! (`gates.rs`), the commit made in a scratch index and the push (`branch.rs`), and signed
//! provenance (`provenance.rs`). The controller never calls any of it: only an operator's accept
//! turns a proposal into a commit.

pub mod added;
pub mod branch;
pub mod gates;
pub mod held;
pub mod provenance;
pub mod secrets;
