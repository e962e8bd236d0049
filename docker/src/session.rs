//! One execution on the engine, in the lifecycle order tmpfs volumes require: create the volumes
//! (at once) → create → start PID 1 → the self-check, which seeds the workspace from the source
//! mount once it passes, while `/tmp/roundtable` is uploaded → the checked process becomes the
//! agent (captured, capped, drained, timed) → pause → download and
//! extract → force-remove the container and volumes. Nothing runs on the host; cleanup happens on
//! every path.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, DownloadFromContainerOptionsBuilder,
    EventsOptionsBuilder, KillContainerOptionsBuilder, RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures::StreamExt as _;
use roundtable_session_runtime::{Captured, Purpose, RunEnd, RunOutcome, RuntimeError, SessionPlan, TmpEntry};
use roundtable_specs::layout::{self as paths, AGENT_UID};
use roundtable_specs::session::{CheckReport, Extracted};
use roundtable_workspace::extract::{self, Limits};
use tokio::sync::watch;

use crate::Engine;
use crate::calls::timed;
use crate::checked::Checked;
use crate::profile::{self, SandboxSpec, TmpfsRoot, tmpfs_volume};

/// The image that runs agents that need no files of their own (the built-in `mock`).
pub const EMPTY_IMAGE: &str = "roundtable.dev/empty:v1";

/// The container's name, and the prefix of its volumes' names.
pub fn container_name(session: &str) -> String {
    format!("roundtable-{session}")
}

/// The name of a persistent provider home's volume.
pub fn home_volume_name(key: &str) -> String {
    format!("roundtable-home-{key}")
}

/// The names of a session's volumes: the workspace and `/tmp`.
pub fn volume_names(session: &str) -> [String; 2] {
    let name = container_name(session);
    [format!("{name}-workspace"), format!("{name}-tmp")]
}

fn engine_error(step: &'static str) -> impl FnOnce(bollard::errors::Error) -> RuntimeError {
    move |source| RuntimeError::Engine { step, source: Box::new(source) }
}

/// Pauses `name`, retrying when the cgroup freezer gave up ("unable to freeze": runc could not
/// freeze every process in time, which happens under load while processes fork or exit). Each
/// try is a fresh attempt at the same pause; nothing else is retried.
async fn pause_for_export(docker: &bollard::Docker, name: &str) -> Result<(), bollard::errors::Error> {
    const RETRY_AFTER: [u64; 3] = [50, 200, 800];
    let mut delays = RETRY_AFTER.iter();
    loop {
        match timed(name, "pause", docker.pause_container(name)).await {
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 500, message })
                if message.contains("unable to freeze") =>
            {
                let Some(delay) = delays.next() else {
                    return Err(bollard::errors::Error::DockerResponseServerError { status_code: 500, message });
                };
                tracing::warn!(container = name, %message, retry_in_ms = delay, "the engine could not freeze the container; retrying the pause");
                tokio::time::sleep(std::time::Duration::from_millis(*delay)).await;
            }
            other => return other,
        }
    }
}

fn io_error(step: &'static str) -> impl Fn(std::io::Error) -> RuntimeError + Copy {
    move |source| RuntimeError::Io { step, source }
}

/// Whether `error` means the engine could not be reached or dropped the connection, rather than
/// an answer it gave (a refusal, a missing object) or a request it never finished in time.
fn engine_gone(error: &bollard::errors::Error) -> bool {
    use bollard::errors::Error as E;
    matches!(
        error,
        E::HyperLegacyError { .. } | E::HyperResponseError { .. } | E::IOError { .. } | E::SocketNotFoundError(_)
    )
}

/// How often, and how long, an execution whose engine went away looks for it to come back
/// before cleaning up: long enough for a restart that stops its containers gracefully.
const ENGINE_POLL: Duration = Duration::from_millis(500);
const ENGINE_RETURN_WAIT: Duration = Duration::from_secs(120);

/// Creates a container named `name` from the hardened profile: the one place containers are
/// created (agents and admission probes alike).
pub(crate) async fn create_hardened(docker: &Docker, name: &str, spec: &SandboxSpec) -> Result<(), RuntimeError> {
    let options = CreateContainerOptionsBuilder::default().name(name).build();
    timed(name, "create container", docker.create_container(Some(options), spec.container_body()))
        .await
        .map_err(engine_error("create the container"))?;
    Ok(())
}

