//! The agent CLIs' side of a session: how each provider is launched (plan and MCP manifest),
//! what its output says about itself (session id, token usage), and the capability-scoped MCP
//! endpoint it talks to. Pure where it can be: plans and capture do no IO.

pub mod briefing;
pub mod capability;
pub mod capture;
pub mod manifest;
pub mod mcp;
pub mod plan;
pub mod tools;
