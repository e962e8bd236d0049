//! What the daemon benchmarks share: a reconciler that only reports when each key starts,
//! percentiles of sorted figures, and the smoke switch.

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

/// `ROUNDTABLE_BENCH_SMOKE=1`: tiny sizes, and an error (a reconcile that never came) fails the
/// run. CI runs every bench so (benches/smoke.sh), to show each still runs to the end.
pub fn smoke() -> bool {
    std::env::var("ROUNDTABLE_BENCH_SMOKE").is_ok_and(|value| value == "1")
}

/// `full`, or `tiny` in a smoke run.
pub fn sized(full: usize, tiny: usize) -> usize {
    if smoke() { tiny } else { full }
}

/// Ends a smoke run that saw `errors` (they are printed where they happened); a full run reports
/// them among its figures.
pub fn fail_in_smoke(errors: usize) {
    if smoke() && errors > 0 {
        eprintln!("smoke run: {errors} errors (above)");
        std::process::exit(1);
    }
}
