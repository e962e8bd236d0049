//! `claude -p --output-format=stream-json --verbose`: Claude Code's print mode. It reads the
//! files (or inline JSON) given to `--mcp-config`, expands `${VAR}` and `${VAR:-default}` from its
//! own environment, gives the server `PATH`, `HOME`, Claude's own markers and the manifest's `env`
//! (nothing else inherited), and prints the Agent SDK's messages as JSON lines.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::args::{self, Arg, ArgError, Flag};
use super::fields;
use super::version;
use super::{
    Call, Edit, Env, Outcome, Parsed, Personality, Refusal, SERVER, ServerSpec, Started, Usage, ids, model, sanitize,
};

const VERSION: &str = "2.1.240";
const DEFAULT_MODEL: &str = "claude-sonnet-4-5-20250929";
/// Claude waits this long for servers before the first turn (`MCP_TIMEOUT` overrides it).
const DEFAULT_STARTUP: Duration = Duration::from_secs(30);
/// Built-in tools listed in `init` before the MCP ones.
const BUILTIN_TOOLS: [&str; 8] = ["Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "TodoWrite"];
const PERMISSION_MODES: [&str; 6] = ["acceptEdits", "bypassPermissions", "default", "dontAsk", "plan", "auto"];

const FLAGS: &[Flag] = &[
    Flag::switch(&["--print", "-p"]),
    Flag::value(&["--output-format"]),
    Flag::switch(&["--verbose"]),
    Flag::value(&["--model"]),
    Flag::value(&["--mcp-config"]),
    Flag::switch(&["--strict-mcp-config"]),
    Flag::value(&["--permission-mode"]),
    Flag::switch(&["--dangerously-skip-permissions"]),
    Flag::value(&["--allowedTools", "--allowed-tools"]),
    Flag::value(&["--disallowedTools", "--disallowed-tools"]),
    Flag::value(&["--session-id"]),
    Flag::value(&["--resume", "-r"]),
    Flag::value(&["--setting-sources"]),
    Flag::value(&["--add-dir"]),
    Flag::value(&["--max-turns"]),
    Flag::value(&["--append-system-prompt"]),
    Flag::switch(&["--help", "-h"]),
    Flag::switch(&["--version", "-v"]),
];

const HELP: &str = "Usage: claude [options] [prompt]\n\n\
Claude Code (agent-double): print mode only\n\n\
Options:\n  -p, --print                       Print the response and exit\n\
  --output-format <format>          text | json | stream-json (the double plays stream-json)\n\
  --verbose                         Required with --print and stream-json\n\
  --model <model>                   Model for the session\n\
  --mcp-config <file or json>       MCP servers to load (repeatable)\n\
  --strict-mcp-config               Only use MCP servers from --mcp-config\n\
  --permission-mode <mode>          acceptEdits | bypassPermissions | default | dontAsk | plan | auto\n\
  --dangerously-skip-permissions    Same as --permission-mode bypassPermissions\n\
  --allowedTools <tools>            Tools allowed without asking\n\
  --disallowedTools <tools>         Tools denied\n\
  --session-id <uuid>               Use this session id\n\
  -r, --resume <id>                 Resume a session\n\
  --setting-sources <sources>, --add-dir <dir>, --max-turns <n>, --append-system-prompt <text>\n\
  -h, --help                        Display help\n\
  -v, --version                     Output the version number\n";

#[derive(Debug)]
pub struct Claude {
    print: bool,
    output_format: Option<String>,
    verbose: bool,
    model: String,
    mcp_configs: Vec<String>,
    strict: bool,
    permission_mode: String,
    allowed: Vec<String>,
    disallowed: Vec<String>,
    prompt: Option<String>,
    session_id: String,
    euid: Option<u32>,
    is_sandbox: bool,
    api_key_source: &'static str,
    // The transcript.
    started_at: Instant,
    turns: u64,
    call_ids: BTreeMap<usize, String>,
    denials: Vec<Value>,
}

fn commander_error(error: ArgError) -> Refusal {
    Refusal::usage(match error {
        ArgError::Unknown(flag) => format!("error: unknown option '{flag}'"),
        ArgError::MissingValue(flag) => format!("error: option '{flag} <value>' argument missing"),
        ArgError::UnexpectedValue(flag) => format!("error: option '{flag}' does not take a value"),
    })
}

/// `--allowedTools "a,b c"`: names separated by commas or spaces.
fn rules(value: &str) -> impl Iterator<Item = String> + '_ {
    value.split([',', ' ']).map(str::trim).filter(|rule| !rule.is_empty()).map(str::to_owned)
}

