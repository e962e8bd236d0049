//! Provider profiles: everything Roundtable knows about one agent CLI, in one file per provider
//! (`codex.rs`, `claude.rs`, `gemini.rs`, `opencode.rs`, `generic.rs`, `mock.rs`), reached
//! through one lookup, [`Provider::profile`].
//!
//! A profile holds its built-in Adapter template, its built-in admission contract, the broker
//! scheme its CLI speaks by default, its launch rules (headless flags, the resume flag, the
//! environment and files its plan adds, its MCP manifest), its output capture rules, the
//! validation rule only it has, and the configuration folders its CLI reads from a repository
//! (which `protected.rs` protects). Every field every provider must answer is required, so a
//! profile that forgets one does not compile; `Option` is used only where "none" is an answer.
//!
//! The rules here are pure data and functions over data. `roundtable-agents` assembles plans and
//! reads outputs with them; `builtins.rs`, `contract.rs`, `validate.rs` and `protected.rs` read
//! the rest. A new provider is a variant below, its file, its contract YAML and its docs
//! (docs/providers.md, "Adding a provider").

mod capture;
mod launch;

mod claude;
mod codex;
mod gemini;
mod generic;
mod mock;
mod opencode;

pub use capture::{CaptureRule, Event, Found, ReadRule, TokenUsage, UsageRule};
pub use launch::{
    AgentFile, BROKER_URL_ENV, BrokerRoute, Headless, Launch, LaunchInput, MCP_SERVER, Stdin, bridge_command,
};

use crate::broker::Scheme;
use crate::words::words;

words! {
    /// The agent CLIs Roundtable knows how to drive: each has its own launch plan, MCP manifest
    /// format and output format. `generic` runs `[command, ...args, prompt]`; `mock` is the
    /// deterministic stand-in built into the controller's own binary.
    Provider {
        Codex = "codex",
        Claude = "claude",
        Gemini = "gemini",
        Opencode = "opencode",
        Generic = "generic",
        Mock = "mock",
    }
}

impl Provider {
    /// This provider's profile: the one place a provider is looked up.
    pub fn profile(self) -> &'static ProviderProfile {
        match self {
            Provider::Codex => &codex::PROFILE,
            Provider::Claude => &claude::PROFILE,
            Provider::Gemini => &gemini::PROFILE,
            Provider::Opencode => &opencode::PROFILE,
            Provider::Generic => &generic::PROFILE,
            Provider::Mock => &mock::PROFILE,
        }
    }

    /// One of the provider CLIs whose argv its plan builds (headless flags, the model flag, the
    /// prompt on stdin): an Adapter's `args` and an Assignment's `model` mean nothing to the rest.
    pub fn is_agent_cli(self) -> bool {
        self.profile().headless.is_some()
    }

    /// Whether this provider's agent can use a session's MCP endpoint: the CLIs through the
    /// manifest Roundtable writes for them, a generic CLI by starting `roundtable mcp stdio`
    /// itself. The built-in mock calls no tool.
    pub fn can_use_mcp(self) -> bool {
        self.profile().mcp != McpWiring::Unused
    }

    /// Whether this provider's output has a format a session id can be read from.
    pub fn has_session_output(self) -> bool {
        self.profile().capture.is_some()
    }

    /// Where the provider CLI keeps its sessions: what a persistent home keeps. Generic and mock
    /// keep none.
    pub fn state_folder(self) -> Option<&'static str> {
        self.profile().state_folder
    }
}

