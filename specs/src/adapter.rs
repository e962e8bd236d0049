//! The Adapter kind: how to run one agent CLI, merged field by field over a built-in template.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::broker::Budget;
use crate::names::{Cidr, EnvVarName, HostName, ImageRef, RuntimeClass, VersionFloor};
use crate::resume::ResumePattern;
use crate::units::{Cpus, Duration, Quantity};

/// `spec` of an Adapter. Every field is optional so that a spec can override a built-in
/// template field by field; unset fields take the template's value, then the defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdapterSpec {
    /// Which CLI's plan runs this adapter (argv, stdin, environment, MCP manifest, output
    /// capture). Built-ins set their own; a custom adapter defaults to `generic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// Required to execute. Pinned means a digest reference or a full image ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageRef>,
    /// One argv element, never split; empty means the adapter name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Fixed arguments after the command (generic and custom adapters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(regex(pattern = crate::field_patterns::NO_NUL)))]
    pub args: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_resume: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_pattern: Option<ResumePattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_mcp: Option<bool>,
    /// A declaration, not enforcement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_readonly_workspace: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captures_session_id: Option<bool>,
    /// Keep the provider CLI's home (its session store) in a volume per Assignment, so a later
    /// execution of the same Assignment resumes the earlier provider session. Off by default:
    /// the home then outlives the container (see docs/providers.md for what it holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_home: Option<bool>,
    /// Exact DNS names the egress gateway may reach for this adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("uniqueItems" = true))]
    pub provider_hosts: Option<Vec<HostName>>,
    /// Names of the variables whose values come from the controller's environment or
    /// `--secrets-file`. Under `credentialMode: broker` (the default) the agent gets a
    /// per-session placeholder in each and the session's broker swaps in the value on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("uniqueItems" = true))]
    pub credential_env: Option<Vec<EnvVarName>>,
    /// How `credentialEnv` values reach the agent: `broker` (default) or `env`, the explicit
    /// opt-out that puts the raw values in the agent's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_mode: Option<CredentialMode>,
    /// The default budget of this adapter's sessions; an Assignment's `budget` wins field by field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesSpec>,
    /// The OCI runtime its containers run under, by the name the engine registered it as
    /// (`runsc` for gVisor; docs/runtime-classes.md). Unset: the AdmissionPolicy's
    /// `runtimeClass`, else the engine's default runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class: Option<RuntimeClass>,
    /// Capture cap per output stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_limit: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// Security floor for the CLI's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_version: Option<VersionFloor>,
    /// Admission contract: a file name in `.roundtable/contracts/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::field_patterns::CONTRACT_FILE))]
    pub contract: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// How an Adapter's `credentialEnv` values reach its agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CredentialMode {
    /// The agent holds a per-session placeholder; the value stays in the daemon, which swaps it
    /// in on the way to the provider (docs/broker.md).
    #[default]
    Broker,
    /// The raw values are in the agent's environment, where any code the agent runs can read
    /// and print them. For a tool that truly needs the value; `validate` warns.
    Env,
}

impl CredentialMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialMode::Broker => "broker",
            CredentialMode::Env => "env",
        }
    }
}

// Declared with its profile, the one place that says what each provider is.
pub use crate::providers::Provider;

/// `spec.egress` of an Adapter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressSpec {
    /// Explicit exceptions to the public-address rule; empty by default.
    #[serde(default)]
    #[schemars(extend("uniqueItems" = true))]
    pub allow_cidrs: Vec<Cidr>,
}

/// `spec.resources` of an Adapter; each field overrides on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourcesSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Cpus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_size: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp_size: Option<Quantity>,
}

/// Resource limits after defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub memory: Quantity,
    pub cpus: Cpus,
    pub pids: u32,
    pub workspace_size: Quantity,
    pub tmp_size: Quantity,
}

/// The hard caps no spec can exceed, and the defaults below them.
pub mod limits {
    use super::*;

    pub const MAX_MEMORY: Quantity = Quantity::gibibytes(16);
    pub const MAX_CPUS: Cpus = Cpus::whole(8);
    pub const MAX_PIDS: u32 = 4096;
    pub const MAX_WORKSPACE: Quantity = Quantity::gibibytes(16);
    pub const MAX_TMP: Quantity = Quantity::gibibytes(4);
    pub const MAX_OUTPUT_LIMIT: Quantity = Quantity::mebibytes(16);

