//! Credentials under the explicit opt-out (`credentialMode: env`) on the real engine: an agent
//! that prints the raw value of its `credentialEnv` variable and writes it into a file. What the daemon keeps and serves (the logs
//! on disk, `sessions logs`, the API's logs route, the store's bytes) shows `[redacted:NAME]`,
//! never the value; the proposal keeps the value byte for byte and is flagged `credentialCanary`.

use std::time::Duration;

use crate::http::Api;
use crate::support::{
    API, ShowLogOnPanic, commit_all, ensure_test_images, json, nothing_left, roundtable, start_daemon, stdout,
    wait_until_within, write,
};

/// Long enough to be found inside other text, and shaped like no pattern rule knows, so only
/// the known-value masking can hide it.
const KEY: &str = "acme-live-5e0c8b1f29d74a36";
const MARKER: &str = "[redacted:ACME_API_KEY]";

/// Every file under `dir` whose name starts with `prefix`, read whole.
fn files_named(dir: &std::path::Path, prefix: &str) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, prefix));
        } else if entry.file_name().to_string_lossy().starts_with(prefix) {
            found.push((path.clone(), std::fs::read(&path).expect("read")));
        }
    }
    found
}

fn holds(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|window| window == needle.as_bytes())
}

/// Issue 28, item 6 (issue 32's hostile prompt, without the broker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_printed_credential_is_masked_everywhere_it_is_kept_and_its_proposal_is_flagged() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = tempfile::tempdir().expect("tempdir");
    let root = project.path();
    write(root, "README.md", "# Project\n");
    write(
        root,
        ".roundtable/specs.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n  credentialMode: env\n  credentialEnv: [ACME_API_KEY]\n---\n{API}\nkind: Assignment\nmetadata: {{name: leak}}\nspec:\n  adapter: generic\n  task: {{id: T, prompt: 'echo \"$ACME_API_KEY\"; echo \"to stderr $ACME_API_KEY\" >&2; echo \"key=$ACME_API_KEY\" >> README.md'}}\n  readablePaths: [README.md]\n"
        ),
    );
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let secrets = executions.path().join("secrets.env");
    std::fs::write(&secrets, format!("ACME_API_KEY={KEY}\n")).expect("secrets");
    std::fs::set_permissions(&secrets, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let daemon = start_daemon(root, &["--secrets-file", secrets.to_str().expect("utf-8")], executions.path());
    let api = Api::of(&root.join(".roundtable/state")).await;
    wait_until_within("a proposal", Duration::from_secs(120), || {
        json(&roundtable(root, &["proposals", "list", "--format", "json"]))["items"]
            .as_array()
            .is_some_and(|items| !items.is_empty())
    })
    .await;

    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let proposal = &proposals["items"][0];
    let flags: Vec<&str> = proposal["flags"].as_array().into_iter().flatten().filter_map(|f| f.as_str()).collect();
    assert!(flags.contains(&"credentialCanary: README.md"), "{proposal}");
    let id = proposal["id"].as_str().expect("an id");
    let patch = stdout(&roundtable(root, &["proposals", "export", id]));
    assert!(patch.contains(&format!("+key={KEY}")), "the patch stays byte-faithful: {patch}");

    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let session = sessions["items"][0]["id"].as_str().expect("a session").to_owned();
    let logs = stdout(&roundtable(root, &["sessions", "logs", &session]));
    assert!(logs.contains(MARKER) && !logs.contains(KEY), "sessions logs: {logs}");
    for stream in ["stdout", "stderr"] {
        let served = api.get(&format!("/v1/sessions/{session}/logs?stream={stream}")).text();
        assert!(served.contains(MARKER) && !served.contains(KEY), "GET …/logs?stream={stream}: {served}");
    }
    let whole = api.get(&format!("/v1/sessions/{session}/logs")).text();
    assert!(!whole.contains(KEY), "GET …/logs: {whole}");
    let on_disk = files_named(executions.path(), "std");
    assert_eq!(on_disk.len(), 2, "stdout.log and stderr.log: {on_disk:?}");
    for (path, bytes) in &on_disk {
        assert!(holds(bytes, MARKER) && !holds(bytes, KEY), "{}: {}", path.display(), String::from_utf8_lossy(bytes));
    }
    let events = stdout(&roundtable(root, &["describe", "Assignment/leak"]));
    assert!(events.contains("CredentialCanary"), "a Warning event: {events}");

    drop(daemon);
    // The store (with its write-ahead log) and the daemon's own log never held the value.
    let state = files_named(&root.join(".roundtable/state"), "state.db");
    assert!(!state.is_empty(), "found the store");
    for (path, bytes) in &state {
        assert!(!holds(bytes, KEY), "{} holds the credential", path.display());
    }
    let daemon_log = std::fs::read(executions.path().join("daemon.log")).expect("daemon.log");
    assert!(!holds(&daemon_log, KEY), "the daemon's log holds the credential");
    nothing_left(&engine, root).await;
}
