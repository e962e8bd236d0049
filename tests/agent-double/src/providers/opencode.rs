//! `opencode run --format=json`: OpenCode's headless run. Its configuration is merged from the
//! global file, `OPENCODE_CONFIG`, the project's `opencode.json` and `OPENCODE_CONFIG_CONTENT`
//! (later wins, objects merged deeply); `{env:VAR}` is substituted; a local MCP server's schema is
//! strict. The server inherits OpenCode's whole environment plus `environment`. Every output line
//! carries the `sessionID`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::args::{self, Arg, ArgError, Flag};
use super::fields::{self, Object};
use super::version;
use super::{
    Call, Edit, Env, Outcome, Parsed, Personality, Refusal, SERVER, ServerSpec, Started, Usage, ids, model, sanitize,
};

/// The model asked when `--model` names none (or another provider's).
const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
const VERSION: &str = "1.18.33";
/// `timeout` is how long OpenCode waits for a server's tools (5 s unless configured).
const DEFAULT_STARTUP: Duration = Duration::from_secs(5);
const DEFAULT_TOOL: Duration = Duration::from_secs(600);
const LOCAL_KEYS: [&str; 6] = ["type", "command", "environment", "enabled", "timeout", "cwd"];
const REMOTE_KEYS: [&str; 6] = ["type", "url", "enabled", "headers", "oauth", "timeout"];

const FLAGS: &[Flag] = &[
    Flag::value(&["--format"]),
    Flag::value(&["--model", "-m"]),
    Flag::value(&["--dir"]),
    Flag::value(&["--session", "-s"]),
    Flag::switch(&["--continue", "-c"]),
    Flag::value(&["--agent"]),
    Flag::value(&["--title"]),
    Flag::switch(&["--auto"]),
    Flag::switch(&["--print-logs"]),
    Flag::value(&["--log-level"]),
    Flag::switch(&["--help", "-h"]),
    Flag::switch(&["--version", "-v"]),
];

const HELP: &str = "opencode run [message..]\n\n\
run opencode with a message (agent-double)\n\n\
Options:\n      --format      format: default (formatted) or json (raw JSON events; the double plays json)\n\
  -m, --model       model to use in the format of provider/model\n\
      --dir         directory to run in\n\
  -s, --session     session id to continue\n\
  -c, --continue    continue the last session\n\
      --agent, --title, --auto, --print-logs, --log-level\n\
  -h, --help        show help\n\
  -v, --version     show version number\n";

#[derive(Debug)]
pub struct Opencode {
    format: Option<String>,
    model: Option<String>,
    dir: Option<PathBuf>,
    words: Vec<String>,
    session_id: String,
    // The transcript.
    message_id: String,
    call_started: BTreeMap<usize, u64>,
}

fn yargs_error(error: ArgError) -> Refusal {
    Refusal::usage(match error {
        ArgError::Unknown(flag) => format!("Error: Unknown argument: {}", flag.trim_start_matches('-')),
        ArgError::MissingValue(flag) => {
            format!("Error: Not enough arguments following: {}", flag.trim_start_matches('-'))
        }
        ArgError::UnexpectedValue(flag) => format!("Error: Argument {flag} takes no value"),
    })
}

/// `{env:VAR}` in every string of the configuration; an unset variable becomes empty.
fn substitute(value: &mut Value, env: &Env) {
    match value {
        Value::String(text) => {
            let mut out = String::new();
            let mut rest = text.as_str();
            while let Some(start) = rest.find("{env:") {
                let Some(end) = rest[start..].find('}') else { break };
                out.push_str(&rest[..start]);
                out.push_str(env.get(rest[start + 5..start + end].trim()).unwrap_or_default());
                rest = &rest[start + end + 1..];
            }
            out.push_str(rest);
            *text = out;
        }
        Value::Array(items) => items.iter_mut().for_each(|item| substitute(item, env)),
        Value::Object(entries) => entries.values_mut().for_each(|entry| substitute(entry, env)),
        _ => {}
    }
}

