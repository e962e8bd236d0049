//! MCP manifests in each provider's own format. Every one starts only
//! `/roundtable/bin/roundtable mcp stdio --unix-socket /run/roundtable/mcp.sock` and forwards the
//! capability by reference (each CLI's own variable syntax), never by value: the token exists only
//! in the agent exec's environment.

use roundtable_specs::layout::{BINARY, CAPABILITY_ENV, MCP_SOCKET};
use serde_json::json;

/// The server name every manifest uses (Gemini splits tool names on `_`, so no `_` in it).
pub const SERVER: &str = "roundtable";
pub const CLAUDE_PATH: &str = roundtable_specs::layout::CLAUDE_MCP_CONFIG;
pub const GEMINI_PATH: &str = "/tmp/roundtable/gemini-settings.json";
pub const OPENCODE_PATH: &str = "/tmp/roundtable/opencode.json";

/// The bridge's arguments after the binary.
fn bridge_args() -> [&'static str; 4] {
    ["mcp", "stdio", "--unix-socket", MCP_SOCKET]
}

/// The whole bridge command, as a CLI with no manifest (a generic one) starts it itself.
pub fn bridge_command() -> Vec<String> {
    std::iter::once(BINARY).chain(bridge_args()).map(str::to_owned).collect()
}

/// A TOML basic string (the JSON escape rules are a subset TOML accepts for these values).
fn toml_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// The model provider Codex is given when its Adapter is brokered: the broker's base URL and the
/// variable holding the placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexProvider {
    pub base_url: String,
    pub env_key: String,
}

/// The id of the provider Roundtable declares for Codex (`openai`, `ollama` and `lmstudio` are
/// reserved: built-in providers cannot be overridden).
pub const CODEX_PROVIDER: &str = "roundtable";

/// `$CODEX_HOME/config.toml`. With a broker, a custom provider speaking the Responses API over
/// plain HTTP, WebSockets off (the broker refuses upgrades). Its top-level `model_provider` comes
/// before every table, as TOML requires. Codex gives a stdio server only a few standard
/// variables plus those named in `env_vars`; `exec` has no approval UI, so tools are
/// pre-approved (the container is the sandbox); `required` makes `exec` fail when the server
/// cannot start.
pub fn codex(mcp: bool, provider: Option<&CodexProvider>) -> String {
    let mut text = String::from("# Written by Roundtable for this session; read-only.\n");
    if let Some(provider) = provider {
        text.push_str(&format!(
            "model_provider = {id}\n\
             \n\
             [model_providers.{CODEX_PROVIDER}]\n\
             name = \"Roundtable broker\"\n\
             base_url = {base_url}\n\
             env_key = {env_key}\n\
             wire_api = \"responses\"\n\
             supports_websockets = false\n\
             requires_openai_auth = false\n",
            id = toml_string(CODEX_PROVIDER),
            base_url = toml_string(&provider.base_url),
            env_key = toml_string(&provider.env_key),
        ));
        if mcp {
            text.push('\n');
        }
    }
    if mcp {
        let args: Vec<String> = bridge_args().iter().map(|a| toml_string(a)).collect();
        text.push_str(&format!(
            "[mcp_servers.{SERVER}]\n\
             command = {command}\n\
             args = [{args}]\n\
             env_vars = [{capability}]\n\
             startup_timeout_sec = 20\n\
             tool_timeout_sec = 600\n\
             required = true\n\
             default_tools_approval_mode = \"approve\"\n",
            command = toml_string(BINARY),
            args = args.join(", "),
            capability = toml_string(CAPABILITY_ENV),
        ));
    }
    text
}

/// The file `claude --mcp-config` reads; `${VAR}` is expanded by Claude Code.
pub fn claude() -> String {
    let manifest = json!({
        "mcpServers": {
            SERVER: {
                "type": "stdio",
                "command": BINARY,
                "args": bridge_args(),
                "env": { CAPABILITY_ENV: format!("${{{CAPABILITY_ENV}}}") },
            }
        }
    });
    pretty(&manifest)
}