    /// The smallest memory limit Docker accepts (6 MiB).
    pub const MIN_MEMORY: Quantity = Quantity::mebibytes(6);
    /// The smallest CPU limit Docker accepts: 0.01 CPU (`NanoCpus` of 10 000 000).
    pub const MIN_CPUS: Cpus = Cpus::from_millis(10);
    /// The smallest workspace volume: it holds the files the agent is given and all it writes.
    pub const MIN_WORKSPACE: Quantity = Quantity::mebibytes(1);
    /// The longest timeout, for an Adapter and an Assignment alike, as written in messages.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
    pub const MAX_TIMEOUT_TEXT: &str = "24h";
    /// The shortest timeout: timeouts are counted and reported in whole seconds.
    pub const MIN_TIMEOUT: Duration = Duration::from_secs(1);

    pub const DEFAULT_MEMORY: Quantity = Quantity::gibibytes(2);
    pub const DEFAULT_CPUS: Cpus = Cpus::whole(2);
    pub const DEFAULT_PIDS: u32 = 256;
    pub const DEFAULT_WORKSPACE: Quantity = Quantity::gibibytes(1);
    pub const DEFAULT_TMP: Quantity = Quantity::mebibytes(512);
    pub const DEFAULT_OUTPUT_LIMIT: Quantity = Quantity::mebibytes(1);
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
}

/// Routing capabilities an Assignment may require and an Adapter may offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Capability {
    Mcp,
    Resume,
    SessionCapture,
    ReadonlyWorkspace,
    Egress,
}

impl Capability {
    pub const ALL: [Capability; 5] = [
        Capability::Mcp,
        Capability::Resume,
        Capability::SessionCapture,
        Capability::ReadonlyWorkspace,
        Capability::Egress,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Mcp => "mcp",
            Capability::Resume => "resume",
            Capability::SessionCapture => "sessionCapture",
            Capability::ReadonlyWorkspace => "readonlyWorkspace",
            Capability::Egress => "egress",
        }
    }
}

/// An Adapter with every field decided: a template, a spec, or a spec over a template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedAdapter {
    pub name: String,
    pub provider: Provider,
    pub image: Option<ImageRef>,
    pub command: String,
    pub args: Vec<String>,
    pub supports_resume: bool,
    pub resume_pattern: Option<ResumePattern>,
    pub supports_mcp: bool,
    pub supports_readonly_workspace: bool,
    pub captures_session_id: bool,
    pub persistent_home: bool,
    pub provider_hosts: Vec<HostName>,
    pub credential_env: Vec<EnvVarName>,
    pub credential_mode: CredentialMode,
    pub budget: Budget,
    pub allow_cidrs: Vec<Cidr>,
    pub resources: Resources,
    pub runtime_class: Option<RuntimeClass>,
    pub output_limit: Quantity,
    pub timeout: Duration,
    pub min_version: Option<VersionFloor>,
    pub contract: Option<String>,
    pub enabled: bool,
}

