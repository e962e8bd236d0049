//! Provider launch plans: from an Adapter, a prompt and the session's layout to the argv, stdin,
//! environment and files one agent CLI needs. The parts every provider shares are decided here
//! (the base environment, the broker route, credentials, proxy, MCP capability, mounts, the
//! persistent home); what is one provider's own (its headless flags, its variables, its files
//! and MCP manifest, stdin) comes from its profile (`roundtable_specs::providers`). Pure: the
//! execution manager and `roundtable adapters plan` call the same function, so what an operator
//! inspects is what runs.

use roundtable_specs::adapter::{Provider, ResolvedAdapter};
use roundtable_specs::broker::Scheme;
use roundtable_specs::layout::{
    AGENT_CONFIG, AGENT_UID, BINARY, BROKER_LISTEN, CAPABILITY_ENV, HOME, SESSION_CA, TASK, TMPDIR, WORKSPACE,
    broker_base_url,
};
use roundtable_specs::providers::{LaunchInput, McpWiring, bridge_command};
use roundtable_specs::resume::ExternalSessionId;
use serde::Serialize;

// The plan's own types are declared with the profiles, whose launch rules make them.
pub use roundtable_specs::providers::{AgentFile, BROKER_URL_ENV, BrokerRoute, Stdin};

/// The search path every agent gets; images put their CLI in one of these.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What one launch needs from outside the Adapter.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    pub prompt: &'a str,
    pub model: Option<&'a str>,
}

/// A variable the launch fills in from outside the plan; only its name is part of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassedVariable {
    pub name: String,
    /// Where the value comes from: `placeholder` (a `credentialEnv` variable holding the
    /// session's broker placeholder), `credential` (its raw value, `credentialMode: env`),
    /// `proxy` or `capability`.
    pub source: &'static str,
}

/// `NO_PROXY` and `no_proxy` in a brokered session, whose `HTTPS_PROXY` is the broker too: the
/// base URL is on the container's loopback, and Gemini CLI sends plain `http://` through its one
/// proxy otherwise.
pub const NO_PROXY: &str = "127.0.0.1,localhost,::1";

/// The variables that make the usual TLS stacks trust the session CA (OpenSSL and curl, Python
/// `requests`, Node), for a client that ignores its base URL and goes through `HTTPS_PROXY`.
pub const TRUST_ENV: [&str; 3] = ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"];

/// The session CA's certificate as the agent reads it: root-owned, read-only, public.
pub fn session_ca_file(pem: &str) -> AgentFile {
    AgentFile::manifest(SESSION_CA, pem.to_owned())
}

/// A mount every agent container has (the same for every provider).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub path: &'static str,
    pub what: &'static str,
    pub read_only: bool,
}

/// How one agent CLI is launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderPlan {
    pub provider: Provider,
    pub argv: Vec<String>,
    pub stdin: Stdin,
    pub working_dir: &'static str,
    /// Variables with values fixed by the plan (no secrets among them).
    pub env: Vec<(String, String)>,
    /// Variables whose values the launch supplies: credentials, proxy, the MCP capability.
    pub passed_env: Vec<PassedVariable>,
    /// Directories and manifests under `/tmp/roundtable/`, in creation order.
    pub files: Vec<AgentFile>,
    /// Whether the session gets an MCP endpoint (and the agent a capability).
    pub mcp: bool,
    /// The command the CLI itself must start as its MCP server, when Roundtable writes it no
    /// manifest (a generic CLI with `supportsMcp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_bridge: Option<Vec<String>>,
    /// The provider's state folder, kept in a volume per Assignment (`persistentHome`).
    pub persistent_home: Option<&'static str>,
    /// The provider session this launch resumes, when it is a resume.
    pub resumes: Option<String>,
    /// Where model requests go when the Adapter is brokered; `None` otherwise.
    pub broker: Option<BrokerRoute>,
    pub mounts: Vec<Mount>,
}

impl ProviderPlan {
    /// Every variable name the agent's environment will hold, sorted.
    pub fn env_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.env.iter().map(|(name, _)| name.clone()).collect();
        names.extend(self.passed_env.iter().map(|v| v.name.clone()));
        names.sort();
        names.dedup();
        names
    }

    /// The argv for the session record: the prompt (or a resume's briefing), when it is an
    /// argument, elided.
    pub fn recorded_argv(&self, prompt: &str) -> Vec<String> {
        let mut argv: Vec<String> = self
            .argv
            .iter()
            .map(|arg| if arg == prompt && !prompt.is_empty() { "<prompt>".into() } else { arg.clone() })
            .collect();
        if self.resumes.is_some()
            && let Some(last) = argv.last_mut()
        {
            *last = "<briefing>".into();
        }
        argv
    }
}

