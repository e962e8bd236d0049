//! The session runtime contract: what the controller asks of a container backend, in terms any
//! backend can carry out. The Docker implementation (`roundtable-docker`) holds every engine call;
//! the execution manager, the Adapter reconciler, `status` and `prune` see only this trait, and
//! their tests drive it with a fake. `docs/kubernetes-backend.md` describes how a backend that
//! runs each session as a kubernetes-sigs/agent-sandbox `Sandbox` would implement the same trait.

pub mod hints;
pub mod images;
pub mod labels;
pub mod seed;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use roundtable_specs::names::RuntimeClass;
pub use roundtable_specs::runtime_class::{EngineRuntimes, ResolvedRuntime};
use roundtable_specs::session::{CheckReport, Extracted, SessionCause};
use tokio::sync::watch;

pub use hints::EngineHint;
pub use images::{ImageDetails, PullProgress};
pub use labels::{Ownership, Purpose};

/// The go byte: what `sandbox check … -- ARGV` waits for on stdin, after printing its report,
/// before it becomes ARGV. A backend writes it only once it has read and verified that report;
/// anything else, or end of file, and the agent never runs.
pub const CHECK_GO: u8 = b'G';

/// Any error a backend's client library reports, kept whole for the error chain.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the Adapter grants a session, as hard limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resources {
    pub memory_bytes: u64,
    /// Billionths of a CPU.
    pub nano_cpus: u64,
    pub pids: u32,
    pub workspace_bytes: u64,
    pub tmp_bytes: u64,
}

/// The Adapter's resources (after defaults) as the engine's numbers: the one conversion on the
/// way from the request to the engine. This shape is what the plan, the hardened profile and
/// its volumes carry from here on.
impl From<&roundtable_specs::adapter::Resources> for Resources {
    fn from(granted: &roundtable_specs::adapter::Resources) -> Self {
        Self {
            memory_bytes: granted.memory.bytes(),
            nano_cpus: granted.cpus.nanos(),
            pids: granted.pids,
            workspace_bytes: granted.workspace_size.bytes(),
            tmp_bytes: granted.tmp_size.bytes(),
        }
    }
}

impl Resources {
    /// The CPU limit in thousandths of a CPU, as the self-check reads it back.
    pub fn cpu_millis(&self) -> u64 {
        self.nano_cpus / 1_000_000
    }
}

/// How much one export may unpack on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportLimits {
    pub max_bytes: u64,
    pub max_entries: u64,
}

/// What the in-container self-check must find before the agent runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub uid: u32,
    pub gid: u32,
    pub memory_bytes: u64,
    pub pids: u64,
    /// Thousandths of a CPU.
    pub cpu_millis: u64,
    /// The runtime the container runs under (the backend creates it so) and the kernel the
    /// check must see; `None`: the engine's default, and the kernel is not checked.
    pub runtime: Option<ResolvedRuntime>,
}

/// One directory or file the backend creates under `/tmp` before the agent starts (the agent
/// CLI's manifests and homes), with its owner and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpEntry {
    /// Relative to `/tmp`, e.g. `roundtable/codex/config.toml`.
    pub path: String,
    pub owner: u32,
    pub mode: u32,
    /// `None`: a directory.
    pub contents: Option<Vec<u8>>,
}

/// What the backend uploads into the `/tmp` volume for a file a launch plan writes (a provider
/// profile's manifest or home, `roundtable_specs::providers`).
impl From<&roundtable_specs::providers::AgentFile> for TmpEntry {
    fn from(file: &roundtable_specs::providers::AgentFile) -> Self {
        Self {
            path: file.under_tmp().to_owned(),
            owner: file.owner,
            mode: file.mode,
            contents: file.contents.as_ref().map(|c| c.clone().into_bytes()),
        }
    }
}

/// A provider home that outlives the session: created on first use, mounted at `target`, never
/// removed with the session (only when its Assignment is gone: `prune`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistentHome {
    /// Unique per repository, Assignment and provider; safe in resource names.
    pub key: String,
    /// The repository's random id (the state store's), which the home is labelled with.
    pub repository: String,
    /// Where it is mounted in the container.
    pub target: String,
}

