//! The backends reconcilers drive: every external side effect goes through one of these traits,
//! so fakes can test reconcile logic without Docker or SQLite.

use std::future::Future;

use roundtable_admission::{Admitter, GateOutcome};
use roundtable_specs::ObjectKey;
use roundtable_specs::adapter::{Capability, ResolvedAdapter};
use roundtable_specs::events::Reason;
use roundtable_specs::output::Condition;
use roundtable_store::{
    AdapterState, ExecutionState, Further, Identity, Lease, LeaseRecord, NewEvent, ObjectRecord, Observation,
    ProposalRecord, SessionRecord, Severity, Store,
};

use crate::pull::{PullState, Pulls};
use crate::request::{ActiveRun, ExecutionRequest};

/// What can go wrong in a backend.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Store(#[from] roundtable_store::Error),
    #[error(transparent)]
    Runtime(#[from] roundtable_session_runtime::RuntimeError),
    /// The execution backend refused to start a run (shutting down, fenced, already running);
    /// its own error type says which, and is kept as the source.
    #[error("{0}")]
    Start(Box<dyn std::error::Error + Send + Sync>),
    /// Only the daemon (`roundtable start`) runs executions and pulls images; `status`, `plan`
    /// and `reconcile` without a daemon observe them.
    #[error("executions and image pulls run only in the daemon (`roundtable start`)")]
    NotTheDaemon,
    #[error("a background task failed")]
    Task(#[from] tokio::task::JoinError),
}

/// One write a reconciler makes to the state store.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Set a condition; its `lastTransitionTime` is decided by the store.
    SetCondition(Condition),
    /// Record kind-specific observed status, as JSON.
    RecordStatus(Option<String>),
    ObserveGeneration(i64),
    /// The object is gone and cleaned up: forget it.
    Forget,
    /// Start pulling an Adapter's image in the background, or join the pull of it that runs.
    PullImage {
        reference: String,
    },
    /// Start attempt `attempt` of the current execution generation (Assignments).
    StartExecution {
        attempt: i64,
    },
    /// Cancel the running execution (suspend, or the Assignment was removed).
    CancelExecution,
    /// A session of an earlier controller run that never finished.
    InterruptSession(String),
    /// Cancel the running execution of an older execution generation: the run fields changed.
    SupersedeExecution {
        by: i64,
    },
}

/// The state store as reconcilers see it: objects and conditions, and what the store records of
/// executions (leases, sessions, proposals), which the Assignment reconciler reads.
pub trait StatusBackend: Send + Sync + 'static {
    fn object(&self, key: &ObjectKey) -> impl Future<Output = Result<Option<ObjectRecord>, BackendError>> + Send;
    fn conditions(&self, key: &ObjectKey) -> impl Future<Output = Result<Vec<Condition>, BackendError>> + Send;
    fn apply(&self, key: &ObjectKey, change: &Change) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// An operator's runtime override of adapter `name`'s `enabled` (made through the API).
    fn agent_override(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<roundtable_store::AgentOverride>, BackendError>> + Send {
        let _ = name;
        async { Ok(None) }
    }

    /// The sessions of the Assignment object with uid `assignment_uid`, newest first.
    fn sessions(&self, assignment_uid: &str) -> impl Future<Output = Result<Vec<SessionRecord>, BackendError>> + Send {
        let _ = assignment_uid;
        async { Ok(Vec::new()) }
    }

    /// The proposal of an Assignment's execution generation (see `Store::proposal_for`).
    fn proposal(
        &self,
        assignment_uid: &str,
        execution_generation: i64,
    ) -> impl Future<Output = Result<Option<ProposalRecord>, BackendError>> + Send {
        let _ = (assignment_uid, execution_generation);
        async { Ok(None) }
    }

    /// The lease on the Assignment's execution: which controller runs it. Read before its
    /// sessions, so a claim made on what was read cannot miss a session recorded meanwhile.
    fn lease(&self, assignment_uid: &str) -> impl Future<Output = Result<Option<LeaseRecord>, BackendError>> + Send {
        let _ = assignment_uid;
        async { Ok(None) }
    }

    /// Everything one reconcile reads of the store: the object `key`, then what `then` asks for
    /// once it has seen the object's record (see `Store::observe_with`), with `then`'s answer.
    /// The state store answers in one round trip; this default asks the methods above one by one
    /// (test fakes).
    fn observe_with<T: Send>(
        &self,
        key: &ObjectKey,
        then: impl FnOnce(Option<&ObjectRecord>) -> (Further, T) + Send,
    ) -> impl Future<Output = Result<(Observation, T), BackendError>> + Send {
        async move {
            let record = self.object(key).await?;
            let (further, answer) = then(record.as_ref());
            let conditions = self.conditions(key).await?;
            let execution = match &further.execution {
                Some((uid, generation)) => Some(ExecutionState {
                    lease: self.lease(uid).await?,
                    sessions: self.sessions(uid).await?,
                    proposal: self.proposal(uid, *generation).await?,
                }),
                None => None,
            };
            let adapter = match further.adapter.as_deref() {
                Some(name) => {
                    let adapter_key = ObjectKey::new(roundtable_specs::Kind::Adapter, name);
                    Some(AdapterState {
                        record: self.object(&adapter_key).await?,
                        conditions: self.conditions(&adapter_key).await?,
                        agent_override: self.agent_override(name).await?,
                    })
                }
                None => None,
            };
            Ok((Observation { record, conditions, adapter, execution }, answer))
        }
    }
}

