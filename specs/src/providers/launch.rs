//! What a profile's launch rule is given and gives back, and the pieces every provider's
//! manifest shares (the MCP bridge command and its server name). `roundtable-agents` assembles
//! the whole plan around it: the shared environment, the broker route, mounts and credentials.

use serde::Serialize;

use crate::layout::{BINARY, MCP_SOCKET};

/// The server name every manifest uses (Gemini splits tool names on `_`, so no `_` in it).
pub const MCP_SERVER: &str = "roundtable";

/// The variable a generic or custom CLI finds the broker in: it calls `$ROUNDTABLE_BROKER_URL/<host>/…`.
pub const BROKER_URL_ENV: &str = "ROUNDTABLE_BROKER_URL";

/// The bridge's arguments after the binary.
pub(super) fn bridge_args() -> [&'static str; 4] {
    ["mcp", "stdio", "--unix-socket", MCP_SOCKET]
}

/// The whole bridge command, as a CLI with no manifest (a generic one) starts it itself.
pub fn bridge_command() -> Vec<String> {
    std::iter::once(BINARY).chain(bridge_args()).map(str::to_owned).collect()
}

/// A TOML basic string (the JSON escape rules are a subset TOML accepts for these values).
pub(super) fn toml_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// A JSON manifest as a CLI reads it from a file: pretty, with a final newline.
pub(super) fn pretty(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text
}

/// The flags that run one provider CLI headless, in order: `before`, the model flag when a
/// model is set, `mcp` when the session has an MCP manifest, `after`. The launch plans (in
/// `roundtable-agents`) and the built-in resume patterns are both made from these, so the two
/// cannot drift apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headless {
    pub before: Vec<String>,
    pub mcp: Option<String>,
    pub after: Vec<String>,
    /// The flag or subcommand that precedes the session id when resuming.
    pub resume: &'static str,
}

/// Where the agent's stdin comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Stdin {
    /// The prompt, then end of file: no argv length limit, and a prompt starting with `-`
    /// cannot be read as a flag.
    Prompt,
    /// Nothing: end of file at once (so no CLI waits on a terminal that is not there).
    Empty,
}

/// One entry Roundtable writes under `/tmp/roundtable/` before the agent starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFile {
    /// Absolute path in the container, under `layout::AGENT_CONFIG`.
    pub path: String,
    pub owner: u32,
    pub mode: u32,
    /// `None`: a directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
}

impl AgentFile {
    pub fn dir(path: &str, owner: u32, mode: u32) -> Self {
        Self { path: path.to_owned(), owner, mode, contents: None }
    }

    /// A manifest: root-owned and read-only, so the agent can read it but never rewrite it.
    pub fn manifest(path: &str, contents: String) -> Self {
        Self { path: path.to_owned(), owner: 0, mode: 0o444, contents: Some(contents) }
    }

    /// The path relative to `/tmp` (what the runtime uploads into the `/tmp` volume).
    pub fn under_tmp(&self) -> &str {
        self.path.strip_prefix("/tmp/").unwrap_or(&self.path)
    }
}

/// Where a brokered CLI sends its model requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerRoute {
    /// The provider host the CLI is pointed at; `None` for a generic CLI, which picks its own
    /// among the Adapter's `providerHosts`.
    pub host: Option<String>,
    /// The base URL the CLI is given (plain HTTP on the container's loopback).
    pub base_url: String,
    /// The `credentialEnv` variable the CLI sends as its key (it holds the placeholder).
    pub credential: Option<String>,
}

/// What a profile's launch rule is given: what the shared part of the plan decided.
#[derive(Debug, Clone, Copy)]
pub struct LaunchInput<'a> {
    pub prompt: &'a str,
    /// The Adapter's `args`.
    pub args: &'a [String],
    /// Whether the session gets an MCP endpoint.
    pub mcp: bool,
    /// Where model requests go when the Adapter is brokered.
    pub broker: Option<&'a BrokerRoute>,
}

/// What a profile's launch rule adds to the plan, each in order after the shared parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// After the command and the headless flags.
    pub argv: Vec<String>,
    /// After `HOME`, `PATH` and `TMPDIR`.
    pub env: Vec<(String, String)>,
    /// After `/tmp/roundtable/` itself, `HOME` and `TMPDIR`.
    pub files: Vec<AgentFile>,
    pub stdin: Stdin,
}

/// The launch of a CLI that takes the Adapter's arguments and nothing of Roundtable's but, when
/// brokered, the broker's base URL; `prompt_last`: the prompt is its final argument.
pub(super) fn plain(input: &LaunchInput<'_>, prompt_last: bool) -> Launch {
    let env = input.broker.map(|route| (BROKER_URL_ENV.to_owned(), route.base_url.clone())).into_iter().collect();
    let mut argv = input.args.to_vec();
    if prompt_last {
        argv.push(input.prompt.to_owned());
    }
    Launch { argv, env, files: Vec::new(), stdin: Stdin::Empty }
}