/// Everything Roundtable knows about one provider. Each provider's file holds its one `PROFILE`.
#[derive(Debug)]
pub struct ProviderProfile {
    /// The provider this profile describes; [`Provider::profile`] of it is this profile (a test
    /// catches a profile filed under another provider).
    pub provider: Provider,
    /// The built-in Adapter named after the provider, which a declared Adapter of that name
    /// overrides field by field (`builtins.rs` turns it into an `AdapterSpec`).
    pub template: Template,
    /// The admission contract shipped in the binary for the built-in Adapter.
    pub contract: BuiltinContract,
    /// The scheme of the host the CLI speaks to by default, which picks the Adapter's host and
    /// key a brokered CLI is pointed at; `None` for a CLI that picks its own among the
    /// Adapter's `providerHosts` (it is given `ROUNDTABLE_BROKER_URL`).
    pub broker: Option<Scheme>,
    /// The flags that run the CLI headless, shared by its launch plan and its built-in resume
    /// pattern; `None` for a CLI whose argv is the Adapter's own `command` and `args`.
    pub headless: Option<fn() -> Headless>,
    /// What the plan adds for this provider after the shared parts: the argv's tail, the
    /// environment, the files under `/tmp/roundtable/` (its MCP manifest among them) and stdin.
    pub launch: fn(&LaunchInput<'_>) -> Launch,
    /// How the agent reaches the session's MCP endpoint.
    pub mcp: McpWiring,
    /// How the session id and token usage are read from its stdout; `None` for a CLI whose
    /// output has no known format.
    pub capture: Option<CaptureRule>,
    /// Where the CLI keeps its sessions, kept in a volume with `persistentHome`; `None` when it
    /// keeps none.
    pub state_folder: Option<&'static str>,
    /// The folders at a repository's root the CLI reads its configuration from (hooks,
    /// permissions, MCP servers): protected paths (`protected.rs`), so a proposal cannot change
    /// them unreviewed. Empty for a CLI that reads none.
    pub protected: &'static [&'static str],
    /// The warning `validate` gives an Assignment on this provider that sets no model, when the
    /// CLI's own default is known not to work.
    pub no_model_warning: Option<&'static str>,
}

/// The fields a built-in Adapter template sets; `builtins.rs` makes the `AdapterSpec` (with this
/// profile's provider, and its resume pattern from the headless flags).
#[derive(Debug, Clone, Copy)]
pub struct Template {
    /// argv[0].
    pub command: &'static str,
    /// Fixed arguments after the command; empty leaves `args` unset.
    pub args: &'static [&'static str],
    pub supports_resume: bool,
    pub supports_mcp: bool,
    pub supports_readonly_workspace: bool,
    pub captures_session_id: bool,
    /// Empty leaves `providerHosts` unset.
    pub provider_hosts: &'static [&'static str],
    /// Empty leaves `credentialEnv` unset.
    pub credential_env: &'static [&'static str],
}

/// A contract shipped in the binary: its file name under `specs/contracts/` and its text.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinContract {
    pub file: &'static str,
    pub text: &'static str,
}

/// How a provider's agent reaches the session's MCP endpoint when its Adapter has `supportsMcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpWiring {
    /// Its launch rule writes the CLI a manifest that starts the bridge.
    Manifest,
    /// Roundtable does not know the CLI's configuration format: the CLI starts
    /// `roundtable mcp stdio` itself, and the plan shows it the command.
    Bridge,
    /// The agent calls no tool, so `supportsMcp` has no effect.
    Unused,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_is_filed_under_its_own_provider() {
        for provider in Provider::ALL.iter().copied() {
            assert_eq!(provider.profile().provider, provider);
        }
    }

    #[test]
    fn derived_answers_are_the_profiles() {
        let cli = |provider: Provider| provider.is_agent_cli();
        assert!(cli(Provider::Codex) && cli(Provider::Claude) && cli(Provider::Gemini) && cli(Provider::Opencode));
        assert!(!cli(Provider::Generic) && !cli(Provider::Mock));
        assert!(Provider::Generic.can_use_mcp() && !Provider::Mock.can_use_mcp());
        assert!(!Provider::Generic.has_session_output() && Provider::Mock.has_session_output());
        assert_eq!(Provider::Opencode.state_folder(), Some(crate::layout::HOME));
        assert_eq!(Provider::Mock.state_folder(), None);
    }

    #[test]
    fn no_manifest_holds_a_token_value() {
        let manifests: Vec<String> = Provider::ALL
            .iter()
            .map(|provider| provider.profile())
            .filter(|profile| profile.mcp == McpWiring::Manifest)
            .flat_map(|profile| {
                (profile.launch)(&LaunchInput { prompt: "p", args: &[], mcp: true, broker: None }).files
            })
            .filter_map(|file| file.contents)
            .collect();
        assert_eq!(manifests.len(), 4, "one manifest per CLI: {manifests:#?}");
        for text in manifests {
            assert!(text.contains(crate::layout::CAPABILITY_ENV), "{text}");
            assert!(!text.contains("roundtable_auth"), "{text}");
        }
    }

    #[test]
    fn words_are_the_wire_form() {
        assert_eq!(Provider::WORDS, ["codex", "claude", "gemini", "opencode", "generic", "mock"]);
        assert_eq!("opencode".parse::<Provider>(), Ok(Provider::Opencode));
        assert!("Codex".parse::<Provider>().is_err());
        assert_eq!(serde_json::to_string(&Provider::Claude).expect("json"), "\"claude\"");
    }
}
