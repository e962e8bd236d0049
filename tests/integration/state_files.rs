//! The state's files through the binary: a copy of the state (`state backup`, `state migrate
//! --to sqlite:PATH`) is written only to a new 0600 file, never through a link planted at the
//! target; a `state.db` that is not a SQLite database is refused at once and left untouched.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::support::{roundtable, stderr, stdout};

/// A project with a state store holding one event, so a copy has something to carry.
async fn project_with_state() -> tempfile::TempDir {
    let project = tempfile::tempdir().expect("tempdir");
    let store = roundtable_store::Store::open(&project.path().join(".roundtable/state")).await.expect("open");
    let event = roundtable_store::NewEvent {
        object: &object(),
        severity: roundtable_store::Severity::Normal,
        reason: roundtable_specs::events::EventReason::SpecChanged.into(),
        message: "a row to copy",
        record: None,
    };
    store.append_event(&event).await.expect("event");
    store.close().await;
    project
}

fn object() -> roundtable_specs::ObjectKey {
    roundtable_specs::ObjectKey::new(roundtable_specs::Kind::Assignment, "t")
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).expect("stat").permissions().mode() & 0o777
}

/// A dangling link at `link`, to a file `victim` that does not exist yet.
fn planted_link(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (link, victim) = (dir.join("copy.db"), dir.join("victim.db"));
    std::os::unix::fs::symlink(&victim, &link).expect("symlink");
    (link, victim)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_or_migration_target_that_is_a_link_is_refused_and_its_destination_untouched() {
    let project = project_with_state().await;
    let root = project.path();
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let (link, victim) = planted_link(elsewhere.path());
    let target = link.to_str().expect("utf-8");
    for args in [vec!["state", "backup", target], vec!["state", "migrate", "--to", &format!("sqlite:{target}")]] {
        let out = roundtable(root, &args);
        assert!(!out.status.success(), "{args:?} wrote through the link: {}", stdout(&out));
        assert!(stderr(&out).contains("already exists (a file or a symbolic link)"), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(target), "the message names the target: {}", stderr(&out));
        assert!(!victim.exists(), "{args:?}: the link's destination was written");
        assert!(std::fs::symlink_metadata(&link).expect("the link").file_type().is_symlink());
    }

    // Without the link, both copies are new files only their owner can read, and they hold the state.
    std::fs::remove_file(&link).expect("rm link");
    let backup = elsewhere.path().join("backup.db");
    let out = roundtable(root, &["state", "backup", backup.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let migrated = elsewhere.path().join("migrated.db");
    let out = roundtable(root, &["state", "migrate", "--to", &format!("sqlite:{}", migrated.display())]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!((mode(&backup), mode(&migrated)), (0o600, 0o600));
    for copy in [&backup, &migrated] {
        let store =
            roundtable_store::Store::connect(&roundtable_store::StoreUrl::Sqlite(copy.clone())).await.expect("copy");
        assert_eq!(store.recent_events(None, 10).await.expect("events").len(), 1, "{}", copy.display());
        store.close().await;
    }
}

#[test]
fn a_state_db_that_is_not_sqlite_is_refused_at_once_by_name_and_left_untouched() {
    let project = tempfile::tempdir().expect("tempdir");
    let state = project.path().join(".roundtable/state");
    std::fs::create_dir_all(&state).expect("mkdir");
    let db = state.join("state.db");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&db, &garbage).expect("write");
    for args in [&["status"][..], &["sessions", "list"], &["state", "backup", "b.db"]] {
        let started = std::time::Instant::now();
        let out = roundtable(project.path(), args);
        let took = started.elapsed();
        assert!(!out.status.success(), "{args:?}: {}", stdout(&out));
        let text = stderr(&out);
        assert!(text.contains("state.db is not a SQLite database"), "{args:?}: {text}");
        assert_eq!(text.lines().count(), 1, "{args:?}: one line, not retries: {text}");
        assert!(took < std::time::Duration::from_secs(1), "{args:?} took {took:?}");
        assert_eq!(std::fs::read(&db).expect("read"), garbage, "{args:?} changed the file");
    }
    assert!(!state.join("state.db-wal").exists() && !project.path().join("b.db").exists());
}
