//! The route canary of a brokered Adapter (docs/admission.md, docs/broker.md): the contract's
//! first golden transcript launched in the adapter's image exactly as a session launches it
//! (the plan's environment and manifests, placeholders for its credentials, the relay, the trust
//! bundle), against a rehearsal broker whose provider is scripted on this process's loopback.
//! Green only when the CLI's model request arrived at the broker carrying the placeholder: a CLI
//! version that ignores the base-URL override, the proxy and the trust bundle is refused here,
//! before it ever spawns, instead of failing closed in the middle of a run.

use roundtable_agents::plan::{self, PlanInput, ProviderPlan};
use roundtable_broker::{BrokerReason, Rehearsal, RequestLine};
use roundtable_gateway::{Endpoint, Listener};
use roundtable_session_runtime::{ProbeCommand, ProbeMounts, ProbeRun, TmpEntry};
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_workspace::sockets;

use crate::authority::{AdmissionError, Admitter};
use crate::launch::Launchable;

/// The socket's name in the probe's socket folder, as in a session's.
const BROKER_SOCKET: &str = "broker.sock";

/// What the route canary found.
pub(crate) struct RouteFinding {
    pub(crate) passed: bool,
    pub(crate) detail: String,
    pub(crate) run: ProbeRun,
    pub(crate) image_id: String,
}

/// The socket folder of the canary, removed when dropped.
struct SocketFolder(std::path::PathBuf);

impl Drop for SocketFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Admitter {
    /// Runs `prompt` (with `model`) as `adapter`'s CLI against a rehearsal broker, under the
    /// runtime the runtime class gate admitted (`launchable`).
    pub(crate) async fn route_canary(
        &self,
        adapter: &ResolvedAdapter,
        launchable: &Launchable,
        prompt: &str,
        model: Option<&str>,
    ) -> Result<RouteFinding, AdmissionError> {
        let failed = |why: String| AdmissionError::Canary { adapter: adapter.name.clone(), why };
        let planned = plan::plan(adapter, PlanInput { prompt, model }, false);
        let probe = self.probe_plan(adapter, Vec::new());
        let dir = sockets::plan(&sockets::default_root_for_this_user(), &probe.id)
            .map_err(|e| failed(roundtable_telemetry::error_chain(&e)))?;
        let folder = SocketFolder(dir);
        sockets::create(&folder.0).map_err(|e| failed(roundtable_telemetry::error_chain(&e)))?;
        let socket = folder.0.join(BROKER_SOCKET);
        let listener = Listener::bind(&Endpoint::Unix(socket.clone()))
            .await
            .map_err(|e| failed(format!("cannot bind the rehearsal broker's socket: {e}")))?;
        sockets::hand_to_agent(&socket).map_err(|e| failed(roundtable_telemetry::error_chain(&e)))?;
        let hosts: Vec<String> = adapter.provider_hosts.iter().map(ToString::to_string).collect();
        let credentials: Vec<(String, String)> = adapter
            .credential_env
            .iter()
            .filter_map(|name| adapter.credential_host(name.as_str()).map(|host| (name.to_string(), host.to_string())))
            .collect();
        let rehearsal = Rehearsal::start(&hosts, &credentials, listener)
            .await
            .map_err(|e| failed(format!("the rehearsal broker did not start: {e}")))?;

        let mut env: Vec<String> = planned.env.iter().map(|(name, value)| format!("{name}={value}")).collect();
        env.extend(rehearsal.placeholders().iter().map(|(name, placeholder)| format!("{name}={placeholder}")));
        env.extend(roundtable_specs::layout::proxy_env());
        for variable in crate::surface::probe_env() {
            let name = variable.split('=').next().unwrap_or_default();
            if !env.iter().any(|set| set.split('=').next() == Some(name)) {
                env.push(variable);
            }
        }
        let mut tmp_entries: Vec<TmpEntry> = planned.files.iter().map(TmpEntry::from).collect();
        tmp_entries.push(TmpEntry::from(&plan::session_ca_file(rehearsal.ca_pem())));
        let stdin = match planned.stdin {
            plan::Stdin::Prompt => Some(prompt.as_bytes().to_vec()),
            plan::Stdin::Empty => Some(Vec::new()),
        };
        let mut probe = probe;
        probe.commands = vec![ProbeCommand { stdin, ..ProbeCommand::new(planned.argv.clone()) }];
        probe.env = env;
        probe.tmp_entries = tmp_entries;
        probe.broker_relay = true;
        probe.mounts = ProbeMounts { source_dir: None, socket_dir: Some(folder.0.clone()) };
        let outcome = self.launch_under(launchable, probe).await;
        let lines = rehearsal.stop().await;
        drop(folder);
        let outcome = outcome?;
        let Some(run) = outcome.runs.into_iter().next() else {
            return Err(failed("the canary ran no command".into()));
        };
        let (passed, detail) = verdict(&planned, &lines, &run);
        Ok(RouteFinding { passed, detail, run, image_id: outcome.image_id })
    }
}