/// Objects merge key by key; anything else is replaced.
fn merge(base: &mut Value, layer: Value) {
    match (base, layer) {
        (Value::Object(base), Value::Object(layer)) => {
            for (key, value) in layer {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, layer) => *base = layer,
    }
}

/// The strict checks of `Config.McpLocal` / `Config.McpRemote`, in OpenCode's words.
fn validate(config: &Value, source: &str) -> Result<(), Refusal> {
    let invalid = |why: String| Refusal::new(1, format!("Error: Configuration is invalid at {source}\n\u{21b3} {why}"));
    let Value::Object(config) = config else { return Err(invalid("Expected object".into())) };
    let Some(mcp) = config.get("mcp") else { return Ok(()) };
    let Value::Object(servers) = mcp else { return Err(invalid("Expected object mcp".into())) };
    for (name, server) in servers {
        let at = format!("mcp.{name}");
        let Value::Object(server) = server else { return Err(invalid(format!("Expected object {at}"))) };
        let keys: &[&str] = match server.get("type").and_then(Value::as_str) {
            Some("local") => &LOCAL_KEYS,
            Some("remote") => &REMOTE_KEYS,
            _ => return Err(invalid(format!("Invalid input: expected \"local\" or \"remote\" {at}.type"))),
        };
        if let Some(key) = server.keys().find(|key| !keys.contains(&key.as_str())) {
            return Err(invalid(format!("Unrecognized key: \"{key}\" {at}")));
        }
        check_local(server, &at).map_err(invalid)?;
    }
    Ok(())
}

fn check_local(server: &Object, at: &str) -> Result<(), String> {
    if server.get("type").and_then(Value::as_str) != Some("local") {
        return Ok(());
    }
    match fields::strings(server, "command", at)? {
        Some(command) if !command.is_empty() => {}
        _ => return Err(format!("Invalid input: expected a non-empty array of strings {at}.command")),
    }
    fields::string_map(server, "environment", at)?;
    fields::boolean(server, "enabled", at)?;
    fields::string(server, "cwd", at)?;
    match server.get("timeout") {
        None => Ok(()),
        Some(timeout) if timeout.as_u64().is_some_and(|ms| ms > 0) => Ok(()),
        Some(_) => Err(format!("Invalid input: expected a positive integer {at}.timeout")),
    }
}

/// The merged `mcp.roundtable` to a launch; `Err` when it is off or not a local server.
fn server_spec(server: &Object, env: &Env) -> Result<ServerSpec, String> {
    let at = format!("mcp.{SERVER}");
    if fields::boolean(server, "enabled", &at)? == Some(false) {
        return Err(format!("MCP server `{SERVER}` is disabled (enabled: false)"));
    }
    if server.get("type").and_then(Value::as_str) != Some("local") {
        return Err(format!("`{at}` is a remote server; the double starts only local servers"));
    }
    let mut command = fields::strings(server, "command", &at)?.unwrap_or_default().into_iter();
    let program = command.next().ok_or_else(|| format!("`{at}.command` is empty"))?;
    let mut child_env = env.vars().clone();
    child_env.extend(fields::string_map(server, "environment", &at)?.unwrap_or_default());
    Ok(ServerSpec {
        program,
        args: command.collect(),
        env: child_env,
        cwd: fields::string(server, "cwd", &at)?.map(PathBuf::from),
        startup_timeout: fields::duration(server, "timeout", &at, Duration::from_millis(1))?.unwrap_or(DEFAULT_STARTUP),
        tool_timeout: DEFAULT_TOOL,
    })
}

/// Reads the configuration layers, lowest precedence first, each checked on its own.
fn load_config(env: &Env) -> Result<Value, Refusal> {
    let config_home = env
        .get("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env.get("HOME").unwrap_or("/")).join(".config"));
    let mut layers: Vec<(String, String)> = Vec::new();
    let files = [
        Some(config_home.join("opencode/opencode.json")),
        env.get("OPENCODE_CONFIG").map(PathBuf::from),
        Some(PathBuf::from("opencode.json")),
    ];
    for path in files.into_iter().flatten() {
        if let Ok(text) = std::fs::read_to_string(&path) {
            layers.push((path.display().to_string(), text));
        }
    }
    if let Some(content) = env.get("OPENCODE_CONFIG_CONTENT") {
        layers.push(("OPENCODE_CONFIG_CONTENT".to_owned(), content.to_owned()));
    }
    let mut merged = Value::Object(Map::new());
    for (source, text) in layers {
        let mut layer: Value = serde_json::from_str(&text).map_err(|error| {
            Refusal::new(1, format!("Error: Config file at {source} is not valid JSON(C): {error}"))
        })?;
        substitute(&mut layer, env);
        validate(&layer, &source)?;
        merge(&mut merged, layer);
    }
    Ok(merged)
}

impl Opencode {
    fn tool_name(tool: &str) -> String {
        format!("{}_{}", sanitize(SERVER, &[]), sanitize(tool, &[]))
    }

    fn event(&self, kind: &str, fields: Value) -> Value {
        let mut event = json!({ "type": kind, "timestamp": ids::epoch_ms(), "sessionID": self.session_id });
        if let (Value::Object(event), Value::Object(fields)) = (&mut event, fields) {
            event.extend(fields);
        }
        event
    }

    fn part(&self, kind: &str, fields: Value) -> Value {
        let mut part = json!({
            "id": ids::opencode("prt"),
            "messageID": self.message_id,
            "sessionID": self.session_id,
            "type": kind,
        });
        if let (Value::Object(part), Value::Object(fields)) = (&mut part, fields) {
            part.extend(fields);
        }
        part
    }

    fn tool_part(&self, tool: &str, state: Value) -> Value {
        let call_id = format!("call_{}", ids::base62(24));
        self.event(
            "tool_use",
            json!({ "part": self.part("tool", json!({ "tool": tool, "callID": call_id, "state": state })) }),
        )
    }
}

impl Personality for Opencode {
    const NAME: &'static str = "opencode";

    fn parse(argv: &[String], _env: &Env) -> Result<Parsed<Self>, Refusal> {
        let Some((command, rest)) = argv.split_first() else {
            return Err(Refusal::usage("agent-double plays only `opencode run` (the TUI needs a terminal)"));
        };
        match command.as_str() {
            "run" => {}
            "--help" | "-h" => return Ok(Parsed::Print(HELP.to_owned())),
            "--version" | "-v" => return Ok(Parsed::Print(format!("{}\n", version(VERSION)))),
            other => {
                return Err(Refusal::usage(format!(
                    "Error: unknown command {other:?} (agent-double plays only `opencode run`)"
                )));
            }
        }
        let mut opencode = Self {
            format: None,
            model: None,
            dir: None,
            words: Vec::new(),
            session_id: ids::opencode("ses"),
            message_id: ids::opencode("msg"),
            call_started: BTreeMap::new(),
        };
        for arg in args::read(rest, FLAGS).map_err(yargs_error)? {
            match arg {
                Arg::Positional(word) => opencode.words.push(word),
                Arg::Flag { name, value } => match (name, value) {
                    ("--help", _) => return Ok(Parsed::Print(HELP.to_owned())),
                    ("--version", _) => return Ok(Parsed::Print(format!("{VERSION}\n"))),
                    ("--format", Some(format)) if ["default", "json"].contains(&format.as_str()) => {
                        opencode.format = Some(format);
                    }
                    ("--format", Some(format)) => {
                        return Err(Refusal::new(
                            1,
                            format!(
                                "Error: Invalid values:\n  Argument: format, Given: \"{format}\", Choices: \"default\", \"json\""
                            ),
                        ));
                    }
                    ("--model", model) => opencode.model = model,
                    ("--dir", dir) => opencode.dir = dir.map(PathBuf::from),
                    // The double keeps no session store: the id names the session it continues.
                    ("--session", Some(id)) => opencode.session_id = id,
                    ("--continue" | "--agent" | "--title" | "--auto" | "--print-logs" | "--log-level", _) => {}
                    (other, _) => return Err(yargs_error(ArgError::Unknown(other.to_owned()))),
                },
            }
        }
        Ok(Parsed::Run(opencode))
    }

    fn workdir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn preflight(&self) -> Result<(), Refusal> {
        if self.format.as_deref() != Some("json") {
            return Err(Refusal::usage("agent-double plays `opencode run --format=json` only"));
        }
        Ok(())
    }

    fn prompt(&self, stdin: &mut dyn FnMut() -> std::io::Result<String>) -> std::io::Result<String> {
        let message = self.words.join(" ");
        let piped = stdin()?;
        Ok(match (message.is_empty(), piped.is_empty()) {
            (true, _) => piped,
            (false, true) => message,
            (false, false) => format!("{message}\n{piped}"),
        })
    }

    fn no_prompt(&self) -> Refusal {
        Refusal::new(1, "Error: You must provide a message or a command")
    }

    fn server(&mut self, env: &Env) -> Result<Result<ServerSpec, String>, Refusal> {
        let config = load_config(env)?;
        // OpenCode reads `provider/model`; any other model fails the session, reported as a JSON
        // error event like the one it prints for an unknown model.
        if let Some(model) = &self.model
            && !model.split_once('/').is_some_and(|(provider, id)| !provider.is_empty() && !id.is_empty())
        {
            return Ok(Err(format!("Model not found: {model:?}; OpenCode models are named provider/model")));
        }
        match config.pointer(&format!("/mcp/{SERVER}")) {
            Some(Value::Object(server)) => Ok(server_spec(server, env)),
            _ => Ok(Err(format!("no MCP server `{SERVER}` in the configuration (OPENCODE_CONFIG_CONTENT)"))),
        }
    }

    fn model_request(&self, env: &Env, prompt: &str) -> Result<Option<model::Request>, Value> {
        // A configuration that does not load is reported by `server`, as OpenCode reports it.
        let Ok(config) = load_config(env) else { return Ok(None) };
        let Some(base) = config.pointer("/provider/anthropic/options/baseURL").and_then(Value::as_str) else {
            return Ok(None);
        };
        let id = self.model.as_deref().and_then(|m| m.strip_prefix("anthropic/")).unwrap_or(DEFAULT_ANTHROPIC_MODEL);
        model::anthropic(env, model::join(base, "/messages"), id, prompt).map(Some)
    }

    fn model_replied(&mut self, record: Value) -> Vec<Value> {
        let mut fields = record;
        if let Value::Object(map) = &mut fields {
            map.remove("type");
        }
        vec![self.event(model::EVENT, fields)]
    }

    fn started(&mut self, started: &Started<'_>) -> Vec<Value> {
        // A session that cannot start prints its error alone, with no step.
        if started.server.is_err() {
            return Vec::new();
        }
        vec![self.event("step_start", json!({ "part": self.part("step-start", json!({})) }))]
    }

    fn tool_started(&mut self, call: &Call<'_>) -> Vec<Value> {
        // OpenCode prints a tool part only once it has completed or failed.
        self.call_started.insert(call.index, ids::epoch_ms());
        Vec::new()
    }

    fn tool_finished(&mut self, call: &Call<'_>, outcome: &Outcome) -> Vec<Value> {
        let time =
            json!({ "start": self.call_started.get(&call.index).copied().unwrap_or_default(), "end": ids::epoch_ms() });
        let state = if outcome.is_error() {
            json!({ "status": "error", "input": call.arguments, "error": outcome.text(), "time": time })
        } else {
            json!({ "status": "completed", "input": call.arguments, "output": outcome.text(), "metadata": {}, "title": "", "time": time })
        };
        vec![self.tool_part(&Self::tool_name(call.tool), state)]
    }

    fn edited(&mut self, edits: &[Edit]) -> Vec<Value> {
        edits
            .iter()
            .map(|edit| {
                let now = ids::epoch_ms();
                let state = json!({
                    "status": "completed",
                    "input": { "filePath": edit.path, "content": edit.content },
                    "output": "Wrote file successfully.",
                    "metadata": { "exists": !edit.created },
                    "title": edit.path,
                    "time": { "start": now, "end": now },
                });
                self.tool_part("write", state)
            })
            .collect()
    }

    fn finished(&mut self, message: &str, usage: &Usage) -> Vec<Value> {
        let now = ids::epoch_ms();
        let text = self.part("text", json!({ "text": message, "time": { "start": now, "end": now } }));
        let tokens = json!({
            "total": usage.input_tokens + usage.output_tokens,
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "reasoning": 0,
            "cache": { "read": 0, "write": 0 },
        });
        let finish = self.part("step-finish", json!({ "reason": "stop", "tokens": tokens, "cost": 0 }));
        vec![self.event("text", json!({ "part": text })), self.event("step_finish", json!({ "part": finish }))]
    }

    fn failed(&mut self, message: &str) -> Vec<Value> {
        vec![self.event("error", json!({ "error": { "name": "UnknownError", "data": { "message": message } } }))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: [&str; 4] = ["run", "--format=json", "--model=anthropic/test-model", "--dir=/roundtable/workspace"];

    fn parse(argv: &[&str]) -> Result<Opencode, Refusal> {
        let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
        match Opencode::parse(&argv, &Env::of(&[]))? {
            Parsed::Run(opencode) => Ok(opencode),
            Parsed::Print(text) => Err(Refusal::new(0, text)),
        }
    }

    fn status(argv: &[&str]) -> (u8, String) {
        match parse(argv).and_then(|opencode| opencode.preflight().map(|()| opencode)) {
            Ok(_) => (99, "accepted".into()),
            Err(refusal) => (refusal.status, refusal.message),
        }
    }

    #[test]
    fn accepts_roundtables_plan_and_its_resume() {
        let opencode = parse(&PLAN).expect("plan");
        assert_eq!(opencode.preflight(), Ok(()));
        assert_eq!(opencode.workdir(), Some(Path::new("/roundtable/workspace")));
        assert_eq!(opencode.session_id.len(), 30);
        let resumed = parse(&[&PLAN[..], &["--session", "ses_f86f2df67ffep5CKpMOXIyR44R", "the", "briefing"]].concat())
            .expect("resume");
        assert_eq!(resumed.session_id, "ses_f86f2df67ffep5CKpMOXIyR44R");
        assert_eq!(resumed.words, ["the", "briefing"]);
    }

    #[test]
    fn refuses_what_opencode_run_refuses() {
        let cases: &[(&[&str], u8, &str)] = &[
            (&["run"], 2, "--format=json"),
            (&["run", "--format=default"], 2, "--format=json"),
            (&["run", "--format=xml"], 1, "Choices"),
            (&["run", "--format=json", "--attach=http://x"], 2, "Unknown argument: attach"),
            (&["serve"], 2, "opencode run"),
            (&["--version"], 0, "1.18.33"),
        ];
        for (argv, want, needle) in cases {
            let (got, message) = status(argv);
            assert_eq!(got, *want, "{argv:?}: {message}");
            assert!(message.contains(needle), "{argv:?}: {message}");
        }
    }

    fn roundtable_config() -> Value {
        json!({
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": false,
            "share": "disabled",
            "mcp": { "roundtable": {
                "type": "local",
                "command": ["/roundtable/bin/roundtable", "mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"],
                "environment": { "ROUNDTABLE_AGENT_CAPABILITY": "{env:ROUNDTABLE_AGENT_CAPABILITY}" },
                "enabled": true,
                "timeout": 30000,
            }},
        })
    }

    #[test]
    fn a_model_without_its_provider_fails_the_session_in_json() {
        let mut opencode = parse(&["run", "--format=json", "--model=test-model"]).expect("parse");
        assert_eq!(opencode.preflight(), Ok(()));
        let env = Env::of(&[("OPENCODE_CONFIG_CONTENT", &roundtable_config().to_string())]);
        let server = opencode.server(&env).expect("valid config");
        let why = server.err().unwrap_or_default();
        assert!(why.contains("provider/model"), "{why}");
        assert!(opencode.started(&Started { tools: &[], server: Err(&why), cwd: "/w", prompt: "p" }).is_empty());
        assert_eq!(opencode.failed(&why)[0]["type"], "error");
    }

    #[test]
    fn the_local_schema_is_strict() {
        assert_eq!(validate(&roundtable_config(), "c"), Ok(()));
        let broken: [(&str, Value, &str); 6] = [
            ("args", json!(["x"]), "Unrecognized key: \"args\" mcp.roundtable"),
            ("env", json!({}), "Unrecognized key: \"env\""),
            ("type", json!("stdio"), "expected \"local\" or \"remote\""),
            ("command", json!("/roundtable/bin/roundtable"), "command"),
            ("environment", json!({"A": 1}), "environment.A"),
            ("timeout", json!(-1), "positive integer"),
        ];
        for (key, value, needle) in broken {
            let mut config = roundtable_config();
            config["mcp"]["roundtable"][key] = value;
            let refusal = validate(&config, "OPENCODE_CONFIG_CONTENT").err();
            assert!(
                refusal.as_ref().is_some_and(|r| r.status == 1 && r.message.contains(needle)),
                "{key}: {refusal:?}"
            );
        }
        assert!(validate(&json!({"mcp": {"r": {"type": "remote", "url": "http://x", "headers": {}}}}), "c").is_ok());
    }

    #[test]
    fn env_references_are_substituted_and_the_environment_inherited() {
        let env = Env::of(&[("ROUNDTABLE_AGENT_CAPABILITY", "rtcap_x"), ("PATH", "/bin"), ("ANTHROPIC_API_KEY", "sk")]);
        let mut config = roundtable_config();
        substitute(&mut config, &env);
        let server = config["mcp"]["roundtable"].as_object().cloned().unwrap_or_default();
        let spec = server_spec(&server, &env).expect("startable");
        assert_eq!(spec.program, "/roundtable/bin/roundtable");
        assert_eq!(spec.args, ["mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"]);
        assert_eq!(spec.env.get("ROUNDTABLE_AGENT_CAPABILITY").map(String::as_str), Some("rtcap_x"));
        assert_eq!(spec.env.get("ANTHROPIC_API_KEY").map(String::as_str), Some("sk"), "inherited");
        assert_eq!(spec.startup_timeout, Duration::from_secs(30));

        let mut text = json!("a {env:NOPE} b {env:PATH}{env:unclosed");
        substitute(&mut text, &env);
        assert_eq!(text, "a  b /bin{env:unclosed");

        let mut off = server.clone();
        off.insert("enabled".into(), json!(false));
        assert!(server_spec(&off, &env).is_err());
    }

    #[test]
    fn layers_merge_deeply() {
        let mut base =
            json!({"mcp": {"roundtable": {"environment": {"EXTRA": "from-project"}, "enabled": false}}, "a": 1});
        merge(&mut base, roundtable_config());
        assert_eq!(base["mcp"]["roundtable"]["enabled"], true);
        assert_eq!(base["mcp"]["roundtable"]["environment"]["EXTRA"], "from-project", "a project can add variables");
        assert_eq!(base["a"], 1);
    }

    #[test]
    fn events_have_opencode_shapes() {
        let mut opencode = parse(&PLAN).expect("plan");
        let session = opencode.session_id.clone();
        let start = opencode.started(&Started { tools: &[], server: Ok(()), cwd: "/w", prompt: "p" });
        assert_eq!(start[0]["type"], "step_start");
        assert_eq!(start[0]["part"]["type"], "step-start");
        let arguments = json!({"status": "editing"});
        let call = Call { index: 0, tool: "session.heartbeat", arguments: &arguments };
        assert!(opencode.tool_started(&call).is_empty());
        let used =
            opencode.tool_finished(&call, &Outcome::Success(json!({"content": [{"type": "text", "text": "ok"}]})));
        let part = &used[0]["part"];
        assert_eq!(used[0]["type"], "tool_use");
        assert_eq!(part["tool"], "roundtable_session_heartbeat");
        assert_eq!(
            (part["state"]["status"].as_str(), part["state"]["output"].as_str()),
            (Some("completed"), Some("ok"))
        );
        let refused = opencode.tool_finished(&call, &Outcome::NotSent("denied".into()));
        assert_eq!(refused[0]["part"]["state"]["status"], "error");
        assert_eq!(refused[0]["part"]["state"]["error"], "denied");
        let done = opencode.finished("done", &Usage { input_tokens: 7, output_tokens: 42 });
        assert_eq!(done[0]["part"]["text"], "done");
        assert_eq!(done[1]["part"]["reason"], "stop");
        assert_eq!(
            done[1]["part"]["tokens"],
            json!({"total": 49, "input": 7, "output": 42, "reasoning": 0, "cache": {"read": 0, "write": 0}})
        );
        let failed = opencode.failed("gone");
        assert_eq!(failed[0]["error"]["data"]["message"], "gone");
        for line in start.iter().chain(&used).chain(&done).chain(&failed) {
            assert_eq!(line["sessionID"], session.as_str());
            assert!(line["timestamp"].is_u64());
        }
    }
}
