//! Roundtable's daemon (`roundtable start`): the loops that scan, sync and reconcile until
//! shutdown, its presence and leases among controllers sharing a store, the revision gate that
//! holds executions until this checkout has the desired commit, and the engine's hints.

mod engine_hints;
mod loops;
mod presence;
mod revision;

pub use loops::{
    DaemonConfig, DaemonError, DaemonLink, DaemonReconciler, DaemonSummary, object_reconciler, run, run_with,
    run_with_link,
};
