//! The execution manager: owns running executions as background tasks, with its own limit and
//! queue. The Assignment reconciler only asks it to start or cancel and reads what it recorded;
//! a reconcile never waits for an agent.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roundtable_controller::{Handle, Trigger, error_chain};
use roundtable_sandbox::Engine;
use roundtable_sandbox::check::Expected;
use roundtable_sandbox::extract::Limits;
use roundtable_sandbox::labels::{Ownership, Purpose};
use roundtable_sandbox::runtime::{Cause, EMPTY_IMAGE, Execution, ExecutionPlan, RuntimeError};
use roundtable_sandbox::{patch, provision};
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::assignment::AssignmentSpec;
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{ProposalRecord, SessionRecord, Store};

use crate::egress::{EgressOptions, Sidecar};
use tokio::sync::{Semaphore, watch};
use tokio_util::task::TaskTracker;

/// Paths the proposal flags when touched: they change CI, hooks, agent configuration or specs.
const PROTECTED: [&str; 9] = [
    ".roundtable/",
    ".github/workflows/",
    ".gitlab-ci.yml",
    ".claude/",
    ".codex/",
    ".gemini/",
    ".opencode/",
    ".git/",
    ".husky/",
];
const PACKAGE_SCRIPTS: [&str; 4] = ["package.json", "Makefile", "setup.py", "build.rs"];

/// How executions run.
#[derive(Debug, Clone)]
pub struct ExecutionConfig {
    pub max_executions: usize,
    /// Per-project folder for execution folders (never inside `.roundtable/`).
    pub execution_root: PathBuf,
    /// Where patches of proposals are kept (the state directory).
    pub proposals_dir: PathBuf,
    /// The controller's own static binary, mounted into every container.
    pub binary: PathBuf,
    pub project_root: PathBuf,
    pub project_id: String,
    pub controller_run: String,
    /// Where session socket directories are created (`/run/roundtable` as root).
    pub socket_root: PathBuf,
    /// Values for `credentialEnv` names (from the environment or `--secrets-file`).
    pub secrets: HashMap<String, String>,
    /// Options every session's egress gateway shares.
    pub egress: EgressOptions,
}

/// What the Assignment reconciler asks to run.
#[derive(Debug, Clone)]
pub struct ExecutionRequest {
    pub assignment: String,
    pub execution_generation: i64,
    pub attempt: i64,
    pub spec: AssignmentSpec,
    pub adapter: ResolvedAdapter,
}

struct Active {
    session: String,
    cancel: watch::Sender<bool>,
}

/// Starts, cancels and supervises executions.
#[derive(Clone)]
pub struct ExecutionManager {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    engine: Result<Engine, String>,
    config: ExecutionConfig,
    slots: Semaphore,
    active: Mutex<HashMap<String, Active>>,
    wake: Mutex<Option<Handle<ObjectKey>>>,
    /// Every execution task, so shutdown can wait for them.
    tasks: TaskTracker,
    /// Set when shutdown stops intake; executions cancelled after it end `Interrupted`.
    stopping: AtomicBool,
}

/// Why the manager refused to start an execution.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] roundtable_store::Error),
    #[error("the controller is shutting down; no new execution starts")]
    ShuttingDown,
}

/// What happened to executions at shutdown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownSummary {
    /// Executions that finished on their own within the grace period.
    pub finished: usize,
    /// Executions cancelled at the end of the grace period (recorded `Interrupted`, re-run on the
    /// next start).
    pub interrupted: usize,
}

fn now() -> String {
    roundtable_store::now()
}