impl PersistentHome {
    /// The home of `assignment`'s `provider` CLI in the repository whose state store holds
    /// `repository`. Keyed by that random id, never by the project's path: a new repository
    /// checked out where an old one was gets a home of its own.
    pub fn of(repository: &str, assignment: &str, provider: &str, target: &str) -> Self {
        let assignment = &roundtable_specs::digest::sha256_hex(assignment.as_bytes())[..12];
        Self {
            key: format!("{repository}-{assignment}-{provider}"),
            repository: repository.to_owned(),
            target: target.to_owned(),
        }
    }
}

/// Everything one session needs, backend-neutral. Host paths are the controller's; a backend
/// that runs elsewhere (a Kubernetes node) carries their contents, not the paths.
#[derive(Clone)]
pub struct SessionPlan {
    /// The session ID: unique, short, safe in resource names.
    pub session: String,
    pub ownership: Ownership,
    /// `None`: the agent brings no files of its own (the built-in `mock`); the backend supplies
    /// an empty image.
    pub image: Option<String>,
    pub resources: Resources,
    /// The controller's own static binary: PID 1, the self-check, the proxy.
    pub binary: PathBuf,
    /// The provisioned source: mounted read-only and the workspace's seed.
    pub source_dir: PathBuf,
    /// The brief.
    pub task_file: PathBuf,
    /// The session's socket directory (sockets already bound in it), when it has one.
    pub socket_dir: Option<PathBuf>,
    /// Start the in-container proxy to the gateway socket before the agent.
    pub egress_proxy: bool,
    /// Relay the broker's loopback address (`layout::BROKER_LISTEN`) to its socket too.
    pub broker_relay: bool,
    pub argv: Vec<String>,
    /// `KEY=VALUE`: the agent's whole environment. It holds secrets (credentials, the MCP
    /// capability): it goes into the agent exec only, never into the container's configuration,
    /// and `Debug` prints only the names.
    pub env: Vec<String>,
    /// What the agent reads on stdin, then end of file; `None`: end of file at once.
    pub stdin: Option<Vec<u8>>,
    /// Directories and files under `/tmp`, in creation order (parents first).
    pub tmp_entries: Vec<TmpEntry>,
    pub persistent_home: Option<PersistentHome>,
    /// Bytes kept per output stream (the rest is drained and counted).
    pub output_limit: u64,
    pub timeout: Duration,
    pub expected: Expected,
    /// Where the agent's workspace is extracted (rooted) after the run.
    pub export_dir: PathBuf,
    /// Scratch space the backend may use on the host (the export's spool).
    pub scratch_dir: PathBuf,
    pub export_limits: ExportLimits,
    /// Where the agent's output goes as it is produced (the console's live tail), besides the
    /// capture kept whole; none: only the capture.
    pub live: Option<LiveSink>,
}

/// Which of the agent's streams a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// Receives each chunk of a running agent's output as the engine hands it over.
pub type LiveSink = std::sync::Arc<dyn Fn(OutputStream, &[u8]) + Send + Sync>;

impl std::fmt::Debug for SessionPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env_names = env_names(&self.env);
        f.debug_struct("SessionPlan")
            .field("session", &self.session)
            .field("ownership", &self.ownership)
            .field("image", &self.image)
            .field("resources", &self.resources)
            .field("argv", &self.argv)
            .field("env_names", &env_names)
            .field("stdin_bytes", &self.stdin.as_ref().map(Vec::len))
            .field("tmp_entries", &self.tmp_entries.iter().map(|e| &e.path).collect::<Vec<_>>())
            .field("persistent_home", &self.persistent_home)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// How the agent's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The agent exited on its own; the exit code says how.
    Exited,
    TimedOut,
    Cancelled,
    OutOfMemory,
    SelfCheckFailed,
    /// The in-container proxy to the session's gateway did not come up; the agent never ran.
    EgressUnavailable,
}