/// `mcp__roundtable` (the whole server), `mcp__roundtable__*`, or the tool's exact name.
fn rule_matches(rule: &str, name: &str) -> bool {
    let server = format!("mcp__{SERVER}");
    rule == name || rule == server || (rule == format!("{server}__*") && name.starts_with(&format!("{server}__")))
}

impl Claude {
    fn tool_name(tool: &str) -> String {
        format!("mcp__{SERVER}__{}", sanitize(tool, &[]))
    }

    fn bypass(&self) -> bool {
        self.permission_mode == "bypassPermissions"
    }

    fn envelope(&self, kind: &str, message: Value) -> Value {
        json!({
            "type": kind,
            "message": message,
            "parent_tool_use_id": null,
            "session_id": self.session_id,
            "uuid": ids::uuid(),
        })
    }

    fn assistant(&mut self, content: Value, stop_reason: Option<&str>) -> Value {
        self.turns += 1;
        let message = json!({
            "id": format!("msg_01{}", ids::base62(22)),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [content],
            "stop_reason": stop_reason,
            "usage": { "input_tokens": 0, "output_tokens": 0 },
        });
        self.envelope("assistant", message)
    }

    fn tool_result(&self, id: &str, content: Value, is_error: bool) -> Value {
        let mut block = json!({ "tool_use_id": id, "type": "tool_result", "content": content });
        if is_error {
            block["is_error"] = json!(true);
        }
        self.envelope("user", json!({ "role": "user", "content": [block] }))
    }

    fn result(&self, success: Option<&str>, errors: &[&str], usage: &Usage) -> Value {
        let mut result = json!({
            "type": "result",
            "subtype": if success.is_some() { "success" } else { "error_during_execution" },
            "is_error": success.is_none(),
            "duration_ms": u64::try_from(self.started_at.elapsed().as_millis()).unwrap_or(u64::MAX),
            "duration_api_ms": 0,
            "num_turns": self.turns,
            "stop_reason": if success.is_some() { json!("end_turn") } else { Value::Null },
            "session_id": self.session_id,
            "total_cost_usd": 0,
            "usage": {
                "input_tokens": usage.input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": usage.output_tokens,
            },
            "modelUsage": {},
            "permission_denials": self.denials,
            "uuid": ids::uuid(),
        });
        match success {
            Some(text) => result["result"] = json!(text),
            None => result["errors"] = json!(errors),
        }
        result
    }

