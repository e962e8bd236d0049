//! A full disk under the state directory (a small tmpfs the test mounts there and fills): no
//! execution starts, `status` says why with a `Store` error row, and once space returns the
//! daemon records the specs it could not, runs the work, and nothing it wrote is half-written (one
//! session, one proposal whose patch matches its digest, a verifying audit chain).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::{
    API, ShowLogOnPanic, commit_all, ensure_test_images, json, nothing_left, present_or_skip, roundtable, start_daemon,
    stdout, wait_until_within, write,
};

/// A tmpfs of `size` mounted at `at`, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Result<Self, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !mounted.status.success() {
            return Err(String::from_utf8_lossy(&mounted.stderr).into_owned());
        }
        Ok(Self(at.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the file system holding `folder` with one file, to the last byte it takes.
fn fill(folder: &Path) -> PathBuf {
    let filler = folder.join("filler");
    let mut file = std::fs::File::create(&filler).expect("filler");
    for chunk in [1 << 20, 4096, 1] {
        let bytes = vec![0_u8; chunk];
        while file.write_all(&bytes).is_ok() {}
    }
    let _ = file.sync_all();
    filler
}

fn mount_allowed() -> bool {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    present_or_skip(
        root,
        "ROUNDTABLE_REQUIRE_CONTAINER_TESTS",
        "root (to mount a tmpfs)",
        "the full-disk test needs root",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_under_the_state_stops_intake_and_work_resumes_when_space_returns() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    if !mount_allowed() {
        return;
    }
    ensure_test_images();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let adapter =
        format!("{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n");
    write(root, ".roundtable/adapter.yaml", &adapter);
    commit_all(root);
    let state = Tmpfs::mount(&root.join(".roundtable/state"), "24m").expect("a tmpfs for the state");
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &[], executions.path());
    let _log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_owned());
    wait_until_within("the adapter to be recorded", Duration::from_secs(60), || {
        let rows = json(&roundtable(root, &["status", "--format", "json"]));
        rows["items"].as_array().into_iter().flatten().any(|r| r["kind"] == "Adapter" && r["sync"] == "Synced")
    })
    .await;

    let filler = fill(&state.0);
    write(
        root,
        ".roundtable/work.yaml",
        &format!(
            "{API}\nkind: Assignment\nmetadata: {{name: work}}\nspec:\n  adapter: generic\n  task: {{id: T1, prompt: 'echo done >> README.md'}}\n  readablePaths: [README.md]\n"
        ),
    );
    // The view refreshes at least every 10 s: the Store row is there by then.
    wait_until_within("a Store error row", Duration::from_secs(30), || {
        let rows = json(&roundtable(root, &["status", "--format", "json"]));
        rows["items"].as_array().into_iter().flatten().any(|r| {
            r["kind"] == "Store" && r["sync"] == "Error" && r["message"].as_str().is_some_and(|m| m.contains("full"))
        })
    })
    .await;
    let status = roundtable(root, &["status", "--exit-code"]);
    assert_eq!(status.status.code(), Some(1), "{}", stdout(&status));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    assert_eq!(sessions["items"].as_array().map(Vec::len), Some(0), "nothing started: {sessions:#}");

    std::fs::remove_file(&filler).expect("free the space");
    wait_until_within("the work to succeed once space returns", Duration::from_secs(120), || {
        let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
        sessions["items"].as_array().is_some_and(|items| items.len() == 1 && items[0]["phase"] == "Succeeded")
    })
    .await;
    let rows = json(&roundtable(root, &["status", "--format", "json"]));
    assert!(!rows["items"].as_array().into_iter().flatten().any(|r| r["kind"] == "Store"), "{rows:#}");
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let items = proposals["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "{proposals:#}");
    // Export checks the patch file against its recorded SHA-256.
    let patch = roundtable(root, &["proposals", "export", items[0]["id"].as_str().expect("id")]);
    assert!(stdout(&patch).contains("+done"), "{}{}", stdout(&patch), String::from_utf8_lossy(&patch.stderr));
    // With the daemon's key (the CLI helper would name the test's own).
    let verified = Command::new(crate::support::binary())
        .args(["audit", "verify"])
        .current_dir(root)
        .env_remove("RUST_LOG")
        .env("ROUNDTABLE_AUDIT_KEY", executions.path().join("audit.key"))
        .output()
        .expect("audit verify");
    assert!(verified.status.success(), "{}{}", stdout(&verified), String::from_utf8_lossy(&verified.stderr));
    drop(_daemon);
    nothing_left(&engine, root).await;
}
