//! The reconciler the controller runs for every object: observe, plan and apply as separate
//! steps (so `status` and `plan` can stop after planning), and cleanup for tombstones.

use std::time::Duration;

use roundtable_controller::{Action, ErrorOutcome, ReconcileError, Reconciler, Stall};
use roundtable_specs::Spec;
use roundtable_specs::events::{EventReason, Reason};
use roundtable_specs::output::{Condition, ConditionStatus};
use roundtable_specs::{Kind, ObjectKey};

use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_store::{AdapterState, Further, Observation, Store};

use roundtable_admission::GateOutcome;

use crate::adapter::{ImageState, desired_state, observe_image, resolve};
use crate::assignment::{AssignmentObserved, decide};
use crate::backend::{
    AuditEvent, AuditSink, BackendError, Change, ExecutionBackend, ImageBackend, RecordedExecutions, StatusBackend,
};
use crate::conditions::{self, READY, STALLED, reason};
use crate::dependents::Dependents;
use crate::desired::Desired;
use crate::pull::FailureKind;
use crate::request::{ExecutionRequest, RUNNING_RECHECK};

// Requeues are kept only where no event this daemon sees precedes the change of the answer.
// An Assignment waiting for its Adapter is woken by the Adapter's reconcile ([`Dependents`]); an
// Adapter whose image is missing by the engine's image events (`daemon/src/engine_hints.rs`); an
// Assignment another controller runs by the lease watch (`daemon/src/presence.rs`); a finished,
// failed or suspended one by nothing but its own spec. The periodic resync is the guarantee.
// An image being pulled is looked at while the pull runs, to show its progress.

/// How often an Adapter whose image is being pulled looks again: its condition shows the
/// progress, and the pull's end is seen at once (the daemon also triggers it then).
const PULL_RECHECK: Duration = Duration::from_secs(2);
/// How often a refused Assignment or Adapter looks at its admission again: a refusal clears with
/// what other processes write (a receipt and its chain entry from `admission check --seal`, a
/// canary's attestation) and with time (an attestation or a skewed receipt's date running out).
const ADMISSION_RECHECK: Duration = Duration::from_secs(3);
const ADAPTER_ADMISSION_RECHECK: Duration = Duration::from_secs(15);
/// How soon an Assignment looks again while the store's disk is full: space comes back without
/// an event.
const STORE_FULL_RECHECK: Duration = Duration::from_secs(5);

/// What can go wrong reconciling one object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    CorruptSpec(#[from] crate::desired::CorruptSpec),
}

impl ReconcileError for Error {
    fn is_permanent(&self) -> bool {
        matches!(self, Error::CorruptSpec(_))
    }
}

/// What observing found, enough to plan without touching anything.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub conditions: Vec<Condition>,
    pub status_json: Option<String>,
    pub observed_generation: Option<i64>,
    /// An Adapter's template, its declaration and the operator's override, resolved once here;
    /// planning reads this one (an Assignment's adapter is in `assignment`).
    pub adapter: Option<ResolvedAdapter>,
    pub image: Option<ImageState>,
    /// An Adapter's spawn-path gates, when admission is evaluated here.
    pub gates: Option<GateOutcome>,
    pub assignment: Option<AssignmentObserved>,
    /// An Adapter's runtime override of `enabled`, made by an operator through the API.
    pub agent_override: Option<roundtable_store::AgentOverride>,
}

/// The per-object reconciler over its backends.
#[derive(Debug, Clone)]
pub struct ObjectReconciler<S, I, A, X = RecordedExecutions> {
    pub status: S,
    pub images: I,
    pub audit: A,
    pub executions: X,
    /// Which Assignments name which Adapter; a changed Adapter wakes them through it once the
    /// daemon connects it to its controller.
    pub dependents: Dependents,
}

impl<I: ImageBackend, A: AuditSink> ObjectReconciler<Store, I, A, RecordedExecutions> {
    /// A reconciler over the state store that reads recorded executions but never starts one
    /// (`status`, `plan`, in-process `reconcile`).
    pub fn new(store: Store, images: I, audit: A) -> Self {
        Self::with_executions(store, images, audit, RecordedExecutions)
    }
}

