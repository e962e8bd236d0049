//! One session on the engine, phase by phase, in the lifecycle order tmpfs volumes require:
//! launch (the volumes at once → the container → PID 1) → the self-check, which seeds the
//! workspace from the source mount once it passes (under gVisor the workspace is uploaded beside
//! it instead), while `/tmp/roundtable` is uploaded → the
//! egress proxy, when asked for → the checked process becomes the agent (captured, capped,
//! drained, timed) → pause → download and extract → force-remove the container and volumes.
//! Nothing runs on the host; cleanup happens on every path.

mod export;
mod oom;
mod proxy;
mod seed;

pub(crate) use proxy::{Relays, start_proxy};
pub(crate) use seed::seed_tmp;
use seed::{WorkspaceSeedError, seed_workspace};

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::KillContainerOptionsBuilder;
use roundtable_session_runtime::{Captured, RunEnd, RunOutcome, RuntimeError, SessionPlan};
use roundtable_specs::layout as paths;
use roundtable_specs::runtime_class::SandboxKernel;
use roundtable_specs::session::{CheckItem, CheckReport};
use tokio::sync::watch;
use tracing::Instrument as _;

use crate::calls::{Phases, counted, timed};
use crate::checked::Checked;
use crate::container::{
    self, container_name, create_hardened, create_tmpfs_volumes, home_volume_name, image_or_empty, volume_names,
};
use crate::engine::Engine;
use crate::errors::{engine_error, engine_gone_in};
use crate::exec::{ExecResult, drive};
use crate::profile::{self, SandboxSpec};
use crate::removals::Removals;

/// How often, and how long, an execution whose engine went away looks for it to come back
/// before cleaning up: long enough for a restart that stops its containers gracefully.
const ENGINE_POLL: Duration = Duration::from_millis(500);
const ENGINE_RETURN_WAIT: Duration = Duration::from_secs(120);

/// What is kept of what a run says about itself on stderr (a failed check, a proxy that did
/// not come up).
const SAID_CAP: u64 = 1 << 20;

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
    /// Where the removal goes once the outcome is handed back.
    removals: &'a Removals,
}

impl<'a> Execution<'a> {
    pub(crate) fn new(engine: &'a Engine, plan: SessionPlan, removals: &'a Removals) -> Self {
        let name = container_name(&plan.session);
        Self { engine, plan, name, removals }
    }

    /// Runs the whole lifecycle; the container and volumes are removed whatever happens, after
    /// the outcome is handed back: the removal (a container's kill and removal, then its
    /// volumes') is nothing the session waits for, and [`Removals::settled`] waits for it.
    /// A cancel stops the execution in whatever phase it is (an engine call in flight included):
    /// the container is then paused, killed and removed.
    /// When the engine went away mid-run, the error is [`RuntimeError::EngineLost`] and the
    /// cleanup waits (bounded) for the engine to answer again first, before this returns.
    ///
    /// The launch alone is not interrupted: a create dropped mid-call can still complete on the
    /// engine after the cleanup ran, leaving a container, and the named volumes its creation
    /// brings into being, behind. A cancel during the launch ends the run as soon as it is over.
    pub async fn run(&self, cancel: watch::Receiver<bool>) -> Result<RunOutcome, RuntimeError> {
        let mut watcher = cancel.clone();
        let (launched, launch_over) = watch::channel(false);
        let cancelled_after_launch = async {
            let mut launch_over = launch_over;
            // An error means the lifecycle is over, so the other branch has already won.
            let _ = launch_over.wait_for(|over| *over).await;
            cancelled(&mut watcher).await;
        };
        let calls = Arc::new(AtomicU32::new(0));
        let outcome = counted(&calls, async {
            tokio::select! {
                outcome = self.lifecycle(cancel, launched) => outcome,
                () = cancelled_after_launch => Ok(RunOutcome::ended(RunEnd::Cancelled)),
            }
        })
        .await;
        let mut outcome = outcome.map_err(|error| self.lost_or(error));
        if matches!(outcome, Err(RuntimeError::EngineLost { .. })) {
            self.await_engine(&mut watcher).await;
            self.cleanup().await;
            return outcome;
        }
        let (engine, session) = (self.engine.clone(), self.plan.session.clone());
        self.removals.spawn(async move { cleanup(&engine, &session).await });
        if let Ok(outcome) = &mut outcome {
            outcome.engine_calls = calls.load(Ordering::Relaxed);
        }
        outcome
    }

