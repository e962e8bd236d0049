//! An agent that stops its own sandbox (`kill -TERM 1`: the init runs as the agent's user) makes
//! the export fail in a way that reads as the engine's (`RuntimeError`). Failures that are not the
//! agent's spend no attempt, so before the cap such an agent got endless fresh runs (each with a
//! fresh budget). Causes that arise only before any container exists are still waited out without
//! end; the others are tried again a bounded number of times, then the execution fails.

use std::time::Duration;

use roundtable_reconcilers::assignment::{AssignmentObserved, MAX_UNBLAMED_RERUNS, decide};
use roundtable_reconcilers::backend::Change;
use roundtable_specs::session::{AssignmentPhase, SessionCause, SessionPhase};
use roundtable_store::SessionRecord;

fn spec() -> roundtable_specs::assignment::AssignmentSpec {
    let text = "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata: {name: a}\nspec:\n  adapter: generic\n  task: {id: T, prompt: 'kill -TERM 1'}\n  readablePaths: [README.md]\n  retries: 0\n";
    match roundtable_specs::parse_file("a.yaml", "a.yaml", text).objects.remove(0).spec {
        roundtable_specs::Spec::Assignment(spec) => spec,
        _ => unreachable!("an Assignment"),
    }
}

/// What the reconciler sees after `failures` sessions ended with `cause`, the latest long ago.
fn after(failures: i64, cause: SessionCause) -> AssignmentObserved {
    let sessions = (1..=failures)
        .rev()
        .map(|attempt| SessionRecord {
            id: format!("s{attempt}"),
            attempt,
            phase: SessionPhase::Failed,
            cause: Some(cause),
            controller_run: "run".into(),
            ..Default::default()
        })
        .collect();
    AssignmentObserved {
        sessions,
        proposal: None,
        active: false,
        active_generation: None,
        controller_run: Some("run".into()),
        lease: None,
        held_by: None,
        adapter: None,
        adapter_ready: Ok(()),
        adapter_settling: false,
        refused: None,
        store_full: None,
        latest_ended_ago: Some(Duration::from_secs(3600)),
    }
}

#[test]
fn an_agent_that_stops_its_own_sandbox_does_not_get_endless_runs() {
    let spec = spec();
    let runs = |observed: &AssignmentObserved| {
        decide(&spec, observed, 1, 1).2.iter().any(|c| matches!(c, Change::StartExecution { .. }))
    };
    // The agent's own way out reads as the engine refusing a step: bounded.
    let mut runs_granted = 0;
    for failures in 1..=100 {
        if !runs(&after(failures, SessionCause::RuntimeError)) {
            break;
        }
        runs_granted += 1;
    }
    assert_eq!(runs_granted, MAX_UNBLAMED_RERUNS, "runs granted past `retries: 0`");
    let (_, status, _) = decide(&spec, &after(MAX_UNBLAMED_RERUNS as i64 + 1, SessionCause::RuntimeError), 1, 1);
    assert_eq!(status.phase, AssignmentPhase::Failed);
    // The same holds for the other causes an agent could bring about from inside.
    for cause in [SessionCause::SelfCheckFailed, SessionCause::McpUnavailable, SessionCause::EgressUnavailable] {
        assert!(!runs(&after(MAX_UNBLAMED_RERUNS as i64 + 1, cause)), "{cause}");
    }
    // An engine that cannot be reached at all is none of the agent's doing: waited out.
    assert!(runs(&after(100, SessionCause::EngineUnavailable)));
    assert!(runs(&after(100, SessionCause::ProvisionFailed)));
}