/// Which of the session's sockets `/run/roundtable` holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sockets {
    pub egress: bool,
    pub mcp: bool,
    pub broker: bool,
}

impl Sockets {
    fn any(self) -> bool {
        self.egress || self.mcp || self.broker
    }

    fn described(self) -> &'static str {
        match (self.egress, self.mcp, self.broker) {
            (true, true, true) => "the session's sockets (egress.sock, mcp.sock, broker.sock)",
            (true, true, false) => "the session's sockets (egress.sock, mcp.sock)",
            (true, false, true) => "the session's sockets (egress.sock, broker.sock)",
            (false, true, true) => "the session's sockets (mcp.sock, broker.sock)",
            (true, false, false) => "the session's sockets (egress.sock)",
            (false, true, false) => "the session's sockets (mcp.sock)",
            (false, false, _) => "the session's sockets (broker.sock)",
        }
    }
}

/// The fixed mounts, as the session runtime creates them.
pub fn mounts(sockets: Sockets) -> Vec<Mount> {
    let mut mounts = vec![
        Mount { path: "/roundtable/source", what: "the provisioned source", read_only: true },
        Mount {
            path: WORKSPACE,
            what: "the agent's workspace (tmpfs volume, seeded from the source)",
            read_only: false,
        },
        Mount { path: "/tmp", what: "scratch (tmpfs volume) holding /tmp/roundtable/", read_only: false },
        Mount { path: BINARY, what: "the controller's own static binary", read_only: true },
        Mount { path: TASK, what: "the brief", read_only: true },
    ];
    if sockets.any() {
        mounts.push(Mount { path: "/run/roundtable", what: sockets.described(), read_only: false });
    }
    mounts
}

/// The Adapter's provider host of `scheme`, else its first host.
fn broker_host(adapter: &ResolvedAdapter, scheme: Scheme) -> Option<&str> {
    let hosts = || adapter.provider_hosts.iter().map(|host| host.as_str());
    hosts().find(|host| Scheme::of_host(host) == scheme).or_else(|| hosts().next())
}

/// The `credentialEnv` variable a CLI sends as its key for a host of `scheme`: the one named for
/// the provider (`Scheme::named_by`), else the first. The broker takes each placeholder only on
/// the host `ResolvedAdapter::credential_host` binds it to, by the same names.
fn credential_for(adapter: &ResolvedAdapter, scheme: Scheme) -> Option<&str> {
    let names = || adapter.credential_env.iter().map(|name| name.as_str());
    names().find(|name| Scheme::named_by(name) == Some(scheme)).or_else(|| names().next())
}

/// Where a brokered Adapter's CLI sends model requests; `None` when it is not brokered.
fn broker_route(adapter: &ResolvedAdapter) -> Option<BrokerRoute> {
    if !adapter.brokered() {
        return None;
    }
    // The scheme of the host the provider's CLI speaks to by default; a CLI with none picks its own.
    let Some(scheme) = adapter.provider.profile().broker else {
        return Some(BrokerRoute { host: None, base_url: format!("http://{BROKER_LISTEN}"), credential: None });
    };
    let host = broker_host(adapter, scheme)?;
    let host_scheme = Scheme::of_host(host);
    Some(BrokerRoute {
        host: Some(host.to_owned()),
        base_url: broker_base_url(host),
        credential: credential_for(adapter, if host_scheme == Scheme::Custom { scheme } else { host_scheme })
            .map(str::to_owned),
    })
}

