//! The launch: the session's sockets bound and its sidecars started (the credential broker or
//! the egress gateway when the Adapter has provider hosts, the MCP endpoint when its plan speaks
//! MCP), the session run on the runtime within its budget, and the sidecars stopped after, so the
//! capability is revoked however the run ended.

use std::path::PathBuf;

use roundtable_agents::capability::Token;
use roundtable_agents::tools::ActivitySnapshot;
use roundtable_broker::Placeholders;
use roundtable_reconcilers::ExecutionRequest;
use roundtable_session_runtime::{RunOutcome, SessionPlan};
use roundtable_specs::audit::{CapabilityIssued, CapabilityRevoked};
use roundtable_specs::broker::BrokerReport;
use roundtable_specs::layout::MCP_SOCKET;
use roundtable_specs::session::{EgressReport, SessionCause};
use roundtable_store::SessionRecord;
use roundtable_telemetry::error_chain;
use roundtable_workspace::sockets;
use tokio::sync::watch;

use crate::broker::{BrokerSidecar, BrokerStart};
use crate::egress::Sidecar;
use crate::folder::ExecutionFolder;
use crate::manager::Inner;
use crate::mcp::{McpSession, McpSidecar};
use crate::outcome::{Ending, Stop, ending_of_error};
use crate::plan::{LaunchPlan, Relays};
use crate::provision::Source;

/// What a launch came back with: the run's outcome, and the final word of each sidecar.
pub(crate) struct Launched {
    pub(crate) outcome: Result<RunOutcome, Ending>,
    pub(crate) egress: Option<EgressReport>,
    pub(crate) broker: Option<BrokerReport>,
    pub(crate) mcp: Option<ActivitySnapshot>,
}

impl Launched {
    fn failed(ending: Ending) -> Self {
        Self { outcome: Err(ending), egress: None, broker: None, mcp: None }
    }
}

/// The sockets of one session and the sidecars serving on them.
struct Sidecars {
    socket_dir: PathBuf,
    egress: Option<Sidecar>,
    broker: Option<BrokerSidecar>,
    mcp: Option<(McpSidecar, Token)>,
}

impl Inner {
    /// Binds the session's sockets and starts its sidecars (the egress gateway when the Adapter
    /// has provider hosts, the MCP endpoint when its plan speaks MCP), runs the session on the
    /// runtime, and stops the sidecars after: the capability is revoked however the run ended.
    pub(crate) async fn launch(
        &self,
        session: &SessionRecord,
        request: &ExecutionRequest,
        source: &Source,
        planned: &LaunchPlan,
        folder: &ExecutionFolder,
        cancel: watch::Receiver<bool>,
    ) -> Launched {
        let (provider_plan, placeholders) = (&planned.provider, &planned.placeholders);
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

    /// The session's socket directory and the sidecars serving in it.
    async fn prepare_sockets(
        &self,
        session: &SessionRecord,
        request: &ExecutionRequest,
        source: &Source,
        provider_plan: &roundtable_agents::plan::ProviderPlan,
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
}