/// What to read beside `desired`'s own object: the adapter it is or names, and an Assignment's
/// execution.
fn further(desired: &Desired) -> Further {
    match &desired.spec {
        Spec::Adapter(_) => Further { adapter: Some(desired.metadata.name.clone()), execution: None },
        Spec::Assignment(spec) => {
            let generation = desired.execution_generation.unwrap_or(1);
            Further { adapter: Some(spec.adapter.clone()), execution: Some((desired.uid.clone(), generation)) }
        }
        Spec::AdmissionPolicy(_) => Further::default(),
    }
}

/// The resolved adapter `name` as the store holds it (`state`), and whether it is ready to
/// execute, with why not.
fn adapter_of(name: &str, state: &AdapterState) -> Result<(Option<ResolvedAdapter>, Result<(), String>), Error> {
    let key = ObjectKey::new(Kind::Adapter, name);
    let Some(record) = &state.record else {
        return Ok((None, Err(format!("adapter {name:?} is not declared"))));
    };
    let desired = Desired::from_record(record)?;
    let Spec::Adapter(spec) = &desired.spec else { return Ok((None, Err(format!("{key} is not an adapter")))) };
    let agent_override = state.agent_override.as_ref();
    let Some(adapter) = resolve(name, Some(spec), agent_override) else {
        return Ok((None, Err(format!("adapter {name:?} is not declared"))));
    };
    if let Some(refusing) = agent_override.filter(|_| !adapter.enabled) {
        let why = format!("adapter {name} is {} by an operator through the API", refusing.state.as_str());
        return Ok((Some(adapter), Err(why)));
    }
    let ready = match conditions::find(&state.conditions, READY) {
        Some(c) if c.status == ConditionStatus::True => Ok(()),
        Some(c) => Err(format!("adapter {name}: {} ({})", c.message, c.reason)),
        None => Err(format!("adapter {name} is not reconciled yet")),
    };
    Ok((Some(adapter), ready))
}

impl<S: StatusBackend, I: ImageBackend, A: AuditSink, X: ExecutionBackend> ObjectReconciler<S, I, A, X> {
    pub fn with_executions(status: S, images: I, audit: A, executions: X) -> Self {
        Self { status, images, audit, executions, dependents: Dependents::default() }
    }

    /// Records an Assignment among its Adapter's dependents (see [`Dependents::record`]): true
    /// when that is new, so a read of the adapter begun before it may have missed a change.
    fn depend(&self, desired: &Desired) -> bool {
        match &desired.spec {
            Spec::Assignment(spec) => self.dependents.record(&desired.key.name, &spec.adapter),
            _ => false,
        }
    }

    /// Reads the store (in one round trip) and the engine for `desired`; writes nothing.
    pub async fn observe(&self, desired: &Desired) -> Result<Observed, Error> {
        // Recorded before the read begins: a change the Adapter writes after this wakes it.
        self.depend(desired);
        let further = further(desired);
        let (found, ()) = self.status.observe_with(&desired.key, |_| (further, ())).await?;
        self.observed(desired, found).await
    }

