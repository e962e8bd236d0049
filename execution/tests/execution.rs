//! The execution manager driven through the session runtime trait with a fake runtime: real git
//! repositories, real provisioning and patches, a real SQLite store, and no container engine.
//! Each test pins what a user would see: the session's phase, cause and message, the proposal
//! and its flags, what shutdown does, what the runtime was asked to remove.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use roundtable_execution::egress::EgressOptions;
use roundtable_execution::{ExecutionConfig, ExecutionManager};
use roundtable_reconcilers::ExecutionRequest;
use roundtable_session_runtime::{
    Health, OutputStream, OwnedResource, RunEnd, RunOutcome, RuntimeError, SessionPlan, SessionRuntime,
};
use roundtable_specs::session::{ProposalFlagKind, SessionCause, SessionPhase};
use roundtable_specs::{Spec, parse_file};
use roundtable_store::audit::AuditKey;
use roundtable_store::{SessionRecord, Store};
use tokio::sync::watch;

/// What the fake agent does.
#[derive(Debug, Clone)]
enum Agent {
    /// Copies the source to the export, applies `edits` (path, content), exits 0.
    Edits(Vec<(&'static str, &'static str)>),
    /// Exits with this code, changing nothing.
    Exits(i64),
    /// The engine goes away mid-run.
    EngineLost,
    /// Runs until stopped; then reports the cancel, as the real runtime does.
    RunsUntilStopped,
    /// Runs past its timeout, as the real runtime reports it.
    TimesOut,
    /// A provider CLI: presents its capability on the session's MCP socket (recording the
    /// endpoint's answer), edits README.md and prints Codex's JSON lines.
    Codex,
    /// Prints the value of the injected `ACME_API_KEY` on both streams (stdout cut at a limit
    /// inside a second copy), appends it to README.md and writes it into a binary file.
    Leaks,
}

const README: &str = "README.md";

/// A session runtime that acts out `agent` and records what it was asked.
struct FakeRuntime {
    agent: Agent,
    running: AtomicUsize,
    removed: Mutex<Vec<String>>,
    plans: Mutex<Vec<SessionPlan>>,
    /// What the MCP endpoint answered the capability, per run.
    answers: Mutex<Vec<String>>,
    /// When set, the agent claims README.md for an hour in this store before it does anything
    /// else, as an agent calling `claims.acquire` would.
    claims_in: Option<Store>,
}

impl FakeRuntime {
    fn new(agent: Agent) -> Arc<Self> {
        Arc::new(Self {
            agent,
            running: AtomicUsize::new(0),
            removed: Mutex::default(),
            plans: Mutex::default(),
            answers: Mutex::default(),
            claims_in: None,
        })
    }

