//! One session, phase by phase: provision the source (the workspace crate), bind the sockets and
//! start the sidecars (egress gateway or credential broker, MCP endpoint), run it on the session
//! runtime, record what came back, and turn the
//! agent's changes into a pending proposal. Each phase records its end; the decisions are pure
//! functions in `outcome`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use roundtable_source::Repos;

use roundtable_agents::capability::Token;
use roundtable_agents::capture;
use roundtable_agents::plan::{self, PlanInput, ProviderPlan, Stdin};
use roundtable_agents::tools::ActivitySnapshot;
use roundtable_session_runtime::{
    Expected, ExportLimits, Ownership, PersistentHome, Purpose, Resources, RunOutcome, SessionPlan, TmpEntry,
};
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::audit::{
    AuditRecord, CanaryFound, CapabilityIssued, CapabilityRevoked, CredentialCanary, EgressSummary, ProposalSubmitted,
    SessionEnded, SessionStarted,
};
use roundtable_specs::brief::Brief;
use roundtable_specs::broker::BrokerReport;
use roundtable_specs::layout::{AGENT_UID, CAPABILITY_ENV, MCP_SOCKET};
use roundtable_specs::resume::ExternalSessionId;
use roundtable_specs::secrets::KnownSecrets;
use roundtable_specs::session::{
    AgentSession, EgressReport, Extracted, ProposalFlag, ProposalFlagKind, ProposalState, SessionCause, SessionPhase,
};
use roundtable_store::{ProposalRecord, SessionRecord};
use roundtable_telemetry::error_chain;
use roundtable_workspace::provision::{self, ProvisionError, Provisioned};
use roundtable_workspace::settle::{self, Settled};
use roundtable_workspace::{patch, sockets};
use tokio::sync::watch;
use tracing::Instrument as _;

use crate::folder::ExecutionFolder;
use crate::outcome::{Ending, Stop, ending_of, ending_of_error, masked, proposal_flags};
use roundtable_reconcilers::ExecutionRequest;

use crate::broker::{BrokerSidecar, BrokerStart};
use crate::egress::Sidecar;
use crate::manager::{Inner, now};
use crate::mcp::{McpSession, McpSidecar};
use roundtable_broker::Placeholders;

/// Milliseconds since `started`.
fn millis(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What provisioning produced: the confined repository, the exported source and the brief.
struct Source {
    repo: PathBuf,
    provisioned: Provisioned,
    brief: Brief,
}

/// What a launch came back with: the run's outcome, and the final word of each sidecar.
struct Launched {
    outcome: Result<RunOutcome, Ending>,
    egress: Option<EgressReport>,
    broker: Option<BrokerReport>,
    mcp: Option<ActivitySnapshot>,
}

impl Launched {
    fn failed(ending: Ending) -> Self {
        Self { outcome: Err(ending), egress: None, broker: None, mcp: None }
    }
}

/// Which sidecars a session's in-container relay carries to.
#[derive(Debug, Clone, Copy)]
struct Relays<'a> {
    egress: bool,
    /// The broker's session CA (PEM), when the session has a broker: its `HTTPS_PROXY` is the
    /// broker, which intercepts the provider hosts with that CA.
    broker: Option<&'a str>,
}

/// The sockets of one session and the sidecars serving on them.
struct Sidecars {
    socket_dir: PathBuf,
    egress: Option<Sidecar>,
    broker: Option<BrokerSidecar>,
    mcp: Option<(McpSidecar, Token)>,
}

