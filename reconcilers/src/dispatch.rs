//! The reconciler the controller runs for every object: observe, plan and apply as separate
//! steps (so `status` and `plan` can stop after planning), and cleanup for tombstones.

use std::time::Duration;

use roundtable_controller::{Action, ErrorOutcome, ReconcileError, Reconciler};
use roundtable_specs::output::{Condition, ConditionStatus};
use roundtable_specs::parse::Spec;
use roundtable_specs::{Kind, ObjectKey};

use crate::adapter::{ImageState, desired_state, observe_image};
use crate::backend::{AuditEvent, AuditSink, BackendError, Change, ImageBackend, StatusBackend};
use crate::conditions::{self, READY, STALLED, reason};
use crate::desired::Desired;

/// How often an Adapter whose image is missing is looked at again.
const MISSING_IMAGE_RECHECK: Duration = Duration::from_secs(60);

/// What can go wrong reconciling one object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("{0}")]
    CorruptSpec(String),
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
    pub image: Option<ImageState>,
}

/// The per-object reconciler over its backends.
#[derive(Debug, Clone)]
pub struct ObjectReconciler<S, I, A> {
    pub status: S,
    pub images: I,
    pub audit: A,
    /// The controller's error budget, to name why a key stalled.
    pub error_budget: u32,
}

impl<S: StatusBackend, I: ImageBackend, A: AuditSink> ObjectReconciler<S, I, A> {
    pub fn new(status: S, images: I, audit: A) -> Self {
        Self { status, images, audit, error_budget: 10 }
    }

    /// Reads the store and the engine for `desired`; writes nothing.
    pub async fn observe(&self, desired: &Desired) -> Result<Observed, Error> {
        let record = self.status.object(&desired.key).await?;
        let image = match &desired.spec {
            Spec::Adapter(spec) => {
                let adapter = roundtable_specs::catalog::resolve_declared(&desired.metadata.name, spec);
                Some(observe_image(&self.images, &adapter).await?)
            }
            _ => None,
        };
        Ok(Observed {
            conditions: self.status.conditions(&desired.key).await?,
            status_json: record.as_ref().and_then(|r| r.status_json.clone()),
            observed_generation: record.and_then(|r| r.observed_generation),
            image,
        })
    }

    /// The changes that would make the store say what the world is; pure.
    pub fn plan(desired: &Desired, observed: &Observed) -> Vec<Change> {
        let generation = desired.generation;
        let (wanted, status_json) = match (&desired.spec, &observed.image) {
            (Spec::Adapter(spec), Some(image)) => {
                let adapter = roundtable_specs::catalog::resolve_declared(&desired.metadata.name, spec);
                let (conditions, status) = desired_state(&adapter, image, generation);
                (conditions, serde_json::to_string(&status).ok())
            }
            (Spec::Assignment(_), _) => (
                vec![conditions::desired(
                    READY,
                    ConditionStatus::Unknown,
                    reason::NOT_RECONCILED_YET,
                    "Assignments are recorded but not executed yet: the execution manager is not built",
                    generation,
                )],
                None,
            ),
            (Spec::AdmissionPolicy(_), _) => (
                vec![conditions::desired(
                    READY,
                    ConditionStatus::Unknown,
                    reason::NOT_RECONCILED_YET,
                    "the policy is recorded but admission is not enforced yet: receipts are not built",
                    generation,
                )],
                None,
            ),
            (Spec::Adapter(_), None) => (Vec::new(), None),
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
        changes
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
        let desired = Desired::from_record(&record).map_err(Error::CorruptSpec)?;
        let observed = self.observe(&desired).await?;
        Ok(Some(Self::plan(&desired, &observed)))
    }

    async fn apply(&self, key: &ObjectKey, changes: &[Change], before: &[Condition]) -> Result<(), Error> {
        for change in changes {
            self.status.apply(key, change).await?;
            // Ready transitions are events an operator wants to see.
            if let Change::SetCondition(condition) = change
                && condition.type_ == READY
                && conditions::find(before, READY)
                    .is_none_or(|c| c.status != condition.status || c.reason != condition.reason)
            {
                let event = AuditEvent {
                    object: key.clone(),
                    warning: condition.status == ConditionStatus::False,
                    reason: condition.reason.clone(),
                    message: condition.message.clone(),
                };
                self.audit.record(event).await?;
            }
        }
        Ok(())
    }
}

impl<S: StatusBackend, I: ImageBackend, A: AuditSink> Reconciler<ObjectKey> for ObjectReconciler<S, I, A> {
    type Error = Error;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
        let Some(record) = self.status.object(key).await? else {
            return Ok(Action::await_change());
        };
        if record.deleted_at.is_some() {
            // Cleanup: later kinds release their resources here before the object is forgotten.
            self.status.apply(key, &Change::Forget).await?;
            let event = AuditEvent {
                object: key.clone(),
                warning: false,
                reason: "CleanedUp".into(),
                message: "forgotten after cleanup".into(),
            };
            self.audit.record(event).await?;
            return Ok(Action::await_change());
        }
        let desired = Desired::from_record(&record).map_err(Error::CorruptSpec)?;
        let observed = self.observe(&desired).await?;
        let changes = Self::plan(&desired, &observed);
        self.apply(key, &changes, &observed.conditions).await?;
        let recheck = key.kind == Kind::Adapter && matches!(observed.image, Some(ImageState::Missing));
        Ok(if recheck { Action::requeue(MISSING_IMAGE_RECHECK) } else { Action::await_change() })
    }

    async fn on_failure(&self, key: &ObjectKey, message: &str, outcome: ErrorOutcome) {
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
        if outcome.stalled {
            let why = if outcome.attempt >= self.error_budget {
                reason::ERROR_BUDGET_EXHAUSTED
            } else {
                reason::PERMANENT_ERROR
            };
            let stalled = conditions::desired(STALLED, ConditionStatus::True, why, summary.clone(), generation);
            if let Err(error) = self.status.apply(key, &Change::SetCondition(stalled)).await {
                tracing::error!(%key, %error, "cannot record the Stalled condition");
            }
        }
        let event =
            AuditEvent { object: key.clone(), warning: true, reason: "ReconcileFailed".into(), message: summary };
        if let Err(error) = self.audit.record(event).await {
            tracing::error!(%key, %error, "cannot record the failure event");
        }
    }
}
