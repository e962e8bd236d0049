//! The Assignment reconciler's decisions: from the sessions of the current execution
//! generation, what phase the Assignment is in and whether to start, retry, cancel or wait.
//! Pure: the object reconciler observes and applies.

use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::admission::GateDecision;
use roundtable_specs::assignment::AssignmentSpec;
use roundtable_specs::output::{Condition, ConditionStatus};
use std::time::Duration;

use roundtable_specs::session::{AssignmentPhase, Blame, ProposalState, SessionCause, SessionPhase};
use roundtable_store::{ProposalRecord, SessionRecord};
use serde::{Deserialize, Serialize};

use crate::backend::Change;
use crate::conditions::{READY, desired, reason};

/// The Ready reason and message of a run that made `proposal`: where its review stands.
fn review(proposal: &ProposalRecord, message: String) -> (&'static str, String) {
    let id = &proposal.id;
    let decision = proposal.decision.as_ref();
    match proposal.state {
        ProposalState::Accepted => (
            reason::PROPOSAL_ACCEPTED,
            format!(
                "proposal {id} accepted as {} on {}",
                decision.and_then(|d| d.commit.as_deref()).unwrap_or("?"),
                decision.and_then(|d| d.branch.as_deref()).unwrap_or("?")
            ),
        ),
        ProposalState::Rejected => (
            reason::PROPOSAL_REJECTED,
            format!("proposal {id} rejected: {}", decision.map(|d| d.reason.as_str()).unwrap_or_default()),
        ),
        ProposalState::Pending => (
            reason::PROPOSAL_PENDING,
            format!("{message}; awaits review: `roundtable proposals show {id}`, then accept or reject"),
        ),
        ProposalState::Accepting => {
            (reason::PROPOSAL_PENDING, format!("{message}; an accept of proposal {id} is under way"))
        }
        ProposalState::Superseded => (reason::PROPOSAL_PENDING, message),
    }
}

/// Interrupted sessions re-run outside the `retries` budget at most this often.
pub const MAX_INTERRUPTED_RERUNS: usize = 2;

/// How long an Assignment whose latest session failed for a cause that is not the agent's
/// ([`Blame`]) waits before trying again: this after the first such failure, doubling with each
/// one in a row, at most [`LONGEST_WAIT`]. No attempt is spent meanwhile; the wait keeps an
/// engine that stays down from filling the store with sessions.
pub const FIRST_WAIT: Duration = Duration::from_secs(5);
pub const LONGEST_WAIT: Duration = Duration::from_secs(120);
/// How many failures in a row that are not the agent's but could be (a cause after the
/// session's container exists: `SessionCause::before_any_container`) are tried again before the
/// execution fails: an agent that stops its own sandbox must not get endless fresh runs.
pub const MAX_UNBLAMED_RERUNS: usize = 5;

/// Whether the latest failures in a row, not the agent's but possibly its doing, are more than
/// [`MAX_UNBLAMED_RERUNS`].
fn unblamed_reruns_spent(observed: &AssignmentObserved) -> bool {
    let maybe_the_agents = observed
        .sessions
        .iter()
        .take_while(|s| not_the_agents(s))
        .filter(|s| s.cause.is_some_and(|cause| !cause.before_any_container()))
        .count();
    maybe_the_agents > MAX_UNBLAMED_RERUNS
}

/// Whether a session failed for a cause that is not the agent's.
fn not_the_agents(session: &SessionRecord) -> bool {
    session.phase == SessionPhase::Failed
        && session.cause.is_some_and(|cause| matches!(cause.blame(), Blame::Environment | Blame::Configuration))
}

/// When the latest session failed for a cause that is not the agent's: that cause, how long the
/// Assignment waits in all (see [`FIRST_WAIT`]) and how much of that is left (zero: try now).
pub fn waiting_for_the_cause(observed: &AssignmentObserved) -> Option<(SessionCause, Duration, Duration)> {
    let latest = observed.sessions.first().filter(|s| not_the_agents(s))?;
    if unblamed_reruns_spent(observed) {
        return None;
    }
    let in_a_row = observed.sessions.iter().take_while(|s| not_the_agents(s)).count();
    let doublings = u32::try_from(in_a_row.saturating_sub(1)).unwrap_or(u32::MAX).min(16);
    let wait = FIRST_WAIT.saturating_mul(1 << doublings).min(LONGEST_WAIT);
    // An end that does not read is long past.
    let waited = observed.latest_ended_ago.unwrap_or(wait);
    Some((latest.cause?, wait, wait.saturating_sub(waited)))
}

