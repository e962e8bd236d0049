//! The image pulls this process runs for Adapters (`Pulls`): one at a time per reference, however
//! many Adapters name it (single flight); in the background, so a reconcile never waits on a
//! registry; bounded in time; checked when it ends, since neither the registry nor the engine is
//! trusted: what the engine then holds under a digest reference must be listed under exactly that
//! `repository@digest` (`images::holds_digest`), or the name is removed again (and the image with
//! it, unless something else names it) and the pull failed. A failure is retried after a backoff
//! that doubles per attempt. Each pull that ends is announced ([`Pulls::ended`]), so the daemon
//! re-reconciles the Adapters that name it at once.
//!
//! Only the daemon holds one; `status`, `plan` and the CLI's in-process `reconcile` never pull.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use roundtable_session_runtime::hints::normalise_reference;
use roundtable_session_runtime::images::holds_digest;
use roundtable_session_runtime::{EngineHint, PullProgress, SessionRuntime};
use roundtable_telemetry::{Counter, CounterVec, Gauge, Histogram};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

/// How long a pull may take by default (`start --image-pull-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The wait before the first retry of a failed pull; each further failure doubles it.
pub const FIRST_RETRY: Duration = Duration::from_secs(10);
/// The longest wait between attempts.
pub const MAX_RETRY: Duration = Duration::from_secs(300);

/// Why a pull failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The engine or the registry refused or failed it (the message says which and why).
    Refused,
    /// It did not end within the time bound; it was abandoned.
    TimedOut,
    /// The engine holds the reference, but not as the image its digest names.
    DigestMismatch,
}

impl FailureKind {
    /// The metric label of this outcome.
    fn label(self) -> &'static str {
        match self {
            FailureKind::Refused => "failed",
            FailureKind::TimedOut => "timed_out",
            FailureKind::DigestMismatch => "digest_mismatch",
        }
    }
}

/// A failed pull: why, in words an operator reads (the error chain; never a credential, which
/// nothing here holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullFailure {
    pub kind: FailureKind,
    pub message: String,
}

/// Where the pull of one reference stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullState {
    Running {
        progress: PullProgress,
    },
    /// It ended and what the engine holds is what the reference names.
    Pulled {
        image_id: String,
        /// Bytes downloaded (layers the engine had are not counted).
        bytes: u64,
        took: Duration,
    },
    Failed {
        failure: PullFailure,
        /// Failed attempts in a row.
        attempts: u32,
        /// The wait after this failure before the next attempt.
        retry_after: Duration,
        /// What is left of that wait now; zero: a pull may start again.
        retry_in: Duration,
    },
}

enum Entry {
    Running { progress: watch::Receiver<PullProgress>, task: tokio::task::AbortHandle },
    Pulled { image_id: String, bytes: u64, took: Duration },
    Failed { failure: PullFailure, attempts: u32, retry_after: Duration, retry_at: Instant },
}

struct Inner {
    runtime: Arc<dyn SessionRuntime>,
    timeout: Duration,
    /// By reference, in the one spelling references are compared in.
    entries: Mutex<HashMap<String, Entry>>,
    ended: broadcast::Sender<String>,
}

impl Drop for Inner {
    /// The daemon is going: its pulls go with it (the engine abandons a pull whose client left).
    fn drop(&mut self) {
        for entry in self.entries.get_mut().unwrap_or_else(PoisonError::into_inner).values() {
            if let Entry::Running { task, .. } = entry {
                task.abort();
            }
        }
    }
}

/// The pulls of one daemon; cloning shares them.
#[derive(Clone)]
pub struct Pulls(Arc<Inner>);

impl std::fmt::Debug for Pulls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pulls").field("timeout", &self.0.timeout).finish_non_exhaustive()
    }
}