/// Imports the empty image once (no registry is ever pulled from).
pub async fn ensure_empty_image(docker: &Docker) -> Result<(), RuntimeError> {
    if docker.inspect_image(EMPTY_IMAGE).await.is_ok() {
        return Ok(());
    }
    let (repo, tag) = EMPTY_IMAGE.split_once(':').unwrap_or((EMPTY_IMAGE, "latest"));
    let options = CreateImageOptionsBuilder::default().from_src("-").repo(repo).tag(tag).build();
    let empty_tar = vec![0u8; 1024];
    let mut stream = docker.create_image(Some(options), Some(bollard::body_full(empty_tar.into())), None);
    while let Some(progress) = stream.next().await {
        progress.map_err(engine_error("import the empty image"))?;
    }
    Ok(())
}

/// The plan's entries under `/tmp` (the agent CLI's homes and manifests), each with its owner and
/// mode; `/tmp/roundtable/` itself is always there, root-owned 0755, so the agent cannot add to it.
fn tmp_archive(entries: &[TmpEntry]) -> Result<Vec<u8>, RuntimeError> {
    let io = io_error("seed /tmp");
    let mut builder = tar::Builder::new(Vec::new());
    let root = TmpEntry { path: "roundtable".into(), owner: 0, mode: 0o755, contents: None };
    let entries = std::iter::once(&root).chain(entries.iter().filter(|e| e.path.trim_end_matches('/') != "roundtable"));
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_mode(entry.mode);
        header.set_uid(u64::from(entry.owner));
        header.set_gid(u64::from(entry.owner));
        header.set_mtime(0);
        match &entry.contents {
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                builder.append_data(&mut header, &entry.path, std::io::empty()).map_err(io)?;
            }
            Some(contents) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(contents.len() as u64);
                builder.append_data(&mut header, &entry.path, contents.as_slice()).map_err(io)?;
            }
        }
    }
    builder.into_inner().map_err(io)
}

pub(crate) struct ExecResult {
    pub(crate) exit_code: Option<i64>,
    pub(crate) stdout: Captured,
    pub(crate) stderr: Captured,
    pub(crate) interrupted: Option<RunEnd>,
}

impl ExecResult {
    pub(crate) fn empty() -> Self {
        Self { exit_code: None, stdout: Captured::default(), stderr: Captured::default(), interrupted: None }
    }

