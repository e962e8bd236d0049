//! Object identity and run reuse on the real engine, as a GitOps user meets them: a recreated
//! Assignment runs with its own spec, a superseded proposal stays superseded, a rollback of the
//! run fields (`git stash`) reuses the earlier result and runs nothing, `reconcile --rerun` runs.

use std::path::Path;

use serde_json::Value;

use crate::support::{
    API, ShowLogOnPanic, commit_all, ensure_test_images, json, roundtable, start_daemon, stderr, stdout, wait_until,
    write,
};

const ADAPTER: &str = "kind: Adapter\nmetadata: {name: generic}\nspec:\n  image: roundtable-test/agent:latest\n  resources: {memory: 256Mi, cpus: 1, pids: 64, workspaceSize: 32Mi, tmpSize: 16Mi}\n";

fn assignment(name: &str, task: &str, script: &str) -> String {
    format!(
        "{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: generic\n  task:\n    id: {task}\n    prompt: |\n      {script}\n  source: {{repo: ., revision: main}}\n  readablePaths: [README.md]\n"
    )
}

/// A committed project with the adapter in its own file, so an Assignment's file can go alone.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "README.md", "# Project\n");
    write(dir.path(), ".roundtable/adapter.yaml", &format!("{API}\n{ADAPTER}"));
    commit_all(dir.path());
    dir
}

fn items(root: &Path, what: &str) -> Vec<Value> {
    json(&roundtable(root, &[what, "list", "--format", "json"]))["items"].as_array().cloned().unwrap_or_default()
}

fn sessions_of(root: &Path, assignment: &str) -> Vec<Value> {
    items(root, "sessions").into_iter().filter(|s| s["assignment"] == assignment).collect()
}

fn proposal(root: &Path, id: &str) -> Value {
    items(root, "proposals").into_iter().find(|p| p["id"] == id).unwrap_or_else(|| panic!("no proposal {id}"))
}

fn patch(root: &Path, id: &str) -> String {
    stdout(&roundtable(root, &["proposals", "export", id]))
}

fn status_row(root: &Path, name: &str) -> Option<Value> {
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    status["items"].as_array()?.iter().find(|r| r["kind"] == "Assignment" && r["name"] == name).cloned()
}

/// Waits for `count` sessions of `assignment`, the newest finished; returns the newest.
async fn finished_session(root: &Path, assignment: &str, count: usize) -> Value {
    let done = || {
        let sessions = sessions_of(root, assignment);
        sessions.len() == count && sessions[0]["phase"] == "Succeeded"
    };
    wait_until(&format!("session {count} of {assignment} to succeed"), done).await;
    sessions_of(root, assignment).remove(0)
}