impl Inner {
    /// Records the session, retrying while the database is busy: an execution's outcome must not
    /// be lost to a transient lock.
    /// Under a lease, a write the fence refuses is dropped: another controller owns the
    /// execution now.
    pub(super) async fn save(&self, session: &SessionRecord) {
        let lease = self.lease_of(session);
        for attempt in 1..=10u64 {
            let saved = match &lease {
                Some(lease) => self.store.save_session_fenced(session, lease).await.map(|fenced| {
                    if let Err(fenced) = fenced {
                        tracing::warn!(session = %session.id, %fenced, "not recording the session");
                    }
                }),
                None => self.store.save_session(session).await,
            };
            match saved {
                Ok(()) => return,
                Err(error) if attempt < 10 => {
                    tracing::warn!(session = %session.id, attempt, %error, "cannot record the session yet; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await;
                }
                Err(error) => tracing::error!(session = %session.id, %error, "cannot record the session"),
            }
        }
    }

    /// The lease `session`'s execution runs under, if any.
    fn lease_of(&self, session: &SessionRecord) -> Option<roundtable_store::Lease> {
        let active = self.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        active.get(&session.assignment).filter(|run| run.session == session.id).and_then(|run| run.lease.clone())
    }

    /// Why the manager stopped `session`, if it did; taken, since it is read once.
    fn stop_of(&self, session: &str) -> Option<Stop> {
        self.stops.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(session)
    }

    /// Records how the session ended.
    pub(super) async fn end(&self, mut session: SessionRecord, ending: Ending) -> SessionRecord {
        if ending.phase != SessionPhase::Cancelled {
            tracing::warn!(session = %session.id, assignment = %session.assignment, phase = %ending.phase, cause = %ending.cause, detail = %ending.message, "execution did not succeed");
        }
        session.phase = ending.phase;
        session.cause = Some(ending.cause);
        session.message = ending.message;
        session.finished_at = Some(now());
        self.save(&session).await;
        self.audit_end(&session).await;
        session
    }

    /// The session's end, in the log (one INFO line, whatever the end) and the audit chain.
    pub(super) async fn audit_end(&self, session: &SessionRecord) {
        let duration_ms = session.started_at.as_deref().zip(session.finished_at.as_deref()).and_then(|(from, to)| {
            let parse = |at: &str| time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok();
            Some(i64::try_from((parse(to)? - parse(from)?).whole_milliseconds()).unwrap_or(i64::MAX))
        });
        let tokens = session.detail.broker.as_ref().map(|b| b.tokens.input + b.tokens.output);
        tracing::info!(
            phase = %session.phase,
            cause = session.cause.map(|c| c.as_str()),
            exit_code = session.exit_code,
            duration_ms,
            tokens,
            detail = %session.message,
            "session ended"
        );
        let record = SessionEnded {
            assignment: &session.assignment,
            execution_generation: session.execution_generation,
            attempt: session.attempt,
            adapter: &session.adapter,
            image: session.image.as_deref(),
            phase: session.phase,
            cause: session.cause,
            exit_code: session.exit_code,
            external_session_id: session.external_session_id.as_deref(),
            message: &session.message,
        };
        self.audit(&session.id, &record).await;
    }

    /// Runs one session to its end and records it.
    pub(super) async fn execute(
        &self,
        mut session: SessionRecord,
        request: ExecutionRequest,
        cancel: watch::Receiver<bool>,
    ) -> SessionRecord {
        if *cancel.borrow() {
            let ending = self.stop_of(&session.id).unwrap_or(Stop::Cancelled).ending(false);
            return self.end(session, ending).await;
        }
        session.phase = SessionPhase::Running;
        session.started_at = Some(now());
        // The gates decide before anything of the session exists: a refusal under `enforce`
        // leaves no folder, socket or container behind.
        if let Some(admitter) = &self.admitter {
            session.message = "admission".into();
            let policy = admitter.policy().await;
            let outcome = admitter.gate(&request.adapter, &request.spec.requires, &policy, &session.id).await;
            session.detail.admission = outcome.decisions.clone();
            session.detail.runtime = outcome.runtime.clone();
            session.detail.admitted_under = outcome
                .evidence
                .as_ref()
                .map(|evidence| roundtable_specs::admission::AdmittedUnder::of(evidence, outcome.receipt.as_ref()));
            if let Some(refused) = outcome.blocking() {
                return self.end(session, Ending::failed(SessionCause::AdmissionRefused, refused.to_string())).await;
            }
        }
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
        self.save(&session).await;

        let started = Instant::now();
        let source = match self.provision(&request, &folder).instrument(tracing::info_span!("provision")).await {
            Ok(source) => source,
            Err(ending) => return self.end(session, ending).await,
        };
        session.base_commit = Some(source.provisioned.commit.clone());
        session.detail.manifest = source.provisioned.files.clone();
        session.detail.withheld = source.provisioned.withheld.clone();
        session.detail.timings_ms.insert("provision".into(), millis(started));
        if let Some(reused) = self.reuse(&mut session, &request).await {
            return reused;
        }
        session.message = "running".into();
        self.save(&session).await;

        // A brokered Adapter's provider hosts are reached only through its broker: no tunnel to
        // them with the agent's own headers, so no egress proxy either.
        let proxy = request.adapter.egress_proxy();
        let input = PlanInput { prompt: &request.spec.task.prompt, model: request.spec.model.as_deref() };
        let provider_plan = match self.resumable(&session, &request).await {
            Some((id, briefing)) => plan::resume_plan(&request.adapter, input, proxy, &id, &briefing)
                .unwrap_or_else(|_| plan::plan(&request.adapter, input, proxy)),
            None => plan::plan(&request.adapter, input, proxy),
        };
        session.detail.agent = Some(AgentSession {
            provider: provider_plan.provider.to_string(),
            model: request.spec.model.clone(),
            argv: provider_plan.recorded_argv(&request.spec.task.prompt),
            env_names: provider_plan.env_names(),
            working_dir: provider_plan.working_dir.to_owned(),
            mcp_socket: provider_plan.mcp.then(|| MCP_SOCKET.to_owned()),
            resumed_from: provider_plan.resumes.clone(),
            ..AgentSession::default()
        });
        let placeholders = if request.adapter.holds_placeholders() {
            match Placeholders::mint(self.credentials(&request.adapter).map(|(name, _)| name)) {
                Ok(placeholders) => placeholders,
                Err(error) => {
                    let message = format!("cannot draw the session's placeholders: {error}");
                    return self.end(session, Ending::failed(SessionCause::BrokerUnavailable, message)).await;
                }
            }
        } else {
            Placeholders::default()
        };
        // Everything the session's agent is given, and every value behind it, is masked in what
        // is kept of it and flagged where a proposal adds it.
        let known = KnownSecrets::new(self.credentials(&request.adapter).chain(placeholders.iter()));
        for name in known.short_names() {
            tracing::warn!(session = %session.id, variable = %name, min = roundtable_specs::secrets::known::MIN_SUBSTRING, "credential value shorter than the minimum: masked only where it stands as a whole word");
        }
        self.fingerprint_credentials(&session.id, &request.adapter).await;
        self.live.open(&session.id, known.clone());
        // The sidecars and the container's phases, under one span.
        let launched = self
            .launch(&session, &request, &source, &provider_plan, &folder, &placeholders, cancel)
            .instrument(tracing::info_span!("sandbox"))
            .await;
        // The agent is done: its live tail ends (the kept log is read from its folder from now on).
        self.live.close(&session.id);
        // The gateway's and the broker's final counters and the MCP activity are kept however
        // the run ended.
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
        // Masked before anything of the outcome is kept or quoted; what the agent printed of
        // its credentials is a canary too.
        let (outcome, printed) = match launched.outcome {
            Ok(outcome) => {
                let printed = printed_canaries(&known, &outcome);
                (masked(&known, outcome), printed)
            }
            Err(mut ending) => {
                ending.message = known.mask_text(&ending.message);
                return self.end(session, ending).await;
            }
        };
        record_run(&mut session, &outcome, &folder, &request.adapter);
        if let Some(ending) = ending_of(&outcome, self.stop_of(&session.id), request.timeout()) {
            return self.end(session, ending).await;
        }
        self.propose(session, &request, &source, &folder, &known, printed)
            .instrument(tracing::info_span!("patch"))
            .await
    }

    /// Resolves the revision in the confined repository and exports exactly the readable paths.
    async fn provision(&self, request: &ExecutionRequest, folder: &ExecutionFolder) -> Result<Source, Ending> {
        let (project_root, repo) = (self.config.project.root.clone(), request.spec.source.repo.clone());
        let (revision, scope, dest) =
            (request.spec.source.revision.clone(), request.spec.readable_paths.clone(), folder.source());
        let repos = self.config.project.repos.clone();
        let provisioned = tokio::task::spawn_blocking(move || {
            let repo = match repos {
                Repos::Root => provision::confine(&project_root, &repo)?,
                Repos::Checkout(top) => provision::confine(&top, &repo)?,
                Repos::Mirror(mirror) => provision::from_mirror(&mirror, &repo)?,
            };
            let commit = provision::resolve(&repo, &revision)?;
            provision::export(&repo, &commit, &scope, &dest).map(|provisioned| (repo, provisioned))
        })
        .await;
        let (repo, provisioned) = match provisioned {
            Ok(Ok(provisioned)) => provisioned,
            Ok(Err(error @ ProvisionError::OutsideProjectRoot { .. })) => {
                return Err(Ending::failed(SessionCause::SourceOutsideProjectRoot, error_chain(&error)));
            }
            Ok(Err(error)) => return Err(Ending::failed(SessionCause::ProvisionFailed, error_chain(&error))),
            Err(error) => return Err(Ending::failed(SessionCause::ProvisionFailed, error_chain(&error))),
        };
        let brief = Brief {
            assignment: request.assignment.clone(),
            role: request.spec.role,
            task: request.spec.task.clone(),
            base_commit: provisioned.commit.clone(),
            readable_paths: request.spec.readable_paths.clone(),
            manifest: provisioned.files.clone(),
        };
        let written = brief
            .to_file_bytes()
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(folder.brief(), bytes));
        if let Err(error) = written {
            return Err(Ending::failed(SessionCause::ProvisionFailed, format!("cannot write the brief: {error}")));
        }
        Ok(Source { repo, provisioned, brief })
    }