    /// Takes the rest of an exited exec's output until the stream ends, bounded: a child left
    /// behind may hold the pipes open or keep writing. (A 20 ms gap between chunks used to end
    /// the drain; under load that cut the self-check's JSON report.)
    pub(crate) async fn drain_exited(&mut self, output: &mut ExecOutput, cap: u64) {
        let drain_until = tokio::time::Instant::now() + Duration::from_millis(500);
        while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(drain_until, output.next()).await {
            match chunk {
                bollard::container::LogOutput::StdOut { message } => self.stdout.push(&message, cap),
                bollard::container::LogOutput::StdErr { message } => self.stderr.push(&message, cap),
                _ => {}
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_exec(
    docker: &Docker,
    container: &str,
    argv: Vec<String>,
    env: Vec<String>,
    stdin: Option<Vec<u8>>,
    cap: u64,
    deadline: Option<Duration>,
    cancel: &mut watch::Receiver<bool>,
) -> Result<ExecResult, RuntimeError> {
    let (exec_id, output, input) = start_attached(docker, container, argv, env, stdin.is_some(), 64 * 1024).await?;
    if let (Some(input), Some(bytes)) = (input, stdin) {
        feed(input, bytes);
    }
    drive(docker, container, &exec_id, output, ExecResult::empty(), cap, deadline, cancel).await
}

/// Captures a started exec's output into `result` until it ends (or `deadline` passes, or
/// `cancel` says so), then reads its exit code.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn drive(
    docker: &Docker,
    container: &str,
    exec_id: &str,
    mut output: ExecOutput,
    mut result: ExecResult,
    cap: u64,
    deadline: Option<Duration>,
    cancel: &mut watch::Receiver<bool>,
) -> Result<ExecResult, RuntimeError> {
    let sleep = tokio::time::sleep(deadline.unwrap_or(Duration::from_secs(365 * 24 * 3600)));
    tokio::pin!(sleep);
    // The process may exit while a child it left behind still holds its output pipes: watch
    // the exec itself, so the container is paused the moment the agent is done.
    let mut exit_poll = tokio::time::interval(Duration::from_millis(100));
    exit_poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first look after a period, not at once: a process that just started is running.
    exit_poll.reset();
    loop {
        tokio::select! {
            chunk = output.next() => match chunk {
                Some(Ok(bollard::container::LogOutput::StdOut { message })) => result.stdout.push(&message, cap),
                Some(Ok(bollard::container::LogOutput::StdErr { message })) => result.stderr.push(&message, cap),
                Some(Ok(_)) => {}
                // Said, because the engine then ends the exec itself (126, "exec attach failed"):
                // seen once under CI load, cause not yet known.
                Some(Err(error)) => {
                    tracing::warn!(container, %error, "the exec's output stream failed");
                    break;
                }
                None => break,
            },
            _ = exit_poll.tick() => {
                if timed(container, "inspect exec (running?)", docker.inspect_exec(exec_id)).await.is_ok_and(|e| e.running == Some(false)) {
                    result.drain_exited(&mut output, cap).await;
                    break;
                }
            }
            () = &mut sleep => {
                result.interrupted = Some(RunEnd::TimedOut);
                break;
            }
            changed = cancel.changed() => {
                if changed.is_ok() && *cancel.borrow() {
                    result.interrupted = Some(RunEnd::Cancelled);
                    break;
                }
            }
        }
    }
    // Stop reading: a child left behind may keep the stream open.
    drop(output);
    if result.interrupted.is_none() {
        // The output also ends when the engine goes away and takes the container with it: an
        // exit code that cannot be read is an error, never a silent "unknown".
        result.exit_code = exit_code(docker, container, exec_id).await?;
    }
    Ok(result)
}

/// An exec's merged output stream.
pub(crate) type ExecOutput = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<bollard::container::LogOutput, bollard::errors::Error>> + Send>,
>;

/// An exec's stdin.
pub(crate) type ExecInput = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// Writes `bytes` to an exec's stdin, then half-closes the attach stream (the process reads end
/// of file). On its own task: a CLI that prints before it reads must not stall us.
pub(crate) fn feed(mut input: ExecInput, bytes: Vec<u8>) {
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt as _;
        let _ = input.write_all(&bytes).await;
        let _ = input.shutdown().await;
    });
}

/// Creates and starts an exec as the agent's UID in the workspace, attached to its stdout and
/// stderr (and, with `attach_stdin`, its stdin); its id, output and input.
pub(crate) async fn start_attached(
    docker: &Docker,
    container: &str,
    argv: Vec<String>,
    env: Vec<String>,
    attach_stdin: bool,
    output_capacity: usize,
) -> Result<(String, ExecOutput, Option<ExecInput>), RuntimeError> {
    let options = CreateExecOptions {
        cmd: Some(argv),
        env: Some(env),
        attach_stdin: Some(attach_stdin),
        user: Some(format!("{AGENT_UID}:{AGENT_UID}")),
        working_dir: Some(paths::WORKSPACE.to_owned()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..CreateExecOptions::default()
    };
    let created = timed(container, "create exec", docker.create_exec(container, options))
        .await
        .map_err(engine_error("create the exec"))?;
    let start = StartExecOptions { output_capacity: Some(output_capacity), ..StartExecOptions::default() };
    match timed(container, "start exec", docker.start_exec(&created.id, Some(start)))
        .await
        .map_err(engine_error("start the exec"))?
    {
        StartExecResults::Attached { output, input } => Ok((created.id, output, attach_stdin.then_some(input))),
        StartExecResults::Detached => Err(RuntimeError::Protocol {
            step: "start the exec",
            detail: "the engine did not attach its output".into(),
        }),
    }
}

/// The exit code of an exec whose output has ended. The engine may close the output a moment
/// before it records the exit (seen under load: an agent that exited 0 read as "unknown"), so
/// this waits, bounded, until the exec is no longer running.
async fn exit_code(docker: &Docker, container: &str, exec: &str) -> Result<Option<i64>, RuntimeError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let inspected = timed(container, "inspect exec (exit code)", docker.inspect_exec(exec))
            .await
            .map_err(engine_error("wait for the exec to finish"))?;
        let finished = inspected.running != Some(true) && inspected.exit_code.is_some();
        if finished || tokio::time::Instant::now() >= deadline {
            return Ok(inspected.exit_code);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Why the in-container proxy did not come up.
#[derive(Debug, thiserror::Error)]
enum ProxyError {
    #[error("cannot start the egress proxy")]
    Start(#[source] RuntimeError),
    #[error("the egress proxy did not start: {said}")]
    NotListening { said: String },
}

/// Starts `roundtable proxy` as an exec and waits until it says it is listening (it checks the
/// gateway socket is there first), so the agent never starts before its proxy. Its output is
/// drained in the background for as long as it runs.
async fn start_proxy(docker: &Docker, container: &str) -> Result<(), ProxyError> {
    let argv = vec![
        paths::BINARY.to_owned(),
        "proxy".into(),
        "--listen".into(),
        paths::PROXY_LISTEN.into(),
        "--upstream".into(),
        format!("unix:{}", paths::EGRESS_SOCKET),
    ];
    let env = vec!["PATH=/usr/bin:/bin".to_owned()];
    let (_, mut output, _) =
        start_attached(docker, container, argv, env, false, 4096).await.map_err(ProxyError::Start)?;
    let mut said = Captured::default();
    let ready = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(chunk)) = output.next().await {
            said.push(&chunk.into_bytes(), 4096);
            if said.bytes.windows(9).any(|w| w == b"listening") {
                return true;
            }
        }
        false
    })
    .await;
    if ready != Ok(true) {
        let text = String::from_utf8_lossy(&said.bytes).trim().to_owned();
        return Err(ProxyError::NotListening { said: if text.is_empty() { "no output".into() } else { text } });
    }
    tokio::spawn(async move { while output.next().await.is_some() {} });
    Ok(())
}

/// Resolves once `cancel` holds `true`; never when its sender is gone.
async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Whether the engine reported an `oom` event for `container` since `since` (unix seconds).
async fn oom_seen(docker: &Docker, container: &str, since: u64) -> bool {
    let filters = HashMap::from([("container", vec![container]), ("event", vec!["oom"])]);
    // `until` is now, to the nanosecond: the engine replays what happened and closes at once.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (since, until) = (since.to_string(), format!("{}.{:09}", now.as_secs(), now.subsec_nanos()));
    let options = EventsOptionsBuilder::default().filters(&filters).since(&since).until(&until).build();
    let mut events = docker.events(Some(options));
    let found = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(event) = events.next().await {
            if event.is_ok_and(|e| e.action.as_deref() == Some("oom")) {
                return true;
            }
        }
        false
    })
    .await;
    found.unwrap_or(false)
}