fn new_session_id() -> String {
    let mut bytes = [0u8; 6];
    for byte in &mut bytes {
        *byte = fastrand::u8(..);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl ExecutionManager {
    pub fn new(store: Store, engine: Result<Engine, String>, config: ExecutionConfig) -> Self {
        let slots = Semaphore::new(config.max_executions.max(1));
        Self {
            inner: Arc::new(Inner {
                store,
                engine,
                config,
                slots,
                active: Mutex::new(HashMap::new()),
                wake: Mutex::new(None),
                tasks: TaskTracker::new(),
                stopping: AtomicBool::new(false),
            }),
        }
    }

    /// Where finished executions report, so their Assignment is reconciled at once.
    pub fn wake_with(&self, handle: Handle<ObjectKey>) {
        *self.inner.wake.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle);
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn config(&self) -> &ExecutionConfig {
        &self.inner.config
    }

    /// Marks a session of an earlier controller run `Interrupted` and removes what it left.
    pub async fn interrupt(&self, session: &str) -> Result<(), roundtable_store::Error> {
        let Some(mut record) = self.inner.store.session(session).await? else { return Ok(()) };
        if let Ok(engine) = &self.inner.engine {
            let name = format!("roundtable-{}", record.id);
            let docker = engine.docker();
            let options =
                bollard::query_parameters::RemoveContainerOptionsBuilder::default().force(true).v(true).build();
            let _ = docker.remove_container(&name, Some(options)).await;
            for volume in [format!("{name}-workspace"), format!("{name}-tmp")] {
                let _ = docker.remove_volume(&volume, None::<bollard::query_parameters::RemoveVolumeOptions>).await;
            }
        }
        if let Some(dir) = &record.exec_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        // Its socket directory (and a gateway socket in it) on the runtime tmpfs.
        if let Ok(dir) = roundtable_sandbox::sockets::plan(&self.inner.config.socket_root, &record.id) {
            let _ = std::fs::remove_dir_all(dir);
        }
        record.phase = "Interrupted".into();
        record.message = format!("the controller run {} ended before this session finished", record.controller_run);
        record.finished_at = Some(now());
        self.inner.store.save_session(&record).await
    }

    /// Whether an execution of `assignment` is queued or running in this process.
    pub fn is_active(&self, assignment: &str) -> bool {
        self.inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(assignment)
    }

    /// Cancels the active execution of `assignment`, if any.
    pub fn cancel(&self, assignment: &str) {
        match self.inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(assignment) {
            Some(active) => {
                let delivered = active.cancel.send(true).is_ok();
                tracing::info!(assignment, session = %active.session, delivered, "cancelling the execution");
            }
            None => tracing::info!(assignment, "no execution to cancel"),
        }
    }

    /// Stops intake, lets running executions finish for up to `grace` (less if `hurry`
    /// resolves first), then cancels the rest the way `suspend` does (pause, kill, remove the
    /// container, volumes and socket directory) and records them `Interrupted`, so the next start
    /// re-runs them. Returns once every execution task has recorded its session.
    pub async fn shutdown(&self, grace: Duration, hurry: impl std::future::Future<Output = ()>) -> ShutdownSummary {
        let inner = &self.inner;
        inner.tasks.close();
        let running = self.active_count();
        if running == 0 {
            inner.tasks.wait().await;
            return ShutdownSummary::default();
        }
        tracing::info!(running, grace_secs = grace.as_secs(), "waiting for running executions to finish");
        let finished_in_time = tokio::select! {
            () = inner.tasks.wait() => true,
            () = tokio::time::sleep(grace) => false,
            () = hurry => false,
        };
        if finished_in_time {
            return ShutdownSummary { finished: running, interrupted: 0 };
        }
        // From here on a cancelled execution ends `Interrupted`, not `Cancelled`.
        inner.stopping.store(true, Ordering::SeqCst);
        let cancelled: Vec<(String, String)> = {
            let active = inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            active
                .iter()
                .map(|(assignment, run)| {
                    let _ = run.cancel.send(true);
                    (assignment.clone(), run.session.clone())
                })
                .collect()
        };
        for (assignment, session) in &cancelled {
            tracing::warn!(%assignment, %session, "shutdown: cancelling the execution; it is re-run on the next start");
        }
        inner.tasks.wait().await;
        ShutdownSummary { finished: running.saturating_sub(cancelled.len()), interrupted: cancelled.len() }
    }

    fn active_count(&self) -> usize {
        self.inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Records a `Queued` session and runs it in the background when a slot is free.
    pub async fn start(&self, request: ExecutionRequest) -> Result<SessionRecord, StartError> {
        if self.inner.tasks.is_closed() {
            return Err(StartError::ShuttingDown);
        }
        let session = SessionRecord {
            id: new_session_id(),
            assignment: request.assignment.clone(),
            execution_generation: request.execution_generation,
            attempt: request.attempt,
            controller_run: self.inner.config.controller_run.clone(),
            adapter: request.adapter.name.clone(),
            image: request.adapter.image.as_ref().map(ToString::to_string),
            phase: "Queued".into(),
            message: "waiting for an execution slot".into(),
            created_at: now(),
            ..SessionRecord::default()
        };
        self.inner.store.save_session(&session).await?;
        let (cancel, cancelled) = watch::channel(false);
        self.inner
            .active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(request.assignment.clone(), Active { session: session.id.clone(), cancel });
        let inner = self.inner.clone();
        let queued = session.clone();
        self.inner.tasks.spawn(async move {
            let finished = match inner.slots.acquire().await {
                Ok(_permit) => inner.execute(queued, request.clone(), cancelled).await,
                Err(_) => queued,
            };
            // Keep the brief and the logs; the trees and scratch space are no longer needed.
            if let Some(dir) = &finished.exec_dir {
                for folder in ["source", "export", "scratch"] {
                    let _ = std::fs::remove_dir_all(std::path::Path::new(dir).join(folder));
                }
            }
            let mut active = inner.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if active.get(&request.assignment).is_some_and(|a| a.session == finished.id) {
                active.remove(&request.assignment);
            }
            drop(active);
            if let Some(handle) = inner.wake.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
                handle.trigger(Trigger::Requested(ObjectKey::new(Kind::Assignment, request.assignment)));
            }
        });
        Ok(session)
    }
}

/// The flags of a proposal: paths outside readablePaths, protected paths.
fn flags(paths: &[String], readable: &[String]) -> Vec<String> {
    let mut flags = Vec::new();
    for path in paths {
        let inside = readable.iter().any(|scope| {
            let scope = scope.trim_end_matches('/').trim_start_matches("./");
            scope.is_empty() || scope == "." || path == scope || path.starts_with(&format!("{scope}/"))
        });
        if !inside {
            flags.push(format!("outsideReadablePaths: {path}"));
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        if PROTECTED.iter().any(|p| path.starts_with(p) || path == p.trim_end_matches('/'))
            || path.contains("/.git/hooks/")
        {
            flags.push(format!("protectedPath: {path}"));
        } else if PACKAGE_SCRIPTS.contains(&file) {
            flags.push(format!("packageScripts: {path}"));
        }
    }
    flags
}

impl Inner {
    /// Records the session, retrying while the database is busy: an execution's outcome must not
    /// be lost to a transient lock.
    async fn save(&self, session: &SessionRecord) {
        for attempt in 1..=10u64 {
            match self.store.save_session(session).await {
                Ok(()) => return,
                Err(error) if attempt < 10 => {
                    tracing::warn!(session = %session.id, attempt, %error, "cannot record the session yet; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await;
                }
                Err(error) => tracing::error!(session = %session.id, %error, "cannot record the session"),
            }
        }
    }

    async fn fail(&self, session: SessionRecord, cause: &str, message: String) -> SessionRecord {
        self.end(session, "Failed", cause, message).await
    }

    /// Ends a session that the infrastructure cut short, not the agent: `Interrupted` sessions
    /// are re-run outside the `retries` budget (see `assignment::MAX_INTERRUPTED_RERUNS`).
    async fn interrupted(&self, session: SessionRecord, cause: &str, message: String) -> SessionRecord {
        self.end(session, "Interrupted", cause, message).await
    }

    async fn end(&self, mut session: SessionRecord, phase: &str, cause: &str, message: String) -> SessionRecord {
        tracing::warn!(session = %session.id, assignment = %session.assignment, phase, cause, %message, "execution did not succeed");
        session.phase = phase.into();
        session.cause = Some(cause.into());
        session.message = message;
        session.finished_at = Some(now());
        self.save(&session).await;
        session
    }

    async fn execute(
        &self,
        mut session: SessionRecord,
        request: ExecutionRequest,
        cancel: watch::Receiver<bool>,
    ) -> SessionRecord {
        if *cancel.borrow() {
            if self.stopping.load(Ordering::SeqCst) {
                return self.interrupted(session, "ControllerStopped", STOPPED_BEFORE_START.into()).await;
            }
            session.phase = "Cancelled".into();
            session.message = "cancelled before it started".into();
            session.finished_at = Some(now());
            self.save(&session).await;
            return session;
        }
        session.phase = "Running".into();
        session.message = "provisioning".into();
        session.started_at = Some(now());
        let exec_dir = self.config.execution_root.join(&session.id);
        session.exec_dir = Some(exec_dir.display().to_string());
        self.save(&session).await;

        let provision_started = std::time::Instant::now();
        let engine = match &self.engine {
            Ok(engine) => engine.clone(),
            Err(reason) => return self.fail(session, "EngineUnavailable", reason.clone()).await,
        };
        // Provision on a blocking thread: git and file writes.
        let (project_root, repo) = (self.config.project_root.clone(), request.spec.source.repo.clone());
        let (revision, scope, source) =
            (request.spec.source.revision.clone(), request.spec.readable_paths.clone(), exec_dir.join("source"));
        let provisioned = tokio::task::spawn_blocking(move || {
            let repo = provision::confine(&project_root, &repo)?;
            let commit = provision::resolve(&repo, &revision)?;
            provision::export(&repo, &commit, &scope, &source).map(|provisioned| (repo, provisioned))
        })
        .await;
        let (repo, provisioned) = match provisioned {
            Ok(Ok(provisioned)) => provisioned,
            Ok(Err(error @ provision::ProvisionError::OutsideProjectRoot { .. })) => {
                return self.fail(session, "SourceOutsideProjectRoot", error_chain(&error)).await;
            }
            Ok(Err(error)) => return self.fail(session, "ProvisionFailed", error_chain(&error)).await,
            Err(error) => return self.fail(session, "ProvisionFailed", error.to_string()).await,
        };
        session.base_commit = Some(provisioned.commit.clone());
        let brief = serde_json::json!({
            "assignment": request.assignment,
            "role": request.spec.role,
            "task": request.spec.task,
            "baseCommit": provisioned.commit,
            "readablePaths": request.spec.readable_paths,
            "manifest": provisioned.files,
        });
        let task_file = exec_dir.join("task.json");
        if let Err(error) = std::fs::write(&task_file, serde_json::to_vec_pretty(&brief).unwrap_or_default()) {
            return self.fail(session, "ProvisionFailed", format!("cannot write the brief: {error}")).await;
        }
        let provision_ms = u64::try_from(provision_started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let detail = serde_json::json!({
            "manifest": provisioned.files,
            "withheld": provisioned.withheld,
            "timingsMs": {"provision": provision_ms},
        });
        session.detail_json = Some(detail.to_string());
        session.message = "running".into();
        self.save(&session).await;

        let adapter = &request.adapter;
        let own_binary = adapter.command == roundtable_specs::builtins::IN_CONTAINER_BINARY;
        let image = match (&adapter.image, own_binary) {
            (Some(image), _) => image.to_string(),
            (None, true) => EMPTY_IMAGE.to_owned(),
            (None, false) => {
                return self
                    .fail(session, "ImageNotConfigured", format!("adapter {} has no image", adapter.name))
                    .await;
            }
        };
        let mut argv = vec![adapter.command.clone()];
        argv.extend(adapter.args.iter().cloned());
        if !own_binary {
            argv.push(request.spec.task.prompt.clone());
        }
        let mut env = vec!["HOME=/tmp/roundtable/home".to_owned(), "PATH=/usr/local/bin:/usr/bin:/bin".to_owned()];
        for name in &adapter.credential_env {
            match self.config.secrets.get(name.as_str()) {
                Some(value) => env.push(format!("{name}={value}")),
                None => tracing::warn!(session = %session.id, variable = %name, "credential not set; not passed"),
            }
        }
        let ownership = Ownership {
            project: self.config.project_id.clone(),
            assignment: Some(request.assignment.clone()),
            session: session.id.clone(),
            controller_run: self.config.controller_run.clone(),
            purpose: Purpose::Agent,
        };
        let timeout = request.spec.timeout.unwrap_or(adapter.timeout).as_std();
        // Sockets (the egress gateway's; MCP's later) are bound before the container exists.
        let socket_dir = match roundtable_sandbox::sockets::plan(&self.config.socket_root, &session.id) {
            Ok(dir) => dir,
            Err(error) => return self.fail(session, "SocketPathTooLong", error.to_string()).await,
        };
        if let Err(error) = roundtable_sandbox::sockets::create(&socket_dir) {
            return self.fail(session, "SocketDirFailed", error.to_string()).await;
        }
        let sidecar = if adapter.provider_hosts.is_empty() {
            None
        } else {
            let hosts: Vec<String> = adapter.provider_hosts.iter().map(ToString::to_string).collect();
            let cidrs: Vec<ipnet::IpNet> = adapter.allow_cidrs.iter().map(|cidr| cidr.net()).collect();
            match Sidecar::start(&self.config.egress, &hosts, &cidrs, &socket_dir, &exec_dir, &session.id).await {
                Ok(sidecar) => Some(sidecar),
                Err(error) => {
                    let _ = std::fs::remove_dir_all(&socket_dir);
                    return self.fail(session, "EgressUnavailable", error_chain(&error)).await;
                }
            }
        };
        if sidecar.is_some() {
            env.extend(crate::egress::proxy_env());
        }
        let plan = ExecutionPlan {
            name: format!("roundtable-{}", session.id),
            image: image.clone(),
            labels: ownership.labels(),
            memory_bytes: adapter.resources.memory.bytes(),
            nano_cpus: adapter.resources.cpus.nanos(),
            pids: adapter.resources.pids,
            workspace_bytes: adapter.resources.workspace_size.bytes(),
            tmp_bytes: adapter.resources.tmp_size.bytes(),
            binary: self.config.binary.clone(),
            source_dir: exec_dir.join("source"),
            task_file,
            socket_dir: Some(socket_dir.clone()),
            egress_proxy: sidecar.is_some(),
            argv,
            env,
            output_limit: adapter.output_limit.bytes(),
            timeout,
            export_dir: exec_dir.join("export"),
            spool_file: exec_dir.join("export.tar"),
            extract_limits: Limits { max_bytes: adapter.resources.workspace_size.bytes(), max_entries: 100_000 },
        };
        session.image = Some(image);
        let expected = Expected {
            uid: 1000,
            gid: 1000,
            memory_bytes: plan.memory_bytes,
            pids: u64::from(plan.pids),
            cpu_millis: u64::from(adapter.resources.cpus.millis()),
        };
        let execution = Execution::new(&engine, plan, expected);
        let outcome = execution.run(cancel).await;
        let egress = match sidecar {
            Some(sidecar) => Some(sidecar.stop().await),
            None => None,
        };
        let _ = std::fs::remove_dir_all(&socket_dir);
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error @ RuntimeError::EngineLost { .. }) => {
                return self.interrupted(session, "EngineLost", error_chain(&error)).await;
            }
            Err(error) => return self.fail(session, "RuntimeError", error_chain(&error)).await,
        };
        let _ = std::fs::write(exec_dir.join("stdout.log"), &outcome.stdout.bytes);
        let _ = std::fs::write(exec_dir.join("stderr.log"), &outcome.stderr.bytes);
        session.exit_code = outcome.exit_code;
        session.stdout_bytes = i64::try_from(outcome.stdout.total).ok();
        session.stderr_bytes = i64::try_from(outcome.stderr.total).ok();
        session.stdout_truncated = outcome.stdout.truncated();
        session.stderr_truncated = outcome.stderr.truncated();
        session.external_session_id = external_session_id(&outcome.stdout.bytes);
        let mut detail: serde_json::Value =
            session.detail_json.as_deref().and_then(|d| serde_json::from_str(d).ok()).unwrap_or_default();
        detail["selfCheck"] = serde_json::to_value(&outcome.self_check).unwrap_or_default();
        detail["pausedForExport"] = outcome.paused_for_export.into();
        if let Some(egress) = &egress {
            detail["egress"] = serde_json::to_value(egress).unwrap_or_default();
        }
        for (phase, millis) in &outcome.timings {
            detail["timingsMs"][*phase] = (*millis).into();
        }
        if let Some(extracted) = &outcome.extracted {
            detail["export"] = serde_json::to_value(extracted).unwrap_or_default();
        }
        session.detail_json = Some(detail.to_string());
        let cause =
            serde_json::to_value(outcome.cause).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        session.cause = Some(cause.clone());
        match outcome.cause {
            Cause::Exited if outcome.exit_code == Some(0) => {}
            Cause::Cancelled if self.stopping.load(Ordering::SeqCst) => {
                return self.interrupted(session, "ControllerStopped", STOPPED_WHILE_RUNNING.into()).await;
            }
            Cause::Cancelled => {
                session.phase = "Cancelled".into();
                session.message = "cancelled: the container was paused and killed".into();
                session.finished_at = Some(now());
                self.save(&session).await;
                return session;
            }
            Cause::SelfCheckFailed => {
                let failed: Vec<String> = outcome
                    .self_check
                    .as_ref()
                    .map(|r| r.failures().map(|f| format!("{} ({})", f.name, f.detail)).collect())
                    .unwrap_or_default();
                return self
                    .fail(session, &cause, format!("self-check failed before the agent ran: {}", failed.join("; ")))
                    .await;
            }
            Cause::TimedOut => {
                return self
                    .fail(session, &cause, format!("timed out after {}s; paused and killed", timeout.as_secs()))
                    .await;
            }
            Cause::OutOfMemory => {
                return self.fail(session, &cause, "killed for exceeding its memory limit".into()).await;
            }
            Cause::EgressUnavailable => {
                let said = String::from_utf8_lossy(&outcome.stderr.bytes).trim().to_owned();
                return self.fail(session, &cause, format!("the agent was not started: {said}")).await;
            }
            Cause::Exited => {
                let code = outcome.exit_code.map_or("unknown".into(), |c| c.to_string());
                return self.fail(session, &cause, format!("the agent exited with code {code}")).await;
            }
        }

        // Propose: the patch against the provisioned source.
        let (source, export, scratch) = (exec_dir.join("source"), exec_dir.join("export"), exec_dir.join("scratch"));
        let commit = provisioned.commit.clone();
        let patch_started = std::time::Instant::now();
        let patched = tokio::task::spawn_blocking(move || {
            let patch = patch::diff(&scratch, &source, &export).map_err(|e| e.to_string())?;
            if !patch.is_empty() {
                patch::verify(&repo, &commit, &patch, &export, &scratch.join("check"))?;
            }
            Ok::<_, String>(patch)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        let patch = match patched {
            Ok(patch) => patch,
            Err(error) => return self.fail(session, "PatchFailed", error).await,
        };
        session.phase = "Succeeded".into();
        session.finished_at = Some(now());
        let patch_ms = u64::try_from(patch_started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut detail: serde_json::Value =
            session.detail_json.as_deref().and_then(|d| serde_json::from_str(d).ok()).unwrap_or_default();
        detail["timingsMs"]["patch"] = patch_ms.into();
        session.detail_json = Some(detail.to_string());
        if patch.is_empty() {
            session.message = "the agent changed nothing; no proposal".into();
            self.save(&session).await;
            return session;
        }
        let proposal_id = format!("{}-{}", &patch.sha256[..12], session.id);
        let patch_path = self.config.proposals_dir.join(format!("{proposal_id}.patch"));
        if let Err(error) = write_private(&patch_path, &patch.text) {
            return self.fail(session, "PatchFailed", format!("cannot store the patch: {error}")).await;
        }
        let proposal = ProposalRecord {
            id: proposal_id.clone(),
            session_id: session.id.clone(),
            assignment: request.assignment.clone(),
            execution_generation: request.execution_generation,
            base_commit: provisioned.commit.clone(),
            adapter: adapter.name.clone(),
            patch_path: patch_path.display().to_string(),
            sha256: patch.sha256.clone(),
            files_changed: i64::try_from(patch.files_changed).unwrap_or(i64::MAX),
            insertions: i64::try_from(patch.insertions).unwrap_or(i64::MAX),
            deletions: i64::try_from(patch.deletions).unwrap_or(i64::MAX),
            flags_json: serde_json::to_string(&flags(&patch.paths, &request.spec.readable_paths)).unwrap_or_default(),
            state: "pending".into(),
            created_at: now(),
        };
        match self.store.insert_proposal(&proposal).await {
            Ok(true) => session.message = format!("pending proposal {proposal_id}"),
            Ok(false) => {
                session.message = "a proposal for this execution generation already exists; this one was dropped".into()
            }
            Err(error) => {
                return self.fail(session, "PatchFailed", format!("cannot record the proposal: {error}")).await;
            }
        }
        self.save(&session).await;
        session
    }
}

fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(bytes)
}

/// The first `session_id` (or `thread_id`, `sessionID`) in JSON-lines output.
fn external_session_id(stdout: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stdout);
    for line in text.lines() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        for key in ["session_id", "thread_id", "sessionID"] {
            if let Some(id) = value.get(key).and_then(|v| v.as_str())
                && id.parse::<roundtable_specs::resume::ExternalSessionId>().is_ok()
            {
                return Some(id.to_owned());
            }
        }
    }
    None
}

const STOPPED_BEFORE_START: &str =
    "the controller was stopped before this session started; it is re-run on the next start";
const STOPPED_WHILE_RUNNING: &str = "the controller was stopped (SIGTERM/SIGINT) and the grace period ran out: the container was paused, killed and removed; it is re-run on the next start";

/// How long a reconcile waits between looks at a running execution (the manager also wakes it).
pub const RUNNING_RECHECK: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposals_are_flagged_outside_scope_and_on_protected_paths() {
        let readable = vec!["docs/".to_owned(), "README.md".to_owned()];
        let paths =
            vec!["docs/a.md".into(), "src/x.rs".into(), ".github/workflows/ci.yml".into(), "docs/package.json".into()];
        let found = flags(&paths, &readable);
        assert_eq!(
            found,
            [
                "outsideReadablePaths: src/x.rs",
                "outsideReadablePaths: .github/workflows/ci.yml",
                "protectedPath: .github/workflows/ci.yml",
                "packageScripts: docs/package.json"
            ]
        );
        assert!(flags(&["README.md".into()], &readable).is_empty());
    }

    #[test]
    fn session_ids_come_from_json_lines() {
        let out = b"not json\n{\"type\":\"init\",\"session_id\":\"abc-123\"}\n";
        assert_eq!(external_session_id(out).as_deref(), Some("abc-123"));
        assert_eq!(external_session_id(b"{\"session_id\":\"bad id; rm\"}\n"), None);
    }
}
