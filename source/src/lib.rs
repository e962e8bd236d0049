//! The spec source: where the specs are read from (the working tree, a commit's exported tree,
//! or a git remote's mirror), the project that names them, and the scans that load them.

pub mod follow;
pub mod git;
pub mod mark;
pub mod mirror;
mod project;
mod scan;
pub mod tree;

pub use project::{Project, ProjectError, Repos};
pub use scan::{Loaded, ObjectDigests, Scan, ScanCache, load, scan, scan_cached, scan_changed, scan_unresolved};
