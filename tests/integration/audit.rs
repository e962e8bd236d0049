//! The audit chain from the operator's side: the key `init` names is the one `audit verify`
//! reads, a lost key stops every writer until `start --new-audit-key` replaces it, and what
//! `describe` shows of an audited event is what its MAC covers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use roundtable_specs::events::Reason;
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::audit::{AuditKey, AuditedEntry};
use roundtable_store::{NewEvent, Severity, Store};

use crate::support::{Daemon, binary, stderr, stdout, wait_until};

/// `roundtable ARGS` in `cwd` with the audit key at `key` (`None`: the default, under the host
/// state root, here `state/` of the test).
fn run(cwd: &Path, key: Option<&Path>, args: &[&str]) -> Output {
    command(cwd, key, args).output().expect("run roundtable")
}

fn command(cwd: &Path, key: Option<&Path>, args: &[&str]) -> Command {
    let mut command = Command::new(binary());
    command
        .args(args)
        .current_dir(cwd)
        .env("ROUNDTABLE_API_LISTEN", "127.0.0.1:0")
        .env("XDG_STATE_HOME", cwd.join("host-state"))
        .env_remove("RUST_LOG")
        .env_remove("ROUNDTABLE_DIR")
        .env_remove("ROUNDTABLE_STATE_DIR")
        .env_remove("ROUNDTABLE_STORE")
        .env_remove("ROUNDTABLE_AUDIT_KEY");
    if let Some(key) = key {
        command.env("ROUNDTABLE_AUDIT_KEY", key);
    }
    command
}

/// Runs `command` to its end, killing it (and failing) if it is still running after `limit`: a
/// `start` that should have been refused would otherwise run on.
fn exits_within(mut command: Command, limit: Duration) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!("still running after {limit:?} (it should have been refused): {}", stderr(&output));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// The key path `init` printed.
fn printed_key(init: &Output) -> PathBuf {
    let out = stdout(init);
    let line = out.lines().find(|line| line.contains("the audit chain's key")).unwrap_or_else(|| panic!("{out}"));
    PathBuf::from(line.split_whitespace().nth(1).expect("a path"))
}

/// Removes a key (and its head checkpoint) made under the host's state root when the test ends.
struct RemoveKey(PathBuf);

impl Drop for RemoveKey {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(self.0.with_extension("key.head"));
    }
}

