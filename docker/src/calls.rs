//! The engine round trips of a session, timed: with `RUST_LOG=roundtable_docker::calls=debug`
//! each call is logged with its duration, and each phase with its total, so launch overhead can
//! be taken apart call by call.

use std::time::Instant;

/// The log target of the trace.
pub(crate) const TARGET: &str = "roundtable_docker::calls";

/// Awaits one engine call on `container`, logging how long it took.
pub(crate) async fn timed<T>(container: &str, call: &'static str, request: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let answer = request.await;
    tracing::debug!(target: TARGET, container, call, micros = micros(started), "engine call");
    answer
}

/// Microseconds since `started`, saturated.
pub(crate) fn micros(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// The phases of one session, timed: each lap is the time since the one before (or the start),
/// logged with the trace and kept, in milliseconds, on the outcome's timings.
pub(crate) struct Phases<'a> {
    container: &'a str,
    started: Instant,
}

impl<'a> Phases<'a> {
    pub(crate) fn start(container: &'a str) -> Self {
        Self { container, started: Instant::now() }
    }

    /// Ends `phase` now and starts the next.
    pub(crate) fn lap(&mut self, timings: &mut std::collections::BTreeMap<&'static str, u64>, phase: &'static str) {
        let micros = micros(self.started);
        tracing::debug!(target: TARGET, container = %self.container, phase, micros, "phase done");
        timings.insert(phase, micros / 1000);
        self.started = Instant::now();
    }
}
