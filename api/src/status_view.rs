//! The materialised status: `status` rows computed once per change (a write to the store, a spec
//! edit the daemon records, the engine's leftovers on a timer), not once per request, and kept in
//! memory with the resource version of each row's last change, as kube-apiserver's watch cache
//! serves lists. Whole lists, pages and watches are all served from it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roundtable_service::{ObjectRows, Service};
use roundtable_specs::output::ObjectStatus;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// Changes kept for watches that resume, at most this many and this much row JSON (a change of a
/// row since superseded holds its own copy); a watch resuming from an older version is told to
/// relist (`410 Gone`), as kube-apiserver's watch cache bounds its window.
const KEPT_CHANGES: usize = 20_000;
const KEPT_CHANGE_BYTES: usize = 4 << 20;
/// Snapshots a `continue` token can still name (a paginated read stays on one snapshot).
const KEPT_SNAPSHOTS: usize = 8;
/// Writes come in bursts (a reconcile writes conditions, a generation, an event): one refresh
/// after a burst, not one per write.
const SETTLE: Duration = Duration::from_millis(50);
/// How long a read waits for the view to catch up with the writes made before it (then it is
/// served what there is), as kube-apiserver's consistent reads from its cache wait.
const CATCH_UP: Duration = Duration::from_secs(3);
/// Rows that change with time alone (heartbeats, retention, the engine's leftovers, running
/// sessions' sidecars) or by other controllers' writes to a shared store are refreshed at least
/// this often. On a store of its own the rows of objects are not re-read then: only this
/// process writes what they show (another process's command writes what they do not show, such
/// as a decision or a receipt, or asks the daemon), and its writes refresh the view anyway; at
/// 100,000 objects re-reading them every floor was a quarter of a core spent finding nothing.
const FLOOR: Duration = Duration::from_secs(10);

/// One row with its key (`KIND/NAME`), its compact JSON and the version of its last change. The
/// JSON is all that is kept of it: every reader but the console and the admin MCP tools sends it
/// as it is, and two rows are the same when their JSON is.
#[derive(Debug)]
pub struct Row {
    pub key: Box<str>,
    pub json: Box<str>,
    pub version: u64,
}

impl Row {
    /// The row as the CLI lists it, read back from its JSON.
    pub fn status(&self) -> Result<ObjectStatus, serde_json::Error> {
        serde_json::from_str(&self.json)
    }
}

/// What happened to a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

impl ChangeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Added => "ADDED",
            ChangeType::Modified => "MODIFIED",
            ChangeType::Deleted => "DELETED",
        }
    }
}

/// One change: its version, and the row as it is after (as it was, for a deletion).
#[derive(Debug, Clone)]
pub struct Change {
    pub version: u64,
    pub type_: ChangeType,
    pub row: Arc<Row>,
}

impl Change {
    /// What it counts for in the kept history.
    fn size(&self) -> usize {
        self.row.json.len() + self.row.key.len()
    }
}

/// Every row at one version.
#[derive(Debug)]
pub struct Snapshot {
    pub version: u64,
    /// The store's write count when its computation started: it shows every write up to it.
    pub writes: u64,
    pub rows: Arc<[Arc<Row>]>,
    /// When it was computed, and how long that took.
    pub computed_at: Instant,
    pub took: Duration,
    body: std::sync::OnceLock<bytes::Bytes>,
}

impl Snapshot {
    /// The whole list as compact JSON (`ObjectStatusList`), built once per snapshot.
    pub fn body(&self) -> bytes::Bytes {
        self.body.get_or_init(|| list_body(&self.rows, self.version, None)).clone()
    }
}

