//! `roundtable start`: the first scan, then the controller fed by file-watch hints, the engine's
//! events (`engine_hints`), Adapters that changed (waking the Assignments naming them), a
//! resync spread over its period and operators' reconcile requests (through the API's
//! [`DaemonLink`]), until shutdown.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roundtable_controller::runner::Summary;
use roundtable_controller::watch::{self, Hint};
use roundtable_controller::{Config, Controller, Handle, Reconciler, Spread, Trigger};
use roundtable_specs::ObjectKey;
use roundtable_store::Store;

use roundtable_session_runtime::SessionRuntime;

use crate::revision::{Gate, Synced};
use roundtable_execution::{ExecutionConfig, ExecutionManager, ShutdownSummary};
use roundtable_reconcilers::backend::{BackendError, ChainedEvents, RuntimeImages};
use roundtable_reconcilers::desired::{SyncCache, SyncOutcome, sync_with};
use roundtable_reconcilers::pull::Pulls;
use roundtable_reconcilers::reconcile::ObjectReconciler;
use roundtable_source::follow::{Follow, Origin, Refreshed};
use roundtable_source::{Project, ScanCache, scan_changed};

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// The project it runs: its spec directory is watched and scanned, its state directory
    /// watched for the operator's files, its root read by the revision gate.
    pub project: Project,
    pub controller: Config,
    /// The full rescan period, jittered by ±10 %. Each rescan then reconciles every object once,
    /// in a shuffled order spread over the next nine tenths of the period (the shortest a
    /// jittered period can be), in batches a second apart, not all at once.
    pub resync: Duration,
    /// Quiet time that ends a burst of file events.
    pub watch_debounce: Duration,
    /// Finished sessions and proposals older than this are pruned every `prune_every`.
    pub retention: Duration,
    pub prune_every: Duration,
    /// With a key, spec changes and reconcile events are entries of the audit chain.
    pub audit_key: Option<Arc<roundtable_store::audit::AuditKey>>,
    /// This controller's id in the store; on a shared store, scans write desired state only
    /// while the project's checkout is not behind (see `revision`).
    pub controller_id: Option<String>,
    /// Committed state to reconcile (`--committed`, `--source`) instead of the working tree.
    pub follow: Option<Arc<tokio::sync::Mutex<Follow>>>,
    /// How long one pull of an Adapter's image may take.
    pub image_pull_timeout: Duration,
}

impl DaemonConfig {
    pub fn new(project: Project) -> Self {
        Self {
            project,
            controller: Config::default(),
            resync: Duration::from_secs(600),
            watch_debounce: Duration::from_millis(100),
            retention: Duration::from_secs(30 * 24 * 3600),
            prune_every: Duration::from_secs(3600),
            audit_key: None,
            controller_id: None,
            follow: None,
            image_pull_timeout: roundtable_reconcilers::pull::DEFAULT_TIMEOUT,
        }
    }
}

