//! One session, phase by phase, as [`Inner::phases`] lists them: admit → announce → provision →
//! reuse → plan the launch → launch (sidecars and the sandbox) → keep what came back → propose.
//! Each phase hands the next what it needs, or the [`Ending`] that ends the session there; the
//! decisions are pure functions in `outcome`, each phase's work in its own file.

use roundtable_reconcilers::ExecutionRequest;
use roundtable_specs::audit::{EgressSummary, SessionStarted};
use roundtable_specs::session::{SessionCause, SessionPhase};
use roundtable_store::SessionRecord;
use tokio::sync::watch;
use tracing::Instrument as _;

use crate::folder::ExecutionFolder;
use crate::launch::Launched;
use crate::manager::{Inner, now};
use crate::outcome::{Ending, Stop, ending_of, mask_captured, masked};
use crate::plan::LaunchPlan;
use crate::proposal::{Canary, printed_canaries};
use crate::record::{record_output, record_run};

impl Inner {
    /// Runs one session to its end and records it.
    pub(crate) async fn execute(
        &self,
        mut session: SessionRecord,
        request: ExecutionRequest,
        cancel: watch::Receiver<bool>,
    ) -> SessionRecord {
        match self.phases(&mut session, &request, cancel).await {
            Ok(()) => {
                self.save(&session).await;
                self.audit_end(&session).await;
                session
            }
            Err(ending) => self.end(session, ending).await,
        }
    }

    /// The phases of one session, in order.
    async fn phases(
        &self,
        session: &mut SessionRecord,
        request: &ExecutionRequest,
        cancel: watch::Receiver<bool>,
    ) -> Result<(), Ending> {
        self.unless_stopped(session, &cancel)?;
        self.admit(session, request).await?;
        let folder = self.announce(session, request).await;
        let source = self.provision(session, request, &folder).instrument(tracing::info_span!("provision")).await?;
        if self.reuse(session, request).await {
            return Ok(());
        }
        let planned = self.plan_launch(session, request).await?;
        // The sidecars and the container's phases, under one span.
        let launched = self
            .launch(session, request, &source, &planned, &folder, cancel)
            .instrument(tracing::info_span!("sandbox"))
            .await;
        let printed = self.keep_launch(session, request, &planned, &folder, launched).await?;
        self.propose(session, request, &source, &folder, &planned.known, printed)
            .instrument(tracing::info_span!("patch"))
            .await
    }

    /// A session stopped before it began ends as its stop says, having done nothing.
    fn unless_stopped(&self, session: &SessionRecord, cancel: &watch::Receiver<bool>) -> Result<(), Ending> {
        match *cancel.borrow() {
            true => Err(self.stop_of(&session.id).unwrap_or(Stop::Cancelled).ending(false)),
            false => Ok(()),
        }
    }

    /// The session becomes `Running`, and the gates decide before anything of it exists: a
    /// refusal under `enforce` leaves no folder, socket or container behind.
    async fn admit(&self, session: &mut SessionRecord, request: &ExecutionRequest) -> Result<(), Ending> {
        session.phase = SessionPhase::Running;
        session.started_at = Some(now());
        let Some(admitter) = &self.admitter else { return Ok(()) };
        session.message = "admission".into();
        let policy = admitter.policy().await;
        let outcome = admitter.gate(&request.adapter, &request.spec.requires, &policy, &session.id).await;
        session.detail.admission = outcome.decisions.clone();
        session.detail.runtime = outcome.runtime.clone();
        session.detail.admitted_under = outcome
            .evidence
            .as_ref()
            .map(|evidence| roundtable_specs::admission::AdmittedUnder::of(evidence, outcome.receipt.as_ref()));
        match outcome.blocking() {
            Some(refused) => Err(Ending::failed(SessionCause::AdmissionRefused, refused.to_string())),
            None => Ok(()),
        }
    }

