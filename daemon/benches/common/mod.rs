//! What the daemon benchmarks share: a reconciler that only reports when each key starts, and
//! percentiles of sorted figures.

use std::time::Instant;

use roundtable_controller::{Action, ErrorOutcome, Failure, ReconcileError, Reconciler};
use roundtable_specs::ObjectKey;
use tokio::sync::mpsc;

/// A reconciler that only reports when each key starts.
pub struct NoOp(pub mpsc::UnboundedSender<(ObjectKey, Instant)>);

#[derive(Debug, thiserror::Error)]
#[error("never")]
pub struct Never;
impl ReconcileError for Never {}

impl Reconciler<ObjectKey> for NoOp {
    type Error = Never;
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Never> {
        let _ = self.0.send((key.clone(), Instant::now()));
        Ok(Action::await_change())
    }
    async fn on_failure(&self, _: &ObjectKey, _: &Failure<Never>, _: ErrorOutcome) {}
}

/// The `p` quantile (0..=1) of figures sorted ascending.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}
