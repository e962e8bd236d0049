//! The engine's events as hints, on the real engine: an Adapter's image tag re-pointed under a
//! running daemon shows in `status` within seconds (the engine's `tag` event triggers the
//! Adapter's reconcile), not at the resync, which these daemons run an hour apart.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    API, ShowLogOnPanic, commit_all, docker, engine_or_skip, ensure_test_images, json, nothing_left, roundtable,
    start_daemon_with_env, stderr, stdout, wait_until_within, write,
};

const IMAGE: &str = "roundtable-test/agent:latest";

/// Tags made for one test, removed (the tags, and an image only they name) when dropped.
struct Tags(Vec<String>);

impl Drop for Tags {
    fn drop(&mut self) {
        for tag in &self.0 {
            let _ = std::process::Command::new("docker").args(["rmi", tag]).output();
        }
    }
}

/// The `Admitted` condition of `Adapter/name` in `status --format json`: its status and reason.
fn admitted(root: &Path, name: &str) -> Option<(String, String)> {
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    let row = status["items"].as_array()?.iter().find(|r| r["kind"] == "Adapter" && r["name"] == name)?.clone();
    let condition = row["conditions"].as_array()?.iter().find(|c| c["type"] == "Admitted")?.clone();
    let text = |field: &str| condition[field].as_str().unwrap_or_default().to_owned();
    Some((text("status"), text("reason")))
}

fn status_row(root: &Path, name: &str) -> Value {
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    status["items"].as_array().into_iter().flatten().find(|r| r["name"] == name).cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retagged_image_shows_in_status_within_seconds_not_at_the_resync() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    // Tags of this test's own, so re-pointing one moves nothing another test runs.
    let run = std::process::id();
    let (tag, next) =
        (format!("roundtable-test/hinted-{run}:latest"), format!("roundtable-test/hinted-next-{run}:latest"));
    let _tags = Tags(vec![tag.clone(), next.clone()]);
    docker(&["tag", IMAGE, &tag]);
    // A second image, trivially different: its CLI reports another release.
    let container = docker(&["create", IMAGE, "true"]);
    docker(&[
        "commit",
        "--change",
        "ENV AGENT_DOUBLE_VERSION=0.172.0",
        "--change",
        "LABEL dev.roundtable.test=engine-hints",
        &container,
        &next,
    ]);
    docker(&["rm", &container]);

    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    write(
        root,
        ".roundtable/specs.yaml",
        &format!("{API}\nkind: Adapter\nmetadata: {{name: codex}}\nspec: {{image: '{tag}'}}\n"),
    );
    commit_all(root);
    let sealed = roundtable(root, &["admission", "check", "codex", "--seal"]);
    assert_eq!(sealed.status.code(), Some(0), "{}{}", stdout(&sealed), stderr(&sealed));

    let executions = tempfile::tempdir().expect("tempdir");
    // The daemon and the CLI append to one chain (the seal is in it): they share the key.
    let key = root.join(".test-audit.key");
    let daemon = start_daemon_with_env(
        root,
        &["--resync", "1h"],
        executions.path(),
        &[("ROUNDTABLE_AUDIT_KEY", key.to_str().expect("utf-8"))],
    );
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until_within("Adapter/codex admitted", Duration::from_secs(90), || {
        admitted(root, "codex").is_some_and(|(status, _)| status == "True")
    })
    .await;
    let before = status_row(root, "codex");
    assert!(before["message"].as_str().is_some_and(|m| !m.contains("admission refused")), "{before:#}");

    docker(&["tag", &next, &tag]);
    let moved = std::time::Instant::now();
    wait_until_within("status to show the moved tag", Duration::from_secs(10), || {
        admitted(root, "codex").is_some_and(|(status, reason)| status == "False" && reason == "FingerprintMismatch")
    })
    .await;
    eprintln!("the moved tag showed in status after {:?}", moved.elapsed());
    let row = status_row(root, "codex");
    assert_eq!((&row["sync"], &row["health"]), (&Value::from("Synced"), &Value::from("Degraded")), "{row:#}");
    assert!(row["message"].as_str().is_some_and(|m| m.contains("fingerprint_mismatch")), "{row:#}");

    drop(daemon);
    nothing_left(&engine, root).await;
}
