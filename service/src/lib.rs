//! Roundtable's service layer: every query and command that both the CLI and the HTTP API offer,
//! in one place. `src/` parses arguments and renders what these return; `api/` serves the same
//! values as JSON. Nothing here prints.

mod adapter;
pub mod admission;
pub mod agent_registry;
pub mod agents;
pub mod delivery;
pub mod diagnostics;
mod lookup;
pub mod resume;
mod scope_check;
pub mod secrets;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use roundtable_controller::Reconciler as _;
use roundtable_reconcilers::ObjectReconciler;
use roundtable_reconcilers::backend::{BackendError, RuntimeImages};
use roundtable_reconcilers::prune::{self, Prunable};
use roundtable_reconcilers::status::row;
use roundtable_session_runtime::SessionRuntime;
use roundtable_source::{Project, ProjectError, Scan, scan};
use roundtable_specs::output::{DescribeItem, EventItem, ObjectStatus, PlannedChange, ProposalItem, SessionItem};
use roundtable_specs::{Kind, ObjectKey, ValidationError};
use roundtable_store::{ProposalRecord, SessionRecord, Store};

pub use lookup::{proposal_item, session_item};
pub use roundtable_reconcilers::status::ObjectRows;
pub use roundtable_reconcilers::status::incremental::{KeptRows, Refreshed};

/// The rows of `status` around the objects', in the order they are listed.
#[derive(Debug, Clone, Default)]
pub struct Around {
    /// Before the objects': the engine when it does not answer, a full disk.
    pub before: Vec<ObjectStatus>,
    /// After the objects': leftovers, running sessions' sidecars, other controllers, what
    /// requires pruning.
    pub after: Vec<ObjectStatus>,
}

/// Every finding of the static checks over the project's spec directory (nothing is created),
/// admission contracts in `contracts/` included.
pub fn validate(project: &Project) -> Scan {
    let mut scanned = scan(project);
    let warnings = scope_check::warnings(&project.root, &scanned.objects);
    scanned.findings.extend(warnings);
    roundtable_specs::validate::sort_findings(&mut scanned.findings);
    with_contracts(scanned, &project.spec_dir)
}

/// [`validate`] of a spec directory `dir` that names no project (`error`): that, and its
/// admission contracts.
pub fn validate_unresolved(dir: &Path, error: &ProjectError) -> Scan {
    with_contracts(roundtable_source::scan_unresolved(dir, error), dir)
}

fn with_contracts(mut scanned: Scan, spec_dir: &Path) -> Scan {
    let contracts = Project::contracts_dir_of(spec_dir);
    scanned.findings.extend(roundtable_admission::contracts::check_folder(&contracts));
    scanned
}

/// What the project declares; nothing without a project or a spec directory (only the
/// built-ins apply).
fn load(project: Option<&Project>) -> roundtable_source::Loaded {
    match project {
        Some(project) if project.spec_dir.is_dir() => roundtable_source::load(project),
        _ => Default::default(),
    }
}

/// Built-in templates and declared Adapters, merged field by field, alphabetical; and the
/// errors that kept spec files from loading. Without a spec directory, only the built-ins; with
/// one that names no project (`dir` is `/`, say), the built-ins and why.
pub fn adapters(
    dir: &std::path::Path,
    project: Result<&Project, &roundtable_source::ProjectError>,
) -> (Vec<roundtable_specs::output::AdapterItem>, Vec<ValidationError>) {
    let loaded = match project {
        Ok(project) => load(Some(project)),
        Err(error) if dir.is_dir() => roundtable_source::Loaded {
            errors: roundtable_source::scan_unresolved(dir, error).findings,
            ..Default::default()
        },
        Err(_) => load(None),
    };
    let items = roundtable_specs::Catalog::build(&loaded.objects).items();
    let errors = loaded.errors.into_iter().filter(|e| e.severity == roundtable_specs::Severity::Error).collect();
    (items, errors)
}