    /// Binds the session's sockets and starts its sidecars (the egress gateway when the Adapter
    /// has provider hosts, the MCP endpoint when its plan speaks MCP), runs the session on the
    /// runtime, and stops the sidecars after: the capability is revoked however the run ended.
    #[allow(clippy::too_many_arguments)]
    async fn launch(
        &self,
        session: &SessionRecord,
        request: &ExecutionRequest,
        source: &Source,
        provider_plan: &ProviderPlan,
        folder: &ExecutionFolder,
        placeholders: &Placeholders,
        cancel: watch::Receiver<bool>,
    ) -> Launched {
        // A persistent home is keyed by the repository's id in the store, never by the path.
        let repository = match provider_plan.persistent_home {
            Some(_) => match self.store.repository_key().await {
                Ok(key) => Some(key),
                Err(error) => {
                    let message =
                        format!("cannot read the repository key for the persistent home: {}", error_chain(&error));
                    return Launched::failed(Ending::failed(SessionCause::ProvisionFailed, message));
                }
            },
            None => None,
        };
        let sidecars = match self.prepare_sockets(session, request, source, provider_plan, folder, placeholders).await {
            Ok(sidecars) => sidecars,
            Err(ending) => return Launched::failed(ending),
        };
        let Sidecars { socket_dir, egress, broker, mcp } = sidecars;
        if mcp.is_some() {
            let record =
                CapabilityIssued { assignment: &request.assignment, role: request.spec.role, socket: MCP_SOCKET };
            self.audit(&session.id, &record).await;
        }
        let (mcp, token) = match mcp {
            Some((sidecar, token)) => (Some(sidecar), Some(token)),
            None => (None, None),
        };
        let plan = self.session_plan(
            session,
            request,
            provider_plan,
            token.as_ref(),
            folder,
            &socket_dir,
            Relays { egress: egress.is_some(), broker: broker.as_ref().map(BrokerSidecar::ca_pem) },
            placeholders,
            repository.as_ref(),
        );
        drop(token);
        let outcome = self.run_within_budget(session, plan, broker.as_ref(), cancel).await;
        let mcp = match mcp {
            Some(sidecar) => {
                let activity = sidecar.stop().await;
                let record = CapabilityRevoked {
                    assignment: &request.assignment,
                    tool_calls: &activity.calls,
                    refused: activity.refused,
                };
                self.audit(&session.id, &record).await;
                Some(activity)
            }
            None => None,
        };
        let egress = match egress {
            Some(sidecar) => Some(sidecar.stop().await),
            None => None,
        };
        let broker = match broker {
            Some(sidecar) => Some(sidecar.stop().await),
            None => None,
        };
        let _ = std::fs::remove_dir_all(&socket_dir);
        Launched { outcome: outcome.map_err(|error| ending_of_error(&error)), egress, broker, mcp }
    }