/// How the self-check ended: passed, its process waiting for the go byte, or the run ends here
/// (failed, or cancelled) with what the check said.
enum Verdict {
    Passed(Checked),
    Ended { end: RunEnd, stderr: Captured, report: Option<CheckReport> },
}

/// One session on the engine.
pub struct Execution<'a> {
    engine: &'a Engine,
    plan: SessionPlan,
    /// The container's name.
    name: String,
}

impl<'a> Execution<'a> {
    pub fn new(engine: &'a Engine, plan: SessionPlan) -> Self {
        let name = container_name(&plan.session);
        Self { engine, plan, name }
    }

    fn volumes(&self) -> [String; 2] {
        volume_names(&self.plan.session)
    }

    /// Runs the whole lifecycle; the container and volumes are removed whatever happens.
    /// A cancel stops the execution in whatever phase it is (an engine call in flight included):
    /// the container is then paused, killed and removed.
    /// When the engine went away mid-run, the error is [`RuntimeError::EngineLost`] and the
    /// cleanup waits (bounded) for the engine to answer again first.
    pub async fn run(&self, cancel: watch::Receiver<bool>) -> Result<RunOutcome, RuntimeError> {
        let mut watcher = cancel.clone();
        let outcome = tokio::select! {
            outcome = self.lifecycle(cancel) => outcome,
            () = cancelled(&mut watcher) => Ok(RunOutcome::ended(RunEnd::Cancelled)),
        };
        let outcome = outcome.map_err(|error| self.lost_or(error));
        if matches!(outcome, Err(RuntimeError::EngineLost { .. })) {
            self.await_engine(&mut watcher).await;
        }
        let cleanup_started = std::time::Instant::now();
        self.cleanup().await;
        let mut outcome = outcome;
        if let Ok(outcome) = &mut outcome {
            outcome.timings.insert("cleanup", crate::calls::micros(cleanup_started) / 1000);
        }
        outcome
    }