/// What a service call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Store(#[from] roundtable_store::Error),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("a background task failed")]
    Task(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Admission(roundtable_admission::authority::AdmissionError),
    #[error(transparent)]
    Register(#[from] resume::RegisterError),
    #[error("no {what} {id:?}")]
    NotFound { what: &'static str, id: String },
    /// A prefix that names more than one thing: the matches are named so the caller can choose.
    #[error("{prefix:?} matches {} {what}s: {}; give more of the ID", matches.len(), matches.join(", "))]
    Ambiguous { what: &'static str, prefix: String, matches: Vec<String> },
    #[error("{key} is neither declared nor recorded")]
    UnknownObject { key: ObjectKey },
    #[error("{key}: only an Assignment runs, so only an Assignment can be re-run")]
    NotRunnable { key: ObjectKey },
    /// The stored patch is not the one recorded: it was changed or damaged after the run.
    #[error(
        "the stored patch of proposal {id} does not match its recorded sha256 {recorded} (it is now {actual}); refusing it"
    )]
    PatchTampered { id: String, recorded: String, actual: String },
    #[error(
        "proposal {id}'s patch (sha256 {recorded}) is not the one the audit chain sealed when it was submitted ({}); refusing it (`roundtable audit verify`)",
        sealed.as_deref().map_or_else(|| "no proposal.submitted entry of it verifies under this project's audit key".to_owned(), |sealed| format!("sha256 {sealed}"))
    )]
    PatchNotSealed { id: String, recorded: String, sealed: Option<String> },
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reconciling {key} failed")]
    Reconcile {
        key: ObjectKey,
        #[source]
        source: roundtable_reconcilers::reconcile::Error,
    },
    #[error("cannot run the diagnostic")]
    Diagnose(#[from] diagnostics::DiagnoseError),
    #[error(transparent)]
    Delivery(Box<delivery::DeliveryError>),
}

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

/// One project's state: its spec directory, its state store, and the session runtime.
#[derive(Clone)]
pub struct Service {
    /// The project, as the caller resolved it.
    project: Project,
    store: Store,
    runtime: Arc<dyn SessionRuntime>,
    /// Parsed spec files kept between calls (a long-lived process: the daemon's API), so a
    /// request parses only the files that changed since the last one.
    scan_cache: Option<Arc<std::sync::Mutex<roundtable_source::ScanCache>>>,
    /// The key admission verifies receipts' anchors in the chain under (nothing is appended
    /// with it); without one no receipt is anchored.
    anchor_key: Option<Arc<roundtable_store::audit::AuditKey>>,
    missing_key: Option<String>,
}

/// What `plan` found.
#[derive(Debug, Clone)]
pub struct Plan {
    pub changes: Vec<PlannedChange>,
    /// Errors that keep files from loading (their objects keep their last valid spec).
    pub file_errors: Vec<ValidationError>,
    /// The container engine did not answer: what images and executions need cannot be told.
    pub engine_unreachable: Option<EngineUnreachable>,
}

/// A container engine that did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineUnreachable {
    /// Where it was looked for.
    pub endpoint: String,
    /// Why it did not answer (the whole error chain).
    pub error: String,
}

impl EngineUnreachable {
    /// `status`'s row for it: an error (`status --exit-code` exits 1), health unknown.
    pub fn status_row(&self) -> ObjectStatus {
        row::engine_unreachable(&self.endpoint, self.to_string())
    }

    /// `plan`'s line for it: `?`, nothing about images and executions can be told.
    pub fn planned_change(&self) -> PlannedChange {
        PlannedChange {
            op: "?".into(),
            object: format!("Engine/{}", self.endpoint),
            summary: format!("{self}; what images and executions need cannot be told"),
            fields: Vec::new(),
        }
    }
}

impl std::fmt::Display for EngineUnreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The engine's own error names where it was looked for, most of the time.
        if self.error.contains(&self.endpoint) {
            write!(f, "container engine unreachable: {}", self.error)
        } else {
            write!(f, "container engine unreachable at {}: {}", self.endpoint, self.error)
        }
    }
}

