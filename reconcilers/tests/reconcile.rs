//! Reconcile logic with fake backends, and the spec source against real files and a real state
//! store: convergence, the last-valid-spec rule, tombstones, generations.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use roundtable_controller::Reconciler as _;
use roundtable_reconcilers::ExecutionRequest;
use roundtable_reconcilers::ObjectReconciler;
use roundtable_reconcilers::backend::ExecutionBackend;
use roundtable_reconcilers::backend::{
    AuditEvent, AuditSink, BackendError, Change, ImageBackend, ImageInfo, StatusBackend,
};
use roundtable_reconcilers::desired::{Desired, sync};
use roundtable_reconcilers::pull::{FailureKind, PullFailure, PullState};
use roundtable_reconcilers::status::{exit_code, plan, status};
use roundtable_session_runtime::PullProgress;
use roundtable_source::{Project, Scan};
use roundtable_specs::output::{Condition, ConditionStatus, Health, SyncStatus};
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{ObjectRecord, Store};

/// The scan of the spec directory `dir`, as its project.
fn scan(dir: &std::path::Path) -> Scan {
    roundtable_source::scan(&Project::resolve(dir).expect("project"))
}

// === fakes ===

#[derive(Default)]
struct FakeStatus {
    objects: Mutex<HashMap<ObjectKey, ObjectRecord>>,
    conditions: Mutex<HashMap<ObjectKey, Vec<Condition>>>,
    writes: AtomicUsize,
}

impl FakeStatus {
    fn insert(&self, desired: &Desired) {
        let record = ObjectRecord {
            key: desired.key.clone(),
            uid: desired.uid.clone(),
            generation: desired.generation,
            spec_digest: "d".into(),
            execution_generation: None,
            execution_digest: None,
            spec_json: roundtable_specs::resource::to_value(&desired.metadata, &desired.spec).to_string(),
            source_file: "a.yaml".into(),
            observed_generation: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            deleted_at: None,
            status_json: None,
            rerun_generation: None,
            held: None,
        };
        self.objects.lock().expect("lock").insert(desired.key.clone(), record);
    }
}

impl StatusBackend for FakeStatus {
    async fn object(&self, key: &ObjectKey) -> Result<Option<ObjectRecord>, BackendError> {
        Ok(self.objects.lock().expect("lock").get(key).cloned())
    }

    async fn conditions(&self, key: &ObjectKey) -> Result<Vec<Condition>, BackendError> {
        Ok(self.conditions.lock().expect("lock").get(key).cloned().unwrap_or_default())
    }

    async fn apply(&self, key: &ObjectKey, change: &Change) -> Result<(), BackendError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        match change {
            Change::SetCondition(condition) => {
                let mut all = self.conditions.lock().expect("lock");
                let list = all.entry(key.clone()).or_default();
                list.retain(|c| c.type_ != condition.type_);
                list.push(condition.clone());
            }
            Change::RecordStatus(status) => {
                if let Some(record) = self.objects.lock().expect("lock").get_mut(key) {
                    record.status_json = status.clone();
                }
            }
            Change::ObserveGeneration(generation) => {
                if let Some(record) = self.objects.lock().expect("lock").get_mut(key) {
                    record.observed_generation = Some(*generation);
                }
            }
            Change::Forget => {
                self.objects.lock().expect("lock").remove(key);
                self.conditions.lock().expect("lock").remove(key);
            }
            Change::PullImage { .. }
            | Change::StartExecution { .. }
            | Change::CancelExecution
            | Change::SupersedeExecution { .. }
            | Change::InterruptSession(_) => {}
        }
        Ok(())
    }
}

/// Images by reference, listed (as an honest engine lists them) under the digest reference they
/// were pulled by; and, when `pulls_here`, pulls whose state the test sets.
#[derive(Default)]
struct FakeImages {
    present: Mutex<HashMap<String, String>>,
    /// What a lying engine lists for the image it holds under a reference, instead.
    listed_as: Mutex<HashMap<String, Vec<String>>>,
    pulls_here: bool,
    tags_not_pullable: bool,
    pulls: Mutex<HashMap<String, PullState>>,
    started: Mutex<Vec<String>>,
}

impl ImageBackend for FakeImages {
    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>, BackendError> {
        let present = self.present.lock().expect("lock");
        let listed = self.listed_as.lock().expect("lock").get(reference).cloned();
        let honest = if reference.contains('@') { vec![reference.to_owned()] } else { Vec::new() };
        Ok(present.get(reference).map(|id| ImageInfo { id: id.clone(), repo_digests: listed.unwrap_or(honest) }))
    }

    fn pulls(&self) -> bool {
        self.pulls_here
    }

    async fn tags_pullable(&self) -> bool {
        !self.tags_not_pullable
    }

    fn pull_state(&self, reference: &str) -> Option<PullState> {
        self.pulls.lock().expect("lock").get(reference).cloned()
    }

    fn pull(&self, reference: &str) -> Result<(), BackendError> {
        self.started.lock().expect("lock").push(reference.to_owned());
        let running = PullState::Running { progress: PullProgress::default() };
        self.pulls.lock().expect("lock").insert(reference.to_owned(), running);
        Ok(())
    }
}

/// Executions that never run: enough for the kinds these tests reconcile.
#[derive(Default)]
struct NoExecutions;

