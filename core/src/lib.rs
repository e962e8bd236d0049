//! Roundtable's per-kind reconcilers, the spec source they read, the status and plan views
//! computed from them without acting, and the backends they drive.

pub mod adapter;
pub mod assignment;
pub mod backend;
pub mod broker;
pub mod conditions;
pub mod daemon;
pub mod desired;
pub mod egress;
pub mod engine_hints;
pub mod execution;
pub mod mcp;
pub mod presence;
pub mod prune;
pub mod reconcile;
pub mod revision;
pub mod sidecar;
pub mod source;
pub mod status;

pub use reconcile::ObjectReconciler;