impl From<RunEnd> for SessionCause {
    fn from(end: RunEnd) -> Self {
        match end {
            RunEnd::Exited => SessionCause::Exited,
            RunEnd::TimedOut => SessionCause::TimedOut,
            RunEnd::Cancelled => SessionCause::Cancelled,
            RunEnd::OutOfMemory => SessionCause::OutOfMemory,
            RunEnd::SelfCheckFailed => SessionCause::SelfCheckFailed,
            RunEnd::EgressUnavailable => SessionCause::EgressUnavailable,
        }
    }
}

/// One captured output stream: what was kept, and how much there was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub bytes: Vec<u8>,
    /// Everything the stream produced, kept or not.
    pub total: u64,
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len() as u64
    }

    /// Keeps what fits under `cap`, counts everything.
    pub fn push(&mut self, chunk: &[u8], cap: u64) {
        self.total += chunk.len() as u64;
        let room = usize::try_from(cap.saturating_sub(self.bytes.len() as u64)).unwrap_or(usize::MAX);
        self.bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
}

/// What happened in one session.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub end: RunEnd,
    pub exit_code: Option<i64>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub self_check: Option<CheckReport>,
    /// The container was paused before the workspace was exported.
    pub paused_for_export: bool,
    /// What the rooted extraction of the workspace found, when it got that far.
    pub extracted: Option<Extracted>,
    /// Why the workspace could not be exported (over its caps, unreadable): the agent's exit
    /// code and output are still here, but there is nothing to propose.
    pub export_failed: Option<String>,
    /// Milliseconds per phase: `launch` (volumes, container, PID 1), `selfCheck` (the seed and the
    /// self-check, at once), `proxy`, `agent`, `export`. The removal that follows is not on the
    /// session's way ([`SessionRuntime::settled`]).
    pub timings: BTreeMap<&'static str, u64>,
    /// How many requests the backend made to its engine before handing back this outcome (not
    /// the polls made while output was awaited, whose number is the wait's); 0 from a backend
    /// that does not count.
    pub engine_calls: u32,
}

impl RunOutcome {
    /// An outcome with nothing observed yet.
    pub fn ended(end: RunEnd) -> Self {
        Self {
            end,
            exit_code: None,
            stdout: Captured::default(),
            stderr: Captured::default(),
            self_check: None,
            paused_for_export: false,
            extracted: None,
            export_failed: None,
            timings: BTreeMap::new(),
            engine_calls: 0,
        }
    }
}

/// Why a session could not be carried out, or a resource listed or removed.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No engine could be reached at all.
    #[error("no container engine: {reason}")]
    Unavailable { reason: String },
    /// The engine refused or failed one step.
    #[error("container engine: {step}")]
    Engine {
        step: &'static str,
        #[source]
        source: BoxError,
    },
    /// The engine stopped answering mid-session. Without live restore a stopped or restarted
    /// engine takes its containers with it, so the session cannot be finished, only re-run.
    #[error(
        "the container engine at {endpoint} went away during `{step}` (stopped or restarted); the container and its workspace were lost"
    )]
    EngineLost {
        endpoint: String,
        step: &'static str,
        #[source]
        source: BoxError,
    },
    #[error("{step}")]
    Io {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The image is not on the engine. Sessions and probes never pull: only the Adapter's
    /// reconcile does, before the Adapter is Ready.
    #[error(
        "image {image} is not on the engine (sessions never pull it: the Adapter's reconcile pulls a pullable reference before the Adapter is Ready, or build or load it)"
    )]
    ImageMissing { image: String },
    /// The backend cannot do this at all (a runtime that does not pull images).
    #[error("this session runtime cannot {what}")]
    Unsupported { what: &'static str },
    /// The workspace came back but could not be extracted within bounds.
    #[error("export")]
    Export(#[source] BoxError),
    /// The engine broke the protocol (an exec that did not attach, a report that does not parse).
    #[error("{step}: {detail}")]
    Protocol { step: &'static str, detail: String },
}

/// What kind of thing a backend created for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ResourceKind {
    Container,
    Volume,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Container => "Container",
            ResourceKind::Volume => "Volume",
        }
    }
}