/// `rows` as an `ObjectStatusList` at `version`, with `next` as its continue token, built from
/// each row's JSON (nothing is serialised again).
pub fn list_body(rows: &[Arc<Row>], version: u64, next: Option<&str>) -> bytes::Bytes {
    let size = rows.iter().map(|row| row.json.len() + 1).sum::<usize>() + 160;
    let mut body = String::with_capacity(size);
    body.push_str(r#"{"apiVersion":"#);
    body.push_str(&serde_json::to_string(roundtable_specs::meta::API_VERSION).unwrap_or_default());
    body.push_str(r#","kind":"ObjectStatusList","metadata":{"resourceVersion":""#);
    body.push_str(&version.to_string());
    body.push('"');
    if let Some(next) = next {
        body.push_str(r#","continue":"#);
        body.push_str(&serde_json::to_string(next).unwrap_or_default());
    }
    body.push_str(r#"},"items":["#);
    for (index, row) in rows.iter().enumerate() {
        if index > 0 {
            body.push(',');
        }
        body.push_str(&row.json);
    }
    body.push_str("]}\n");
    bytes::Bytes::from(body)
}

/// Whether a watch can resume after a version.
#[derive(Debug)]
pub enum Since {
    Changes(Vec<Change>),
    /// The version is older than what is kept: relist.
    Expired {
        oldest: u64,
    },
}

#[derive(Default)]
struct History {
    changes: VecDeque<Change>,
    /// The JSON bytes of `changes`.
    bytes: usize,
    /// Every change above this version is kept.
    kept_after: u64,
    snapshots: VecDeque<(u64, Arc<[Arc<Row>]>)>,
}

impl History {
    /// Adds `changes`, then forgets the oldest beyond what is kept.
    fn record(&mut self, changes: Vec<Change>) {
        self.bytes += changes.iter().map(Change::size).sum::<usize>();
        self.changes.extend(changes);
        while self.changes.len() > KEPT_CHANGES || self.bytes > KEPT_CHANGE_BYTES {
            let Some(dropped) = self.changes.pop_front() else { break };
            self.bytes -= dropped.size();
            self.kept_after = dropped.version;
        }
    }
}

/// The view: the current snapshot, recent changes, and why the last refresh failed, if it did.
/// Cheap to clone.
#[derive(Clone)]
pub struct StatusView {
    current: watch::Receiver<Option<Arc<Snapshot>>>,
    writes: watch::Receiver<u64>,
    history: Arc<Mutex<History>>,
    failure: Arc<Mutex<Option<String>>>,
}

/// Keeps a [`StatusView`] current; dropping it stops the refreshes and ends every watch.
pub struct Refresher {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Refresher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StatusView {
    /// A view of `service`'s status (sessions and proposals past `retention` among it), kept
    /// current by the returned refresher.
    pub fn start(service: Service, retention: Duration) -> (Self, Refresher) {
        let (sender, current) = watch::channel(None);
        // Versions start from the clock, so one from an earlier daemon is always older than any
        // of this one's, and a client resuming from it is told to relist.
        let first = u64::try_from(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros(),
        )
        .unwrap_or(1);
        let history = Arc::new(Mutex::new(History { kept_after: first, ..Default::default() }));
        let view = Self { current, writes: service.store().writes(), history, failure: Arc::default() };
        let task = tokio::spawn(refresh(service, retention, sender, view.clone(), first));
        (view, Refresher { task })
    }

    /// The current snapshot, waiting up to `patience` for the first one; why there is none. A
    /// read after a write sees it: the snapshot served shows every write this daemon made before
    /// the call, unless catching up takes longer than [`CATCH_UP`].
    pub async fn snapshot(&self, patience: Duration) -> Result<Arc<Snapshot>, String> {
        let written = *self.writes.borrow();
        let mut current = self.current.clone();
        let caught_up = |s: &Option<Arc<Snapshot>>| s.as_ref().is_some_and(|s| s.writes >= written);
        if let Ok(Ok(found)) = tokio::time::timeout(CATCH_UP.min(patience), current.wait_for(caught_up)).await {
            return found.clone().ok_or_else(|| "no status yet".to_owned());
        }
        let waited = tokio::time::timeout(patience, current.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(found)) => found.clone().ok_or_else(|| "no status yet".to_owned()),
            _ => Err(self.failure().unwrap_or_else(|| "the status is not computed yet".to_owned())),
        }
    }

    /// Why the last refresh failed, while the snapshot served is older than it.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|failure| failure.clone())
    }

    /// The rows of the snapshot at `version`, while it is kept.
    pub fn rows_at(&self, version: u64) -> Option<Arc<[Arc<Row>]>> {
        let history = self.history.lock().ok()?;
        history.snapshots.iter().find(|(v, _)| *v == version).map(|(_, rows)| rows.clone())
    }

    /// The changes after `version`, oldest first.
    pub fn since(&self, version: u64) -> Since {
        let Ok(history) = self.history.lock() else { return Since::Expired { oldest: 0 } };
        if version < history.kept_after {
            return Since::Expired { oldest: history.kept_after };
        }
        Since::Changes(history.changes.iter().filter(|change| change.version > version).cloned().collect())
    }

    /// Waits until the view moves past what `seen` saw; false once it stops for good.
    pub async fn changed(seen: &mut watch::Receiver<Option<Arc<Snapshot>>>) -> bool {
        seen.changed().await.is_ok()
    }

    /// A receiver that [`StatusView::changed`] waits on.
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<Snapshot>>> {
        self.current.clone()
    }

    fn publish(&self, sender: &watch::Sender<Option<Arc<Snapshot>>>, snapshot: Snapshot, changes: Vec<Change>) {
        if let Ok(mut history) = self.history.lock() {
            history.record(changes);
            history.snapshots.push_back((snapshot.version, snapshot.rows.clone()));
            while history.snapshots.len() > KEPT_SNAPSHOTS {
                history.snapshots.pop_front();
            }
        }
        sender.send_replace(Some(Arc::new(snapshot)));
    }
}

/// The status now: the rows of objects re-read when `reread` (or never read), kept in `objects`,
/// and everything around them read afresh.
async fn status(
    service: &Service,
    objects: &mut Option<ObjectRows>,
    reread: bool,
    retention: Duration,
) -> Result<Vec<ObjectStatus>, roundtable_service::ServiceError> {
    let objects = match objects {
        Some(kept) if !reread => kept,
        slot => slot.insert(service.status_of_objects().await?),
    };
    service.status_around(objects, retention).await
}

/// The refresh loop: a snapshot now, then one after each burst of writes, or after
/// [`FLOOR`] without any. A refresh never takes more than half the time: after one that took
/// `t`, the next waits at least `t`.
async fn refresh(
    service: Service,
    retention: Duration,
    sender: watch::Sender<Option<Arc<Snapshot>>>,
    view: StatusView,
    first: u64,
) {
    let mut writes = service.store().writes();
    let mut version = first;
    let mut rows: Arc<[Arc<Row>]> = Arc::from(Vec::new());
    let mut objects: Option<ObjectRows> = None;
    let mut reread = true;
    loop {
        let written = *writes.borrow_and_update();
        let started = Instant::now();
        let found = status(&service, &mut objects, reread, retention).await;
        // A failed read of the objects is read again next time.
        reread = found.is_err();
        match found {
            Ok(found) => {
                let (next, changes) = diff(&rows, found, &mut version);
                let took = started.elapsed();
                if let Ok(mut failure) = view.failure.lock() {
                    *failure = None;
                }
                tracing::debug!(
                    rows = next.len(),
                    changes = changes.len(),
                    took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                    "status view refreshed"
                );
                let current = sender.borrow().clone();
                match current {
                    // Nothing changed and nothing was written: nothing to tell anyone.
                    Some(current) if changes.is_empty() && current.writes >= written => {}
                    Some(current) if changes.is_empty() => {
                        // Nothing changed: the same rows, now known to show these writes too.
                        let snapshot = Snapshot {
                            version: current.version,
                            writes: written,
                            rows: current.rows.clone(),
                            computed_at: started,
                            took,
                            body: current.body.clone(),
                        };
                        sender.send_replace(Some(Arc::new(snapshot)));
                    }
                    _ => {
                        rows = next;
                        let snapshot = Snapshot {
                            version,
                            writes: written,
                            rows: rows.clone(),
                            computed_at: started,
                            took,
                            body: Default::default(),
                        };
                        view.publish(&sender, snapshot, changes);
                    }
                }
            }
            Err(error) => {
                let error = roundtable_telemetry::error_chain(&error);
                tracing::warn!(%error, "cannot refresh the status view; serving the last one");
                if let Ok(mut failure) = view.failure.lock() {
                    *failure = Some(error);
                }
            }
        }
        let took = started.elapsed();
        tokio::select! {
            changed = writes.changed() => {
                if changed.is_err() {
                    return;
                }
                reread = true;
            }
            // Other controllers write to a shared store without this process knowing.
            () = tokio::time::sleep(FLOOR.max(took * 4)) => reread |= service.store().is_shared(),
        }
        tokio::time::sleep(SETTLE.max(took)).await;
    }
}

/// The key of each row (`KIND/NAME`, `#2` and on for a repeat), in order.
fn keyed(found: Vec<ObjectStatus>) -> Vec<(String, ObjectStatus)> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    found
        .into_iter()
        .map(|status| {
            let base = format!("{}/{}", status.kind, status.name);
            let count = seen.entry(base.clone()).or_default();
            *count += 1;
            let key = if *count == 1 { base } else { format!("{base}#{count}") };
            (key, status)
        })
        .collect()
}

/// The rows of `found` against `old`: an unchanged row is the same `Arc` (with its version), a
/// new or changed one gets the next version, and a row no longer found is a deletion.
pub fn diff(old: &[Arc<Row>], found: Vec<ObjectStatus>, version: &mut u64) -> (Arc<[Arc<Row>]>, Vec<Change>) {
    let before: HashMap<&str, &Arc<Row>> = old.iter().map(|row| (&*row.key, row)).collect();
    let mut changes = Vec::new();
    let mut rows = Vec::with_capacity(found.len());
    let mut still: std::collections::HashSet<String> = std::collections::HashSet::new();
    // Each row is written into one buffer and copied out only when it changed: a refresh of
    // 10,000 unchanged rows allocates no JSON.
    let mut json = Vec::new();
    for (key, status) in keyed(found) {
        json.clear();
        if serde_json::to_writer(&mut json, &status).is_err() {
            json.clear();
        }
        let json = std::str::from_utf8(&json).unwrap_or_default();
        match before.get(key.as_str()) {
            Some(previous) if *previous.json == *json => rows.push(Arc::clone(previous)),
            previous => {
                *version += 1;
                let row = Arc::new(Row { key: key.as_str().into(), json: json.into(), version: *version });
                let type_ = if previous.is_some() { ChangeType::Modified } else { ChangeType::Added };
                changes.push(Change { version: *version, type_, row: row.clone() });
                rows.push(row);
            }
        }
        still.insert(key);
    }
    for row in old {
        if !still.contains(&*row.key) {
            *version += 1;
            changes.push(Change { version: *version, type_: ChangeType::Deleted, row: row.clone() });
        }
    }
    (Arc::from(rows), changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_specs::output::{Health, SyncStatus};

    fn row(kind: &str, name: &str, message: &str) -> ObjectStatus {
        ObjectStatus {
            kind: kind.into(),
            name: name.into(),
            generation: None,
            observed_generation: None,
            sync: SyncStatus::Synced,
            health: Health::Healthy,
            created_at: None,
            message: message.into(),
            conditions: Vec::new(),
        }
    }

    #[test]
    fn only_what_changed_gets_a_new_version() {
        let mut version = 100;
        let (first, added) = diff(&[], vec![row("Adapter", "a", ""), row("Assignment", "b", "")], &mut version);
        assert_eq!(
            added.iter().map(|c| (c.type_, c.version)).collect::<Vec<_>>(),
            [(ChangeType::Added, 101), (ChangeType::Added, 102)]
        );
        let (second, changed) =
            diff(&first, vec![row("Adapter", "a", ""), row("Assignment", "b", "running")], &mut version);
        assert_eq!(changed.len(), 1);
        assert_eq!(
            (changed[0].type_, &*changed[0].row.key, changed[0].version),
            (ChangeType::Modified, "Assignment/b", 103)
        );
        assert!(Arc::ptr_eq(&first[0], &second[0]), "an unchanged row is shared, not copied");
        let (third, removed) = diff(&second, vec![row("Assignment", "b", "running")], &mut version);
        assert_eq!(removed.len(), 1);
        assert_eq!((removed[0].type_, &*removed[0].row.key), (ChangeType::Deleted, "Adapter/a"));
        assert_eq!(third.len(), 1);
    }

    #[test]
    fn the_history_keeps_the_newest_changes_within_its_bytes() {
        let mut history = History::default();
        let mut version = 0;
        let long = "x".repeat(1000);
        let mut rows: Arc<[Arc<Row>]> = Arc::from(Vec::new());
        for round in 0..3 {
            let found = (0..5_000).map(|i| row("Adapter", &format!("a{i}"), &format!("{round}{long}"))).collect();
            let (next, changes) = diff(&rows, found, &mut version);
            history.record(changes);
            rows = next;
        }
        assert!(history.bytes <= KEPT_CHANGE_BYTES, "{} bytes kept", history.bytes);
        assert_eq!(history.bytes, history.changes.iter().map(Change::size).sum::<usize>());
        let oldest = history.changes.front().expect("changes kept").version;
        assert_eq!(history.kept_after, oldest - 1, "every change after kept_after is kept");
        assert_eq!(history.changes.back().expect("changes kept").version, version, "the newest is kept");
        assert!(history.changes.len() < 15_000, "{} changes of 15,000 kept", history.changes.len());
    }

    #[test]
    fn rows_of_one_kind_and_name_keep_apart() {
        let mut version = 0;
        let (rows, _) = diff(&[], vec![row("Volume", "v", "x"), row("Volume", "v", "y")], &mut version);
        assert_eq!(rows.iter().map(|r| &*r.key).collect::<Vec<_>>(), ["Volume/v", "Volume/v#2"]);
    }

    #[test]
    fn a_list_body_is_the_rows_json_as_an_object_status_list() {
        let mut version = 7;
        let (rows, _) = diff(&[], vec![row("Adapter", "a", "ok")], &mut version);
        let body = list_body(&rows, version, Some("next"));
        let list: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(list["kind"], "ObjectStatusList");
        assert_eq!(list["metadata"]["resourceVersion"], "8");
        assert_eq!(list["metadata"]["continue"], "next");
        assert_eq!(list["items"][0]["name"], "a");
        let typed: roundtable_specs::List<ObjectStatus> = serde_json::from_slice(&body).expect("a List");
        assert_eq!(typed.items.len(), 1);
    }
}