/// What can stop the daemon from starting.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Store(#[from] roundtable_store::Error),
    #[error(transparent)]
    Watch(#[from] watch::WatchError),
    #[error(transparent)]
    Lease(#[from] roundtable_workspace::runs::LeaseError),
}

fn jittered(period: Duration) -> Duration {
    period.mul_f64(0.9 + 0.2 * fastrand::f64())
}

/// What a resync's reconciles are spread over: the shortest period [`jittered`] gives, so one
/// pass is done before the next begins.
fn spread_over(period: Duration) -> Duration {
    period.mul_f64(0.9)
}

/// Scans, merges into the store, and tells the controller what moved. With `resync`, every
/// live object is queued too, at once (the first scan, a retry, a lost watch); the periodic
/// resync queues them spread over its period from the outcome's `live` instead.
async fn rescan(
    config: &DaemonConfig,
    cache: &Arc<Mutex<ScanCache>>,
    sync_cache: &tokio::sync::Mutex<SyncCache>,
    store: &Store,
    handle: &Handle<ObjectKey>,
    resync: bool,
    changed: Option<Vec<PathBuf>>,
) -> Result<SyncOutcome, BackendError> {
    let Some(desired) = desired_of(config, store).await? else {
        // Committed state with no commit read yet: nothing is known, so nothing is removed.
        tracing::warn!("no commit of the source has been read yet; reconciling what the store holds");
        return live_in_store(store, handle, resync).await;
    };
    let project = desired.project.clone();
    let cache = cache.clone();
    let started = std::time::Instant::now();
    let scanned = tokio::task::spawn_blocking(move || {
        let mut cache = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        scan_changed(&project, &mut cache, changed.as_deref())
    })
    .await?;
    let scan_ms = started.elapsed().as_millis();
    let events = ChainedEvents { store: store.clone(), key: config.audit_key.clone() };
    let outcome = match &config.controller_id {
        Some(id) if store.is_shared() => {
            // Written, or why not: the checkout is behind, found by the gate or (a race) by the
            // pin inside the write.
            let synced = Synced {
                commit: desired.commit.as_deref(),
                repo: &desired.repo,
                fetched_at: desired.fetched_at.as_deref(),
            };
            let (revision, synced) = match crate::revision::gate(store, synced, id).await? {
                Gate::Write { store: pinned, revision } => {
                    let synced = match sync_with(&pinned, &events, &scanned, &mut *sync_cache.lock().await).await {
                        Err(BackendError::Store(behind @ roundtable_store::Error::Behind { .. })) => {
                            Err(behind.to_string())
                        }
                        other => Ok(other?),
                    };
                    (revision, synced)
                }
                Gate::Behind { revision, note } => (revision, Err(note)),
            };
            store.note_controller_sync(id, revision.as_deref(), synced.as_ref().err().map(String::as_str)).await?;
            match synced {
                Ok(outcome) => outcome,
                Err(note) => {
                    tracing::warn!(%note, "desired state not written");
                    return live_in_store(store, handle, resync).await;
                }
            }
        }
        _ => sync_with(store, &events, &scanned, &mut *sync_cache.lock().await).await?,
    };
    let sync_ms = started.elapsed().as_millis() - scan_ms;
    for key in outcome.changed.iter().chain(&outcome.removed).chain(&outcome.holds_moved) {
        handle.trigger(Trigger::SpecChanged(key.clone()));
    }
    if resync {
        for key in &outcome.live {
            handle.trigger(Trigger::Resync(key.clone()));
        }
    }
    tracing::info!(
        changed = outcome.changed.len(),
        removed = outcome.removed.len(),
        kept = outcome.kept.len(),
        live = outcome.live.len(),
        errors = scanned.errors().count(),
        scan_ms,
        sync_ms,
        "scanned specs"
    );
    Ok(outcome)
}

/// What a scan reads and which commit that is.
struct DesiredSource {
    project: Project,
    /// Read only for a shared store, where the revision gate needs it.
    commit: Option<String>,
    repo: PathBuf,
    fetched_at: Option<String>,
}

/// The working tree, or the tree of the last good commit followed; `None` while no commit has
/// been read.
async fn desired_of(config: &DaemonConfig, store: &Store) -> Result<Option<DesiredSource>, BackendError> {
    let Some(follow) = &config.follow else {
        let root = config.project.root.clone();
        let commit = match store.is_shared() {
            true => tokio::task::spawn_blocking(move || crate::revision::checkout_head(&root)).await?,
            false => None,
        };
        let repo = config.project.root.clone();
        return Ok(Some(DesiredSource { project: config.project.clone(), commit, repo, fetched_at: None }));
    };
    let follow = follow.lock().await;
    let (Some(project), Some(good)) = (follow.project(&config.project), follow.good()) else { return Ok(None) };
    let fetched_at = match &follow.origin {
        Origin::Remote(_) => Some(good.fetched_at.clone()),
        Origin::Checkout { .. } => None,
    };
    Ok(Some(DesiredSource {
        project,
        commit: Some(good.commit.clone()),
        repo: follow.git_dir().to_owned(),
        fetched_at,
    }))
}

/// Reads (fetches) the followed commit and records what `status` shows of it; a failure keeps
/// the last good commit. Safe to drop midway (at shutdown): git is killed, nothing is written.
async fn fetch(config: &DaemonConfig, follow: &tokio::sync::Mutex<Follow>, store: &Store) -> Refreshed {
    let (refreshed, record) = {
        let mut follow = follow.lock().await;
        let refreshed = follow.refresh().await;
        (refreshed, follow.record(config.controller_id.as_deref().unwrap_or("")))
    };
    if let Err(error) = store.note_source(&record).await {
        tracing::warn!(%error, "cannot record the source's state");
    }
    match &refreshed {
        Refreshed::Moved => tracing::info!(commit = record.commit.as_deref().unwrap_or(""), "the source moved"),
        Refreshed::Unchanged => {}
        Refreshed::Failed(error) => tracing::warn!(%error, "cannot read the source; keeping the last good commit"),
    }
    refreshed
}

/// A scan that wrote nothing (its checkout is behind): what the store holds is reconciled as it
/// is, on a resync as on any other.
async fn live_in_store(store: &Store, handle: &Handle<ObjectKey>, resync: bool) -> Result<SyncOutcome, BackendError> {
    let live = store.object_index().await?.into_iter().filter(|e| !e.deleted).map(|e| e.key).collect();
    let outcome = SyncOutcome { live, ..SyncOutcome::default() };
    if resync {
        for key in &outcome.live {
            handle.trigger(Trigger::Resync(key.clone()));
        }
    }
    Ok(outcome)
}

/// What a running daemon offers the HTTP API beside the store: reconciles on request (at once,
/// not at the next poll of the request table), cancelling an adapter's executions, and whether
/// the first scan is done. Cheap to clone; empty until the daemon has started.
#[derive(Clone, Default)]
pub struct DaemonLink {
    inner: Arc<LinkInner>,
}

#[derive(Default)]
struct LinkInner {
    handle: std::sync::OnceLock<Handle<ObjectKey>>,
    executions: std::sync::OnceLock<ExecutionManager>,
    ready: std::sync::atomic::AtomicBool,
    /// Set by a daemon that reconciles a git source; a request to fetch it now (a webhook).
    fetch: std::sync::OnceLock<Arc<tokio::sync::Notify>>,
    /// The working tree's parsed spec files, one copy for the daemon's scans and the API's.
    scan_cache: Arc<Mutex<ScanCache>>,
}

impl DaemonLink {
    /// Queues a reconcile of `key` now; false when the daemon is not (or no longer) running.
    pub fn reconcile(&self, key: ObjectKey) -> bool {
        self.inner.handle.get().is_some_and(|handle| handle.trigger(Trigger::Requested(key)))
    }

    /// The parsed spec files of the working tree. The daemon scans with it unless it follows
    /// committed state (another folder); the API's scans share it, so each file is parsed and
    /// held once.
    pub fn scan_cache(&self) -> Arc<Mutex<ScanCache>> {
        self.inner.scan_cache.clone()
    }

    /// Asks every queued or running execution of `adapter` to stop; how many.
    pub fn cancel_sessions_of(&self, adapter: &str) -> usize {
        self.inner.executions.get().map_or(0, |executions| executions.cancel_sessions_of(adapter))
    }

    /// Whether the first scan has been merged into the store (the daemon serves what it says).
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(std::sync::atomic::Ordering::Acquire)
    }

    /// A running session's output so far (the console's live tail), when it runs here.
    pub fn live_log(&self, session: &str) -> Option<Arc<roundtable_execution::live::LiveLog>> {
        self.inner.executions.get()?.live_log(session)
    }

    /// MCP capabilities that would be accepted now (one per running session with an endpoint).
    pub fn live_capabilities(&self) -> usize {
        self.inner.executions.get().map_or(0, ExecutionManager::live_capabilities)
    }

    /// Asks the daemon to fetch its git source now; false when it reconciles no git source.
    pub fn request_fetch(&self) -> bool {
        self.inner.fetch.get().map(|fetch| fetch.notify_one()).is_some()
    }

    /// What a daemon reconciling a git source waits on for [`DaemonLink::request_fetch`]; the
    /// first call makes the link accept requests.
    pub fn fetch_requests(&self) -> Arc<tokio::sync::Notify> {
        self.inner.fetch.get_or_init(|| Arc::new(tokio::sync::Notify::new())).clone()
    }

    fn set_ready(&self) {
        self.inner.ready.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// What the daemon did before it stopped.
#[derive(Debug, Clone, Default)]
pub struct DaemonSummary {
    pub reconciles: Summary,
    pub executions: ShutdownSummary,
}

/// Runs until `shutdown` resolves; then stops intake, waits for in-flight reconciles, and gives
/// running executions the grace period before cancelling them (`hurry` cuts the wait short; the
/// cancelled ones are still cleaned up and recorded). Executions run through the execution
/// manager (its limit, queue and folders).
pub async fn run(
    config: DaemonConfig,
    store: Store,
    runtime: Arc<dyn SessionRuntime>,
    execution_config: ExecutionConfig,
    shutdown: impl Future<Output = ()>,
    hurry: impl Future<Output = ()>,
    link: DaemonLink,
) -> Result<DaemonSummary, DaemonError> {
    // Held while this daemon runs, so a `prune` elsewhere on the host (another state directory)
    // can tell this run's containers are in use.
    let _lease = roundtable_workspace::runs::hold(&execution_config.socket_root, &execution_config.controller_run)?;
    let pruner = tokio::spawn(prune_periodically(
        store.clone(),
        runtime.clone(),
        execution_config.project.id.clone(),
        (execution_config.socket_root.clone(), execution_config.controller_run.clone()),
        config.retention,
        config.prune_every,
    ));
    let mut config = config;
    config.controller_id = Some(execution_config.controller_run.clone());
    let executions = ExecutionManager::new(store.clone(), runtime.clone(), execution_config);
    let removing = runtime.clone();
    let presence =
        crate::presence::Presence::start(&store, &executions, &config.project.spec_dir.display().to_string()).await?;
    let _ = link.inner.executions.set(executions.clone());
    // The daemon alone pulls: an Adapter's missing image, in the background, announcing each
    // pull's end as a hint so the Adapters naming it are reconciled at once.
    let pulls = Pulls::new(runtime.clone(), config.image_pull_timeout);
    let pulls_ended = pulls.ended();
    let reconciler = object_reconciler(&store, runtime.clone(), &executions, config.audit_key.clone(), Some(pulls));
    let dependents = reconciler.dependents.clone();
    let grace = config.controller.grace;
    let waker = executions.clone();
    let linked = link.clone();
    let engine_hints = Arc::new(crate::engine_hints::EngineHints::default());
    let (hinted, hint_store, project_id) = (engine_hints.clone(), store.clone(), config.project.id.clone());
    let with_handle = move |handle: Handle<ObjectKey>| {
        let _ = linked.inner.handle.set(handle.clone());
        hinted.start(&runtime, pulls_ended, hint_store, project_id, handle.clone());
        dependents.wake_with(handle.clone());
        waker.wake_with(handle);
    };
    let reconciles = run_with_link(config, store, Arc::new(reconciler), with_handle, shutdown, &link).await;
    engine_hints.stop();
    pruner.abort();
    // Whatever happened to the controller, running executions are finished or cancelled and
    // recorded: none is left running without its daemon.
    let executions = executions.shutdown(grace, hurry).await;
    // A session's outcome comes back before its container and volumes are removed; the daemon
    // does not exit before they are.
    removing.settled().await;
    presence.stop().await;
    Ok(DaemonSummary { reconciles: reconciles?, executions })
}

/// The reconciler the daemon runs, over the state store, the engine's images and the admission
/// gates, the audit chain (with `audit_key`) and the execution manager. Its `dependents` wake
/// nothing until they are given the controller's handle, as [`run`] does.
pub type DaemonReconciler = ObjectReconciler<Store, RuntimeImages, ChainedEvents, ExecutionManager>;

/// The daemon's [`DaemonReconciler`].
pub fn object_reconciler(
    store: &Store,
    runtime: Arc<dyn SessionRuntime>,
    executions: &ExecutionManager,
    audit_key: Option<Arc<roundtable_store::audit::AuditKey>>,
    pulls: Option<Pulls>,
) -> DaemonReconciler {
    let images = RuntimeImages(runtime, executions.admitter().cloned(), pulls);
    let events = ChainedEvents { store: store.clone(), key: audit_key };
    ObjectReconciler::with_executions(store.clone(), images, events, executions.clone())
}

/// Retention on a schedule: what `roundtable prune` does, every `every`.
async fn prune_periodically(
    store: Store,
    runtime: Arc<dyn SessionRuntime>,
    project_id: String,
    (socket_root, own_run): (PathBuf, String),
    retention: Duration,
    every: Duration,
) {
    // The first pass comes shortly after start (the first scan and the restart recovery go
    // first): a controller that comes back reaps what its engine kept of sessions another
    // controller took over while it was gone.
    let first = every.min(Duration::from_secs(10));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + first, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let declared: std::collections::BTreeSet<String> = match store.objects().await {
            Ok(objects) => objects
                .into_iter()
                .filter(|o| o.key.kind == roundtable_specs::Kind::Assignment && o.deleted_at.is_none())
                .map(|o| o.key.name)
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "retention: cannot read objects");
                continue;
            }
        };
        let liveness = |run: &str| roundtable_workspace::runs::liveness(&socket_root, run);
        let runs = roundtable_reconcilers::prune::Runs { own: Some(&own_run), liveness: &liveness };
        match roundtable_reconcilers::prune::find(
            &store,
            Some(runtime.as_ref()),
            &project_id,
            &declared,
            retention,
            &runs,
        )
        .await
        {
            Ok(found) if found.is_empty() => {}
            Ok(found) => {
                let failed = roundtable_reconcilers::prune::remove(&store, Some(runtime.as_ref()), &found).await;
                tracing::info!(pruned = found.len() - failed.len(), failed = failed.len(), "retention");
            }
            Err(error) => tracing::warn!(%error, "retention: cannot list what to prune"),
        }
    }
}