    /// Reads the engine for `desired`, given what the store holds of it (`found`, read with
    /// [`Self::further`]); writes nothing.
    async fn observed(&self, desired: &Desired, found: Observation) -> Result<Observed, Error> {
        let generation = desired.execution_generation.unwrap_or(1);
        let (record, conditions) = (found.record, found.conditions);
        let (adapter_state, execution) = (found.adapter.unwrap_or_default(), found.execution.unwrap_or_default());
        let agent_override = match &desired.spec {
            Spec::Adapter(_) => adapter_state.agent_override.clone(),
            _ => None,
        };
        let adapter = match &desired.spec {
            Spec::Adapter(spec) => resolve(&desired.metadata.name, Some(spec), agent_override.as_ref()),
            _ => None,
        };
        let (image, mut gates) = match &adapter {
            Some(adapter) => {
                let image = observe_image(&self.images, adapter).await?;
                // A disabled adapter, or one with no image to probe, is not gated yet.
                let gates = match image {
                    ImageState::Present { .. } | ImageState::NotNeeded => self.images.gates(adapter, &[]).await?,
                    _ => None,
                };
                (Some(image), gates)
            }
            None => (None, None),
        };
        let assignment = match &desired.spec {
            Spec::Assignment(spec) => {
                // The store read the lease first: a claim on what was read here fails if a session
                // was recorded after the sessions were read.
                let lease = execution.lease;
                let me = self.executions.controller_run();
                let held_by =
                    lease.as_ref().filter(|l| l.held() && Some(&l.holder) != me.as_ref()).map(|l| l.holder.clone());
                let mut sessions = execution.sessions;
                sessions.retain(|s| s.execution_generation == generation);
                let latest_ended_ago =
                    sessions.first().and_then(|s| s.finished_at.as_deref()).and_then(roundtable_store::since);
                let (adapter, adapter_ready) = adapter_of(&spec.adapter, &adapter_state)?;
                let adapter_settling = adapter_state.record.is_some()
                    && conditions::find(&adapter_state.conditions, READY)
                        .is_none_or(|c| c.status == ConditionStatus::Unknown);
                let active = self.executions.active_run(&desired.key.name);
                let assignment_gates = match (&adapter, &adapter_ready) {
                    (Some(adapter), Ok(())) => self.images.gates(adapter, &spec.requires).await?,
                    _ => None,
                };
                let refused = assignment_gates.as_ref().and_then(|o| o.blocking().cloned());
                gates = assignment_gates;
                Some(AssignmentObserved {
                    sessions,
                    proposal: execution.proposal,
                    active: active.is_some(),
                    active_generation: active.map(|run| (run.uid != desired.uid, run.generation)),
                    controller_run: me,
                    lease,
                    held_by,
                    adapter,
                    adapter_ready,
                    adapter_settling,
                    refused,
                    store_full: self.executions.store_full(),
                    latest_ended_ago,
                })
            }
            _ => None,
        };
        Ok(Observed {
            conditions,
            status_json: record.as_ref().and_then(|r| r.status_json.clone()),
            observed_generation: record.and_then(|r| r.observed_generation),
            adapter,
            image,
            gates,
            assignment,
            agent_override,
        })
    }

    /// The changes that would make the store say what the world is; pure.
    pub fn plan(desired: &Desired, observed: &Observed) -> Vec<Change> {
        let generation = desired.generation;
        let mut executions = Vec::new();
        let (wanted, status_json) = match (&desired.spec, &observed.adapter, &observed.image) {
            // Declared more than once: nothing is started or pulled for it, whatever its kind.
            _ if desired.held.is_some() => {
                let why = desired.held.clone().unwrap_or_default();
                (
                    vec![conditions::desired(READY, ConditionStatus::False, reason::DECLARED_TWICE, why, generation)],
                    None,
                )
            }
            (Spec::Adapter(_), Some(adapter), Some(image)) => {
                let (conditions, status) = desired_state(
                    adapter,
                    image,
                    observed.gates.as_ref(),
                    observed.agent_override.as_ref(),
                    generation,
                );
                (conditions, serde_json::to_string(&status).ok())
            }
            (Spec::Assignment(spec), _, _) => match &observed.assignment {
                Some(found) => {
                    let execution_generation = desired.execution_generation.unwrap_or(1);
                    let (conditions, status, changes) = decide(spec, found, generation, execution_generation);
                    executions = changes;
                    (conditions, serde_json::to_string(&status).ok())
                }
                None => (Vec::new(), None),
            },
            (Spec::AdmissionPolicy(policy), _, _) => {
                let exempt = if policy.exempt.is_empty() { "none".to_owned() } else { policy.exempt.join(", ") };
                let message = format!(
                    "mode {}; receipts are fresh for {}; exempt: {exempt}",
                    policy.mode.as_str(),
                    policy.receipt_ttl
                );
                (vec![conditions::desired(READY, ConditionStatus::True, reason::RECONCILED, message, generation)], None)
            }
            (Spec::Adapter(_), _, _) => (Vec::new(), None),
        };
        let mut changes: Vec<Change> = wanted
            .into_iter()
            .filter(|want| {
                !conditions::find(&observed.conditions, &want.type_).is_some_and(|have| conditions::same(have, want))
            })
            .map(Change::SetCondition)
            .collect();
        if conditions::find(&observed.conditions, STALLED).is_some_and(|c| c.status == ConditionStatus::True) {
            changes.push(Change::SetCondition(conditions::desired(
                STALLED,
                ConditionStatus::False,
                reason::RECONCILED,
                "",
                generation,
            )));
        }
        if status_json.is_some() && status_json != observed.status_json {
            changes.push(Change::RecordStatus(status_json));
        }
        if observed.observed_generation != Some(generation) {
            changes.push(Change::ObserveGeneration(generation));
        }
        // The pull goes first, so the condition written after it says what is under way.
        if let (Spec::Adapter(_), Some(adapter), Some(ImageState::ToPull { .. })) =
            (&desired.spec, &observed.adapter, &observed.image)
            && desired.held.is_none()
            && let Some(image) = &adapter.image
        {
            changes.insert(0, Change::PullImage { reference: image.to_string() });
        }
        changes.extend(executions);
        changes
    }

