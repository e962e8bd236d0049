//! Launch planning: which provider plan runs (a fresh launch, or the resume of the provider
//! session an earlier attempt captured), the placeholders the agent holds instead of its
//! credentials, what is masked in everything kept of the session, and the backend-neutral
//! `SessionPlan` the runtime is handed.

use std::path::Path;

use roundtable_agents::capability::Token;
use roundtable_agents::plan::{self, PlanInput, ProviderPlan, Stdin};
use roundtable_broker::Placeholders;
use roundtable_reconcilers::ExecutionRequest;
use roundtable_session_runtime::{
    Expected, ExportLimits, Ownership, PersistentHome, Purpose, Resources, SessionPlan, TmpEntry,
};
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::layout::{AGENT_UID, CAPABILITY_ENV, MCP_SOCKET};
use roundtable_specs::resume::ExternalSessionId;
use roundtable_specs::secrets::KnownSecrets;
use roundtable_specs::session::{AgentSession, SessionCause};
use roundtable_store::SessionRecord;

use crate::folder::ExecutionFolder;
use crate::manager::Inner;
use crate::outcome::Ending;

/// What a launch is planned with: the provider's plan, the placeholders the agent holds, and
/// every value behind what it is given (masked wherever the session is kept).
pub(crate) struct LaunchPlan {
    pub(crate) provider: ProviderPlan,
    pub(crate) placeholders: Placeholders,
    pub(crate) known: KnownSecrets,
}

/// Which sidecars a session's in-container relay carries to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Relays<'a> {
    pub(crate) egress: bool,
    /// The broker's session CA (PEM), when the session has a broker: its `HTTPS_PROXY` is the
    /// broker, which intercepts the provider hosts with that CA.
    pub(crate) broker: Option<&'a str>,
}

impl Inner {
    /// Plans the launch: the session is `running` from here on, its agent described on the
    /// session, its live tail opened with what it must mask.
    pub(crate) async fn plan_launch(
        &self,
        session: &mut SessionRecord,
        request: &ExecutionRequest,
    ) -> Result<LaunchPlan, Ending> {
        session.message = "running".into();
        self.save(session).await;
        // A brokered Adapter's provider hosts are reached only through its broker: no tunnel to
        // them with the agent's own headers, so no egress proxy either.
        let proxy = request.adapter.egress_proxy();
        let input = PlanInput { prompt: &request.spec.task.prompt, model: request.spec.model.as_deref() };
        let provider_plan = match self.resumable(session, request).await {
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
                    return Err(Ending::failed(SessionCause::BrokerUnavailable, message));
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
        self.live.open(&session.id, known.clone(), request.adapter.output_limit.bytes());
        Ok(LaunchPlan { provider: provider_plan, placeholders, known })
    }

    /// The `credentialEnv` values this daemon holds for `adapter`, by name: what its sessions'
    /// agents are given, and so what is masked in everything kept of them.
    pub(crate) fn credentials<'a>(&'a self, adapter: &'a ResolvedAdapter) -> impl Iterator<Item = (&'a str, &'a str)> {
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

    /// The backend-neutral plan for this session.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn session_plan(
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
}