/// What the engine knows about an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The full image ID, `sha256:…`.
    pub id: String,
    /// The `repository@sha256:…` names the engine lists for it: what a digest reference is
    /// checked against (`roundtable_session_runtime::images::holds_digest`).
    pub repo_digests: Vec<String>,
}

/// The container engine's images, pulls of them, and what admission finds in them.
pub trait ImageBackend: Send + Sync + 'static {
    /// `None` when the engine does not have the image; never pulls (a pull is [`pull`]'s).
    ///
    /// [`pull`]: ImageBackend::pull
    fn inspect_image(&self, reference: &str) -> impl Future<Output = Result<Option<ImageInfo>, BackendError>> + Send;

    /// Whether this backend pulls a missing image: the daemon's does; `status`, `plan` and the
    /// CLI's in-process `reconcile` leave it to the daemon (this default).
    fn pulls(&self) -> bool {
        false
    }

    /// Whether an image named by a tag may be pulled: the AdmissionPolicy does not set
    /// `requireDigest` (this default: no policy).
    fn tags_pullable(&self) -> impl Future<Output = bool> + Send {
        async { true }
    }

    /// Where this process's pull of `reference` stands, if it ever started one.
    fn pull_state(&self, reference: &str) -> Option<PullState> {
        let _ = reference;
        None
    }

    /// Starts pulling `reference` in the background, or joins the pull of it that runs, and
    /// returns at once; the Adapter is reconciled again when it ends.
    fn pull(&self, reference: &str) -> Result<(), BackendError> {
        let _ = reference;
        Err(BackendError::NotTheDaemon)
    }

    /// The spawn-path gates for `adapter` and an Assignment's `requires`, decided without
    /// recording anything; `None` where admission is not evaluated (fakes, tests of other
    /// behaviour).
    fn gates(
        &self,
        adapter: &ResolvedAdapter,
        requires: &[Capability],
    ) -> impl Future<Output = Result<Option<GateOutcome>, BackendError>> + Send {
        let _ = (adapter, requires);
        async { Ok(None) }
    }

    /// Anchors gate decisions about `subject` in the audit chain (a refusal the reconciler acted
    /// on); nothing where admission is not evaluated.
    fn record_gates(&self, subject: &ObjectKey, outcome: &GateOutcome) -> impl Future<Output = ()> + Send {
        let _ = (subject, outcome);
        async {}
    }
}

/// An event or audited record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    pub object: ObjectKey,
    pub warning: bool,
    /// A typed event reason (`EventReason`), or the reason of the `Ready` condition whose
    /// transition this event records.
    pub reason: Reason,
    pub message: String,
}

impl AuditEvent {
    /// The event as a row of the events table.
    pub fn row(&self) -> NewEvent<'_> {
        NewEvent {
            object: &self.object,
            severity: if self.warning { Severity::Warning } else { Severity::Normal },
            reason: self.reason.clone(),
            message: &self.message,
            record: None,
        }
    }
}