impl ExecutionBackend for NoExecutions {
    fn active_run(&self, _: &str) -> Option<roundtable_reconcilers::ActiveRun> {
        None
    }
    fn controller_run(&self) -> Option<String> {
        None
    }
    async fn start(&self, _: ExecutionRequest) -> Result<(), BackendError> {
        Err(BackendError::NotTheDaemon)
    }
    fn cancel(&self, _: &str) {}
    fn supersede(&self, _: &str, _: i64) {}
    async fn interrupt(&self, _: &str, _: Option<&roundtable_store::Lease>) -> Result<(), BackendError> {
        Ok(())
    }
    async fn claim(
        &self,
        _: &roundtable_store::Identity,
        _: Option<&roundtable_store::LeaseRecord>,
    ) -> Result<Option<roundtable_store::Lease>, BackendError> {
        Err(BackendError::NotTheDaemon)
    }
}

fn fake_reconciler() -> ObjectReconciler<FakeStatus, FakeImages, FakeAudit, NoExecutions> {
    ObjectReconciler::with_executions(FakeStatus::default(), FakeImages::default(), FakeAudit::default(), NoExecutions)
}

#[derive(Default)]
struct FakeAudit(Mutex<Vec<AuditEvent>>);

impl AuditSink for FakeAudit {
    async fn record(&self, event: AuditEvent) -> Result<(), BackendError> {
        self.0.lock().expect("lock").push(event);
        Ok(())
    }
}

fn adapter_desired(image: &str) -> Desired {
    let text = format!(
        "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {{name: mine}}\nspec: {{image: '{image}', command: mine}}\n"
    );
    let parsed = roundtable_specs::parse_file("a.yaml", "a.yaml", &text);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let object = &parsed.objects[0];
    Desired {
        key: object.key(),
        held: None,
        uid: "uid-mine".into(),
        generation: 1,
        execution_generation: None,
        execution_digest: None,
        rerun: false,
        metadata: object.metadata.clone(),
        spec: object.spec.clone(),
    }
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
    conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_} in {conditions:?}"))
}

// === reconcile logic ===

#[tokio::test(start_paused = true)]
async fn adapter_converges_then_plans_nothing_and_writes_nothing() {
    let digest = format!("sha256:{}", "b".repeat(64));
    let desired = adapter_desired(&format!("registry.example/agent@{digest}"));
    let reconciler = fake_reconciler();
    reconciler.status.insert(&desired);
    reconciler
        .images
        .present
        .lock()
        .expect("lock")
        .insert(format!("registry.example/agent@{digest}"), "sha256:1d".into());

    reconciler.reconcile(&desired.key).await.expect("reconcile");
    let conditions = reconciler.status.conditions(&desired.key).await.expect("conditions");
    assert_eq!(condition(&conditions, "Ready").status, ConditionStatus::True);
    assert_eq!(condition(&conditions, "Ready").reason, "ImageResolved");
    assert_eq!(condition(&conditions, "Degraded").status, ConditionStatus::False);
    let record = reconciler.status.object(&desired.key).await.expect("object").expect("record");
    assert_eq!(record.status_json.as_deref(), Some("{\"imageId\":\"sha256:1d\"}"));
    assert_eq!(record.observed_generation, Some(1));

    let observed = reconciler.observe(&desired).await.expect("observe");
    assert!(ObjectReconciler::<FakeStatus, FakeImages, FakeAudit, NoExecutions>::plan(&desired, &observed).is_empty());
    let writes = reconciler.status.writes.load(Ordering::SeqCst);
    reconciler.reconcile(&desired.key).await.expect("reconcile again");
    assert_eq!(reconciler.status.writes.load(Ordering::SeqCst), writes, "a converged object writes nothing");
}

#[tokio::test(start_paused = true)]
async fn adapter_reasons_for_missing_unpinned_and_disabled_images() {
    let reconciler = fake_reconciler();
    let missing = adapter_desired("agent:v1");
    reconciler.status.insert(&missing);
    let action = reconciler.reconcile(&missing.key).await.expect("reconcile");
    assert_eq!(
        action.requeue_after(),
        None,
        "a missing image is looked at again on the engine's image events, not on a timer"
    );
    let conditions = reconciler.status.conditions(&missing.key).await.expect("conditions");
    assert_eq!(
        (condition(&conditions, "Ready").status, condition(&conditions, "Ready").reason.as_str()),
        (ConditionStatus::False, "ImageMissing")
    );
    let events = reconciler.audit.0.lock().expect("lock").clone();
    assert!(events.iter().any(|e| e.reason.as_str() == "ImageMissing" && e.warning), "{events:?}");

    reconciler.images.present.lock().expect("lock").insert("agent:v1".into(), "sha256:aa".into());
    reconciler.reconcile(&missing.key).await.expect("reconcile");
    let conditions = reconciler.status.conditions(&missing.key).await.expect("conditions");
    assert_eq!(condition(&conditions, "Ready").status, ConditionStatus::True);
    assert_eq!(
        (condition(&conditions, "Degraded").status, condition(&conditions, "Degraded").reason.as_str()),
        (ConditionStatus::True, "ImageNotPinned")
    );

    let text = "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: off}\nspec: {image: 'agent:v1', enabled: false}\n";
    let parsed = roundtable_specs::parse_file("b.yaml", "b.yaml", text);
    let object = &parsed.objects[0];
    let disabled = Desired {
        key: object.key(),
        held: None,
        uid: "uid-off".into(),
        generation: 3,
        execution_generation: None,
        execution_digest: None,
        rerun: false,
        metadata: object.metadata.clone(),
        spec: object.spec.clone(),
    };
    reconciler.status.insert(&disabled);
    reconciler.reconcile(&disabled.key).await.expect("reconcile");
    let conditions = reconciler.status.conditions(&disabled.key).await.expect("conditions");
    assert_eq!(condition(&conditions, "Ready").reason, "Disabled");
    assert_eq!(condition(&conditions, "Ready").observed_generation, 3);
}