    /// Runs the session; when its broker refuses a model request for the budget, stops it the
    /// way a cancel does, recorded as `BudgetExceeded`.
    async fn run_within_budget(
        &self,
        session: &SessionRecord,
        plan: SessionPlan,
        broker: Option<&BrokerSidecar>,
        cancel: watch::Receiver<bool>,
    ) -> Result<RunOutcome, roundtable_session_runtime::RuntimeError> {
        let run = self.runtime.run(plan, cancel);
        tokio::pin!(run);
        let mut refused = broker.map(BrokerSidecar::budget_refused);
        let spent = async {
            if let Some(refused) = refused.as_mut()
                && refused.wait_for(|spent| *spent).await.is_ok()
            {
                return;
            }
            // No broker, or it went away without refusing: never a budget stop.
            std::future::pending::<()>().await;
        };
        tokio::select! {
            outcome = &mut run => outcome,
            () = spent => {
                self.stop(&session.assignment, Some(&session.id), Stop::BudgetExceeded);
                run.await
            }
        }
    }

    /// The `credentialEnv` values this daemon holds for `adapter`, by name: what its sessions'
    /// agents are given, and so what is masked in everything kept of them.
    fn credentials<'a>(&'a self, adapter: &'a ResolvedAdapter) -> impl Iterator<Item = (&'a str, &'a str)> {
        adapter
            .credential_env
            .iter()
            .filter_map(|name| self.config.secrets.get(name.as_str()).map(|value| (name.as_str(), value.as_str())))
    }

    /// Records the fingerprints of the credentials `adapter`'s sessions are given, so an accept
    /// anywhere finds them in a proposal (`start` records every declared Adapter's; this covers
    /// one declared since). Without the audit key there is nothing to hash with.
    async fn fingerprint_credentials(&self, session: &str, adapter: &ResolvedAdapter) {
        let Some(key) = &self.config.audit_key else { return };
        if let Err(error) = self.store.record_fingerprints(&key.fingerprints(self.credentials(adapter))).await {
            tracing::warn!(session, %error, "cannot record the credentials' fingerprints; an accept may not find them in a proposal");
        }
    }

    /// The session's socket directory and the sidecars serving in it.
    async fn prepare_sockets(
        &self,
        session: &SessionRecord,
        request: &ExecutionRequest,
        source: &Source,
        provider_plan: &ProviderPlan,
        folder: &ExecutionFolder,
        placeholders: &Placeholders,
    ) -> Result<Sidecars, Ending> {
        let adapter = &request.adapter;
        let own_binary = adapter.command == roundtable_specs::builtins::IN_CONTAINER_BINARY;
        if adapter.image.is_none() && !own_binary {
            let message = format!("adapter {} has no image", adapter.name);
            return Err(Ending::failed(SessionCause::ImageNotConfigured, message));
        }
        // Sockets are bound before the container exists.
        let socket_dir = sockets::plan(&self.config.socket_root, &session.id)
            .map_err(|error| Ending::failed(SessionCause::SocketPathTooLong, error_chain(&error)))?;
        sockets::create(&socket_dir)
            .map_err(|error| Ending::failed(SessionCause::SocketDirFailed, error_chain(&error)))?;
        let hosts: Vec<String> = adapter.provider_hosts.iter().map(ToString::to_string).collect();
        let cidrs: Vec<ipnet::IpNet> = adapter.allow_cidrs.iter().map(|cidr| cidr.net()).collect();
        // Fail closed: a brokered session without its broker does not run, nor one whose broker
        // would lack any key the Adapter declares (its agent would hold a variable that works
        // nowhere, and the provider's failure would reach it as the only explanation).
        let broker = if adapter.brokered() {
            let missing: Vec<&str> = adapter
                .credential_env
                .iter()
                .map(|name| name.as_str())
                .filter(|name| self.config.secrets.get(*name).is_none_or(String::is_empty))
                .collect();
            if !missing.is_empty() {
                let _ = std::fs::remove_dir_all(&socket_dir);
                let message = format!(
                    "no value for credentialEnv {} in the daemon's environment or --secrets-file: a brokered session runs only with every key its Adapter declares",
                    missing.join(", ")
                );
                return Err(Ending::failed(SessionCause::BrokerUnavailable, message));
            }
            let start = BrokerStart {
                hosts: &hosts,
                adapter_cidrs: &cidrs,
                credentials: self
                    .credentials(adapter)
                    .filter_map(|(name, value)| {
                        adapter.credential_host(name).map(|host| (name, value, host.to_string()))
                    })
                    .collect(),
                placeholders,
                budget: request.budget(),
            };
            match BrokerSidecar::start(&self.config.egress, start, &socket_dir, folder, &session.id).await {
                Ok(sidecar) => Some(sidecar),
                Err(error) => {
                    let _ = std::fs::remove_dir_all(&socket_dir);
                    return Err(Ending::failed(SessionCause::BrokerUnavailable, error_chain(&error)));
                }
            }
        } else {
            None
        };
        let egress = if !adapter.egress_proxy() {
            None
        } else {
            match Sidecar::start(&self.config.egress, &hosts, &cidrs, &socket_dir, folder, &session.id).await {
                Ok(sidecar) => Some(sidecar),
                Err(error) => {
                    let _ = std::fs::remove_dir_all(&socket_dir);
                    return Err(Ending::failed(SessionCause::EgressUnavailable, error_chain(&error)));
                }
            }
        };
        let mcp = if provider_plan.mcp {
            let who = McpSession {
                session: &session.id,
                assignment: &request.assignment,
                role: request.spec.role.into(),
                brief: source.brief.to_value(),
                // Past the timeout the container is gone anyway; the margin covers launch and export.
                ttl: request.timeout() + std::time::Duration::from_secs(600),
            };
            match McpSidecar::start(&self.store, &self.authority, &socket_dir, who) {
                Ok(started) => Some(started),
                Err(error) => {
                    drop((egress, broker));
                    let _ = std::fs::remove_dir_all(&socket_dir);
                    return Err(Ending::failed(SessionCause::McpUnavailable, error_chain(&error)));
                }
            }
        } else {
            None
        };
        Ok(Sidecars { socket_dir, egress, broker, mcp })
    }

    /// The backend-neutral plan for this session.
    #[allow(clippy::too_many_arguments)]
    fn session_plan(
        &self,
        session: &SessionRecord,
        request: &ExecutionRequest,
        provider_plan: &ProviderPlan,
        capability: Option<&Token>,
        folder: &ExecutionFolder,
        socket_dir: &Path,
        relays: Relays<'_>,
        placeholders: &Placeholders,
        repository: Option<&roundtable_store::RepositoryKey>,
    ) -> SessionPlan {
        let adapter = &request.adapter;
        let mut env: Vec<String> = provider_plan.env.iter().map(|(name, value)| format!("{name}={value}")).collect();
        if adapter.holds_placeholders() {
            // The values stay with the daemon (its broker, if the session has one); the agent
            // holds only their placeholders.
            env.extend(placeholders.iter().map(|(name, placeholder)| format!("{name}={placeholder}")));
        } else {
            env.extend(self.credentials(adapter).map(|(name, value)| format!("{name}={value}")));
        }
        for name in adapter.credential_env.iter().filter(|name| !self.config.secrets.contains_key(name.as_str())) {
            tracing::warn!(session = %session.id, variable = %name, "credential not set; not passed");
        }
        if relays.egress || relays.broker.is_some() {
            env.extend(roundtable_specs::layout::proxy_env());
        }
        // Only here, in the agent exec's environment: never in a file or the container's config.
        if let Some(token) = capability {
            env.push(format!("{CAPABILITY_ENV}={}", token.reveal()));
        }
        let stdin = match provider_plan.stdin {
            Stdin::Prompt => Some(request.spec.task.prompt.clone().into_bytes()),
            Stdin::Empty => None,
        };
        let mut tmp_entries: Vec<TmpEntry> = provider_plan.files.iter().map(TmpEntry::from).collect();
        if let Some(ca) = relays.broker {
            tmp_entries.push(TmpEntry::from(&plan::session_ca_file(ca)));
        }
        let resources = Resources::from(&adapter.resources);
        SessionPlan {
            session: session.id.clone(),
            ownership: Ownership {
                project: self.config.project.id.clone(),
                assignment: Some(request.assignment.clone()),
                session: session.id.clone(),
                controller_run: self.config.controller_run.clone(),
                purpose: Purpose::Agent,
            },
            image: adapter.image.as_ref().map(ToString::to_string),
            resources,
            binary: self.config.binary.clone(),
            source_dir: folder.source(),
            task_file: folder.brief(),
            socket_dir: Some(socket_dir.to_owned()),
            egress_proxy: relays.egress,
            broker_relay: relays.broker.is_some(),
            argv: provider_plan.argv.clone(),
            env,
            stdin,
            tmp_entries,
            persistent_home: provider_plan.persistent_home.zip(repository).map(|(target, repository)| {
                PersistentHome::of(&repository.key, &request.assignment, &provider_plan.provider.to_string(), target)
            }),
            output_limit: adapter.output_limit.bytes(),
            timeout: request.timeout(),
            expected: Expected {
                uid: AGENT_UID,
                gid: AGENT_UID,
                memory_bytes: resources.memory_bytes,
                pids: u64::from(resources.pids),
                cpu_millis: resources.cpu_millis(),
                // As the runtime class gate resolved it: the container is created under it.
                runtime: session.detail.runtime.clone(),
            },
            export_dir: folder.export(),
            scratch_dir: folder.scratch(),
            export_limits: ExportLimits { max_bytes: resources.workspace_bytes, max_entries: 100_000 },
            live: self.live.sink(&session.id),
        }
    }

    /// The patch against the provisioned source, verified against the base commit, stored as a
    /// pending proposal.
    async fn propose(
        &self,
        mut session: SessionRecord,
        request: &ExecutionRequest,
        source: &Source,
        folder: &ExecutionFolder,
        known: &KnownSecrets,
        printed: Vec<Canary>,
    ) -> SessionRecord {
        let (base, export, scratch) = (folder.source(), folder.export(), folder.scratch());
        let scanned = known.clone();
        let (repo, commit) = (source.repo.clone(), source.provisioned.commit.clone());
        let given: BTreeSet<String> = source.provisioned.files.iter().map(|f| f.path.clone()).collect();
        let extracted = session.detail.export.clone().unwrap_or_default();
        let started = Instant::now();
        let patched = tokio::task::spawn_blocking(move || {
            let at_base = provision::commit_paths(&repo, &commit).map_err(ProposeError::Base)?;
            let settled = settle::settle(&base, &export, &given, &at_base, &extracted.rejected)?;
            let patch = patch::diff(&scratch, &base, &export)?;
            if !patch.is_empty() {
                patch::verify(&repo, &commit, &patch, &export, &scratch.join("check"))?;
            }
            let canaries = credential_canaries(&scanned, &patch.paths, &base, &export);
            Ok::<_, ProposeError>((settled, patch, canaries))
        })
        .await;
        let (settled, patch, mut canaries) = match patched {
            Ok(Ok(done)) => done,
            Ok(Err(error)) => {
                // git quotes the paths it failed on, and a path may hold a value.
                let message = known.mask_text(&error_chain(&error));
                return self.end(session, Ending::failed(SessionCause::PatchFailed, message)).await;
            }
            Err(error) => {
                return self.end(session, Ending::failed(SessionCause::PatchFailed, error_chain(&error))).await;
            }
        };
        canaries.extend(printed);
        session.detail.not_given = settled.not_given.clone();
        session.detail.timings_ms.insert("patch".into(), millis(started));
        session.phase = SessionPhase::Succeeded;
        session.finished_at = Some(now());
        let extracted = session.detail.export.clone().unwrap_or_default();
        let refused = extracted.rejected.len() + settled.not_given.len();
        if patch.is_empty() {
            session.message = if refused == 0 {
                "the agent changed nothing; no proposal".into()
            } else {
                format!(
                    "no proposal: nothing the agent changed could be carried back ({refused} entries refused; see `sessions show`)"
                )
            };
            self.save(&session).await;
            self.audit_end(&session).await;
            return session;
        }
        let proposal_id = format!("{}-{}", &patch.sha256[..12], session.id);
        let patch_path = self.config.project.proposals_dir().join(format!("{proposal_id}.patch"));
        if let Err(error) = write_private(&patch_path, &patch.text) {
            let ending = Ending::failed(SessionCause::PatchFailed, format!("cannot store the patch: {error}"));
            return self.end(session, ending).await;
        }
        let proposal = ProposalRecord {
            id: proposal_id.clone(),
            session_id: session.id.clone(),
            assignment: request.assignment.clone(),
            assignment_uid: Some(request.assignment_uid.clone()),
            execution_generation: request.execution_generation,
            base_commit: source.provisioned.commit.clone(),
            adapter: request.adapter.name.clone(),
            patch_path: patch_path.display().to_string(),
            sha256: patch.sha256.clone(),
            files_changed: i64::try_from(patch.files_changed).unwrap_or(i64::MAX),
            insertions: i64::try_from(patch.insertions).unwrap_or(i64::MAX),
            deletions: i64::try_from(patch.deletions).unwrap_or(i64::MAX),
            flags: {
                let mut flags = all_flags(&patch.paths, &request.spec.readable_paths, &settled, &extracted);
                flags.extend(self.claimed_elsewhere(&session.id, &patch.paths).await);
                flags.extend(canaries.iter().map(Canary::flag));
                flags
            },
            rejected: extracted.rejected.iter().chain(&settled.not_given).cloned().collect(),
            state: ProposalState::Pending,
            created_at: now(),
            reused_from: None,
            decision: None,
            provenance: None,
        };
        match self.record_proposal(&session, &proposal, &patch.text).await {
            Ok(true) => {
                session.message = format!("pending proposal {proposal_id}");
                if !canaries.is_empty() {
                    let paths: Vec<&str> = canaries.iter().map(|c| c.path.as_str()).collect();
                    session
                        .message
                        .push_str(&format!(" (credentialCanary: {}; review before applying)", paths.join(", ")));
                }
                self.report_canaries(&proposal, &canaries).await;
            }
            Ok(false) => {
                session.message = "a proposal for this execution generation already exists; this one was dropped".into()
            }
            Err(ending) => return self.end(session, ending).await,
        }
        self.save(&session).await;
        self.audit_end(&session).await;
        session
    }
}

