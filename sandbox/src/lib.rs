//! Roundtable's container runtime: the engine connection and its capability report, the
//! hardened container profile every agent runs under, and PID 1 inside those containers.

pub mod check;
pub mod engine;
pub mod extract;
pub mod git;
pub mod init;
pub mod labels;
pub mod mock;
pub mod patch;
pub mod profile;
pub mod private_dir;
pub mod provision;
pub mod runtime;
pub mod sockets;

pub use engine::{Engine, EngineError};
