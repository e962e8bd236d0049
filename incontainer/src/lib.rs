//! The commands that run inside agent containers (`roundtable sandbox init|check|mock`): PID 1,
//! the self-check the runtime runs before the agent, and the built-in `mock` agent. The
//! in-container proxy lives beside the gateway it forwards to (`roundtable-gateway::forward`).

pub mod check;
pub mod init;
pub mod mcp_bridge;
pub mod mock;