/// The `Ready` condition's status, reason and message.
async fn ready<I: ImageBackend>(
    reconciler: &ObjectReconciler<FakeStatus, I, FakeAudit, NoExecutions>,
    key: &ObjectKey,
) -> (ConditionStatus, String, String) {
    let conditions = reconciler.status.conditions(key).await.expect("conditions");
    let ready = condition(&conditions, "Ready");
    (ready.status, ready.reason.clone(), ready.message.clone())
}

#[tokio::test(start_paused = true)]
async fn a_missing_digest_reference_is_pulled_with_its_progress_shown_then_resolves_with_an_event() {
    let digest = format!("sha256:{}", "c".repeat(64));
    let reference = format!("127.0.0.1:5000/agents/codex@{digest}");
    let desired = adapter_desired(&reference);
    let images = FakeImages { pulls_here: true, ..FakeImages::default() };
    let reconciler =
        ObjectReconciler::with_executions(FakeStatus::default(), images, FakeAudit::default(), NoExecutions);
    reconciler.status.insert(&desired);

    let action = reconciler.reconcile(&desired.key).await.expect("reconcile");
    assert_eq!(
        *reconciler.images.started.lock().expect("lock"),
        std::slice::from_ref(&reference),
        "the reconcile starts the pull"
    );
    assert_eq!(action.requeue_after(), Some(std::time::Duration::from_secs(2)), "and looks again soon");
    assert_eq!(
        ready(&reconciler, &desired.key).await,
        (ConditionStatus::Unknown, "ImagePulling".into(), format!("pulling {reference} (starting)"))
    );

    let progress = PullProgress { current: 3 << 20, total: 18 << 20, layers_done: 0, layers: 2 };
    reconciler.images.pulls.lock().expect("lock").insert(reference.clone(), PullState::Running { progress });
    reconciler.reconcile(&desired.key).await.expect("reconcile");
    assert_eq!(ready(&reconciler, &desired.key).await.2, format!("pulling {reference} (3.0 of 18.0 MiB)"));
    assert_eq!(reconciler.images.started.lock().expect("lock").len(), 1, "a running pull is joined, not restarted");

    let pulled =
        PullState::Pulled { image_id: "sha256:1d".into(), bytes: 18 << 20, took: std::time::Duration::from_secs(4) };
    reconciler.images.pulls.lock().expect("lock").insert(reference.clone(), pulled);
    reconciler.images.present.lock().expect("lock").insert(reference.clone(), "sha256:1d".into());
    reconciler.reconcile(&desired.key).await.expect("reconcile");
    assert_eq!(ready(&reconciler, &desired.key).await.1, "ImageResolved");
    let events = reconciler.audit.0.lock().expect("lock").clone();
    let pulled: Vec<&AuditEvent> = events.iter().filter(|e| e.reason.as_str() == "ImagePulled").collect();
    assert_eq!(pulled.len(), 1, "{events:?}");
    assert_eq!(pulled[0].message, format!("pulled {reference} as sha256:1d (18.0 MiB in 4.0 s)"));
    assert!(!pulled[0].warning);
}

#[tokio::test(start_paused = true)]
async fn a_failed_pull_backs_off_and_a_digest_mismatch_is_named() {
    let digest = format!("sha256:{}", "c".repeat(64));
    let reference = format!("127.0.0.1:5000/agents/codex@{digest}");
    let desired = adapter_desired(&reference);
    let images = FakeImages { pulls_here: true, ..FakeImages::default() };
    let reconciler =
        ObjectReconciler::with_executions(FakeStatus::default(), images, FakeAudit::default(), NoExecutions);
    reconciler.status.insert(&desired);
    reconciler.reconcile(&desired.key).await.expect("reconcile");

    let failure =
        PullFailure { kind: FailureKind::DigestMismatch, message: "the engine holds image sha256:ee …".into() };
    let failed = PullState::Failed {
        failure,
        attempts: 1,
        retry_after: std::time::Duration::from_secs(10),
        retry_in: std::time::Duration::from_secs(9),
    };
    reconciler.images.pulls.lock().expect("lock").insert(reference.clone(), failed);
    let action = reconciler.reconcile(&desired.key).await.expect("reconcile");
    assert_eq!(
        action.requeue_after(),
        Some(std::time::Duration::from_secs(9)),
        "looked at again when the retry is due"
    );
    let (status, reason, message) = ready(&reconciler, &desired.key).await;
    assert_eq!((status, reason.as_str()), (ConditionStatus::False, "ImageDigestMismatch"));
    assert!(message.starts_with(&format!("pulling {reference} failed (attempt 1): the engine holds")), "{message}");
    let events = reconciler.audit.0.lock().expect("lock").clone();
    let failed: Vec<&AuditEvent> = events.iter().filter(|e| e.reason.as_str() == "ImagePullFailed").collect();
    assert_eq!(failed.len(), 1, "{events:?}");
    assert!(failed[0].warning && failed[0].message.contains("is not what its digest names"), "{:?}", failed[0]);
    assert_eq!(reconciler.images.started.lock().expect("lock").len(), 1, "not again before the backoff");

    // The backoff passed: the next attempt starts.
    let due = PullState::Failed {
        failure: PullFailure { kind: FailureKind::Refused, message: "401".into() },
        attempts: 1,
        retry_after: std::time::Duration::from_secs(10),
        retry_in: std::time::Duration::ZERO,
    };
    reconciler.images.pulls.lock().expect("lock").insert(reference.clone(), due);
    reconciler.reconcile(&desired.key).await.expect("reconcile");
    assert_eq!(reconciler.images.started.lock().expect("lock").len(), 2);
    assert_eq!(ready(&reconciler, &desired.key).await.2, format!("pulling {reference} (starting; attempt 2)"));
}

