//! The commands that run inside agent containers (`roundtable sandbox init|check|mock|write-probe`):
//! PID 1, the self-check the runtime runs before the agent (which also seeds the workspace and,
//! once the controller has verified its report, becomes the agent), the built-in `mock` agent, and the
//! read-only write probe of agent diagnostics. The in-container proxy lives beside the gateway it
//! forwards to (`roundtable-gateway::forward`).

pub mod check;
pub mod init;
pub mod inventory;
pub mod launch;
pub mod mcp_bridge;
pub mod mock;
pub mod reach;
pub mod seed;
pub mod write_probe;