    /// An engine call that failed because the engine is gone becomes [`RuntimeError::EngineLost`].
    fn lost_or(&self, error: RuntimeError) -> RuntimeError {
        match error {
            RuntimeError::Engine { step, source }
                if source.downcast_ref::<bollard::errors::Error>().is_some_and(engine_gone) =>
            {
                RuntimeError::EngineLost { endpoint: self.engine.endpoint().to_owned(), step, source }
            }
            other => other,
        }
    }

    /// Waits until the engine answers again (at most [`ENGINE_RETURN_WAIT`], or until cancelled),
    /// so the cleanup can remove what the lost execution left instead of failing against a
    /// socket that is not there.
    async fn await_engine(&self, cancel: &mut watch::Receiver<bool>) {
        let (endpoint, container) = (self.engine.endpoint(), &self.name);
        tracing::warn!(endpoint, %container, "the container engine went away; waiting for it to clean up");
        let answers = async {
            while self.engine.docker().ping().await.is_err() {
                tokio::time::sleep(ENGINE_POLL).await;
            }
        };
        tokio::select! {
            () = answers => tracing::info!(endpoint, %container, "the container engine is back; cleaning up"),
            () = tokio::time::sleep(ENGINE_RETURN_WAIT) => tracing::error!(
                endpoint, %container, "the container engine did not come back in time; the container and volumes may be left behind, labelled"
            ),
            () = cancelled(cancel) => {}
        }
    }

    /// Force-removes (kills) the container and its volumes; safe to call when they do not exist.
    /// Each call is bounded so a wedged engine cannot hold the execution forever; what is left
    /// carries the ownership labels for garbage collection.
    pub async fn cleanup(&self) {
        let docker = self.engine.docker();
        let bound = Duration::from_secs(60);
        let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
        let removed = timed(&self.name, "remove container", docker.remove_container(&self.name, Some(options)));
        if tokio::time::timeout(bound, removed).await.is_err() {
            tracing::error!(container = %self.name, "removing the container timed out; it is left for garbage collection");
        }
        // Once the container is gone, its volumes are independent of each other.
        let volumes = self.volumes();
        futures::future::join_all(volumes.iter().map(|volume| async move {
            let options = RemoveVolumeOptionsBuilder::default().force(true).build();
            let removed = timed(&self.name, "remove volume", docker.remove_volume(volume, Some(options)));
            if tokio::time::timeout(bound, removed).await.is_err() {
                tracing::error!(%volume, "removing the volume timed out; it is left for garbage collection");
            }
        }))
        .await;
    }

    /// Seeds `/tmp/roundtable/` through the archive API: its root-owned entries cannot be made by
    /// anything inside (tmpfs volumes hold data only while a running container mounts them).
    async fn seed_tmp(&self, docker: &Docker) -> Result<(), RuntimeError> {
        let (plan, name) = (&self.plan, &self.name);
        let tmp_seed = tmp_archive(&plan.tmp_entries)?;
        let upload = UploadToContainerOptionsBuilder::default().path(paths::TMP).build();
        let seeded = docker.upload_to_container(name, Some(upload), bollard::body_full(tmp_seed.into()));
        timed(name, "upload /tmp", seeded).await.map_err(engine_error("upload /tmp/roundtable"))?;
        Ok(())
    }