    /// Anchors the session's start in the audit chain and gives it its folder.
    async fn announce(&self, session: &mut SessionRecord, request: &ExecutionRequest) -> ExecutionFolder {
        let started = SessionStarted {
            assignment: &request.assignment,
            execution_generation: session.execution_generation,
            attempt: session.attempt,
            adapter: &request.adapter.name,
            image: request.adapter.image.as_ref().map(ToString::to_string),
            controller_run: &self.config.controller_run,
        };
        self.audit(&session.id, &started).await;
        tracing::info!(attempt = session.attempt, image = ?started.image, "session started");
        session.message = "provisioning".into();
        let folder = ExecutionFolder::of(&self.config.execution_root, &session.id);
        session.exec_dir = Some(folder.path().display().to_string());
        self.save(session).await;
        // The Assignment's `Ready` moves from `Queued` to `Running` now, not at its next look.
        self.wake(roundtable_specs::ObjectKey::new(roundtable_specs::Kind::Assignment, &request.assignment));
        folder
    }

    /// Keeps what the launch came back with, masked before anything of it is kept or quoted: the
    /// sidecars' final word however the run ended, then the run itself. Returns what the agent
    /// printed of its credentials (a canary too) when the session goes on to a proposal.
    async fn keep_launch(
        &self,
        session: &mut SessionRecord,
        request: &ExecutionRequest,
        planned: &LaunchPlan,
        folder: &ExecutionFolder,
        launched: Launched,
    ) -> Result<Vec<Canary>, Ending> {
        // The agent is done: its live tail ends (the kept log is read from its folder from now on).
        let printed_so_far = self.live.close(&session.id);
        if launched.egress.is_some() || launched.broker.is_some() {
            let summary = EgressSummary { gateway: launched.egress.as_ref(), broker: launched.broker.as_ref() };
            self.audit(&session.id, &summary).await;
        }
        session.detail.egress = launched.egress;
        session.detail.broker = launched.broker;
        if let (Some(agent), Some(activity)) = (session.detail.agent.as_mut(), launched.mcp) {
            agent.tool_calls = activity.calls;
            agent.tool_calls_refused = activity.refused;
            agent.mcp_clients = activity.clients;
            agent.tools_listed = activity.tool_lists;
            agent.last_heartbeat = activity.last_heartbeat;
        }
        let known = &planned.known;
        let (outcome, printed) = match launched.outcome {
            Ok(outcome) => {
                let printed = printed_canaries(known, &outcome);
                (masked(known, outcome), printed)
            }
            Err(mut ending) => {
                ending.message = known.mask_text(&ending.message);
                // The runtime lost the run (the engine went away mid-run): what the agent had
                // printed is kept all the same, masked as a finished run's is.
                if let Some(mut printed) = printed_so_far.filter(|p| p.stdout.total > 0 || p.stderr.total > 0) {
                    mask_captured(known, &mut printed.stdout, true);
                    mask_captured(known, &mut printed.stderr, true);
                    record_output(session, &printed.stdout, &printed.stderr, folder);
                    ending.message.push_str(&format!("; its output so far: `roundtable sessions logs {}`", session.id));
                }
                return Err(ending);
            }
        };
        record_run(session, &outcome, folder, &request.adapter);
        match ending_of(&outcome, self.stop_of(&session.id), request.timeout()) {
            Some(mut ending) => {
                // A failed run's output is where its reason is: say how to read it, as a
                // success says where its proposal is.
                let said_anything = outcome.stdout.total > 0 || outcome.stderr.total > 0;
                if ending.phase == SessionPhase::Failed && said_anything {
                    ending.message.push_str(&format!("; its output: `roundtable sessions logs {}`", session.id));
                }
                if ending.cause == SessionCause::BudgetExceeded {
                    ending.message.push_str(&format!("; what it spent: `roundtable sessions show {}`", session.id));
                }
                Err(ending)
            }
            None => Ok(printed),
        }
    }
}
