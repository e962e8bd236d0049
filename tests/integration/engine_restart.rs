//! The container engine restarted under a running execution: the session ends `Interrupted`
//! naming the engine, a new attempt runs once the engine is back, one proposal results and
//! nothing labelled is left. Restarting the machine's engine would disturb every other test, so
//! this one runs a private `dockerd` of its own (own data root, exec root, socket and managed
//! containerd) and points the daemon at it with `DOCKER_HOST`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use roundtable_docker::Engine;

use crate::private_engine::{IMAGES, private_engine_or_skip};

/// The private engine's configuration: nothing but what its flags set.
const PLAIN: &str = "{}";
use crate::support::{
    ShowLogOnPanic, json, nothing_left, one_assignment_project, roundtable, session_phases, start_daemon_with_env,
    stderr, stdout, wait_until,
};

/// The sessions of `assignment`, newest first.
fn sessions(root: &Path, assignment: &str) -> Vec<serde_json::Value> {
    let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let items = listed["items"].as_array().cloned().unwrap_or_default();
    items.into_iter().filter(|s| s["assignment"] == assignment).collect()
}

/// Waits until the agent's `command` runs in the project's container: past the launch and the
/// self-check.
async fn agent_running(engine: &Engine, root: &Path, command: &str) {
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let containers = engine.labelled(&project_id).await.expect("list");
        for container in containers.iter().filter(|l| l.kind == roundtable_session_runtime::ResourceKind::Container) {
            let top = engine.docker().top_processes(&container.name, None).await;
            let rows = top.ok().and_then(|t| t.processes).unwrap_or_default();
            if rows.iter().flatten().any(|column| column.contains(command)) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "`{command}` never ran: {containers:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The daemon process is alive and `roundtable status` answers: the table, exit 0, or exit 1
/// with the daemon's `Engine` error row while its engine is down.
fn assert_healthy(daemon: &mut crate::support::Daemon, root: &Path, when: &str) {
    assert!(daemon.0.try_wait().is_ok_and(|s| s.is_none()), "the daemon exited {when}");
    let status = roundtable(root, &["status"]);
    let printed = crate::support::stdout(&status);
    let engine_down = status.status.code() == Some(1) && printed.lines().any(|l| l.starts_with("Engine "));
    assert!(status.status.success() || engine_down, "status failed {when}: {printed}{}", stderr(&status));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_restart_interrupts_the_running_session_and_it_is_rerun_once() {
    let host_bridge = Path::new("/sys/class/net/docker0").exists();
    let Some((mut private, engine)) = private_engine_or_skip(PLAIN).await else { return };
    let started = Instant::now();
    let dir = one_assignment_project("restart", "echo printed-before-the-restart; sleep 5; echo edited >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let host = private.host();
    let mut daemon = start_daemon_with_env(root, &[], executions.path(), &[("DOCKER_HOST", host.as_str())]);
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    // Restart the engine while the agent runs (its `sleep` is a process in the container).
    wait_until("the first session to run", || {
        sessions(root, "restart").first().is_some_and(|s| s["phase"] == "Running" && s["message"] == "running")
    })
    .await;
    agent_running(&engine, root, "sleep 5").await;
    let restarted = Instant::now();
    private.stop().expect("stop the private engine");
    assert_healthy(&mut daemon, root, "while the engine was down");
    let engine = private.spawn().await.unwrap_or_else(|e| panic!("restart the private engine: {e}"));
    let down_for = restarted.elapsed();

    // The first session ends Interrupted, naming the engine; a second attempt succeeds.
    wait_until("the re-run to succeed", || session_phases(root, "restart") == ["Succeeded", "Interrupted"]).await;
    assert_healthy(&mut daemon, root, "after the restart");
    let [rerun, first] = <[serde_json::Value; 2]>::try_from(sessions(root, "restart")).expect("two sessions");
    assert_eq!(first["cause"], "EngineLost", "{first:#}");
    let message = first["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("the container engine at {host} went away")) && message.contains("restarted"),
        "the reason names the engine: {first:#}"
    );
    // What the agent printed before the engine went is kept.
    let first_id = first["id"].as_str().expect("id");
    assert!(message.contains(&format!("sessions logs {first_id}")), "{message}");
    let printed = stdout(&roundtable(root, &["sessions", "logs", first_id]));
    assert!(printed.contains("printed-before-the-restart"), "the first attempt's output: {printed:?}");
    let shown = json(&roundtable(root, &["sessions", "show", first["id"].as_str().expect("id"), "--format", "json"]));
    let shown = &shown["items"][0];
    assert_eq!((&shown["phase"], &shown["message"]), (&first["phase"], &first["message"]), "{shown:#}");
    let described = stdout(&roundtable(root, &["describe", "Assignment/restart"]));
    assert!(described.contains("Rerunning") && described.contains(&host), "the re-run says why: {described}");
    assert_eq!((rerun["attempt"].as_i64(), rerun["executionGeneration"].as_i64()), (Some(2), Some(1)), "{rerun:#}");
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    let row = status["items"].as_array().and_then(|r| r.iter().find(|r| r["name"] == "restart").cloned());
    assert!(row.is_some_and(|r| r["conditions"].to_string().contains("ProposalPending")), "{status:#}");

    // Exactly one proposal, from the re-run; nothing labelled left on the engine.
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let items = proposals["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "exactly one proposal: {proposals:#}");
    assert_eq!(items[0]["session"], rerun["id"], "{proposals:#}");
    let patch = stdout(&roundtable(root, &["proposals", "export", items[0]["id"].as_str().expect("id")]));
    assert!(patch.contains("+edited"), "{patch}");
    nothing_left(&engine, root).await;
    assert_healthy(&mut daemon, root, "at the end");
    assert_eq!(Path::new("/sys/class/net/docker0").exists(), host_bridge, "the machine's docker0 is untouched");
    eprintln!(
        "engine down and back in {down_for:?}; interrupted: {message}; re-run succeeded; whole test {:?}",
        started.elapsed()
    );
}

/// The daemon's engine event stream outlives an engine restart: once the private engine is back
/// the daemon subscribes again (and re-reconciles its Adapters, since events were missed), and an
/// image tagged after that shows in `status` within seconds. Without the events, an Adapter whose
/// image is missing would be looked at again only at the periodic resync (an hour here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_engine_restart_the_daemon_follows_the_engines_events_again() {
    let Some((mut private, _engine)) = private_engine_or_skip(PLAIN).await else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    crate::support::write(
        root,
        ".roundtable/specs.yaml",
        &format!(
            "{}\nkind: Adapter\nmetadata: {{name: generic}}\nspec: {{image: 'roundtable-test/hinted:latest'}}\n",
            crate::support::API
        ),
    );
    crate::support::commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let host = private.host();
    let log = executions.path().join("daemon.log");
    let mut daemon =
        start_daemon_with_env(root, &["--resync", "1h"], executions.path(), &[("DOCKER_HOST", host.as_str())]);
    let _show_log = ShowLogOnPanic(log.clone(), root.to_path_buf());
    let ready = |root: &Path| -> Option<String> {
        let status = json(&roundtable(root, &["status", "--format", "json"]));
        let row =
            status["items"].as_array()?.iter().find(|r| r["kind"] == "Adapter" && r["name"] == "generic")?.clone();
        let condition = row["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")?.clone();
        Some(format!("{} {}", condition["status"].as_str()?, condition["reason"].as_str()?))
    };
    wait_until("the Adapter to find its image missing", || ready(root).is_some_and(|r| r.starts_with("False"))).await;

    private.stop().expect("stop the private engine");
    assert_healthy(&mut daemon, root, "while the engine was down");
    private.spawn().await.unwrap_or_else(|e| panic!("restart the private engine: {e}"));
    wait_until("the daemon to subscribe to the engine's events again", || {
        std::fs::read_to_string(&log).is_ok_and(|text| text.contains("engine event stream resumed"))
    })
    .await;

    let tagged = Command::new("docker")
        .args(["--host", &host, "tag", IMAGES[0], "roundtable-test/hinted:latest"])
        .output()
        .expect("docker tag");
    assert!(tagged.status.success(), "{}", stderr(&tagged));
    let moved = Instant::now();
    crate::support::wait_until_within("the tagged image to show in status", Duration::from_secs(10), || {
        ready(root).is_some_and(|r| r.starts_with("True"))
    })
    .await;
    eprintln!("the image tagged after the restart showed in status after {:?}", moved.elapsed());
    assert_healthy(&mut daemon, root, "at the end");
}