    /// Starts the self-check, which is also the agent's exec: the check prints its report and
    /// waits; it becomes the agent only once the report has been read and verified here (see
    /// [`Checked`]). Any mismatch, or no report, fails closed and the agent never runs.
    async fn self_check(&self, docker: &Docker, cancel: &mut watch::Receiver<bool>) -> Result<Verdict, RuntimeError> {
        let (plan, name) = (&self.plan, &self.name);
        let e = &plan.expected;
        let check_argv = vec![
            paths::BINARY.to_owned(),
            "sandbox".into(),
            "check".into(),
            format!("--uid={}", e.uid),
            format!("--gid={}", e.gid),
            format!("--memory={}", e.memory_bytes),
            format!("--pids={}", e.pids),
            format!("--cpu-millis={}", e.cpu_millis),
            // The workspace is seeded inside, from the read-only source mount, as the agent's user:
            // no second upload through the engine.
            "--seed-workspace".into(),
        ];
        let cancelled = || Verdict::Ended { end: RunEnd::Cancelled, stderr: Captured::default(), report: None };
        // A check that says what failed fails at once. One that printed no report at all (an
        // engine that lost the exec's output under load) runs once more; it is read-only, and the
        // second answer decides, still failing closed.
        let mut attempt = 1;
        loop {
            let checked = Checked::start(docker, name, &check_argv, &plan.argv, plan.env.clone(), cancel).await?;
            if checked.cancelled() {
                return Ok(cancelled());
            }
            if checked.passed() {
                return Ok(Verdict::Passed(checked));
            }
            let report = checked.report.clone();
            let refused = checked.refuse(docker, name, cancel).await?;
            if refused.interrupted == Some(RunEnd::Cancelled) {
                return Ok(cancelled());
            }
            if report.is_some() || attempt == 2 {
                let mut stderr = refused.stderr;
                if report.is_none() && stderr.bytes.is_empty() {
                    let said = format!(
                        "the check printed no report twice (exit code {}, {} bytes on stdout)",
                        refused.exit_code.map_or_else(|| "unknown".to_owned(), |c| c.to_string()),
                        refused.stdout.bytes.len()
                    );
                    stderr.push(said.as_bytes(), 1 << 20);
                }
                return Ok(Verdict::Ended { end: RunEnd::SelfCheckFailed, stderr, report });
            }
            tracing::warn!(container = %name, exit_code = ?refused.exit_code, stderr = %String::from_utf8_lossy(&refused.stderr.bytes).trim(), "the self-check printed no report; running it once more");
            attempt += 1;
        }
    }