/// When a failed rescan is tried again: a store that was full, restarting or out of reach
/// refused the write, and waiting for the next file event or the periodic resync (minutes) would
/// leave the specs unrecorded after it recovers.
#[derive(Debug)]
struct Retry {
    at: Option<tokio::time::Instant>,
    wait: Duration,
}

impl Retry {
    const FIRST: Duration = Duration::from_secs(2);
    const MAX: Duration = Duration::from_secs(30);

    fn after(&mut self, outcome: &Result<SyncOutcome, BackendError>, what: &str) {
        match outcome {
            Ok(_) => *self = Self::default(),
            Err(error) => {
                let error = roundtable_telemetry::error_chain(error);
                tracing::error!(%error, retry_in_ms = self.wait.as_millis() as u64, "{what} failed");
                self.at = Some(tokio::time::Instant::now() + self.wait);
                self.wait = (self.wait * 2).min(Self::MAX);
            }
        }
    }
}

impl Default for Retry {
    fn default() -> Self {
        Self { at: None, wait: Self::FIRST }
    }
}

/// The daemon loop around any reconciler (benchmarks use a no-op one).
pub async fn run_with<R: Reconciler<ObjectKey>>(
    config: DaemonConfig,
    store: Store,
    reconciler: Arc<R>,
    with_handle: impl FnOnce(Handle<ObjectKey>),
    shutdown: impl Future<Output = ()>,
) -> Result<Summary, DaemonError> {
    run_with_link(config, store, reconciler, with_handle, shutdown, &DaemonLink::default()).await
}