    /// Acts out `agent` after claiming README.md for an hour in `store`.
    fn claiming(agent: Agent, store: &Store) -> Arc<Self> {
        let mut runtime = Arc::into_inner(Self::new(agent)).expect("only handle");
        runtime.claims_in = Some(store.clone());
        Arc::new(runtime)
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

impl SessionRuntime for FakeRuntime {
    fn endpoint(&self) -> &str {
        "fake"
    }

    fn run(
        &self,
        plan: SessionPlan,
        mut stop: watch::Receiver<bool>,
    ) -> BoxFuture<'_, Result<RunOutcome, RuntimeError>> {
        Box::pin(async move {
            self.plans.lock().expect("lock").push(plan.clone());
            if let Some(store) = &self.claims_in {
                let hour = roundtable_store::later(Duration::from_secs(3600));
                let assignment = plan.ownership.assignment.clone().unwrap_or_default();
                let claimed = store.acquire_claims(&assignment, &plan.session, &[README.into()], &hour).await;
                assert_eq!(claimed.expect("claim").granted, [README]);
            }
            self.running.fetch_add(1, Ordering::SeqCst);
            let outcome = match &self.agent {
                Agent::Leaks => {
                    let key = plan
                        .env
                        .iter()
                        .find_map(|v| v.strip_prefix("ACME_API_KEY="))
                        .expect("the credential is injected")
                        .to_owned();
                    copy_tree(&plan.source_dir, &plan.export_dir);
                    std::fs::write(plan.export_dir.join("README.md"), format!("# Project\nkey={key}\n")).expect("edit");
                    std::fs::write(
                        plan.export_dir.join("docs/blob.bin"),
                        [b"\0\x01".as_slice(), key.as_bytes()].concat(),
                    )
                    .expect("binary");
                    let (mut stdout, mut stderr) =
                        (roundtable_session_runtime::Captured::default(), Default::default());
                    let printed = format!("key={key}\nagain {key}\n");
                    stdout.push(printed.as_bytes(), (printed.len() - 10) as u64);
                    roundtable_session_runtime::Captured::push(
                        &mut stderr,
                        format!("error: {key} refused").as_bytes(),
                        1 << 20,
                    );
                    Ok(RunOutcome { exit_code: Some(0), stdout, stderr, ..RunOutcome::ended(RunEnd::Exited) })
                }
                Agent::Edits(edits) => {
                    copy_tree(&plan.source_dir, &plan.export_dir);
                    for (path, content) in edits {
                        let target = plan.export_dir.join(path);
                        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
                        std::fs::write(target, content).expect("edit");
                    }
                    Ok(RunOutcome { exit_code: Some(0), ..RunOutcome::ended(RunEnd::Exited) })
                }
                Agent::Exits(code) => {
                    copy_tree(&plan.source_dir, &plan.export_dir);
                    Ok(RunOutcome { exit_code: Some(*code), ..RunOutcome::ended(RunEnd::Exited) })
                }
                Agent::EngineLost => {
                    // The agent printed 20 lines, its credential among them, before the engine went.
                    let key = plan.env.iter().find_map(|v| v.strip_prefix("ACME_API_KEY=")).unwrap_or("no-key");
                    if let Some(live) = &plan.live {
                        for line in 1..=20 {
                            live(OutputStream::Stdout, format!("line {line} key={key}\n").as_bytes());
                        }
                        live(OutputStream::Stderr, b"warning: slow\n");
                        // The engine goes in the middle of the value.
                        live(OutputStream::Stdout, &key.as_bytes()[..key.len() - 4]);
                    }
                    Err(RuntimeError::EngineLost {
                        endpoint: "unix:///fake.sock".into(),
                        step: "wait for the exec to finish",
                        source: "connection reset by peer".into(),
                    })
                }
                Agent::RunsUntilStopped => {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                    Ok(RunOutcome::ended(RunEnd::Cancelled))
                }
                Agent::TimesOut => Ok(RunOutcome::ended(RunEnd::TimedOut)),
                Agent::Codex => {
                    let answer = present_capability(&plan).await;
                    self.answers.lock().expect("lock").push(answer);
                    copy_tree(&plan.source_dir, &plan.export_dir);
                    std::fs::write(plan.export_dir.join("README.md"), "# Project\nEdited by codex.\n").expect("edit");
                    let mut stdout = roundtable_session_runtime::Captured::default();
                    let lines = "{\"type\":\"thread.started\",\"thread_id\":\"0199a213-81c0-7800-8aa1-bbab2a035a53\"}\n\
                                 {\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"cached_input_tokens\":2,\"output_tokens\":5}}\n";
                    stdout.push(lines.as_bytes(), 1 << 20);
                    Ok(RunOutcome { exit_code: Some(0), stdout, ..RunOutcome::ended(RunEnd::Exited) })
                }
            };
            self.running.fetch_sub(1, Ordering::SeqCst);
            outcome
        })
    }

    fn owned(&self, _project: &str) -> BoxFuture<'_, Result<Vec<OwnedResource>, RuntimeError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn remove(&self, _resource: &OwnedResource) -> BoxFuture<'_, Result<(), RuntimeError>> {
        Box::pin(async { Ok(()) })
    }

    fn remove_session(&self, _project: &str, session: &str) -> BoxFuture<'_, Result<(), RuntimeError>> {
        self.removed.lock().expect("lock").push(session.to_owned());
        Box::pin(async { Ok(()) })
    }

    fn inspect_image(
        &self,
        _reference: &str,
    ) -> BoxFuture<'_, Result<Option<roundtable_session_runtime::ImageDetails>, RuntimeError>> {
        let id = format!("sha256:{}", "0".repeat(64));
        Box::pin(async { Ok(Some(roundtable_session_runtime::ImageDetails { id, repo_digests: Vec::new() })) })
    }

    fn health(&self) -> BoxFuture<'_, Result<Health, RuntimeError>> {
        Box::pin(async { Ok(Health { endpoint: "fake".into(), version: "0".into() }) })
    }

    fn probe(
        &self,
        _plan: roundtable_session_runtime::ProbePlan,
    ) -> BoxFuture<'_, Result<roundtable_session_runtime::ProbeOutcome, RuntimeError>> {
        Box::pin(async { Err(RuntimeError::Unavailable { reason: "the fake runtime runs no probes".into() }) })
    }
}

/// Connects to the session's MCP socket with the capability from the agent's environment; the
/// endpoint's first answer line (empty when it closed the connection).
async fn present_capability(plan: &SessionPlan) -> String {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let token = plan.env.iter().find_map(|v| v.strip_prefix("ROUNDTABLE_AGENT_CAPABILITY=")).unwrap_or_default();
    let socket = plan.socket_dir.as_ref().expect("a socket dir").join("mcp.sock");
    let Ok(stream) = tokio::net::UnixStream::connect(&socket).await else { return "no socket".into() };
    let (read, mut write) = stream.into_split();
    let line = format!("{{\"roundtable_auth\":\"{token}\"}}\n");
    write.write_all(line.as_bytes()).await.expect("auth line");
    let mut answer = String::new();
    let _ = tokio::io::BufReader::new(read).read_line(&mut answer).await;
    answer.trim().to_owned()
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?}");
}