/// One session's captured output, as kept (capped at the Adapter's `outputLimit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLogs {
    pub session: String,
    pub stdout: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr: Vec<u8>,
    pub stderr_truncated: bool,
}

/// One session's sidecar decision logs (JSON lines), as kept within their budgets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SidecarLogs {
    pub egress: Vec<u8>,
    pub broker: Vec<u8>,
}

/// A proposal with its patch, integrity checked.
#[derive(Debug, Clone)]
pub struct ProposalWithPatch {
    pub item: ProposalItem,
    pub patch: Vec<u8>,
}

/// What pruning did (or would do) to one thing.
#[derive(Debug)]
pub struct Pruned {
    pub item: Prunable,
    /// Why it could not be removed; `None` when removed (or, on a dry run, removable).
    pub error: Option<BackendError>,
}

const RECENT_EVENTS: i64 = 20;

/// An event as listed, with its ID (a list's cursor, a watch's resource version).
fn event_item(e: roundtable_store::EventRecord) -> (i64, EventItem) {
    (e.id, EventItem { at: e.at, object: e.object, type_: e.severity, reason: e.reason, message: e.message })
}

/// A controller run's liveness from its lease under this user's socket root; this process has
/// no run of its own.
fn host_liveness(run: &str) -> roundtable_workspace::runs::Liveness {
    roundtable_workspace::runs::liveness(&roundtable_workspace::sockets::default_root_for_this_user(), run)
}

impl Service {
    /// A service over `project`. Its store is opened if it exists; otherwise an empty in-memory
    /// one stands in, so read-only views of a fresh project create nothing on disk.
    pub async fn open_for_reading(project: &Project, runtime: Arc<dyn SessionRuntime>) -> Result<Self> {
        let store = match Store::open_existing(&project.store).await? {
            Some(store) => store,
            None => Store::open_in_memory().await?,
        };
        Ok(Self::over(project, store, runtime))
    }

    /// A service whose store is created if missing (commands that write state).
    pub async fn open(project: &Project, runtime: Arc<dyn SessionRuntime>) -> Result<Self> {
        for tightened in roundtable_store::prepare_state_dir(&project.state_dir)? {
            tracing::warn!("{tightened}");
        }
        Ok(Self::over(project, Store::connect(&project.store).await?, runtime))
    }

    /// A service over `store`, already open (the daemon's own: the API then sees its writes as
    /// they are made, [`Store::writes`]).
    pub fn sharing(project: &Project, store: Store, runtime: Arc<dyn SessionRuntime>) -> Self {
        Self::over(project, store, runtime)
    }