impl Pulls {
    /// Pulls through `runtime`, each bounded by `timeout`.
    pub fn new(runtime: Arc<dyn SessionRuntime>, timeout: Duration) -> Self {
        let (ended, _) = broadcast::channel(64);
        Self(Arc::new(Inner { runtime, timeout, entries: Mutex::new(HashMap::new()), ended }))
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.0.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where the pull of `reference` stands, if this process ever started one.
    pub fn state(&self, reference: &str) -> Option<PullState> {
        let entries = self.entries();
        entries.get(&normalise_reference(reference)).map(|entry| match entry {
            Entry::Running { progress, .. } => PullState::Running { progress: *progress.borrow() },
            Entry::Pulled { image_id, bytes, took } => {
                PullState::Pulled { image_id: image_id.clone(), bytes: *bytes, took: *took }
            }
            Entry::Failed { failure, attempts, retry_after, retry_at } => PullState::Failed {
                failure: failure.clone(),
                attempts: *attempts,
                retry_after: *retry_after,
                retry_in: retry_at.saturating_duration_since(Instant::now()),
            },
        })
    }

    /// Starts pulling `reference` in the background and returns at once: unless a pull of it
    /// runs already (the caller joins that one), or the last one failed and its backoff has not
    /// passed. Must be called inside the tokio runtime.
    pub fn start(&self, reference: &str) {
        let key = normalise_reference(reference);
        let mut entries = self.entries();
        let attempts_before = match entries.get(&key) {
            Some(Entry::Running { .. }) => return,
            Some(Entry::Failed { retry_at, .. }) if Instant::now() < *retry_at => return,
            Some(Entry::Failed { attempts, .. }) => *attempts,
            Some(Entry::Pulled { .. }) | None => 0,
        };
        let (progress, watched) = watch::channel(PullProgress::default());
        let weak = Arc::downgrade(&self.0);
        let (runtime, timeout) = (self.0.runtime.clone(), self.0.timeout);
        let reference = reference.to_owned();
        metrics().in_flight.inc();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let outcome = run(runtime.as_ref(), &reference, timeout, progress).await;
            metrics().in_flight.dec();
            finish(&weak, &reference, outcome, attempts_before, started.elapsed());
        });
        entries.insert(key, Entry::Running { progress: watched, task: task.abort_handle() });
    }

    /// One [`EngineHint::Image`] naming the reference of every pull that ends from now on (a
    /// receiver that falls behind gets [`EngineHint::Resumed`]): what the daemon adds to the
    /// engine's hints, so the Adapters naming it are reconciled as soon as it ends.
    pub fn ended(&self) -> futures_like::HintStream {
        let receiver = self.0.ended.subscribe();
        Box::pin(futures::stream::unfold(receiver, |mut receiver| async move {
            let hint = match receiver.recv().await {
                Ok(reference) => EngineHint::Image { names: vec![reference] },
                Err(broadcast::error::RecvError::Lagged(_)) => EngineHint::Resumed,
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            Some((hint, receiver))
        }))
    }
}

/// The stream type [`Pulls::ended`] returns.
pub mod futures_like {
    pub type HintStream = futures::stream::BoxStream<'static, roundtable_session_runtime::EngineHint>;
}

/// What one pull came to.
type Outcome = Result<(String, u64), PullFailure>;

/// Pulls within `timeout`, then checks what the engine holds.
async fn run(
    runtime: &dyn SessionRuntime,
    reference: &str,
    timeout: Duration,
    progress: watch::Sender<PullProgress>,
) -> Outcome {
    let counted = progress.subscribe();
    let failed = |kind, message: String| PullFailure { kind, message };
    match tokio::time::timeout(timeout, runtime.pull_image(reference, progress)).await {
        Err(_) => {
            let at = *counted.borrow();
            return Err(failed(
                FailureKind::TimedOut,
                format!("the pull did not end within {} s ({at} by then); abandoned", timeout.as_secs()),
            ));
        }
        Ok(Err(error)) => return Err(failed(FailureKind::Refused, roundtable_telemetry::error_chain(&error))),
        Ok(Ok(())) => {}
    }
    let bytes = counted.borrow().current;
    let held = match runtime.inspect_image(reference).await {
        Ok(Some(held)) => held,
        Ok(None) => {
            return Err(failed(
                FailureKind::Refused,
                "the engine said the pull ended but holds nothing under the reference".into(),
            ));
        }
        Err(error) => return Err(failed(FailureKind::Refused, roundtable_telemetry::error_chain(&error))),
    };
    if holds_digest(reference, &held) {
        return Ok((held.id, bytes));
    }
    // Not what was asked for: the name goes, and the image with it unless another name holds it
    // (an image this pull did not create stays).
    let removal = match runtime.remove_image(reference).await {
        Ok(()) => "the name was removed".to_owned(),
        Err(error) => format!("removing the name failed: {}", roundtable_telemetry::error_chain(&error)),
    };
    let listed = if held.repo_digests.is_empty() { "none".to_owned() } else { held.repo_digests.join(", ") };
    Err(failed(
        FailureKind::DigestMismatch,
        format!(
            "the engine holds image {} under it, whose repo digests ({listed}) do not include the digest asked for: not the image the reference names; {removal}",
            held.id
        ),
    ))
}