/// A project: a git repository with README.md and docs/guide.md committed on `main`, the state
/// store, and folders for executions, proposals and sockets.
struct Project {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    store: Store,
}

impl Project {
    async fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("project");
        std::fs::create_dir_all(root.join("docs")).expect("mkdir");
        std::fs::write(root.join("README.md"), "# Project\n").expect("write");
        std::fs::write(root.join("docs/guide.md"), "guide\n").expect("write");
        git(&root, &["init", "-q", "-b", "main"]);
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-q", "-m", "base"]);
        let store = Store::open(&dir.path().join("state")).await.expect("store");
        Self { root, store, _dir: dir }
    }

    fn config(&self) -> ExecutionConfig {
        let base = self.root.parent().expect("parent");
        let state_dir = base.join("state");
        ExecutionConfig {
            max_executions: 2,
            project: roundtable_source::Project {
                spec_dir: self.root.join(".roundtable"),
                root: self.root.clone(),
                id: "p".into(),
                store: roundtable_store::StoreUrl::in_state_dir(&state_dir),
                state_dir,
                repos: roundtable_source::Repos::Root,
            },
            execution_root: base.join("executions"),
            binary: base.join("roundtable"),
            controller_run: "run-1".into(),
            socket_root: base.join("sockets"),
            secrets: HashMap::new(),
            egress: EgressOptions::default(),
            audit_key: Some(Arc::new({
                let path = base.join("keys/audit.key");
                let key = if path.exists() { AuditKey::load(&path) } else { AuditKey::create(&path) };
                key.expect("audit key")
            })),
            gates: false,
            lease_ttl: std::time::Duration::from_secs(15),
        }
    }

    fn manager_key(&self) -> AuditKey {
        let base = self.root.parent().expect("parent");
        AuditKey::load(&base.join("keys/audit.key")).expect("audit key")
    }

    fn manager(&self, runtime: Arc<FakeRuntime>) -> ExecutionManager {
        ExecutionManager::new(self.store.clone(), runtime, self.config())
    }
}

fn request(readable: &str) -> ExecutionRequest {
    let text = format!(
        "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata: {{name: fix}}\nspec:\n  adapter: generic\n  task: {{id: T, prompt: edit}}\n  readablePaths: [{readable}]\n"
    );
    let Spec::Assignment(spec) = parse_file("a.yaml", "a.yaml", &text).objects.remove(0).spec else {
        unreachable!("an Assignment")
    };
    let adapter_text = "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: generic}\nspec: {image: 'sha256:0000000000000000000000000000000000000000000000000000000000000000'}\n";
    let Spec::Adapter(adapter) = parse_file("b.yaml", "b.yaml", adapter_text).objects.remove(0).spec else {
        unreachable!("an Adapter")
    };
    // The tests' object uid is its name: the store calls below read by uid.
    ExecutionRequest::new(
        roundtable_store::Identity { name: "fix".into(), uid: "fix".into() },
        1,
        1,
        spec,
        roundtable_specs::catalog::resolve_declared("generic", &adapter),
        None,
    )
}

/// Waits (up to 10 s) until the session has finished.
async fn finished(store: &Store, id: &str) -> SessionRecord {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let session = store.session(id).await.expect("read").expect("recorded");
        if session.phase.is_finished() {
            return session;
        }
        assert!(tokio::time::Instant::now() < deadline, "still {}: {}", session.phase, session.message);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn until_running(runtime: &FakeRuntime) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while runtime.running.load(Ordering::SeqCst) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the session never reached the runtime");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_agent_that_edits_ends_as_a_flagged_pending_proposal() {
    let project = Project::new().await;
    let runtime = FakeRuntime::new(Agent::Edits(vec![
        ("README.md", "# Project\nEdited.\n"),
        (".github/workflows/ci.yml", "on: push\n"),
    ]));
    let manager = project.manager(runtime.clone());
    let queued = manager.start(request("README.md")).await.expect("start");
    assert_eq!(queued.phase, SessionPhase::Queued);
    let session = finished(&project.store, &queued.id).await;
    assert_eq!(session.phase, SessionPhase::Succeeded, "{}", session.message);
    assert!(session.message.starts_with("pending proposal "), "{}", session.message);
    assert_eq!(session.detail.manifest.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["README.md"]);
    assert!(session.detail.timings_ms.contains_key("provision") && session.detail.timings_ms.contains_key("patch"));

    let proposal = project.store.proposal_for("fix", 1).await.expect("read").expect("a proposal");
    let flags: Vec<(ProposalFlagKind, &str)> = proposal.flags.iter().map(|f| (f.kind, f.path.as_str())).collect();
    assert_eq!(
        flags,
        [
            (ProposalFlagKind::OutsideReadablePaths, ".github/workflows/ci.yml"),
            (ProposalFlagKind::ProtectedPath, ".github/workflows/ci.yml")
        ]
    );
    let patch = std::fs::read_to_string(&proposal.patch_path).expect("patch");
    assert!(patch.contains("+Edited.") && patch.contains("+on: push"), "{patch}");

    // The runtime got a plan it can carry out without knowing the controller's types.
    let plans = runtime.plans.lock().expect("lock");
    let plan = &plans[0];
    assert_eq!(plan.session, queued.id);
    assert_eq!(plan.argv.last().map(String::as_str), Some("edit"), "the prompt is the last argument");
    assert!(plan.env.iter().all(|v| !v.starts_with("HTTPS_PROXY")), "no provider hosts, no proxy");
    assert_eq!(plan.ownership.labels().get("roundtable.dev/assignment").map(String::as_str), Some("fix"));
}

