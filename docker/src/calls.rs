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