/// Records how the pull of `reference` ended and announces it.
fn finish(pulls: &Weak<Inner>, reference: &str, outcome: Outcome, attempts_before: u32, took: Duration) {
    let Some(inner) = pulls.upgrade() else { return };
    let entry = match outcome {
        Ok((image_id, bytes)) => {
            tracing::info!(reference, image = %image_id, bytes, took_ms = took.as_millis(), "pulled an image");
            let metrics = metrics();
            metrics.pulls.with_label_values(&["pulled"]).inc();
            metrics.bytes.inc_by(bytes);
            metrics.duration.observe_duration(took);
            Entry::Pulled { image_id, bytes, took }
        }
        Err(failure) => {
            let attempts = attempts_before.saturating_add(1);
            let retry_after = backoff(attempts);
            tracing::warn!(reference, attempts, retry_in_s = retry_after.as_secs(), message = %failure.message, "pulling an image failed");
            metrics().pulls.with_label_values(&[failure.kind.label()]).inc();
            Entry::Failed { failure, attempts, retry_after, retry_at: Instant::now() + retry_after }
        }
    };
    inner.entries.lock().unwrap_or_else(PoisonError::into_inner).insert(normalise_reference(reference), entry);
    // No receiver (no daemon loop listening) is fine: the progress requeue finds it too.
    let _ = inner.ended.send(reference.to_owned());
}

/// The wait after `attempts` failures in a row.
pub fn backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    FIRST_RETRY.saturating_mul(1 << doublings).min(MAX_RETRY)
}

// === metrics ===

/// Finished pulls by `result`: `pulled`, `failed`, `timed_out`, `digest_mismatch`.
pub const PULLS_TOTAL: &str = "roundtable_image_pulls_total";
/// Pulls running now.
pub const PULLS_IN_FLIGHT: &str = "roundtable_image_pulls_in_flight";
/// Bytes downloaded by pulls that succeeded.
pub const PULL_BYTES_TOTAL: &str = "roundtable_image_pull_bytes_total";
/// How long each successful pull took.
pub const PULL_DURATION_SECONDS: &str = "roundtable_image_pull_duration_seconds";

const DURATION_BOUNDS: [f64; 10] = [0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

struct Metrics {
    pulls: Arc<CounterVec>,
    in_flight: Arc<Gauge>,
    bytes: Arc<Counter>,
    duration: Arc<Histogram>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = roundtable_telemetry::global();
        Metrics {
            pulls: registry.counter_vec(PULLS_TOTAL, "Finished image pulls by result.", &["result"]),
            in_flight: registry.gauge(PULLS_IN_FLIGHT, "Image pulls running now."),
            bytes: registry.counter(PULL_BYTES_TOTAL, "Bytes downloaded by image pulls that succeeded."),
            duration: registry.histogram(
                PULL_DURATION_SECONDS,
                "Durations of image pulls that succeeded.",
                &DURATION_BOUNDS,
            ),
        }
    })
}