impl AdapterSpec {
    /// This spec over `base`: every field this spec sets wins, the rest come from `base`.
    /// `resources` merges per field; lists replace whole lists.
    pub fn over(&self, base: &AdapterSpec) -> AdapterSpec {
        let resources = match (&self.resources, &base.resources) {
            (Some(mine), Some(theirs)) => Some(ResourcesSpec {
                memory: mine.memory.or(theirs.memory),
                cpus: mine.cpus.or(theirs.cpus),
                pids: mine.pids.or(theirs.pids),
                workspace_size: mine.workspace_size.or(theirs.workspace_size),
                tmp_size: mine.tmp_size.or(theirs.tmp_size),
            }),
            (mine, theirs) => mine.clone().or_else(|| theirs.clone()),
        };
        AdapterSpec {
            provider: self.provider.or(base.provider),
            image: self.image.clone().or_else(|| base.image.clone()),
            command: self.command.clone().or_else(|| base.command.clone()),
            args: self.args.clone().or_else(|| base.args.clone()),
            supports_resume: self.supports_resume.or(base.supports_resume),
            resume_pattern: self.resume_pattern.clone().or_else(|| base.resume_pattern.clone()),
            supports_mcp: self.supports_mcp.or(base.supports_mcp),
            supports_readonly_workspace: self.supports_readonly_workspace.or(base.supports_readonly_workspace),
            captures_session_id: self.captures_session_id.or(base.captures_session_id),
            persistent_home: self.persistent_home.or(base.persistent_home),
            provider_hosts: self.provider_hosts.clone().or_else(|| base.provider_hosts.clone()),
            credential_env: self.credential_env.clone().or_else(|| base.credential_env.clone()),
            credential_mode: self.credential_mode.or(base.credential_mode),
            budget: self.budget.or(base.budget),
            egress: self.egress.clone().or_else(|| base.egress.clone()),
            resources,
            runtime_class: self.runtime_class.clone().or_else(|| base.runtime_class.clone()),
            output_limit: self.output_limit.or(base.output_limit),
            timeout: self.timeout.or(base.timeout),
            min_version: self.min_version.clone().or_else(|| base.min_version.clone()),
            contract: self.contract.clone().or_else(|| base.contract.clone()),
            enabled: self.enabled.or(base.enabled),
        }
    }

    /// Applies the defaults; the caps are checked by validation, not here.
    pub fn resolve(&self, name: &str) -> ResolvedAdapter {
        use limits::*;
        let resources = self.resources.clone().unwrap_or_default();
        let command = self.command.clone().filter(|c| !c.is_empty()).unwrap_or_else(|| name.to_owned());
        ResolvedAdapter {
            name: name.to_owned(),
            provider: self.provider.unwrap_or(Provider::Generic),
            image: self.image.clone(),
            command,
            args: self.args.clone().unwrap_or_default(),
            supports_resume: self.supports_resume.unwrap_or(false),
            resume_pattern: self.resume_pattern.clone(),
            supports_mcp: self.supports_mcp.unwrap_or(false),
            supports_readonly_workspace: self.supports_readonly_workspace.unwrap_or(false),
            captures_session_id: self.captures_session_id.unwrap_or(false),
            persistent_home: self.persistent_home.unwrap_or(false),
            provider_hosts: self.provider_hosts.clone().unwrap_or_default(),
            credential_env: self.credential_env.clone().unwrap_or_default(),
            credential_mode: self.credential_mode.unwrap_or_default(),
            budget: self.budget.unwrap_or_default(),
            allow_cidrs: self.egress.clone().unwrap_or_default().allow_cidrs,
            resources: Resources {
                memory: resources.memory.unwrap_or(DEFAULT_MEMORY),
                cpus: resources.cpus.unwrap_or(DEFAULT_CPUS),
                pids: resources.pids.unwrap_or(DEFAULT_PIDS),
                workspace_size: resources.workspace_size.unwrap_or(DEFAULT_WORKSPACE),
                tmp_size: resources.tmp_size.unwrap_or(DEFAULT_TMP),
            },
            runtime_class: self.runtime_class.clone(),
            output_limit: self.output_limit.unwrap_or(DEFAULT_OUTPUT_LIMIT),
            timeout: self.timeout.unwrap_or(DEFAULT_TIMEOUT),
            min_version: self.min_version.clone(),
            contract: self.contract.clone(),
            enabled: self.enabled.unwrap_or(true),
        }
    }
}

impl ResolvedAdapter {
    /// Whether its agents hold placeholders instead of the `credentialEnv` values: always, unless
    /// it opted out with `credentialMode: env`. An agent never sees a raw value by default, even
    /// where it has no provider host to spend it on.
    pub fn holds_placeholders(&self) -> bool {
        self.credential_mode == CredentialMode::Broker && !self.credential_env.is_empty()
    }

    /// Whether its sessions get an egress gateway and the agent `HTTPS_PROXY`: it has provider
    /// hosts and they are not brokered (a brokered host is reached only through the broker).
    pub fn egress_proxy(&self) -> bool {
        !self.provider_hosts.is_empty() && !self.brokered()
    }

