//! The controller loop: triggers in, scheduler, bounded concurrent runs with one run per key,
//! backoff on failure, a stall after the error budget, graceful shutdown.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::action::Action;
use crate::backoff::{BackoffConfig, KeyBackoff};
use crate::metrics::{self, InFlight};
use crate::scheduler::Scheduler;

/// An error a reconciler returns; permanent errors stall the key at once.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    fn is_permanent(&self) -> bool {
        false
    }
}

/// Why a reconcile failed, handed to [`Reconciler::on_failure`]: the reconciler's own error, or
/// a panic. Rendered with its sources by `roundtable_telemetry::error_chain`.
#[derive(Debug, thiserror::Error)]
pub enum Failure<E> {
    #[error(transparent)]
    Error(E),
    #[error("reconciler panicked: {0}")]
    Panicked(String),
}

impl<E: ReconcileError> Failure<E> {
    /// Whether the key stalls at once: a permanent error does, a panic does not.
    pub fn is_permanent(&self) -> bool {
        match self {
            Failure::Error(error) => error.is_permanent(),
            Failure::Panicked(_) => false,
        }
    }
}

/// What the runner decided after a failure, handed to [`Reconciler::on_failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorOutcome {
    /// Consecutive failures, this one included.
    pub attempt: u32,
    /// When the next attempt comes, unless the key stalled.
    pub retry_in: Option<Duration>,
    /// Why the key stalled, when it did: no retries until the spec changes or someone asks.
    pub stalled: Option<Stall>,
}

/// Why a key stalled. The runner alone decides it (it owns the error budget), so a reconciler
/// names the reason from this and never keeps a copy of the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// `budget` consecutive failures: the whole error budget is spent.
    BudgetSpent { budget: u32 },
    /// The reconciler's error says another attempt cannot help ([`ReconcileError::is_permanent`]).
    Permanent,
}

impl Stall {
    /// Whether failure number `attempt` stalls its key, and why. A trigger that arrived during
    /// the run (`rerun`) always earns another run. A spent budget is named before a permanent
    /// error: the reason an operator reads is the one that would have stalled the key anyway.
    pub fn after(attempt: u32, budget: u32, permanent: bool, rerun: bool) -> Option<Stall> {
        if rerun {
            None
        } else if attempt >= budget {
            Some(Stall::BudgetSpent { budget })
        } else if permanent {
            Some(Stall::Permanent)
        } else {
            None
        }
    }
}

/// A reconciler for keys of type `K`; it gets only the key, never the reason (level-triggered).
pub trait Reconciler<K>: Send + Sync + 'static {
    type Error: ReconcileError;

    fn reconcile(&self, key: &K) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// Told about every failed (or panicked) reconcile, and what happens next.
    fn on_failure(
        &self,
        key: &K,
        failure: &Failure<Self::Error>,
        outcome: ErrorOutcome,
    ) -> impl Future<Output = ()> + Send;
}

/// Why a key should be reconciled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger<K> {
    /// The spec was created, changed or removed: clears a stall and the backoff.
    SpecChanged(K),
    /// The periodic resync, or a hint that something the key's answer depends on moved (an
    /// engine event, a related object that changed): stalled keys are left alone.
    Resync(K),
    /// An operator asked (`roundtable reconcile`): clears a stall and the backoff.
    Requested(K),
}

/// Tuning; the defaults: 4 concurrent reconciles, no debounce, a budget of 10 failures, the
/// default backoff and a 30 s shutdown grace.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub concurrency: usize,
    /// Delay applied to spec changes, so a burst of edits reconciles once.
    pub debounce: Duration,
    /// Consecutive failures before a key stalls.
    pub error_budget: u32,
    pub backoff: BackoffConfig,
    /// How long shutdown waits for in-flight reconciles.
    pub grace: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            concurrency: 4,
            debounce: Duration::ZERO,
            error_budget: 10,
            backoff: BackoffConfig::default(),
            grace: Duration::from_secs(30),
        }
    }
}

/// Sends triggers to a running controller; cheap to clone.
#[derive(Debug)]
pub struct Handle<K> {
    sender: mpsc::UnboundedSender<Trigger<K>>,
}