/// The pending proposal the newest session of `assignment` made.
fn proposal_of(root: &Path, session: &Value) -> Value {
    let id = session["id"].as_str().expect("session id");
    items(root, "proposals").into_iter().find(|p| p["session"] == id).unwrap_or_else(|| panic!("no proposal of {id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_assignment_runs_its_own_spec_and_a_superseded_proposal_stays_superseded() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = project();
    let root = project.path();
    let spec = ".roundtable/new-task.yaml";
    write(root, spec, &assignment("new-task", "haiku", "echo haiku >> README.md"));
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    let first = proposal_of(root, &finished_session(root, "new-task", 1).await);
    write(root, spec, &assignment("new-task", "haiku", "echo haiku, edited >> README.md"));
    let second = proposal_of(root, &finished_session(root, "new-task", 2).await);
    assert_eq!(proposal(root, first["id"].as_str().expect("id"))["state"], "superseded");

    // `git rm`: the Assignment goes; its proposals are kept as they were.
    std::fs::remove_file(root.join(spec)).expect("rm");
    wait_until("the Assignment to be forgotten", || status_row(root, "new-task").is_none()).await;
    assert_eq!(proposal(root, first["id"].as_str().expect("id"))["state"], "superseded", "turned pending again");
    assert_eq!(proposal(root, second["id"].as_str().expect("id"))["state"], "pending");

    // A different Assignment under the same name: it runs, with its own spec and proposal.
    write(root, spec, &assignment("new-task", "limerick", "echo limerick >> README.md"));
    let third = finished_session(root, "new-task", 3).await;
    assert_eq!(third["executionGeneration"], 1, "a new object starts at generation 1");
    let own = proposal_of(root, &third);
    assert!(patch(root, own["id"].as_str().expect("id")).contains("+limerick"), "its own patch");
    // The row follows the session's end by one reconcile of the Assignment (the manager wakes
    // it), so it is waited for; what it must never name is the deleted object's proposal.
    let own_id = own["id"].as_str().expect("id");
    let names_own =
        || status_row(root, "new-task").is_some_and(|row| row["message"].as_str().is_some_and(|m| m.contains(own_id)));
    wait_until("status to name the new object's own proposal", names_own).await;
    let row = status_row(root, "new-task").expect("the row");
    let message = row["message"].as_str().unwrap_or_default();
    assert!(!message.contains(second["id"].as_str().expect("id")), "status shows the deleted one's: {row:#}");
    let described = stdout(&roundtable(root, &["describe", "Assignment/new-task"]));
    assert!(!described.contains("haiku"), "describe shows the deleted object's spec or events:\n{described}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_of_the_run_fields_reuses_the_earlier_result_and_rerun_runs_the_agent() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = project();
    let root = project.path();
    let spec = ".roundtable/fix.yaml";
    let before = assignment("fix", "fix", "echo first >> README.md");
    write(root, spec, &before);
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    let ran = finished_session(root, "fix", 1).await;
    let first = proposal_of(root, &ran);
    write(root, spec, &assignment("fix", "fix", "echo second >> README.md"));
    let second = proposal_of(root, &finished_session(root, "fix", 2).await);

    // `git stash`: the spec is back to run fields that already ran at this commit.
    write(root, spec, &before);
    let reused = finished_session(root, "fix", 3).await;
    assert_eq!(reused["executionGeneration"], 3);
    assert_eq!(reused["detail"]["reused"]["session"], ran["id"], "{reused:#}");
    assert_eq!(reused["detail"]["reused"]["executionGeneration"], 1);
    assert!(reused["detail"].get("agent").is_none(), "no agent ran: {reused:#}");
    assert!(reused["exitCode"].is_null(), "no container ran: {reused:#}");
    let copy = proposal_of(root, &reused);
    assert_eq!(copy["reusedFrom"], first["id"]);
    assert_eq!(copy["state"], "pending");
    assert_eq!(patch(root, copy["id"].as_str().expect("id")), patch(root, first["id"].as_str().expect("id")));
    for earlier in [&first, &second] {
        assert_eq!(proposal(root, earlier["id"].as_str().expect("id"))["state"], "superseded", "{earlier:#}");
    }
    let row = status_row(root, "fix").expect("the row");
    assert!(row["message"].as_str().unwrap_or_default().contains("reused the proposal of generation 1"), "{row:#}");

    // `--rerun` runs the agent again, in a generation of its own.
    let out = roundtable(root, &["reconcile", "--rerun", "Assignment/fix"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("execution generation 4 runs the agent afresh"), "{}", stdout(&out));
    let fresh = finished_session(root, "fix", 4).await;
    assert_eq!(fresh["executionGeneration"], 4);
    assert!(fresh["detail"].get("reused").is_none(), "{fresh:#}");
    assert_eq!(fresh["exitCode"], 0, "the agent ran: {fresh:#}");
    assert_eq!(proposal_of(root, &fresh)["state"], "pending");
    assert_eq!(proposal(root, copy["id"].as_str().expect("id"))["state"], "superseded");
    let refused = roundtable(root, &["reconcile", "--rerun", "Adapter/generic"]);
    assert!(!refused.status.success() && stderr(&refused).contains("only an Assignment"), "{}", stderr(&refused));
}