    /// The event of its own an Adapter's `Ready` change records besides the transition's: a
    /// pull that ended, seen as `ImagePulling` giving way to its outcome.
    fn pull_event(
        key: &ObjectKey,
        observed: &Observed,
        before: Option<&Condition>,
        now: &Condition,
    ) -> Option<AuditEvent> {
        if key.kind != Kind::Adapter || before.is_none_or(|c| c.reason != reason::IMAGE_PULLING) {
            return None;
        }
        let reference = observed.adapter.as_ref()?.image.as_ref()?.to_string();
        let (warning, reason, message) = match observed.image.as_ref()? {
            ImageState::Present { id, pulled: Some(pulled) } => {
                let mib = pulled.bytes as f64 / (1024.0 * 1024.0);
                let message =
                    format!("pulled {reference} as {id} ({mib:.1} MiB in {:.1} s)", pulled.took.as_secs_f64());
                (false, EventReason::ImagePulled, message)
            }
            ImageState::PullFailed { failure, .. } => {
                let what = match failure.kind {
                    FailureKind::DigestMismatch => "is not what its digest names",
                    FailureKind::TimedOut => "timed out",
                    FailureKind::Refused => "failed",
                };
                (true, EventReason::ImagePullFailed, format!("pulling {reference} {what}: {}", now.message))
            }
            _ => return None,
        };
        Some(AuditEvent { object: key.clone(), warning, reason: reason.into(), message })
    }

    /// Observe and plan for the stored spec of `key`: `None` when the store does not know it;
    /// a tombstone plans its cleanup.
    pub async fn plan_key(&self, key: &ObjectKey) -> Result<Option<Vec<Change>>, Error> {
        let Some(record) = self.status.object(key).await? else {
            return Ok(None);
        };
        if record.deleted_at.is_some() {
            return Ok(Some(vec![Change::Forget]));
        }
        let desired = Desired::from_record(&record)?;
        let observed = self.observe(&desired).await?;
        Ok(Some(Self::plan(&desired, &observed)))
    }

    async fn apply(&self, desired: &Desired, observed: &Observed, changes: &[Change]) -> Result<(), Error> {
        let key = &desired.key;
        let before = &observed.conditions;
        // Claimed once, before the first change that acts on the execution; `Some(None)` when
        // another controller holds it or claimed it since it was observed.
        let mut claimed: Option<Option<roundtable_store::Lease>> = None;
        for change in changes {
            if matches!(change, Change::StartExecution { .. } | Change::InterruptSession(_)) && claimed.is_none() {
                let seen = observed.assignment.as_ref().and_then(|found| found.lease.as_ref());
                let lease = self.executions.claim(&desired.identity(), seen).await?;
                if lease.is_none() {
                    tracing::info!(assignment = %key.name, "another controller holds or just claimed this execution; leaving it to that one");
                }
                claimed = Some(lease);
            }
            let lease = claimed.as_ref().and_then(Option::as_ref);
            match change {
                Change::StartExecution { .. } | Change::InterruptSession(_) if lease.is_none() => continue,
                Change::StartExecution { attempt } => {
                    let (Spec::Assignment(spec), Some(found)) = (&desired.spec, &observed.assignment) else { continue };
                    let Some(adapter) = found.adapter.clone() else { continue };
                    let request = ExecutionRequest::new(
                        desired.identity(),
                        desired.execution_generation.unwrap_or(1),
                        *attempt,
                        spec.clone(),
                        adapter,
                        lease.cloned(),
                    )
                    .reusing(desired.execution_digest.clone(), desired.rerun);
                    self.executions.start(request).await?;
                    // A first attempt is the `Queued` condition's own event; a retry is news.
                    if *attempt > 1 {
                        let message = format!("execution attempt {attempt} queued: a retry");
                        let reason = EventReason::ExecutionQueued.into();
                        let event = AuditEvent { object: key.clone(), warning: false, reason, message };
                        self.audit.record(event).await?;
                    }
                    continue;
                }
                Change::CancelExecution => {
                    self.executions.cancel(&key.name);
                    continue;
                }
                Change::SupersedeExecution { by } => {
                    self.executions.supersede(&key.name, *by);
                    let message = format!("the running execution is cancelled: execution generation {by} replaces it");
                    let reason = EventReason::Superseded.into();
                    let event = AuditEvent { object: key.clone(), warning: true, reason, message };
                    self.audit.record(event).await?;
                    continue;
                }
                Change::InterruptSession(id) => {
                    self.executions.interrupt(id, lease).await?;
                    continue;
                }
                Change::PullImage { reference } => {
                    self.images.pull(reference)?;
                    continue;
                }
                _ => {}
            }
            self.status.apply(key, change).await?;
            // A refusal the reconciler acts on is a gate decision: anchored when it starts.
            if let (Change::SetCondition(condition), Some(gates)) = (change, &observed.gates)
                && key.kind == Kind::Assignment
                && condition.type_ == READY
                && condition.reason == reason::ADMISSION_REFUSED
                && conditions::find(before, READY).is_none_or(|c| c.reason != condition.reason)
            {
                self.images.record_gates(key, gates).await;
            }
            // Ready transitions are events an operator wants to see; waiting a moment for an
            // Adapter not reconciled yet (a first start's ordering) is not one.
            let settling =
                |c: &Condition| c.status == ConditionStatus::Unknown && c.reason == reason::ADAPTER_NOT_READY;
            if let Change::SetCondition(condition) = change
                && condition.type_ == READY
                && !settling(condition)
                && conditions::find(before, READY)
                    .is_none_or(|c| c.status != condition.status || c.reason != condition.reason)
            {
                let event = AuditEvent {
                    object: key.clone(),
                    warning: condition.status == ConditionStatus::False,
                    reason: Reason::Ready(condition.reason.clone()),
                    message: condition.message.clone(),
                };
                let pulled = Self::pull_event(key, observed, conditions::find(before, READY), condition);
                self.audit.record_all(std::iter::once(event).chain(pulled).collect()).await?;
            }
        }
        Ok(())
    }
}