/// Gemini's system settings (they outrank user and workspace settings). Gemini strips inherited
/// variables named like `*TOKEN*` or `*KEY*` from servers unless set explicitly in `env`.
pub fn gemini(mcp: bool) -> String {
    let mut settings = json!({
        "security": { "folderTrust": { "enabled": false }, "auth": { "selectedType": "gemini-api-key" } },
        "privacy": { "usageStatisticsEnabled": false },
        "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
        "mcp": { "allowed": if mcp { vec![SERVER] } else { Vec::new() } },
    });
    if mcp {
        settings["mcpServers"] = json!({
            SERVER: {
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

/// The provider OpenCode is pointed at when its Adapter is brokered: an AI SDK provider id and
/// the broker's base URL for it. No key: the SDK reads it (the placeholder) from its variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpencodeProvider {
    pub id: &'static str,
    pub base_url: String,
}

/// OpenCode's configuration, passed in `OPENCODE_CONFIG_CONTENT` (loaded after a repository's
/// own `opencode.json`, so the repository cannot override it). The local-server schema is
/// strict: the program and its arguments are one `command` array, variables are `environment`.
pub fn opencode(mcp: bool, provider: Option<&OpencodeProvider>) -> String {
    let mut config = json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
    });
    if mcp {
        let mut command = vec![BINARY];
        command.extend(bridge_args());
        config["mcp"] = json!({
            SERVER: {
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

fn pretty(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_manifest_is_exact_toml() {
        assert_eq!(
            codex(true, None),
            "# Written by Roundtable for this session; read-only.\n\
             [mcp_servers.roundtable]\n\
             command = \"/roundtable/bin/roundtable\"\n\
             args = [\"mcp\", \"stdio\", \"--unix-socket\", \"/run/roundtable/mcp.sock\"]\n\
             env_vars = [\"ROUNDTABLE_AGENT_CAPABILITY\"]\n\
             startup_timeout_sec = 20\n\
             tool_timeout_sec = 600\n\
             required = true\n\
             default_tools_approval_mode = \"approve\"\n"
        );
    }

    #[test]
    fn claude_manifest_forwards_the_capability_by_reference() {
        let value: serde_json::Value = serde_json::from_str(&claude()).expect("json");
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

    #[test]
    fn gemini_settings_allow_only_roundtable_and_switch_off_telemetry() {
        let value: serde_json::Value = serde_json::from_str(&gemini(true)).expect("json");
        assert_eq!(
            value["mcpServers"]["roundtable"]["env"]["ROUNDTABLE_AGENT_CAPABILITY"],
            "$ROUNDTABLE_AGENT_CAPABILITY"
        );
        assert_eq!(value["mcpServers"]["roundtable"]["trust"], true);
        assert_eq!(value["mcp"]["allowed"], json!(["roundtable"]));
        assert_eq!(value["privacy"]["usageStatisticsEnabled"], false);
        assert_eq!(value["security"]["folderTrust"]["enabled"], false);
        let without: serde_json::Value = serde_json::from_str(&gemini(false)).expect("json");
        assert!(without.get("mcpServers").is_none());
    }

    #[test]
    fn opencode_manifest_uses_the_strict_local_schema() {
        let value: serde_json::Value = serde_json::from_str(&opencode(true, None)).expect("json");
        let server = &value["mcp"]["roundtable"];
        let keys: Vec<&str> = server.as_object().expect("object").keys().map(String::as_str).collect();
        assert_eq!(keys, ["command", "enabled", "environment", "timeout", "type"]);
        assert_eq!(
            server["command"],
            json!(["/roundtable/bin/roundtable", "mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"])
        );
        assert_eq!(server["environment"]["ROUNDTABLE_AGENT_CAPABILITY"], "{env:ROUNDTABLE_AGENT_CAPABILITY}");
        assert!(!opencode(true, None).contains('\n'));
    }

    #[test]
    fn no_manifest_holds_a_token_value() {
        for text in [codex(true, None), claude(), gemini(true), opencode(true, None)] {
            assert!(text.contains(CAPABILITY_ENV));
            assert!(!text.contains("roundtable_auth"));
        }
    }

    #[test]
    fn a_brokered_codex_config_declares_its_provider_before_any_table() {
        let provider = CodexProvider {
            base_url: "http://127.0.0.1:3129/api.openai.com/v1".into(),
            env_key: "CODEX_API_KEY".into(),
        };
        let without_mcp = codex(false, Some(&provider));
        assert_eq!(
            without_mcp,
            "# Written by Roundtable for this session; read-only.\n\
             model_provider = \"roundtable\"\n\
             \n\
             [model_providers.roundtable]\n\
             name = \"Roundtable broker\"\n\
             base_url = \"http://127.0.0.1:3129/api.openai.com/v1\"\n\
             env_key = \"CODEX_API_KEY\"\n\
             wire_api = \"responses\"\n\
             supports_websockets = false\n\
             requires_openai_auth = false\n"
        );
        let with_mcp = codex(true, Some(&provider));
        assert!(with_mcp.starts_with(&without_mcp), "{with_mcp}");
        assert!(
            with_mcp
                .ends_with(&codex(true, None).replace("# Written by Roundtable for this session; read-only.\n", ""))
        );
        let first_table = with_mcp.find('[').expect("a table");
        assert!(with_mcp.find("model_provider =").expect("the key") < first_table);
    }

    #[test]
    fn a_brokered_opencode_config_has_the_base_url_and_no_key() {
        let provider =
            OpencodeProvider { id: "anthropic", base_url: "http://127.0.0.1:3129/api.anthropic.com/v1".into() };
        let value: serde_json::Value = serde_json::from_str(&opencode(false, Some(&provider))).expect("json");
        assert_eq!(
            value["provider"],
            json!({"anthropic": {"options": {"baseURL": "http://127.0.0.1:3129/api.anthropic.com/v1"}}})
        );
        assert!(value.get("mcp").is_none());
        assert!(!opencode(true, Some(&provider)).contains("apiKey"));
    }
}