    async fn lifecycle(&self, mut cancel: watch::Receiver<bool>) -> Result<RunOutcome, RuntimeError> {
        let docker = self.engine.docker();
        let plan = &self.plan;
        let name = &self.name;
        if *cancel.borrow() {
            return Ok(RunOutcome::ended(RunEnd::Cancelled));
        }
        let mut phase_started = std::time::Instant::now();
        let mut lap = |timings: &mut std::collections::BTreeMap<&'static str, u64>, phase: &'static str| {
            let micros = crate::calls::micros(phase_started);
            tracing::debug!(target: crate::calls::TARGET, container = %name, phase, micros, "phase done");
            timings.insert(phase, micros / 1000);
            phase_started = std::time::Instant::now();
        };
        let image = match &plan.image {
            Some(image) => image.clone(),
            None => {
                ensure_empty_image(docker).await?;
                EMPTY_IMAGE.to_owned()
            }
        };
        let labels = plan.ownership.labels();
        let resources = plan.resources;
        let [workspace, tmp] = self.volumes();
        // Independent of each other: created at once, both before the container that mounts them.
        let workspace_volume = tmpfs_volume(&workspace, resources.workspace_bytes, TmpfsRoot::Agent, labels.clone());
        let tmp_volume = tmpfs_volume(&tmp, resources.tmp_bytes, TmpfsRoot::Root, labels.clone());
        futures::try_join!(
            async {
                timed(name, "create volume", docker.create_volume(workspace_volume))
                    .await
                    .map_err(engine_error("create the workspace volume"))
            },
            async {
                timed(name, "create volume", docker.create_volume(tmp_volume))
                    .await
                    .map_err(engine_error("create the /tmp volume"))
            },
        )?;
        let home_volume = match &plan.persistent_home {
            Some(home) => {
                // Owned by the Assignment, not the session: no session label, so neither this
                // session's cleanup nor `prune` of ended sessions removes it.
                let mut home_labels = labels.clone();
                home_labels.remove(roundtable_session_runtime::labels::SESSION);
                home_labels.remove(roundtable_session_runtime::labels::CONTROLLER_RUN);
                home_labels.insert(roundtable_session_runtime::labels::PURPOSE.into(), Purpose::Home.as_str().into());
                home_labels.insert(roundtable_session_runtime::labels::REPOSITORY.into(), home.repository.clone());
                let volume = home_volume_name(&home.key);
                // Creating an existing volume returns it: the home of earlier sessions.
                docker
                    .create_volume(profile::home_volume(&volume, home_labels))
                    .await
                    .map_err(engine_error("create the persistent home volume"))?;
                Some((volume, home.target.clone()))
            }
            None => None,
        };
        let spec = SandboxSpec {
            image,
            labels,
            memory_bytes: resources.memory_bytes,
            nano_cpus: resources.nano_cpus,
            pids: resources.pids,
            workspace_volume: workspace,
            tmp_volume: tmp,
            binary: plan.binary.clone(),
            source_dir: Some(plan.source_dir.clone()),
            task_file: Some(plan.task_file.clone()),
            socket_dir: plan.socket_dir.clone(),
            home_volume,
        };
        tracing::debug!(container = %name, "creating the container");
        create_hardened(docker, name, &spec).await?;
        timed(name, "start container", docker.start_container(name, None))
            .await
            .map_err(engine_error("start PID 1"))?;

        let mut outcome = RunOutcome::ended(RunEnd::Exited);
        lap(&mut outcome.timings, "launch");

        // The /tmp seed and the self-check (which seeds the workspace) do not depend on each other,
        // so they run at once; the agent starts only after both, below.
        tracing::debug!(container = %name, "seeding and self-check");
        let (seeded, verdict) = tokio::join!(self.seed_tmp(docker), self.self_check(docker, &mut cancel));
        lap(&mut outcome.timings, "selfCheck");
        // A seed that failed fails the session, as it did when it came first; a checked process
        // waiting for its go never gets it.
        seeded?;
        let checked = match verdict {
            Ok(Verdict::Passed(checked)) => checked,
            Ok(Verdict::Ended { end, stderr, report }) => {
                outcome.end = end;
                outcome.stderr = stderr;
                outcome.self_check = report;
                return Ok(outcome);
            }
            Err(error) => return Err(error),
        };
        outcome.self_check = checked.report.clone();

        if plan.egress_proxy {
            tracing::debug!(container = %name, "egress proxy");
            if let Err(failure) = start_proxy(docker, name).await {
                // The checked process waits for a go that never comes.
                let _ = checked.refuse(docker, name, &mut cancel).await;
                outcome.end = RunEnd::EgressUnavailable;
                let said = roundtable_telemetry::error_chain(&failure);
                outcome.stderr.push(said.as_bytes(), 1 << 20);
                return Ok(outcome);
            }
            lap(&mut outcome.timings, "proxy");
        }

        // The engine's OOM events are read afterwards for the agent's whole run (since → until),
        // so none is missed by subscribing late.
        let agent_started = unix_seconds();
        tracing::debug!(container = %name, "agent");
        let (exec_id, output) = checked.go(plan.stdin.clone());
        let agent = drive(
            docker,
            name,
            &exec_id,
            output,
            ExecResult::empty(),
            plan.output_limit,
            Some(plan.timeout),
            &mut cancel,
        )
        .await?;
        lap(&mut outcome.timings, "agent");
        outcome.stdout = agent.stdout;
        outcome.stderr = agent.stderr;
        outcome.exit_code = agent.exit_code;
        if let Some(cause) = agent.interrupted {
            // Timeout or cancel: pause first so nothing keeps running, then kill.
            outcome.end = cause;
            let _ = docker.pause_container(name).await;
            let _ =
                docker.kill_container(name, Some(KillContainerOptionsBuilder::default().signal("KILL").build())).await;
            return Ok(outcome);
        }
        if timed(name, "events (oom)", oom_seen(docker, name, agent_started.saturating_sub(1))).await {
            outcome.end = RunEnd::OutOfMemory;
        }

        // Pause so surviving children cannot race the export, then stream the workspace out.
        pause_for_export(docker, name).await.map_err(engine_error("pause before export"))?;
        outcome.paused_for_export = true;
        match timed(name, "download + extract", self.export(docker, name)).await {
            Ok(extracted) => outcome.extracted = Some(extracted),
            // A lost engine is the session's end, not the export's.
            Err(RuntimeError::Engine { step, source })
                if source.downcast_ref::<bollard::errors::Error>().is_some_and(engine_gone) =>
            {
                return Err(RuntimeError::Engine { step, source });
            }
            // The agent's exit code and output stay on the outcome; the export's failure says why
            // there is no proposal.
            Err(error) => outcome.export_failed = Some(roundtable_telemetry::error_chain(&error)),
        }
        lap(&mut outcome.timings, "export");
        Ok(outcome)
    }