#[test]
fn init_names_one_key_per_project_and_audit_verify_reads_that_key() {
    let (a, b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let init_a = run(a.path(), None, &["init"]);
    assert!(init_a.status.success(), "{}", stderr(&init_a));
    let key_a = printed_key(&init_a);
    let _remove_a = RemoveKey(key_a.clone());
    assert!(stdout(&init_a).contains(&format!("created  {}", key_a.display())), "{}", stdout(&init_a));
    assert!(key_a.is_file(), "the printed key exists: {}", key_a.display());
    // SHA-256 of the empty string: the id of a root that was never resolved.
    assert_ne!(key_a.file_name().and_then(|n| n.to_str()), Some("e3b0c44298fc.key"));

    let verify = run(a.path(), None, &["audit", "verify"]);
    assert!(verify.status.success(), "audit verify right after init: {}{}", stdout(&verify), stderr(&verify));

    let init_b = run(b.path(), None, &["init"]);
    assert!(init_b.status.success(), "{}", stderr(&init_b));
    let key_b = printed_key(&init_b);
    let _remove_b = RemoveKey(key_b.clone());
    assert_ne!(key_a, key_b, "two projects, two keys");

    // Without its key, verify names the key once and the reason once.
    std::fs::remove_file(&key_a).expect("remove the key");
    let missing = run(a.path(), None, &["audit", "verify"]);
    assert!(!missing.status.success());
    let error = stderr(&missing);
    assert_eq!(error.matches(&key_a.display().to_string()).count(), 1, "{error}");
    assert_eq!(error.matches("No such file or directory").count(), 1, "{error}");
}

/// A project initialised with its key at `key`, whose chain holds two entries and one sealed
/// reconcile event of `Assignment/example` (the scaffold's).
async fn project_with_a_chain(root: &Path, key: &Path) -> Store {
    let init = run(root, Some(key), &["init"]);
    assert!(init.status.success(), "{}", stderr(&init));
    let store = Store::open(&root.join(".roundtable/state")).await.expect("store");
    let sealing = AuditKey::load(key).expect("key");
    for subject in ["s1", "s2"] {
        let entry = AuditedEntry { kind: "session.ended", subject, record: serde_json::json!({}) };
        store.append_audited(&sealing, &entry).await.expect("append");
    }
    let object = ObjectKey::new(Kind::Assignment, "example");
    // Recorded first: the event below is about this object (its uid), as a reconciler's are.
    let spec = roundtable_store::SpecSnapshot {
        key: &object,
        spec_digest: "d",
        execution_digest: Some("r"),
        spec_json: "{}",
        source_file: ".roundtable/example.yaml",
    };
    store.record_spec(&spec).await.expect("record");
    let event = NewEvent {
        object: &object,
        severity: Severity::Warning,
        reason: Reason::Ready("ImageMissing".into()),
        message: "the sealed words",
        record: None,
    };
    store.append_audited_events(&sealing, &[event]).await.expect("append");
    store
}

/// Runs `sql` on the database at `path` over a connection of its own, as someone with write
/// access to the state directory would.
async fn tamper(path: &Path, sql: &'static str) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&format!("sqlite://{}", path.display())).await.expect("connect");
    sqlx::query(sql).execute(&pool).await.expect(sql);
    pool.close().await;
}

#[tokio::test]
async fn describe_shows_what_the_mac_covers_and_verify_names_an_edited_column() {
    let project = tempfile::tempdir().expect("tempdir");
    let root = project.path();
    let key = root.join("keys/audit.key");
    let store = project_with_a_chain(root, &key).await;
    store.close().await;
    tamper(
        &root.join(".roundtable/state/state.db"),
        "UPDATE events SET reason = 'AllClear', message = 'forged words' WHERE seq = 3",
    )
    .await;

    let describe = run(root, Some(&key), &["describe", "Assignment/example"]);
    assert!(describe.status.success(), "{}", stderr(&describe));
    let shown = stdout(&describe);
    assert!(shown.contains("the sealed words") && !shown.contains("forged words"), "{shown}");

    let verify = run(root, Some(&key), &["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(1), "{}", stdout(&verify));
    assert!(stdout(&verify).contains("entry 3: its reason column"), "{}", stdout(&verify));

    // An exported slice with no entries proves nothing.
    let empty = root.join("empty.jsonl");
    std::fs::write(&empty, "").expect("write");
    let slice = run(root, Some(&key), &["audit", "verify", "--slice", empty.to_str().expect("utf-8")]);
    assert_eq!(slice.status.code(), Some(1), "{}", stdout(&slice));
}

#[tokio::test]
async fn a_lost_key_stops_every_writer_until_start_new_audit_key_replaces_it() {
    let project = tempfile::tempdir().expect("tempdir");
    let root = project.path();
    let key = root.join("keys/audit.key");
    project_with_a_chain(root, &key).await.close().await;
    std::fs::remove_file(&key).expect("lose the key");

    let executions = root.join("executions");
    std::fs::create_dir_all(&executions).expect("mkdir");
    std::fs::set_permissions(&executions, std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod");
    let execution_root = executions.to_str().expect("utf-8");
    for args in [&["start", "--execution-root", execution_root][..], &["init"]] {
        let refused = exits_within(command(root, Some(&key), args), Duration::from_secs(30));
        assert_eq!(refused.status.code(), Some(1), "{args:?}: {}", stderr(&refused));
        let error = stderr(&refused);
        assert!(error.contains(&key.display().to_string()) && error.contains("--new-audit-key"), "{error}");
        assert!(!key.exists(), "{args:?} created no key in place of the lost one");
    }

    let log = std::fs::File::create(root.join("daemon.log")).expect("log");
    let child = command(root, Some(&key), &["start", "--new-audit-key", "--execution-root", execution_root])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start");
    let daemon = Daemon(child);
    let state = root.join(".roundtable/state");
    wait_until("the new key's first entry", || {
        key.exists() && std::fs::read_to_string(state.join("api-address")).is_ok()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(daemon);

    let verify = run(root, Some(&key), &["audit", "verify"]);
    let report = stdout(&verify);
    assert!(verify.status.success(), "{report}{}", stderr(&verify));
    assert!(report.contains("NOT verified for entries 1-3") && report.contains("replaced at entry 4"), "{report}");
    assert!(report.contains("verified from entry 4 through entry"), "{report}");
}