/// When to look at `key` again after a reconcile that observed `observed` and made `changes`:
/// only when time, or something no event reports, can change the answer. Everything else waits
/// for its event (see the note on the requeue constants above).
fn next_look(key: &ObjectKey, observed: &Observed, changes: &[Change]) -> Action {
    let executing = observed.assignment.as_ref().is_some_and(|a| a.active)
        || changes.iter().any(|c| matches!(c, Change::StartExecution { .. }));
    // Only an Assignment the gates hold back (phase Refused) depends on them: a suspended,
    // finished or failed one does not, whatever they say.
    let ready_now = changes
        .iter()
        .rev()
        .find_map(|change| match change {
            Change::SetCondition(condition) if condition.type_ == READY => Some(condition),
            _ => None,
        })
        .or_else(|| conditions::find(&observed.conditions, READY));
    let refused = match key.kind {
        Kind::Assignment => ready_now.is_some_and(|c| c.reason == reason::ADMISSION_REFUSED),
        Kind::Adapter => observed.gates.as_ref().is_some_and(|g| g.decisions.iter().any(|d| !d.admitted())),
        Kind::AdmissionPolicy => false,
    };
    let store_full = observed.assignment.as_ref().is_some_and(|a| a.store_full.is_some());
    // A failure that was not the agent's is tried again when its wait is over: nothing reports
    // the engine or the repository coming right.
    let waiting_for_the_cause = observed
        .assignment
        .as_ref()
        .and_then(crate::assignment::waiting_for_the_cause)
        .filter(|_| !executing)
        .map(|(_, _, left)| left.max(Duration::from_secs(1)));
    let image = observed.image.as_ref().filter(|_| key.kind == Kind::Adapter);
    let pulling = matches!(image, Some(ImageState::ToPull { .. } | ImageState::Pulling { .. }));
    // A failed pull is looked at again when its backoff has passed, when the next may start.
    let pull_retry = match image {
        Some(ImageState::PullFailed { retry_in, .. }) => Some((*retry_in).max(Duration::from_secs(1))),
        _ => None,
    };
    if store_full {
        Action::requeue(STORE_FULL_RECHECK)
    } else if refused && key.kind == Kind::Assignment {
        Action::requeue(ADMISSION_RECHECK)
    } else if refused {
        Action::requeue(ADAPTER_ADMISSION_RECHECK)
    } else if pulling {
        Action::requeue(PULL_RECHECK)
    } else if let Some(retry_in) = pull_retry {
        Action::requeue(retry_in)
    } else if executing {
        Action::requeue(RUNNING_RECHECK)
    } else if let Some(left) = waiting_for_the_cause {
        Action::requeue(left)
    } else {
        Action::await_change()
    }
}

