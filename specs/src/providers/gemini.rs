//! Gemini CLI: its template, contract, launch (flags, `GEMINI_CLI_HOME`, its system settings,
//! `GOOGLE_GEMINI_BASE_URL`) and capture (the `init` event or the `json` document, `stats`).

use serde_json::json;

use super::capture::{
    Event, Found, ReadRule, TokenUsage, add, count, field, first_of_type, last_of_type, object_at, optional_count,
};
use super::launch::{AgentFile, Headless, Launch, LaunchInput, MCP_SERVER, Stdin, bridge_args, pretty};
use super::{BuiltinContract, CaptureRule, McpWiring, Provider, ProviderProfile, Template};
use crate::broker::Scheme;
use crate::layout::{AGENT_CONFIG, AGENT_UID, BINARY, CAPABILITY_ENV};

/// Gemini's system settings, which outrank user and workspace settings.
const SETTINGS_PATH: &str = "/tmp/roundtable/gemini-settings.json";

pub(super) static PROFILE: ProviderProfile = ProviderProfile {
    provider: Provider::Gemini,
    template: Template {
        command: "gemini",
        args: &[],
        // Provider homes are disposable unless `persistentHome` keeps them.
        supports_resume: false,
        supports_mcp: true,
        supports_readonly_workspace: true,
        captures_session_id: true,
        provider_hosts: &["generativelanguage.googleapis.com"],
        credential_env: &["GEMINI_API_KEY"],
    },
    contract: BuiltinContract { file: "gemini.yaml", text: include_str!("../../contracts/gemini.yaml") },
    broker: Some(Scheme::Gemini),
    headless: Some(headless),
    launch,
    mcp: McpWiring::Manifest,
    capture: Some(CaptureRule {
        stream: ReadRule {
            session_id: stream_id,
            looked_for: "an `init` event with a `session_id`",
            usage: Some(stream_usage),
        },
        document: Some(ReadRule {
            session_id: document_id,
            looked_for: "a top-level `session_id`",
            usage: Some(document_usage),
        }),
    }),
    state_folder: Some("/tmp/roundtable/gemini"),
    protected: &[".gemini/"],
    no_model_warning: None,
};

fn headless() -> Headless {
    let words = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    Headless {
        before: words(&["--output-format=stream-json"]),
        mcp: None,
        after: words(&["--approval-mode=yolo", &format!("--allowed-mcp-server-names={MCP_SERVER}")]),
        resume: "--resume",
    }
}

fn launch(input: &LaunchInput<'_>) -> Launch {
    let home = format!("{AGENT_CONFIG}/gemini");
    let mut env = vec![
        ("GEMINI_CLI_HOME".to_owned(), home.clone()),
        ("GEMINI_CLI_SYSTEM_SETTINGS_PATH".to_owned(), SETTINGS_PATH.to_owned()),
        ("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned()),
    ];
    // The SDK appends `/v1beta/models/…`.
    if let Some(route) = input.broker {
        env.push(("GOOGLE_GEMINI_BASE_URL".into(), route.base_url.clone()));
    }
    let files = vec![
        AgentFile::dir(&home, AGENT_UID, 0o755),
        // The system settings also switch off telemetry and updates, so they are written
        // even when the adapter has no MCP.
        AgentFile::manifest(SETTINGS_PATH, settings(input.mcp)),
    ];
    Launch { argv: Vec::new(), env, files, stdin: Stdin::Prompt }
}

/// Gemini's system settings (they outrank user and workspace settings). Gemini strips inherited
/// variables named like `*TOKEN*` or `*KEY*` from servers unless set explicitly in `env`.
fn settings(mcp: bool) -> String {
    let mut settings = json!({
        "security": { "folderTrust": { "enabled": false }, "auth": { "selectedType": "gemini-api-key" } },
        "privacy": { "usageStatisticsEnabled": false },
        "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
        "mcp": { "allowed": if mcp { vec![MCP_SERVER] } else { Vec::new() } },
    });
    if mcp {
        settings["mcpServers"] = json!({
            MCP_SERVER: {
                "command": BINARY,
                "args": bridge_args(),
                "env": { CAPABILITY_ENV: format!("${CAPABILITY_ENV}") },
                "timeout": 600_000,
                "trust": true,
            }
        });
    }
    pretty(&settings)
}

/// Gemini's stream names the session only in its `init` event.
fn stream_id(events: &[Event]) -> Found<'_> {
    first_of_type(events, "init", "session_id")
}

/// Gemini's `json` form writes `session_id` at the top of its one document.
fn document_id(events: &[Event]) -> Found<'_> {
    Found::from(events.first().and_then(|document| field(document, "session_id")))
}

/// Gemini's stream totals the run in the final result's `stats`.
fn stream_usage(events: &[Event]) -> Option<TokenUsage> {
    let stats = last_of_type(events, "result")?.get("stats").filter(|stats| stats.is_object())?;
    Some(TokenUsage {
        input_tokens: count(stats, "input_tokens"),
        output_tokens: count(stats, "output_tokens"),
        cached_input_tokens: optional_count(stats, "cached"),
        reasoning_tokens: None,
    })
}

/// Gemini's `json` form reports tokens per model; a run that switched models sums them.
fn document_usage(events: &[Event]) -> Option<TokenUsage> {
    let models = events.first()?.get("stats").and_then(|stats| stats.get("models"))?.as_object()?;
    models
        .values()
        .filter_map(|model| object_at(model, "tokens"))
        .map(|tokens| TokenUsage {
            input_tokens: count(tokens, "prompt"),
            output_tokens: count(tokens, "candidates"),
            cached_input_tokens: optional_count(tokens, "cached"),
            reasoning_tokens: optional_count(tokens, "thoughts"),
        })
        .reduce(add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemini_settings_allow_only_roundtable_and_switch_off_telemetry() {
        let value: serde_json::Value = serde_json::from_str(&settings(true)).expect("json");
        assert_eq!(
            value["mcpServers"]["roundtable"]["env"]["ROUNDTABLE_AGENT_CAPABILITY"],
            "$ROUNDTABLE_AGENT_CAPABILITY"
        );
        assert_eq!(value["mcpServers"]["roundtable"]["trust"], true);
        assert_eq!(value["mcp"]["allowed"], json!(["roundtable"]));
        assert_eq!(value["privacy"]["usageStatisticsEnabled"], false);
        assert_eq!(value["security"]["folderTrust"]["enabled"], false);
        let without: serde_json::Value = serde_json::from_str(&settings(false)).expect("json");
        assert!(without.get("mcpServers").is_none());
    }
}
