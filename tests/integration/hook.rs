//! `roundtable start --webhook-secret-file`: the secret file is refused unless it is private and
//! holds a secret, and the daemon's `POST /v1/hooks/git` takes a forge's signed call without the
//! operator token, refusing (and recording) any other. Following a git source, a call with a bad
//! signature fetches nothing, and a signed one converges the pushed commit within a second.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::http::{Api, request};
use crate::support::{
    API, Daemon, ShowLogOnPanic, commit_all, git, roundtable, start_daemon, stderr, wait_until, write,
};

const PUSH: &str = r#"{"ref":"refs/heads/main"}"#;

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        ".roundtable/specs.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec: {{image: 'roundtable-test/agent:latest'}}\n"
        ),
    );
    commit_all(dir.path());
    dir
}

fn secret_file(dir: &Path, text: &str, mode: u32) -> std::path::PathBuf {
    let path = dir.join("hook.secret");
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path
}

#[test]
fn start_refuses_a_secret_file_others_can_read_or_that_is_empty() {
    let dir = project();
    let secrets = tempfile::tempdir().expect("tempdir");
    for (text, mode, says) in [("s3cret\n", 0o644, "has mode 644"), ("\n", 0o600, "is empty")] {
        let path = secret_file(secrets.path(), text, mode);
        let out = roundtable(dir.path(), &["start", "--webhook-secret-file", path.to_str().expect("utf-8")]);
        let message = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{message}");
        assert!(message.contains(&path.display().to_string()) && message.contains(says), "{message}");
        assert!(!dir.path().join(".roundtable/state/api-address").exists(), "nothing started");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_takes_a_signed_call_without_the_token_and_refuses_and_records_a_bad_one() {
    let dir = project();
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let secret = secret_file(executions.path(), "a shared secret\n", 0o600);
    let _daemon = start_daemon(root, &["--webhook-secret-file", secret.to_str().expect("utf-8")], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let api = Api::of(&root.join(".roundtable/state")).await;
    wait_until("the API to be ready", || request(&api.address, "GET", "/readyz", &[], None).status == 200).await;

    let signer = roundtable_api::hook::HookSecret::from_bytes(b"a shared secret");
    let forged = roundtable_api::hook::HookSecret::from_bytes(b"a guess").signature(PUSH.as_bytes());
    let refused = request(&api.address, "POST", "/v1/hooks/git", &[("X-Hub-Signature-256", &forged)], Some(PUSH));
    assert_eq!((refused.status, refused.code().as_str()), (401, "bad_signature"), "{}", refused.text());

    // Signed (the trailing newline of the file is not part of the secret): the daemon was
    // started without a git source, so there is nothing to fetch.
    let signature = signer.signature(PUSH.as_bytes());
    let signed = request(&api.address, "POST", "/v1/hooks/git", &[("X-Hub-Signature-256", &signature)], Some(PUSH));
    assert_eq!((signed.status, signed.code().as_str()), (409, "no_git_source"), "{}", signed.text());

    let events = api.get("/v1/events").json();
    let hook: Vec<&str> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["object"] == "Hook/git")
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert_eq!(hook, ["hook.accepted", "hook.refused"], "newest first: {events:#}");
    let key = executions.path().join("audit.key");
    let verify = roundtable(root, &["--audit-key", key.to_str().expect("utf-8"), "audit", "verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

// === a daemon following a git source ===

/// The secret every [`Remote`] daemon is started with.
pub const SHARED_SECRET: &[u8] = b"a shared secret";

/// A bare remote (`remote.git`, branch `main`), a clone to push from, and a daemon following
/// the remote (`--source`) with the webhook on and its poll ten minutes away, so only a call
/// can make it fetch.
pub struct Remote {
    // Dropped in this order: the log shown, the daemon stopped, then its folder removed.
    _log: ShowLogOnPanic,
    _daemon: Daemon,
    pub api: Api,
    base: tempfile::TempDir,
}

impl Remote {
    pub async fn start() -> Self {
        let base = tempfile::tempdir().expect("tempdir");
        let path = base.path();
        git(path, &["init", "-q", "--bare", "-b", "main", "remote.git"]);
        git(path, &["clone", "-q", "remote.git", "work"]);
        git(&path.join("work"), &["checkout", "-q", "-b", "main"]);
        write(&path.join("work"), ".roundtable/one.yaml", &adapter("one"));
        let secret = secret_file(path, "a shared secret\n", 0o600);
        let executions = path.join("executions");
        std::fs::create_dir_all(&executions).expect("mkdir");
        let (state, url) = (path.join("state").display().to_string(), format!("file://{}/remote.git", path.display()));
        let args = [
            "--state-dir",
            &state,
            "--source",
            &url,
            "--poll",
            "10m",
            "--resync",
            "10m",
            "--webhook-secret-file",
            secret.to_str().expect("utf-8"),
        ];
        let remote_without_daemon = Self::push_in(path, "base");
        let daemon = start_daemon(path, &args, &executions);
        let log = ShowLogOnPanic(executions.join("daemon.log"), path.to_path_buf());
        let api = Api::of(&path.join("state")).await;
        let remote = Self { _log: log, _daemon: daemon, api, base };
        wait_until("the first commit", || remote.mirror_head().as_deref() == Some(remote_without_daemon.as_str()))
            .await;
        wait_until("its Adapter", || remote.synced("one")).await;
        remote
    }

    fn push_in(path: &Path, message: &str) -> String {
        let work = path.join("work");
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "--allow-empty", "-m", message]);
        git(&work, &["push", "-q", "-f", "origin", "main"]);
        git(&work, &["rev-parse", "HEAD"])
    }

    /// Adds the Adapter `name` in a new commit pushed to the remote; its id.
    pub fn push_adapter(&self, name: &str) -> String {
        write(&self.base.path().join("work"), &format!(".roundtable/{name}.yaml"), &adapter(name));
        Self::push_in(self.base.path(), &format!("add {name}"))
    }

    fn state(&self) -> PathBuf {
        self.base.path().join("state")
    }

    /// The commit the daemon's mirror has fetched (its detached `HEAD`), once there is one.
    pub fn mirror_head(&self) -> Option<String> {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(self.state().join("source/mirror.git"))
            .args(["rev-parse", "--verify", "-q", "HEAD"])
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Whether `status` (the API's) shows Adapter `name` synced.
    pub fn synced(&self, name: &str) -> bool {
        let status = self.api.get("/v1/status").json();
        status["items"].as_array().into_iter().flatten().any(|r| {
            r["kind"] == "Adapter" && r["name"] == name && r["sync"] == "Synced" && r["observedGeneration"] == 1
        })
    }

    /// A call to the webhook with `headers` and `body`.
    pub fn call(&self, headers: &[(&str, &str)], body: &str) -> crate::http::Reply {
        request(&self.api.address, "POST", "/v1/hooks/git", headers, Some(body))
    }

    /// The audit chain's `Hook/git` entries (`roundtable audit export`), oldest first: their
    /// kind and record.
    pub fn hook_entries(&self) -> Vec<(String, serde_json::Value)> {
        let out = std::process::Command::new(crate::support::binary())
            .arg("--state-dir")
            .arg(self.state())
            .args(["audit", "export"])
            .current_dir(self.base.path())
            .env_remove("ROUNDTABLE_STORE")
            .env("ROUNDTABLE_AUDIT_KEY", self.base.path().join("executions/audit.key"))
            .output()
            .expect("audit export");
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            // `entry` is the canonical JSON text the MAC covers.
            .filter_map(|row| serde_json::from_str::<serde_json::Value>(row["entry"].as_str()?).ok())
            .filter(|entry| entry["subject"] == "Hook/git")
            .map(|entry| (entry["kind"].as_str().unwrap_or_default().to_owned(), entry["record"].clone()))
            .collect()
    }

    /// `roundtable audit verify` of the daemon's chain succeeds.
    pub fn chain_verifies(&self) -> bool {
        let key = self.base.path().join("executions/audit.key");
        let state = self.state();
        let args = ["--state-dir", state.to_str().expect("utf-8"), "--audit-key", key.to_str().expect("utf-8")];
        roundtable(self.base.path(), &[&args[..], &["audit", "verify"]].concat()).status.success()
    }
}

fn adapter(name: &str) -> String {
    format!("{API}\nkind: Adapter\nmetadata: {{name: {name}}}\nspec:\n  timeout: 5m\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn following_a_source_a_bad_signature_fetches_nothing_and_a_signed_call_converges_within_a_second() {
    let remote = Remote::start().await;
    let fetched = remote.mirror_head().expect("the first commit");
    let pushed = remote.push_adapter("two");

    let forged = roundtable_api::hook::HookSecret::from_bytes(b"a guess").signature(PUSH.as_bytes());
    let refused = remote.call(&[("X-Hub-Signature-256", &forged), ("X-GitHub-Delivery", "forged-1")], PUSH);
    assert_eq!((refused.status, refused.code().as_str()), (401, "bad_signature"), "{}", refused.text());
    // Long enough for a fetch to have happened (one takes some 15 ms here).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(remote.mirror_head().as_deref(), Some(fetched.as_str()), "the bad call made the daemon fetch");
    assert!(!remote.synced("two"));

    let signature = roundtable_api::hook::HookSecret::from_bytes(SHARED_SECRET).signature(PUSH.as_bytes());
    let answered = remote.call(&[("X-Hub-Signature-256", &signature), ("X-GitHub-Delivery", "signed-1")], PUSH);
    let returned = Instant::now();
    assert_eq!(answered.status, 202, "{}", answered.text());
    // The poll is ten minutes away: only the call can have fetched it.
    while !(remote.mirror_head().as_deref() == Some(pushed.as_str()) && remote.synced("two")) {
        assert!(
            returned.elapsed() < Duration::from_secs(1),
            "not converged within a second of the call; mirror at {:?}, pushed {pushed}",
            remote.mirror_head()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("converged {:?} after the call returned", returned.elapsed());
}