/// [`run_with`] with the link the API holds: its `request_fetch` (the webhook) reaches this loop.
pub async fn run_with_link<R: Reconciler<ObjectKey>>(
    config: DaemonConfig,
    store: Store,
    reconciler: Arc<R>,
    with_handle: impl FnOnce(Handle<ObjectKey>),
    shutdown: impl Future<Output = ()>,
    link: &DaemonLink,
) -> Result<Summary, DaemonError> {
    let (controller, handle) = Controller::new(reconciler, config.controller);
    with_handle(handle.clone());
    let cache = match &config.follow {
        None => link.scan_cache(),
        // Committed state is read from an exported tree, not the working tree the API scans.
        Some(_) => Arc::default(),
    };
    let sync_cache = tokio::sync::Mutex::new(SyncCache::default());
    let follow = config.follow.clone();
    // A git source's fetch can be asked for (the webhook); a checkout's HEAD is only polled.
    let fetches = match &follow {
        Some(follow) if matches!(follow.lock().await.origin, Origin::Remote(_)) => Some(link.fetch_requests()),
        _ => None,
    };
    tokio::pin!(shutdown);
    match &follow {
        // The first fetch before the first scan; a remote that hangs does not hold shutdown up.
        Some(follow) => tokio::select! {
            () = &mut shutdown => return Ok(Summary::default()),
            _ = fetch(&config, follow, &store) => {}
        },
        None => store.forget_source().await?,
    }

    // Nothing reconciles before the first scan completes; then everything is looked at once,
    // including tombstones a previous run left behind.
    rescan(&config, &cache, &sync_cache, &store, &handle, true, None).await?;
    for record in store.objects().await? {
        if record.deleted_at.is_some() {
            handle.trigger(Trigger::SpecChanged(record.key));
        }
    }
    link.set_ready();
    let (stop_controller, controller_stopped) = tokio::sync::oneshot::channel::<()>();
    let controller_task = tokio::spawn(controller.run(async move {
        let _ = controller_stopped.await;
    }));

    let project = &config.project;
    let state_dir = project.state_dir.canonicalize().unwrap_or_else(|_| project.state_dir.clone());
    // Committed state is read on the poll, never from file events.
    let (_watcher, mut hints) = match &follow {
        None => {
            let (watcher, hints) =
                watch::watch(&project.spec_dir, vec![project.state_dir.clone(), state_dir], config.watch_debounce)?;
            (Some(watcher), Some(hints))
        }
        Some(_) => (None, None),
    };
    let mut resync_at = tokio::time::Instant::now() + jittered(config.resync);
    let poll = match &follow {
        Some(follow) => follow.lock().await.poll,
        None => config.resync,
    };
    let mut poll_at = tokio::time::Instant::now() + jittered(poll);
    // The periodic resync's pass in progress: the keys it has still to queue.
    let mut spread: Spread<ObjectKey> = Spread::default();
    tracing::info!(dir = %project.spec_dir.display(), "roundtable is running");
    let mut watching = hints.is_some();
    let mut retry = Retry::default();
    loop {
        let fetch_requested = async {
            match &fetches {
                Some(fetches) => fetches.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut shutdown => break,
            // The poll, or a request (the webhook) that brings it forward.
            () = async { tokio::select! { () = tokio::time::sleep_until(poll_at) => {}, () = fetch_requested => {} } }, if follow.is_some() => {
                poll_at = tokio::time::Instant::now() + jittered(poll);
                let Some(follow) = &follow else { continue };
                // A fetch from a remote that hangs does not hold shutdown up; a rescan is not cut.
                let refreshed = tokio::select! {
                    () = &mut shutdown => break,
                    refreshed = fetch(&config, follow, &store) => refreshed,
                };
                if refreshed == Refreshed::Moved {
                    retry.after(&rescan(&config, &cache, &sync_cache, &store, &handle, false, None).await, "rescan of the new commit");
                }
            }
            hint = async { match &mut hints { Some(hints) => hints.recv().await, None => None } }, if watching => match hint {
                Some(hint) => {
                    let (resync, changed) = match hint {
                        Hint::Changed(paths) => (false, Some(paths)),
                        Hint::Rescan => (true, None),
                    };
                    retry.after(&rescan(&config, &cache, &sync_cache, &store, &handle, resync, changed).await, "rescan");
                }
                None => {
                    tracing::warn!("the file watcher stopped; relying on the periodic resync");
                    watching = false;
                }
            },
            () = tokio::time::sleep_until(resync_at) => {
                let now = tokio::time::Instant::now();
                resync_at = now + jittered(config.resync);
                let outcome = rescan(&config, &cache, &sync_cache, &store, &handle, false, None).await;
                retry.after(&outcome, "resync");
                if let Ok(outcome) = outcome {
                    spread.start(outcome.live, spread_over(config.resync), now);
                }
            }
            () = async { if let Some(at) = spread.deadline() { tokio::time::sleep_until(at).await } }, if spread.deadline().is_some() => {
                for key in spread.due(tokio::time::Instant::now()) {
                    handle.trigger(Trigger::Resync(key));
                }
            }
            // A whole rescan that queues every object: the one that failed may have been of a few
            // changed files, and may have recorded some objects before it failed, which would
            // then look unchanged.
            () = async { if let Some(at) = retry.at { tokio::time::sleep_until(at).await } }, if retry.at.is_some() => {
                retry.after(&rescan(&config, &cache, &sync_cache, &store, &handle, true, None).await, "rescan (retried)");
            }
        }
    }
    tracing::info!("shutting down: no new work, waiting for in-flight reconciles");
    let _ = stop_controller.send(());
    drop(handle);
    let summary = controller_task.await.unwrap_or_default();
    tracing::info!(
        reconciles = summary.reconciles,
        failures = summary.failures,
        abandoned = summary.abandoned,
        "stopped"
    );
    Ok(summary)
}