#[tokio::test]
async fn a_failing_agent_and_a_lost_engine_end_the_session_as_users_expect() {
    let project = Project::new().await;
    let manager = project.manager(FakeRuntime::new(Agent::Exits(3)));
    let id = manager.start(request("README.md")).await.expect("start").id;
    let session = finished(&project.store, &id).await;
    assert_eq!((session.phase, session.cause), (SessionPhase::Failed, Some(SessionCause::Exited)));
    assert_eq!(session.exit_code, Some(3));
    assert_eq!(session.message, "the agent exited with code 3");
    assert!(project.store.proposal_for("fix", 1).await.expect("read").is_none(), "a failure proposes nothing");

    let project = Project::new().await;
    let mut config = project.config();
    config.secrets.insert("ACME_API_KEY".into(), "acme-live-7f3a9c2e5b1d4068".into());
    let manager = ExecutionManager::new(project.store.clone(), FakeRuntime::new(Agent::EngineLost), config);
    let mut holding = request("README.md");
    holding.adapter.credential_env = vec!["ACME_API_KEY".parse().expect("a name")];
    holding.adapter.credential_mode = roundtable_specs::adapter::CredentialMode::Env;
    let id = manager.start(holding).await.expect("start").id;
    let session = finished(&project.store, &id).await;
    assert_eq!((session.phase, session.cause), (SessionPhase::Interrupted, Some(SessionCause::EngineLost)));
    assert!(session.message.contains("went away during `wait for the exec to finish`"), "{}", session.message);
    assert!(session.message.contains("connection reset by peer"), "the cause is kept: {}", session.message);
    // What the agent printed before the engine went is kept, masked as any kept output is.
    assert!(session.message.contains(&format!("sessions logs {id}")), "{}", session.message);
    let folder = std::path::Path::new(session.exec_dir.as_deref().expect("a folder"));
    let printed = std::fs::read_to_string(folder.join("stdout.log")).expect("the output so far is kept");
    assert_eq!(printed.lines().count(), 21, "{printed}");
    assert!(!printed.contains("acme-live-7f3a9c2e5b1d"), "a value cut short by the lost run is masked: {printed}");
    assert!(printed.contains("line 20 key=[redacted:ACME_API_KEY]"), "{printed}");
    assert!(!printed.contains("acme-live"), "the credential is masked: {printed}");
    assert!(session.stdout_bytes.is_some_and(|n| n >= printed.len() as i64), "{:?}", session.stdout_bytes);
    assert!(std::fs::read_to_string(folder.join("stderr.log")).expect("stderr").contains("slow"));
}

#[tokio::test]
async fn a_readable_path_that_matches_nothing_fails_before_the_runtime_is_asked() {
    let project = Project::new().await;
    let runtime = FakeRuntime::new(Agent::Exits(0));
    let manager = project.manager(runtime.clone());
    let id = manager.start(request("missing.md")).await.expect("start").id;
    let session = finished(&project.store, &id).await;
    assert_eq!((session.phase, session.cause), (SessionPhase::Failed, Some(SessionCause::ProvisionFailed)));
    assert!(session.message.contains("\"missing.md\" matches nothing"), "{}", session.message);
    assert!(runtime.plans.lock().expect("lock").is_empty(), "nothing was started");
}

