//! OpenAI Codex (`codex exec`): its template, contract, launch (flags, `CODEX_HOME` and its
//! `config.toml`), capture (`thread.started`, `turn.completed`) and the model it must be given.

use super::capture::{Event, Found, ReadRule, TokenUsage, add, count, first_of_type, is_type, optional_count};
use super::launch::{AgentFile, Headless, Launch, LaunchInput, MCP_SERVER, Stdin, bridge_args, toml_string};
use super::{BuiltinContract, CaptureRule, McpWiring, Provider, ProviderProfile, Template};
use crate::broker::Scheme;
use crate::layout::{AGENT_CONFIG, BINARY, CAPABILITY_ENV, WORKSPACE};

/// The key variable of the built-in template, and the one Codex's configuration names when the
/// broker route names none.
const CREDENTIAL: &str = "CODEX_API_KEY";

pub(super) static PROFILE: ProviderProfile = ProviderProfile {
    provider: Provider::Codex,
    template: Template {
        command: "codex",
        args: &[],
        // Provider homes are disposable unless `persistentHome` keeps them.
        supports_resume: false,
        supports_mcp: true,
        supports_readonly_workspace: true,
        captures_session_id: true,
        provider_hosts: &["api.openai.com"],
        credential_env: &[CREDENTIAL],
    },
    contract: BuiltinContract { file: "codex.yaml", text: include_str!("../../contracts/codex.yaml") },
    broker: Some(Scheme::Openai),
    headless: Some(headless),
    launch,
    mcp: McpWiring::Manifest,
    capture: Some(CaptureRule {
        stream: ReadRule { session_id, looked_for: "a `thread.started` event with a `thread_id`", usage: Some(usage) },
        document: None,
    }),
    state_folder: Some("/tmp/roundtable/codex"),
    protected: &[".codex/"],
    // Seen live with Codex 0.171.0 (docs/providers.md): its default model offers only a
    // "code mode" tool that needs a helper its distribution does not ship.
    no_model_warning: Some(
        "no model: Codex then uses its default model's code mode, whose only tool needs a codex-code-mode-host helper the CLI does not ship (every tool call fails); set a model such as gpt-5-codex",
    ),
};

fn headless() -> Headless {
    let words = ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-C"];
    Headless {
        before: words.into_iter().chain([WORKSPACE]).map(str::to_owned).collect(),
        mcp: None,
        after: Vec::new(),
        resume: "resume",
    }
}

fn launch(input: &LaunchInput<'_>) -> Launch {
    let home = format!("{AGENT_CONFIG}/codex");
    // Sticky and root-owned: Codex writes its state here but cannot replace the config.
    let mut files = vec![AgentFile::dir(&home, 0, 0o1777)];
    let model_provider = input.broker.map(|route| ModelProvider {
        base_url: format!("{}/v1", route.base_url),
        env_key: route.credential.clone().unwrap_or_else(|| CREDENTIAL.into()),
    });
    if input.mcp || model_provider.is_some() {
        files.push(AgentFile::manifest(&format!("{home}/config.toml"), config(input.mcp, model_provider.as_ref())));
    }
    Launch {
        // Codex reads the prompt from stdin when it is `-`.
        argv: vec!["-".into()],
        env: vec![("CODEX_HOME".into(), home)],
        files,
        stdin: Stdin::Prompt,
    }
}

/// The model provider Codex is given when its Adapter is brokered: the broker's base URL and the
/// variable holding the placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ModelProvider {
    base_url: String,
    env_key: String,
}

/// The id of the provider Roundtable declares for Codex (`openai`, `ollama` and `lmstudio` are
/// reserved: built-in providers cannot be overridden).
const MODEL_PROVIDER: &str = "roundtable";

/// `$CODEX_HOME/config.toml`. With a broker, a custom provider speaking the Responses API over
/// plain HTTP, WebSockets off (the broker refuses upgrades). Its top-level `model_provider` comes
/// before every table, as TOML requires. Codex gives a stdio server only a few standard
/// variables plus those named in `env_vars`; `exec` has no approval UI, so tools are
/// pre-approved (the container is the sandbox); `required` makes `exec` fail when the server
/// cannot start.
fn config(mcp: bool, provider: Option<&ModelProvider>) -> String {
    let mut text = String::from("# Written by Roundtable for this session; read-only.\n");
    if let Some(provider) = provider {
        text.push_str(&format!(
            "model_provider = {id}\n\
             \n\
             [model_providers.{MODEL_PROVIDER}]\n\
             name = \"Roundtable broker\"\n\
             base_url = {base_url}\n\
             env_key = {env_key}\n\
             wire_api = \"responses\"\n\
             supports_websockets = false\n\
             requires_openai_auth = false\n",
            id = toml_string(MODEL_PROVIDER),
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
            "[mcp_servers.{MCP_SERVER}]\n\
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

/// Codex announces the thread first, for new and resumed threads alike.
fn session_id(events: &[Event]) -> Found<'_> {
    first_of_type(events, "thread.started", "thread_id")
}

/// Codex reports usage per turn; a resumed or multi-turn run sums them.
fn usage(events: &[Event]) -> Option<TokenUsage> {
    events
        .iter()
        .filter(|event| is_type(event, "turn.completed"))
        .filter_map(|event| event.get("usage").filter(|usage| usage.is_object()))
        .map(|usage| TokenUsage {
            input_tokens: count(usage, "input_tokens"),
            output_tokens: count(usage, "output_tokens"),
            cached_input_tokens: optional_count(usage, "cached_input_tokens"),
            reasoning_tokens: optional_count(usage, "reasoning_output_tokens"),
        })
        .reduce(add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_manifest_is_exact_toml() {
        assert_eq!(
            config(true, None),
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
    fn a_brokered_codex_config_declares_its_provider_before_any_table() {
        let provider = ModelProvider {
            base_url: "http://127.0.0.1:3129/api.openai.com/v1".into(),
            env_key: "CODEX_API_KEY".into(),
        };
        let without_mcp = config(false, Some(&provider));
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
        let with_mcp = config(true, Some(&provider));
        assert!(with_mcp.starts_with(&without_mcp), "{with_mcp}");
        assert!(
            with_mcp
                .ends_with(&config(true, None).replace("# Written by Roundtable for this session; read-only.\n", ""))
        );
        let first_table = with_mcp.find('[').expect("a table");
        assert!(with_mcp.find("model_provider =").expect("the key") < first_table);
    }
}