    fn flag(&mut self, name: &str, value: Option<String>) -> Result<Option<Parsed<Self>>, Refusal> {
        let value = value.unwrap_or_default();
        match name {
            "--help" => return Ok(Some(Parsed::Print(HELP.to_owned()))),
            "--version" => return Ok(Some(Parsed::Print(format!("{} (Claude Code)\n", version(VERSION))))),
            "--print" => self.print = true,
            "--output-format" if ["text", "json", "stream-json"].contains(&value.as_str()) => {
                self.output_format = Some(value);
            }
            "--verbose" => self.verbose = true,
            "--model" => self.model = value,
            "--mcp-config" => self.mcp_configs.push(value),
            "--strict-mcp-config" => self.strict = true,
            "--permission-mode" if PERMISSION_MODES.contains(&value.as_str()) => self.permission_mode = value,
            "--output-format" | "--permission-mode" => {
                return Err(Refusal::new(1, format!("error: option '{name} <value>' argument '{value}' is invalid.")));
            }
            "--dangerously-skip-permissions" => self.permission_mode = "bypassPermissions".into(),
            "--allowedTools" => self.allowed.extend(rules(&value)),
            "--disallowedTools" => self.disallowed.extend(rules(&value)),
            "--session-id" => {
                if !ids::is_uuid(&value) {
                    return Err(Refusal::new(1, "Error: Invalid session ID. Must be a valid UUID."));
                }
                self.session_id = value.to_ascii_lowercase();
            }
            // The double keeps no session store: the id names the session it continues.
            "--resume" => self.session_id = value,
            "--setting-sources" | "--add-dir" | "--max-turns" | "--append-system-prompt" => {}
            other => return Err(commander_error(ArgError::Unknown(other.to_owned()))),
        }
        Ok(None)
    }

    /// The servers named by `.mcp.json` (unless strict) and each `--mcp-config`, later ones winning.
    fn servers(&self) -> Result<Map<String, Value>, Refusal> {
        let mut servers = Map::new();
        if !self.strict
            && let Ok(text) = std::fs::read_to_string(".mcp.json")
        {
            servers.extend(config_servers(&text, ".mcp.json")?);
        }
        for config in &self.mcp_configs {
            let (text, source) = if config.trim_start().starts_with('{') {
                (config.clone(), "--mcp-config".to_owned())
            } else {
                let text = std::fs::read_to_string(config).map_err(|_| {
                    Refusal::new(1, format!("Error: Invalid MCP configuration:\nMCP config file not found: {config}"))
                })?;
                (text, config.clone())
            };
            servers.extend(config_servers(&text, &source)?);
        }
        Ok(servers)
    }
}

/// The `mcpServers` of one configuration.
fn config_servers(text: &str, source: &str) -> Result<Map<String, Value>, Refusal> {
    let invalid = |why: &str| Refusal::new(1, format!("Error: Invalid MCP configuration:\n{source}: {why}"));
    let config: Value = serde_json::from_str(text).map_err(|_| invalid("MCP config is not a valid JSON"))?;
    match config.get("mcpServers") {
        Some(Value::Object(servers)) => Ok(servers.clone()),
        _ => Err(invalid("mcpServers: Required (an object)")),
    }
}