#[tokio::test]
async fn a_cancel_is_recorded_cancelled_and_shutdown_interrupts_after_the_grace() {
    // suspend: Cancelled.
    let project = Project::new().await;
    let runtime = FakeRuntime::new(Agent::RunsUntilStopped);
    let manager = project.manager(runtime.clone());
    let id = manager.start(request("README.md")).await.expect("start").id;
    until_running(&runtime).await;
    manager.cancel("fix");
    let session = finished(&project.store, &id).await;
    assert_eq!((session.phase, session.cause), (SessionPhase::Cancelled, Some(SessionCause::Cancelled)));

    // Shutdown: the grace runs out, the session is interrupted (re-run on the next start), and no
    // new execution is taken.
    let runtime = FakeRuntime::new(Agent::RunsUntilStopped);
    let manager = project.manager(runtime.clone());
    let mut request = request("README.md");
    request.execution_generation = 2;
    let id = manager.start(request.clone()).await.expect("start").id;
    until_running(&runtime).await;
    let summary = manager.shutdown(Duration::from_millis(100), std::future::pending()).await;
    assert_eq!((summary.finished, summary.interrupted), (0, 1));
    let session = project.store.session(&id).await.expect("read").expect("recorded");
    assert_eq!((session.phase, session.cause), (SessionPhase::Interrupted, Some(SessionCause::ControllerStopped)));
    assert!(session.message.contains("re-run on the next start"), "{}", session.message);
    assert!(manager.start(request).await.is_err(), "intake is closed");
}

#[tokio::test]
async fn shutdown_lets_an_execution_that_finishes_in_the_grace_finish() {
    let project = Project::new().await;
    let manager = project.manager(FakeRuntime::new(Agent::Edits(vec![("README.md", "changed\n")])));
    let id = manager.start(request("README.md")).await.expect("start").id;
    let summary = manager.shutdown(Duration::from_secs(10), std::future::pending()).await;
    assert_eq!(summary.interrupted, 0);
    let session = project.store.session(&id).await.expect("read").expect("recorded");
    assert_eq!(session.phase, SessionPhase::Succeeded, "{}", session.message);
}

#[tokio::test]
async fn a_second_signal_cuts_the_grace_short_but_still_records() {
    let project = Project::new().await;
    let runtime = FakeRuntime::new(Agent::RunsUntilStopped);
    let manager = project.manager(runtime.clone());
    let id = manager.start(request("README.md")).await.expect("start").id;
    until_running(&runtime).await;
    let started = tokio::time::Instant::now();
    let summary = manager.shutdown(Duration::from_secs(3600), std::future::ready(())).await;
    assert!(started.elapsed() < Duration::from_secs(10), "the hour of grace was cut short");
    assert_eq!(summary.interrupted, 1);
    let session = project.store.session(&id).await.expect("read").expect("recorded");
    assert_eq!(session.phase, SessionPhase::Interrupted);
}

#[tokio::test]
async fn interrupting_an_earlier_runs_session_removes_what_it_left_through_the_runtime() {
    let project = Project::new().await;
    let left = SessionRecord {
        id: "0123456789ab".into(),
        assignment: "fix".into(),
        controller_run: "an-earlier-run".into(),
        phase: SessionPhase::Running,
        ..SessionRecord::default()
    };
    project.store.save_session(&left).await.expect("save");
    let runtime = FakeRuntime::new(Agent::Exits(0));
    project.manager(runtime.clone()).interrupt(&left.id, None).await.expect("interrupt");
    assert_eq!(*runtime.removed.lock().expect("lock"), std::slice::from_ref(&left.id));
    let session = project.store.session(&left.id).await.expect("read").expect("recorded");
    assert_eq!((session.phase, session.cause), (SessionPhase::Interrupted, Some(SessionCause::ControllerRunEnded)));
    assert!(session.message.contains("an-earlier-run"), "{}", session.message);
}

/// On a shared store the session may have run on another host: only a folder under this
/// controller's execution root is removed, never a path the store names elsewhere.
#[tokio::test]
async fn interrupting_removes_only_folders_under_the_own_execution_root() {
    let project = Project::new().await;
    let runtime = FakeRuntime::new(Agent::Exits(0));
    let manager = project.manager(runtime.clone());
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let inside = manager.config().execution_root.join("0123456789ab");
    std::fs::create_dir_all(&inside).expect("mkdir");
    for (id, dir) in [("0123456789ab", inside.clone()), ("ba9876543210", elsewhere.path().to_owned())] {
        let left = SessionRecord {
            id: id.into(),
            assignment: "fix".into(),
            controller_run: "another-host".into(),
            phase: SessionPhase::Running,
            exec_dir: Some(dir.display().to_string()),
            ..SessionRecord::default()
        };
        project.store.save_session(&left).await.expect("save");
        manager.interrupt(id, None).await.expect("interrupt");
    }
    assert!(!inside.exists(), "its own folder is removed");
    assert!(elsewhere.path().exists(), "a folder outside the execution root is left alone");
}