/// Green when a request reached the broker with a placeholder and passed its checks; red, naming
/// the bypass, otherwise.
fn verdict(planned: &ProviderPlan, lines: &[RequestLine], run: &ProbeRun) -> (bool, String) {
    let exited = match run.exit_code {
        Some(code) => format!("the CLI then exited {code}"),
        None => "the CLI did not finish in time".to_owned(),
    };
    if let Some(proven) = lines.iter().find(|line| line.reason == BrokerReason::Allowed) {
        let how = if proven.intercepted { "through HTTPS_PROXY, intercepted" } else { "at its base URL" };
        return (
            true,
            format!(
                "the model request {} {} reached the broker {how} with the placeholder of {}; {exited} on the scripted answer",
                proven.method,
                proven.path,
                proven.credential.as_deref().unwrap_or("its credential"),
            ),
        );
    }
    let pointed = match planned.broker.as_ref() {
        Some(route) => format!("its base URL {}", route.base_url),
        None => "its base URL".to_owned(),
    };
    if let Some(first) = lines.first() {
        return (
            false,
            format!(
                "bypass: the CLI's request {} {} reached the broker but was refused ({}: {}); {exited}",
                first.method,
                first.path,
                first.reason,
                first.detail.as_deref().unwrap_or("no detail"),
            ),
        );
    }
    (
        false,
        format!(
            "bypass: no request reached the broker; the CLI ignored {pointed}, HTTPS_PROXY and the session CA, so a brokered session could never reach its provider ({exited})"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_session_runtime::Captured;

    fn codex() -> ProviderPlan {
        let adapter = roundtable_specs::builtins::template("codex").expect("built-in").resolve("codex");
        plan::plan(&adapter, PlanInput { prompt: "p", model: None }, false)
    }

    fn line(reason: BrokerReason, intercepted: bool) -> RequestLine {
        RequestLine {
            method: "POST".into(),
            path: "/api.openai.com/v1/responses".into(),
            reason,
            credential: (reason == BrokerReason::Allowed).then(|| "CODEX_API_KEY".into()),
            intercepted,
            ..RequestLine::default()
        }
    }

    fn run(code: i64) -> ProbeRun {
        ProbeRun {
            argv: vec!["codex".into()],
            exit_code: Some(code),
            stdout: Captured::default(),
            stderr: Captured::default(),
        }
    }

    #[test]
    fn a_request_with_the_placeholder_proves_the_route_whatever_the_cli_did_next() {
        let (passed, detail) = verdict(&codex(), &[line(BrokerReason::Allowed, false)], &run(1));
        assert!(passed, "{detail}");
        assert!(detail.contains("at its base URL with the placeholder of CODEX_API_KEY"), "{detail}");
        let (passed, detail) = verdict(&codex(), &[line(BrokerReason::Allowed, true)], &run(1));
        assert!(passed && detail.contains("intercepted"), "{detail}");
    }

    #[test]
    fn no_request_or_only_refused_ones_is_a_named_bypass() {
        let (passed, detail) = verdict(&codex(), &[], &run(0));
        assert!(!passed);
        assert!(detail.contains("ignored its base URL http://127.0.0.1:3129/api.openai.com"), "{detail}");
        let (passed, detail) = verdict(&codex(), &[line(BrokerReason::NoPlaceholder, false)], &run(1));
        assert!(!passed);
        assert!(detail.contains("refused (no_placeholder"), "{detail}");
    }
}
