//! One module per command; each returns the process exit code.

pub mod adapters;
pub mod doctor;
pub mod init;
pub mod schema;
pub mod validate;