    /// An engine call that failed because the engine is gone becomes [`RuntimeError::EngineLost`].
    fn lost_or(&self, error: RuntimeError) -> RuntimeError {
        match error {
            RuntimeError::Engine { step, source } if engine_gone_in(&source) => {
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

    /// Removes the container and its volumes now (see [`cleanup`]).
    pub async fn cleanup(&self) {
        cleanup(self.engine, &self.plan.session).await;
    }

    /// The phases, each timed; the first that ends the run returns its outcome.
    /// `launched` turns `true` once the launch is over, whatever its result.
    async fn lifecycle(
        &self,
        mut cancel: watch::Receiver<bool>,
        launched: watch::Sender<bool>,
    ) -> Result<RunOutcome, RuntimeError> {
        let docker = self.engine.docker();
        if *cancel.borrow() {
            return Ok(RunOutcome::ended(RunEnd::Cancelled));
        }
        let mut phases = Phases::start(&self.name);
        // One span per phase (exported as traces when a collector is named).
        let launch = self.launch(docker).instrument(tracing::info_span!("launch")).await;
        launched.send_replace(true);
        launch?;
        let mut outcome = RunOutcome::ended(RunEnd::Exited);
        phases.lap(&mut outcome.timings, "launch");
        if *cancel.borrow() {
            outcome.end = RunEnd::Cancelled;
            return Ok(outcome);
        }

        let verdict = self.seed_and_check(docker, &mut cancel).instrument(tracing::info_span!("self_check")).await;
        phases.lap(&mut outcome.timings, "selfCheck");
        let checked = match verdict? {
            Verdict::Passed(checked) => checked,
            Verdict::Ended { end, stderr, report } => {
                outcome.end = end;
                outcome.stderr = stderr;
                outcome.self_check = report;
                return Ok(outcome);
            }
        };
        outcome.self_check = checked.report.clone();

        if self.plan.egress_proxy || self.plan.broker_relay {
            tracing::debug!(container = %self.name, "egress proxy");
            let relays = proxy::Relays { egress: self.plan.egress_proxy, broker: self.plan.broker_relay };
            let started = proxy::start_proxy(docker, &self.name, relays).instrument(tracing::info_span!("proxy")).await;
            if let Err(failure) = started {
                // The checked process waits for a go that never comes.
                let _ = checked.refuse(docker, &self.name, &mut cancel).await;
                outcome.end = RunEnd::EgressUnavailable;
                outcome.stderr.push(roundtable_telemetry::error_chain(&failure).as_bytes(), SAID_CAP);
                return Ok(outcome);
            }
            phases.lap(&mut outcome.timings, "proxy");
        }

        // The engine's OOM events are read afterwards for the agent's whole run (since → until),
        // so none is missed by subscribing late.
        let agent_started = oom::unix_seconds();
        let agent = self.run_agent(docker, checked, &mut cancel).instrument(tracing::info_span!("agent")).await?;
        phases.lap(&mut outcome.timings, "agent");
        outcome.stdout = agent.stdout;
        outcome.stderr = agent.stderr;
        outcome.exit_code = agent.exit_code;
        if let Some(cause) = agent.interrupted {
            outcome.end = cause;
            self.halt(docker).await;
            return Ok(outcome);
        }
        // The events of the agent's run are all in by now: asked while the export runs, not
        // before it, as neither waits for the other.
        let oom = timed(&self.name, "events (oom)", oom::oom_seen(docker, &self.name, agent_started.saturating_sub(1)));
        let (oom, exported) =
            tokio::join!(oom, self.pause_and_export(docker, &mut outcome).instrument(tracing::info_span!("export")));
        exported?;
        if oom {
            outcome.end = RunEnd::OutOfMemory;
        }
        phases.lap(&mut outcome.timings, "export");
        Ok(outcome)
    }

    /// Launch: the session's two tmpfs volumes (at once: independent of each other, both before
    /// the container that mounts them), the persistent home, the container from the hardened
    /// profile, and its PID 1.
    async fn launch(&self, docker: &Docker) -> Result<(), RuntimeError> {
        let (plan, name) = (&self.plan, &self.name);
        let [workspace_volume, tmp_volume] = volume_names(&plan.session);
        let mut spec = SandboxSpec {
            image: String::new(),
            labels: plan.ownership.labels(),
            resources: plan.resources,
            workspace_volume,
            tmp_volume,
            binary: plan.binary.clone(),
            source_dir: Some(plan.source_dir.clone()),
            task_file: Some(plan.task_file.clone()),
            socket_dir: plan.socket_dir.clone(),
            home_volume: None,
            runtime: plan.expected.runtime.as_ref().map(|r| r.class.clone()),
        };
        // The image, the volumes and the home do not depend on one another; the container
        // depends on all of them.
        let (image, (), home) = futures::try_join!(
            image_or_empty(docker, plan.image.as_deref()),
            create_tmpfs_volumes(docker, name, &spec),
            self.create_home(docker),
        )?;
        (spec.image, spec.home_volume) = (image, home);
        tracing::debug!(container = %name, "creating the container");
        create_hardened(docker, name, &spec).await?;
        container::start(docker, name).await
    }

    /// The plan's persistent home, when it has one: its volume and where it is mounted.
    /// Creating an existing volume returns it: the home of earlier sessions. Its labels are
    /// decided with the others' ([`Ownership::home_labels`](roundtable_session_runtime::Ownership::home_labels)).
    async fn create_home(&self, docker: &Docker) -> Result<Option<(String, String)>, RuntimeError> {
        let Some(home) = &self.plan.persistent_home else {
            return Ok(None);
        };
        let home_labels = self.plan.ownership.home_labels(&home.repository);
        let volume = home_volume_name(&home.key);
        timed(&self.name, "create volume (home)", docker.create_volume(profile::home_volume(&volume, home_labels)))
            .await
            .map_err(engine_error("create the persistent home volume"))?;
        Ok(Some((volume, home.target.clone())))
    }

    /// Whether the session runs under gVisor, whose file proxy makes a copy inside slow and which
    /// cannot kill a paused sandbox.
    fn under_gvisor(&self) -> bool {
        self.plan.expected.runtime.as_ref().is_some_and(|r| r.kernel == SandboxKernel::Gvisor)
    }

    /// The `/tmp` seed and the self-check do not depend on each other, so they run at once; the
    /// agent starts only after both. A seed that failed fails the session, as it did when it came
    /// first; a checked process waiting for its go never gets it.
    ///
    /// The workspace is seeded by the check inside, once every item passed, as the agent's user;
    /// under gVisor, where that copy goes file by file through the sandbox's file proxy (30 s for
    /// 10,000 files where runc takes 0.5 s), it is uploaded from outside at the same time instead,
    /// owned by the agent's user with the same modes, and the check reports on it
    /// (`workspaceSeed`) the same way: a seed that failed fails the check.
    async fn seed_and_check(
        &self,
        docker: &Docker,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<Verdict, RuntimeError> {
        tracing::debug!(container = %self.name, "seeding and self-check");
        let from_outside = self.under_gvisor();
        // The engine holds the container while it extracts an upload, so an exec asked for
        // meanwhile waits for the upload to end: the check starts first, and the uploads go in
        // while it runs. (Nothing it checks is under `/tmp/roundtable` or in the workspace.)
        let (check_started, check_running) = tokio::sync::oneshot::channel::<()>();
        let check_started = move || {
            let _ = check_started.send(());
        };
        let uploads = async {
            // Also when the check could not start: then its error ends the run anyway.
            let _ = check_running.await;
            let workspace = async {
                if !from_outside {
                    return None;
                }
                let owner = (self.plan.expected.uid, self.plan.expected.gid);
                Some(seed_workspace(docker, &self.name, &self.plan.source_dir, owner).await)
            };
            tokio::join!(seed::seed_tmp(docker, &self.name, &self.plan.tmp_entries), workspace)
        };
        let ((seeded, workspace), verdict) =
            tokio::join!(uploads, self.self_check(docker, !from_outside, check_started, cancel));
        seeded?;
        let (workspace, mut checked) = match (workspace, verdict?) {
            (Some(workspace), Verdict::Passed(checked)) => (workspace, checked),
            // Seeded inside, or the check already ended the run.
            (_, verdict) => return Ok(verdict),
        };
        let item = match workspace {
            Ok(seeded) => seed_item(
                true,
                format!(
                    "{} files, {} bytes from {} into {} (uploaded)",
                    seeded.files,
                    seeded.bytes,
                    paths::SOURCE,
                    paths::WORKSPACE
                ),
            ),
            Err(WorkspaceSeedError::Engine(error)) => return Err(error),
            Err(failed) => seed_item(false, failed.to_string()),
        };
        let ok = item.ok;
        let mut report = checked.report.take().unwrap_or(CheckReport { ok: false, items: Vec::new() });
        report.ok &= ok;
        report.items.push(item);
        if ok {
            checked.report = Some(report);
            return Ok(Verdict::Passed(checked));
        }
        let refused = checked.refuse(docker, &self.name, cancel).await?;
        let mut stderr = refused.stderr;
        for failure in report.failures() {
            let said = format!("sandbox check failed: {}: {}\n", failure.name, failure.detail);
            stderr.push(said.as_bytes(), SAID_CAP);
        }
        Ok(Verdict::Ended { end: RunEnd::SelfCheckFailed, stderr, report: Some(report) })
    }

    /// Starts the self-check, which is also the agent's exec: the check prints its report and
    /// waits; it becomes the agent only once the report has been read and verified here (see
    /// [`Checked`]). Any mismatch, or no report, fails closed and the agent never runs.
    /// With `seed_workspace`, the check copies the read-only source mount into the workspace,
    /// as the agent's user, once every item passed.
    /// `started` is called once the first check runs.
    async fn self_check(
        &self,
        docker: &Docker,
        seed_workspace: bool,
        started: impl FnOnce(),
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<Verdict, RuntimeError> {
        let (plan, name) = (&self.plan, &self.name);
        let check_argv = crate::checked::check_argv(&plan.expected, seed_workspace);
        let cancelled = || Verdict::Ended { end: RunEnd::Cancelled, stderr: Captured::default(), report: None };
        // A check that says what failed fails at once. One that printed no report at all (an
        // engine that lost the exec's output under load) runs once more; it is read-only, and the
        // second answer decides, still failing closed.
        let mut attempt = 1;
        let mut started = Some(started);
        loop {
            let on_start = started.take();
            let on_start = move || on_start.into_iter().for_each(|started| started());
            let checked =
                Checked::start(docker, name, &check_argv, &plan.argv, plan.env.clone(), on_start, cancel).await?;
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
                    stderr.push(said.as_bytes(), SAID_CAP);
                }
                return Ok(Verdict::Ended { end: RunEnd::SelfCheckFailed, stderr, report });
            }
            tracing::warn!(container = %name, exit_code = ?refused.exit_code, stderr = %String::from_utf8_lossy(&refused.stderr.bytes).trim(), "the self-check printed no report; running it once more");
            attempt += 1;
        }
    }

    /// The agent: the checked process gets its go and stdin, and is captured until it exits,
    /// times out or is cancelled.
    async fn run_agent(
        &self,
        docker: &Docker,
        checked: Checked,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<ExecResult, RuntimeError> {
        tracing::debug!(container = %self.name, "agent");
        let (exec_id, output) = checked.go(self.plan.stdin.clone());
        let (cap, deadline) = (self.plan.output_limit, Some(self.plan.timeout));
        let result = ExecResult::empty().with_live(self.plan.live.clone());
        drive(docker, &self.name, &exec_id, output, result, cap, deadline, cancel).await
    }

    /// After a timeout or a cancel: pause first so nothing keeps running, then kill. Under gVisor
    /// the kill comes alone: it cannot kill a paused sandbox, and killing PID 1 ends every
    /// process of the container at once under any runtime.
    async fn halt(&self, docker: &Docker) {
        let name = &self.name;
        if !self.under_gvisor() {
            let _ = timed(name, "pause (halt)", docker.pause_container(name)).await;
        }
        let kill = docker.kill_container(name, Some(KillContainerOptionsBuilder::default().signal("KILL").build()));
        let _ = timed(name, "kill", kill).await;
    }

    /// Pause so surviving children cannot race the export, then stream the workspace out. A lost
    /// engine is the session's end, not the export's; any other failure leaves the agent's exit
    /// code and output on the outcome and says why there is no proposal.
    async fn pause_and_export(&self, docker: &Docker, outcome: &mut RunOutcome) -> Result<(), RuntimeError> {
        let (plan, name) = (&self.plan, &self.name);
        export::pause_for_export(docker, name).await.map_err(engine_error("pause before export"))?;
        outcome.paused_for_export = true;
        match timed(name, "download + extract", export::export(docker, name, &plan.export_dir, plan.export_limits))
            .await
        {
            Ok(mut extracted) => {
                // The export is taken; the container runs again only to be looked at from
                // inside, and what its lingering processes change from now on is not the
                // export's (the inventory tells it by when each entry changed).
                let thawed_at = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| i128::try_from(since.as_nanos()).unwrap_or(i128::MAX));
                timed(name, "unpause", docker.unpause_container(name))
                    .await
                    .map_err(engine_error("unpause for the inventory"))?;
                let checked = match crate::calls::lasted(name, "inventory", export::inventory(docker, name)).await {
                    Ok(inventory) => export::account(&mut extracted, &plan.export_dir, &inventory, thawed_at),
                    Err(why) => Err(why),
                };
                match checked {
                    Ok(()) => outcome.extracted = Some(extracted),
                    // An export that cannot be shown whole proposes nothing.
                    Err(why) => outcome.export_failed = Some(why),
                }
            }
            Err(RuntimeError::Engine { step, source }) if engine_gone_in(&source) => {
                return Err(RuntimeError::Engine { step, source });
            }
            Err(error) => outcome.export_failed = Some(roundtable_telemetry::error_chain(&error)),
        }
        Ok(())
    }
}

/// Removes session `session`'s container and its volumes (see [`container::remove_session`]);
/// what cannot be removed is said and left, labelled, for garbage collection.
async fn cleanup(engine: &Engine, session: &str) {
    if let Err(error) = container::remove_session(engine.docker(), session).await {
        let error = roundtable_telemetry::error_chain(&error);
        let container = container_name(session);
        tracing::error!(%container, %error, "removing the container or its volumes failed; what is left carries the ownership labels for garbage collection");
    }
}

/// The report's `workspaceSeed` item for a workspace uploaded from outside, named as the check
/// names its own.
fn seed_item(ok: bool, detail: String) -> CheckItem {
    CheckItem { name: "workspaceSeed".into(), ok, detail }
}
