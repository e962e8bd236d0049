//! Roundtable's per-kind reconcilers (one per kind, each observing, planning and applying), the
//! conditions they set, the status rows they produce, and the status, plan and prune views
//! computed from them without acting, over the backends they drive.

pub mod adapter;
pub mod assignment;
pub mod backend;
pub mod conditions;
pub mod dependents;
pub mod desired;
pub mod prune;
pub mod pull;
pub mod reconcile;
pub mod request;
pub mod status;

pub use dependents::Dependents;
pub use reconcile::ObjectReconciler;
pub use request::{ActiveRun, ExecutionRequest, RUNNING_RECHECK};
