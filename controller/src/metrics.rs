//! The controller's metrics in the process-wide registry: reconciles by result and duration,
//! keys waiting in schedulers, reconciles running. No label names a key: keys are unbounded.

use std::sync::{Arc, OnceLock};

use roundtable_telemetry::{CounterVec, Gauge, Histogram};
use tokio::time::Instant;

/// Finished reconciles by `result`: `ok`, or `error` (an error returned, or a panic).
pub const RECONCILES_TOTAL: &str = "roundtable_reconciles_total";
/// Each reconcile from its start to its end, however it ended.
pub const RECONCILE_DURATION_SECONDS: &str = "roundtable_reconcile_duration_seconds";
/// Keys queued in a scheduler, due or not, across every controller of the process.
pub const QUEUE_DEPTH: &str = "roundtable_queue_depth";
/// Reconciles running now, across every controller of the process.
pub const RECONCILES_IN_FLIGHT: &str = "roundtable_reconciles_in_flight";

/// From a no-op reconcile of a converged object (milliseconds) to one that waits on an engine
/// or a provisioning step (minutes).
const DURATION_BOUNDS: [f64; 16] =
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

struct Metrics {
    reconciles: Arc<CounterVec>,
    duration: Arc<Histogram>,
    queue_depth: Arc<Gauge>,
    in_flight: Arc<Gauge>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = roundtable_telemetry::global();
        Metrics {
            reconciles: registry.counter_vec(RECONCILES_TOTAL, "Finished reconciles by result.", &["result"]),
            duration: registry.histogram(RECONCILE_DURATION_SECONDS, "Reconcile durations.", &DURATION_BOUNDS),
            queue_depth: registry.gauge(QUEUE_DEPTH, "Keys queued for a reconcile, due or not."),
            in_flight: registry.gauge(RECONCILES_IN_FLIGHT, "Reconciles running now."),
        }
    })
}

/// Registers every family, with both results at zero, so a scrape shows them before the first
/// reconcile.
pub fn register() {
    let metrics = metrics();
    for result in ["ok", "error"] {
        metrics.reconciles.with_label_values(&[result]);
    }
}

/// Counts a finished reconcile.
pub(crate) fn finished(ok: bool) {
    metrics().reconciles.with_label_values(&[if ok { "ok" } else { "error" }]).inc();
}

/// The gauge schedulers add their queued keys to.
pub(crate) fn queue_depth() -> Arc<Gauge> {
    metrics().queue_depth.clone()
}

/// A running reconcile: counted in flight and timed from [`InFlight::start`] until it is
/// dropped, so a reconcile that panics or is abandoned at shutdown is still taken back out.
pub(crate) struct InFlight {
    started: Instant,
}

impl InFlight {
    pub(crate) fn start() -> Self {
        metrics().in_flight.inc();
        Self { started: Instant::now() }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let metrics = metrics();
        metrics.in_flight.dec();
        metrics.duration.observe_duration(self.started.elapsed());
    }
}