    /// The one provider host `credential` may be spent on: the host of the scheme its name names
    /// (`CODEX_API_KEY` → `api.openai.com`), else the Adapter's first host. The broker refuses its
    /// placeholder on any other host, so one provider's key never reaches another.
    pub fn credential_host(&self, credential: &str) -> Option<&HostName> {
        let named = crate::broker::Scheme::named_by(credential);
        named
            .and_then(|scheme| {
                self.provider_hosts.iter().find(|host| crate::broker::Scheme::of_host(host.as_str()) == scheme)
            })
            .or_else(|| self.provider_hosts.first())
    }

    /// Whether its sessions get a credential broker: it holds placeholders and has provider
    /// hosts to spend them on, which are then reached only through the broker.
    pub fn brokered(&self) -> bool {
        self.holds_placeholders() && !self.provider_hosts.is_empty()
    }

    /// Whether its agent reaches the session's Unix sockets on the host: the egress gateway or
    /// the credential broker (it has provider hosts) or the MCP endpoint.
    pub fn uses_host_sockets(&self) -> bool {
        !self.provider_hosts.is_empty() || self.mcp()
    }

    /// Whether its sessions get an MCP endpoint and the agent a capability: `supportsMcp` on a
    /// provider whose agent can use one. The launch plan and the capabilities both ask this.
    pub fn mcp(&self) -> bool {
        self.supports_mcp && self.provider.can_use_mcp()
    }

    /// Capabilities derived from the configuration and what its provider's plan really does,
    /// never from the adapter's name: MCP where the session gets an endpoint, capture only where
    /// the provider has a machine-readable output, resume only where an id can be captured to
    /// fill the pattern.
    pub fn capabilities(&self) -> BTreeSet<Capability> {
        let mut caps = BTreeSet::new();
        if self.mcp() {
            caps.insert(Capability::Mcp);
        }
        let captures = self.captures_session_id && self.provider.has_session_output();
        if captures {
            caps.insert(Capability::SessionCapture);
        }
        if self.supports_resume && self.resume_pattern.is_some() && captures {
            caps.insert(Capability::Resume);
        }
        if self.supports_readonly_workspace {
            caps.insert(Capability::ReadonlyWorkspace);
        }
        if !self.provider_hosts.is_empty() {
            caps.insert(Capability::Egress);
        }
        caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_overrides_base_field_by_field() {
        let base = AdapterSpec {
            command: Some("codex".into()),
            supports_mcp: Some(true),
            resources: Some(ResourcesSpec {
                memory: Some(Quantity::gibibytes(4)),
                pids: Some(100),
                ..Default::default()
            }),
            ..Default::default()
        };
        let spec = AdapterSpec {
            supports_mcp: Some(false),
            resources: Some(ResourcesSpec { pids: Some(50), ..Default::default() }),
            ..Default::default()
        };
        let merged = spec.over(&base).resolve("codex");
        assert_eq!(merged.command, "codex");
        assert!(!merged.supports_mcp);
        assert_eq!(merged.resources.memory, Quantity::gibibytes(4));
        assert_eq!(merged.resources.pids, 50);
        assert_eq!(merged.resources.tmp_size, limits::DEFAULT_TMP);
    }

    #[test]
    fn empty_command_means_the_adapter_name() {
        let spec = AdapterSpec { command: Some(String::new()), ..Default::default() };
        assert_eq!(spec.resolve("my-cli").command, "my-cli");
    }

    #[test]
    fn capabilities_come_from_configuration_and_what_the_provider_can_do() {
        let spec = AdapterSpec {
            provider: Some(Provider::Codex),
            supports_mcp: Some(true),
            supports_resume: Some(true),
            provider_hosts: Some(vec!["api.example.com".parse().expect("host")]),
            ..Default::default()
        };
        let caps = spec.resolve("anything").capabilities();
        // supportsResume without a pattern cannot resume.
        assert_eq!(caps, BTreeSet::from([Capability::Mcp, Capability::Egress]));
        // A generic CLI starts the MCP bridge itself, but has no output to capture.
        let generic = AdapterSpec { supports_mcp: Some(true), captures_session_id: Some(true), ..Default::default() };
        assert_eq!(generic.resolve("custom").capabilities(), BTreeSet::from([Capability::Mcp]));
        // The built-in mock calls no tool.
        let mock = AdapterSpec { provider: Some(Provider::Mock), supports_mcp: Some(true), ..Default::default() };
        assert!(!mock.resolve("mine").mcp());
    }
}
