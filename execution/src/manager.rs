//! The execution manager: owns running executions as background tasks, with its own limit and
//! queue. The Assignment reconciler only asks it to start or cancel and reads what it recorded;
//! a reconcile never waits for an agent. Shutdown waits for them (`shutdown`). One session's
//! phases are in `run`; the pure decisions (how an outcome ends a session, proposal flags) in
//! `outcome`. It is the reconcilers' execution backend (`backend`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roundtable_agents::capability::Authority;
use roundtable_controller::{Handle, Trigger};
use roundtable_session_runtime::SessionRuntime;
use roundtable_specs::session::{SessionCause, SessionPhase};
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{Identity, Lease, LeaseRecord, SessionRecord, Store};
use tokio::sync::{Semaphore, watch};
use tokio_util::task::TaskTracker;

use roundtable_reconcilers::{ActiveRun, ExecutionRequest};
use roundtable_source::Project;

use crate::egress::EgressOptions;
use crate::folder::ExecutionFolder;
use crate::live;
use crate::outcome::Stop;

/// How executions run.
#[derive(Debug, Clone)]
pub struct ExecutionConfig {
    pub max_executions: usize,
    /// The project: its root confines sources, its id labels what runs, its state directory
    /// keeps the proposals' patches.
    pub project: Project,
    /// Per-project folder for execution folders (never inside `.roundtable/`).
    pub execution_root: PathBuf,
    /// The controller's own static binary, mounted into every container.
    pub binary: PathBuf,
    pub controller_run: String,
    /// Where session socket directories are created (`/run/roundtable` as root).
    pub socket_root: PathBuf,
    /// Values for `credentialEnv` names (from the environment or `--secrets-file`).
    pub secrets: HashMap<String, String>,
    /// Options every session's egress gateway shares.
    pub egress: EgressOptions,
    /// The audit chain's key: session ends, capability issue and revocation, and proposals are
    /// appended to the chain. `None` records no audited entries (tests of other behaviour).
    pub audit_key: Option<Arc<roundtable_store::audit::AuditKey>>,
    /// Whether the spawn-path gates run (over the project's `contracts/` and `admission/`);
    /// `false` runs none (tests of other behaviour).
    pub gates: bool,
    /// How long this controller's registration and execution leases live without a heartbeat;
    /// another controller sharing the store takes an execution over once it has passed.
    pub lease_ttl: Duration,
}

pub(crate) struct Active {
    pub(crate) session: String,
    pub(crate) adapter: String,
    pub(crate) uid: String,
    pub(crate) generation: i64,
    pub(crate) lease: Option<Lease>,
    pub(crate) cancel: watch::Sender<bool>,
}

/// Starts, cancels and supervises executions.
#[derive(Clone)]
pub struct ExecutionManager {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: Store,
    /// The MCP capabilities of running sessions; in memory only.
    pub(crate) authority: Arc<Authority>,
    pub(crate) runtime: Arc<dyn SessionRuntime>,
    pub(crate) config: ExecutionConfig,
    /// The spawn-path gates, when the config runs them.
    pub(crate) admitter: Option<roundtable_admission::Admitter>,
    pub(crate) slots: Semaphore,
    pub(crate) active: Mutex<HashMap<String, Active>>,
    pub(crate) wake: Mutex<Option<Handle<ObjectKey>>>,
    /// Every execution task, so shutdown can wait for them.
    pub(crate) tasks: TaskTracker,
    /// Why each session the manager stopped was stopped, by session ID: it decides how the
    /// session ends (`Cancelled`, `Interrupted`, `Superseded`).
    pub(crate) stops: Mutex<HashMap<String, Stop>>,
    /// Running agents' output as it comes, for the console's live tail.
    pub(crate) live: live::LiveLogs,
    /// Set while the controller cannot renew its leases: no execution starts.
    pub(crate) fenced: std::sync::atomic::AtomicBool,
}

