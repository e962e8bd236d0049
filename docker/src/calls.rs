//! The engine round trips of a session, timed and counted: with
//! `RUST_LOG=roundtable_docker::calls=debug` each call is logged with its duration, and each phase
//! with its total, so launch overhead can be taken apart call by call; and the calls a session's
//! run awaits are counted onto its outcome, so a test can hold the count down.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

/// The log target of the trace.
pub(crate) const TARGET: &str = "roundtable_docker::calls";

tokio::task_local! {
    /// Where the calls of the run being polled are counted, when one is.
    static COUNTED: Arc<AtomicU32>;
}

/// Runs `work`, counting into `calls` every engine call it makes through [`timed`] (those made
/// on other tasks, such as the removal after a run, are not the run's).
pub(crate) async fn counted<T>(calls: &Arc<AtomicU32>, work: impl Future<Output = T>) -> T {
    COUNTED.scope(calls.clone(), work).await
}

/// Awaits one engine call on `container`, logging how long it took, and counts it.
pub(crate) async fn timed<T>(container: &str, call: &'static str, request: impl Future<Output = T>) -> T {
    let _ = COUNTED.try_with(|calls| calls.fetch_add(1, Ordering::Relaxed));
    polled(container, call, request).await
}

/// [`timed`] without counting: for the polls made while output is awaited (whether an exec is
/// still running), whose number says how long the wait was, not how many steps the run took.
pub(crate) async fn polled<T>(container: &str, call: &'static str, request: impl Future<Output = T>) -> T {
    lasted(container, call, request).await
}

/// Logs how long `work`, a step made of calls that are counted one by one (the inventory's
/// exec), took, without counting it as a call of its own.
pub(crate) async fn lasted<T>(container: &str, call: &'static str, work: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let answer = work.await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_the_calls_of_the_counted_work_are_counted_and_polls_are_not() {
        let calls = Arc::new(AtomicU32::new(0));
        counted(&calls, async {
            timed("c", "one", async {}).await;
            // Calls at once in one task are each counted.
            tokio::join!(timed("c", "two", async {}), timed("c", "three", async {}));
            polled("c", "poll", async {}).await;
            // Another task is not the run's.
            tokio::spawn(timed("c", "elsewhere", async {})).await.expect("task");
        })
        .await;
        timed("c", "after", async {}).await;
        assert_eq!(calls.load(Ordering::Relaxed), 3);
    }
}