#[tokio::test]
async fn a_run_replaced_by_a_newer_execution_generation_is_recorded_superseded() {
    let project = Project::new().await;
    let runtime = FakeRuntime::new(Agent::RunsUntilStopped);
    let manager = project.manager(runtime.clone());
    let id = manager.start(request("README.md")).await.expect("start").id;
    until_running(&runtime).await;
    assert_eq!(manager.active_run("fix").map(|run| run.generation), Some(1));
    manager.supersede("fix", 2);
    let session = finished(&project.store, &id).await;
    assert_eq!((session.phase, session.cause), (SessionPhase::Cancelled, Some(SessionCause::Superseded)));
    assert!(session.message.starts_with("superseded by execution generation 2"), "{}", session.message);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while manager.active_run("fix").is_some() {
        assert!(tokio::time::Instant::now() < deadline, "the superseded run let go of its slot");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_provider_session_gets_a_manifest_a_capability_and_an_endpoint_then_loses_them() {
    let project = Project::new().await;
    // Another live session holds README.md.
    running_claim(&project.store, "other-session", "other").await;
    let runtime = FakeRuntime::new(Agent::Codex);
    let manager = project.manager(runtime.clone());
    let queued = manager.start(codex_request()).await.expect("start");
    let session = finished(&project.store, &queued.id).await;
    assert_eq!(session.phase, SessionPhase::Succeeded, "{}", session.message);

    assert_eq!(runtime.answers.lock().expect("lock").as_slice(), ["{\"ok\":true}"], "the endpoint took the capability");
    assert_eq!(manager.live_capabilities(), 0, "revoked when the execution ended");
    assert_eq!(session.external_session_id.as_deref(), Some("0199a213-81c0-7800-8aa1-bbab2a035a53"));
    let agent = session.detail.agent.clone().expect("agent detail");
    assert_eq!(agent.provider, "codex");
    let usage = agent.usage.expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.cached_input_tokens), (10, 5, Some(2)));
    assert!(agent.env_names.contains(&"ROUNDTABLE_AGENT_CAPABILITY".to_owned()));

    let plan = runtime.plans.lock().expect("lock")[0].clone();
    assert_eq!(plan.stdin.as_deref(), Some(&b"edit"[..]), "the prompt goes on stdin");
    assert_eq!(plan.argv.last().map(String::as_str), Some("-"));
    let token = plan.env.iter().find_map(|v| v.strip_prefix("ROUNDTABLE_AGENT_CAPABILITY=")).expect("token");
    assert!(token.starts_with("rtcap_"));
    let manifest = plan.tmp_entries.iter().find(|e| e.path == "roundtable/codex/config.toml").expect("manifest");
    assert_eq!((manifest.owner, manifest.mode), (0, 0o444));
    for entry in &plan.tmp_entries {
        let text = String::from_utf8_lossy(entry.contents.as_deref().unwrap_or_default()).into_owned();
        assert!(!text.contains(token), "the token is in {}", entry.path);
    }
    let stored = serde_json::to_string(&session.detail).expect("json");
    assert!(!stored.contains(token) && !format!("{plan:?}").contains(token), "the token leaked into a record");

    let proposal = project.store.proposal_for("fix", 1).await.expect("read").expect("a proposal");
    let flags: Vec<(ProposalFlagKind, &str)> = proposal.flags.iter().map(|f| (f.kind, f.path.as_str())).collect();
    assert_eq!(flags, [(ProposalFlagKind::ClaimedElsewhere, "README.md")]);

    // The capability's life, the proposal and the session's end are in the audit chain, in order.
    // The session's row says finished just before its `session.ended` entry is appended.
    let key = project.manager_key();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let kinds = loop {
        let verified = project.store.verify_chain(&key, None, None).await.expect("read").expect("intact");
        let rows = project.store.chain(1, verified.head.map_or(0, |h| h.seq)).await.expect("chain");
        let kinds: Vec<String> = rows
            .iter()
            .filter_map(|row| serde_json::from_str::<serde_json::Value>(&row.entry).ok())
            .filter(|entry| {
                entry["subject"] == queued.id.as_str()
                    || entry["subject"] == format!("Proposal/{}", proposal.id).as_str()
            })
            .filter_map(|entry| entry["kind"].as_str().map(str::to_owned))
            .collect();
        if kinds.last().is_some_and(|kind| kind == "session.ended") || tokio::time::Instant::now() >= deadline {
            break kinds;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        kinds,
        ["session.started", "capability.issued", "capability.revoked", "proposal.submitted", "session.ended"]
    );
}

/// A session another controller run is running for `assignment`.
fn running_session(id: &str, assignment: &str) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        assignment: assignment.into(),
        controller_run: "another-run".into(),
        adapter: "generic".into(),
        phase: SessionPhase::Running,
        ..SessionRecord::default()
    }
}