/// Why the manager refused to start an execution.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] roundtable_store::Error),
    #[error("the controller is shutting down; no new execution starts")]
    ShuttingDown,
    #[error("the controller cannot renew its leases (cut off from the store); no new execution starts until it can")]
    Fenced,
    #[error(transparent)]
    Refused(roundtable_store::StartRefused),
}

/// What happened to executions at shutdown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownSummary {
    /// Executions that finished on their own within the grace period.
    pub finished: usize,
    /// Executions cancelled at the end of the grace period (recorded `Interrupted`, re-run on the
    /// next start).
    pub interrupted: usize,
}

/// Milliseconds since `started`.
pub(crate) fn millis(started: std::time::Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn now() -> String {
    roundtable_store::now()
}

pub fn new_session_id() -> String {
    let mut bytes = [0u8; 6];
    for byte in &mut bytes {
        *byte = fastrand::u8(..);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Inner {
    /// Stops the active execution of `assignment` for `why` (only when it is `session`'s, if
    /// one is named), which decides how its session ends.
    pub(crate) fn stop(&self, assignment: &str, session: Option<&str>, why: Stop) {
        let active = self.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match active.get(assignment).filter(|run| session.is_none_or(|session| run.session == session)) {
            Some(run) => {
                self.stops.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(run.session.clone(), why);
                let delivered = run.cancel.send(true).is_ok();
                tracing::info!(assignment, session = %run.session, ?why, delivered, "stopping the execution");
            }
            None => tracing::info!(assignment, ?why, "no execution to stop"),
        }
    }

    /// Queues a reconcile of `key` (once the daemon's handle is known): what the object's
    /// conditions say moved without an event the controller sees.
    pub(crate) fn wake(&self, key: ObjectKey) {
        if let Some(handle) = self.wake.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
            handle.trigger(Trigger::Requested(key));
        }
    }
}

impl ExecutionManager {
    /// MCP capabilities that would be accepted now (one per running session with an endpoint).
    pub fn live_capabilities(&self) -> usize {
        self.inner.authority.live()
    }

    /// `session`'s output so far, while it runs on this controller.
    pub fn live_log(&self, session: &str) -> Option<Arc<live::LiveLog>> {
        self.inner.live.get(session)
    }

    pub fn new(store: Store, runtime: Arc<dyn SessionRuntime>, config: ExecutionConfig) -> Self {
        let slots = Semaphore::new(config.max_executions.max(1));
        let admitter = config.gates.then(|| {
            roundtable_admission::Admitter::new(
                runtime.clone(),
                store.clone(),
                config.project.spec_dir.clone(),
                config.binary.clone(),
                config.project.id.clone(),
                config.audit_key.clone(),
            )
            .with_controller_run(config.controller_run.clone())
        });
        Self {
            inner: Arc::new(Inner {
                store,
                authority: Arc::new(Authority::new()),
                runtime,
                config,
                admitter,
                slots,
                active: Mutex::new(HashMap::new()),
                wake: Mutex::new(None),
                tasks: TaskTracker::new(),
                stops: Mutex::new(HashMap::new()),
                live: live::LiveLogs::default(),
                fenced: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// Where finished executions report, so their Assignment is reconciled at once.
    pub fn wake_with(&self, handle: Handle<ObjectKey>) {
        *self.inner.wake.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle);
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn config(&self) -> &ExecutionConfig {
        &self.inner.config
    }

    /// The spawn-path gates this manager runs, if any.
    pub fn admitter(&self) -> Option<&roundtable_admission::Admitter> {
        self.inner.admitter.as_ref()
    }

    /// Marks a session of an earlier controller run `Interrupted`, releases its claims and removes
    /// what it left (on this engine; another host's engine is its own controller's to reap). With `lease`, the
    /// record is written only while the lease holds.
    pub async fn interrupt(&self, session: &str, lease: Option<&Lease>) -> Result<(), roundtable_store::Error> {
        let Some(mut record) = self.inner.store.session(session).await? else { return Ok(()) };
        if let Err(error) = self.inner.runtime.remove_session(&self.inner.config.project.id, &record.id).await {
            // What is left carries the ownership labels; `status` lists it and `prune` removes it.
            tracing::warn!(session, error = %roundtable_telemetry::error_chain(&error), "cannot remove what the session left");
        }
        // Only a folder under this controller's own execution root: on a shared store the
        // session may have run on another host, whose paths mean nothing (or something else) here.
        if let Some(dir) = record.exec_dir.as_deref().map(std::path::Path::new)
            && dir.starts_with(&self.inner.config.execution_root)
        {
            let _ = std::fs::remove_dir_all(dir);
        }
        // Its socket directory (and a gateway socket in it) on the runtime tmpfs.
        if let Ok(dir) = roundtable_workspace::sockets::plan(&self.inner.config.socket_root, &record.id) {
            let _ = std::fs::remove_dir_all(dir);
        }
        record.phase = SessionPhase::Interrupted;
        record.cause = Some(SessionCause::ControllerRunEnded);
        record.message = format!("the controller run {} ended before this session finished", record.controller_run);
        record.finished_at = Some(now());
        match lease {
            Some(lease) => {
                if let Err(fenced) = self.inner.store.save_session_fenced(&record, lease).await? {
                    tracing::warn!(session, %fenced, "not recording the interruption");
                    return Ok(());
                }
            }
            None => self.inner.store.save_session(&record).await?,
        }
        self.inner.release_claims_of(&record.id).await;
        self.inner.complete_drain(&record.adapter).await;
        Ok(())
    }

    /// Cancels every queued or running execution of `adapter` in this process (an operator's
    /// forced disable); how many were asked to stop.
    pub fn cancel_sessions_of(&self, adapter: &str) -> usize {
        let assignments: Vec<String> = {
            let active = self.inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            active.iter().filter(|(_, run)| run.adapter == adapter).map(|(assignment, _)| assignment.clone()).collect()
        };
        for assignment in &assignments {
            self.stop(assignment, Stop::Cancelled);
        }
        assignments.len()
    }

    /// Whether an execution of `assignment` is queued or running in this process.
    pub fn is_active(&self, assignment: &str) -> bool {
        self.active_run(assignment).is_some()
    }

    /// The queued or running execution under the name `assignment` (of whichever object had the
    /// name when it started), if any.
    pub fn active_run(&self, assignment: &str) -> Option<ActiveRun> {
        let active = self.inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        active.get(assignment).map(|run| ActiveRun { uid: run.uid.clone(), generation: run.generation })
    }

    /// Cancels `assignment`'s active execution because execution generation `by` replaces it;
    /// it ends `Cancelled` with cause `Superseded`.
    pub fn supersede(&self, assignment: &str, by: i64) {
        self.stop(assignment, Stop::Superseded { by });
    }

    /// Cancels the active execution of `assignment`, if any.
    pub fn cancel(&self, assignment: &str) {
        self.stop(assignment, Stop::Cancelled);
    }

    /// Stops the active execution of `assignment` (if any) for `why`, which decides how its
    /// session ends.
    fn stop(&self, assignment: &str, why: Stop) {
        self.inner.stop(assignment, None, why);
    }

    /// Stops intake, lets running executions finish for up to `grace` (less if `hurry`
    /// resolves first), then cancels the rest the way `suspend` does (pause, kill, remove the
    /// container, volumes and socket directory) and records them `Interrupted`, so the next start
    /// re-runs them. Returns once every execution task has recorded its session.
    pub async fn shutdown(&self, grace: Duration, hurry: impl std::future::Future<Output = ()>) -> ShutdownSummary {
        let inner = &self.inner;
        inner.tasks.close();
        let running = self.active_count();
        if running == 0 {
            inner.tasks.wait().await;
            return ShutdownSummary::default();
        }
        tracing::info!(running, grace_secs = grace.as_secs(), "waiting for running executions to finish");
        let finished_in_time = tokio::select! {
            () = inner.tasks.wait() => true,
            () = tokio::time::sleep(grace) => false,
            () = hurry => false,
        };
        if finished_in_time {
            return ShutdownSummary { finished: running, interrupted: 0 };
        }
        // Cancelled for shutdown, they end `Interrupted`, not `Cancelled`.
        let cancelled: Vec<(String, String)> = {
            let active = inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            active.iter().map(|(assignment, run)| (assignment.clone(), run.session.clone())).collect()
        };
        for (assignment, _) in &cancelled {
            self.stop(assignment, Stop::Shutdown);
        }
        for (assignment, session) in &cancelled {
            tracing::warn!(%assignment, %session, "shutdown: cancelling the execution; it is re-run on the next start");
        }
        inner.tasks.wait().await;
        ShutdownSummary { finished: running.saturating_sub(cancelled.len()), interrupted: cancelled.len() }
    }

    /// This controller's id in the store (its run).
    pub fn controller_id(&self) -> &str {
        &self.inner.config.controller_run
    }

    /// Claims `assignment`'s execution if the lease is where `seen` left it (see
    /// [`Store::claim_execution`]); `None` when another controller holds it or got there first.
    pub async fn claim(
        &self,
        assignment: &Identity,
        seen: Option<&LeaseRecord>,
    ) -> Result<Option<Lease>, roundtable_store::Error> {
        let config = &self.inner.config;
        self.inner.store.claim_execution(assignment, &config.controller_run, seen, config.lease_ttl).await
    }

    /// Stops the executions whose leases this controller no longer holds (another took them over
    /// while this one was stalled or cut off); `held` is what the store says it holds. Their
    /// records are refused by the fence anyway; this frees the slot and the container.
    pub fn stop_lost(&self, held: &[(String, i64)]) -> usize {
        let lost: Vec<String> = {
            let active = self.inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            active
                .iter()
                .filter_map(|(assignment, run)| {
                    let lease = run.lease.as_ref()?;
                    let kept = held.iter().any(|(uid, fence)| *uid == run.uid && *fence == lease.fence);
                    (!kept).then(|| assignment.clone())
                })
                .collect()
        };
        for assignment in &lost {
            tracing::warn!(%assignment, "the execution's lease was taken over by another controller: stopping it here");
            self.stop(assignment, Stop::Cancelled);
        }
        lost.len()
    }

    /// Queues a reconcile of each Assignment named (once the daemon's handle is known): the
    /// lease watch's way of saying another controller's hold on them ended.
    pub fn requeue(&self, assignments: impl IntoIterator<Item = String>) {
        for assignment in assignments {
            self.inner.wake(ObjectKey::new(Kind::Assignment, assignment));
        }
    }

    fn active_count(&self) -> usize {
        self.inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Stops every execution and starts none until [`ExecutionManager::unfence`]: the
    /// controller could not renew its leases, so another may take them over. The Assignments
    /// whose executions were stopped.
    pub fn fence(&self) -> Vec<String> {
        self.inner.fenced.store(true, std::sync::atomic::Ordering::SeqCst);
        let stopped: Vec<String> =
            self.inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect();
        for assignment in &stopped {
            self.stop(assignment, Stop::Fenced);
        }
        stopped
    }

    /// Lets executions start again: the leases were renewed.
    pub fn unfence(&self) {
        self.inner.fenced.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Records a `Queued` session and runs it in the background when a slot is free.
    pub async fn start(&self, request: ExecutionRequest) -> Result<SessionRecord, StartError> {
        if self.inner.tasks.is_closed() {
            return Err(StartError::ShuttingDown);
        }
        if self.inner.fenced.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StartError::Fenced);
        }
        let session = SessionRecord {
            id: new_session_id(),
            assignment: request.assignment.clone(),
            assignment_uid: Some(request.assignment_uid.clone()),
            execution_digest: request.execution_digest.clone(),
            execution_generation: request.execution_generation,
            attempt: request.attempt,
            controller_run: self.inner.config.controller_run.clone(),
            adapter: request.adapter.name.clone(),
            image: request.adapter.image.as_ref().map(ToString::to_string),
            phase: SessionPhase::Queued,
            message: "waiting for an execution slot".into(),
            created_at: now(),
            ..SessionRecord::default()
        };
        // One transaction with the operator's override: a disable either sees this session and
        // drains, or refuses it here.
        self.inner.store.start_session(&session, request.lease.as_ref()).await.map_err(|refused| match refused {
            roundtable_store::StartRefused::Store(error) => StartError::Store(error),
            refused => StartError::Refused(refused),
        })?;
        let (cancel, cancelled) = watch::channel(false);
        self.inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(
            request.assignment.clone(),
            Active {
                session: session.id.clone(),
                adapter: request.adapter.name.clone(),
                uid: request.assignment_uid.clone(),
                generation: request.execution_generation,
                lease: request.lease.clone(),
                cancel,
            },
        );
        let inner = self.inner.clone();
        let queued = session.clone();
        // Every line the session's work logs carries who it is for (JSON logs: `span`, `spans`).
        let span = tracing::info_span!(
            "session",
            session = %session.id,
            assignment = %request.assignment,
            adapter = %request.adapter.name,
            generation = request.execution_generation,
        );
        self.inner.tasks.spawn(tracing::Instrument::instrument(async move {
            let finished = match inner.slots.acquire().await {
                Ok(_permit) => inner.execute(queued, request.clone(), cancelled).await,
                Err(_) => queued,
            };
            // Recorded as ended, whatever the outcome: what it claimed is free for others now.
            inner.release_claims_of(&finished.id).await;
            // Keep the brief and the logs; the trees and scratch space are no longer needed.
            if let Some(dir) = &finished.exec_dir {
                ExecutionFolder::at(dir).remove_working_trees();
            }
            // Recorded: let the lease go, so another controller may run the next attempt.
            if let Some(lease) = &request.lease {
                match inner.store.release_execution(lease).await {
                    Ok(true) => {}
                    Ok(false) => tracing::warn!(assignment = %lease.assignment, fence = lease.fence, "the execution's lease had already moved on"),
                    Err(error) => tracing::warn!(assignment = %lease.assignment, %error, "cannot release the execution's lease; it expires"),
                }
            }
            {
                let mut active = inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if active.get(&request.assignment).is_some_and(|a| a.session == finished.id) {
                    active.remove(&request.assignment);
                }
            }
            inner.complete_drain(&finished.adapter).await;
            inner.wake(ObjectKey::new(Kind::Assignment, request.assignment));
        }, span));
        Ok(session)
    }
}

impl Inner {
    /// Releases every claim `session` holds, once it is recorded as ended. A failed release is
    /// logged, not retried: a claim of an ended session holds nothing anyway (`live_claims`).
    async fn release_claims_of(&self, session: &str) {
        match self.store.release_claims(session, &[]).await {
            Ok(0) => {}
            Ok(released) => tracing::info!(session, released, "released the claims of an ended session"),
            Err(error) => tracing::warn!(session, %error, "cannot release the claims of an ended session"),
        }
    }

    /// Turns an operator's `draining` of `adapter` into `disabled` once its last session has
    /// ended, with an event, and has the Adapter reconciled so its status says so.
    async fn complete_drain(&self, adapter: &str) {
        let was_draining = matches!(
            self.store.agent_override(adapter).await,
            Ok(Some(o)) if o.state == roundtable_store::OverrideState::Draining
        );
        if !was_draining {
            return;
        }
        match self.store.complete_drain(adapter).await {
            Ok(Some(now)) if now.state == roundtable_store::OverrideState::Disabled => {
                let key = ObjectKey::new(Kind::Adapter, adapter);
                let message = "the adapter's last active session ended: disabled (drain complete)";
                let event = roundtable_store::NewEvent {
                    object: &key,
                    severity: roundtable_store::Severity::Normal,
                    reason: roundtable_specs::events::EventReason::DrainCompleted.into(),
                    message,
                    record: None,
                };
                if let Err(error) = self.store.append_event(&event).await {
                    tracing::warn!(adapter, %error, "cannot record the end of a drain");
                }
                tracing::info!(adapter, "drain complete: the adapter is disabled");
                self.wake(key);
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(adapter, %error, "cannot complete the drain"),
        }
    }
}