impl<K> Clone for Handle<K> {
    fn clone(&self) -> Self {
        Self { sender: self.sender.clone() }
    }
}

impl<K> Handle<K> {
    /// A handle whose triggers go to the returned receiver instead of a controller: for tests of
    /// what triggers a component sends.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<Trigger<K>>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (Self { sender }, receiver)
    }

    /// Queues a trigger; false once the controller has stopped.
    pub fn trigger(&self, trigger: Trigger<K>) -> bool {
        self.sender.send(trigger).is_ok()
    }
}

#[derive(Debug)]
struct KeyState {
    backoff: KeyBackoff,
    stalled: bool,
    /// A trigger arrived while the key was running: run it again when it finishes.
    rerun: bool,
}

/// What a finished run reports.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub reconciles: u64,
    pub failures: u64,
    /// In-flight runs abandoned because the grace period ran out.
    pub abandoned: usize,
}

/// The controller: owns the scheduler and the runs.
pub struct Controller<K, R> {
    reconciler: Arc<R>,
    config: Config,
    receiver: mpsc::UnboundedReceiver<Trigger<K>>,
    scheduler: Scheduler<K>,
    keys: HashMap<K, KeyState>,
}

type Finished<K, E> = (K, Result<Action, E>);

impl<K, R> Controller<K, R>
where
    K: Clone + Eq + Hash + Ord + Debug + std::fmt::Display + Send + Sync + 'static,
    R: Reconciler<K>,
{
    pub fn new(reconciler: Arc<R>, config: Config) -> (Self, Handle<K>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let controller = Self { reconciler, config, receiver, scheduler: Scheduler::default(), keys: HashMap::new() };
        (controller, Handle { sender })
    }

    fn state(&mut self, key: &K) -> &mut KeyState {
        let backoff = self.config.backoff;
        self.keys.entry(key.clone()).or_insert_with(|| KeyState {
            backoff: KeyBackoff::new(backoff),
            stalled: false,
            rerun: false,
        })
    }

    fn on_trigger(&mut self, trigger: Trigger<K>, running: &HashSet<K>) {
        let now = Instant::now();
        let (key, at) = match trigger {
            Trigger::SpecChanged(key) | Trigger::Requested(key) => {
                let state = self.state(&key);
                state.stalled = false;
                state.backoff.reset();
                let at = now + self.config.debounce;
                (key, at)
            }
            Trigger::Resync(key) => {
                if self.keys.get(&key).is_some_and(|state| state.stalled) {
                    return;
                }
                (key, now)
            }
        };
        if running.contains(&key) {
            self.state(&key).rerun = true;
        } else {
            self.scheduler.schedule(key, at);
        }
    }

    async fn on_finished(&mut self, key: K, outcome: Result<Action, Failure<R::Error>>) {
        let now = Instant::now();
        let budget = self.config.error_budget;
        let rerun = std::mem::take(&mut self.state(&key).rerun);
        match outcome {
            Ok(action) => {
                // A key that succeeded is back where every key starts: nothing of it is kept, so
                // 10,000 quiet objects hold no state here.
                self.keys.remove(&key);
                if rerun {
                    self.scheduler.schedule(key, now);
                } else if let Some(delay) = action.requeue_after() {
                    self.scheduler.schedule(key, now + delay);
                }
            }
            Err(failure) => {
                let state = self.state(&key);
                let attempt = state.backoff.failures() + 1;
                let stalled = Stall::after(attempt, budget, failure.is_permanent(), rerun);
                let retry_in = if stalled.is_some() {
                    state.stalled = true;
                    state.backoff.next_delay();
                    None
                } else if rerun {
                    state.backoff.next_delay();
                    Some(Duration::ZERO)
                } else {
                    Some(state.backoff.next_delay())
                };
                if let Some(delay) = retry_in {
                    self.scheduler.schedule(key.clone(), now + delay);
                }
                let outcome = ErrorOutcome { attempt, retry_in, stalled };
                let message = roundtable_telemetry::error_chain(&failure);
                tracing::warn!(key = %key, attempt, stalled = stalled.is_some(), retry_in = ?retry_in, error = %message, "reconcile failed");
                self.reconciler.on_failure(&key, &failure, outcome).await;
            }
        }
    }

    /// Runs until `shutdown` resolves or every [`Handle`] is dropped, then waits for in-flight
    /// reconciles up to the grace period and abandons the rest.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Summary {
        let mut summary = Summary::default();
        let mut inflight: JoinSet<Finished<K, R::Error>> = JoinSet::new();
        let mut task_keys: HashMap<tokio::task::Id, K> = HashMap::new();
        let mut running: HashSet<K> = HashSet::new();
        tokio::pin!(shutdown);
        loop {
            // Start every due key while there is room; a due key that is running reruns later.
            while running.len() < self.config.concurrency {
                let Some(key) = self.scheduler.pop_due(Instant::now()) else {
                    break;
                };
                if running.contains(&key) {
                    self.state(&key).rerun = true;
                    continue;
                }
                let reconciler = self.reconciler.clone();
                let task_key = key.clone();
                // Made before the spawn and moved in: an abort before the first poll drops it too.
                let in_flight = InFlight::start();
                // Every line the reconcile logs carries its key (JSON logs: `span`, `spans`).
                let span = tracing::info_span!("reconcile", key = %task_key);
                let handle = inflight.spawn(tracing::Instrument::instrument(
                    async move {
                        let _in_flight = in_flight;
                        let result = reconciler.reconcile(&task_key).await;
                        (task_key, result)
                    },
                    span,
                ));
                task_keys.insert(handle.id(), key.clone());
                running.insert(key);
            }
            let deadline = self.scheduler.next_deadline().filter(|_| running.len() < self.config.concurrency);
            tokio::select! {
                () = &mut shutdown => break,
                trigger = self.receiver.recv() => match trigger {
                    Some(trigger) => self.on_trigger(trigger, &running),
                    None => break,
                },
                Some(joined) = inflight.join_next_with_id(), if !inflight.is_empty() => {
                    summary.reconciles += 1;
                    let (key, outcome) = match joined {
                        Ok((id, (key, result))) => {
                            task_keys.remove(&id);
                            (key, result.map_err(Failure::Error))
                        }
                        Err(join_error) => {
                            let Some(key) = task_keys.remove(&join_error.id()) else { continue };
                            (key, Err(Failure::Panicked(panic_message(join_error))))
                        }
                    };
                    if outcome.is_err() {
                        summary.failures += 1;
                    }
                    metrics::finished(outcome.is_ok());
                    running.remove(&key);
                    self.on_finished(key, outcome).await;
                },
                () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {},
            }
        }
        // Stop intake, then give in-flight reconciles the grace period.
        let drained = tokio::time::timeout(self.config.grace, async {
            while let Some(joined) = inflight.join_next().await {
                summary.reconciles += 1;
                let ok = matches!(joined, Ok((_, Ok(_))));
                if !ok {
                    summary.failures += 1;
                }
                metrics::finished(ok);
            }
        })
        .await;
        if drained.is_err() {
            summary.abandoned = inflight.len();
            inflight.abort_all();
        }
        summary
    }
}

fn panic_message(error: tokio::task::JoinError) -> String {
    if !error.is_panic() {
        return "cancelled".into();
    }
    let payload = error.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_stalls_its_key_by_budget_then_permanence_unless_it_reruns() {
        // attempt, budget, permanent, rerun → stall
        let table = [
            (1, 10, false, false, None),
            (9, 10, false, false, None),
            (10, 10, false, false, Some(Stall::BudgetSpent { budget: 10 })),
            (11, 10, false, false, Some(Stall::BudgetSpent { budget: 10 })),
            (1, 10, true, false, Some(Stall::Permanent)),
            (10, 10, true, false, Some(Stall::BudgetSpent { budget: 10 })),
            (3, 3, false, false, Some(Stall::BudgetSpent { budget: 3 })),
            (10, 10, false, true, None),
            (1, 10, true, true, None),
        ];
        for (attempt, budget, permanent, rerun, want) in table {
            assert_eq!(Stall::after(attempt, budget, permanent, rerun), want, "{attempt} {budget} {permanent} {rerun}");
        }
    }
}