    fn over(project: &Project, store: Store, runtime: Arc<dyn SessionRuntime>) -> Self {
        Self { project: project.clone(), store, runtime, scan_cache: None, anchor_key: None, missing_key: None }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The project this service is over.
    pub fn project(&self) -> &Project {
        &self.project
    }

    /// The spec directory (`.roundtable/`).
    pub fn dir(&self) -> &Path {
        &self.project.spec_dir
    }

    pub fn state_dir(&self) -> &Path {
        &self.project.state_dir
    }

    /// This service, keeping parsed spec files between calls in `cache` (the daemon's own, when
    /// it scans the same folder).
    #[must_use]
    pub fn with_scan_cache(mut self, cache: Arc<std::sync::Mutex<roundtable_source::ScanCache>>) -> Self {
        self.scan_cache = Some(cache);
        self
    }

    /// This service, verifying admission receipts' anchors under `key`; with none, `missing`
    /// says where it was looked for (a receipt is then "cannot be verified", not "none").
    #[must_use]
    pub fn with_anchor_key(
        mut self,
        key: Option<Arc<roundtable_store::audit::AuditKey>>,
        missing: Option<String>,
    ) -> Self {
        self.anchor_key = key;
        self.missing_key = missing;
        self
    }

    async fn scan(&self) -> Result<Scan> {
        let project = self.project.clone();
        let cache = self.scan_cache.clone();
        Ok(tokio::task::spawn_blocking(move || match cache {
            Some(cache) => {
                let mut cache = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                roundtable_source::scan_cached(&project, &mut cache)
            }
            None => scan(&project),
        })
        .await?)
    }

    fn project_id(&self) -> &str {
        &self.project.id
    }

    /// Whether the container engine answers now; why not, when it does not.
    pub async fn engine_unreachable(&self) -> Option<EngineUnreachable> {
        let error = self.runtime.health().await.err()?;
        Some(EngineUnreachable {
            endpoint: self.runtime.endpoint().to_owned(),
            error: roundtable_telemetry::error_chain(&error),
        })
    }

    /// Every `status` row: the engine when it does not answer, objects, files that do not load,
    /// running gateways, and what requires pruning (labelled resources nothing needs; sessions and
    /// proposals past `retention`).
    pub async fn status(&self, retention: Duration) -> Result<Vec<ObjectStatus>> {
        let objects = self.status_of_objects().await?;
        let around = self.status_around(&objects.assignments, &objects.unfinished, retention).await?;
        let mut rows = around.before;
        rows.extend(objects.rows);
        rows.extend(around.after);
        Ok(rows)
    }

    /// The rows of [`Service::status`] that the spec files and the store decide (the source,
    /// objects, files that do not load), which neither the engine nor time alone moves: what a
    /// view of the status may keep until the store is written.
    pub async fn status_of_objects(&self) -> Result<ObjectRows> {
        let scanned = self.scan().await?;
        Ok(roundtable_reconcilers::status::object_rows(&self.store, &scanned).await?)
    }

    /// [`Service::status_of_objects`] kept in `kept` between calls: the spec files scanned, and
    /// only the rows rebuilt that the store's writes since the last call and what the scan moved
    /// can change (every row with `whole`, for writes this process did not make).
    pub async fn refresh_objects(&self, kept: &mut KeptRows, whole: bool) -> Result<Refreshed> {
        let scanned = self.scan().await?;
        Ok(kept.refresh(&self.store, &scanned, whole).await?)
    }

    /// The rows around the objects' (given the declared Assignments' names and the sessions not
    /// finished, from [`Service::status_of_objects`] or [`KeptRows`]): those that change with
    /// the engine, the disk, running sessions' sidecars, other controllers' heartbeats and time
    /// (retention), read now.
    pub async fn status_around(
        &self,
        assignments: &BTreeSet<String>,
        unfinished: &[SessionRecord],
        retention: Duration,
    ) -> Result<Around> {
        let runs = prune::Runs { own: None, liveness: &host_liveness };
        let unreachable = self.engine_unreachable().await;
        let leftovers = match &unreachable {
            // Nothing can be listed from an engine that does not answer; its row says so.
            Some(_) => Vec::new(),
            None => match self.runtime.owned(self.project_id()).await {
                // What a live controller run (another state directory, say) uses is not a leftover.
                Ok(found) => found.into_iter().filter(|r| prune::left_alone(r, &runs).is_none()).collect(),
                Err(error) => {
                    tracing::warn!(error = %roundtable_telemetry::error_chain(&error), "cannot list labelled resources");
                    Vec::new()
                }
            },
        };
        let mut before: Vec<ObjectStatus> = unreachable.iter().map(EngineUnreachable::status_row).collect();
        before.extend(self.store.disk_full().as_ref().map(row::store_full));
        let mut rows = roundtable_reconcilers::status::leftover_rows(&self.store, assignments, &leftovers).await?;
        // Each running session's sidecars report; the rows are made from the reports in one place.
        let gateways = roundtable_execution::egress::serving_reports(unfinished);
        rows.extend(gateways.map(|(session, report)| row::gateway(session, &report)));
        let brokers = roundtable_execution::broker::serving_reports(unfinished);
        rows.extend(brokers.map(|(session, report)| row::broker(session, &report)));
        if self.store.is_shared() {
            rows.extend(self.controller_rows().await?);
        }
        // Labelled leftovers are listed above; here the sessions and proposals past retention.
        let declared = BTreeSet::new();
        for item in prune::find(&self.store, None, self.project_id(), &declared, retention, &runs).await? {
            rows.push(row::requires_pruning(item.kind.as_str(), item.name, &item.why));
        }
        Ok(Around { before, after: rows })
    }

    /// On a shared store, a row per controller that has not stopped: `OutOfSync` while its checkout
    /// is behind the store's desired revision (it writes no specs), `Degraded` once its heartbeat
    /// expired (its executions are taken over).
    async fn controller_rows(&self) -> Result<Vec<ObjectStatus>> {
        let leases = self.store.execution_leases().await?;
        let at = self.store.lease_clock().await?;
        let rows = self.store.controllers().await?.into_iter().filter(|c| c.stopped_at.is_none()).map(|c| {
            let live = c.is_live(&at);
            let running: Vec<&str> =
                leases.iter().filter(|l| l.holder == c.id && l.held()).map(|l| l.assignment.as_str()).collect();
            let revision = c.revision.as_deref().map_or("no revision", |r| r.get(..12).unwrap_or(r));
            let message = match (&c.sync_note, live) {
                (_, false) => format!(
                    "heartbeat expired at {} ({} pid {}): its executions are taken over",
                    c.expires_at, c.host, c.pid
                ),
                (Some(note), true) => note.clone(),
                (None, true) => format!(
                    "{} pid {}, heartbeat {}, at {revision}, running {}",
                    c.host,
                    c.pid,
                    c.heartbeat_at,
                    if running.is_empty() { "nothing".to_owned() } else { running.join(", ") }
                ),
            };
            row::controller(c.id, c.started_at, c.sync_note.is_some(), live, message)
        });
        Ok(rows.collect())
    }

    fn reconciler(&self) -> ObjectReconciler<Store, RuntimeImages, Store> {
        // `plan` decides the gates as the daemon would, without recording or sealing anything.
        let binary = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("roundtable"));
        let admitter = self.admitter(binary, None);
        ObjectReconciler::new(
            self.store.clone(),
            RuntimeImages(self.runtime.clone(), Some(admitter), None),
            self.store.clone(),
        )
    }