impl Inner {
    /// Appends an audited entry to the chain, when there is a key. The chain is evidence, not a
    /// gate: a failed append is logged, the execution goes on.
    /// Records `proposal` (with its `patch`, kept in a shared store), under the session's lease
    /// when it has one, and audits it; `Ok(false)` when its execution generation already has one,
    /// and the ending to record when it cannot be recorded.
    pub(super) async fn record_proposal(
        &self,
        session: &SessionRecord,
        proposal: &ProposalRecord,
        patch: &[u8],
    ) -> Result<bool, Ending> {
        let inserted = match self.lease_of(session) {
            Some(lease) => match self.store.insert_proposal_fenced(proposal, patch, &lease).await {
                Ok(Ok(inserted)) => Ok(inserted),
                Ok(Err(fenced)) => {
                    tracing::warn!(session = %session.id, %fenced, "not recording the proposal");
                    return Err(Ending::failed(SessionCause::PatchFailed, fenced.to_string()));
                }
                Err(error) => Err(error),
            },
            None => self.store.insert_proposal(proposal).await,
        };
        let inserted = inserted.map_err(|error| {
            Ending::failed(SessionCause::PatchFailed, format!("cannot record the proposal: {}", error_chain(&error)))
        })?;
        if inserted {
            let record = ProposalSubmitted {
                assignment: &proposal.assignment,
                execution_generation: proposal.execution_generation,
                base_commit: &proposal.base_commit,
                sha256: &proposal.sha256,
                flags: &proposal.flags,
            };
            self.audit(&proposal.id, &record).await;
            tracing::info!(proposal = %proposal.id, sha256 = %proposal.sha256, flags = proposal.flags.len(), "proposal recorded");
        }
        Ok(inserted)
    }

