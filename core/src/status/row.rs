//! How a `status` row is made: one constructor per kind of row, so what each kind fixes (its kind
//! word, which fields it leaves empty, its sync and health where they never vary, a message's
//! shared wording) is decided here and nowhere else. Callers say only what varies.

use roundtable_specs::ObjectKey;
use roundtable_specs::output::{Condition, Health, ObjectStatus, SyncStatus};
use roundtable_store::ObjectRecord;

/// A row for what is not a declared object: no generation, no conditions.
fn unversioned(
    kind: &str,
    name: String,
    sync: SyncStatus,
    health: Health,
    created_at: Option<String>,
    message: String,
) -> ObjectStatus {
    ObjectStatus {
        kind: kind.to_owned(),
        name,
        generation: None,
        observed_generation: None,
        sync,
        health,
        created_at,
        message,
        conditions: Vec::new(),
    }
}

/// An object's row (declared, recorded, or both), in sync until the caller finds drift; its
/// generations and creation time are the record's.
pub fn object(
    key: &ObjectKey,
    record: Option<&ObjectRecord>,
    health: Health,
    message: String,
    conditions: Vec<Condition>,
) -> ObjectStatus {
    ObjectStatus {
        kind: key.kind.to_string(),
        name: key.name.clone(),
        generation: record.map(|r| r.generation),
        observed_generation: record.and_then(|r| r.observed_generation),
        sync: SyncStatus::Synced,
        health,
        created_at: record.map(|r| r.created_at.clone()),
        message,
        conditions,
    }
}

/// A spec file that does not load: an error (`status --exit-code` exits 1).
pub fn broken_file(file: &str, message: String) -> ObjectStatus {
    unversioned("File", file.to_owned(), SyncStatus::Error, Health::None, None, message)
}

/// What nothing needs any more, a labelled leftover or a record past retention: drift until
/// `prune` removes it.
pub fn requires_pruning(kind: &str, name: String, why: &str) -> ObjectStatus {
    unversioned(kind, name, SyncStatus::OutOfSync, Health::None, None, format!("requires pruning: {why}"))
}

/// The outcome of pruning one item (`roundtable prune`): an error when it could not be removed,
/// else drift removed (or, on a dry run, removable).
pub fn pruned(kind: &str, name: String, failed: bool, message: String) -> ObjectStatus {
    let sync = if failed { SyncStatus::Error } else { SyncStatus::OutOfSync };
    unversioned(kind, name, sync, Health::None, None, message)
}

/// A container engine that did not answer: an error (`status --exit-code` exits 1), its health
/// unknown.
pub fn engine_unreachable(endpoint: &str, message: String) -> ObjectStatus {
    unversioned("Engine", endpoint.to_owned(), SyncStatus::Error, Health::Unknown, None, message)
}

/// A state store whose disk is full: an error (`status --exit-code` exits 1); no execution starts
/// until it has room.
pub fn store_full(full: &roundtable_store::DiskFull) -> ObjectStatus {
    let folder = full.folder.display().to_string();
    unversioned("Store", folder, SyncStatus::Error, Health::Degraded, None, full.to_string())
}

/// A running session's egress sidecar, named by the session; always in sync (it has no spec).
pub fn gateway(session_id: &str, started_at: Option<String>, health: Health, message: String) -> ObjectStatus {
    unversioned("Gateway", session_id.to_owned(), SyncStatus::Synced, health, started_at, message)
}

/// A running session's credential broker: degraded once its budget is spent.
pub fn broker(session_id: &str, started_at: Option<String>, health: Health, message: String) -> ObjectStatus {
    unversioned("Broker", session_id.to_owned(), SyncStatus::Synced, health, started_at, message)
}

/// A controller on a shared store: out of sync while its checkout is `behind` the store's desired
/// revision, degraded once it is no longer `live` (its heartbeat expired).
pub fn controller(id: String, started_at: String, behind: bool, live: bool, message: String) -> ObjectStatus {
    let sync = if behind { SyncStatus::OutOfSync } else { SyncStatus::Synced };
    let health = if live { Health::Healthy } else { Health::Degraded };
    unversioned("Controller", id, sync, health, Some(started_at), message)
}

/// Where the desired state comes from when it is committed state (a local checkout's `HEAD`, a
/// git source): an error while the last fetch failed (the last good commit is still reconciled).
pub fn source(name: String, failing: bool, fetched_at: Option<String>, message: String) -> ObjectStatus {
    let (sync, health) =
        if failing { (SyncStatus::Error, Health::Degraded) } else { (SyncStatus::Synced, Health::Healthy) };
    unversioned("Source", name, sync, health, fetched_at, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::exit_code;

    #[test]
    fn what_each_row_means_for_status_exit_code() {
        let message = || "m".to_owned();
        let exits = |row: ObjectStatus| exit_code(&[row]);
        assert_eq!(exits(broken_file("a.yaml", message())), 1);
        assert_eq!(exits(engine_unreachable("unix:///x.sock", message())), 1);
        assert_eq!(exits(pruned("Session", "s".into(), true, message())), 1);
        assert_eq!(exits(pruned("Session", "s".into(), false, message())), 2);
        assert_eq!(exits(requires_pruning("Volume", "v".into(), "no Assignment")), 2);
        assert_eq!(exits(controller("c".into(), "t".into(), true, true, message())), 2);
        assert_eq!(exits(controller("c".into(), "t".into(), false, false, message())), 0);
        assert_eq!(exits(gateway("s", None, Health::Degraded, message())), 0);
    }

    #[test]
    fn a_leftover_says_why_it_requires_pruning() {
        let row = requires_pruning("Volume", "v".into(), "no Assignment");
        assert_eq!((row.kind.as_str(), row.message.as_str()), ("Volume", "requires pruning: no Assignment"));
        assert_eq!(row.health, Health::None);
    }
}
