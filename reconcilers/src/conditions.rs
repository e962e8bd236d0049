//! Condition types and reasons (CamelCase constants), and how conditions become health.

use roundtable_specs::output::{Condition, ConditionStatus, Health};

pub const READY: &str = "Ready";
pub const DEGRADED: &str = "Degraded";
pub const STALLED: &str = "Stalled";
/// An Adapter's spawn-path gates: admission, the security floor.
pub const ADMITTED: &str = "Admitted";

/// Every condition reason a reconciler sets, by the kind that sets it; nothing else spells one.
/// An Assignment that failed is `Ready=False` with its session's cause (a `SessionCause` word).
pub mod reason {
    use roundtable_specs::session::SessionCause;

    // --- any kind ---
    pub const SUSPENDED: &str = "Suspended";
    pub const NOT_RECONCILED_YET: &str = "NotReconciledYet";
    pub const RECONCILED: &str = "Reconciled";
    pub const ERROR_BUDGET_EXHAUSTED: &str = "ErrorBudgetExhausted";
    pub const PERMANENT_ERROR: &str = "PermanentError";
    /// The spawn-path gates admit: an Adapter's `Admitted`, an Assignment about to start.
    pub const ADMITTED: &str = "Admitted";
    /// Declared more than once in the spec directory: held at its recorded spec, nothing runs.
    pub const DECLARED_TWICE: &str = "DeclaredTwice";

    // --- an Adapter's `Ready` and `Degraded` ---
    pub const IMAGE_RESOLVED: &str = "ImageResolved";
    pub const IMAGE_MISSING: &str = "ImageMissing";
    /// Its image is being pulled (`Ready` is `Unknown` meanwhile; the message has the progress).
    pub const IMAGE_PULLING: &str = "ImagePulling";
    /// Pulling its image failed; it is tried again after a backoff (Kubernetes' word).
    pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";
    /// What the engine holds under its digest reference is not what that digest names.
    pub const IMAGE_DIGEST_MISMATCH: &str = "ImageDigestMismatch";
    pub const IMAGE_NOT_CONFIGURED: &str = "ImageNotConfigured";
    pub const IMAGE_NOT_PINNED: &str = "ImageNotPinned";
    pub const NO_IMAGE_NEEDED: &str = "NoImageNeeded";
    pub const AS_EXPECTED: &str = "AsExpected";
    pub const DISABLED: &str = "Disabled";

    // --- an Assignment's `Ready` ---
    /// Its run fields changed while an older execution generation runs.
    pub const SUPERSEDING: &str = "Superseding";
    /// A spawn-path gate refuses it under `enforce`: the word of the session cause it leaves.
    pub const ADMISSION_REFUSED: &str = SessionCause::AdmissionRefused.as_str();
    pub const ADAPTER_NOT_READY: &str = "AdapterNotReady";
    pub const QUEUED: &str = "Queued";
    pub const RUNNING: &str = "Running";
    /// An interrupted session re-runs, outside the `retries` budget.
    pub const RERUNNING: &str = "Rerunning";
    /// Interrupted more often than it is re-run.
    pub const INTERRUPTED: &str = "Interrupted";
    pub const RETRYING: &str = "Retrying";
    /// The run's proposal awaits an operator's review (`proposals accept|reject`).
    pub const PROPOSAL_PENDING: &str = "ProposalPending";
    /// An operator accepted the run's proposal: a commit on a branch holds it.
    pub const PROPOSAL_ACCEPTED: &str = "ProposalAccepted";
    /// An operator rejected the run's proposal.
    pub const PROPOSAL_REJECTED: &str = "ProposalRejected";
    pub const NO_CHANGES: &str = "NoChanges";
    /// A failed session that recorded no cause.
    pub const FAILED: &str = "Failed";
}

/// A condition as a reconciler wants it; the store fills in `lastTransitionTime`.
pub fn desired(
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: impl Into<String>,
    generation: i64,
) -> Condition {
    Condition {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message: message.into(),
        last_transition_time: String::new(),
        observed_generation: generation,
    }
}