/// A resource carrying the ownership labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedResource {
    pub kind: ResourceKind,
    pub name: String,
    pub labels: HashMap<String, String>,
    /// A container that is running now (a volume never is).
    pub running: bool,
}

impl OwnedResource {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// Whether the backend answers, and who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub endpoint: String,
    pub version: String,
}

/// A short-lived container that runs a few commands in an adapter's image: admission's version and
/// help probe (no source, no sockets) and agent diagnostics (an empty read-only source and the MCP
/// socket). Always the agent's hardening and no network.
#[derive(Debug, Clone)]
pub struct ProbePlan {
    /// Unique, short, safe in resource names.
    pub id: String,
    /// Labelled [`Purpose::Probe`], so nothing mistakes it for an agent.
    pub ownership: Ownership,
    /// `None`: the empty image (the built-in mock).
    pub image: Option<String>,
    pub binary: PathBuf,
    /// Run one after another, each as the agent's UID in the (empty) workspace.
    pub commands: Vec<ProbeCommand>,
    /// The environment of every command.
    pub env: Vec<String>,
    /// Per command.
    pub timeout: Duration,
    /// Bytes kept per stream per command; the rest is drained and counted as it streams.
    pub output_limit: u64,
    /// What is mounted besides the binary; nothing by default.
    pub mounts: ProbeMounts,
    /// Entries uploaded under `/tmp` before the first command, as a session's are (the
    /// canary's CLI manifests and trust bundle); none by default.
    pub tmp_entries: Vec<TmpEntry>,
    /// The OCI runtime it runs under, as the adapter's sessions do; `None`: the engine's default.
    pub runtime: Option<RuntimeClass>,
    /// Whether the in-container relay runs before the first command, carrying `HTTPS_PROXY` and
    /// the broker's loopback address to `broker.sock` in the mounted socket folder (the route
    /// canary's).
    pub broker_relay: bool,
}

/// What a probe may have mounted besides the binary, each where a session has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeMounts {
    /// A host directory mounted read-only at `/roundtable/source`.
    pub source_dir: Option<PathBuf>,
    /// A socket directory (sockets already bound in it) mounted at `/run/roundtable`.
    pub socket_dir: Option<PathBuf>,
}

/// One command of a probe.
#[derive(Clone, PartialEq, Eq)]
pub struct ProbeCommand {
    pub argv: Vec<String>,
    /// What it reads on stdin, then end of file; `None`: nothing attached.
    pub stdin: Option<Vec<u8>>,
    /// `KEY=VALUE` added to the plan's environment for this command alone. It may hold a secret
    /// (an MCP capability): it goes into this exec only, and `Debug` prints only the names.
    pub env: Vec<String>,
}

impl ProbeCommand {
    pub fn new(argv: Vec<String>) -> Self {
        Self { argv, stdin: None, env: Vec::new() }
    }

    /// The same command, reading `stdin` and then end of file.
    pub fn with_stdin(mut self, stdin: Vec<u8>) -> Self {
        self.stdin = Some(stdin);
        self
    }

    /// The same command with `KEY=VALUE` in its own environment.
    pub fn with_env(mut self, pair: String) -> Self {
        self.env.push(pair);
        self
    }
}

impl std::fmt::Debug for ProbeCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeCommand")
            .field("argv", &self.argv)
            .field("stdin_bytes", &self.stdin.as_ref().map(Vec::len))
            .field("env_names", &env_names(&self.env))
            .finish()
    }
}

/// The names of `KEY=VALUE` pairs, for `Debug` output that must not show values.
fn env_names(env: &[String]) -> Vec<&str> {
    env.iter().map(|pair| pair.split_once('=').map_or(pair.as_str(), |(name, _)| name)).collect()
}