    pub(super) async fn audit(&self, subject: &str, record: &impl AuditRecord) {
        let Some(key) = &self.config.audit_key else { return };
        let kind = record.kind().as_str();
        let appended = match roundtable_store::audit::AuditedEntry::of(subject, record) {
            Ok(entry) => self.store.append_audited(key, &entry).await,
            Err(error) => Err(roundtable_store::Error::Record(error)),
        };
        if let Err(error) = appended {
            tracing::error!(%error, kind, subject, "cannot append to the audit chain");
        }
    }

    /// The provider session this execution resumes, and its briefing: only for an adapter that
    /// keeps its home (`persistentHome`) and can resume, when an earlier session of the same
    /// Assignment on the same adapter captured an id. Otherwise the launch is fresh.
    async fn resumable(
        &self,
        session: &SessionRecord,
        request: &ExecutionRequest,
    ) -> Option<(ExternalSessionId, String)> {
        let adapter = &request.adapter;
        if !(adapter.persistent_home && adapter.supports_resume && adapter.resume_pattern.is_some()) {
            return None;
        }
        let sessions = self.store.sessions_of(&request.assignment_uid).await.ok()?;
        // A session recorded before the store had its repository key ran in a home named by the
        // path, which is never mounted again: its provider session is not in today's home.
        let keyed_at = self.store.repository_key().await.ok()?.keyed_at;
        let id: ExternalSessionId = sessions
            .iter()
            .filter(|s| s.id != session.id && s.adapter == adapter.name && s.phase.is_finished())
            .filter(|s| s.created_at >= keyed_at)
            .find_map(|s| s.external_session_id.as_deref()?.parse().ok())?;
        let board =
            roundtable_agents::briefing::Board::read(&self.store, &request.assignment).await.unwrap_or_default();
        let earlier: Vec<SessionRecord> = sessions.into_iter().filter(|s| s.id != session.id).collect();
        let briefing =
            roundtable_agents::briefing::text(&request.assignment, Some(&request.spec.task), &earlier, &board);
        Some((id, briefing))
    }

