//! Claude Code (`claude -p`): its template, contract, launch (flags, `CLAUDE_CONFIG_DIR`, the
//! `--mcp-config` manifest, `ANTHROPIC_BASE_URL`) and capture (`session_id`, `result.usage`).

use serde_json::json;

use super::capture::{Event, ReadRule, TokenUsage, count, first_confirmed_by_result, last_of_type, optional_count};
use super::launch::{AgentFile, Headless, Launch, LaunchInput, MCP_SERVER, Stdin, bridge_args, pretty};
use super::{BuiltinContract, CaptureRule, McpWiring, Provider, ProviderProfile, Template};
use crate::broker::Scheme;
use crate::layout::{AGENT_CONFIG, AGENT_UID, BINARY, CAPABILITY_ENV};

/// Claude Code's MCP manifest (`--mcp-config`).
const MCP_CONFIG: &str = "/tmp/roundtable/mcp.json";

/// The `stream-json` lines and the `json` form read alike: the document's array is its events.
const READ: ReadRule = ReadRule {
    session_id: first_confirmed_by_result,
    looked_for: "an event carrying `session_id`",
    usage: Some(usage),
};

pub(super) static PROFILE: ProviderProfile = ProviderProfile {
    provider: Provider::Claude,
    template: Template {
        command: "claude",
        args: &[],
        // Provider homes are disposable unless `persistentHome` keeps them.
        supports_resume: false,
        supports_mcp: true,
        supports_readonly_workspace: true,
        captures_session_id: true,
        provider_hosts: &["api.anthropic.com"],
        credential_env: &["ANTHROPIC_API_KEY"],
    },
    contract: BuiltinContract { file: "claude.yaml", text: include_str!("../../contracts/claude.yaml") },
    broker: Some(Scheme::Anthropic),
    headless: Some(headless),
    launch,
    mcp: McpWiring::Manifest,
    capture: Some(CaptureRule { stream: READ, document: Some(READ) }),
    state_folder: Some("/tmp/roundtable/claude"),
    protected: &[".claude/"],
    no_model_warning: None,
};

fn headless() -> Headless {
    let words = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    Headless {
        before: words(&["-p", "--output-format=stream-json", "--verbose"]),
        mcp: Some(format!("--mcp-config={MCP_CONFIG}")),
        after: words(&["--strict-mcp-config", "--permission-mode=bypassPermissions"]),
        resume: "--resume",
    }
}

fn launch(input: &LaunchInput<'_>) -> Launch {
    let home = format!("{AGENT_CONFIG}/claude");
    let mut env = vec![
        ("CLAUDE_CONFIG_DIR".to_owned(), home.clone()),
        ("DISABLE_AUTOUPDATER".to_owned(), "1".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_owned(), "1".to_owned()),
    ];
    // Claude Code appends `/v1/messages`.
    if let Some(route) = input.broker {
        env.push(("ANTHROPIC_BASE_URL".into(), route.base_url.clone()));
    }
    let mut files = vec![AgentFile::dir(&home, AGENT_UID, 0o755)];
    if input.mcp {
        files.push(AgentFile::manifest(MCP_CONFIG, manifest()));
    }
    Launch { argv: Vec::new(), env, files, stdin: Stdin::Prompt }
}

/// The file `claude --mcp-config` reads; `${VAR}` is expanded by Claude Code.
fn manifest() -> String {
    let manifest = json!({
        "mcpServers": {
            MCP_SERVER: {
                "type": "stdio",
                "command": BINARY,
                "args": bridge_args(),
                "env": { CAPABILITY_ENV: format!("${{{CAPABILITY_ENV}}}") },
            }
        }
    });
    pretty(&manifest)
}

/// Claude's final result totals the run. Tokens written to the prompt cache were sent as input,
/// so they count as input; tokens read back from it are the cached ones.
fn usage(events: &[Event]) -> Option<TokenUsage> {
    let usage = last_of_type(events, "result")?.get("usage").filter(|usage| usage.is_object())?;
    Some(TokenUsage {
        input_tokens: count(usage, "input_tokens").saturating_add(count(usage, "cache_creation_input_tokens")),
        output_tokens: count(usage, "output_tokens"),
        cached_input_tokens: optional_count(usage, "cache_read_input_tokens"),
        reasoning_tokens: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_manifest_forwards_the_capability_by_reference() {
        let value: serde_json::Value = serde_json::from_str(&manifest()).expect("json");
        assert_eq!(
            value,
            json!({"mcpServers": {"roundtable": {
                "type": "stdio",
                "command": "/roundtable/bin/roundtable",
                "args": ["mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"],
                "env": {"ROUNDTABLE_AGENT_CAPABILITY": "${ROUNDTABLE_AGENT_CAPABILITY}"}
            }}})
        );
    }
}