/// The launch plan for `adapter`. `proxy`: the session has an egress gateway. A brokered
/// Adapter's CLI is pointed at the broker on the container's loopback (docs/providers.md).
pub fn plan(adapter: &ResolvedAdapter, input: PlanInput<'_>, proxy: bool) -> ProviderPlan {
    let provider = adapter.provider;
    let profile = provider.profile();
    // A generic CLI gets the socket and the capability but no manifest: it starts
    // `roundtable mcp stdio` itself (docs/providers.md).
    let mcp = adapter.mcp();
    let broker = broker_route(adapter);
    let mut env = vec![
        ("HOME".to_owned(), HOME.to_owned()),
        ("PATH".to_owned(), PATH.to_owned()),
        ("TMPDIR".to_owned(), TMPDIR.to_owned()),
    ];
    let mut files = vec![
        AgentFile::dir(AGENT_CONFIG, 0, 0o755),
        AgentFile::dir(HOME, AGENT_UID, 0o755),
        AgentFile::dir(TMPDIR, AGENT_UID, 0o700),
    ];
    let model = input.model.filter(|m| !m.is_empty());
    let model_flag = model.map(|m| format!("--model={m}"));
    let mut argv = vec![adapter.command.clone()];
    // The CLIs' flags come from their profiles, shared with their built-in resume patterns.
    if let Some(flags) = profile.headless.map(|headless| headless()) {
        argv.extend(flags.before);
        argv.extend(model_flag);
        argv.extend(flags.mcp.filter(|_| mcp));
        argv.extend(flags.after);
    }
    let launch =
        (profile.launch)(&LaunchInput { prompt: input.prompt, args: &adapter.args, mcp, broker: broker.as_ref() });
    argv.extend(launch.argv);
    env.extend(launch.env);
    files.extend(launch.files);
    let stdin = launch.stdin;
    // A brokered session's `HTTPS_PROXY` is the broker: a client that ignores its base URL is
    // intercepted there with the session CA, judged by the same rules (docs/broker.md).
    if broker.is_some() {
        for name in ["NO_PROXY", "no_proxy"] {
            env.push((name.into(), NO_PROXY.into()));
        }
        env.extend(TRUST_ENV.iter().map(|name| ((*name).to_owned(), SESSION_CA.to_owned())));
    }
    let credential_source = if broker.is_some() { "placeholder" } else { "credential" };
    let mut passed_env: Vec<PassedVariable> = adapter
        .credential_env
        .iter()
        .map(|name| PassedVariable { name: name.to_string(), source: credential_source })
        .collect();
    if proxy || broker.is_some() {
        for name in ["HTTPS_PROXY", "https_proxy"] {
            passed_env.push(PassedVariable { name: name.into(), source: "proxy" });
        }
    }
    if mcp {
        passed_env.push(PassedVariable { name: CAPABILITY_ENV.into(), source: "capability" });
    }
    let persistent_home = if adapter.persistent_home { provider.state_folder() } else { None };
    let mut mounts = mounts(Sockets { egress: proxy, mcp, broker: broker.is_some() });
    if let Some(home) = persistent_home {
        mounts.push(Mount {
            path: home,
            what: "the provider's home, kept per Assignment (persistentHome)",
            read_only: false,
        });
    }
    ProviderPlan {
        provider,
        argv,
        stdin,
        working_dir: WORKSPACE,
        env,
        passed_env,
        files,
        mcp,
        mcp_bridge: (mcp && profile.mcp == McpWiring::Bridge).then(bridge_command),
        persistent_home,
        resumes: None,
        broker,
        mounts,
    }
}

/// The plan that resumes provider session `session` with `briefing` as its final argument:
/// the same environment, files and mounts as a fresh launch, nothing on stdin.
pub fn resume_plan(
    adapter: &ResolvedAdapter,
    input: PlanInput<'_>,
    proxy: bool,
    session: &ExternalSessionId,
    briefing: &str,
) -> Result<ProviderPlan, ResumeRefused> {
    let argv = resume_argv(adapter, session, briefing)?;
    let mut resumed = plan(adapter, input, proxy);
    resumed.argv = argv;
    resumed.stdin = Stdin::Empty;
    resumed.resumes = Some(session.as_str().to_owned());
    Ok(resumed)
}

/// What a recorded resume command ends with: `roundtable resume` prints the real briefing.
pub const BRIEFING_PLACEHOLDER: &str = "<briefing from `roundtable resume`>";

/// Why a session cannot be resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeRefused {
    #[error("adapter {0} does not support resume (supportsResume is false)")]
    NotSupported(String),
    #[error("adapter {0} has no resumePattern")]
    NoPattern(String),
}

