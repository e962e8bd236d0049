//! Roundtable's execution manager: one session per attempt, run through its phases in the
//! background; below it the sidecars a session needs (the egress gateway, the credential broker,
//! the MCP endpoint), and below them the folder they share.

mod backend;
pub mod broker;
pub mod egress;
mod folder;
mod launch;
pub mod live;
mod manager;
pub mod mcp;
mod outcome;
mod plan;
mod proposal;
mod provision;
mod record;
mod reuse;
mod run;
pub mod sidecar;

pub use folder::ExecutionFolder;
pub use manager::{ExecutionConfig, ExecutionManager, ShutdownSummary, StartError, new_session_id};
pub use outcome::{Ending, Stop, proposal_flags};