/// Every event and audited record goes through this one trait; the HMAC chain will replace
/// the implementation, nothing else.
pub trait AuditSink: Send + Sync + 'static {
    fn record(&self, event: AuditEvent) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Records several events; sinks that can batch them override this.
    fn record_all(&self, events: Vec<AuditEvent>) -> impl Future<Output = Result<(), BackendError>> + Send {
        async move {
            for event in events {
                self.record(event).await?;
            }
            Ok(())
        }
    }
}

/// Executions as the Assignment reconciler sees them: what runs in this process, and the
/// commands that start, stop and claim runs. What the store recorded of them is read through
/// [`StatusBackend`].
pub trait ExecutionBackend: Send + Sync + 'static {
    /// The execution this process runs (or queues) under the Assignment's name, if any: which
    /// object (uid) and execution generation it is of.
    fn active_run(&self, assignment: &str) -> Option<ActiveRun>;
    /// The current controller run, when this process can run executions.
    fn controller_run(&self) -> Option<String>;
    /// Why executions cannot be recorded now (the store's disk is full), if so.
    fn store_full(&self) -> Option<String> {
        None
    }
    fn start(&self, request: ExecutionRequest) -> impl Future<Output = Result<(), BackendError>> + Send;
    fn cancel(&self, assignment: &str);
    /// Cancels the active execution because execution generation `by` replaces it.
    fn supersede(&self, assignment: &str, by: i64);
    /// Marks an orphaned session `Interrupted`, under `lease` when there is one.
    fn interrupt(&self, session: &str, lease: Option<&Lease>) -> impl Future<Output = Result<(), BackendError>> + Send;
    /// Claims the Assignment's execution for this controller if the lease is still where `seen`
    /// left it; `None` when another controller holds it or got there first.
    fn claim(
        &self,
        assignment: &Identity,
        seen: Option<&LeaseRecord>,
    ) -> impl Future<Output = Result<Option<Lease>, BackendError>> + Send;
}

/// Executions for `status` and `plan`: none runs in this process and none is started; what the
/// store recorded of them is read through the [`StatusBackend`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordedExecutions;

impl ExecutionBackend for RecordedExecutions {
    fn active_run(&self, _assignment: &str) -> Option<ActiveRun> {
        None
    }

    fn controller_run(&self) -> Option<String> {
        None
    }

    async fn start(&self, _request: ExecutionRequest) -> Result<(), BackendError> {
        Err(BackendError::NotTheDaemon)
    }

    fn cancel(&self, _assignment: &str) {}

    fn supersede(&self, _assignment: &str, _by: i64) {}

    async fn interrupt(&self, _session: &str, _lease: Option<&Lease>) -> Result<(), BackendError> {
        Err(BackendError::NotTheDaemon)
    }

    async fn claim(&self, _assignment: &Identity, _seen: Option<&LeaseRecord>) -> Result<Option<Lease>, BackendError> {
        Err(BackendError::NotTheDaemon)
    }
}

// === impl for the real state store ===

impl StatusBackend for Store {
    async fn object(&self, key: &ObjectKey) -> Result<Option<ObjectRecord>, BackendError> {
        Ok(Store::object(self, key).await?)
    }

    async fn conditions(&self, key: &ObjectKey) -> Result<Vec<Condition>, BackendError> {
        Ok(Store::conditions(self, key).await?)
    }

    async fn apply(&self, key: &ObjectKey, change: &Change) -> Result<(), BackendError> {
        match change {
            Change::SetCondition(condition) => {
                self.set_condition(key, condition).await?;
            }
            Change::RecordStatus(status) => self.set_status_json(key, status.as_deref()).await?,
            Change::ObserveGeneration(generation) => self.set_observed_generation(key, *generation).await?,
            Change::Forget => self.forget(key).await?,
            // Executions and pulls are not the store's to start; the object reconciler routes
            // these.
            Change::PullImage { .. }
            | Change::StartExecution { .. }
            | Change::CancelExecution
            | Change::SupersedeExecution { .. }
            | Change::InterruptSession(_) => {}
        }
        Ok(())
    }

