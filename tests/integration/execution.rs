//! Executions end to end on the real engine: the daemon takes Assignments to sessions and
//! pending proposals; patches apply to their base commit (binary file, deletion, rename, mode
//! change); sensitive files never reach the container; failures, retries and timeouts are
//! recorded; nothing is left behind.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{
    API, ShowLogOnPanic, commit_all, ensure_test_images, git, is_root, json, nothing_left, one_assignment_project,
    roundtable, session_phases, start_daemon, stderr, stdout, wait_until, write,
};

fn assignment(name: &str, script: &str, extra: &str) -> String {
    format!(
        "{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: generic\n  task:\n    id: {name}\n    prompt: |\n      {script}\n  source: {{repo: ., revision: main}}\n  readablePaths: [README.md, docs/]\n{extra}---\n"
    )
}

/// A project repository with specs for every scenario, committed on `main`.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    write(root, "docs/old.md", "a file that moves\nwith enough lines\nfor git to call it a rename\n");
    write(root, "docs/remove.md", "going away\n");
    write(root, "docs/run.sh", "#!/bin/sh\necho run\n");
    write(root, "docs/.env.production", "API_TOKEN=must-not-leak\n");
    write(root, "docs/certs/server.key", "-----BEGIN PRIVATE KEY-----\n");
    write(root, "src/secret-plan.md", "outside the readable paths\n");
    let mut specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n  resources: {{memory: 256Mi, cpus: 1, pids: 64, workspaceSize: 64Mi, tmpSize: 32Mi}}\n---\n"
    );
    specs.push_str(&assignment(
        "shapes",
        "printf '\\000\\001\\002binary' > docs/logo.bin && rm docs/remove.md && mv docs/old.md docs/new.md && chmod +x docs/run.sh && echo 'Edited.' >> README.md",
        "",
    ));
    specs.push_str(&assignment(
        "listing",
        "find /roundtable/source /roundtable/workspace /tmp -type f | sort > listing.txt; cat /roundtable/task.json > brief.json; stat -c 'sockets %a %g' /run/roundtable >> listing.txt",
        "",
    ));
    specs.push_str(&assignment("failing", "echo about to fail >&2; exit 3", "  retries: 1\n"));
    specs.push_str(&assignment("slow", "sleep 60", "  timeout: 2s\n"));
    specs.push_str(&assignment("chatty", "yes xxxxxxxxxxxxxxx | head -c 3000000; echo done >&2", ""));
    specs.push_str(&assignment("hog", "memory-hog", ""));
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assignments_become_sessions_and_pending_proposals() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = project();
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &["--max-executions", "2"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    // Wait until every Assignment has finished: shapes and listing succeed, failing fails twice
    // (one retry), slow times out.
    let deadline = Instant::now() + Duration::from_secs(120);
    let sessions = loop {
        let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
        let items = sessions["items"].as_array().cloned().unwrap_or_default();
        let finished = |name: &str, phase: &str, count: usize| {
            items.iter().filter(|s| s["assignment"] == name && s["phase"] == phase).count() >= count
        };
        if finished("shapes", "Succeeded", 1)
            && finished("listing", "Succeeded", 1)
            && finished("failing", "Failed", 2)
            && finished("slow", "Failed", 1)
            && finished("chatty", "Succeeded", 1)
            && finished("hog", "Failed", 1)
        {
            break items;
        }
        assert!(Instant::now() < deadline, "executions did not finish: {sessions:#}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    // A finished session wakes its Assignment's reconcile, which records its health: let the
    // daemon get there before it is stopped.
    wait_until("the Assignments' health to be recorded", || {
        let status = json(&roundtable(root, &["status", "--format", "json"]));
        let health = |name: &str| {
            status["items"]
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["name"] == name).cloned())
                .map(|r| r["health"].clone())
        };
        health("shapes") == Some("Healthy".into()) && health("failing") == Some("Unhealthy".into())
    })
    .await;
    drop(daemon);

    // Failures, retries and the timeout are recorded with their causes.
    let failing: Vec<&Value> = sessions.iter().filter(|s| s["assignment"] == "failing").collect();
    assert_eq!(failing.len(), 2, "retries: 1 means two attempts");
    assert!(failing.iter().all(|s| s["exitCode"] == 3 && s["cause"] == "Exited"), "{failing:#?}");
    // Its message says how to read what it said, naming the session.
    for session in &failing {
        let hint = format!(
            "the agent exited with code 3; its output: `roundtable sessions logs {}`",
            session["id"].as_str().unwrap_or("?")
        );
        assert_eq!(session["message"].as_str(), Some(hint.as_str()), "{session:#}");
    }
    let slow = sessions.iter().find(|s| s["assignment"] == "slow").expect("slow");
    assert_eq!(slow["cause"], "TimedOut", "{slow:#}");
    let hog = sessions.iter().find(|s| s["assignment"] == "hog").expect("hog");
    assert_eq!(hog["cause"], "OutOfMemory", "the engine's oom event, not a plain exit: {hog:#}");
    let chatty = sessions.iter().find(|s| s["assignment"] == "chatty").expect("chatty");
    assert_eq!(
        (chatty["stdoutBytes"].as_i64(), chatty["stdoutTruncated"].as_bool()),
        (Some(3_000_000), Some(true)),
        "{chatty:#}"
    );
    assert_eq!(chatty["stderrTruncated"], false);
    let captured = roundtable(root, &["sessions", "logs", chatty["id"].as_str().expect("id")]);
    assert!(stdout(&captured).contains("(truncated at the capture limit)"));
    assert!(captured.stdout.len() < 1_100_000, "capped at 1 MiB: {}", captured.stdout.len());
    let logs = roundtable(root, &["sessions", "logs", failing[0]["id"].as_str().expect("id")]);
    assert!(stdout(&logs).contains("about to fail"), "{}", stdout(&logs));

    // The self-check passed before each agent, and the export happened while paused.
    let shapes = sessions.iter().find(|s| s["assignment"] == "shapes").expect("shapes");
    assert_eq!(shapes["detail"]["selfCheck"]["ok"], true, "{shapes:#}");
    assert_eq!(shapes["detail"]["pausedForExport"], true);

    // Exactly the proposals of the succeeded sessions.
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let items = proposals["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "{proposals:#}");
    assert!(items.iter().all(|p| p["assignment"] == "shapes" || p["assignment"] == "listing"));
    let proposal = |name: &str| items.iter().find(|p| p["assignment"] == name).cloned().expect(name);

    // The shapes patch applies to its base commit and reproduces the agent's tree.
    let shapes_proposal = proposal("shapes");
    assert!(
        shapes_proposal["flags"]
            .as_array()
            .is_some_and(|f| f.iter().all(|f| !f.as_str().unwrap_or("").starts_with("protected")))
    );
    let patch = roundtable(root, &["proposals", "export", shapes_proposal["id"].as_str().expect("id")]);
    assert!(patch.status.success());
    let checkout = tempfile::tempdir().expect("tempdir");
    git(checkout.path(), &["clone", "-q", root.to_str().expect("utf-8"), "."]);
    git(checkout.path(), &["checkout", "-q", shapes_proposal["baseCommit"].as_str().expect("base")]);
    // Beside the checkout, not in it (an untracked file would change the tree), and removed
    // with its own folder.
    let patch_dir = tempfile::tempdir().expect("tempdir");
    let patch_file = patch_dir.path().join("shapes.patch");
    std::fs::write(&patch_file, &patch.stdout).expect("write patch");
    let patch_arg = patch_file.to_str().expect("utf-8");
    git(checkout.path(), &["apply", "--check", patch_arg]);
    git(checkout.path(), &["apply", patch_arg]);
    let applied = checkout.path();
    assert_eq!(std::fs::read(applied.join("docs/logo.bin")).expect("binary"), b"\x00\x01\x02binary");
    assert!(!applied.join("docs/remove.md").exists() && !applied.join("docs/old.md").exists());
    assert!(std::fs::read_to_string(applied.join("docs/new.md")).expect("renamed").contains("rename"));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(applied.join("docs/run.sh")).expect("run.sh").permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "the mode change applies");
    assert_eq!(std::fs::read_to_string(applied.join("README.md")).expect("readme"), "# Project\nEdited.\n");
    let shown = stdout(&roundtable(root, &["proposals", "show", shapes_proposal["id"].as_str().expect("id")]));
    assert!(shown.contains("rename from docs/old.md") && shown.contains("GIT binary patch"), "{shown}");

    // What the agent could see: exactly the manifest, never a sensitive file.
    let listing_patch =
        stdout(&roundtable(root, &["proposals", "export", proposal("listing")["id"].as_str().expect("id")]));
    for secret in [".env.production", "server.key", "secret-plan.md", "/.git/"] {
        assert!(!listing_patch.contains(secret), "{secret} reached the container:\n{listing_patch}");
    }
    for provided in
        ["/roundtable/source/README.md", "/roundtable/source/docs/old.md", "/roundtable/workspace/docs/run.sh"]
    {
        assert!(listing_patch.contains(provided), "{provided} missing:\n{listing_patch}");
    }
    let listing_session = sessions.iter().find(|s| s["assignment"] == "listing").expect("listing");
    let manifest: Vec<&str> = listing_session["detail"]["manifest"]
        .as_array()
        .expect("manifest")
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert_eq!(manifest, ["README.md", "docs/old.md", "docs/remove.md", "docs/run.sh"]);

    // Status reflects how each ended; nothing labelled is left in the engine.
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    let row = |name: &str| status["items"].as_array().and_then(|rows| rows.iter().find(|r| r["name"] == name).cloned());
    assert_eq!(row("shapes").expect("shapes")["health"], "Healthy");
    assert_eq!(row("failing").expect("failing")["health"], "Unhealthy");
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let leftovers = engine.labelled(&project_id).await.expect("list");
    assert!(leftovers.is_empty(), "labelled resources left behind: {leftovers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_assignments_queue_behind_four_slots_and_each_runs_once() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let mut specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n  resources: {{memory: 128Mi, cpus: 0.5, pids: 32, workspaceSize: 16Mi, tmpSize: 16Mi}}\n---\n"
    );
    for i in 0..20 {
        specs.push_str(&format!(
            "{API}\nkind: Assignment\nmetadata: {{name: task-{i}}}\nspec:\n  adapter: generic\n  task: {{id: T-{i}, prompt: 'sleep 1; echo {i} > out-{i}.txt'}}\n  readablePaths: [README.md]\n---\n"
        ));
    }
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &["--max-executions", "4"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut saw_queued = false;
    let mut saw_queued_session = false;
    let mut max_running = 0;
    loop {
        let status = json(&roundtable(root, &["status", "--format", "json"]));
        let rows = status["items"].as_array().cloned().unwrap_or_default();
        saw_queued |= rows.iter().any(|r| {
            r["kind"] == "Assignment"
                && r["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["reason"] == "Queued"))
        });
        let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
        let items = sessions["items"].as_array().cloned().unwrap_or_default();
        let queued_sessions = items.iter().any(|s| s["phase"] == "Queued");
        max_running = max_running.max(items.iter().filter(|s| s["phase"] == "Running").count());
        saw_queued_session |= queued_sessions;
        // The Adapter stays reconciled and healthy meanwhile.
        let adapter = rows.iter().find(|r| r["kind"] == "Adapter").cloned().unwrap_or_default();
        assert_ne!(adapter["health"], "Stalled", "{adapter:#}");
        if items.iter().filter(|s| s["phase"] == "Succeeded").count() == 20 {
            assert_eq!(items.len(), 20, "each execution generation runs exactly once");
            break;
        }
        assert!(Instant::now() < deadline, "not all 20 finished: {sessions:#}");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    drop(daemon);
    assert!(saw_queued, "status showed no Assignment waiting for a slot");
    assert!(saw_queued_session, "no session was ever Queued");
    assert!(max_running <= 4, "{max_running} ran at once with --max-executions 4");
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    assert_eq!(proposals["items"].as_array().map(Vec::len), Some(20), "one proposal per Assignment");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_removal_cancel_a_running_execution() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let adapter =
        format!("{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n");
    let long = |suspend: bool| {
        format!(
            "{API}\nkind: Assignment\nmetadata: {{name: long}}\nspec:\n  adapter: generic\n  task: {{id: L, prompt: 'sleep 120'}}\n  readablePaths: [README.md]\n  suspend: {suspend}\n"
        )
    };
    write(root, ".roundtable/adapter.yaml", &adapter);
    write(root, ".roundtable/long.yaml", &long(false));
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the first session to run", || session_phases(root, "long") == ["Running"]).await;

    // suspend: true cancels it (pause, then kill) and starts nothing.
    write(root, ".roundtable/long.yaml", &long(true));
    wait_until("the cancel", || session_phases(root, "long") == ["Cancelled"]).await;
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    let row =
        status["items"].as_array().and_then(|rows| rows.iter().find(|r| r["name"] == "long").cloned()).expect("row");
    assert!(row["conditions"].to_string().contains("Suspended"), "{row:#}");

    // Resumed: a new attempt of the same execution generation runs.
    write(root, ".roundtable/long.yaml", &long(false));
    wait_until("the second attempt", || session_phases(root, "long").first().is_some_and(|p| p == "Running")).await;
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let attempts: Vec<(i64, i64)> = sessions["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|s| (s["executionGeneration"].as_i64().unwrap_or(0), s["attempt"].as_i64().unwrap_or(0)))
        .collect();
    assert_eq!(attempts, [(1, 2), (1, 1)], "suspend is not a run field: same execution generation");

    // Removing the Assignment cancels its execution and cleans up.
    std::fs::remove_file(root.join(".roundtable/long.yaml")).expect("remove");
    wait_until("the cancel on removal", || session_phases(root, "long").first().is_some_and(|p| p == "Cancelled"))
        .await;
    nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_controller_interrupts_then_reruns_and_proposes_once() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = one_assignment_project("slow-edit", "sleep 3; echo edited >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let mut first = start_daemon(root, &[], executions.path());
    wait_until("the first session to run", || session_phases(root, "slow-edit") == ["Running"]).await;
    // kill -9: no shutdown, no cleanup.
    first.0.kill().expect("kill -9");
    first.0.wait().expect("reap");
    drop(first);

    let _second = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the re-run to succeed", || session_phases(root, "slow-edit") == ["Succeeded", "Interrupted"]).await;
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    assert_eq!(proposals["items"].as_array().map(Vec::len), Some(1), "exactly one proposal: {proposals:#}");
    let patch = stdout(&roundtable(root, &["proposals", "export", proposals["items"][0]["id"].as_str().expect("id")]));
    assert!(patch.contains("+edited"), "{patch}");
    // The interrupted session's container and volumes are gone; only the re-run's are cleaned up too.
    nothing_left(&engine, root).await;
}

/// Regression: `source.repo` was checked lexically only, so a symbolic link inside the project
/// could hand an agent another repository on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_repo_that_resolves_outside_the_project_root_starts_nothing() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let other = tempfile::tempdir().expect("tempdir");
    write(other.path(), "README.md", "another team's repository\n");
    commit_all(other.path());
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    std::os::unix::fs::symlink(other.path(), root.join("linked")).expect("symlink");
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n---\n{}",
        assignment("escape", "cat README.md", "")
            .replace("{repo: ., revision: main}", "{repo: linked, revision: main}")
            .replace("[README.md, docs/]", "[README.md]")
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    assert!(roundtable(root, &["validate"]).status.success(), "lexically fine: the link is only seen when resolved");

    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the execution to be refused", || session_phases(root, "escape") == ["Failed"]).await;
    drop(daemon);
    let session = json(&roundtable(root, &["sessions", "list", "--format", "json"]))["items"][0].clone();
    assert_eq!(session["cause"], "SourceOutsideProjectRoot", "{session:#}");
    let message = session["message"].as_str().unwrap_or_default();
    assert!(message.contains("outside the project root") && message.contains("linked"), "{message}");
    let exec_dir = executions.path().join(session["id"].as_str().expect("id"));
    assert!(!exec_dir.join("source").exists(), "nothing was exported");
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    assert!(engine.labelled(&project_id).await.expect("list").is_empty(), "no container was created");
    // The lexical form is refused before anything runs.
    std::fs::write(root.join(".roundtable/specs.yaml"), specs.replace("repo: linked", "repo: sub/../../elsewhere"))
        .expect("edit");
    let refused = roundtable(root, &["validate"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stdout(&refused).contains("spec.source.repo: \"sub/../../elsewhere\": climbs out of the project root"),
        "{}",
        stdout(&refused)
    );
}

/// Regression: SIGTERM used to end the daemon at once, leaving the agent's container running
/// with no timeout and its session `Running`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_cancels_a_running_execution_after_the_grace_then_the_next_start_reruns_it() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = one_assignment_project("stopped", "sleep 6; echo edited >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let mut first = start_daemon(root, &["--grace", "1s"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the first session to run", || session_phases(root, "stopped") == ["Running"]).await;
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    wait_until("its container", || {
        let listed = Command::new("docker")
            // The session's agent container (admission probes come and go before it).
            .args(["ps", "-q", "--filter", &format!("label=roundtable.dev/project={project_id}")])
            .args(["--filter", "label=roundtable.dev/purpose=agent"])
            .output()
            .expect("docker ps");
        !stdout(&listed).trim().is_empty()
    })
    .await;
    let stopped_at = Instant::now();
    let pid = first.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    let status = loop {
        if let Some(status) = first.0.try_wait().expect("wait") {
            break status;
        }
        assert!(stopped_at.elapsed() < Duration::from_secs(60), "the daemon did not stop");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = stopped_at.elapsed();
    drop(first);
    assert!(status.success(), "the daemon exits 0 after SIGTERM: {status:?}");
    assert!(took >= Duration::from_secs(1), "it waited the grace period first ({took:?})");
    // Nothing labelled is left, and the session says why it ended.
    assert!(engine.labelled(&project_id).await.expect("list").is_empty(), "cleaned up before exiting");
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let session = &sessions["items"][0];
    assert_eq!(session["phase"], "Interrupted", "{session:#}");
    assert_eq!(session["cause"], "ControllerStopped", "{session:#}");
    assert!(session["message"].as_str().is_some_and(|m| m.contains("re-run on the next start")), "{session:#}");
    let log = std::fs::read_to_string(executions.path().join("daemon.log")).expect("log");
    assert!(log.contains("executions_interrupted=1"), "{log}");

    // The next start re-runs it once and proposes once.
    let _second = start_daemon(root, &[], executions.path());
    wait_until("the re-run to succeed", || session_phases(root, "stopped") == ["Succeeded", "Interrupted"]).await;
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    assert_eq!(proposals["items"].as_array().map(Vec::len), Some(1), "exactly one proposal: {proposals:#}");
    nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_removes_what_is_past_retention_and_unowned() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = one_assignment_project("quick", "echo done >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    wait_until("the proposal", || session_phases(root, "quick") == ["Succeeded"]).await;
    drop(daemon);
    let session = json(&roundtable(root, &["sessions", "list", "--format", "json"]))["items"][0].clone();
    let exec_dir =
        std::path::PathBuf::from(format!("{}/{}", executions.path().display(), session["id"].as_str().expect("id")));
    assert!(exec_dir.is_dir());
    // A labelled leftover of an Assignment that no longer exists.
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let labels = roundtable_session_runtime::labels::Ownership {
        project: project_id.clone(),
        assignment: Some("gone".into()),
        session: "old".into(),
        controller_run: "old".into(),
        purpose: roundtable_session_runtime::labels::Purpose::Agent,
    }
    .labels();
    let volume = format!("rt-prune-test-{}", std::process::id());
    engine
        .docker()
        .create_volume(roundtable_docker::profile::tmpfs_volume(
            &volume,
            1 << 20,
            roundtable_docker::profile::TmpfsRoot::Agent,
            labels,
        ))
        .await
        .expect("volume");
    // And one of the declared Assignment, left by its finished session (as when the engine was
    // away while the session cleaned up).
    let left_by_finished = roundtable_session_runtime::labels::Ownership {
        project: project_id.clone(),
        assignment: Some("quick".into()),
        session: session["id"].as_str().expect("id").into(),
        controller_run: "old".into(),
        purpose: roundtable_session_runtime::labels::Purpose::Agent,
    }
    .labels();
    let orphan = format!("rt-prune-orphan-{}", std::process::id());
    engine
        .docker()
        .create_volume(roundtable_docker::profile::tmpfs_volume(
            &orphan,
            1 << 20,
            roundtable_docker::profile::TmpfsRoot::Agent,
            left_by_finished,
        ))
        .await
        .expect("volume");

    // status lists what retention would remove.
    let status = json(&roundtable(root, &["status", "--retention", "0s", "--format", "json"]));
    let pruning: Vec<&str> = status["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|r| r["message"].as_str().is_some_and(|m| m.starts_with("requires pruning")))
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(pruning, ["Volume", "Volume", "Session", "Proposal"], "{status:#}");
    assert!(status.to_string().contains("which ended Succeeded"), "{status:#}");
    // Within retention, only the leftovers are due.
    let kept = json(&roundtable(root, &["prune", "--dry-run", "--format", "json"]));
    let mut names: Vec<&str> =
        kept["items"].as_array().expect("items").iter().filter_map(|i| i["name"].as_str()).collect();
    names.sort();
    let mut expected = [orphan.as_str(), volume.as_str()];
    expected.sort();
    assert_eq!(names, expected, "{kept:#}");
    // Past a zero retention, everything finished is due; a dry run removes nothing.
    let due = json(&roundtable(root, &["prune", "--retention", "0s", "--dry-run", "--format", "json"]));
    let mut kinds: Vec<&str> =
        due["items"].as_array().expect("items").iter().filter_map(|i| i["kind"].as_str()).collect();
    kinds.sort();
    assert_eq!(kinds, ["Proposal", "Session", "Volume", "Volume"], "{due:#}");
    assert!(exec_dir.is_dir(), "a dry run removes nothing");
    // Pruning is an operator action anchored in the chain the daemon sealed: with its key.
    let key = executions.path().join("audit.key");
    let key = key.to_str().expect("utf-8 path");
    let pruned = roundtable(root, &["--audit-key", key, "prune", "--retention", "0s"]);
    assert!(pruned.status.success(), "{}{}", stdout(&pruned), stderr(&pruned));
    assert!(!exec_dir.exists());
    assert_eq!(json(&roundtable(root, &["sessions", "list", "--format", "json"]))["items"], serde_json::json!([]));
    assert_eq!(json(&roundtable(root, &["proposals", "list", "--format", "json"]))["items"], serde_json::json!([]));
    assert!(engine.labelled(&project_id).await.expect("list").is_empty());
    assert!(
        stdout(&roundtable(root, &["--audit-key", key, "prune", "--retention", "0s"])).contains("Nothing to prune.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_agents_harm_nothing_and_their_tricks_are_recorded() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    hostile_agents(&engine, &[], "runc").await;
}

/// The same agents on Debian's Podman 4.3.1, through its Docker-compatible API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_podman_hostile_agents_harm_nothing_and_their_tricks_are_recorded() {
    let Some(podman) = crate::podman::Podman::start() else { return };
    podman.load_images();
    let engine = roundtable_docker::Engine::connect_to(podman.host()).await.expect("podman answers");
    hostile_agents(&engine, &[("DOCKER_HOST", podman.host().as_str())], "runc").await;
}

/// The same agents under gVisor: a private engine whose default runtime is `runsc`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_gvisor_hostile_agents_harm_nothing_and_their_tricks_are_recorded() {
    use crate::runtime_class::{gvisor_engine_config, runsc_or_skip};
    if !runsc_or_skip() {
        return;
    }
    let config = gvisor_engine_config(Some("runsc"));
    let Some((private, engine)) = crate::private_engine::private_engine_or_skip(&config).await else { return };
    hostile_agents(&engine, &[("DOCKER_HOST", private.host().as_str())], "runsc").await;
}

/// Hostile agents on `engine` (the daemon started with `env`), each session under `runtime`.
async fn hostile_agents(engine: &roundtable_docker::Engine, env: &[(&str, &str)], runtime: &str) {
    let passwd_before = std::fs::read("/etc/passwd").expect("read /etc/passwd");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let mut specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n  resources: {{memory: 256Mi, cpus: 1, pids: 64, workspaceSize: 32Mi, tmpSize: 16Mi}}\n---\n"
    );
    specs.push_str(&assignment(
        "tricks",
        "ln -s /etc/passwd passwd-link; ln README.md hard-link; mkfifo pipe; printf x > \"$(printf 'bad\\nname')\"; printf x > \"$(printf 'esc\\033[31m')\"; printf x > \"$(printf 'inv\\377')\"; echo s > suid; chmod 4755 suid; echo edited >> README.md; printf 'title \\033]0;pwned\\007 clear \\033[2J\\n' >> README.md",
        "",
    ));
    specs.push_str(&assignment(
        "escape",
        "touch /x 2>> denied.txt; touch /roundtable/source/x 2>> denied.txt; touch /roundtable/bin/x 2>> denied.txt; echo root >> /etc/passwd 2>> denied.txt; true",
        "",
    ));
    specs.push_str(&assignment("lingering", "(sleep 2; echo late > late.txt) & echo now > now.txt", ""));
    specs.push_str(&assignment("forkbomb", "b() { b | b & }; b; sleep 30", "  timeout: 8s\n"));
    specs.push_str(&assignment("filler", "head -c 40000000 /dev/zero > big.bin; echo after >> README.md", ""));
    write(
        root,
        ".roundtable/specs.yaml",
        &specs.replace("readablePaths: [README.md, docs/]", "readablePaths: [README.md]"),
    );
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = crate::support::start_daemon_with_env(root, &["--max-executions", "3"], executions.path(), env);
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let finished = |name: &str| session_phases(root, name).first().is_some_and(|p| p == "Succeeded" || p == "Failed");
    wait_until("every hostile agent to finish", || {
        ["tricks", "escape", "lingering", "forkbomb", "filler"].iter().all(|name| finished(name))
    })
    .await;
    // The controller stayed responsive throughout.
    assert!(roundtable(root, &["status"]).status.success());
    drop(daemon);

    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let session = |name: &str| {
        sessions["items"].as_array().and_then(|s| s.iter().find(|s| s["assignment"] == name).cloned()).expect(name)
    };
    for name in ["tricks", "escape", "lingering", "forkbomb", "filler"] {
        assert_eq!(session(name)["detail"]["runtime"]["class"], runtime, "{name} ran under {runtime}");
    }
    let proposal_of = |name: &str| {
        let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
        let id = proposals["items"].as_array().and_then(|p| p.iter().find(|p| p["assignment"] == name).cloned());
        id.map(|p| stdout(&roundtable(root, &["proposals", "export", p["id"].as_str().expect("id")])))
    };

    // Symbolic links, FIFOs and hostile names are rejected and listed escaped; setuid is
    // stripped; a hard link keeps its content under both names (see tests/integration/fidelity.rs).
    let tricks = session("tricks");
    let rejected = tricks["detail"]["export"]["rejected"].to_string();
    for reason in ["a symbolic link", "a FIFO", "control characters", "not valid UTF-8"] {
        assert!(rejected.contains(reason), "{reason} missing from {rejected}");
    }
    assert!(tricks["detail"]["export"]["strippedBits"].to_string().contains("suid"), "{tricks:#}");
    let patch = proposal_of("tricks").expect("a proposal for the legitimate edit");
    assert!(patch.contains("+edited") && patch.contains("new file mode 100755"), "{patch}");
    assert!(!patch.contains("passwd-link") && !patch.contains("pipe"), "{patch}");
    assert!(!patch.contains("deleted file mode"), "a hard link never costs README.md its content: {patch}");
    let shown = roundtable(root, &["sessions", "show", tricks["id"].as_str().expect("id")]);
    assert!(
        !shown.stdout.contains(&0x1b) && !shown.stdout.iter().any(|b| *b < 0x20 && *b != b'\n'),
        "raw control bytes reached the terminal"
    );
    // The patch itself carries the escape sequences the agent wrote into README.md: `export` keeps
    // them for `git apply`, `show` (for a terminal) never prints them raw.
    assert!(patch.contains("\u{1b}]0;pwned\u{7}"), "{patch:?}");
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let tricks_proposal = proposals["items"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["assignment"] == "tricks").cloned())
        .expect("tricks proposal");
    let shown = roundtable(root, &["proposals", "show", tricks_proposal["id"].as_str().expect("id")]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("pwned"), "the line is shown, escaped");
    assert!(
        !shown.stdout.iter().any(|b| *b < 0x20 && *b != b'\n'),
        "raw control bytes reached the terminal through proposals show"
    );

    // Writes outside the workspace are denied; the host's /etc/passwd is untouched.
    let denied = proposal_of("escape").expect("denied.txt is proposed");
    // gVisor checks the agent's permissions before the mount's read-only flag, so there the three
    // touches are refused as not permitted; the self-check proved the mounts read-only either way.
    let refused = if runtime == "runsc" { "Permission denied" } else { "Read-only file system" };
    assert_eq!(denied.lines().filter(|l| l.starts_with("+touch") && l.ends_with(refused)).count(), 3, "{denied}");
    assert!(denied.contains("Permission denied") || denied.contains("Read-only"), "{denied}");
    assert_eq!(std::fs::read("/etc/passwd").expect("read"), passwd_before);

    // The export happened while paused: the child that wrote after the agent exited is not in it.
    let lingering = proposal_of("lingering").expect("proposal");
    assert!(lingering.contains("now.txt") && !lingering.contains("late.txt"), "{lingering}");
    assert_eq!(session("lingering")["detail"]["pausedForExport"], true);

    // The fork bomb hit the pids limit and the timeout; the workspace filler failed cleanly.
    let bomb = session("forkbomb");
    assert_eq!(bomb["phase"], "Failed", "{bomb:#}");
    let filler = session("filler");
    assert!(filler["phase"] == "Failed" || proposal_of("filler").is_some_and(|p| p.len() < 64 << 20), "{filler:#}");
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    assert!(engine.labelled(&project_id).await.expect("list").is_empty());
}

#[test]
fn a_locked_state_database_stops_start_with_a_clear_error_and_nothing_half_done() {
    let project = crate::support::spec_tree(&[(
        ".roundtable/adapters.yaml",
        "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: mock}\nspec: {}\n",
    )]);
    let root = project.path();
    // Create the database, then hold an exclusive lock on it from another process.
    assert!(roundtable(root, &["init"]).status.success());
    let database = root.join(".roundtable/state/state.db");
    let mut holder = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(60)")
        .arg(&database)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 holds the lock");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.take().expect("stdout")), &mut line)
        .expect("read");
    assert_eq!(line.trim(), "locked");
    let started = Instant::now();
    let out = roundtable(root, &["start"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("locked"), "the error says why: {}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(30), "it gives up after the busy timeout");
    // Nothing half-done: the daemon lock is free and a later start works.
    assert_eq!(roundtable_store::lock::holder(&root.join(".roundtable/state")), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_under_the_execution_root_fails_the_execution_cleanly() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    if !is_root() {
        eprintln!("skipping: mounting a small tmpfs needs root");
        return;
    }
    ensure_test_images();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    std::fs::write(root.join("big.bin"), vec![7u8; 2 << 20]).expect("big file");
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n---\n{API}\nkind: Assignment\nmetadata: {{name: big}}\nspec:\n  adapter: generic\n  task: {{id: B, prompt: 'true'}}\n  readablePaths: [big.bin]\n"
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    let small = tempfile::tempdir().expect("tempdir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs"])
        .arg(small.path())
        .status()
        .expect("mount");
    assert!(mounted.success(), "mount a 512 KiB tmpfs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(small.path().to_path_buf());
    let daemon = start_daemon(root, &[], small.path());
    wait_until("the execution to fail", || session_phases(root, "big") == ["Failed"]).await;
    drop(daemon);
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let session = &sessions["items"][0];
    assert_eq!(session["cause"], "ProvisionFailed", "{session:#}");
    assert!(session["message"].as_str().is_some_and(|m| m.contains("No space left")), "{session:#}");
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    assert!(engine.labelled(&project_id).await.expect("list").is_empty(), "no container was started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_flood_is_capped_drained_and_bounded_in_controller_memory() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = one_assignment_project(
        "flood",
        "yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx | head -c 100000000; yes yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy | head -c 50000000 >&2",
    );
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let deadline = Instant::now() + Duration::from_secs(120);
    while session_phases(root, "flood").first().is_none_or(|p| p != "Succeeded" && p != "Failed") {
        assert!(Instant::now() < deadline, "the flood did not finish");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.0.id())).expect("daemon status");
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM");
    drop(daemon);
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let flood = &sessions["items"][0];
    assert_eq!(flood["phase"], "Succeeded", "{flood:#}");
    assert_eq!((flood["stdoutBytes"].as_i64(), flood["stdoutTruncated"].as_bool()), (Some(100_000_000), Some(true)));
    assert_eq!((flood["stderrBytes"].as_i64(), flood["stderrTruncated"].as_bool()), (Some(50_000_000), Some(true)));
    let stdout_log =
        std::fs::metadata(executions.path().join(flood["id"].as_str().expect("id")).join("stdout.log")).expect("log");
    assert_eq!(stdout_log.len(), 1 << 20, "kept up to the 1 MiB cap");
    assert!(peak_kib < 150 * 1024, "the controller peaked at {} MiB while draining 150 MB", peak_kib / 1024);
    eprintln!("controller peak while draining 150 MB of output: {} MiB", peak_kib / 1024);
}

/// Regression: `prune` with another state directory on the same project removed a running
/// container of a live daemon, because its store did not know the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_from_another_state_directory_leaves_a_live_session_alone() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = one_assignment_project("busy", "sleep 30");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &["--grace", "1s"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let running = || {
        let listed = Command::new("docker")
            // The session's agent container (admission probes come and go before it).
            .args(["ps", "-q", "--filter", &format!("label=roundtable.dev/project={project_id}")])
            .args(["--filter", "label=roundtable.dev/purpose=agent"])
            .output()
            .expect("docker ps");
        !stdout(&listed).trim().is_empty()
    };
    wait_until("the session's container to run", running).await;

    let other = tempfile::tempdir().expect("tempdir");
    let other_state = other.path().to_str().expect("utf-8");
    let status = roundtable(root, &["--state-dir", other_state, "status"]);
    assert!(!stdout(&status).contains("requires pruning: left by session"), "{}", stdout(&status));
    let pruned = roundtable(root, &["--state-dir", other_state, "prune", "--format", "json"]);
    assert!(pruned.status.success(), "{}", stderr(&pruned));
    let rows = json(&pruned);
    let messages: Vec<String> = rows["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["message"].as_str().map(str::to_owned))
        .collect();
    assert!(
        messages.iter().any(|m| m.starts_with("left alone: controller run") && m.contains("is alive")),
        "{messages:?}"
    );
    assert!(running(), "the live session's container is still running");
    assert_eq!(session_phases(root, "busy"), ["Running"]);
    // A graceful stop (a short grace) cleans up what the session made.
    let mut daemon = daemon;
    let pid = daemon.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    let _ = daemon.0.wait();
    nothing_left(&engine, root).await;
}

/// A spec edit that changes the run fields while the old execution runs: the old run is
/// cancelled and recorded `Superseded`, the new generation runs once, and a proposal of a
/// generation the Assignment has moved past shows as superseded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_while_running_supersedes_the_old_run_and_its_proposal() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = one_assignment_project("evolving", "echo one >> README.md");
    let root = dir.path();
    let specs = root.join(".roundtable/specs.yaml");
    let original = std::fs::read_to_string(&specs).expect("specs");
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the first proposal", || session_phases(root, "evolving") == ["Succeeded"]).await;

    std::fs::write(&specs, original.replace("echo one >> README.md", "sleep 30; echo two >> README.md")).expect("edit");
    wait_until("generation 2 to run", || session_phases(root, "evolving").first().is_some_and(|p| p == "Running"))
        .await;
    std::fs::write(&specs, original.replace("echo one >> README.md", "echo three >> README.md")).expect("edit");
    wait_until("generation 3 to succeed", || {
        session_phases(root, "evolving") == ["Succeeded", "Cancelled", "Succeeded"]
    })
    .await;

    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let superseded = &sessions["items"][1];
    assert_eq!(superseded["cause"], "Superseded", "{superseded:#}");
    assert_eq!(superseded["executionGeneration"], 2);
    assert!(superseded["message"].as_str().is_some_and(|m| m.starts_with("superseded by execution generation 3")));
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let states: Vec<(i64, String)> = proposals["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| (p["executionGeneration"].as_i64().unwrap_or(0), p["state"].as_str().unwrap_or("").to_owned()))
        .collect();
    assert_eq!(states, [(3, "pending".to_owned()), (1, "superseded".to_owned())]);
    let describe = stdout(&roundtable(root, &["describe", "Assignment/evolving"]));
    assert!(describe.contains("Superseded"), "the event is recorded: {describe}");
    nothing_left(&engine, root).await;
}