/// The argv that resumes `session` with `briefing` as one final argument. No shell ever sees
/// it: the pattern was split with shell quoting when it was parsed, and the id was checked.
pub fn resume_argv(
    adapter: &ResolvedAdapter,
    session: &ExternalSessionId,
    briefing: &str,
) -> Result<Vec<String>, ResumeRefused> {
    if !adapter.supports_resume {
        return Err(ResumeRefused::NotSupported(adapter.name.clone()));
    }
    let pattern = adapter.resume_pattern.as_ref().ok_or_else(|| ResumeRefused::NoPattern(adapter.name.clone()))?;
    let mut argv = pattern.render(session);
    argv.push(briefing.to_owned());
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_specs::builtins::template;

    fn adapter(name: &str) -> ResolvedAdapter {
        template(name).expect("built-in").resolve(name)
    }

    fn input(model: Option<&str>) -> PlanInput<'_> {
        PlanInput { prompt: "-rf fix the typo", model }
    }

    /// The built-in with `credentialMode: env`: the raw values in the agent's environment.
    fn env_mode(name: &str) -> ResolvedAdapter {
        let mut adapter = adapter(name);
        adapter.credential_mode = roundtable_specs::adapter::CredentialMode::Env;
        adapter
    }

    fn env_of(plan: &ProviderPlan) -> Vec<String> {
        plan.env.iter().filter(|(n, _)| n != "OPENCODE_CONFIG_CONTENT").map(|(n, v)| format!("{n}={v}")).collect()
    }

    #[test]
    fn codex_plan_is_exact() {
        let plan = plan(&adapter("codex"), input(Some("gpt-5-codex")), true);
        assert_eq!(
            plan.argv,
            [
                "codex",
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "-C",
                "/roundtable/workspace",
                "--model=gpt-5-codex",
                "-"
            ]
        );
        assert_eq!(plan.stdin, Stdin::Prompt);
        assert_eq!(
            env_of(&plan),
            [
                "HOME=/tmp/roundtable/home",
                "PATH=/usr/local/bin:/usr/bin:/bin",
                "TMPDIR=/tmp/roundtable/tmp",
                "CODEX_HOME=/tmp/roundtable/codex",
                "NO_PROXY=127.0.0.1,localhost,::1",
                "no_proxy=127.0.0.1,localhost,::1",
                "SSL_CERT_FILE=/tmp/roundtable/session-ca.pem",
                "REQUESTS_CA_BUNDLE=/tmp/roundtable/session-ca.pem",
                "NODE_EXTRA_CA_CERTS=/tmp/roundtable/session-ca.pem"
            ]
        );
        assert_eq!(
            plan.env_names(),
            [
                "CODEX_API_KEY",
                "CODEX_HOME",
                "HOME",
                "HTTPS_PROXY",
                "NODE_EXTRA_CA_CERTS",
                "NO_PROXY",
                "PATH",
                "REQUESTS_CA_BUNDLE",
                "ROUNDTABLE_AGENT_CAPABILITY",
                "SSL_CERT_FILE",
                "TMPDIR",
                "https_proxy",
                "no_proxy"
            ]
        );
        assert_eq!(
            plan.broker,
            Some(BrokerRoute {
                host: Some("api.openai.com".into()),
                base_url: "http://127.0.0.1:3129/api.openai.com".into(),
                credential: Some("CODEX_API_KEY".into()),
            })
        );
        let config = plan.files.iter().find(|f| f.path.ends_with("config.toml")).and_then(|f| f.contents.clone());
        assert_eq!(
            config,
            Some(
                "# Written by Roundtable for this session; read-only.\n\
                 model_provider = \"roundtable\"\n\
                 \n\
                 [model_providers.roundtable]\n\
                 name = \"Roundtable broker\"\n\
                 base_url = \"http://127.0.0.1:3129/api.openai.com/v1\"\n\
                 env_key = \"CODEX_API_KEY\"\n\
                 wire_api = \"responses\"\n\
                 supports_websockets = false\n\
                 requires_openai_auth = false\n\
                 \n\
                 [mcp_servers.roundtable]\n\
                 command = \"/roundtable/bin/roundtable\"\n\
                 args = [\"mcp\", \"stdio\", \"--unix-socket\", \"/run/roundtable/mcp.sock\"]\n\
                 env_vars = [\"ROUNDTABLE_AGENT_CAPABILITY\"]\n\
                 startup_timeout_sec = 20\n\
                 tool_timeout_sec = 600\n\
                 required = true\n\
                 default_tools_approval_mode = \"approve\"\n"
                    .to_owned()
            )
        );
        let dirs: Vec<(&str, u32, u32)> = plan.files.iter().map(|f| (f.path.as_str(), f.owner, f.mode)).collect();
        assert_eq!(
            dirs,
            [
                ("/tmp/roundtable", 0, 0o755),
                ("/tmp/roundtable/home", 1000, 0o755),
                ("/tmp/roundtable/tmp", 1000, 0o700),
                ("/tmp/roundtable/codex", 0, 0o1777),
                ("/tmp/roundtable/codex/config.toml", 0, 0o444),
            ]
        );
    }

    #[test]
    fn claude_plan_is_exact_and_has_no_model_flag_without_a_model() {
        let plan = plan(&adapter("claude"), input(None), false);
        assert_eq!(
            plan.argv,
            [
                "claude",
                "-p",
                "--output-format=stream-json",
                "--verbose",
                "--mcp-config=/tmp/roundtable/mcp.json",
                "--strict-mcp-config",
                "--permission-mode=bypassPermissions"
            ]
        );
        assert_eq!(
            env_of(&plan)[3..],
            [
                "CLAUDE_CONFIG_DIR=/tmp/roundtable/claude",
                "DISABLE_AUTOUPDATER=1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
                "ANTHROPIC_BASE_URL=http://127.0.0.1:3129/api.anthropic.com",
                "NO_PROXY=127.0.0.1,localhost,::1",
                "no_proxy=127.0.0.1,localhost,::1",
                "SSL_CERT_FILE=/tmp/roundtable/session-ca.pem",
                "REQUESTS_CA_BUNDLE=/tmp/roundtable/session-ca.pem",
                "NODE_EXTRA_CA_CERTS=/tmp/roundtable/session-ca.pem"
            ]
        );
        let proxy = plan.passed_env.iter().find(|v| v.name == "HTTPS_PROXY").map(|v| v.source);
        assert_eq!(proxy, Some("proxy"), "no gateway, but the broker is the proxy");
    }

    #[test]
    fn gemini_plan_is_exact() {
        let plan = plan(&adapter("gemini"), input(Some("gemini-2.5-pro")), true);
        assert_eq!(
            plan.argv,
            [
                "gemini",
                "--output-format=stream-json",
                "--model=gemini-2.5-pro",
                "--approval-mode=yolo",
                "--allowed-mcp-server-names=roundtable"
            ]
        );
        assert_eq!(
            env_of(&plan)[3..],
            [
                "GEMINI_CLI_HOME=/tmp/roundtable/gemini",
                "GEMINI_CLI_SYSTEM_SETTINGS_PATH=/tmp/roundtable/gemini-settings.json",
                "GEMINI_CLI_TRUST_WORKSPACE=true",
                "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:3129/generativelanguage.googleapis.com",
                "NO_PROXY=127.0.0.1,localhost,::1",
                "no_proxy=127.0.0.1,localhost,::1",
                "SSL_CERT_FILE=/tmp/roundtable/session-ca.pem",
                "REQUESTS_CA_BUNDLE=/tmp/roundtable/session-ca.pem",
                "NODE_EXTRA_CA_CERTS=/tmp/roundtable/session-ca.pem"
            ]
        );
    }

    #[test]
    fn opencode_plan_is_exact_and_carries_its_manifest_in_the_environment() {
        let plan = plan(&adapter("opencode"), input(Some("anthropic/claude-sonnet-4-5")), true);
        assert_eq!(
            plan.argv,
            ["opencode", "run", "--format=json", "--model=anthropic/claude-sonnet-4-5", "--dir=/roundtable/workspace"]
        );
        let content = plan.env.iter().find(|(n, _)| n == "OPENCODE_CONFIG_CONTENT").map(|(_, v)| v.clone());
        let file =
            plan.files.iter().find(|f| f.path == "/tmp/roundtable/opencode.json").and_then(|f| f.contents.clone());
        assert_eq!(content, file, "the variable and the file say the same");
        let config: serde_json::Value = serde_json::from_str(&content.expect("config")).expect("json");
        assert_eq!(
            config["provider"],
            serde_json::json!({"anthropic": {"options": {"baseURL": "http://127.0.0.1:3129/api.anthropic.com/v1"}}})
        );
    }

    #[test]
    fn generic_puts_the_prompt_last_and_mock_takes_none() {
        let generic = plan(&adapter("generic"), input(None), false);
        assert_eq!(generic.argv, ["sh", "-c", "-rf fix the typo"]);
        assert_eq!(generic.stdin, Stdin::Empty);
        assert!(!generic.mcp);
        assert_eq!(generic.recorded_argv("-rf fix the typo"), ["sh", "-c", "<prompt>"]);
        let mock = plan(&adapter("mock"), input(None), false);
        assert_eq!(mock.argv, ["/roundtable/bin/roundtable", "sandbox", "mock"]);
    }

    #[test]
    fn an_adapter_without_mcp_gets_no_manifest_and_no_capability() {
        let mut codex = env_mode("codex");
        codex.supports_mcp = false;
        let plan = plan(&codex, input(None), false);
        assert!(!plan.mcp);
        assert!(plan.files.iter().all(|f| f.contents.is_none()));
        assert!(!plan.env_names().contains(&CAPABILITY_ENV.to_owned()));
    }

    #[test]
    fn a_generic_adapter_with_mcp_gets_the_socket_and_the_capability_but_no_manifest() {
        let mut custom = adapter("generic");
        custom.name = "my-agent".into();
        custom.supports_mcp = true;
        let plan = plan(&custom, input(None), false);
        assert!(plan.mcp);
        assert_eq!(plan.argv, ["sh", "-c", "-rf fix the typo"], "the argv is the generic one");
        assert!(plan.passed_env.contains(&PassedVariable { name: CAPABILITY_ENV.into(), source: "capability" }));
        assert!(
            plan.mounts.iter().any(|m| m.path == "/run/roundtable" && !m.read_only),
            "the session's sockets are mounted: {:?}",
            plan.mounts
        );
        assert!(plan.files.iter().all(|f| f.contents.is_none()), "no manifest: the CLI starts the bridge itself");
        assert_eq!(
            plan.mcp_bridge.as_deref(),
            Some(
                &["/roundtable/bin/roundtable", "mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"]
                    .map(String::from)[..]
            )
        );
        // The built-in mock calls no tool, so it gets neither.
        let mut mock = adapter("mock");
        mock.supports_mcp = true;
        let plan = super::plan(&mock, input(None), false);
        assert!(!plan.mcp && !plan.env_names().contains(&CAPABILITY_ENV.to_owned()));
        assert!(plan.mounts.iter().all(|m| m.path != "/run/roundtable"));
    }

    #[test]
    fn a_custom_adapter_runs_the_plan_of_its_provider() {
        let mut custom = adapter("codex");
        custom.name = "codex-fast".into();
        custom.command = "/opt/codex/bin/codex".into();
        let plan = plan(&custom, input(None), false);
        assert_eq!(plan.argv[..2], ["/opt/codex/bin/codex", "exec"]);
    }

    #[test]
    fn resume_appends_the_briefing_and_refuses_without_support() {
        let id: ExternalSessionId = "0199a213-81c0-7800-8aa1-bbab2a035a53".parse().expect("id");
        let codex = adapter("codex");
        assert_eq!(resume_argv(&codex, &id, "brief"), Err(ResumeRefused::NotSupported("codex".into())));
        let mut resumable = codex.clone();
        resumable.supports_resume = true;
        let argv = resume_argv(&resumable, &id, "go on; rm -rf /").expect("resumable");
        assert_eq!(argv.last().map(String::as_str), Some("go on; rm -rf /"));
        assert!(argv.contains(&id.as_str().to_owned()));
    }

    #[test]
    fn builtin_resume_commands_keep_the_headless_flags_and_end_with_the_briefing() {
        let id: ExternalSessionId = "ses_f86f2df67ffep5CKpMOXIyR44R".parse().expect("id");
        let expected: [(&str, &[&str]); 4] = [
            (
                "codex",
                &[
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "--dangerously-bypass-approvals-and-sandbox",
                    "-C",
                    "/roundtable/workspace",
                    "resume",
                ],
            ),
            (
                "claude",
                &[
                    "-p",
                    "--output-format=stream-json",
                    "--verbose",
                    "--mcp-config=/tmp/roundtable/mcp.json",
                    "--strict-mcp-config",
                    "--permission-mode=bypassPermissions",
                    "--resume",
                ],
            ),
            (
                "gemini",
                &[
                    "--output-format=stream-json",
                    "--approval-mode=yolo",
                    "--allowed-mcp-server-names=roundtable",
                    "--resume",
                ],
            ),
            ("opencode", &["run", "--format=json", "--dir=/roundtable/workspace", "--session"]),
        ];
        for (name, flags) in expected {
            let mut resumable = adapter(name);
            resumable.supports_resume = true;
            let argv = resume_argv(&resumable, &id, "the briefing").expect("resumable");
            let mut want = vec![name.to_owned()];
            want.extend(flags.iter().map(|f| (*f).to_owned()));
            want.extend([id.as_str().to_owned(), "the briefing".to_owned()]);
            assert_eq!(argv, want, "{name}");
        }
    }

    fn sources(plan: &ProviderPlan) -> Vec<(&str, &str)> {
        plan.passed_env.iter().map(|v| (v.name.as_str(), v.source)).collect()
    }

    fn value<'p>(plan: &'p ProviderPlan, name: &str) -> Option<&'p str> {
        plan.env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    const BROKER_VARIABLES: [&str; 6] = [
        "ANTHROPIC_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
        "ROUNDTABLE_BROKER_URL",
        "NO_PROXY",
        "no_proxy",
        "OPENAI_BASE_URL",
    ];

    #[test]
    fn brokered_credentials_are_placeholders_and_the_sockets_mount_names_the_broker() {
        for name in ["codex", "claude", "gemini", "opencode"] {
            let plan = plan(&adapter(name), input(None), true);
            let credential = adapter(name).credential_env[0].to_string();
            assert_eq!(sources(&plan)[0], (credential.as_str(), "placeholder"), "{name}");
            let sockets = plan.mounts.iter().find(|m| m.path == "/run/roundtable").expect("sockets");
            assert_eq!(sockets.what, "the session's sockets (egress.sock, mcp.sock, broker.sock)", "{name}");
            assert!(plan.broker.is_some(), "{name}");
        }
        // No gateway, no MCP: the broker's socket alone is still mounted.
        let mut claude = adapter("claude");
        claude.supports_mcp = false;
        let plan = plan(&claude, input(None), false);
        let sockets = plan.mounts.iter().find(|m| m.path == "/run/roundtable").expect("sockets");
        assert_eq!(sockets.what, "the session's sockets (broker.sock)");
    }

    #[test]
    fn env_mode_plans_point_no_cli_at_the_broker() {
        for name in ["codex", "claude", "gemini", "opencode"] {
            let plan = plan(&env_mode(name), input(None), true);
            let credential = adapter(name).credential_env[0].to_string();
            assert_eq!(sources(&plan)[0], (credential.as_str(), "credential"), "{name}");
            assert_eq!(plan.broker, None, "{name}");
            for variable in BROKER_VARIABLES {
                assert_eq!(value(&plan, variable), None, "{name}: {variable}");
            }
            assert!(
                plan.files.iter().filter_map(|f| f.contents.as_deref()).all(|text| !text.contains("3129")),
                "{name}"
            );
            let sockets = plan.mounts.iter().find(|m| m.path == "/run/roundtable").expect("sockets");
            assert_eq!(sockets.what, "the session's sockets (egress.sock, mcp.sock)", "{name}");
        }
        let opencode = plan(&env_mode("opencode"), input(None), true);
        let config: serde_json::Value =
            serde_json::from_str(value(&opencode, "OPENCODE_CONFIG_CONTENT").expect("config")).expect("json");
        assert!(config.get("provider").is_none());
    }

    #[test]
    fn a_brokered_codex_without_mcp_still_gets_its_provider_config() {
        let mut codex = adapter("codex");
        codex.supports_mcp = false;
        let plan = plan(&codex, input(None), false);
        let config = plan.files.iter().find(|f| f.path == "/tmp/roundtable/codex/config.toml").expect("config");
        let text = config.contents.as_deref().expect("contents");
        assert!(text.contains("model_provider = \"roundtable\""), "{text}");
        assert!(text.contains("base_url = \"http://127.0.0.1:3129/api.openai.com/v1\""), "{text}");
        assert!(!text.contains("mcp_servers"), "{text}");
        assert_eq!((config.owner, config.mode), (0, 0o444), "read-only to the agent");
        assert_eq!(value(&plan, "NO_PROXY"), Some(NO_PROXY), "the base URL bypasses HTTPS_PROXY, which is the broker");
        assert_eq!(value(&plan, "SSL_CERT_FILE"), Some("/tmp/roundtable/session-ca.pem"));
        assert!(plan.env_names().contains(&"HTTPS_PROXY".to_owned()), "a CLI ignoring its base URL is intercepted");
    }

    #[test]
    fn the_broker_host_is_the_one_of_the_providers_scheme_and_the_key_the_one_named_for_it() {
        let mut codex = adapter("codex");
        codex.provider_hosts =
            vec!["models.example.com".parse().expect("host"), "api.openai.com".parse().expect("host")];
        codex.credential_env = vec!["OTHER_TOKEN".parse().expect("name"), "OPENAI_API_KEY".parse().expect("name")];
        let plan = plan(&codex, input(None), false);
        let route = plan.broker.expect("brokered");
        assert_eq!(route.host.as_deref(), Some("api.openai.com"));
        assert_eq!(route.credential.as_deref(), Some("OPENAI_API_KEY"));
        let config = plan.files.iter().find_map(|f| f.contents.clone().filter(|_| f.path.ends_with("config.toml")));
        assert!(config.expect("config").contains("env_key = \"OPENAI_API_KEY\""));
        // No host of the scheme: the first one, and the first variable.
        let mut claude = adapter("claude");
        claude.provider_hosts = vec!["llm.internal.example".parse().expect("host")];
        claude.credential_env = vec!["LLM_TOKEN".parse().expect("name")];
        let plan = super::plan(&claude, input(None), false);
        assert_eq!(value(&plan, "ANTHROPIC_BASE_URL"), Some("http://127.0.0.1:3129/llm.internal.example"));
        assert_eq!(plan.broker.and_then(|r| r.credential).as_deref(), Some("LLM_TOKEN"));
    }

    #[test]
    fn an_opencode_pointed_at_openai_configures_the_openai_provider() {
        let mut opencode = adapter("opencode");
        opencode.provider_hosts = vec!["api.openai.com".parse().expect("host")];
        opencode.credential_env = vec!["OPENAI_API_KEY".parse().expect("name")];
        let plan = plan(&opencode, input(None), false);
        let config: serde_json::Value =
            serde_json::from_str(value(&plan, "OPENCODE_CONFIG_CONTENT").expect("config")).expect("json");
        assert_eq!(
            config["provider"],
            serde_json::json!({"openai": {"options": {"baseURL": "http://127.0.0.1:3129/api.openai.com/v1"}}})
        );
    }

    #[test]
    fn a_brokered_generic_adapter_gets_the_broker_url_and_no_placeholder_in_the_plan() {
        let mut custom = adapter("generic");
        custom.name = "my-agent".into();
        custom.provider_hosts = vec!["api.example.com".parse().expect("host")];
        custom.credential_env = vec!["EXAMPLE_KEY".parse().expect("name")];
        let plan = plan(&custom, input(None), true);
        assert_eq!(value(&plan, "ROUNDTABLE_BROKER_URL"), Some("http://127.0.0.1:3129"));
        assert_eq!(value(&plan, "NO_PROXY"), Some("127.0.0.1,localhost,::1"));
        assert_eq!(value(&plan, "no_proxy"), Some("127.0.0.1,localhost,::1"));
        assert_eq!(sources(&plan)[0], ("EXAMPLE_KEY", "placeholder"));
        assert_eq!(plan.broker.as_ref().map(|r| r.host.clone()), Some(None));
        let serialized = serde_json::to_string(&plan).expect("json");
        assert!(!serialized.contains("rt-placeholder-"), "{serialized}");
        // Opted out, or with nowhere to spend the key: no broker.
        custom.credential_mode = roundtable_specs::adapter::CredentialMode::Env;
        let plan = super::plan(&custom, input(None), true);
        assert_eq!(value(&plan, "ROUNDTABLE_BROKER_URL"), None);
        assert_eq!(value(&plan, "NO_PROXY"), None);
        assert_eq!(sources(&plan)[0], ("EXAMPLE_KEY", "credential"));
        let mut hostless = adapter("claude");
        hostless.provider_hosts.clear();
        let plan = super::plan(&hostless, input(None), false);
        assert_eq!((plan.broker.clone(), value(&plan, "ANTHROPIC_BASE_URL")), (None, None));
    }
}
