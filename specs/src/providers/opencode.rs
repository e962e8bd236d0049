//! OpenCode (`opencode run`): its template, contract, launch (flags, the configuration in
//! `OPENCODE_CONFIG_CONTENT` and its file, the AI SDK provider pointed at the broker) and capture
//! (`sessionID`, `step_finish` tokens).

use serde_json::{Value, json};

use super::capture::{Event, Found, ReadRule, TokenUsage, add, count, field, is_type, object_at, optional_count};
use super::launch::{AgentFile, BrokerRoute, Headless, Launch, LaunchInput, MCP_SERVER, Stdin, bridge_args};
use super::{BuiltinContract, CaptureRule, McpWiring, Provider, ProviderProfile, Template};
use crate::broker::Scheme;
use crate::layout::{BINARY, CAPABILITY_ENV, HOME, WORKSPACE};

/// The configuration's file, the same JSON as `OPENCODE_CONFIG_CONTENT`.
const CONFIG_PATH: &str = "/tmp/roundtable/opencode.json";

pub(super) static PROFILE: ProviderProfile = ProviderProfile {
    provider: Provider::Opencode,
    template: Template {
        command: "opencode",
        args: &[],
        // Provider homes are disposable unless `persistentHome` keeps them.
        supports_resume: false,
        supports_mcp: true,
        supports_readonly_workspace: true,
        captures_session_id: true,
        // OpenCode's host follows the model's provider; Anthropic is the default operators override.
        provider_hosts: &["api.anthropic.com"],
        credential_env: &["ANTHROPIC_API_KEY"],
    },
    contract: BuiltinContract { file: "opencode.yaml", text: include_str!("../../contracts/opencode.yaml") },
    // The built-in template's host; `launch` configures the AI SDK provider of whichever host
    // the route names.
    broker: Some(Scheme::Anthropic),
    headless: Some(headless),
    launch,
    mcp: McpWiring::Manifest,
    capture: Some(CaptureRule {
        stream: ReadRule { session_id, looked_for: "an event carrying `sessionID`", usage: Some(usage) },
        document: None,
    }),
    // OpenCode keeps its database under $HOME/.local/share/opencode.
    state_folder: Some(HOME),
    protected: &[".opencode/"],
    no_model_warning: None,
};

fn headless() -> Headless {
    Headless {
        before: vec!["run".into(), "--format=json".into()],
        mcp: None,
        after: vec![format!("--dir={WORKSPACE}")],
        resume: "--session",
    }
}

fn launch(input: &LaunchInput<'_>) -> Launch {
    // Only the base URL: the AI SDK reads the key (the placeholder) from its variable, so no
    // key, literal or placeholder, is ever in the configuration.
    let config = config(input.mcp, input.broker.map(sdk_provider).as_ref());
    let env = vec![
        ("OPENCODE_CONFIG_CONTENT".to_owned(), config.clone()),
        ("OPENCODE_DISABLE_AUTOUPDATE".to_owned(), "1".to_owned()),
        ("OPENCODE_DISABLE_MODELS_FETCH".to_owned(), "1".to_owned()),
    ];
    Launch { argv: Vec::new(), env, files: vec![AgentFile::manifest(CONFIG_PATH, config)], stdin: Stdin::Prompt }
}

/// The provider OpenCode is pointed at when its Adapter is brokered: an AI SDK provider id and
/// the broker's base URL for it. No key: the SDK reads it (the placeholder) from its variable.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SdkProvider {
    id: &'static str,
    base_url: String,
}

/// OpenCode's provider id and base URL for the broker: the AI SDK provider of the host's scheme
/// (Anthropic's for a host it does not know), whose default base URL ends in the API version.
fn sdk_provider(route: &BrokerRoute) -> SdkProvider {
    let scheme = route.host.as_deref().map_or(Scheme::Custom, Scheme::of_host);
    let (id, version) = match scheme {
        Scheme::Openai => ("openai", "v1"),
        Scheme::Gemini => ("google", "v1beta"),
        Scheme::Anthropic | Scheme::Custom => ("anthropic", "v1"),
    };
    SdkProvider { id, base_url: format!("{}/{version}", route.base_url) }
}

/// OpenCode's configuration, passed in `OPENCODE_CONFIG_CONTENT` (loaded after a repository's
/// own `opencode.json`, so the repository cannot override it). The local-server schema is
/// strict: the program and its arguments are one `command` array, variables are `environment`.
fn config(mcp: bool, provider: Option<&SdkProvider>) -> String {
    let mut config = json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
    });
    if mcp {
        let mut command = vec![BINARY];
        command.extend(bridge_args());
        config["mcp"] = json!({
            MCP_SERVER: {
                "type": "local",
                "command": command,
                "environment": { CAPABILITY_ENV: format!("{{env:{CAPABILITY_ENV}}}") },
                "enabled": true,
                "timeout": 30_000,
            }
        });
    }
    if let Some(provider) = provider {
        config["provider"] = json!({ provider.id: { "options": { "baseURL": provider.base_url } } });
    }
    // One line: it travels in an environment variable too.
    config.to_string()
}

/// OpenCode has no init event: every event names its session, older ones only inside `part`.
fn session_id(events: &[Event]) -> Found<'_> {
    Found::from(events.iter().find_map(|event| {
        field(event, "sessionID")
            .or_else(|| event.get("part").and_then(Value::as_object).and_then(|part| field(part, "sessionID")))
    }))
}

/// OpenCode reports usage per step. As with Claude, cache writes were sent as input and cache
/// reads are the cached input.
fn usage(events: &[Event]) -> Option<TokenUsage> {
    events
        .iter()
        .filter(|event| is_type(event, "step_finish"))
        .filter_map(|event| event.get("part").and_then(|part| object_at(part, "tokens")))
        .map(|tokens| {
            let cache = tokens.get("cache");
            TokenUsage {
                input_tokens: count(tokens, "input").saturating_add(cache.map_or(0, |cache| count(cache, "write"))),
                output_tokens: count(tokens, "output"),
                cached_input_tokens: cache.and_then(|cache| optional_count(cache, "read")),
                reasoning_tokens: optional_count(tokens, "reasoning"),
            }
        })
        .reduce(add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencode_manifest_uses_the_strict_local_schema() {
        let value: serde_json::Value = serde_json::from_str(&config(true, None)).expect("json");
        let server = &value["mcp"]["roundtable"];
        let keys: Vec<&str> = server.as_object().expect("object").keys().map(String::as_str).collect();
        assert_eq!(keys, ["command", "enabled", "environment", "timeout", "type"]);
        assert_eq!(
            server["command"],
            json!(["/roundtable/bin/roundtable", "mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"])
        );
        assert_eq!(server["environment"]["ROUNDTABLE_AGENT_CAPABILITY"], "{env:ROUNDTABLE_AGENT_CAPABILITY}");
        assert!(!config(true, None).contains('\n'));
    }

    #[test]
    fn a_brokered_opencode_config_has_the_base_url_and_no_key() {
        let provider = SdkProvider { id: "anthropic", base_url: "http://127.0.0.1:3129/api.anthropic.com/v1".into() };
        let value: serde_json::Value = serde_json::from_str(&config(false, Some(&provider))).expect("json");
        assert_eq!(
            value["provider"],
            json!({"anthropic": {"options": {"baseURL": "http://127.0.0.1:3129/api.anthropic.com/v1"}}})
        );
        assert!(value.get("mcp").is_none());
        assert!(!config(true, Some(&provider)).contains("apiKey"));
    }
}
