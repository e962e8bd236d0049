//! Roundtable's generic reconcile runtime, in kube-runtime's vocabulary: a scheduler that
//! deduplicates by key (earliest deadline wins), a runner with bounded concurrency that never runs
//! one key twice at once, per-key exponential backoff with jitter, an error budget that stalls a
//! key, a resync spread over its period, and file-watch hints. It knows no concrete kind, no
//! container engine and no spec file.

pub mod action;
pub mod backoff;
pub mod metrics;
pub mod resync;
pub mod runner;
pub mod scheduler;
pub mod watch;

pub use action::Action;
pub use resync::Spread;
pub use runner::{Config, Controller, ErrorOutcome, Failure, Handle, ReconcileError, Reconciler, Stall, Trigger};
