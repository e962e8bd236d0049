//! One module per command; each returns the process exit code.

pub mod adapters;
pub mod admission;
pub mod audit;
pub mod controllers;
pub mod delivery;
pub mod describe;
pub mod doctor;
pub mod events;
pub mod executions;
pub mod gateway;
pub mod init;
pub mod plan;
pub mod prune;
pub mod reconcile;
pub mod resume;
pub mod schema;
pub mod start;
pub mod state;
pub mod status;
pub mod validate;
pub mod watch;