/// Whether `current` already says what `wanted` says (the transition time aside).
pub fn same(current: &Condition, wanted: &Condition) -> bool {
    current.type_ == wanted.type_
        && current.status == wanted.status
        && current.reason == wanted.reason
        && current.message == wanted.message
        && current.observed_generation == wanted.observed_generation
}

pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn is(conditions: &[Condition], type_: &str, status: ConditionStatus) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == status)
}

/// Whether `Ready` is False only because the spec or an operator stopped the object.
fn stopped_on_purpose(conditions: &[Condition]) -> bool {
    find(conditions, READY).is_some_and(|c| matches!(c.reason.as_str(), reason::SUSPENDED | reason::DISABLED))
}

/// Health from conditions, with the message an operator should read first.
pub fn health(conditions: &[Condition]) -> (Health, String) {
    let message = |type_: &str| find(conditions, type_).map(|c| c.message.clone()).unwrap_or_default();
    if is(conditions, STALLED, ConditionStatus::True) {
        return (Health::Stalled, message(STALLED));
    }
    match find(conditions, READY).map(|c| c.status) {
        Some(ConditionStatus::True) if is(conditions, ADMITTED, ConditionStatus::False) => {
            (Health::Degraded, message(ADMITTED))
        }
        Some(ConditionStatus::True) if is(conditions, DEGRADED, ConditionStatus::True) => {
            (Health::Degraded, message(DEGRADED))
        }
        Some(ConditionStatus::True) => (Health::Healthy, message(READY)),
        // Not ready because someone asked for it is not a fault: a new user's suspended example
        // must not read as broken.
        Some(ConditionStatus::False) if stopped_on_purpose(conditions) => (Health::Suspended, message(READY)),
        Some(ConditionStatus::False) => (Health::Unhealthy, message(READY)),
        // Not reconciled yet is not known; anything else `Unknown` is work under way.
        Some(ConditionStatus::Unknown)
            if find(conditions, READY).is_some_and(|c| c.reason == reason::NOT_RECONCILED_YET) =>
        {
            (Health::Unknown, message(READY))
        }
        Some(ConditionStatus::Unknown) => (Health::Progressing, message(READY)),
        None => (Health::Unknown, "not reconciled yet".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_reads_stalled_then_ready_then_degraded() {
        let ready = desired(READY, ConditionStatus::True, "ImageResolved", "ok", 1);
        let degraded = desired(DEGRADED, ConditionStatus::True, "ImageNotPinned", "tag", 1);
        let stalled = desired(STALLED, ConditionStatus::True, "ErrorBudgetExhausted", "gave up", 1);
        assert_eq!(health(std::slice::from_ref(&ready)).0, Health::Healthy);
        assert_eq!(health(&[ready.clone(), degraded.clone()]), (Health::Degraded, "tag".into()));
        assert_eq!(health(&[ready, degraded, stalled]).0, Health::Stalled);
        assert_eq!(health(&[]).0, Health::Unknown);
        let running = desired(READY, ConditionStatus::Unknown, reason::RUNNING, "session s1 Running", 1);
        assert_eq!(health(&[running]).0, Health::Progressing, "work under way, as Argo CD says");
        let new = desired(READY, ConditionStatus::Unknown, reason::NOT_RECONCILED_YET, "", 1);
        assert_eq!(health(&[new]).0, Health::Unknown);
    }

    #[test]
    fn not_ready_on_purpose_is_suspended_and_any_other_not_ready_is_unhealthy() {
        for (reason, expected) in [
            (reason::SUSPENDED, Health::Suspended),
            (reason::DISABLED, Health::Suspended),
            (reason::IMAGE_NOT_CONFIGURED, Health::Unhealthy),
            (reason::IMAGE_MISSING, Health::Unhealthy),
        ] {
            let ready = desired(READY, ConditionStatus::False, reason, "why", 1);
            assert_eq!(health(&[ready]), (expected, "why".into()), "{reason}");
        }
        let suspended = desired(READY, ConditionStatus::False, reason::SUSPENDED, "suspended", 1);
        let stalled = desired(STALLED, ConditionStatus::True, reason::PERMANENT_ERROR, "gave up", 1);
        assert_eq!(health(&[suspended, stalled]).0, Health::Stalled, "a stall still outranks");
    }
}
