//! The runner with a fake reconciler and a paused clock: deduplication, one run per key,
//! backoff growth and reset, the stall budget, panics, shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use roundtable_controller::{
    Action, Config, Controller, ErrorOutcome, Failure, ReconcileError, Reconciler, Stall, Trigger,
};
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
#[error("fake failure (permanent: {permanent})")]
struct FakeError {
    permanent: bool,
}

impl ReconcileError for FakeError {
    fn is_permanent(&self) -> bool {
        self.permanent
    }
}

/// How the fake behaves for a key.
#[derive(Debug, Clone, Copy, Default)]
enum Behaviour {
    #[default]
    Succeed,
    Fail,
    FailPermanently,
    Panic,
}

#[derive(Default)]
struct Fake {
    work: Duration,
    behaviour: Mutex<HashMap<&'static str, Behaviour>>,
    runs: Mutex<Vec<(&'static str, Instant)>>,
    running: Mutex<HashMap<&'static str, usize>>,
    max_per_key: Mutex<usize>,
    max_total: Mutex<usize>,
    failures: Mutex<Vec<(&'static str, ErrorOutcome)>>,
}

impl Fake {
    fn with_work(work: Duration) -> Arc<Self> {
        Arc::new(Self { work, ..Self::default() })
    }

    fn set(&self, key: &'static str, behaviour: Behaviour) {
        self.behaviour.lock().expect("lock").insert(key, behaviour);
    }

    fn runs_of(&self, key: &str) -> Vec<Instant> {
        self.runs.lock().expect("lock").iter().filter(|(k, _)| *k == key).map(|(_, at)| *at).collect()
    }

    fn outcomes_of(&self, key: &str) -> Vec<ErrorOutcome> {
        self.failures.lock().expect("lock").iter().filter(|(k, _)| *k == key).map(|(_, o)| *o).collect()
    }
}

impl Reconciler<&'static str> for Fake {
    type Error = FakeError;

    async fn reconcile(&self, key: &&'static str) -> Result<Action, FakeError> {
        let key = *key;
        self.runs.lock().expect("lock").push((key, Instant::now()));
        {
            let mut running = self.running.lock().expect("lock");
            *running.entry(key).or_default() += 1;
            let per_key = running[key];
            let total: usize = running.values().sum();
            let mut max = self.max_per_key.lock().expect("lock");
            *max = (*max).max(per_key);
            let mut max_total = self.max_total.lock().expect("lock");
            *max_total = (*max_total).max(total);
        }
        tokio::time::sleep(self.work).await;
        *self.running.lock().expect("lock").get_mut(key).expect("running") -= 1;
        let behaviour = self.behaviour.lock().expect("lock").get(key).copied().unwrap_or_default();
        match behaviour {
            Behaviour::Succeed => Ok(Action::await_change()),
            Behaviour::Fail => Err(FakeError { permanent: false }),
            Behaviour::FailPermanently => Err(FakeError { permanent: true }),
            Behaviour::Panic => panic!("the fake reconciler panics for {key}"),
        }
    }

    async fn on_failure(&self, key: &&'static str, _failure: &Failure<FakeError>, outcome: ErrorOutcome) {
        self.failures.lock().expect("lock").push((*key, outcome));
    }
}

/// Runs the controller in the background; returns the handle and a stop switch.
fn spawn(
    fake: &Arc<Fake>,
    config: Config,
) -> (
    roundtable_controller::Handle<&'static str>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<roundtable_controller::runner::Summary>,
) {
    let (controller, handle) = Controller::new(fake.clone(), config);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(controller.run(async move {
        let _ = stopped.await;
    }));
    (handle, stop, task)
}

async fn settle(duration: Duration) {
    tokio::time::sleep(duration).await;
}

#[tokio::test(start_paused = true)]
async fn a_hundred_events_on_one_key_reconcile_once() {
    let fake = Fake::with_work(Duration::from_millis(10));
    let (handle, _stop, _task) = spawn(&fake, Config { debounce: Duration::from_millis(100), ..Config::default() });
    for _ in 0..100 {
        handle.trigger(Trigger::SpecChanged("adapter/a"));
    }
    settle(Duration::from_secs(5)).await;
    assert_eq!(fake.runs_of("adapter/a").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn one_key_never_runs_twice_at_once_and_concurrency_is_bounded() {
    let fake = Fake::with_work(Duration::from_secs(1));
    let (handle, _stop, _task) = spawn(&fake, Config { concurrency: 4, ..Config::default() });
    let keys = ["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"];
    for key in keys {
        handle.trigger(Trigger::SpecChanged(key));
    }
    settle(Duration::from_millis(500)).await;
    // Triggers for a running key make it run again afterwards, not alongside.
    for _ in 0..10 {
        handle.trigger(Trigger::Requested("k1"));
    }
    settle(Duration::from_secs(10)).await;
    assert_eq!(*fake.max_per_key.lock().expect("lock"), 1);
    assert_eq!(*fake.max_total.lock().expect("lock"), 4);
    assert_eq!(fake.runs_of("k1").len(), 2, "one rerun for the burst that came while running");
    for key in &keys[1..] {
        assert_eq!(fake.runs_of(key).len(), 1, "{key}");
    }
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_exponentially_and_success_resets() {
    let fake = Fake::with_work(Duration::ZERO);
    fake.set("x", Behaviour::Fail);
    let (handle, _stop, _task) = spawn(&fake, Config::default());
    handle.trigger(Trigger::SpecChanged("x"));
    settle(Duration::from_secs(40)).await;
    let runs = fake.runs_of("x");
    let gaps: Vec<f64> = runs.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
    assert!(gaps.len() >= 4, "{gaps:?}");
    for (i, gap) in gaps.iter().take(4).enumerate() {
        let base = f64::from(1u32 << i);
        assert!(*gap >= base * 0.8 - 0.01 && *gap <= base * 1.2 + 0.01, "gap {i} = {gap}, expected about {base}");
    }
    // A success resets the backoff: the next failure waits about a second again.
    fake.set("x", Behaviour::Succeed);
    settle(Duration::from_secs(60)).await;
    fake.set("x", Behaviour::Fail);
    let before = fake.runs_of("x").len();
    handle.trigger(Trigger::Resync("x"));
    settle(Duration::from_millis(1300)).await;
    let after = fake.runs_of("x");
    assert_eq!(after.len(), before + 2, "failed once, retried after about 1 s");
    let outcomes = fake.outcomes_of("x");
    let first_after_reset = outcomes[outcomes.len() - 2];
    assert_eq!(first_after_reset.attempt, 1, "{outcomes:?}");
    let retry = first_after_reset.retry_in.expect("retried").as_secs_f64();
    assert!((0.8..=1.2).contains(&retry), "{retry}");
}

#[tokio::test(start_paused = true)]
async fn the_error_budget_stalls_until_the_spec_changes() {
    let fake = Fake::with_work(Duration::ZERO);
    fake.set("x", Behaviour::Fail);
    let (handle, _stop, _task) = spawn(&fake, Config::default());
    handle.trigger(Trigger::SpecChanged("x"));
    settle(Duration::from_secs(3600)).await;
    assert_eq!(fake.runs_of("x").len(), 10, "exactly the budget");
    let last = *fake.outcomes_of("x").last().expect("outcomes");
    assert_eq!((last.attempt, last.stalled, last.retry_in), (10, Some(Stall::BudgetSpent { budget: 10 }), None));
    // A resync does not retry a stalled key.
    handle.trigger(Trigger::Resync("x"));
    settle(Duration::from_secs(60)).await;
    assert_eq!(fake.runs_of("x").len(), 10);
    // A spec change clears the stall.
    fake.set("x", Behaviour::Succeed);
    handle.trigger(Trigger::SpecChanged("x"));
    settle(Duration::from_secs(1)).await;
    assert_eq!(fake.runs_of("x").len(), 11);
}

#[tokio::test(start_paused = true)]
async fn permanent_errors_stall_at_once_and_a_request_clears_them() {
    let fake = Fake::with_work(Duration::ZERO);
    fake.set("x", Behaviour::FailPermanently);
    let (handle, _stop, _task) = spawn(&fake, Config::default());
    handle.trigger(Trigger::SpecChanged("x"));
    settle(Duration::from_secs(600)).await;
    assert_eq!(fake.runs_of("x").len(), 1);
    assert_eq!(fake.outcomes_of("x")[0].stalled, Some(Stall::Permanent));
    handle.trigger(Trigger::Requested("x"));
    settle(Duration::from_secs(1)).await;
    assert_eq!(fake.runs_of("x").len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_panic_fails_only_its_own_key() {
    let fake = Fake::with_work(Duration::ZERO);
    fake.set("bad", Behaviour::Panic);
    let (handle, _stop, _task) = spawn(&fake, Config::default());
    handle.trigger(Trigger::SpecChanged("bad"));
    handle.trigger(Trigger::SpecChanged("good"));
    settle(Duration::from_millis(500)).await;
    assert_eq!(fake.runs_of("good").len(), 1);
    let outcomes = fake.outcomes_of("bad");
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].attempt, 1);
    assert!(fake.outcomes_of("good").is_empty());
    // The controller is still alive.
    handle.trigger(Trigger::Requested("good"));
    settle(Duration::from_millis(100)).await;
    assert_eq!(fake.runs_of("good").len(), 2);
}

#[tokio::test(start_paused = true)]
async fn requeue_runs_again_after_its_delay() {
    struct Requeue(Mutex<Vec<Instant>>);
    impl Reconciler<u8> for Requeue {
        type Error = FakeError;
        async fn reconcile(&self, _: &u8) -> Result<Action, FakeError> {
            self.0.lock().expect("lock").push(Instant::now());
            Ok(Action::requeue(Duration::from_secs(30)))
        }
        async fn on_failure(&self, _: &u8, _: &Failure<FakeError>, _: ErrorOutcome) {}
    }
    let reconciler = Arc::new(Requeue(Mutex::new(Vec::new())));
    let (controller, handle) = Controller::new(reconciler.clone(), Config::default());
    tokio::spawn(controller.run(std::future::pending()));
    handle.trigger(Trigger::SpecChanged(7));
    settle(Duration::from_secs(95)).await;
    assert_eq!(reconciler.0.lock().expect("lock").len(), 4, "at 0, 30, 60 and 90 s");
}

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_in_flight_work_up_to_the_grace() {
    let fake = Fake::with_work(Duration::from_secs(5));
    let (handle, stop, task) = spawn(&fake, Config { grace: Duration::from_secs(10), ..Config::default() });
    handle.trigger(Trigger::SpecChanged("x"));
    settle(Duration::from_millis(100)).await;
    let _ = stop.send(());
    let summary = task.await.expect("join");
    assert_eq!((summary.reconciles, summary.abandoned), (1, 0));

    let slow = Fake::with_work(Duration::from_secs(60));
    let (handle, stop, task) = spawn(&slow, Config { grace: Duration::from_secs(10), ..Config::default() });
    handle.trigger(Trigger::SpecChanged("x"));
    settle(Duration::from_millis(100)).await;
    let _ = stop.send(());
    let summary = task.await.expect("join");
    assert_eq!(summary.abandoned, 1);
}

/// The value of one series in the process-wide registry's rendering; zero while it is absent.
fn scraped(series: &str) -> f64 {
    roundtable_telemetry::global().sample(series).unwrap_or(0.0)
}

/// Other tests run controllers into the same registry at the same time, so every series is
/// compared as "at least" this test's own share.
#[tokio::test(start_paused = true)]
async fn reconciles_are_counted_timed_and_seen_in_flight_and_queued() {
    use roundtable_controller::metrics::{
        QUEUE_DEPTH, RECONCILE_DURATION_SECONDS, RECONCILES_IN_FLIGHT, RECONCILES_TOTAL,
    };
    let ok = format!("{RECONCILES_TOTAL}{{result=\"ok\"}}");
    let error = format!("{RECONCILES_TOTAL}{{result=\"error\"}}");
    let timed = format!("{RECONCILE_DURATION_SECONDS}_count");
    let before = [scraped(&ok), scraped(&error), scraped(&timed)];

    let fake = Fake::with_work(Duration::from_secs(10));
    fake.set("fails", Behaviour::Fail);
    let (handle, stop, task) = spawn(&fake, Config::default());
    handle.trigger(Trigger::SpecChanged("fails"));
    handle.trigger(Trigger::SpecChanged("succeeds"));
    settle(Duration::from_secs(1)).await;
    assert!(scraped(RECONCILES_IN_FLIGHT) >= 2.0, "both keys are running");
    // The failed key waits out its first backoff (0.8 to 1.2 s) in the scheduler.
    settle(Duration::from_millis(9_500)).await;
    assert!(scraped(QUEUE_DEPTH) >= 1.0, "the failed key is queued for its retry");
    let _ = stop.send(());
    task.await.expect("join");

    assert!(scraped(&ok) >= before[0] + 1.0, "{ok}");
    assert!(scraped(&error) >= before[1] + 1.0, "{error}");
    assert!(scraped(&timed) >= before[2] + 2.0, "{timed}");
}
