//! The Assignment reconciler's decisions: from the sessions of the current execution
//! generation, what phase the Assignment is in and whether to start, retry, cancel or wait.
//! Pure: the dispatcher observes and applies.

use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::assignment::AssignmentSpec;
use roundtable_specs::output::{Condition, ConditionStatus};
use roundtable_store::{ProposalRecord, SessionRecord};
use serde::{Deserialize, Serialize};

use crate::backend::Change;
use crate::conditions::{READY, desired};

/// Interrupted sessions re-run outside the `retries` budget at most this often.
pub const MAX_INTERRUPTED_RERUNS: usize = 2;

/// What observing an Assignment found.
#[derive(Debug, Clone, PartialEq)]
pub struct AssignmentObserved {
    /// Sessions of the current execution generation, newest first.
    pub sessions: Vec<SessionRecord>,
    pub proposal: Option<ProposalRecord>,
    /// An execution of it is queued or running in this process.
    pub active: bool,
    /// The current controller run, when this process runs executions.
    pub controller_run: Option<String>,
    /// The adapter it names, resolved; `None` when unknown.
    pub adapter: Option<ResolvedAdapter>,
    /// Whether the adapter is ready to execute (its `Ready` condition), with why not.
    pub adapter_ready: Result<(), String>,
}

/// An Assignment's kind-specific status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssignmentStatus {
    pub phase: String,
    pub execution_generation: i64,
    pub attempts: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
}

/// The Ready condition, the status, and the execution changes for an Assignment.
pub fn decide(
    spec: &AssignmentSpec,
    observed: &AssignmentObserved,
    generation: i64,
    execution_generation: i64,
) -> (Vec<Condition>, AssignmentStatus, Vec<Change>) {
    use ConditionStatus::{False, True, Unknown};
    let latest = observed.sessions.first();
    let mut status = AssignmentStatus {
        phase: String::new(),
        execution_generation,
        attempts: observed.sessions.len(),
        session: latest.map(|s| s.id.clone()),
        proposal: observed.proposal.as_ref().map(|p| p.id.clone()),
    };
    let mut changes = Vec::new();
    let ready = |status, reason: &str, message: String| desired(READY, status, reason, message, generation);
    let next_attempt = latest.map_or(1, |s| s.attempt + 1);
    let unfinished = latest.is_some_and(|s| s.phase == "Queued" || s.phase == "Running");
    // A session an earlier controller run left unfinished is interrupted, not running.
    let orphaned = unfinished
        && !observed.active
        && observed.controller_run.as_deref().is_some_and(|run| latest.is_some_and(|s| s.controller_run != run));

    if spec.suspend {
        if observed.active || unfinished {
            changes.push(Change::CancelExecution);
        }
        status.phase = "Suspended".into();
        return (vec![ready(False, "Suspended", "spec.suspend is true: no execution runs".into())], status, changes);
    }
    if let Some(session) = latest.filter(|_| orphaned) {
        changes.push(Change::InterruptSession(session.id.clone()));
    }
    let interrupted = observed.sessions.iter().filter(|s| s.phase == "Interrupted").count() + usize::from(orphaned);
    let failed = observed.sessions.iter().filter(|s| s.phase == "Failed").count();
    let condition = match latest.map(|s| s.phase.as_str()) {
        _ if orphaned || latest.is_some_and(|s| s.phase == "Interrupted") => {
            if interrupted <= MAX_INTERRUPTED_RERUNS {
                changes.push(Change::StartExecution { attempt: next_attempt });
                status.phase = "Queued".into();
                ready(
                    Unknown,
                    "Rerunning",
                    format!(
                        "session interrupted by a controller restart; re-running ({interrupted} of {MAX_INTERRUPTED_RERUNS})"
                    ),
                )
            } else {
                status.phase = "Failed".into();
                ready(False, "Interrupted", format!("interrupted {interrupted} times; not re-run again"))
            }
        }
        Some("Queued") => {
            status.phase = "Queued".into();
            ready(Unknown, "Queued", format!("execution generation {execution_generation} queued for a slot"))
        }
        Some("Running") => {
            status.phase = "Running".into();
            ready(Unknown, "Running", latest.map(|s| s.message.clone()).unwrap_or_default())
        }
        Some("Succeeded") => {
            status.phase = "Succeeded".into();
            let message = latest.map(|s| s.message.clone()).unwrap_or_default();
            ready(True, if observed.proposal.is_some() { "ProposalPending" } else { "NoChanges" }, message)
        }
        Some("Failed") if failed <= spec.retries as usize => {
            changes.push(Change::StartExecution { attempt: next_attempt });
            status.phase = "Queued".into();
            let why = latest.map(|s| s.message.clone()).unwrap_or_default();
            ready(Unknown, "Retrying", format!("retry {failed} of {}: {why}", spec.retries))
        }
        Some("Failed") => {
            status.phase = "Failed".into();
            let session = latest.expect("a latest session");
            let cause = session.cause.clone().unwrap_or_else(|| "Failed".into());
            ready(False, &cause, session.message.clone())
        }
        // Cancelled (by a suspend that was lifted) or nothing yet: start.
        _ => match &observed.adapter_ready {
            Err(why) => {
                status.phase = "Pending".into();
                ready(False, "AdapterNotReady", why.clone())
            }
            Ok(()) => {
                changes.push(Change::StartExecution { attempt: next_attempt });
                status.phase = "Queued".into();
                ready(Unknown, "Queued", format!("execution generation {execution_generation} queued for a slot"))
            }
        },
    };
    (vec![condition], status, changes)
}