    async fn agent_override(&self, name: &str) -> Result<Option<roundtable_store::AgentOverride>, BackendError> {
        Ok(Store::agent_override(self, name).await?)
    }

    async fn sessions(&self, assignment_uid: &str) -> Result<Vec<SessionRecord>, BackendError> {
        Ok(self.sessions_of(assignment_uid).await?)
    }

    async fn proposal(&self, assignment_uid: &str, generation: i64) -> Result<Option<ProposalRecord>, BackendError> {
        Ok(self.proposal_for(assignment_uid, generation).await?)
    }

    async fn lease(&self, assignment_uid: &str) -> Result<Option<LeaseRecord>, BackendError> {
        Ok(self.execution_lease(assignment_uid).await?)
    }

    async fn observe_with<T: Send>(
        &self,
        key: &ObjectKey,
        then: impl FnOnce(Option<&ObjectRecord>) -> (Further, T) + Send,
    ) -> Result<(Observation, T), BackendError> {
        Ok(Store::observe_with(self, key, then).await?)
    }
}

impl AuditSink for Store {
    async fn record(&self, event: AuditEvent) -> Result<(), BackendError> {
        self.append_event(&event.row()).await?;
        Ok(())
    }

    async fn record_all(&self, events: Vec<AuditEvent>) -> Result<(), BackendError> {
        let rows: Vec<NewEvent<'_>> = events.iter().map(AuditEvent::row).collect();
        self.append_events(&rows).await?;
        Ok(())
    }
}

/// The daemon's events: with the audit key, every reconcile event is an entry of the HMAC chain
/// (still shown by `describe` with its reason and message); without one, plain rows.
#[derive(Clone)]
pub struct ChainedEvents {
    pub store: Store,
    pub key: Option<std::sync::Arc<roundtable_store::audit::AuditKey>>,
}

impl AuditSink for ChainedEvents {
    async fn record(&self, event: AuditEvent) -> Result<(), BackendError> {
        self.record_all(vec![event]).await
    }

    async fn record_all(&self, events: Vec<AuditEvent>) -> Result<(), BackendError> {
        let Some(key) = &self.key else { return self.store.record_all(events).await };
        let rows: Vec<NewEvent<'_>> = events.iter().map(AuditEvent::row).collect();
        self.store.append_audited_events(key, &rows).await?;
        Ok(())
    }
}

// === impl for the session runtime ===

/// Images through the session runtime; admission through its authority when there is one (its
/// AdmissionPolicy also says whether tags are pulled); pulls through the daemon's [`Pulls`]
/// when there are (none: nothing is pulled here).
#[derive(Clone)]
pub struct RuntimeImages(
    pub std::sync::Arc<dyn roundtable_session_runtime::SessionRuntime>,
    pub Option<Admitter>,
    pub Option<Pulls>,
);

impl ImageBackend for RuntimeImages {
    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>, BackendError> {
        Ok(self
            .0
            .inspect_image(reference)
            .await?
            .map(|held| ImageInfo { id: held.id, repo_digests: held.repo_digests }))
    }

    fn pulls(&self) -> bool {
        self.2.is_some()
    }

    async fn tags_pullable(&self) -> bool {
        match &self.1 {
            Some(admitter) => !admitter.policy().await.require_digest,
            None => true,
        }
    }

    fn pull_state(&self, reference: &str) -> Option<PullState> {
        self.2.as_ref()?.state(reference)
    }

    fn pull(&self, reference: &str) -> Result<(), BackendError> {
        let Some(pulls) = &self.2 else { return Err(BackendError::NotTheDaemon) };
        pulls.start(reference);
        Ok(())
    }

    async fn gates(
        &self,
        adapter: &ResolvedAdapter,
        requires: &[Capability],
    ) -> Result<Option<GateOutcome>, BackendError> {
        let Some(admitter) = &self.1 else { return Ok(None) };
        let policy = admitter.policy().await;
        Ok(Some(admitter.decide(adapter, requires, &policy).await))
    }

    async fn record_gates(&self, subject: &ObjectKey, outcome: &GateOutcome) {
        if let Some(admitter) = &self.1 {
            admitter.record(outcome, &subject.to_string()).await;
        }
    }
}