    /// Streams the workspace out of the paused container straight into the rooted extractor: no
    /// spool on the host, and reading stops at the byte cap (an archive counts its headers too,
    /// so the cap allows some slack; a sparse file that is small in tmpfs is dense in the tar).
    async fn export(&self, docker: &Docker, name: &str) -> Result<Extracted, RuntimeError> {
        let plan = &self.plan;
        let options = DownloadFromContainerOptionsBuilder::default().path(paths::WORKSPACE).build();
        let mut stream = docker.download_from_container(name, Some(options));
        let (chunks, receiver) = std::sync::mpsc::sync_channel::<Vec<u8>>(16);
        let (export_dir, limits) = (plan.export_dir.clone(), plan.export_limits);
        let limits = Limits { max_bytes: limits.max_bytes, max_entries: limits.max_entries };
        let extractor =
            tokio::task::spawn_blocking(move || extract::extract(ChannelReader::new(receiver), &export_dir, limits));
        let cap = plan.export_limits.max_bytes.saturating_mul(2).saturating_add(1 << 20);
        let mut streamed = 0u64;
        let mut over_cap = false;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(engine_error("download the workspace"))?;
            streamed += chunk.len() as u64;
            if streamed > cap {
                over_cap = true;
                break;
            }
            // The extractor stopped (it refused the archive): its verdict follows.
            if chunks.send(chunk.to_vec()).is_err() {
                break;
            }
        }
        drop(chunks);
        drop(stream);
        let extracted =
            extractor.await.map_err(|error| RuntimeError::Protocol { step: "extract", detail: error.to_string() })?;
        if over_cap {
            let too_large = extract::ExtractError::TooLarge { limit: plan.export_limits.max_bytes };
            return Err(RuntimeError::Export(Box::new(too_large)));
        }
        extracted.map_err(|error| RuntimeError::Export(Box::new(error)))
    }
}

/// A blocking reader over chunks sent from the async side; the end of the stream is the sender
/// going away.
struct ChannelReader {
    chunks: std::sync::mpsc::Receiver<Vec<u8>>,
    current: std::io::Cursor<Vec<u8>>,
}

impl ChannelReader {
    fn new(chunks: std::sync::mpsc::Receiver<Vec<u8>>) -> Self {
        Self { chunks, current: std::io::Cursor::new(Vec::new()) }
    }
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let read = self.current.read(buf)?;
            if read > 0 || buf.is_empty() {
                return Ok(read);
            }
            match self.chunks.recv() {
                Ok(chunk) => self.current = std::io::Cursor::new(chunk),
                Err(_) => return Ok(0),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connection_that_fails_means_the_engine_is_gone() {
        use bollard::errors::Error as E;
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let cases = [
            (E::IOError { err: refused }, true),
            (E::SocketNotFoundError("/run/docker.sock".into()), true),
            (E::DockerResponseServerError { status_code: 404, message: "No such exec instance".into() }, false),
            (E::DockerResponseServerError { status_code: 409, message: "is not running".into() }, false),
            (E::RequestTimeoutError, false),
        ];
        for (error, gone) in cases {
            assert_eq!(engine_gone(&error), gone, "{error:?}");
        }
    }
}