    /// What reconciling now would change; nothing is changed.
    pub async fn plan(&self) -> Result<Plan> {
        let scanned = self.scan().await?;
        let changes = roundtable_reconcilers::status::plan(&self.store, &self.reconciler(), &scanned).await?;
        let engine_unreachable = self.engine_unreachable().await;
        Ok(Plan { changes, file_errors: scanned.errors().cloned().collect(), engine_unreachable })
    }

    /// Conditions, stored spec, observed status and recent events of one object.
    pub async fn describe(&self, key: &ObjectKey) -> Result<DescribeItem> {
        let scanned = self.scan().await?;
        let rows = roundtable_reconcilers::status::status(&self.store, &scanned, &[]).await?;
        let Some(row) = rows.into_iter().find(|r| r.kind == key.kind.as_str() && r.name == key.name) else {
            return Err(ServiceError::UnknownObject { key: key.clone() });
        };
        let record = self.store.object(key).await?;
        // This object's events: an earlier object of the same name had its own.
        let uid = record.as_ref().map(|r| r.uid.as_str()).unwrap_or_default();
        let events: Vec<EventItem> =
            self.store.events(key, uid, RECENT_EVENTS).await?.into_iter().map(|e| event_item(e).1).collect();
        Ok(DescribeItem {
            status: row,
            source_file: record.as_ref().map(|r| r.source_file.clone()),
            spec: record.as_ref().and_then(|r| serde_json::from_str(&r.spec_json).ok()),
            observed: record.as_ref().and_then(|r| r.status_json.as_deref()).and_then(|s| serde_json::from_str(s).ok()),
            events,
        })
    }