/// What one probe command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeRun {
    pub argv: Vec<String>,
    /// `None`: it did not finish in time.
    pub exit_code: Option<i64>,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// What a probe found: the image it ran in and each command's result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeOutcome {
    pub image_id: String,
    pub runs: Vec<ProbeRun>,
}

/// A container backend that runs sessions. Object-safe: the controller holds it as
/// `Arc<dyn SessionRuntime>`.
pub trait SessionRuntime: Send + Sync + 'static {
    /// Where the backend is (for messages).
    fn endpoint(&self) -> &str;

    /// Runs one session from launch to export. Whatever happens, what it created is removed:
    /// by the time [`SessionRuntime::settled`] resolves after this returned (a backend may finish
    /// the removal after handing back the outcome, which does not wait for it), or, if the
    /// engine is gone, left labelled for `prune`. `stop` turning `true` stops the session in
    /// whatever phase it is: paused, killed, removed, and the outcome ends
    /// [`RunEnd::Cancelled`].
    fn run(&self, plan: SessionPlan, stop: watch::Receiver<bool>) -> BoxFuture<'_, Result<RunOutcome, RuntimeError>>;

    /// Resolves once every removal a returned [`SessionRuntime::run`] left under way has ended
    /// (each is bounded), so a daemon that awaits it before it exits leaves nothing of its
    /// sessions behind. The default: a runtime that removes before `run` returns.
    fn settled(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// Every resource labelled as Roundtable's for `project`.
    fn owned(&self, project: &str) -> BoxFuture<'_, Result<Vec<OwnedResource>, RuntimeError>>;

    /// Removes one labelled resource (force: a container is killed first).
    fn remove(&self, resource: &OwnedResource) -> BoxFuture<'_, Result<(), RuntimeError>>;

    /// Removes whatever session `session` of `project` still owns; nothing owned is not an error.
    fn remove_session(&self, project: &str, session: &str) -> BoxFuture<'_, Result<(), RuntimeError>>;

    /// What the engine holds under `reference` (its image ID and repo digests), `None` when it
    /// holds nothing there; never pulls.
    fn inspect_image(&self, reference: &str) -> BoxFuture<'_, Result<Option<ImageDetails>, RuntimeError>>;

    /// Pulls `reference` (a tag or a digest reference, never a bare image ID) from its registry
    /// into the engine, with the registry credentials the engine's own client would use, sending
    /// how far it has come to `progress` as the engine reports it. Runs until the engine says the
    /// pull ended; the caller bounds it in time (dropping the future abandons the pull) and checks
    /// what it got (`images::holds_digest`): nothing here trusts the registry. The default: this
    /// runtime does not pull.
    fn pull_image(
        &self,
        reference: &str,
        progress: watch::Sender<PullProgress>,
    ) -> BoxFuture<'_, Result<(), RuntimeError>> {
        let _ = (reference, progress);
        Box::pin(async { Err(RuntimeError::Unsupported { what: "pull images" }) })
    }

    /// Removes `reference` from the engine: the name goes, and the image with it only when no
    /// other name holds it and no container uses it (so an image that was there before a pull
    /// under another name stays). Nothing there is not an error. The default: this runtime
    /// does not pull, so it has nothing of its own to remove.
    fn remove_image(&self, reference: &str) -> BoxFuture<'_, Result<(), RuntimeError>> {
        let _ = reference;
        Box::pin(async { Err(RuntimeError::Unsupported { what: "remove images" }) })
    }

    /// Whether the engine answers now.
    fn health(&self) -> BoxFuture<'_, Result<Health, RuntimeError>>;

    /// The OCI runtimes the engine has registered, its default and the host's kernel; `None`
    /// from a backend that cannot say (this default: test fakes).
    fn runtimes(&self) -> BoxFuture<'_, Result<Option<EngineRuntimes>, RuntimeError>> {
        Box::pin(async { Ok(None) })
    }

    /// Runs a probe to its end; whatever it created is removed before this returns. A missing
    /// image is an error (a probe never pulls).
    fn probe(&self, plan: ProbePlan) -> BoxFuture<'_, Result<ProbeOutcome, RuntimeError>>;

    /// The engine's events as hints, for as long as the stream is polled: the backend
    /// reconnects on its own when the engine goes away and comes back (yielding
    /// [`EngineHint::Resumed`] then), so the stream does not end. A backend without an event
    /// stream (this default: [`Unavailable`], test fakes) returns one that never yields, and
    /// the periodic resync is all there is.
    fn hints(&self) -> BoxStream<'static, EngineHint> {
        Box::pin(futures::stream::pending())
    }
}