/// Waits (up to 10 s) until the manager has let go of `assignment`'s execution: its session is
/// recorded and what it held released.
async fn until_idle(manager: &ExecutionManager, assignment: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while manager.is_active(assignment) {
        assert!(tokio::time::Instant::now() < deadline, "the execution never let go");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Records `id` as a running session of `assignment` that claims README.md for an hour.
async fn running_claim(store: &Store, id: &str, assignment: &str) -> roundtable_store::Claimed {
    store.save_session(&running_session(id, assignment)).await.expect("save");
    let hour = roundtable_store::later(Duration::from_secs(3600));
    store.acquire_claims(assignment, id, &[README.into()], &hour).await.expect("claim")
}

/// Whether another live session may claim README.md now: the holder of a refusal, if any.
async fn readme_held_by(store: &Store, other: &str) -> Option<String> {
    let claimed = running_claim(store, other, "other").await;
    store.release_claims(other, &[]).await.expect("release");
    claimed.refused.first().map(|(_, held)| held.session_id.clone())
}

/// Regression: a session that claimed README.md for an hour and ended kept blocking every other
/// session's claim, and flagging their proposals `claimedElsewhere`, for the rest of the hour.
/// However it ends, its claims are released when it is recorded.
#[tokio::test]
async fn a_session_lets_go_of_its_claims_when_it_ends_however_it_ends() {
    enum End {
        OnItsOwn,
        Cancel,
        Shutdown,
    }
    let cases = [
        (Agent::Exits(0), End::OnItsOwn, SessionPhase::Succeeded),
        (Agent::Exits(3), End::OnItsOwn, SessionPhase::Failed),
        (Agent::TimesOut, End::OnItsOwn, SessionPhase::Failed),
        (Agent::EngineLost, End::OnItsOwn, SessionPhase::Interrupted),
        (Agent::RunsUntilStopped, End::Cancel, SessionPhase::Cancelled),
        (Agent::RunsUntilStopped, End::Shutdown, SessionPhase::Interrupted),
    ];
    for (agent, end, phase) in cases {
        let project = Project::new().await;
        let runtime = FakeRuntime::claiming(agent.clone(), &project.store);
        let manager = project.manager(runtime.clone());
        let id = manager.start(request(README)).await.expect("start").id;
        if !matches!(end, End::OnItsOwn) {
            until_running(&runtime).await;
            assert_eq!(
                readme_held_by(&project.store, "probe").await.as_deref(),
                Some(id.as_str()),
                "held while it runs"
            );
        }
        match end {
            End::OnItsOwn => {}
            End::Cancel => manager.cancel("fix"),
            End::Shutdown => {
                manager.shutdown(Duration::from_millis(100), std::future::pending()).await;
            }
        }
        let session = finished(&project.store, &id).await;
        assert_eq!(session.phase, phase, "{agent:?}: {}", session.message);
        until_idle(&manager, "fix").await;
        let claims = project.store.claims_of("fix").await.expect("claims");
        assert_eq!(claims.len(), 1, "{agent:?}: it claimed README.md");
        assert!(claims.iter().all(|c| c.released_at.is_some()), "{agent:?}: released at its end: {claims:?}");
        assert_eq!(readme_held_by(&project.store, "other-session").await, None, "{agent:?}: README.md is free");
    }

    // And a later session's proposal touching README.md is not flagged.
    let project = Project::new().await;
    let manager = project.manager(FakeRuntime::claiming(Agent::Exits(0), &project.store));
    manager.start(request(README)).await.expect("start");
    until_idle(&manager, "fix").await;
    let manager = project.manager(FakeRuntime::new(Agent::Edits(vec![(README, "# Edited\n")])));
    let mut next = request(README);
    next.execution_generation = 2;
    let session = finished(&project.store, &manager.start(next).await.expect("start").id).await;
    assert_eq!(session.phase, SessionPhase::Succeeded, "{}", session.message);
    let proposal = project.store.proposal_for("fix", 2).await.expect("read").expect("a proposal");
    assert!(proposal.flags.iter().all(|f| f.kind != ProposalFlagKind::ClaimedElsewhere), "{:?}", proposal.flags);
}

/// Crash recovery: a session a dead controller left `Running` loses its claims when it is
/// recorded `Interrupted`.
#[tokio::test]
async fn interrupting_a_left_session_releases_its_claims() {
    let project = Project::new().await;
    let left = "0123456789ab";
    assert_eq!(running_claim(&project.store, left, "fix").await.granted, [README]);
    let manager = project.manager(FakeRuntime::new(Agent::Exits(0)));
    manager.interrupt(left, None).await.expect("interrupt");
    let claims = project.store.claims_of("fix").await.expect("claims");
    assert!(claims.iter().all(|c| c.released_at.is_some()), "{claims:?}");
    assert_eq!(readme_held_by(&project.store, "other-session").await, None);
}

/// A provider request: the built-in `codex` template on a pinned image, no egress.
fn codex_request() -> ExecutionRequest {
    let generic = request("README.md");
    let mut adapter = roundtable_specs::builtins::template("codex").expect("built-in").resolve("codex");
    adapter.image = Some(format!("sha256:{}", "0".repeat(64)).parse().expect("image"));
    adapter.provider_hosts.clear();
    let identity = roundtable_store::Identity { name: generic.assignment, uid: generic.assignment_uid };
    ExecutionRequest::new(identity, 1, 1, generic.spec, adapter, None)
}

#[tokio::test]
async fn a_cancelled_or_shut_down_session_loses_its_capability() {
    let project = Project::new().await;
    let runtime = FakeRuntime::new(Agent::RunsUntilStopped);
    let manager = project.manager(runtime.clone());
    let id = manager.start(codex_request()).await.expect("start").id;
    until_running(&runtime).await;
    assert_eq!(manager.live_capabilities(), 1, "issued for the running session");
    manager.cancel("fix");
    finished(&project.store, &id).await;
    assert_eq!(manager.live_capabilities(), 0, "revoked on cancel");

    let runtime = FakeRuntime::new(Agent::RunsUntilStopped);
    let manager = project.manager(runtime.clone());
    let mut request = codex_request();
    request.execution_generation = 2;
    manager.start(request).await.expect("start");
    until_running(&runtime).await;
    assert_eq!(manager.live_capabilities(), 1);
    manager.shutdown(Duration::from_millis(100), std::future::pending()).await;
    assert_eq!(manager.live_capabilities(), 0, "revoked at shutdown");
}

/// Issue 28, item 6: an agent that prints its credential and writes it into a file. The value is
/// masked before the logs are written, and the proposal (byte-faithful) is flagged, announced by
/// a Warning event and audited.
#[tokio::test]
async fn an_injected_credential_is_masked_in_the_logs_and_flags_the_proposal_that_adds_it() {
    const KEY: &str = "acme-live-7f3a9c2e5b1d4068";
    let project = Project::new().await;
    let mut config = project.config();
    config.secrets.insert("ACME_API_KEY".into(), KEY.into());
    let manager = ExecutionManager::new(project.store.clone(), FakeRuntime::new(Agent::Leaks), config);
    let mut leaking = request("README.md, docs/");
    leaking.adapter.credential_env = vec!["ACME_API_KEY".parse().expect("a name")];
    // The explicit opt-out: by default the agent would hold a placeholder, not the value.
    leaking.adapter.credential_mode = roundtable_specs::adapter::CredentialMode::Env;
    let queued = manager.start(leaking).await.expect("start");
    let session = finished(&project.store, &queued.id).await;
    assert_eq!(session.phase, SessionPhase::Succeeded, "{}", session.message);

    let exec_dir = std::path::PathBuf::from(session.exec_dir.clone().expect("an execution folder"));
    let stdout = std::fs::read_to_string(exec_dir.join("stdout.log")).expect("stdout.log");
    let stderr = std::fs::read_to_string(exec_dir.join("stderr.log")).expect("stderr.log");
    assert_eq!(stdout, "key=[redacted:ACME_API_KEY]\nagain [redacted:ACME_API_KEY]", "the cut copy too");
    assert_eq!(stderr, "error: [redacted:ACME_API_KEY] refused");
    assert!(session.stdout_truncated && !session.stderr_truncated);
    assert!(session.message.contains("credentialCanary: README.md"), "{}", session.message);

    let proposal = project.store.proposal_for("fix", 1).await.expect("read").expect("a proposal");
    let canaries: Vec<&str> = proposal
        .flags
        .iter()
        .filter(|f| f.kind == ProposalFlagKind::CredentialCanary)
        .map(|f| f.path.as_str())
        .collect();
    // What it printed is a canary too, beside the files.
    assert_eq!(canaries, ["README.md", "docs/blob.bin", "<stdout>", "<stderr>"]);
    let patch = std::fs::read_to_string(&proposal.patch_path).expect("patch");
    assert!(patch.contains(&format!("+key={KEY}")), "the patch stays byte-faithful: {patch}");

    let key = roundtable_specs::ObjectKey::new(roundtable_specs::Kind::Assignment, "fix");
    // Not a recorded object here: its events carry no uid; read them all, oldest first.
    let events: Vec<_> = project
        .store
        .recent_events(None, 50)
        .await
        .expect("events")
        .into_iter()
        .rev()
        .filter(|e| e.object == key.to_string())
        .collect();
    let warning = events.iter().find(|e| e.reason == "CredentialCanary").expect("a CredentialCanary event");
    assert_eq!(warning.severity, "Warning");
    assert!(warning.message.contains("ACME_API_KEY") && warning.message.contains("README.md"), "{}", warning.message);
    let chain = project.store.chain(1, i64::MAX).await.expect("chain");
    assert!(chain.iter().any(|row| row.entry.contains("proposal.credentialCanary")), "audited");
    for row in &chain {
        assert!(!row.entry.contains(KEY), "the chain holds the value: {}", row.entry);
    }
    project.store.verify_chain(&project.manager_key(), None, None).await.expect("read").expect("the chain verifies");
}