/// Registers every family, each result at zero, so a scrape shows them before the first pull.
pub fn register_metrics() {
    let metrics = metrics();
    for result in ["pulled", "failed", "timed_out", "digest_mismatch"] {
        metrics.pulls.with_label_values(&[result]);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::StreamExt as _;
    use futures::future::BoxFuture;
    use roundtable_session_runtime::{
        Health, ImageDetails, OwnedResource, ProbeOutcome, ProbePlan, RunOutcome, RuntimeError, SessionPlan,
    };

    use super::*;

    const DIGEST: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const OTHER: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    /// How the fake registry behind the fake engine answers a pull.
    #[derive(Clone, Copy)]
    enum Registry {
        /// Serves the image the digest names.
        Honest,
        /// Serves another image under the reference.
        Swapping,
        /// Never answers.
        Stuck,
        Refusing,
    }

    /// An engine whose images are a map, in front of a [`Registry`].
    struct Fake {
        registry: Registry,
        pulls: AtomicUsize,
        held: Mutex<HashMap<String, ImageDetails>>,
        removed: Mutex<Vec<String>>,
    }

    impl Fake {
        fn new(registry: Registry) -> Arc<Self> {
            Arc::new(Self {
                registry,
                pulls: AtomicUsize::new(0),
                held: Mutex::new(HashMap::new()),
                removed: Mutex::new(Vec::new()),
            })
        }
    }

    impl SessionRuntime for Fake {
        fn endpoint(&self) -> &str {
            "fake"
        }
        fn run(&self, _: SessionPlan, _: watch::Receiver<bool>) -> BoxFuture<'_, Result<RunOutcome, RuntimeError>> {
            Box::pin(async { Err(RuntimeError::Unsupported { what: "run" }) })
        }
        fn owned(&self, _: &str) -> BoxFuture<'_, Result<Vec<OwnedResource>, RuntimeError>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn remove(&self, _: &OwnedResource) -> BoxFuture<'_, Result<(), RuntimeError>> {
            Box::pin(async { Ok(()) })
        }
        fn remove_session(&self, _: &str, _: &str) -> BoxFuture<'_, Result<(), RuntimeError>> {
            Box::pin(async { Ok(()) })
        }
        fn inspect_image(&self, reference: &str) -> BoxFuture<'_, Result<Option<ImageDetails>, RuntimeError>> {
            let held = self.held.lock().expect("lock").get(reference).cloned();
            Box::pin(async move { Ok(held) })
        }
        fn pull_image(
            &self,
            reference: &str,
            progress: watch::Sender<PullProgress>,
        ) -> BoxFuture<'_, Result<(), RuntimeError>> {
            self.pulls.fetch_add(1, Ordering::SeqCst);
            let reference = reference.to_owned();
            Box::pin(async move {
                progress.send_replace(PullProgress { current: 1 << 20, total: 4 << 20, layers_done: 0, layers: 1 });
                tokio::time::sleep(Duration::from_secs(5)).await;
                let (repository, _) = reference.split_once('@').unwrap_or((&reference, ""));
                let repo_digests = match self.registry {
                    Registry::Honest => vec![reference.clone()],
                    Registry::Swapping => vec![format!("{repository}@{OTHER}")],
                    Registry::Stuck => return std::future::pending().await,
                    Registry::Refusing => {
                        return Err(RuntimeError::Protocol {
                            step: "pull the image",
                            detail: "401 unauthorized".into(),
                        });
                    }
                };
                progress.send_replace(PullProgress { current: 4 << 20, total: 4 << 20, layers_done: 1, layers: 1 });
                let details = ImageDetails { id: "sha256:feed".into(), repo_digests };
                self.held.lock().expect("lock").insert(reference, details);
                Ok(())
            })
        }
        fn remove_image(&self, reference: &str) -> BoxFuture<'_, Result<(), RuntimeError>> {
            self.held.lock().expect("lock").remove(reference);
            self.removed.lock().expect("lock").push(reference.to_owned());
            Box::pin(async { Ok(()) })
        }
        fn health(&self) -> BoxFuture<'_, Result<Health, RuntimeError>> {
            Box::pin(async { Err(RuntimeError::Unsupported { what: "health" }) })
        }
        fn probe(&self, _: ProbePlan) -> BoxFuture<'_, Result<ProbeOutcome, RuntimeError>> {
            Box::pin(async { Err(RuntimeError::Unsupported { what: "probe" }) })
        }
    }

    fn reference() -> String {
        format!("127.0.0.1:5000/agents/codex@{DIGEST}")
    }

    /// Lets the spawned pulls run up to `by` of paused time.
    async fn advance(by: Duration) {
        tokio::time::sleep(by).await;
    }

    #[tokio::test(start_paused = true)]
    async fn two_adapters_naming_one_image_pull_it_once_and_see_its_progress() {
        let engine = Fake::new(Registry::Honest);
        let pulls = Pulls::new(engine.clone(), Duration::from_secs(60));
        let mut ended = pulls.ended();
        pulls.start(&reference());
        // The other Adapter naming it joins the pull that runs.
        pulls.start(&reference());
        advance(Duration::from_secs(1)).await;
        assert_eq!(engine.pulls.load(Ordering::SeqCst), 1);
        let Some(PullState::Running { progress }) = pulls.state(&reference()) else { panic!("running") };
        assert_eq!(progress.to_string(), "1.0 of 4.0 MiB");
        advance(Duration::from_secs(5)).await;
        assert_eq!(
            pulls.state(&reference()),
            Some(PullState::Pulled { image_id: "sha256:feed".into(), bytes: 4 << 20, took: Duration::from_secs(5) })
        );
        assert_eq!(ended.next().await, Some(EngineHint::Image { names: vec![reference()] }));
        assert_eq!(engine.pulls.load(Ordering::SeqCst), 1, "a pulled image is not pulled again unasked");
    }

    #[tokio::test(start_paused = true)]
    async fn an_image_that_is_not_what_its_digest_names_is_removed_and_the_pull_failed() {
        let engine = Fake::new(Registry::Swapping);
        let pulls = Pulls::new(engine.clone(), Duration::from_secs(60));
        pulls.start(&reference());
        advance(Duration::from_secs(6)).await;
        let Some(PullState::Failed { failure, attempts: 1, retry_after, retry_in }) = pulls.state(&reference()) else {
            panic!("failed: {:?}", pulls.state(&reference()))
        };
        assert_eq!(failure.kind, FailureKind::DigestMismatch, "{failure:?}");
        assert!(failure.message.contains(OTHER) && failure.message.contains("the name was removed"), "{failure:?}");
        assert_eq!(*engine.removed.lock().expect("lock"), [reference()]);
        assert!(engine.held.lock().expect("lock").is_empty(), "nothing is left under the reference");
        assert_eq!(retry_after, FIRST_RETRY);
        assert!(retry_in > Duration::ZERO && retry_in <= FIRST_RETRY);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stuck_registry_times_out_and_failures_back_off_doubling() {
        let engine = Fake::new(Registry::Stuck);
        let pulls = Pulls::new(engine.clone(), Duration::from_secs(30));
        pulls.start(&reference());
        advance(Duration::from_secs(31)).await;
        let Some(PullState::Failed { failure, attempts: 1, .. }) = pulls.state(&reference()) else {
            panic!("timed out: {:?}", pulls.state(&reference()))
        };
        assert_eq!(failure.kind, FailureKind::TimedOut);
        assert!(failure.message.contains("within 30 s (1.0 of 4.0 MiB by then)"), "{}", failure.message);
        // Not again before the backoff has passed, whoever asks.
        pulls.start(&reference());
        assert_eq!(engine.pulls.load(Ordering::SeqCst), 1);
        advance(FIRST_RETRY).await;
        assert!(matches!(pulls.state(&reference()), Some(PullState::Failed { retry_in: Duration::ZERO, .. })));
        pulls.start(&reference());
        advance(Duration::from_secs(31)).await;
        assert_eq!(engine.pulls.load(Ordering::SeqCst), 2);
        assert!(matches!(
            pulls.state(&reference()),
            Some(PullState::Failed { attempts: 2, retry_after, .. }) if retry_after == FIRST_RETRY * 2
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_keeps_the_engines_words() {
        let engine = Fake::new(Registry::Refusing);
        let pulls = Pulls::new(engine, Duration::from_secs(30));
        pulls.start(&reference());
        advance(Duration::from_secs(6)).await;
        let Some(PullState::Failed { failure, .. }) = pulls.state(&reference()) else { panic!("failed") };
        assert_eq!(
            failure,
            PullFailure { kind: FailureKind::Refused, message: "pull the image: 401 unauthorized".into() }
        );
    }

    #[test]
    fn backoff_doubles_to_its_ceiling() {
        assert_eq!(backoff(1), FIRST_RETRY);
        assert_eq!(backoff(2), FIRST_RETRY * 2);
        assert_eq!(backoff(40), MAX_RETRY);
    }
}
