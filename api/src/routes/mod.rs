//! The JSON API's handlers, by area: reads, writes, decisions on proposals, agents, the git
//! webhook, the materialised status and its watches, and the probes. Each is thin: it calls the
//! service layer (the CLI's own) and answers as the CLI prints. Which method and path a handler
//! serves, who may call it and how the OpenAPI document describes it are its row in the route
//! table (`table.rs`), not here; the admin MCP endpoint (`mcp.rs`) and the console (`console/`)
//! reuse the delivery and reconcile handlers' cores, so the same gates and audit apply.

pub(crate) mod agents;
pub(crate) mod delivery;
mod follow;
pub(crate) mod hooks;
pub(crate) mod ops;
pub(crate) mod read;
pub(crate) mod status;
pub(crate) mod write;