    /// Each added credential as a Warning event on the Assignment and an audited entry: a
    /// reviewer must not apply the proposal as it is.
    async fn report_canaries(&self, proposal: &ProposalRecord, canaries: &[Canary]) {
        if canaries.is_empty() {
            return;
        }
        let key = roundtable_specs::ObjectKey::new(roundtable_specs::Kind::Assignment, &proposal.assignment);
        for canary in canaries {
            let message = format!(
                "proposal {} adds the value of {} to {}: applying it would commit a live credential (the logs show it as {})",
                proposal.id,
                canary.names.join(", "),
                canary.path,
                canary
                    .names
                    .iter()
                    .map(|name| roundtable_specs::secrets::known::marker(name))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            let event = roundtable_store::NewEvent {
                object: &key,
                severity: roundtable_store::Severity::Warning,
                reason: roundtable_specs::events::EventReason::CredentialCanary.into(),
                message: &message,
                record: None,
            };
            if let Err(error) = self.store.append_event(&event).await {
                tracing::error!(proposal = %proposal.id, %error, "cannot record the credential canary's event");
            }
            tracing::warn!(proposal = %proposal.id, path = %canary.path, variables = ?canary.names, "the proposal adds an injected credential");
        }
        let record = CredentialCanary {
            assignment: &proposal.assignment,
            session: &proposal.session_id,
            found: canaries.iter().map(|c| CanaryFound { path: &c.path, variables: &c.names }).collect(),
        };
        self.audit(&proposal.id, &record).await;
    }

    /// A flag for each changed path another live session has claimed. A store that cannot be
    /// read flags nothing, but says so.
    async fn claimed_elsewhere(&self, session: &str, paths: &[String]) -> Vec<ProposalFlag> {
        let claims = match self.store.live_claims(&now()).await {
            Ok(claims) => claims,
            Err(error) => {
                tracing::warn!(session, %error, "cannot read claims; the proposal is not checked against them");
                return Vec::new();
            }
        };
        paths
            .iter()
            .filter(|path| {
                claims.iter().any(|c| c.session_id != session && roundtable_store::paths_overlap(&c.path, path))
            })
            .map(|path| ProposalFlag { kind: ProposalFlagKind::ClaimedElsewhere, path: path.clone() })
            .collect()
    }
}

/// A changed file that adds the value of one or more injected credentials.
struct Canary {
    /// Masked itself: an agent may put a value into a file's name.
    path: String,
    names: Vec<String>,
}

impl Canary {
    fn flag(&self) -> ProposalFlag {
        ProposalFlag { kind: ProposalFlagKind::CredentialCanary, path: self.path.clone() }
    }
}

/// The agent's streams that show a credential or placeholder it was given, as canaries named
/// `<stdout>` and `<stderr>`: printing one is how an agent carries it out through the logs.
fn printed_canaries(known: &KnownSecrets, outcome: &RunOutcome) -> Vec<Canary> {
    [("<stdout>", &outcome.stdout), ("<stderr>", &outcome.stderr)]
        .into_iter()
        .filter_map(|(stream, captured)| {
            let names = known.added(b"", &captured.bytes);
            (!names.is_empty())
                .then(|| Canary { path: stream.to_owned(), names: names.into_iter().map(str::to_owned).collect() })
        })
        .collect()
}

/// The changed files that hold more copies of an injected value than at the base: what applying
/// the proposal would add. The files are compared rather than the patch's `+` lines, so a value
/// in a binary file (base85 in the patch) is found too. A file missing on one side is empty there.
fn credential_canaries(known: &KnownSecrets, paths: &[String], base: &Path, export: &Path) -> Vec<Canary> {
    if known.is_empty() {
        return Vec::new();
    }
    let read = |root: &Path, path: &str| -> Vec<u8> {
        let file = root.join(path);
        match std::fs::symlink_metadata(&file) {
            Ok(meta) if meta.is_file() => std::fs::read(&file).unwrap_or_default(),
            _ => Vec::new(),
        }
    };
    paths
        .iter()
        .filter_map(|path| {
            let added = known.added(&read(base, path), &read(export, path));
            (!added.is_empty())
                .then(|| Canary { path: known.mask_text(path), names: added.into_iter().map(str::to_owned).collect() })
        })
        .collect()
}

/// Why the agent's workspace could not become a proposal.
#[derive(Debug, thiserror::Error)]
enum ProposeError {
    #[error("cannot list the base commit")]
    Base(#[source] ProvisionError),
    #[error(transparent)]
    Settle(#[from] settle::SettleError),
    #[error(transparent)]
    Patch(#[from] patch::PatchError),
}

/// Every flag of a proposal: scope, protected paths and package scripts of what it touches, and
/// each refusal that shaped it (a rejected entry that left a given file unchanged, a write to a
/// file the agent was not given, a hard link).
fn all_flags(paths: &[String], readable: &[String], settled: &Settled, extracted: &Extracted) -> Vec<ProposalFlag> {
    let mut flags = proposal_flags(paths, readable);
    let flag = |kind, path: &String| ProposalFlag { kind, path: path.clone() };
    flags.extend(settled.kept_unchanged.iter().map(|r| flag(ProposalFlagKind::RejectedEntry, &r.path)));
    flags.extend(settled.not_given.iter().map(|r| flag(ProposalFlagKind::NotGiven, &r.path)));
    flags.extend(extracted.hard_links.iter().map(|path| flag(ProposalFlagKind::HardLink, path)));
    flags
}

/// Keeps what the run produced on the session: exit code, captured output (and its logs),
/// external session ID, self-check, export, egress counters, phase timings.
fn record_run(session: &mut SessionRecord, outcome: &RunOutcome, folder: &ExecutionFolder, adapter: &ResolvedAdapter) {
    let _ = std::fs::write(folder.stdout_log(), &outcome.stdout.bytes);
    let _ = std::fs::write(folder.stderr_log(), &outcome.stderr.bytes);
    session.exit_code = outcome.exit_code;
    session.stdout_bytes = i64::try_from(outcome.stdout.total).ok();
    session.stderr_bytes = i64::try_from(outcome.stderr.total).ok();
    session.stdout_truncated = outcome.stdout.truncated();
    session.stderr_truncated = outcome.stderr.truncated();
    if adapter.captures_session_id {
        let captured = capture::capture(adapter.provider, &outcome.stdout.bytes, outcome.stdout.truncated());
        let agent = session.detail.agent.get_or_insert_with(AgentSession::default);
        agent.usage = captured.usage;
        match captured.session_id {
            Ok(id) => {
                agent.resume_command = plan::resume_argv(adapter, &id, plan::BRIEFING_PLACEHOLDER).ok();
                session.external_session_id = Some(id.as_str().to_owned());
            }
            Err(reason) => agent.capture_note = Some(reason.to_string()),
        }
    }
    session.cause = Some(SessionCause::from(outcome.end));
    let detail = &mut session.detail;
    detail.self_check = outcome.self_check.clone();
    detail.paused_for_export = Some(outcome.paused_for_export);
    detail.export = outcome.extracted.clone();
    for (phase, millis) in &outcome.timings {
        detail.timings_ms.insert((*phase).to_owned(), *millis);
    }
}

pub(super) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(bytes)
}
