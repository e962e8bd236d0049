//! The agent CLIs' side of a session: how each provider is launched (the plan, assembled from
//! its profile in `roundtable_specs::providers`), what its output says about itself (session id,
//! token usage, read by its profile's rules), and the capability-scoped MCP endpoint it talks to.
//! Pure where it can be: plans and capture do no IO.

pub mod briefing;
pub mod capability;
pub mod capture;
pub mod mcp;
pub mod plan;
pub mod tools;
