//! How a `status` row is made: one constructor per kind of row, so what each kind fixes (its kind
//! word, which fields it leaves empty, its sync and health where they never vary, a message's
//! shared wording) is decided here and nowhere else. Callers say only what varies.

use roundtable_specs::ObjectKey;
use roundtable_specs::broker::BrokerReport;
use roundtable_specs::output::{Condition, Health, ObjectStatus, SyncStatus};
use roundtable_specs::session::EgressReport;
use roundtable_store::{ObjectRecord, SessionRecord};

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

/// A running session's egress gateway, named by the session and always in sync (it has no spec):
/// its health and decision counts, degraded once its accept loop restarted.
pub fn gateway(session: &SessionRecord, report: &EgressReport) -> ObjectStatus {
    let counters = &report.counters;
    let denials: Vec<String> = counters.denials.iter().map(|(reason, n)| format!("{reason} {n}")).collect();
    let mut message = format!(
        "{} for {}: {} allowed, {} denied{}, {} abandoned, {} open",
        report.hosts.join(", "),
        session.assignment,
        counters.allowed,
        counters.denied,
        if denials.is_empty() { String::new() } else { format!(" ({})", denials.join(", ")) },
        counters.abandoned,
        counters.active,
    );
    if counters.lines_dropped > 0 {
        message.push_str(&format!("; {} log lines dropped over budget", counters.lines_dropped));
    }
    let health = if counters.restarts > 0 {
        message.push_str(&format!("; accept loop restarted {} times", counters.restarts));
        Health::Degraded
    } else {
        Health::Healthy
    };
    unversioned("Gateway", session.id.clone(), SyncStatus::Synced, health, session.started_at.clone(), message)
}

/// A running session's credential broker: what it passed, refused and counted; degraded once its
/// budget is spent.
pub fn broker(session: &SessionRecord, report: &BrokerReport) -> ObjectStatus {
    let refused: Vec<String> = report.refused.iter().map(|(reason, n)| format!("{reason} {n}")).collect();
    let mut message = format!(
        "{} for {}: {} passed, {} refused{}, {} tokens",
        report.hosts.join(", "),
        session.assignment,
        report.requests,
        report.refused.values().sum::<u64>(),
        if refused.is_empty() { String::new() } else { format!(" ({})", refused.join(", ")) },
        report.tokens.total(),
    );
    if let (Some(cap), Some(left)) = (report.budget.tokens, report.left().0) {
        message.push_str(&format!(" of {cap} ({left} left)"));
    }
    let health = if report.exhausted {
        message.push_str("; budget spent");
        Health::Degraded
    } else {
        Health::Healthy
    };
    unversioned("Broker", session.id.clone(), SyncStatus::Synced, health, session.started_at.clone(), message)
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
        let restarted = roundtable_specs::session::EgressCounters { restarts: 1, ..Default::default() };
        let report = EgressReport {
            state: roundtable_specs::session::SidecarState::Serving,
            socket: String::new(),
            hosts: Vec::new(),
            allow_cidrs: Vec::new(),
            counters: restarted,
        };
        let degraded = gateway(&SessionRecord::default(), &report);
        assert_eq!(degraded.health, Health::Degraded);
        assert_eq!(exits(degraded), 0);
    }

    #[test]
    fn a_leftover_says_why_it_requires_pruning() {
        let row = requires_pruning("Volume", "v".into(), "no Assignment");
        assert_eq!((row.kind.as_str(), row.message.as_str()), ("Volume", "requires pruning: no Assignment"));
        assert_eq!(row.health, Health::None);
    }

    #[test]
    fn the_status_row_names_denials_by_reason_in_wire_order() {
        use roundtable_specs::egress::{AddressClass, GatewayReason};
        use roundtable_specs::session::{EgressCounters, SidecarState};
        let session = SessionRecord { id: "s1".into(), assignment: "fix".into(), ..SessionRecord::default() };
        let counters = EgressCounters {
            allowed: 2,
            denied: 3,
            abandoned: 1,
            denials: [(GatewayReason::TunnelLimit, 1), (GatewayReason::AddressDenied(AddressClass::Metadata), 2)]
                .into(),
            ..EgressCounters::default()
        };
        let report = EgressReport {
            state: SidecarState::Serving,
            socket: "/run/egress.sock".into(),
            hosts: vec!["api.example.com".into()],
            allow_cidrs: Vec::new(),
            counters,
        };
        let row = gateway(&session, &report);
        assert_eq!(
            row.message,
            "api.example.com for fix: 2 allowed, 3 denied (address_denied:metadata 2, tunnel_limit 1), 1 abandoned, 0 open"
        );
        assert_eq!(row.health, Health::Healthy);
    }
}