    /// The newest `limit` events of `key`, newest first: of the object recorded under that name,
    /// or, once it is removed and forgotten, of the objects that had the name. Unknown when
    /// nothing declares the name and no event names it.
    pub async fn object_events(&self, key: &ObjectKey, limit: usize) -> Result<Vec<EventItem>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let events = match self.store.object(key).await? {
            Some(record) => {
                let mut events = self.store.events(key, &record.uid, limit).await?;
                events.reverse();
                events
            }
            None => self.store.events_by_name(key, limit).await?,
        };
        if events.is_empty() && !self.scan().await?.accepted().any(|object| object.key() == *key) {
            return Err(ServiceError::UnknownObject { key: key.clone() });
        }
        Ok(events.into_iter().map(|e| event_item(e).1).collect())
    }

    /// Events of every object, newest first, older than event `before`; each with its ID (the
    /// cursor of the next page).
    pub async fn events(&self, before: Option<i64>, limit: usize) -> Result<Vec<(i64, EventItem)>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(self.store.recent_events(before, limit).await?.into_iter().map(event_item).collect())
    }

    /// Events of every object after event `after`, oldest first (a watch); each with its ID.
    pub async fn events_after(&self, after: i64, limit: usize) -> Result<Vec<(i64, EventItem)>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(self.store.events_after(after, limit).await?.into_iter().map(event_item).collect())
    }

    /// Reconciles `key` once in this process (no daemon runs: a running one is asked through
    /// its API instead), clearing a stall; when to look again, if the reconciler says.
    pub async fn reconcile_in_process(&self, key: &ObjectKey) -> Result<Option<Duration>> {
        let scanned = self.scan().await?;
        roundtable_reconcilers::desired::sync(&self.store, &self.store, &scanned).await?;
        if self.store.object(key).await?.is_none() {
            return Err(ServiceError::UnknownObject { key: key.clone() });
        }
        match self.reconciler().reconcile(key).await {
            Ok(action) => Ok(action.requeue_after()),
            Err(source) => Err(ServiceError::Reconcile { key: key.clone(), source }),
        }
    }

    /// `reconcile --rerun`: Assignment `key` moves to a new execution generation that runs the
    /// agent afresh rather than reusing an earlier result; which generation that is.
    pub async fn rerun(&self, key: &ObjectKey) -> Result<i64> {
        if key.kind != Kind::Assignment {
            return Err(ServiceError::NotRunnable { key: key.clone() });
        }
        self.store.request_rerun(&key.name).await?.ok_or_else(|| ServiceError::UnknownObject { key: key.clone() })
    }

    /// Every session, newest first.
    pub async fn sessions(&self) -> Result<Vec<SessionItem>> {
        Ok(self.store.sessions(None).await?.into_iter().map(session_item).collect())
    }

    async fn session_record(&self, id_or_prefix: &str) -> Result<SessionRecord> {
        if let Some(exact) = self.store.session(id_or_prefix).await? {
            return Ok(exact);
        }
        let found = self.store.sessions_by_prefix(id_or_prefix, lookup::SHOWN_MATCHES).await?;
        lookup::single("session", id_or_prefix, found, |s| s.id.clone())
    }

    /// One session by its ID or a unique prefix of it.
    pub async fn session(&self, id_or_prefix: &str) -> Result<SessionItem> {
        self.session_record(id_or_prefix).await.map(session_item)
    }

    /// What one session's agent printed (as kept).
    pub async fn session_logs(&self, id_or_prefix: &str) -> Result<SessionLogs> {
        let session = self.session_record(id_or_prefix).await?;
        let folder = session.exec_dir.as_deref().map(roundtable_execution::ExecutionFolder::at);
        let read = |log: fn(&roundtable_execution::ExecutionFolder) -> PathBuf| -> Vec<u8> {
            folder.as_ref().and_then(|folder| std::fs::read(log(folder)).ok()).unwrap_or_default()
        };
        Ok(SessionLogs {
            stdout: read(roundtable_execution::ExecutionFolder::stdout_log),
            stderr: read(roundtable_execution::ExecutionFolder::stderr_log),
            stdout_truncated: session.stdout_truncated,
            stderr_truncated: session.stderr_truncated,
            session: session.id,
        })
    }

    /// The gateway's and the broker's decision logs of a session, when its folder is still there.
    pub async fn session_sidecar_logs(&self, id_or_prefix: &str) -> Result<SidecarLogs> {
        let session = self.session_record(id_or_prefix).await?;
        let Some(folder) = session.exec_dir.as_deref().map(roundtable_execution::ExecutionFolder::at) else {
            return Ok(SidecarLogs::default());
        };
        Ok(SidecarLogs {
            egress: std::fs::read(folder.egress_log()).unwrap_or_default(),
            broker: std::fs::read(folder.broker_log()).unwrap_or_default(),
        })
    }

    /// Every proposal, newest first, in its stored state (a proposal is superseded when its
    /// Assignment's run fields move on, and stays so).
    pub async fn proposals(&self) -> Result<Vec<ProposalItem>> {
        Ok(self.store.proposals().await?.into_iter().map(proposal_item).collect())
    }

    async fn proposal_record(&self, id_or_prefix: &str) -> Result<ProposalRecord> {
        if let Some(exact) = self.store.proposal_by_id(id_or_prefix).await? {
            return Ok(exact);
        }
        let found = self.store.proposals_by_prefix(id_or_prefix, lookup::SHOWN_MATCHES).await?;
        lookup::single("proposal", id_or_prefix, found, |p| p.id.clone())
    }

    /// One proposal by its ID or a unique prefix, with its patch, refused when the stored patch
    /// is not the one recorded.
    pub async fn proposal(&self, id_or_prefix: &str) -> Result<ProposalWithPatch> {
        let record = self.proposal_record(id_or_prefix).await?;
        let patch = self.verified_patch(&record).await?;
        Ok(ProposalWithPatch { item: proposal_item(record), patch })
    }

    /// The stored patch of `record`, refused when it is not the one recorded.
    async fn verified_patch(&self, record: &ProposalRecord) -> Result<Vec<u8>> {
        let path = PathBuf::from(&record.patch_path);
        // Another controller's proposal (a shared store) has its patch in the store, not here.
        let patch = match std::fs::read(&path) {
            Ok(patch) => patch,
            Err(source) => match self.store.proposal_patch(&record.id).await? {
                Some(patch) => patch,
                None => return Err(ServiceError::Read { path, source }),
            },
        };
        let actual = roundtable_specs::digest::sha256_hex(&patch);
        if actual != record.sha256 {
            return Err(ServiceError::PatchTampered { id: record.id.clone(), recorded: record.sha256.clone(), actual });
        }
        Ok(patch)
    }

    /// `record`'s patch digest, held to the one the audit chain sealed when the proposal was
    /// submitted: the proposal's row and its patch file can be edited together, the chain's
    /// entry cannot unseen. What an accept commits is the agent's patch or nothing.
    pub(crate) async fn check_sealed(
        &self,
        record: &ProposalRecord,
        key: &roundtable_store::audit::AuditKey,
    ) -> Result<()> {
        let sealed = self.store.sealed_patch_digest(key, &record.id).await?;
        if sealed.as_deref() != Some(record.sha256.as_str()) {
            return Err(ServiceError::PatchNotSealed {
                id: record.id.clone(),
                recorded: record.sha256.clone(),
                sealed,
            });
        }
        Ok(())
    }

    /// What retention removes (`dry_run`: would remove): sessions and proposals past
    /// `retention`, labelled resources no declared Assignment or live session needs.
    pub async fn prune(&self, retention: Duration, dry_run: bool) -> Result<Vec<Pruned>> {
        let scanned = self.scan().await?;
        let declared: BTreeSet<String> =
            scanned.accepted().filter(|o| o.kind() == Kind::Assignment).map(|o| o.metadata.name.clone()).collect();
        let runtime = self.runtime.as_ref();
        // Without an engine there are no labelled resources to list; records are still pruned.
        let reachable = runtime.health().await.is_ok();
        let runtime = reachable.then_some(runtime);
        let runs = prune::Runs { own: None, liveness: &host_liveness };
        let found = prune::find(&self.store, runtime, self.project_id(), &declared, retention, &runs).await?;
        let mut failed = if dry_run { Vec::new() } else { prune::remove(&self.store, runtime, &found).await };
        Ok(found
            .into_iter()
            .map(|item| {
                let error = failed.iter().position(|(f, _)| *f == item).map(|i| failed.swap_remove(i).1);
                Pruned { item, error }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use roundtable_specs::output::{Health, SyncStatus};

    use super::*;

    #[tokio::test]
    async fn an_unreachable_engine_is_an_error_in_status_and_plan() {
        let project = tempfile::tempdir().expect("tempdir");
        let dir = project.path().join(".roundtable");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let reason = "the container engine at unix:///nonexistent.sock did not answer: connection refused".to_owned();
        // As the binary builds it when it cannot connect.
        let endpoint = "unix:///nonexistent.sock".to_owned();
        let runtime = Arc::new(roundtable_session_runtime::Unavailable { endpoint, reason });
        let project = Project::resolve(&dir).expect("project");
        let service = Service::open_for_reading(&project, runtime).await.expect("service");

        let rows = service.status(Duration::from_secs(3600)).await.expect("status");
        let engine = rows.iter().find(|r| r.kind == "Engine").expect("an Engine row");
        assert_eq!(engine.name, "unix:///nonexistent.sock");
        assert_eq!((engine.sync, engine.health), (SyncStatus::Error, Health::Unknown));
        assert!(engine.message.contains("unix:///nonexistent.sock") && engine.message.contains("connection refused"));
        assert_eq!(roundtable_reconcilers::status::exit_code(&rows), 1, "status --exit-code exits 1");

        let plan = service.plan().await.expect("plan");
        let unreachable = plan.engine_unreachable.expect("the plan says the engine is unreachable");
        assert_eq!(unreachable.endpoint, "unix:///nonexistent.sock");
        assert_eq!(unreachable.planned_change().op, "?");
    }

    #[tokio::test]
    async fn a_removed_and_forgotten_objects_events_are_still_listed_newest_first() {
        let project = tempfile::tempdir().expect("tempdir");
        let dir = project.path().join(".roundtable");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join("work.yaml");
        std::fs::write(&file, "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata: {name: gone}\nspec:\n  adapter: mock\n  task: {id: T, prompt: p}\n  readablePaths: [README.md]\n").expect("write");
        let endpoint = "unix:///nonexistent.sock".to_owned();
        let runtime = Arc::new(roundtable_session_runtime::Unavailable { endpoint, reason: "down".into() });
        let project = Project::resolve(&dir).expect("project");
        let service = Service::open(&project, runtime).await.expect("service");
        let key = ObjectKey::new(Kind::Assignment, "gone");
        roundtable_reconcilers::desired::sync(&service.store, &service.store, &service.scan().await.expect("scan"))
            .await
            .expect("sync");
        std::fs::remove_file(&file).expect("remove");
        roundtable_reconcilers::desired::sync(&service.store, &service.store, &service.scan().await.expect("scan"))
            .await
            .expect("sync");
        service.store.forget(&key).await.expect("forget");

        let events = service.object_events(&key, 10).await.expect("a removed object's events");
        let reasons: Vec<&str> = events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["SpecRemoved", "SpecChanged"], "newest first");
        let newest = service.object_events(&key, 1).await.expect("events");
        assert_eq!(newest.len(), 1);
        assert_eq!(newest[0].reason, "SpecRemoved", "--limit keeps the newest");
        let nothing = service.object_events(&ObjectKey::new(Kind::Assignment, "nope"), 10).await;
        assert!(matches!(nothing, Err(ServiceError::UnknownObject { .. })), "{nothing:?}");
    }
}