impl<S: StatusBackend, I: ImageBackend, A: AuditSink, X: ExecutionBackend> Reconciler<ObjectKey>
    for ObjectReconciler<S, I, A, X>
{
    type Error = Error;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
        // The record, and what it says to read beside it, in one round trip.
        let (found, desired) = self
            .status
            .observe_with(key, |record| match record {
                Some(record) if record.deleted_at.is_none() => match Desired::from_record(record) {
                    Ok(desired) => (further(&desired), Some(Ok((self.depend(&desired), desired)))),
                    Err(corrupt) => (Further::default(), Some(Err(corrupt))),
                },
                _ => (Further::default(), None),
            })
            .await?;
        if found.record.is_none() {
            return Ok(Action::await_change());
        }
        // A record without desired state is a tombstone.
        let Some(desired) = desired else {
            // Cleanup: a removed Assignment's execution is cancelled before it is forgotten.
            if key.kind == Kind::Assignment {
                self.executions.cancel(&key.name);
            }
            self.status.apply(key, &Change::Forget).await?;
            match key.kind {
                // The Assignments naming a removed Adapter now find it undeclared.
                Kind::Adapter => _ = self.dependents.wake(&key.name),
                Kind::Assignment => self.dependents.forget(&key.name),
                Kind::AdmissionPolicy => {}
            }
            let event = AuditEvent {
                object: key.clone(),
                warning: false,
                reason: EventReason::CleanedUp.into(),
                message: "forgotten after cleanup".into(),
            };
            self.audit.record(event).await?;
            return Ok(Action::await_change());
        };
        let (newly_recorded, desired) = desired?;
        // Recorded among its Adapter's dependents only once the read had begun (its first
        // reconcile here, or it names another adapter now): the adapter is read again, so a
        // change that woke nobody meanwhile is not missed.
        let observed = match newly_recorded {
            true => self.observe(&desired).await?,
            false => self.observed(&desired, found).await?,
        };
        let changes = Self::plan(&desired, &observed);
        let applied = self.apply(&desired, &observed, &changes).await;
        // An Adapter that changed anything (its Ready or Admitted condition, its generation, what
        // an operator's override makes it say) may have changed the answer of every Assignment
        // naming it: they are woken, even when a later write failed after an earlier one landed.
        if key.kind == Kind::Adapter && !changes.is_empty() {
            let woken = self.dependents.wake(&key.name);
            tracing::debug!(adapter = %key.name, woken, "the adapter changed; waking the assignments naming it");
        }
        applied?;
        Ok(next_look(key, &observed, &changes))
    }

    async fn on_failure(
        &self,
        key: &ObjectKey,
        failure: &roundtable_controller::Failure<Error>,
        outcome: ErrorOutcome,
    ) {
        let message = roundtable_telemetry::error_chain(failure);
        let generation = match self.status.object(key).await {
            Ok(Some(record)) => record.generation,
            _ => 0,
        };
        let summary = match outcome.retry_in {
            Some(delay) => {
                format!("attempt {} failed, retrying in {:.1} s: {message}", outcome.attempt, delay.as_secs_f64())
            }
            None => format!(
                "attempt {} failed; no retries until the spec changes or `roundtable reconcile {key}`: {message}",
                outcome.attempt
            ),
        };
        if let Some(stall) = outcome.stalled {
            let why = match stall {
                Stall::BudgetSpent { .. } => reason::ERROR_BUDGET_EXHAUSTED,
                Stall::Permanent => reason::PERMANENT_ERROR,
            };
            let stalled = conditions::desired(STALLED, ConditionStatus::True, why, summary.clone(), generation);
            if let Err(error) = self.status.apply(key, &Change::SetCondition(stalled)).await {
                tracing::error!(%key, %error, "cannot record the Stalled condition");
            }
        }
        let reason = EventReason::ReconcileFailed.into();
        let event = AuditEvent { object: key.clone(), warning: true, reason, message: summary };
        if let Err(error) = self.audit.record(event).await {
            tracing::error!(%key, %error, "cannot record the failure event");
        }
    }
}