/// `${VAR}` and `${VAR:-default}`; `$VAR` without braces is left alone. Unset variables without
/// a default are collected in `missing` and left as written.
fn expand(text: &str, env: &Env, missing: &mut Vec<String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (env.get(name), default) {
            (Some(value), _) => out.push_str(value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                missing.push(name.to_owned());
                out.push_str(&rest[start..start + 2 + end + 1]);
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// One `mcpServers` entry to a launch. Outer `Err`: the configuration is invalid; inner `Err`:
/// the server is skipped (another transport, an unknown type, missing variables).
fn server_spec(
    entry: &Value,
    env: &Env,
    extra: &BTreeMap<String, String>,
) -> Result<Result<ServerSpec, String>, String> {
    let at = format!("mcpServers.{SERVER}");
    let Value::Object(entry) = entry else { return Err(format!("`{at}` must be an object")) };
    match fields::string(entry, "type", &at)?.as_deref() {
        None | Some("stdio") => {}
        Some(kind @ ("sse" | "http" | "ws")) => {
            return Ok(Err(format!("`{at}` is a {kind} server; the double starts only stdio servers")));
        }
        Some(other) => return Ok(Err(format!("MCP server \"{SERVER}\" has unknown type \"{other}\""))),
    }
    let program = fields::string(entry, "command", &at)?.ok_or_else(|| format!("`{at}.command`: Required"))?;
    let args = fields::strings(entry, "args", &at)?.unwrap_or_default();
    let own = fields::string_map(entry, "env", &at)?.unwrap_or_default();
    let mut missing = Vec::new();
    let program = expand(&program, env, &mut missing);
    let args: Vec<String> = args.iter().map(|arg| expand(arg, env, &mut missing)).collect();
    let own: BTreeMap<String, String> = own.iter().map(|(k, v)| (k.clone(), expand(v, env, &mut missing))).collect();
    if !missing.is_empty() {
        missing.sort();
        missing.dedup();
        return Ok(Err(format!("MCP server \"{SERVER}\": Missing environment variables: {}", missing.join(", "))));
    }
    let mut child_env: BTreeMap<String, String> =
        ["PATH", "HOME"].iter().filter_map(|name| Some(((*name).to_owned(), env.get(name)?.to_owned()))).collect();
    child_env.extend(extra.clone());
    child_env.extend(own);
    let startup =
        env.get("MCP_TIMEOUT").and_then(|ms| ms.parse::<u64>().ok()).map_or(DEFAULT_STARTUP, Duration::from_millis);
    let tool =
        env.get("MCP_TOOL_TIMEOUT").and_then(|ms| ms.parse::<u64>().ok()).map_or(Duration::MAX, Duration::from_millis);
    Ok(Ok(ServerSpec { program, args, env: child_env, cwd: None, startup_timeout: startup, tool_timeout: tool }))
}

impl Personality for Claude {
    const NAME: &'static str = "claude";

    fn parse(argv: &[String], env: &Env) -> Result<Parsed<Self>, Refusal> {
        let mut claude = Self {
            print: false,
            output_format: None,
            verbose: false,
            model: DEFAULT_MODEL.to_owned(),
            mcp_configs: Vec::new(),
            strict: false,
            permission_mode: "default".to_owned(),
            allowed: Vec::new(),
            disallowed: Vec::new(),
            prompt: None,
            session_id: ids::uuid(),
            euid: env.euid(),
            is_sandbox: env.get("IS_SANDBOX") == Some("1"),
            api_key_source: if env.get("ANTHROPIC_API_KEY").is_some() { "ANTHROPIC_API_KEY" } else { "none" },
            started_at: Instant::now(),
            turns: 0,
            call_ids: BTreeMap::new(),
            denials: Vec::new(),
        };
        let mut session_flags = 0;
        let mut positionals = Vec::new();
        for arg in args::read(argv, FLAGS).map_err(commander_error)? {
            match arg {
                Arg::Positional(word) => positionals.push(word),
                Arg::Flag { name, value } => {
                    if matches!(name, "--session-id" | "--resume") {
                        session_flags += 1;
                    }
                    if let Some(print) = claude.flag(name, value)? {
                        return Ok(print);
                    }
                }
            }
        }
        if session_flags > 1 {
            return Err(Refusal::new(1, "Error: --session-id cannot be used with --continue or --resume"));
        }
        if positionals.len() > 1 {
            return Err(Refusal::usage(format!(
                "error: too many arguments. Expected 1 argument but got {}.",
                positionals.len()
            )));
        }
        claude.prompt = positionals.pop();
        Ok(Parsed::Run(claude))
    }

    fn preflight(&self) -> Result<(), Refusal> {
        if !self.print {
            return Err(Refusal::usage(
                "agent-double plays only `claude -p` (print mode); the interactive UI needs a terminal",
            ));
        }
        match self.output_format.as_deref() {
            Some("stream-json") if !self.verbose => {
                return Err(Refusal::new(
                    1,
                    "Error: When using --print, --output-format=stream-json requires --verbose",
                ));
            }
            Some("stream-json") => {}
            _ => {
                return Err(Refusal::usage(
                    "agent-double plays `claude -p --output-format=stream-json --verbose` only",
                ));
            }
        }
        if self.bypass() && self.euid == Some(0) && !self.is_sandbox {
            return Err(Refusal::new(
                1,
                "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons",
            ));
        }
        Ok(())
    }

    fn prompt(&self, stdin: &mut dyn FnMut() -> std::io::Result<String>) -> std::io::Result<String> {
        match &self.prompt {
            Some(prompt) => Ok(prompt.clone()),
            None => stdin(),
        }
    }

    fn no_prompt(&self) -> Refusal {
        Refusal::new(1, "Error: Input must be provided either through stdin or as a prompt argument when using --print")
    }

    fn server(&mut self, env: &Env) -> Result<Result<ServerSpec, String>, Refusal> {
        let servers = self.servers()?;
        let Some(entry) = servers.get(SERVER) else {
            return Ok(Err(format!("no MCP server named `{SERVER}` (give it with --mcp-config)")));
        };
        let cwd = std::env::current_dir().map(|dir| dir.display().to_string()).unwrap_or_default();
        // What Claude Code adds to every stdio server's environment.
        let extra = BTreeMap::from([
            ("CLAUDECODE".to_owned(), "1".to_owned()),
            ("CLAUDE_CODE_SESSION_ID".to_owned(), self.session_id.clone()),
            ("CLAUDE_PROJECT_DIR".to_owned(), cwd),
        ]);
        server_spec(entry, env, &extra)
            .map_err(|why| Refusal::new(1, format!("Error: Invalid MCP configuration:\n{why}")))
    }

    fn permits(&mut self, call: &Call<'_>, _read_only: bool) -> Result<(), String> {
        let name = Self::tool_name(call.tool);
        let denied = if self.disallowed.iter().any(|rule| rule_matches(rule, &name)) {
            format!("Permission to use {name} has been denied.")
        } else if self.bypass() || self.allowed.iter().any(|rule| rule_matches(rule, &name)) {
            return Ok(());
        } else {
            format!("Claude requested permissions to use {name}, but you haven't granted it yet.")
        };
        let id = self.call_ids.get(&call.index).cloned().unwrap_or_default();
        self.denials.push(json!({ "tool_name": name, "tool_use_id": id, "tool_input": call.arguments }));
        Err(denied)
    }

    fn model_request(&self, env: &Env, prompt: &str) -> Result<Option<model::Request>, Value> {
        let Some(base) = env.get("ANTHROPIC_BASE_URL").filter(|base| !base.is_empty()) else { return Ok(None) };
        model::anthropic(env, model::join(base, "/v1/messages"), &self.model, prompt).map(Some)
    }

    fn started(&mut self, started: &Started<'_>) -> Vec<Value> {
        let mut tools: Vec<String> = BUILTIN_TOOLS.iter().map(|tool| (*tool).to_owned()).collect();
        tools.extend(started.tools.iter().map(|tool| Self::tool_name(tool)));
        vec![json!({
            "type": "system",
            "subtype": "init",
            "cwd": started.cwd,
            "session_id": self.session_id,
            "tools": tools,
            "mcp_servers": [{ "name": SERVER, "status": if started.server.is_ok() { "connected" } else { "failed" } }],
            "model": self.model,
            "permissionMode": self.permission_mode,
            "slash_commands": [],
            "apiKeySource": self.api_key_source,
            "claude_code_version": VERSION,
            "output_style": "default",
            "agents": [],
            "skills": [],
            "plugins": [],
            "uuid": ids::uuid(),
        })]
    }

    fn tool_started(&mut self, call: &Call<'_>) -> Vec<Value> {
        let id = format!("toolu_01{}", ids::base62(22));
        self.call_ids.insert(call.index, id.clone());
        let block =
            json!({ "type": "tool_use", "id": id, "name": Self::tool_name(call.tool), "input": call.arguments });
        vec![self.assistant(block, None)]
    }

    fn tool_finished(&mut self, call: &Call<'_>, outcome: &Outcome) -> Vec<Value> {
        let id = self.call_ids.get(&call.index).cloned().unwrap_or_default();
        let content = match outcome {
            Outcome::Success(_) | Outcome::ToolError(_) => outcome.content(),
            Outcome::RpcError { .. } | Outcome::NotSent(_) => json!(outcome.text()),
        };
        vec![self.tool_result(&id, content, outcome.is_error())]
    }

    fn edited(&mut self, edits: &[Edit]) -> Vec<Value> {
        let mut events = Vec::new();
        for edit in edits {
            let id = format!("toolu_01{}", ids::base62(22));
            let input = json!({ "file_path": edit.path, "content": edit.content });
            events.push(self.assistant(json!({ "type": "tool_use", "id": id, "name": "Write", "input": input }), None));
            let said = if edit.created {
                format!("File created successfully at: {}", edit.path)
            } else {
                format!("The file {} has been updated.", edit.path)
            };
            events.push(self.tool_result(&id, json!(said), false));
        }
        events
    }

    fn finished(&mut self, message: &str, usage: &Usage) -> Vec<Value> {
        let text = self.assistant(json!({ "type": "text", "text": message }), Some("end_turn"));
        vec![text, self.result(Some(message), &[], usage)]
    }

    fn failed(&mut self, message: &str) -> Vec<Value> {
        vec![self.result(None, &[message], &Usage { input_tokens: 0, output_tokens: 0 })]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: [&str; 7] = [
        "-p",
        "--output-format=stream-json",
        "--verbose",
        "--model=test-model",
        "--mcp-config=/tmp/roundtable/mcp.json",
        "--strict-mcp-config",
        "--permission-mode=bypassPermissions",
    ];

    fn parse_with(argv: &[&str], env: &Env) -> Result<Claude, Refusal> {
        let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
        match Claude::parse(&argv, env)? {
            Parsed::Run(claude) => Ok(claude),
            Parsed::Print(text) => Err(Refusal::new(0, text)),
        }
    }

    fn parse(argv: &[&str]) -> Result<Claude, Refusal> {
        parse_with(argv, &Env::of(&[]))
    }

    fn status(argv: &[&str]) -> (u8, String) {
        match parse(argv).and_then(|claude| claude.preflight().map(|()| claude)) {
            Ok(_) => (99, "accepted".into()),
            Err(refusal) => (refusal.status, refusal.message),
        }
    }

    #[test]
    fn accepts_roundtables_plan() {
        let claude = parse(&PLAN).expect("plan");
        assert_eq!(claude.preflight(), Ok(()));
        assert_eq!(claude.model, "test-model");
        assert_eq!(claude.mcp_configs, ["/tmp/roundtable/mcp.json"]);
        assert!(claude.strict && claude.bypass());
        assert!(ids::is_uuid(&claude.session_id));
        let resumed =
            parse(&[&PLAN[..], &["--resume", "22795ca6-8222-4620-91dd-3001deaf3378", "the briefing"]].concat())
                .expect("resume");
        assert_eq!(resumed.session_id, "22795ca6-8222-4620-91dd-3001deaf3378");
        assert_eq!(resumed.prompt.as_deref(), Some("the briefing"));
    }

    #[test]
    fn refuses_what_claude_refuses() {
        let cases: &[(&[&str], u8, &str)] = &[
            (
                &["-p", "--output-format=stream-json"],
                1,
                "Error: When using --print, --output-format=stream-json requires --verbose",
            ),
            (&["-p", "--verbose"], 2, "stream-json"),
            (&["-p", "--output-format=json", "--verbose"], 2, "stream-json"),
            (&["--output-format=stream-json", "--verbose"], 2, "claude -p"),
            (&["-p", "--output-format=xml"], 1, "is invalid"),
            (&["-p", "--permission-mode=yolo"], 1, "is invalid"),
            (&["-p", "--yolo"], 2, "error: unknown option '--yolo'"),
            (&["-p", "--mcp-config"], 2, "argument missing"),
            (&["-p", "--session-id=abc"], 1, "Must be a valid UUID"),
            (&["-p", "--session-id=22795ca6-8222-4620-91dd-3001deaf3378", "--resume=x"], 1, "cannot be used"),
            (&["-p", "a", "b"], 2, "too many arguments"),
            (&["--version"], 0, "2.1.240 (Claude Code)"),
        ];
        for (argv, want, needle) in cases {
            let (got, message) = status(argv);
            assert_eq!(got, *want, "{argv:?}: {message}");
            assert!(message.contains(needle), "{argv:?}: {message}");
        }
    }

    #[test]
    fn bypass_as_root_needs_is_sandbox() {
        let root = Env::of(&[]).with_euid(0);
        let refused = parse_with(&PLAN, &root).expect("parse").preflight();
        assert_eq!(refused.map_err(|r| r.status), Err(1));
        let sandboxed = Env::of(&[("IS_SANDBOX", "1")]).with_euid(0);
        assert_eq!(parse_with(&PLAN, &sandboxed).expect("parse").preflight(), Ok(()));
    }

    #[test]
    fn expands_like_claude() {
        let env = Env::of(&[("CAP", "rtcap_x"), ("EMPTY", "")]);
        let cases = [
            ("${CAP}", "rtcap_x", vec![]),
            ("a-${CAP}-b", "a-rtcap_x-b", vec![]),
            ("${NOPE:-dflt}", "dflt", vec![]),
            ("${EMPTY:-dflt}", "", vec![]),
            ("$CAP", "$CAP", vec![]),
            ("${NOPE}", "${NOPE}", vec!["NOPE".to_owned()]),
            ("${CAP", "${CAP", vec![]),
        ];
        for (text, want, want_missing) in cases {
            let mut missing = Vec::new();
            assert_eq!(expand(text, &env, &mut missing), want, "{text}");
            assert_eq!(missing, want_missing, "{text}");
        }
    }

    fn manifest(env: Value) -> Value {
        json!({
            "type": "stdio",
            "command": "/roundtable/bin/roundtable",
            "args": ["mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"],
            "env": env,
        })
    }

    #[test]
    fn the_server_gets_path_home_and_the_manifests_env_only() {
        let env = Env::of(&[
            ("PATH", "/bin"),
            ("HOME", "/tmp/roundtable/home"),
            ("ROUNDTABLE_AGENT_CAPABILITY", "rtcap_x"),
            ("ANTHROPIC_API_KEY", "sk"),
        ]);
        let extra = BTreeMap::from([("CLAUDECODE".to_owned(), "1".to_owned())]);
        let entry = manifest(json!({"ROUNDTABLE_AGENT_CAPABILITY": "${ROUNDTABLE_AGENT_CAPABILITY}"}));
        let spec = server_spec(&entry, &env, &extra).expect("valid").expect("startable");
        let names: Vec<&str> = spec.env.keys().map(String::as_str).collect();
        assert_eq!(names, ["CLAUDECODE", "HOME", "PATH", "ROUNDTABLE_AGENT_CAPABILITY"]);
        assert_eq!(spec.env.get("ROUNDTABLE_AGENT_CAPABILITY").map(String::as_str), Some("rtcap_x"));

        let forgetful = server_spec(&manifest(json!({})), &env, &extra).expect("valid").expect("startable");
        assert!(!forgetful.env.contains_key("ROUNDTABLE_AGENT_CAPABILITY"), "nothing is inherited");

        let unset = server_spec(&entry, &Env::of(&[]), &extra).expect("valid");
        assert!(unset.is_err_and(|why| why.contains("Missing environment variables: ROUNDTABLE_AGENT_CAPABILITY")));
    }

    #[test]
    fn invalid_or_skipped_servers_are_told_apart() {
        let env = Env::of(&[]);
        let none = BTreeMap::new();
        for bad in [json!("x"), json!({"args": []}), json!({"command": 1}), json!({"command": "x", "env": {"A": 1}})] {
            assert!(server_spec(&bad, &env, &none).is_err(), "{bad}");
        }
        for skipped in [json!({"type": "http", "url": "http://x"}), json!({"type": "carrier-pigeon", "command": "x"})] {
            assert!(matches!(server_spec(&skipped, &env, &none), Ok(Err(_))), "{skipped}");
        }
        assert!(matches!(server_spec(&json!({"command": "x"}), &env, &none), Ok(Ok(_))), "no type is stdio");
        assert!(config_servers("{}", "f").is_err());
        assert!(config_servers("nope", "f").is_err());
        assert!(config_servers(r#"{"mcpServers":{}}"#, "f").is_ok());
    }

    #[test]
    fn permissions_follow_the_mode_and_rules() {
        let arguments = json!({});
        let call = Call { index: 0, tool: "task.get", arguments: &arguments };
        let mut default = parse(&["-p"]).expect("parse");
        let denied = default.permits(&call, true);
        assert_eq!(
            denied,
            Err("Claude requested permissions to use mcp__roundtable__task_get, but you haven't granted it yet.".into())
        );
        assert_eq!(default.denials.len(), 1);
        for rule in ["mcp__roundtable", "mcp__roundtable__*", "Read,mcp__roundtable__task_get"] {
            let mut allowed = parse(&["-p", "--permission-mode=dontAsk", "--allowedTools", rule]).expect("parse");
            assert_eq!(allowed.permits(&call, false), Ok(()), "{rule}");
        }
        let mut bypass = parse(&PLAN).expect("plan");
        assert_eq!(bypass.permits(&call, false), Ok(()));
        let mut blocked = parse(&[&PLAN[..], &["--disallowedTools=mcp__roundtable"]].concat()).expect("parse");
        assert!(blocked.permits(&call, false).is_err());
    }

    #[test]
    fn events_have_claude_shapes() {
        let mut claude = parse(&PLAN).expect("plan");
        let tools = ["task.get".to_owned(), "notes.append".to_owned()];
        let init = claude.started(&Started { tools: &tools, server: Ok(()), cwd: "/w", prompt: "p" });
        let init = &init[0];
        assert_eq!((init["type"].as_str(), init["subtype"].as_str()), (Some("system"), Some("init")));
        assert_eq!(init["session_id"], claude.session_id.as_str());
        assert_eq!(init["model"], "test-model");
        assert_eq!(init["permissionMode"], "bypassPermissions");
        assert_eq!(init["mcp_servers"], json!([{"name": "roundtable", "status": "connected"}]));
        assert!(init["tools"].as_array().is_some_and(|t| t.contains(&json!("mcp__roundtable__notes_append"))));

        let arguments = json!({"text": "hi"});
        let call = Call { index: 0, tool: "notes.append", arguments: &arguments };
        let used = claude.tool_started(&call);
        let block = &used[0]["message"]["content"][0];
        assert_eq!(used[0]["type"], "assistant");
        assert_eq!(block["type"], "tool_use");
        assert_eq!(block["name"], "mcp__roundtable__notes_append");
        let result = claude.tool_finished(&call, &Outcome::RpcError { code: -32602, message: "bad".into() });
        let answer = &result[0]["message"]["content"][0];
        assert_eq!(result[0]["type"], "user");
        assert_eq!(answer["tool_use_id"], block["id"]);
        assert_eq!(answer["is_error"], true);
        assert_eq!(result[0]["session_id"], claude.session_id.as_str());

        let done = claude.finished("ok", &Usage { input_tokens: 10, output_tokens: 42 });
        let last = &done[1];
        assert_eq!((last["type"].as_str(), last["subtype"].as_str()), (Some("result"), Some("success")));
        assert_eq!(last["session_id"], claude.session_id.as_str());
        assert_eq!(
            last["usage"],
            json!({"input_tokens": 10, "output_tokens": 42, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})
        );
        let failed = claude.failed("server gone");
        assert_eq!(failed[0]["subtype"], "error_during_execution");
        assert_eq!(failed[0]["is_error"], true);
        assert_eq!(failed[0]["errors"], json!(["server gone"]));
    }
}
