//! The state directory under a controller whose umask is permissive (0000). A test binary of its
//! own: the umask is process-wide, and changing it beside other tests' threads would change their
//! files.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use roundtable_specs::events::EventReason;
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{NewEvent, Severity, Store};
use rustix::fs::Mode;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o7777
}

#[tokio::test]
async fn the_state_directory_and_its_files_are_private_whatever_the_umask() {
    rustix::process::umask(Mode::from_raw_mode(0o000));
    let base = tempfile::tempdir().expect("tempdir");
    let state = base.path().join(".roundtable/state");
    let store = Store::open(&state).await.expect("open");
    let object = ObjectKey::new(Kind::Adapter, "codex");
    let event = NewEvent {
        object: &object,
        severity: Severity::Normal,
        reason: EventReason::SpecChanged.into(),
        message: "ok",
        record: None,
    };
    store.append_event(&event).await.expect("write");
    let _lock = roundtable_store::lock::acquire(&state, "test").expect("lock");

    assert_eq!(mode(&state), 0o700, "the state directory");
    for file in [".gitignore", "state.db", "state.db-wal", "state.db-shm", "daemon.lock", "migrate.lock"] {
        assert_eq!(mode(&state.join(file)), 0o600, "{file}");
    }
    let written = state.join("api-address");
    roundtable_store::state_dir::write_private(&written, b"127.0.0.1:1\n").expect("write");
    assert_eq!(mode(&written), 0o600);
    store.close().await;
}

#[tokio::test]
async fn an_existing_open_state_directory_is_tightened_and_each_change_named() {
    let base = tempfile::tempdir().expect("tempdir");
    let state = base.path().join("state");
    std::fs::create_dir_all(&state).expect("mkdir");
    std::fs::write(state.join("state.db"), "").expect("write");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(state.join("state.db"), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let tightened = roundtable_store::prepare_state_dir(&state).expect("prepare");
    let notes: Vec<String> = tightened.iter().map(ToString::to_string).collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[1].contains("state.db from 0644 to 0600"), "{notes:?}");
    assert_eq!((mode(&state), mode(&state.join("state.db"))), (0o700, 0o600));
}
