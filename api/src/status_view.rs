//! The materialised status: `status` rows computed once per change (a write to the store, a spec
//! edit the daemon records, the engine's leftovers on a timer), not once per request, and kept in
//! memory with the resource version of each row's last change, as kube-apiserver's watch cache
//! serves lists. Whole lists, pages and watches are all served from it. After a write only the
//! rows of the objects it can change are rebuilt ([`KeptRows`]), not every object's.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roundtable_service::{Around, KeptRows, Refreshed, Service};
use roundtable_specs::ObjectKey;
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
/// On a shared store they are all re-read then, as the store's journal of writes
/// ([`roundtable_store::Store::changes_since`]) sees only this process's.
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
    /// Rows of objects made since the start, for tests and the refresh's log line.
    rebuilt: Arc<AtomicU64>,
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
        let view = Self {
            current,
            writes: service.store().writes(),
            history,
            failure: Arc::default(),
            rebuilt: Arc::default(),
        };
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

    /// How many rows of objects the refreshes have made since the view started: every object's
    /// at the first, then only those the writes since the one before can change.
    pub fn rows_rebuilt(&self) -> u64 {
        self.rebuilt.load(Ordering::Relaxed)
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

/// The rows the view keeps between refreshes: the objects' by key, and the few around them.
#[derive(Default)]
struct Rows {
    /// What the objects' rows were made from (the service's side).
    kept: KeptRows,
    objects: BTreeMap<ObjectKey, Arc<Row>>,
    /// The source's rows, then the rows of files that do not load, as last made.
    sources: Vec<ObjectStatus>,
    files: Vec<ObjectStatus>,
    /// Every row but the objects', in list order: before, sources, files, after.
    loose: Arc<[Arc<Row>]>,
    /// How many of `loose` come before the objects' rows.
    loose_before: usize,
}

/// What one refresh read: the objects' rows rebuilt (`None`: not re-read), and the rows around.
type Read = (Option<Refreshed>, Around);

/// The status now: the rows of objects brought up to date when `reread` (every one with
/// `whole`), and everything around them read afresh.
async fn read(
    service: &Service,
    kept: &mut KeptRows,
    reread: bool,
    whole: bool,
    retention: Duration,
) -> Result<Read, roundtable_service::ServiceError> {
    let refreshed = match reread {
        true => Some(service.refresh_objects(kept, whole).await?),
        false => None,
    };
    let around = service.status_around(kept.assignments(), &kept.unfinished(), retention).await?;
    Ok((refreshed, around))
}

impl Rows {
    /// Applies what a refresh read: the rows that changed get the next versions, in list order
    /// (around rows by their position among themselves), a row no longer there is a deletion.
    fn apply(&mut self, (refreshed, around): Read, version: &mut u64) -> Applied {
        let mut changes = Vec::new();
        let (mut made, mut whole) = (0, false);
        if let Some(refreshed) = refreshed {
            (made, whole) = (refreshed.rows.len(), refreshed.whole);
            self.sources = refreshed.sources;
            self.files = refreshed.files;
            changes = apply_objects(&mut self.objects, refreshed.rows, refreshed.whole, version);
        }
        let Around { before, after } = around;
        self.loose_before = before.len() + self.sources.len();
        let mut loose = before;
        loose.extend(self.sources.iter().cloned());
        loose.extend(self.files.iter().cloned());
        loose.extend(after);
        let (next, loose_changes) = diff(&self.loose, loose, version);
        changes.extend(loose_changes);
        self.loose = next;
        let (head, tail) = self.loose.split_at(self.loose_before.min(self.loose.len()));
        let mut rows = Vec::with_capacity(self.loose.len() + self.objects.len());
        rows.extend(head.iter().cloned());
        rows.extend(self.objects.values().cloned());
        rows.extend(tail.iter().cloned());
        Applied { rows: Arc::from(rows), changes, made, whole }
    }
}

/// What [`Rows::apply`] made: every row in list order, the changes, and how many rows of
/// objects were made (all of them when `whole`).
struct Applied {
    rows: Arc<[Arc<Row>]>,
    changes: Vec<Change>,
    made: usize,
    whole: bool,
}

/// Brings `objects` up to the rows rebuilt: a row whose JSON is the same keeps its `Arc` and
/// version, a new or changed one gets the next version, and a row gone (`None`, or with `whole`
/// one not among `rebuilt`) is a deletion.
fn apply_objects(
    objects: &mut BTreeMap<ObjectKey, Arc<Row>>,
    rebuilt: Vec<(ObjectKey, Option<ObjectStatus>)>,
    whole: bool,
    version: &mut u64,
) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut gone = match whole {
        true => std::mem::take(objects),
        false => BTreeMap::new(),
    };
    // Each row is written into one buffer and copied out only when it changed.
    let mut json = Vec::new();
    for (key, status) in rebuilt {
        let previous = if whole { gone.remove(&key) } else { objects.remove(&key) };
        let Some(status) = status else {
            if let Some(previous) = previous {
                gone.insert(key, previous);
            }
            continue;
        };
        json.clear();
        if serde_json::to_writer(&mut json, &status).is_err() {
            json.clear();
        }
        let text = std::str::from_utf8(&json).unwrap_or_default();
        let row = match previous {
            Some(previous) if *previous.json == *text => previous,
            previous => {
                *version += 1;
                let key = format!("{}/{}", status.kind, status.name);
                let row = Arc::new(Row { key: key.into(), json: text.into(), version: *version });
                let type_ = if previous.is_some() { ChangeType::Modified } else { ChangeType::Added };
                changes.push(Change { version: *version, type_, row: row.clone() });
                row
            }
        };
        objects.insert(key, row);
    }
    for row in gone.into_values() {
        *version += 1;
        changes.push(Change { version: *version, type_: ChangeType::Deleted, row });
    }
    changes
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
    let mut rows = Rows::default();
    let (mut reread, mut whole) = (true, true);
    loop {
        let written = *writes.borrow_and_update();
        let started = Instant::now();
        let found = read(&service, &mut rows.kept, reread, whole, retention).await;
        // After a failure every row is made again: what was read before it is not applied.
        (reread, whole) = (found.is_err(), found.is_err());
        match found {
            Ok(found) => {
                let Applied { rows: next, changes, made, whole: all } = rows.apply(found, &mut version);
                view.rebuilt.fetch_add(u64::try_from(made).unwrap_or(u64::MAX), Ordering::Relaxed);
                let took = started.elapsed();
                if let Ok(mut failure) = view.failure.lock() {
                    *failure = None;
                }
                tracing::debug!(
                    rows = next.len(),
                    rebuilt = made,
                    whole = all,
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
                        let snapshot = Snapshot {
                            version,
                            writes: written,
                            rows: next,
                            computed_at: started,
                            took,
                            body: Default::default(),
                        };
                        view.publish(&sender, snapshot, changes);
                    }
                }
            }
            Err(error) => {
                rows.kept.forget();
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
            () = tokio::time::sleep(FLOOR.max(took * 4)) => {
                let shared = service.store().is_shared();
                reread |= shared;
                whole |= shared;
            }
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

    /// A project of adapters and Assignments over a store of its own, the way the daemon's view
    /// sees it (an engine that does not answer: no engine is needed).
    mod over_a_store {
        use std::sync::Arc;
        use std::time::Duration;

        use roundtable_service::Service;
        use roundtable_specs::output::{Condition, ConditionStatus};
        use roundtable_specs::session::SessionPhase;
        use roundtable_specs::{Kind, ObjectKey};
        use roundtable_store::{SessionRecord, SourceSync, Store};

        use crate::status_view::{StatusView, diff};

        const API: &str = "apiVersion: roundtable.dev/v1alpha1";
        const RETENTION: Duration = Duration::from_secs(3600);

        pub(super) struct Fixture {
            pub dir: tempfile::TempDir,
            pub service: Service,
            pub store: Store,
        }

        pub(super) fn adapters(n: usize, enabled: &[bool]) -> String {
            (0..n)
                .map(|i| {
                    let on = enabled.get(i).copied().unwrap_or(false);
                    format!(
                        "{API}\nkind: Adapter\nmetadata: {{name: agent-{i}}}\nspec: {{command: agent, enabled: {on}}}\n"
                    )
                })
                .collect::<Vec<_>>()
                .join("---\n")
        }

        pub(super) fn assignments(n: usize, adapters: usize, prompt: &str) -> String {
            (0..n)
                .map(|i| {
                    format!(
                        "{API}\nkind: Assignment\nmetadata: {{name: task-{i}}}\nspec:\n  adapter: agent-{}\n  task: {{id: T{i}, prompt: {prompt}}}\n  readablePaths: [README.md]\n",
                        i % adapters
                    )
                })
                .collect::<Vec<_>>()
                .join("---\n")
        }

        impl Fixture {
            pub(super) async fn new(adapter_count: usize, assignment_count: usize) -> Self {
                let dir = tempfile::tempdir().expect("tempdir");
                let specs = dir.path().join(".roundtable");
                std::fs::create_dir_all(&specs).expect("mkdir");
                std::fs::write(dir.path().join("README.md"), "# test\n").expect("write");
                std::fs::write(specs.join("adapters.yaml"), adapters(adapter_count, &[])).expect("write");
                std::fs::write(specs.join("assignments.yaml"), assignments(assignment_count, adapter_count, "p"))
                    .expect("write");
                let project = roundtable_source::Project::resolve(&specs).expect("project");
                let store = Store::open_in_memory().await.expect("store");
                let runtime = Arc::new(roundtable_session_runtime::Unavailable {
                    endpoint: "unix:///nonexistent.sock".into(),
                    reason: "no engine in this test".into(),
                });
                let service = Service::sharing(&project, store.clone(), runtime);
                // Records every declared object (and reconciles one).
                let _ = service.reconcile_in_process(&ObjectKey::new(Kind::Adapter, "agent-0")).await;
                Self { dir, service, store }
            }

            pub(super) fn write(&self, file: &str, text: &str) {
                std::fs::write(self.dir.path().join(".roundtable").join(file), text).expect("write");
            }
        }

        /// The view's rows once it shows every write made so far, as (key, JSON).
        pub(super) async fn viewed(view: &StatusView) -> Vec<(String, String)> {
            let snapshot = view.snapshot(Duration::from_secs(10)).await.expect("a snapshot");
            snapshot.rows.iter().map(|row| (row.key.to_string(), row.json.to_string())).collect()
        }

        /// Every row computed afresh, as (key, JSON).
        pub(super) async fn recomputed(service: &Service) -> Vec<(String, String)> {
            let rows = service.status(RETENTION).await.expect("status");
            let (rows, _) = diff(&[], rows, &mut 0);
            rows.iter().map(|row| (row.key.to_string(), row.json.to_string())).collect()
        }

        pub(super) fn condition(status: ConditionStatus, reason: &str, message: &str) -> Condition {
            Condition {
                type_: "Ready".into(),
                status,
                reason: reason.into(),
                message: message.into(),
                last_transition_time: String::new(),
                observed_generation: 1,
            }
        }

        pub(super) fn session(id: &str, assignment: &str, phase: SessionPhase, created_at: &str) -> SessionRecord {
            SessionRecord {
                id: id.into(),
                assignment: assignment.into(),
                execution_generation: 1,
                attempt: 1,
                controller_run: "run".into(),
                phase,
                message: format!("{phase} here"),
                created_at: created_at.into(),
                ..Default::default()
            }
        }

        pub(super) fn source(commit: &str) -> SourceSync {
            SourceSync {
                mode: "git".into(),
                url: "https://example.invalid/repo.git".into(),
                branch: "main".into(),
                spec_path: ".roundtable".into(),
                commit: Some(commit.into()),
                fetched_at: Some("2026-01-01T00:00:00Z".into()),
                error: None,
                error_at: None,
                controller: "c".into(),
            }
        }

        pub(super) fn row<'a>(rows: &'a [(String, String)], key: &str) -> &'a str {
            rows.iter().find(|(k, _)| k == key).map_or("", |(_, json)| json.as_str())
        }

        /// RETENTION, for the view.
        pub(super) fn start(service: &Service) -> (StatusView, super::Refresher) {
            StatusView::start(service.clone(), RETENTION)
        }
    }

    /// The key test of the incremental view: a write to one object rebuilds that object's row
    /// only (a full recompute rebuilds every one), and what a reader sees then is what a full
    /// recompute says, the rows that depend on what was written among it.
    #[tokio::test]
    async fn a_write_to_one_object_rebuilds_its_row_and_no_other() {
        use over_a_store::*;
        use roundtable_specs::output::ConditionStatus;
        use roundtable_specs::session::SessionPhase;
        use roundtable_specs::{Kind, ObjectKey};

        let fixture = Fixture::new(40, 40).await;
        let (view, _refresher) = start(&fixture.service);
        assert_eq!(viewed(&view).await, recomputed(&fixture.service).await);
        let first = view.rows_rebuilt();
        assert!(first >= 80, "the first refresh makes every row ({first})");

        let task = ObjectKey::new(Kind::Assignment, "task-3");
        let waiting = condition(ConditionStatus::False, "AdapterNotReady", "waits for its adapter");
        fixture.store.set_condition(&task, &waiting).await.expect("condition");
        let rows = viewed(&view).await;
        assert_eq!(view.rows_rebuilt() - first, 1, "one object written, one row rebuilt");
        assert!(row(&rows, "Assignment/task-3").contains("waits for its adapter"), "{rows:?}");
        assert_eq!(rows, recomputed(&fixture.service).await);

        // An operator's override moves its Adapter's row (drift from the spec), nothing else.
        fixture.store.set_agent_enabled("agent-2", true, "test").await.expect("enable");
        let rows = viewed(&view).await;
        assert_eq!(view.rows_rebuilt() - first, 2);
        assert!(row(&rows, "Adapter/agent-2").contains("runtime override"), "{rows:?}");
        assert_eq!(rows, recomputed(&fixture.service).await);

        // A session moves its Assignment's row (by the Assignment's name).
        let running = session("s-1", "task-5", SessionPhase::Running, "2026-01-01T00:00:01Z");
        fixture.store.save_session(&running).await.expect("session");
        let rows = viewed(&view).await;
        assert_eq!(view.rows_rebuilt() - first, 3);
        assert!(row(&rows, "Assignment/task-5").contains("session s-1 Running"), "{rows:?}");
        assert_eq!(rows, recomputed(&fixture.service).await);

        // A disabled Adapter moves the rows of the Assignments naming it through their own
        // reconciles, which write their own conditions.
        fixture.store.set_agent_enabled("agent-1", false, "test").await.expect("disable");
        for key in [ObjectKey::new(Kind::Adapter, "agent-1"), ObjectKey::new(Kind::Assignment, "task-1")] {
            let _ = fixture.service.reconcile_in_process(&key).await;
        }
        let rows = viewed(&view).await;
        assert!(row(&rows, "Assignment/task-1").contains("by an operator through the API"), "{rows:?}");
        assert_eq!(rows, recomputed(&fixture.service).await);
        assert!(view.rows_rebuilt() - first < 10, "{} rows rebuilt", view.rows_rebuilt() - first);
    }

    /// A random sequence of the writes the daemon makes (conditions, generations, sessions,
    /// overrides, the source, reruns, tombstones, spec edits, files that stop loading and load
    /// again): after each, the view shows exactly what a full recompute does.
    #[tokio::test]
    async fn the_incremental_view_equals_a_full_recompute_after_random_writes() {
        use over_a_store::*;
        use roundtable_specs::output::ConditionStatus;
        use roundtable_specs::session::SessionPhase;
        use roundtable_specs::{Kind, ObjectKey};

        const ADAPTERS: usize = 4;
        const TASKS: usize = 6;
        for seed in [0x9e37_79b9_7f4a_7c15_u64, 0x2545_f491_4f6c_dd1d] {
            let fixture = Fixture::new(ADAPTERS, TASKS).await;
            let (view, _refresher) = start(&fixture.service);
            let mut state = seed;
            let mut next = move |n: usize| {
                // xorshift64: a fixed sequence per seed, so a failure repeats.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                usize::try_from(state % n as u64).unwrap_or(0)
            };
            let mut enabled = vec![false; ADAPTERS];
            let mut log = Vec::new();
            for step in 0..40 {
                let object = |i: usize| match i % 2 {
                    0 => ObjectKey::new(Kind::Adapter, format!("agent-{}", i / 2 % (ADAPTERS + 1))),
                    _ => ObjectKey::new(Kind::Assignment, format!("task-{}", i / 2 % (TASKS + 1))),
                };
                let task = |i: usize| if i == TASKS { "ghost".to_owned() } else { format!("task-{i}") };
                let operation = next(11);
                log.push(format!("{step}: {operation}"));
                let store = &fixture.store;
                match operation {
                    0 => {
                        let status = [ConditionStatus::True, ConditionStatus::False, ConditionStatus::Unknown][next(3)];
                        let reason = ["Ready", "Disabled", "NotReconciledYet", "AdapterNotReady"][next(4)];
                        let written = condition(status, reason, &format!("message {step}"));
                        let _ = store.set_condition(&object(next(2 * (ADAPTERS + TASKS))), &written).await;
                    }
                    1 => {
                        let generation = i64::try_from(next(2) + 1).unwrap_or(1);
                        let _ = store.set_observed_generation(&object(next(2 * (ADAPTERS + TASKS))), generation).await;
                    }
                    2 => {
                        let phase = [
                            SessionPhase::Queued,
                            SessionPhase::Running,
                            SessionPhase::Succeeded,
                            SessionPhase::Failed,
                        ][next(4)];
                        let at = format!("2026-01-01T00:00:0{}Z", next(3));
                        let written = session(&format!("s-{}", next(5)), &task(next(TASKS + 1)), phase, &at);
                        store.save_session(&written).await.expect("session");
                    }
                    3 => store.delete_session(&format!("s-{}", next(5))).await.expect("delete"),
                    4 => {
                        let _ = store.set_agent_enabled(&format!("agent-{}", next(ADAPTERS)), next(2) == 0, "t").await;
                    }
                    5 => {
                        // A spec edit the daemon has not recorded yet; any write refreshes the view.
                        let i = next(ADAPTERS);
                        enabled[i] = !enabled[i];
                        fixture.write("adapters.yaml", &adapters(ADAPTERS, &enabled));
                        if next(2) == 0 {
                            fixture.write("assignments.yaml", &assignments(TASKS, ADAPTERS, &format!("p{step}")));
                        }
                        store.replace_file_errors(&[]).await.expect("a write");
                    }
                    6 => {
                        // A file that stops loading, or loads again.
                        let text = match next(2) {
                            0 => "kind: [not yaml".to_owned(),
                            _ => assignments(TASKS - next(2), ADAPTERS, "p"),
                        };
                        fixture.write("assignments.yaml", &text);
                        store.replace_file_errors(&[]).await.expect("a write");
                    }
                    7 => {
                        let _ = fixture.service.reconcile_in_process(&object(next(2 * (ADAPTERS + TASKS)))).await;
                    }
                    8 => {
                        let key = object(next(2 * (ADAPTERS + TASKS)));
                        if next(2) == 0 {
                            store.tombstone(&key).await.expect("tombstone");
                        } else {
                            store.forget(&key).await.expect("forget");
                        }
                    }
                    9 => match next(2) {
                        0 => store.note_source(&source(&format!("{step:040}"))).await.expect("source"),
                        _ => store.forget_source().await.expect("forget the source"),
                    },
                    _ => {
                        let _ = store.request_rerun(&task(next(TASKS + 1))).await;
                    }
                }
                let (shown, expected) = (viewed(&view).await, recomputed(&fixture.service).await);
                let only_shown: Vec<_> = shown.iter().filter(|row| !expected.contains(row)).collect();
                let only_expected: Vec<_> = expected.iter().filter(|row| !shown.contains(row)).collect();
                assert!(
                    shown == expected,
                    "seed {seed:#x}, after {log:?}:\nviewed only   {only_shown:#?}\nexpected only {only_expected:#?}"
                );
            }
        }
    }
}