/// What observing an Assignment found.
#[derive(Debug, Clone, PartialEq)]
pub struct AssignmentObserved {
    /// Sessions of the current execution generation, newest first.
    pub sessions: Vec<SessionRecord>,
    pub proposal: Option<ProposalRecord>,
    /// An execution of it is queued or running in this process.
    pub active: bool,
    /// The execution generation of that execution, and whether it is of an earlier object of the
    /// same name (deleted and declared again while it ran).
    pub active_generation: Option<(bool, i64)>,
    /// The current controller run, when this process runs executions.
    pub controller_run: Option<String>,
    /// The lease on its execution, as read before the sessions.
    pub lease: Option<roundtable_store::LeaseRecord>,
    /// Another live controller that holds that lease: it runs the execution, and this one
    /// neither interrupts nor starts anything.
    pub held_by: Option<String>,
    /// The adapter it names, resolved; `None` when unknown.
    pub adapter: Option<ResolvedAdapter>,
    /// Whether the adapter is ready to execute (its `Ready` condition), with why not.
    pub adapter_ready: Result<(), String>,
    /// The adapter is declared and its readiness not decided yet (not reconciled, or `Ready`
    /// `Unknown` while its image is pulled): waiting for it is no fault, as on every first start.
    pub adapter_settling: bool,
    /// The spawn-path gate that refuses it under `enforce`, if one does.
    pub refused: Option<GateDecision>,
    /// Why the store can take no more (its disk is full), if so: nothing starts until it can.
    pub store_full: Option<String>,
    /// How long ago the latest session ended, when it has.
    pub latest_ended_ago: Option<Duration>,
}