#[tokio::test(start_paused = true)]
async fn what_is_not_pulled_says_why_and_a_lying_engine_is_not_believed() {
    // A tag under requireDigest: not pulled, and the condition says how to pin.
    let images = FakeImages { pulls_here: true, tags_not_pullable: true, ..FakeImages::default() };
    let reconciler =
        ObjectReconciler::with_executions(FakeStatus::default(), images, FakeAudit::default(), NoExecutions);
    let tagged = adapter_desired("registry.example/agent:v1");
    reconciler.status.insert(&tagged);
    reconciler.reconcile(&tagged.key).await.expect("reconcile");
    let (status, reason, message) = ready(&reconciler, &tagged.key).await;
    assert_eq!((status, reason.as_str()), (ConditionStatus::False, "ImageMissing"));
    assert!(message.contains("requireDigest") && message.contains("pin it as repository@sha256:<digest>"), "{message}");
    assert!(reconciler.images.started.lock().expect("lock").is_empty());

    // An image ID is never pulled.
    let id = format!("sha256:{}", "d".repeat(64));
    let by_id = adapter_desired(&id);
    reconciler.status.insert(&by_id);
    reconciler.reconcile(&by_id.key).await.expect("reconcile");
    assert!(ready(&reconciler, &by_id.key).await.2.contains("no registry serves"));
    assert!(reconciler.images.started.lock().expect("lock").is_empty());

    // An engine that holds the digest reference as another image's.
    let digest = format!("sha256:{}", "c".repeat(64));
    let reference = format!("127.0.0.1:5000/agents/codex@{digest}");
    let lied = adapter_desired(&reference);
    reconciler.status.insert(&lied);
    reconciler.images.present.lock().expect("lock").insert(reference.clone(), "sha256:ee".into());
    let other = format!("127.0.0.1:5000/agents/codex@sha256:{}", "e".repeat(64));
    reconciler.images.listed_as.lock().expect("lock").insert(reference.clone(), vec![other.clone()]);
    reconciler.reconcile(&lied.key).await.expect("reconcile");
    let (status, reason, message) = ready(&reconciler, &lied.key).await;
    assert_eq!((status, reason.as_str()), (ConditionStatus::False, "ImageDigestMismatch"), "{message}");
    assert!(message.contains(&other) && message.contains("nothing runs in it"), "{message}");
    let record = reconciler.status.object(&lied.key).await.expect("object").expect("record");
    assert!(
        !record.status_json.unwrap_or_default().contains("sha256:ee"),
        "the image is not recorded as the Adapter's"
    );

    // Where nothing pulls (`status`, `plan`, the CLI's reconcile), the daemon is named.
    let reconciler = fake_reconciler();
    let missing = adapter_desired(&reference);
    reconciler.status.insert(&missing);
    reconciler.reconcile(&missing.key).await.expect("reconcile");
    let message = ready(&reconciler, &missing.key).await.2;
    assert!(message.ends_with("the daemon (`roundtable start`) pulls it"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn stalls_are_recorded_and_cleared_by_the_next_success() {
    use roundtable_controller::{ErrorOutcome, Failure, Stall};
    let reconciler = fake_reconciler();
    let desired = adapter_desired("agent:v1");
    reconciler.status.insert(&desired);
    let down = BackendError::Store(roundtable_store::Error::Unsupported("engine down".into()));
    let failure = Failure::Error(roundtable_reconcilers::reconcile::Error::Backend(down));
    // The condition names the reason the runner gave: here a permanent error, then a spent budget.
    let permanent = ErrorOutcome { attempt: 1, retry_in: None, stalled: Some(Stall::Permanent) };
    reconciler.on_failure(&desired.key, &failure, permanent).await;
    let conditions = reconciler.status.conditions(&desired.key).await.expect("conditions");
    assert_eq!(condition(&conditions, "Stalled").reason, "PermanentError");
    let spent = ErrorOutcome { attempt: 10, retry_in: None, stalled: Some(Stall::BudgetSpent { budget: 10 }) };
    reconciler.on_failure(&desired.key, &failure, spent).await;
    let conditions = reconciler.status.conditions(&desired.key).await.expect("conditions");
    assert_eq!(condition(&conditions, "Stalled").reason, "ErrorBudgetExhausted");
    assert_eq!(roundtable_reconcilers::conditions::health(&conditions).0, Health::Stalled);
    reconciler.reconcile(&desired.key).await.expect("reconcile");
    let conditions = reconciler.status.conditions(&desired.key).await.expect("conditions");
    assert_eq!(condition(&conditions, "Stalled").status, ConditionStatus::False);
}

/// Executions that start (into a list) once claimed: enough to see when an Assignment starts.
#[derive(Default)]
struct StartingExecutions(Mutex<Vec<String>>);

impl ExecutionBackend for StartingExecutions {
    fn active_run(&self, _: &str) -> Option<roundtable_reconcilers::ActiveRun> {
        None
    }
    fn controller_run(&self) -> Option<String> {
        Some("run".into())
    }
    async fn start(&self, request: ExecutionRequest) -> Result<(), BackendError> {
        self.0.lock().expect("lock").push(request.assignment);
        Ok(())
    }
    fn cancel(&self, _: &str) {}
    fn supersede(&self, _: &str, _: i64) {}
    async fn interrupt(&self, _: &str, _: Option<&roundtable_store::Lease>) -> Result<(), BackendError> {
        Ok(())
    }
    async fn claim(
        &self,
        assignment: &roundtable_store::Identity,
        _: Option<&roundtable_store::LeaseRecord>,
    ) -> Result<Option<roundtable_store::Lease>, BackendError> {
        Ok(Some(roundtable_store::Lease {
            assignment: assignment.name.clone(),
            assignment_uid: assignment.uid.clone(),
            holder: "run".into(),
            fence: 1,
        }))
    }
}

fn desired_of(uid: &str, generation: i64, text: &str) -> Desired {
    let parsed = roundtable_specs::parse_file("a.yaml", "a.yaml", text);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let object = &parsed.objects[0];
    Desired {
        key: object.key(),
        held: None,
        uid: uid.into(),
        generation,
        execution_generation: matches!(object.spec, roundtable_specs::Spec::Assignment(_)).then_some(1),
        execution_digest: None,
        rerun: false,
        metadata: object.metadata.clone(),
        spec: object.spec.clone(),
    }
}

/// Lets the other tasks run until `done`, without letting a paused clock move (a task that keeps
/// yielding never leaves the runtime idle, which is when a paused clock jumps to the next timer).
async fn settle(what: &str, done: impl Fn() -> bool) {
    for _ in 0..100_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{what} did not happen without the clock moving");
}

/// Waiting for its Adapter is not a timer: the Assignment asks for no requeue, and the Adapter's
/// own reconcile, once an edit enables it, wakes it. The clock is paused and never moves, so a
/// start that came from a timer could not happen.
#[tokio::test(start_paused = true)]
async fn an_assignment_waiting_for_a_disabled_adapter_starts_when_the_adapter_is_enabled() {
    use roundtable_controller::{Config, Controller, Trigger};
    let adapter = |enabled: bool| {
        format!(
            "{API}\nkind: Adapter\nmetadata: {{name: mine}}\nspec: {{image: 'agent:v1', command: mine, enabled: {enabled}}}\n"
        )
    };
    let disabled = desired_of("uid-mine", 1, &adapter(false));
    let assignment = desired_of(
        "uid-task",
        1,
        &format!(
            "{API}\nkind: Assignment\nmetadata: {{name: task}}\nspec:\n  adapter: mine\n  task: {{id: T, prompt: p}}\n  readablePaths: [a]\n"
        ),
    );
    let reconciler = std::sync::Arc::new(ObjectReconciler::with_executions(
        FakeStatus::default(),
        FakeImages::default(),
        FakeAudit::default(),
        StartingExecutions::default(),
    ));
    reconciler.images.present.lock().expect("lock").insert("agent:v1".into(), "sha256:aa".into());
    reconciler.status.insert(&disabled);
    reconciler.status.insert(&assignment);
    let (controller, handle) = Controller::new(reconciler.clone(), Config::default());
    reconciler.dependents.wake_with(handle.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(async move {
        let _ = stopped.await;
    }));
    let started_at = tokio::time::Instant::now();
    let ready_reason = |key: &ObjectKey| {
        let conditions = reconciler.status.conditions.lock().expect("lock").get(key).cloned().unwrap_or_default();
        conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.reason.clone())
    };
    handle.trigger(Trigger::Resync(assignment.key.clone()));
    handle.trigger(Trigger::Resync(disabled.key.clone()));
    settle("both reconciled", || {
        ready_reason(&assignment.key).as_deref() == Some("AdapterNotReady")
            && ready_reason(&disabled.key).as_deref() == Some("Disabled")
    })
    .await;
    let action = reconciler.reconcile(&assignment.key).await.expect("reconcile");
    assert_eq!(action.requeue_after(), None, "waiting for an adapter asks for no timer");
    assert!(reconciler.executions.0.lock().expect("lock").is_empty(), "nothing starts while the adapter is disabled");

    // The edit enables the adapter: the sync records generation 2 and queues the Adapter alone.
    reconciler.status.insert(&desired_of("uid-mine", 2, &adapter(true)));
    handle.trigger(Trigger::SpecChanged(disabled.key.clone()));
    settle("the assignment to start", || !reconciler.executions.0.lock().expect("lock").is_empty()).await;
    assert_eq!(*reconciler.executions.0.lock().expect("lock"), ["task"]);
    assert_eq!(tokio::time::Instant::now(), started_at, "no timer fired: the enabled adapter woke it");
    let _ = stop.send(());
    running.await.expect("the controller stops");
}

// === the spec source against real files and a real store ===

const API: &str = "apiVersion: roundtable.dev/v1alpha1";

fn write(dir: &std::path::Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write");
}

fn assignment(name: &str, prompt: &str, labels: &str) -> String {
    format!(
        "{API}\nkind: Assignment\nmetadata:\n  name: {name}\n{labels}spec:\n  adapter: mock\n  task: {{id: T, prompt: {prompt}}}\n  readablePaths: [README.md]\n"
    )
}

#[tokio::test]
async fn generations_follow_spec_and_run_field_changes() {
    let specs = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let store = Store::open(state.path()).await.expect("store");
    let audit = FakeAudit::default();
    let key = ObjectKey::new(Kind::Assignment, "fix");

    write(specs.path(), "a.yaml", &assignment("fix", "one", ""));
    let first = sync(&store, &audit, &scan(specs.path())).await.expect("sync");
    // The referenced built-in becomes an object too.
    assert_eq!(first.changed, [ObjectKey::new(Kind::Adapter, "mock"), key.clone()]);
    let record = store.object(&key).await.expect("read").expect("record");
    assert_eq!((record.generation, record.execution_generation), (1, Some(1)));

    // Unchanged: nothing moves.
    let again = sync(&store, &audit, &scan(specs.path())).await.expect("sync");
    assert!(again.changed.is_empty());

    // A label is not a run field.
    write(specs.path(), "a.yaml", &assignment("fix", "one", "  labels: {team: docs}\n"));
    sync(&store, &audit, &scan(specs.path())).await.expect("sync");
    let record = store.object(&key).await.expect("read").expect("record");
    assert_eq!((record.generation, record.execution_generation), (2, Some(1)));

    // The prompt is.
    write(specs.path(), "a.yaml", &assignment("fix", "two", "  labels: {team: docs}\n"));
    sync(&store, &audit, &scan(specs.path())).await.expect("sync");
    let record = store.object(&key).await.expect("read").expect("record");
    assert_eq!((record.generation, record.execution_generation), (3, Some(2)));
}

#[tokio::test]
async fn a_broken_file_keeps_its_objects_then_removal_cleans_up() {
    let specs = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let store = Store::open(state.path()).await.expect("store");
    let reconciler = ObjectReconciler::new(store.clone(), FakeImages::default(), store.clone());
    let key = ObjectKey::new(Kind::Adapter, "mine");
    let adapter = format!("{API}\nkind: Adapter\nmetadata: {{name: mine}}\nspec: {{image: 'agent:v1'}}\n");
    write(specs.path(), "a.yaml", &adapter);
    sync(&store, &store, &scan(specs.path())).await.expect("sync");
    reconciler.reconcile(&key).await.expect("reconcile");
    let spec_before = store.object(&key).await.expect("read").expect("record").spec_json;

    // The file stops parsing: the object stays at its last valid spec, and the error shows.
    write(specs.path(), "a.yaml", &format!("{adapter}  bogus: [\n"));
    let broken = scan(specs.path());
    let outcome = sync(&store, &store, &broken).await.expect("sync");
    assert_eq!(outcome.kept, std::slice::from_ref(&key));
    assert!(outcome.removed.is_empty());
    let record = store.object(&key).await.expect("read").expect("still there");
    assert_eq!((record.spec_json, record.deleted_at), (spec_before, None));
    let rows = status(&store, &broken, &[]).await.expect("status");
    let file_row = rows.iter().find(|r| r.kind == "File").expect("file row");
    assert_eq!(file_row.sync, SyncStatus::Error);
    let object_row = rows.iter().find(|r| r.kind == "Adapter").expect("object row");
    assert!(object_row.message.contains("keeping the last valid spec"), "{}", object_row.message);
    assert_eq!(exit_code(&rows), 1, "an error outranks drift");
    assert_eq!(store.file_errors().await.expect("errors").len(), 1);

    // Removed: a tombstone, a cleanup reconcile, then forgotten.
    std::fs::remove_file(specs.path().join("a.yaml")).expect("remove");
    let gone = scan(specs.path());
    let outcome = sync(&store, &store, &gone).await.expect("sync");
    assert_eq!(outcome.removed, std::slice::from_ref(&key));
    let planned = plan(&store, &reconciler, &gone).await.expect("plan");
    assert_eq!(planned.len(), 1);
    assert_eq!(planned[0].op, "-");
    reconciler.reconcile(&key).await.expect("cleanup");
    assert!(store.object(&key).await.expect("read").is_none());
    assert!(plan(&store, &reconciler, &gone).await.expect("plan").is_empty());
    assert!(store.file_errors().await.expect("errors").is_empty());
}

#[tokio::test]
async fn status_and_plan_report_drift_then_convergence() {
    let specs = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let store = Store::open(state.path()).await.expect("store");
    let images = FakeImages::default();
    let id = format!("sha256:{}", "c".repeat(64));
    images.present.lock().expect("lock").insert(id.clone(), id.clone());
    let reconciler = ObjectReconciler::new(store.clone(), images, store.clone());
    write(
        specs.path(),
        "a.yaml",
        &format!("{API}\nkind: Adapter\nmetadata: {{name: mine}}\nspec: {{image: '{id}'}}\n"),
    );
    let current = scan(specs.path());

    let rows = status(&store, &current, &[]).await.expect("status");
    assert_eq!((rows[0].sync, rows[0].generation), (SyncStatus::OutOfSync, Some(1)));
    assert_eq!(exit_code(&rows), 2);
    let planned = plan(&store, &reconciler, &current).await.expect("plan");
    assert_eq!(planned[0].op, "+");

    sync(&store, &store, &current).await.expect("sync");
    let key = ObjectKey::new(Kind::Adapter, "mine");
    reconciler.reconcile(&key).await.expect("reconcile");
    let rows = status(&store, &current, &[]).await.expect("status");
    assert_eq!(
        (rows[0].sync, rows[0].health, rows[0].observed_generation),
        (SyncStatus::Synced, Health::Healthy, Some(1))
    );
    assert_eq!(exit_code(&rows), 0);
    assert!(plan(&store, &reconciler, &current).await.expect("plan").is_empty());
}

#[test]
fn targeted_rescans_read_only_what_changed_and_stay_correct() {
    use roundtable_source::{ScanCache, scan_cached, scan_changed};
    let specs = tempfile::tempdir().expect("tempdir");
    let dir = specs.path();
    let project = Project::resolve(dir).expect("project");
    let adapter = |name: &str, timeout: &str| {
        format!("{API}\nkind: Adapter\nmetadata: {{name: {name}}}\nspec: {{command: x, timeout: {timeout}}}\n")
    };
    write(dir, "a.yaml", &adapter("a", "1m"));
    write(dir, "b.yaml", &adapter("b", "1m"));
    let mut cache = ScanCache::default();
    let names = |scan: &roundtable_source::Scan| {
        let mut names: Vec<String> = scan.objects.iter().map(|o| o.metadata.name.clone()).collect();
        names.sort();
        names
    };
    assert_eq!(names(&scan_cached(&project, &mut cache)), ["a", "b"]);

    // An edit: only a.yaml is named, and its new spec is read.
    write(dir, "a.yaml", &adapter("a", "2m"));
    let edited = scan_changed(&project, &mut cache, Some(&[dir.join("a.yaml")]));
    let a = edited.objects.iter().find(|o| o.metadata.name == "a").expect("a");
    assert!(format!("{:?}", a.spec).contains("120"), "{:?}", a.spec);
    assert_eq!(names(&edited), ["a", "b"]);

    // A new file and a removed one.
    write(dir, "c.yaml", &adapter("c", "1m"));
    std::fs::remove_file(dir.join("b.yaml")).expect("rm");
    let moved = scan_changed(&project, &mut cache, Some(&[dir.join("c.yaml"), dir.join("b.yaml")]));
    assert_eq!(names(&moved), ["a", "c"]);

    // A broken file stays reported on a targeted rescan of another file.
    write(dir, "d.yaml", "kind: [\n");
    assert_eq!(scan_changed(&project, &mut cache, Some(&[dir.join("d.yaml")])).broken_files.len(), 1);
    write(dir, "a.yaml", &adapter("a", "3m"));
    assert_eq!(scan_changed(&project, &mut cache, Some(&[dir.join("a.yaml")])).broken_files.len(), 1);

    // A folder event falls back to a full walk.
    std::fs::create_dir_all(dir.join("nested")).expect("mkdir");
    write(dir, "nested/e.yaml", &adapter("e", "1m"));
    let walked = scan_changed(&project, &mut cache, Some(&[dir.join("nested")]));
    assert_eq!(names(&walked), ["a", "c", "e"]);
}

/// A reconcile that changes nothing reads the store once: the record, and the adapter, lease,
/// sessions and proposal it says to read, in one round trip.
#[tokio::test]
async fn a_reconcile_that_changes_nothing_makes_one_store_round_trip() {
    let specs = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let store = Store::open(state.path()).await.expect("store");
    let reconciler = ObjectReconciler::new(store.clone(), FakeImages::default(), store.clone());
    let assignment = |name: &str, suspend: bool| {
        format!(
            "---\n{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: mine\n  task: {{id: T, prompt: p}}\n  readablePaths: [README.md]\n  suspend: {suspend}\n"
        )
    };
    let adapter = format!("{API}\nkind: Adapter\nmetadata: {{name: mine}}\nspec: {{command: mine, enabled: false}}\n");
    write(specs.path(), "a.yaml", &format!("{adapter}{}{}", assignment("waiting", false), assignment("held", true)));
    sync(&store, &store, &scan(specs.path())).await.expect("sync");
    let keys = [
        ObjectKey::new(Kind::Adapter, "mine"),
        ObjectKey::new(Kind::Assignment, "waiting"),
        ObjectKey::new(Kind::Assignment, "held"),
    ];
    for key in &keys {
        reconciler.reconcile(key).await.expect("the first reconcile");
    }
    for key in &keys {
        let before = store.round_trips();
        let action = reconciler.reconcile(key).await.expect("reconcile");
        assert_eq!(store.round_trips() - before, 1, "{key}: one round trip");
        assert_eq!(action.requeue_after(), None, "{key}: no timer");
    }
    let conditions = store.conditions(&keys[1]).await.expect("conditions");
    assert_eq!(condition(&conditions, "Ready").reason, "AdapterNotReady");
    let conditions = store.conditions(&keys[2]).await.expect("conditions");
    assert_eq!(condition(&conditions, "Ready").reason, "Suspended");
}

#[tokio::test]
async fn an_object_declared_twice_is_held_at_its_spec_and_neither_file_is_blamed() {
    let specs = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let store = Store::open(state.path()).await.expect("store");
    let reconciler = ObjectReconciler::new(store.clone(), FakeImages::default(), store.clone());
    let (fix, other) = (ObjectKey::new(Kind::Assignment, "fix"), ObjectKey::new(Kind::Assignment, "other"));
    let original = |other_prompt: &str| {
        format!("{}---\n{}", assignment("fix", "original", ""), assignment("other", other_prompt, ""))
    };
    write(specs.path(), "b.yaml", &original("x"));
    sync(&store, &store, &scan(specs.path())).await.expect("sync");
    let before = store.object(&fix).await.expect("read").expect("record");
    let starts = |planned: &[Change]| planned.iter().any(|c| matches!(c, Change::StartExecution { .. }));
    let planned_for = async |key: &ObjectKey| {
        let record = store.object(key).await.expect("read").expect("record");
        let desired = Desired::from_record(&record).expect("desired");
        let observed = reconciler.observe(&desired).await.expect("observe");
        ObjectReconciler::<Store, FakeImages, Store>::plan(&desired, &observed)
    };
    reconciler.reconcile(&ObjectKey::new(Kind::Adapter, "mock")).await.expect("adapter");
    assert!(starts(&planned_for(&fix).await), "a declared Assignment runs");

    // A copy in a file that sorts first: the error names both places, in the copy's file alone.
    write(specs.path(), "a.yaml", &assignment("fix", "copy", ""));
    // The original's file is edited too: its other objects still apply.
    write(specs.path(), "b.yaml", &original("y"));
    let contested = scan(specs.path());
    let errors: Vec<String> = contested.errors().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].contains("/b.yaml:4:3: ") && errors[0].contains("a.yaml:4: neither"), "{errors:#?}");
    assert!(contested.broken_files.is_empty(), "being declared twice breaks no file");
    let outcome = sync(&store, &store, &contested).await.expect("sync");
    assert_eq!(outcome.changed, std::slice::from_ref(&other), "the other object of the file moves");
    assert_eq!(outcome.holds_moved, std::slice::from_ref(&fix));
    assert!(outcome.removed.is_empty());
    let held = store.object(&fix).await.expect("read").expect("record");
    assert_eq!((&held.spec_json, held.generation), (&before.spec_json, before.generation), "neither copy applied");
    let why = held.held.clone().expect("held");
    assert!(why.contains("a.yaml:4") && why.contains("b.yaml:4"), "{why}");

    // Nothing runs for it; its Ready condition says why.
    assert!(!starts(&planned_for(&fix).await), "a held Assignment must not start");
    reconciler.reconcile(&fix).await.expect("reconcile");
    let conditions = store.conditions(&fix).await.expect("conditions");
    let ready = condition(&conditions, "Ready");
    assert_eq!((ready.status, ready.reason.as_str()), (ConditionStatus::False, "DeclaredTwice"));
    let rows = status(&store, &contested, &[]).await.expect("status");
    let row = rows.iter().find(|r| r.kind == "Assignment" && r.name == "fix").expect("row");
    assert!(row.message.contains("declared more than once"), "{}", row.message);
    let planned = plan(&store, &reconciler, &contested).await.expect("plan");
    let line = planned.iter().find(|p| p.object == "Assignment/fix").expect("plan line");
    assert_eq!(line.op, "!", "{planned:?}");

    // The copy gone: released at the original's spec, and it runs again.
    std::fs::remove_file(specs.path().join("a.yaml")).expect("remove");
    let outcome = sync(&store, &store, &scan(specs.path())).await.expect("sync");
    assert_eq!(outcome.holds_moved, std::slice::from_ref(&fix));
    let released = store.object(&fix).await.expect("read").expect("record");
    assert_eq!((released.held, released.spec_json), (None, before.spec_json));
    assert!(starts(&planned_for(&fix).await), "released, it runs");
}

#[tokio::test]
async fn a_new_object_declared_twice_is_not_recorded() {
    let specs = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let store = Store::open(state.path()).await.expect("store");
    write(specs.path(), "a.yaml", &assignment("fix", "one", ""));
    write(specs.path(), "b.yaml", &assignment("fix", "two", ""));
    let contested = scan(specs.path());
    sync(&store, &store, &contested).await.expect("sync");
    assert!(store.object(&ObjectKey::new(Kind::Assignment, "fix")).await.expect("read").is_none());
}
