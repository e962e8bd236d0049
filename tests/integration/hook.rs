//! `roundtable start --webhook-secret-file`: the secret file is refused unless it is private and
//! holds a secret, and the daemon's `POST /v1/hooks/git` takes a forge's signed call without the
//! operator token, refusing (and recording) any other.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::http::{Api, request};
use crate::support::{API, ShowLogOnPanic, commit_all, roundtable, start_daemon, stderr, wait_until, write};

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