/// An Assignment's kind-specific status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssignmentStatus {
    pub phase: AssignmentPhase,
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
        phase: AssignmentPhase::Pending,
        execution_generation,
        attempts: observed.sessions.len(),
        session: latest.map(|s| s.id.clone()),
        proposal: observed.proposal.as_ref().map(|p| p.id.clone()),
    };
    let mut changes = Vec::new();
    let ready = |status, reason: &str, message: String| desired(READY, status, reason, message, generation);
    let next_attempt = latest.map_or(1, |s| s.attempt + 1);
    let unfinished = latest.is_some_and(|s| !s.phase.is_finished());
    // An unfinished session that no execution task of this process owns is interrupted: an earlier
    // controller run left it, or its final record could not be written. (The manager registers a
    // session before this reconcile returns and records its end before letting go of it.)
    // With several controllers, only one whose lease has expired: a session another live
    // controller holds is that controller's to run.
    let orphaned = unfinished && !observed.active && observed.controller_run.is_some() && observed.held_by.is_none();

    if spec.suspend {
        if observed.active || unfinished {
            changes.push(Change::CancelExecution);
        }
        tracing::debug!(active = observed.active, latest = ?latest.map(|s| (&s.id, &s.phase)), "suspended");
        status.phase = AssignmentPhase::Suspended;
        return (
            vec![ready(False, reason::SUSPENDED, "spec.suspend is true: no execution runs".into())],
            status,
            changes,
        );
    }
    // The run fields changed while an execution of an older generation runs: cancel it (an
    // Assignment runs what its spec says now, as a Job would); the new generation starts once
    // it has stopped and been recorded.
    if let Some((earlier_object, running)) =
        observed.active_generation.filter(|(earlier_object, g)| *earlier_object || *g != execution_generation)
    {
        changes.push(Change::SupersedeExecution { by: execution_generation });
        status.phase = AssignmentPhase::Queued;
        let message = if earlier_object {
            format!(
                "cancelling the run of the deleted Assignment of this name (execution generation {running}); this one starts when it has stopped"
            )
        } else {
            format!(
                "cancelling the run of execution generation {running} (its run fields changed); generation {execution_generation} starts when it has stopped"
            )
        };
        return (vec![ready(Unknown, reason::SUPERSEDING, message)], status, changes);
    }
    if let Some(session) = latest.filter(|_| orphaned) {
        changes.push(Change::InterruptSession(session.id.clone()));
    }
    let interrupted =
        observed.sessions.iter().filter(|s| s.phase == SessionPhase::Interrupted).count() + usize::from(orphaned);
    // A spawn the gates refused never ran, and a failure of the engine, the sandbox or the
    // configuration is not the agent's: neither spends the retries budget.
    let gated = |s: &SessionRecord| s.cause == Some(SessionCause::AdmissionRefused);
    let failed = observed
        .sessions
        .iter()
        .filter(|s| s.phase == SessionPhase::Failed && s.cause.is_none_or(|c| c.blame() == Blame::Agent))
        .count();
    let waiting = waiting_for_the_cause(observed);
    let refused = |status: &mut AssignmentStatus, decision: &GateDecision| {
        status.phase = AssignmentPhase::Refused;
        ready(False, reason::ADMISSION_REFUSED, decision.to_string())
    };
    let condition = match latest.map(|s| s.phase) {
        _ if orphaned || latest.is_some_and(|s| s.phase == SessionPhase::Interrupted) => {
            if interrupted <= MAX_INTERRUPTED_RERUNS {
                changes.push(Change::StartExecution { attempt: next_attempt });
                status.phase = AssignmentPhase::Queued;
                // A controller restart or the container engine going away: say which.
                let why = match latest {
                    Some(session) if !orphaned => session.message.clone(),
                    _ => "session interrupted by a controller restart".into(),
                };
                ready(
                    Unknown,
                    reason::RERUNNING,
                    format!("{why}; re-running ({interrupted} of {MAX_INTERRUPTED_RERUNS})"),
                )
            } else {
                status.phase = AssignmentPhase::Failed;
                ready(False, reason::INTERRUPTED, format!("interrupted {interrupted} times; not re-run again"))
            }
        }
        Some(SessionPhase::Queued) => {
            status.phase = AssignmentPhase::Queued;
            ready(Unknown, reason::QUEUED, format!("execution generation {execution_generation} queued for a slot"))
        }
        Some(SessionPhase::Running) => {
            status.phase = AssignmentPhase::Running;
            ready(Unknown, reason::RUNNING, latest.map(|s| s.message.clone()).unwrap_or_default())
        }
        Some(SessionPhase::Succeeded) => {
            status.phase = AssignmentPhase::Succeeded;
            let message = latest.map(|s| s.message.clone()).unwrap_or_default();
            let (why, message) = match &observed.proposal {
                None => (reason::NO_CHANGES, message),
                Some(proposal) => review(proposal, message),
            };
            ready(True, why, message)
        }
        Some(SessionPhase::Failed) if waiting.is_some() => {
            status.phase = AssignmentPhase::Pending;
            let (cause, wait, left) = waiting.unwrap_or((SessionCause::RuntimeError, FIRST_WAIT, FIRST_WAIT));
            let message = latest.map(|s| s.message.clone()).unwrap_or_default();
            let whose = match cause.blame() {
                Blame::Configuration => "a configuration error",
                _ => "not the agent's failure",
            };
            match (&observed.adapter_ready, &observed.refused) {
                (Err(why), _) if left.is_zero() => ready(False, reason::ADAPTER_NOT_READY, why.clone()),
                (Ok(()), Some(decision)) if left.is_zero() => refused(&mut status, decision),
                _ if left.is_zero() => {
                    changes.push(Change::StartExecution { attempt: next_attempt });
                    ready(False, cause.as_str(), format!("{message}; {whose}, so no attempt is used: trying again now"))
                }
                _ => ready(
                    False,
                    cause.as_str(),
                    format!("{message}; {whose}, so no attempt is used: trying again {}s after it", wait.as_secs()),
                ),
            }
        }
        Some(SessionPhase::Failed) if latest.is_some_and(not_the_agents) && unblamed_reruns_spent(observed) => {
            status.phase = AssignmentPhase::Failed;
            let session = latest.expect("a latest session");
            let cause = session.cause.map_or(reason::FAILED, |cause| cause.as_str());
            ready(
                False,
                cause,
                format!(
                    "{}; failed {} times in a row for causes after its container existed, not tried again (`roundtable reconcile --rerun` runs it afresh)",
                    session.message,
                    MAX_UNBLAMED_RERUNS + 1
                ),
            )
        }
        Some(SessionPhase::Failed) if latest.is_some_and(gated) => match &observed.refused {
            Some(decision) => refused(&mut status, decision),
            None => {
                changes.push(Change::StartExecution { attempt: next_attempt });
                status.phase = AssignmentPhase::Queued;
                ready(Unknown, reason::ADMITTED, "the spawn-path gates admit it now; starting".into())
            }
        },
        // A retry would get a fresh budget: spending it once is the whole budget.
        Some(SessionPhase::Failed) if latest.is_some_and(|s| s.cause == Some(SessionCause::BudgetExceeded)) => {
            status.phase = AssignmentPhase::Failed;
            let message = latest.map(|s| s.message.clone()).unwrap_or_default();
            ready(
                False,
                SessionCause::BudgetExceeded.as_str(),
                format!("{message}; not retried, a retry would spend the budget again"),
            )
        }
        Some(SessionPhase::Failed) if failed <= spec.retries as usize => {
            changes.push(Change::StartExecution { attempt: next_attempt });
            status.phase = AssignmentPhase::Queued;
            let why = latest.map(|s| s.message.clone()).unwrap_or_default();
            ready(Unknown, reason::RETRYING, format!("retry {failed} of {}: {why}", spec.retries))
        }
        Some(SessionPhase::Failed) => {
            status.phase = AssignmentPhase::Failed;
            let session = latest.expect("a latest session");
            let cause = session.cause.map_or(reason::FAILED, |cause| cause.as_str());
            ready(False, cause, session.message.clone())
        }
        // Cancelled (by a suspend that was lifted) or nothing yet: start.
        _ => match &observed.adapter_ready {
            Err(why) => {
                status.phase = AssignmentPhase::Pending;
                let settled = if observed.adapter_settling { Unknown } else { False };
                ready(settled, reason::ADAPTER_NOT_READY, why.clone())
            }
            Ok(()) => match &observed.refused {
                Some(decision) => refused(&mut status, decision),
                None => {
                    changes.push(Change::StartExecution { attempt: next_attempt });
                    status.phase = AssignmentPhase::Queued;
                    ready(
                        Unknown,
                        reason::QUEUED,
                        format!("execution generation {execution_generation} queued for a slot"),
                    )
                }
            },
        },
    };
    if observed.held_by.is_some() {
        changes.retain(|c| !matches!(c, Change::StartExecution { .. } | Change::InterruptSession(_)));
    }
    // An execution started on a full disk would fail half-way (its records, its patch file).
    if observed.store_full.is_some() {
        changes.retain(|c| !matches!(c, Change::StartExecution { .. }));
    }
    (vec![condition], status, changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(suspend: bool, retries: u32) -> AssignmentSpec {
        let text = format!(
            "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata: {{name: a}}\nspec:\n  adapter: generic\n  task: {{id: T, prompt: p}}\n  readablePaths: [a]\n  suspend: {suspend}\n  retries: {retries}\n"
        );
        match roundtable_specs::parse_file("a.yaml", "a.yaml", &text).objects.remove(0).spec {
            roundtable_specs::Spec::Assignment(spec) => spec,
            _ => unreachable!("an Assignment"),
        }
    }

    fn session(phase: &str, attempt: i64, run: &str) -> SessionRecord {
        SessionRecord {
            id: format!("s{attempt}"),
            phase: phase.parse().expect("a phase"),
            attempt,
            controller_run: run.into(),
            ..Default::default()
        }
    }

    fn observed(sessions: Vec<SessionRecord>, active: bool) -> AssignmentObserved {
        AssignmentObserved {
            sessions,
            proposal: None,
            active,
            active_generation: active.then_some((false, 1)),
            controller_run: Some("run".into()),
            lease: None,
            held_by: None,
            adapter: None,
            adapter_ready: Ok(()),
            adapter_settling: false,
            refused: None,
            store_full: None,
            latest_ended_ago: None,
        }
    }

    fn changes(spec: &AssignmentSpec, observed: &AssignmentObserved) -> (String, Vec<Change>) {
        let (conditions, status, changes) = decide(spec, observed, 1, 1);
        (format!("{}:{}", status.phase, conditions[0].reason), changes)
    }

    #[test]
    fn a_session_that_spent_its_budget_is_not_retried() {
        let spent = SessionRecord { cause: Some(SessionCause::BudgetExceeded), ..session("Failed", 1, "run") };
        assert_eq!(changes(&spec(false, 3), &observed(vec![spent], false)), ("Failed:BudgetExceeded".into(), vec![]));
        let failed = SessionRecord { cause: Some(SessionCause::Exited), ..session("Failed", 1, "run") };
        assert_eq!(changes(&spec(false, 3), &observed(vec![failed], false)).0, "Queued:Retrying");
    }

    #[test]
    fn a_failure_that_is_not_the_agents_spends_no_attempt_and_is_tried_again_after_a_wait() {
        let failed = |cause: SessionCause, attempt: i64| SessionRecord {
            cause: Some(cause),
            message: format!("{cause} at attempt {attempt}"),
            ..session("Failed", attempt, "run")
        };
        let ended = |sessions: Vec<SessionRecord>, ago: u64| AssignmentObserved {
            latest_ended_ago: Some(Duration::from_secs(ago)),
            ..observed(sessions, false)
        };
        let no_retries = spec(false, 0);
        // The engine down at start: no attempt spent, the Assignment waits, then tries again.
        let down = vec![failed(SessionCause::EngineUnavailable, 1)];
        let (conditions, status, started) = decide(&no_retries, &ended(down.clone(), 1), 1, 1);
        assert_eq!((status.phase, conditions[0].reason.as_str()), (AssignmentPhase::Pending, "EngineUnavailable"));
        assert!(started.is_empty(), "{started:?}");
        assert!(conditions[0].message.contains("no attempt is used: trying again 5s after it"), "{conditions:?}");
        assert_eq!(waiting_for_the_cause(&ended(down.clone(), 1)).map(|w| w.2), Some(Duration::from_secs(4)));
        assert_eq!(
            changes_of(decide(&no_retries, &ended(down.clone(), 5), 1, 1)),
            vec![Change::StartExecution { attempt: 2 }]
        );
        // The wait doubles with each such failure in a row, to at most two minutes.
        let thrice: Vec<SessionRecord> = (1..=3).rev().map(|a| failed(SessionCause::EngineUnavailable, a)).collect();
        assert_eq!(waiting_for_the_cause(&ended(thrice, 0)).map(|w| w.1), Some(Duration::from_secs(20)));
        let many: Vec<SessionRecord> = (1..=30).rev().map(|a| failed(SessionCause::EngineUnavailable, a)).collect();
        assert_eq!(waiting_for_the_cause(&ended(many, 0)).map(|w| w.1), Some(LONGEST_WAIT));
        // A cause an agent could bring about (stopping its own sandbox reads as the engine
        // refusing the export) is tried again a bounded number of times, then fails.
        let stopped = |n: i64| (1..=n).rev().map(|a| failed(SessionCause::RuntimeError, a)).collect::<Vec<_>>();
        let fifth = ended(stopped(MAX_UNBLAMED_RERUNS as i64), 300);
        assert!(matches!(changes_of(decide(&no_retries, &fifth, 1, 1)).as_slice(), [Change::StartExecution { .. }]));
        let sixth = ended(stopped(MAX_UNBLAMED_RERUNS as i64 + 1), 300);
        let (conditions, status, started) = decide(&no_retries, &sixth, 1, 1);
        assert_eq!((status.phase, conditions[0].reason.as_str()), (AssignmentPhase::Failed, "RuntimeError"));
        assert!(started.is_empty(), "{started:?}");
        assert!(waiting_for_the_cause(&sixth).is_none());
        // A configuration error (a revision that does not exist) is the same.
        let misnamed = vec![failed(SessionCause::ProvisionFailed, 1)];
        let (conditions, _, started) = decide(&no_retries, &ended(misnamed, 0), 1, 1);
        assert_eq!(conditions[0].reason, "ProvisionFailed");
        assert!(conditions[0].message.contains("a configuration error, so no attempt is used"), "{conditions:?}");
        assert!(started.is_empty());
        // With the engine back, the agent's own failure is judged against a budget none of the
        // engine's failures spent: one retry allowed, one used.
        let one_retry = spec(false, 1);
        let then_agent = vec![
            failed(SessionCause::Exited, 3),
            failed(SessionCause::EngineUnavailable, 2),
            failed(SessionCause::EngineUnavailable, 1),
        ];
        assert_eq!(changes(&one_retry, &ended(then_agent.clone(), 0)).0, "Queued:Retrying");
        let twice_agent = [vec![failed(SessionCause::Exited, 4)], then_agent].concat();
        assert_eq!(changes(&one_retry, &ended(twice_agent, 0)), ("Failed:Exited".into(), vec![]));
        // The wait over but the Adapter not ready (its image gone): it waits for the Adapter.
        let gone = AssignmentObserved { adapter_ready: Err("image missing".into()), ..ended(down, 60) };
        assert_eq!(changes(&no_retries, &gone), ("Pending:AdapterNotReady".into(), vec![]));
    }

    #[test]
    fn an_adapter_not_reconciled_yet_is_waited_for_without_a_warning() {
        // Every first start reconciles some Assignments before their Adapter: Ready Unknown (an
        // event of type Normal), not False (a Warning).
        let first = AssignmentObserved {
            adapter_ready: Err("adapter generic is not reconciled yet".into()),
            adapter_settling: true,
            ..observed(vec![], false)
        };
        let (conditions, status, changes) = decide(&spec(false, 0), &first, 1, 1);
        assert_eq!((status.phase, conditions[0].status), (AssignmentPhase::Pending, ConditionStatus::Unknown));
        assert!(changes.is_empty());
        let broken = AssignmentObserved { adapter_settling: false, ..first };
        assert_eq!(decide(&spec(false, 0), &broken, 1, 1).0[0].status, ConditionStatus::False);
    }

    fn changes_of(decided: (Vec<Condition>, AssignmentStatus, Vec<Change>)) -> Vec<Change> {
        decided.2
    }

    #[test]
    fn every_cause_is_someones() {
        // The agent's own endings spend attempts; the engine's and the configuration's do not.
        for cause in SessionCause::ALL {
            let blame = cause.blame();
            let expected = match cause {
                SessionCause::Exited | SessionCause::TimedOut | SessionCause::OutOfMemory => Blame::Agent,
                SessionCause::EngineUnavailable | SessionCause::EngineLost => Blame::Environment,
                SessionCause::ProvisionFailed => Blame::Configuration,
                _ => blame,
            };
            assert_eq!(blame, expected, "{cause}");
        }
    }

    #[test]
    fn the_decision_table() {
        let cases: Vec<(AssignmentSpec, AssignmentObserved, &str, Vec<Change>)> = vec![
            (spec(false, 0), observed(vec![], false), "Queued:Queued", vec![Change::StartExecution { attempt: 1 }]),
            // An execution of an older generation still runs: it is superseded first.
            (
                spec(false, 0),
                AssignmentObserved { active_generation: Some((false, 0)), ..observed(vec![], true) },
                "Queued:Superseding",
                vec![Change::SupersedeExecution { by: 1 }],
            ),
            // The Assignment was deleted and declared again while its run went on: the earlier
            // object's run is cancelled, though its generation number is the same.
            (
                spec(false, 0),
                AssignmentObserved { active_generation: Some((true, 1)), ..observed(vec![], true) },
                "Queued:Superseding",
                vec![Change::SupersedeExecution { by: 1 }],
            ),
            (spec(false, 0), observed(vec![session("Running", 1, "run")], true), "Running:Running", vec![]),
            (
                spec(false, 0),
                observed(vec![session("Running", 1, "run")], false),
                "Queued:Rerunning",
                vec![Change::InterruptSession("s1".into()), Change::StartExecution { attempt: 2 }],
            ),
            (
                spec(true, 0),
                observed(vec![session("Running", 1, "run")], true),
                "Suspended:Suspended",
                vec![Change::CancelExecution],
            ),
            (
                spec(true, 0),
                observed(vec![session("Queued", 1, "run")], false),
                "Suspended:Suspended",
                vec![Change::CancelExecution],
            ),
            (spec(true, 0), observed(vec![], false), "Suspended:Suspended", vec![]),
            // Another live controller holds the lease: its running session is neither interrupted
            // nor re-run here, and a failed one is retried by whoever claims the lease.
            (
                spec(false, 0),
                AssignmentObserved {
                    held_by: Some("other".into()),
                    ..observed(vec![session("Running", 1, "other")], false)
                },
                "Running:Running",
                vec![],
            ),
            (
                spec(false, 0),
                AssignmentObserved { held_by: Some("other".into()), ..observed(vec![], false) },
                "Queued:Queued",
                vec![],
            ),
            // The store's disk is full: nothing starts until it has room.
            (
                spec(false, 0),
                AssignmentObserved { store_full: Some("full".into()), ..observed(vec![], false) },
                "Queued:Queued",
                vec![],
            ),
            (
                spec(false, 0),
                observed(vec![session("Cancelled", 1, "run")], false),
                "Queued:Queued",
                vec![Change::StartExecution { attempt: 2 }],
            ),
            (
                spec(false, 1),
                observed(vec![session("Failed", 1, "run")], false),
                "Queued:Retrying",
                vec![Change::StartExecution { attempt: 2 }],
            ),
            (
                spec(false, 1),
                observed(vec![session("Failed", 2, "run"), session("Failed", 1, "run")], false),
                "Failed:Failed",
                vec![],
            ),
            (spec(false, 0), observed(vec![session("Succeeded", 1, "run")], false), "Succeeded:NoChanges", vec![]),
            (
                spec(false, 0),
                observed(vec![session("Running", 1, "earlier")], false),
                "Queued:Rerunning",
                vec![Change::InterruptSession("s1".into()), Change::StartExecution { attempt: 2 }],
            ),
            // The engine went away under a session of this run: re-run outside the retries budget.
            (
                spec(false, 0),
                observed(vec![session("Interrupted", 1, "run")], false),
                "Queued:Rerunning",
                vec![Change::StartExecution { attempt: 2 }],
            ),
            (
                spec(false, 0),
                observed(
                    vec![
                        session("Interrupted", 3, "run"),
                        session("Interrupted", 2, "run"),
                        session("Interrupted", 1, "run"),
                    ],
                    false,
                ),
                "Failed:Interrupted",
                vec![],
            ),
        ];
        for (spec, observed, expected, expected_changes) in cases {
            let (phase, changes) = changes(&spec, &observed);
            assert_eq!((phase.as_str(), changes), (expected, expected_changes), "{:?}", observed.sessions);
        }
    }

    fn refusal() -> GateDecision {
        GateDecision {
            gate: roundtable_specs::admission::GateKind::Admission,
            adapter: "generic".into(),
            verdict: roundtable_specs::admission::Verdict::Refuse,
            reason: Some("no_receipt".into()),
            message: "the evidence is green but no receipt is sealed".into(),
            remediation: "run `roundtable admission check generic --seal`".into(),
            receipt: None,
        }
    }

    #[test]
    fn a_refusal_under_enforce_starts_nothing_until_the_gates_admit() {
        let refused = AssignmentObserved { refused: Some(refusal()), ..observed(vec![], false) };
        let (conditions, status, changes) = decide(&spec(false, 0), &refused, 1, 1);
        assert_eq!(
            (status.phase, conditions[0].reason.as_str(), changes),
            (AssignmentPhase::Refused, "AdmissionRefused", vec![])
        );
        assert!(conditions[0].message.contains("admission check generic --seal"), "{}", conditions[0].message);
        // The spawn path refused it (the gates changed between the look and the spawn): it stays
        // refused while they refuse, and starts once they admit, outside the retries budget.
        let mut gated = session("Failed", 1, "run");
        gated.cause = Some(SessionCause::AdmissionRefused);
        let still = AssignmentObserved { refused: Some(refusal()), ..observed(vec![gated.clone()], false) };
        assert_eq!(decide(&spec(false, 0), &still, 1, 1).1.phase, AssignmentPhase::Refused);
        let (_, status, changes) = decide(&spec(false, 0), &observed(vec![gated], false), 1, 1);
        assert_eq!((status.phase, changes), (AssignmentPhase::Queued, vec![Change::StartExecution { attempt: 2 }]));
    }

    #[test]
    fn a_rerun_says_why_the_session_was_interrupted() {
        let mut lost = session("Interrupted", 1, "run");
        lost.message = "the container engine at unix:///x went away".into();
        let (conditions, _, _) = decide(&spec(false, 0), &observed(vec![lost], false), 1, 1);
        assert_eq!(conditions[0].message, "the container engine at unix:///x went away; re-running (1 of 2)");
        let (conditions, _, _) =
            decide(&spec(false, 0), &observed(vec![session("Running", 1, "earlier")], false), 1, 1);
        assert_eq!(conditions[0].message, "session interrupted by a controller restart; re-running (1 of 2)");
    }
}