/// The runtime when no engine could be reached: every call fails with the reason, so reconciles
/// back off and retry and executions fail with a clear cause.
#[derive(Debug, Clone)]
pub struct Unavailable {
    /// Where the engine was looked for (`none` when nowhere).
    pub endpoint: String,
    pub reason: String,
}

impl Unavailable {
    fn error(&self) -> RuntimeError {
        RuntimeError::Unavailable { reason: self.reason.clone() }
    }
}

impl SessionRuntime for Unavailable {
    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn run(&self, _plan: SessionPlan, _stop: watch::Receiver<bool>) -> BoxFuture<'_, Result<RunOutcome, RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn owned(&self, _project: &str) -> BoxFuture<'_, Result<Vec<OwnedResource>, RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn remove(&self, _resource: &OwnedResource) -> BoxFuture<'_, Result<(), RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn remove_session(&self, _project: &str, _session: &str) -> BoxFuture<'_, Result<(), RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn inspect_image(&self, _reference: &str) -> BoxFuture<'_, Result<Option<ImageDetails>, RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn pull_image(
        &self,
        _reference: &str,
        _progress: watch::Sender<PullProgress>,
    ) -> BoxFuture<'_, Result<(), RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn remove_image(&self, _reference: &str) -> BoxFuture<'_, Result<(), RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn health(&self) -> BoxFuture<'_, Result<Health, RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn probe(&self, _plan: ProbePlan) -> BoxFuture<'_, Result<ProbeOutcome, RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn runtimes(&self) -> BoxFuture<'_, Result<Option<EngineRuntimes>, RuntimeError>> {
        Box::pin(async move { Err(self.error()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_keeps_up_to_the_cap_and_counts_everything() {
        let mut captured = Captured::default();
        captured.push(b"hello ", 8);
        captured.push(b"world", 8);
        assert_eq!(captured.bytes, b"hello wo");
        assert_eq!(captured.total, 11);
        assert!(captured.truncated());
    }

    #[test]
    fn the_adapters_resources_become_the_engines_numbers() {
        use roundtable_specs::units::{Cpus, Quantity};
        let granted = roundtable_specs::adapter::Resources {
            memory: Quantity::mebibytes(512),
            cpus: Cpus::from_millis(1500),
            pids: 256,
            workspace_size: Quantity::gibibytes(1),
            tmp_size: Quantity::mebibytes(64),
        };
        let resources = Resources::from(&granted);
        assert_eq!(
            resources,
            Resources {
                memory_bytes: 512 << 20,
                nano_cpus: 1_500_000_000,
                pids: 256,
                workspace_bytes: 1 << 30,
                tmp_bytes: 64 << 20,
            }
        );
        assert_eq!(resources.cpu_millis(), 1500, "what the self-check expects is what was granted");
    }

    #[test]
    fn a_probe_command_never_prints_its_environment_values() {
        let command = ProbeCommand::new(vec!["roundtable".into(), "mcp".into(), "stdio".into()])
            .with_stdin(b"{}".to_vec())
            .with_env("ROUNDTABLE_AGENT_CAPABILITY=rtcap_secret".into());
        let shown = format!("{command:?}");
        assert!(shown.contains("ROUNDTABLE_AGENT_CAPABILITY") && !shown.contains("rtcap_secret"), "{shown}");
        assert_eq!(command.stdin.as_deref(), Some(&b"{}"[..]));
    }
}
