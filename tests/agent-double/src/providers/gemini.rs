//! `gemini --output-format=stream-json`: Gemini CLI in headless mode. It merges `mcpServers` from
//! the user, workspace and system settings (system, `GEMINI_CLI_SYSTEM_SETTINGS_PATH`, wins),
//! starts only servers allowed by `--allowed-mcp-server-names` (else `mcp.allowed`), expands
//! `$VAR` and `${VAR}`, gives the server its own environment minus secret-looking variables plus
//! the explicit `env`, and prints the stream-json events.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::args::{self, Arg, ArgError, Flag};
use super::fields::{self, Object};
use super::version;
use super::{
    Call, Edit, Env, Outcome, Parsed, Personality, Refusal, SERVER, ServerSpec, Started, Usage, ids, model, sanitize,
};

const VERSION: &str = "0.61.0";
const DEFAULT_MODEL: &str = "gemini-2.5-pro";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
const APPROVAL_MODES: [&str; 4] = ["default", "auto_edit", "yolo", "plan"];
/// Inherited variables whose names contain one of these never reach an MCP server.
const SECRET_WORDS: [&str; 6] = ["TOKEN", "SECRET", "PASSWORD", "KEY", "AUTH", "CREDENTIAL"];

/// Exit statuses from Gemini's `exitCodes.ts` (55 observed for an untrusted folder).
const EXIT_INPUT: u8 = 42;
const EXIT_CONFIG: u8 = 52;
const EXIT_UNTRUSTED: u8 = 55;

const FLAGS: &[Flag] = &[
    Flag::value(&["--output-format", "-o"]),
    Flag::value(&["--model", "-m"]),
    Flag::value(&["--approval-mode"]),
    Flag::switch(&["--yolo", "-y"]),
    Flag::value(&["--allowed-mcp-server-names"]),
    Flag::value(&["--prompt", "-p"]),
    Flag::value(&["--session-id"]),
    Flag::optional(&["--resume", "-r"]),
    Flag::switch(&["--skip-trust"]),
    Flag::switch(&["--debug", "-d"]),
    Flag::value(&["--include-directories"]),
    Flag::switch(&["--help", "-h"]),
    Flag::switch(&["--version", "-v"]),
];

const HELP: &str = "Usage: gemini [options] [query..]\n\n\
Gemini CLI (agent-double): headless mode only\n\n\
Options:\n  -o, --output-format                The format of the CLI output (the double plays stream-json)\n\
  -m, --model                        Model\n\
      --approval-mode                default | auto_edit | yolo | plan\n\
  -y, --yolo                         Deprecated: use --approval-mode=yolo\n\
      --allowed-mcp-server-names     Allowed MCP server names (comma separated)\n\
  -p, --prompt                       Prompt, appended to input on stdin\n\
      --session-id                   Start a new session with this id\n\
  -r, --resume                       Resume a session (latest, an id or an index)\n\
      --skip-trust                   Trust the current folder for this run\n\
  -d, --debug, --include-directories\n\
  -h, --help                         Show help\n\
  -v, --version                      Show version number\n";

#[derive(Debug)]
pub struct Gemini {
    output_format: Option<String>,
    model: String,
    approval_mode: String,
    allowed_names: Option<Vec<String>>,
    prompt_flag: Option<String>,
    query: Vec<String>,
    session_id: String,
    trusted: bool,
    /// The server's `trust: true` skips confirmations like YOLO does.
    trusted_server: bool,
    settings: Settings,
    // The transcript.
    started_at: Instant,
    tool_calls: u64,
    call_ids: BTreeMap<usize, String>,
}

/// Where Gemini looks for settings, lowest precedence first.
#[derive(Debug, Clone)]
struct Settings {
    user: PathBuf,
    workspace: PathBuf,
    system: PathBuf,
}

impl Settings {
    fn from_env(env: &Env) -> Self {
        let home = env.get("GEMINI_CLI_HOME").or_else(|| env.get("HOME")).unwrap_or("/");
        Self {
            user: PathBuf::from(home).join(".gemini/settings.json"),
            workspace: PathBuf::from(".gemini/settings.json"),
            system: PathBuf::from(
                env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH").unwrap_or("/etc/gemini-cli/settings.json"),
            ),
        }
    }
}

/// What the merged settings say about MCP.
#[derive(Debug, Default, PartialEq)]
struct McpSettings {
    servers: Map<String, Value>,
    allowed: Option<Vec<String>>,
    excluded: Vec<String>,
}

impl McpSettings {
    /// Folds one settings file over the ones below it: servers replace by name, lists replace.
    fn layer(&mut self, settings: &Object, path: &str) -> Result<(), String> {
        if let Some(servers) = fields::object(settings, "mcpServers", path)? {
            self.servers.extend(servers.clone());
        }
        if let Some(mcp) = fields::object(settings, "mcp", path)? {
            let at = format!("{path}: mcp");
            if let Some(allowed) = fields::strings(mcp, "allowed", &at)? {
                self.allowed = Some(allowed);
            }
            if let Some(excluded) = fields::strings(mcp, "excluded", &at)? {
                self.excluded = excluded;
            }
        }
        Ok(())
    }
}

fn yargs_error(error: ArgError) -> Refusal {
    Refusal::usage(match error {
        ArgError::Unknown(flag) => format!("Unknown argument: {}", flag.trim_start_matches('-')),
        ArgError::MissingValue(flag) => format!("Not enough arguments following: {}", flag.trim_start_matches('-')),
        ArgError::UnexpectedValue(flag) => format!("Argument {flag} takes no value"),
    })
}

fn choices(name: &str, given: &str, allowed: &[&str]) -> Refusal {
    let allowed: Vec<String> = allowed.iter().map(|choice| format!("\"{choice}\"")).collect();
    Refusal::new(1, format!("Invalid values:\n  Argument: {name}, Given: \"{given}\", Choices: {}", allowed.join(", ")))
}

/// `$VAR` and `${VAR}`; an unset variable becomes the empty string.
fn expand(text: &str, env: &Env) -> String {
    let mut out = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let rest = &text[at + 1..];
        let (name, consumed) = if let Some(braced) = rest.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => {
                    out.push(c);
                    continue;
                }
            }
        } else {
            let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            (&rest[..len], len)
        };
        if name.is_empty() {
            out.push(c);
            continue;
        }
        out.push_str(env.get(name).unwrap_or_default());
        // Skip what the reference consumed; `consumed` counts bytes after the `$`.
        while chars.peek().is_some_and(|(next, _)| *next <= at + consumed) {
            chars.next();
        }
    }
    out
}

fn secret_looking(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|word| upper.contains(word))
}

/// One `mcpServers` entry to a launch. Outer `Err`: invalid settings; inner `Err`: a server the
/// double cannot start (another transport).
fn server_spec(entry: &Value, env: &Env) -> Result<(Result<ServerSpec, String>, bool), String> {
    let at = format!("mcpServers.{SERVER}");
    let Value::Object(entry) = entry else { return Err(format!("`{at}` must be an object")) };
    let trust = fields::boolean(entry, "trust", &at)?.unwrap_or(false);
    let Some(program) = fields::string(entry, "command", &at)? else {
        let why = if entry.contains_key("url") || entry.contains_key("httpUrl") {
            format!("`{at}` is a remote server; the double starts only stdio servers")
        } else {
            format!("`{at}` has no `command`")
        };
        return Ok((Err(why), trust));
    };
    let args = fields::strings(entry, "args", &at)?.unwrap_or_default();
    let own = fields::string_map(entry, "env", &at)?.unwrap_or_default();
    let mut child_env: BTreeMap<String, String> =
        env.vars().iter().filter(|(name, _)| !secret_looking(name)).map(|(k, v)| (k.clone(), v.clone())).collect();
    child_env.extend(own.iter().map(|(name, value)| (name.clone(), expand(value, env))));
    let timeout = fields::duration(entry, "timeout", &at, Duration::from_millis(1))?.unwrap_or(DEFAULT_TIMEOUT);
    let spec = ServerSpec {
        program: expand(&program, env),
        args: args.iter().map(|arg| expand(arg, env)).collect(),
        env: child_env,
        cwd: fields::string(entry, "cwd", &at)?.map(|cwd| PathBuf::from(expand(&cwd, env))),
        startup_timeout: timeout,
        tool_timeout: timeout,
    };
    Ok((Ok(spec), trust))
}

impl Gemini {
    fn tool_name(tool: &str) -> String {
        format!("mcp_{SERVER}_{}", sanitize(tool, &['.', ':']))
    }

    fn event(&self, kind: &str, fields: Value) -> Value {
        let mut event = json!({ "type": kind, "timestamp": ids::iso_now() });
        if let (Value::Object(event), Value::Object(fields)) = (&mut event, fields) {
            event.extend(fields);
        }
        event
    }

    fn stats(&self, usage: &Usage) -> Value {
        let tokens = json!({
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached": 0,
            "input": usage.input_tokens,
        });
        let mut stats = tokens.clone();
        stats["duration_ms"] = json!(u64::try_from(self.started_at.elapsed().as_millis()).unwrap_or(u64::MAX));
        stats["tool_calls"] = json!(self.tool_calls);
        stats["models"] = json!({ self.model.clone(): tokens });
        stats
    }

    fn load_settings(&self) -> Result<McpSettings, Refusal> {
        let mut merged = McpSettings::default();
        for path in [&self.settings.user, &self.settings.workspace, &self.settings.system] {
            let Ok(text) = std::fs::read_to_string(path) else { continue };
            let shown = path.display().to_string();
            let refuse = |why: String| Refusal::new(EXIT_CONFIG, format!("Error in {shown}: {why}"));
            let settings: Value = serde_json::from_str(&text).map_err(|error| refuse(error.to_string()))?;
            let Value::Object(settings) = settings else { return Err(refuse("settings must be an object".into())) };
            merged.layer(&settings, &shown).map_err(refuse)?;
        }
        Ok(merged)
    }

    fn flag(&mut self, name: &str, value: Option<String>, yolo: &mut bool) -> Result<Option<Parsed<Self>>, Refusal> {
        match (name, value) {
            ("--help", _) => return Ok(Some(Parsed::Print(HELP.to_owned()))),
            ("--version", _) => return Ok(Some(Parsed::Print(format!("{}\n", version(VERSION))))),
            ("--output-format", Some(format)) => {
                if !["text", "json", "stream-json"].contains(&format.as_str()) {
                    return Err(choices("output-format", &format, &["text", "json", "stream-json"]));
                }
                self.output_format = Some(format);
            }
            ("--model", Some(model)) => self.model = model,
            ("--approval-mode", Some(mode)) => {
                if !APPROVAL_MODES.contains(&mode.as_str()) {
                    return Err(choices("approval-mode", &mode, &APPROVAL_MODES));
                }
                self.approval_mode = mode;
            }
            ("--yolo", _) => *yolo = true,
            ("--allowed-mcp-server-names", Some(names)) => {
                let names = names.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned);
                self.allowed_names.get_or_insert_with(Vec::new).extend(names);
            }
            ("--prompt", Some(prompt)) => self.prompt_flag = Some(prompt),
            ("--session-id", Some(id)) => {
                if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                    return Err(Refusal::new(1, format!("Invalid session id: {id}")));
                }
                self.session_id = id;
            }
            // The double keeps no sessions: a UUID names the one continued, `latest` or an index a new one.
            ("--resume", id) => {
                if let Some(id) = id.filter(|id| ids::is_uuid(id)) {
                    self.session_id = id;
                }
            }
            ("--skip-trust", _) => self.trusted = true,
            ("--debug" | "--include-directories", _) => {}
            (other, _) => return Err(yargs_error(ArgError::Unknown(other.to_owned()))),
        }
        Ok(None)
    }
}

impl Personality for Gemini {
    const NAME: &'static str = "gemini";

    fn parse(argv: &[String], env: &Env) -> Result<Parsed<Self>, Refusal> {
        let mut gemini = Self {
            output_format: None,
            model: DEFAULT_MODEL.to_owned(),
            approval_mode: "default".to_owned(),
            allowed_names: None,
            prompt_flag: None,
            query: Vec::new(),
            session_id: ids::uuid(),
            trusted: env.get("GEMINI_CLI_TRUST_WORKSPACE") == Some("true"),
            trusted_server: false,
            settings: Settings::from_env(env),
            started_at: Instant::now(),
            tool_calls: 0,
            call_ids: BTreeMap::new(),
        };
        let (mut yolo, mut approval_flag, mut session_flags) = (false, false, 0);
        for arg in args::read(argv, FLAGS).map_err(yargs_error)? {
            match arg {
                Arg::Positional(word) => gemini.query.push(word),
                Arg::Flag { name, value } => {
                    approval_flag |= name == "--approval-mode";
                    session_flags += usize::from(matches!(name, "--session-id" | "--resume"));
                    if let Some(print) = gemini.flag(name, value, &mut yolo)? {
                        return Ok(print);
                    }
                }
            }
        }
        if yolo && approval_flag {
            return Err(Refusal::new(
                1,
                "Cannot use both --yolo (-y) and --approval-mode together. Use --approval-mode=yolo instead.",
            ));
        }
        if yolo {
            gemini.approval_mode = "yolo".into();
        }
        if gemini.prompt_flag.is_some() && !gemini.query.is_empty() {
            return Err(Refusal::new(1, "Cannot use both a positional prompt and the --prompt (-p) flag together"));
        }
        if session_flags > 1 {
            return Err(Refusal::new(1, "Arguments session-id and resume are mutually exclusive"));
        }
        Ok(Parsed::Run(gemini))
    }

    fn preflight(&self) -> Result<(), Refusal> {
        if self.output_format.as_deref() != Some("stream-json") {
            return Err(Refusal::usage("agent-double plays `gemini --output-format=stream-json` only"));
        }
        if !self.trusted {
            return Err(Refusal::new(
                EXIT_UNTRUSTED,
                "Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, set the \
                 `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory in interactive mode.",
            ));
        }
        Ok(())
    }

    fn prompt(&self, stdin: &mut dyn FnMut() -> std::io::Result<String>) -> std::io::Result<String> {
        let argument = match &self.prompt_flag {
            Some(prompt) => prompt.clone(),
            None => self.query.join(" "),
        };
        let piped = stdin()?;
        // The argument is appended to piped input.
        Ok(match (piped.is_empty(), argument.is_empty()) {
            (_, true) => piped,
            (true, false) => argument,
            (false, false) => format!("{piped}\n\n{argument}"),
        })
    }

    fn no_prompt(&self) -> Refusal {
        Refusal::new(
            EXIT_INPUT,
            "No input provided via stdin. Input can be provided by piping data into gemini or using the --prompt option.",
        )
    }

    fn server(&mut self, env: &Env) -> Result<Result<ServerSpec, String>, Refusal> {
        let settings = self.load_settings()?;
        let allowed = self.allowed_names.clone().or(settings.allowed);
        if allowed.as_ref().is_some_and(|names| !names.iter().any(|name| name == SERVER))
            || settings.excluded.iter().any(|name| name == SERVER)
        {
            return Ok(Err(format!(
                "MCP server `{SERVER}` is not allowed (--allowed-mcp-server-names, mcp.allowed, mcp.excluded)"
            )));
        }
        let Some(entry) = settings.servers.get(SERVER) else {
            return Ok(Err(format!("no MCP server `{SERVER}` in mcpServers ({})", self.settings.system.display())));
        };
        let (spec, trust) =
            server_spec(entry, env).map_err(|why| Refusal::new(EXIT_CONFIG, format!("Error in settings: {why}")))?;
        self.trusted_server = trust;
        Ok(spec)
    }

    fn permits(&mut self, _call: &Call<'_>, _read_only: bool) -> Result<(), String> {
        // Headless mode cannot ask, so a call that needs confirmation is denied by policy.
        if self.approval_mode == "yolo" || self.trusted_server {
            Ok(())
        } else {
            Err("Tool execution denied by policy.".to_owned())
        }
    }

    fn model_request(&self, env: &Env, prompt: &str) -> Result<Option<model::Request>, Value> {
        let Some(base) = env.get("GOOGLE_GEMINI_BASE_URL").filter(|base| !base.is_empty()) else { return Ok(None) };
        let url = model::join(base, &format!("/v1beta/models/{}:streamGenerateContent?alt=sse", self.model));
        let key = model::key(env, &url, "GEMINI_API_KEY")?;
        Ok(Some(model::Request {
            url,
            headers: vec![("x-goog-api-key".into(), key)],
            body: json!({ "contents": [{ "role": "user", "parts": [{ "text": prompt }] }] }),
        }))
    }

    fn started(&mut self, started: &Started<'_>) -> Vec<Value> {
        vec![
            self.event("init", json!({ "session_id": self.session_id, "model": self.model })),
            self.event("message", json!({ "role": "user", "content": started.prompt })),
        ]
    }

    fn tool_started(&mut self, call: &Call<'_>) -> Vec<Value> {
        self.tool_calls += 1;
        let name = Self::tool_name(call.tool);
        let id = format!("{name}-{}-{}", ids::epoch_ms(), call.index);
        self.call_ids.insert(call.index, id.clone());
        vec![self.event("tool_use", json!({ "tool_name": name, "tool_id": id, "parameters": call.arguments }))]
    }

    fn tool_finished(&mut self, call: &Call<'_>, outcome: &Outcome) -> Vec<Value> {
        let id = self.call_ids.get(&call.index).cloned().unwrap_or_default();
        let fields = if outcome.is_error() {
            let kind = if matches!(outcome, Outcome::NotSent(_)) { "policy_violation" } else { "mcp_tool_error" };
            json!({ "tool_id": id, "status": "error", "error": { "type": kind, "message": outcome.text() } })
        } else {
            json!({ "tool_id": id, "status": "success", "output": outcome.text() })
        };
        vec![self.event("tool_result", fields)]
    }

    fn edited(&mut self, edits: &[Edit]) -> Vec<Value> {
        let mut events = Vec::new();
        for edit in edits {
            self.tool_calls += 1;
            let id = format!("write_file-{}-{}", ids::epoch_ms(), self.tool_calls);
            let parameters = json!({ "file_path": edit.path, "content": edit.content });
            events.push(
                self.event("tool_use", json!({ "tool_name": "write_file", "tool_id": id, "parameters": parameters })),
            );
            let said = if edit.created {
                format!("Successfully created and wrote to new file: {}.", edit.path)
            } else {
                format!("Successfully overwrote file: {}.", edit.path)
            };
            events.push(self.event("tool_result", json!({ "tool_id": id, "status": "success", "output": said })));
        }
        events
    }

    fn finished(&mut self, message: &str, usage: &Usage) -> Vec<Value> {
        vec![
            self.event("message", json!({ "role": "assistant", "content": message, "delta": true })),
            self.event("result", json!({ "status": "success", "stats": self.stats(usage) })),
        ]
    }

    fn failed(&mut self, message: &str) -> Vec<Value> {
        let stats = self.stats(&Usage { input_tokens: 0, output_tokens: 0 });
        vec![
            self.event("error", json!({ "severity": "error", "message": message })),
            self.event(
                "result",
                json!({ "status": "error", "error": { "type": "Error", "message": message }, "stats": stats }),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: [&str; 4] = [
        "--output-format=stream-json",
        "--model=test-model",
        "--approval-mode=yolo",
        "--allowed-mcp-server-names=roundtable",
    ];

    fn trusted() -> Env {
        Env::of(&[
            ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
            ("GEMINI_CLI_SYSTEM_SETTINGS_PATH", "/nonexistent/settings.json"),
        ])
    }

    fn parse_with(argv: &[&str], env: &Env) -> Result<Gemini, Refusal> {
        let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
        match Gemini::parse(&argv, env)? {
            Parsed::Run(gemini) => Ok(gemini),
            Parsed::Print(text) => Err(Refusal::new(0, text)),
        }
    }

    fn status(argv: &[&str], env: &Env) -> (u8, String) {
        match parse_with(argv, env).and_then(|gemini| gemini.preflight().map(|()| gemini)) {
            Ok(_) => (99, "accepted".into()),
            Err(refusal) => (refusal.status, refusal.message),
        }
    }

    #[test]
    fn accepts_roundtables_plan_and_its_resume() {
        let gemini = parse_with(&PLAN, &trusted()).expect("plan");
        assert_eq!(gemini.preflight(), Ok(()));
        assert_eq!(gemini.model, "test-model");
        assert_eq!(gemini.approval_mode, "yolo");
        assert_eq!(gemini.allowed_names, Some(vec!["roundtable".to_owned()]));
        let id = "3f9c2b1e-8d4a-4c6b-9e2f-0a1b2c3d4e5f";
        let resumed = parse_with(&[&PLAN[..], &["--resume", id, "the briefing"]].concat(), &trusted()).expect("resume");
        assert_eq!(resumed.session_id, id);
        assert_eq!(resumed.query, ["the briefing"]);
        let latest = parse_with(&[&PLAN[..], &["--resume"]].concat(), &trusted()).expect("bare resume");
        assert!(ids::is_uuid(&latest.session_id));
    }

    #[test]
    fn refuses_what_gemini_refuses() {
        let env = trusted();
        let cases: &[(&[&str], u8, &str)] = &[
            (&["--approval-mode=yolo"], 2, "stream-json"),
            (&["--output-format=json"], 2, "stream-json"),
            (&["--output-format=xml"], 1, "Choices"),
            (&["--output-format=stream-json", "--approval-mode=always"], 1, "Given: \"always\""),
            (&["--output-format=stream-json", "--sandbox"], 2, "Unknown argument: sandbox"),
            (&["--output-format=stream-json", "-y", "--approval-mode=yolo"], 1, "Cannot use both --yolo"),
            (&["--output-format=stream-json", "-p", "x", "query"], 1, "positional prompt"),
            (&["--output-format=stream-json", "--session-id=a b"], 1, "Invalid session id"),
            (&["--output-format=stream-json", "--session-id=a", "--resume=b"], 1, "mutually exclusive"),
            (&["-v"], 0, "0.61.0"),
        ];
        for (argv, want, needle) in cases {
            let (got, message) = status(argv, &env);
            assert_eq!(got, *want, "{argv:?}: {message}");
            assert!(message.contains(needle), "{argv:?}: {message}");
        }
    }

    #[test]
    fn an_untrusted_folder_exits_55_unless_skip_trust() {
        let untrusted = Env::of(&[("GEMINI_CLI_TRUST_WORKSPACE", "1")]);
        let (status_code, message) = status(&PLAN, &untrusted);
        assert_eq!(status_code, 55);
        assert!(message.contains("not running in a trusted directory"), "{message}");
        assert_eq!(status(&[&PLAN[..], &["--skip-trust"]].concat(), &untrusted).0, 99);
    }

    #[test]
    fn expands_like_gemini() {
        let env = Env::of(&[("CAP", "rtcap_x"), ("A_B", "ab")]);
        let cases = [
            ("$CAP", "rtcap_x"),
            ("${CAP}", "rtcap_x"),
            ("x-$CAP-y", "x-rtcap_x-y"),
            ("$A_B.c", "ab.c"),
            ("${NOPE}|$NOPE", "|"),
            ("$", "$"),
            ("a$-b", "a$-b"),
            ("${CAP", "${CAP"),
            ("é$CAP€", "értcap_x€"),
        ];
        for (text, want) in cases {
            assert_eq!(expand(text, &env), want, "{text}");
        }
    }

    #[test]
    fn the_server_gets_the_environment_minus_secrets_plus_env() {
        let env = Env::of(&[
            ("PATH", "/bin"),
            ("HTTPS_PROXY", "http://127.0.0.1:3128"),
            ("GEMINI_API_KEY", "secret"),
            ("GITHUB_TOKEN", "secret"),
            ("MY_PASSWORD", "secret"),
            ("oauth_thing", "secret"),
            ("ROUNDTABLE_AGENT_CAPABILITY", "rtcap_x"),
        ]);
        let entry = json!({
            "command": "/roundtable/bin/roundtable",
            "args": ["mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"],
            "env": { "ROUNDTABLE_AGENT_CAPABILITY": "$ROUNDTABLE_AGENT_CAPABILITY", "API_KEY_FOR_SERVER": "${GEMINI_API_KEY}" },
            "timeout": 600000,
            "trust": true,
        });
        let (spec, trust) = server_spec(&entry, &env).expect("valid");
        let spec = spec.expect("startable");
        assert!(trust);
        let names: Vec<&str> = spec.env.keys().map(String::as_str).collect();
        assert_eq!(names, ["API_KEY_FOR_SERVER", "HTTPS_PROXY", "PATH", "ROUNDTABLE_AGENT_CAPABILITY"]);
        assert_eq!(spec.env.get("API_KEY_FOR_SERVER").map(String::as_str), Some("secret"), "explicit env wins");
        assert_eq!(spec.tool_timeout, Duration::from_secs(600));
        let remote = server_spec(&json!({"httpUrl": "http://x"}), &env).expect("valid");
        assert!(remote.0.is_err());
        assert!(server_spec(&json!({"command": "x", "args": "y"}), &env).is_err());
    }

    #[test]
    fn settings_layer_by_precedence_and_the_allow_list_applies() {
        let mut merged = McpSettings::default();
        let user = json!({"mcpServers": {"roundtable": {"command": "user"}, "other": {"command": "o"}}, "mcp": {"allowed": ["other"]}});
        let system = json!({"mcpServers": {"roundtable": {"command": "system"}}, "mcp": {"allowed": ["roundtable"]}});
        for (layer, path) in [(&user, "user"), (&system, "system")] {
            if let Value::Object(layer) = layer {
                merged.layer(layer, path).expect("valid");
            }
        }
        assert_eq!(merged.servers["roundtable"]["command"], "system");
        assert_eq!(merged.servers["other"]["command"], "o");
        assert_eq!(merged.allowed, Some(vec!["roundtable".to_owned()]));
        let mut bad = McpSettings::default();
        if let Value::Object(layer) = json!({"mcp": {"allowed": "roundtable"}}) {
            assert!(bad.layer(&layer, "system").is_err());
        }
    }

    #[test]
    fn tools_need_yolo_or_a_trusted_server() {
        let arguments = json!({});
        let call = Call { index: 0, tool: "task.get", arguments: &arguments };
        let mut cautious = parse_with(&["--output-format=stream-json"], &trusted()).expect("parse");
        assert_eq!(cautious.permits(&call, true), Err("Tool execution denied by policy.".into()));
        cautious.trusted_server = true;
        assert_eq!(cautious.permits(&call, false), Ok(()));
        let mut yolo = parse_with(&PLAN, &trusted()).expect("plan");
        assert_eq!(yolo.permits(&call, false), Ok(()));
    }

    #[test]
    fn events_have_gemini_shapes() {
        let mut gemini = parse_with(&PLAN, &trusted()).expect("plan");
        let start = gemini.started(&Started { tools: &[], server: Ok(()), cwd: "/w", prompt: "hello" });
        assert_eq!(start[0]["type"], "init");
        assert_eq!(start[0]["session_id"], gemini.session_id.as_str());
        assert_eq!(start[0]["model"], "test-model");
        assert!(start[0]["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert_eq!((start[1]["role"].as_str(), start[1]["content"].as_str()), (Some("user"), Some("hello")));
        let arguments = json!({"paths": ["a"]});
        let call = Call { index: 3, tool: "claims.acquire", arguments: &arguments };
        let used = gemini.tool_started(&call);
        assert_eq!(used[0]["tool_name"], "mcp_roundtable_claims.acquire");
        assert_eq!(used[0]["parameters"], arguments);
        let ok = gemini.tool_finished(&call, &Outcome::Success(json!({"content": [{"type": "text", "text": "ok"}]})));
        assert_eq!(ok[0]["tool_id"], used[0]["tool_id"]);
        assert_eq!((ok[0]["status"].as_str(), ok[0]["output"].as_str()), (Some("success"), Some("ok")));
        let refused = gemini.tool_finished(&call, &Outcome::RpcError { code: 1, message: "no".into() });
        assert_eq!(refused[0]["status"], "error");
        assert_eq!(refused[0]["error"]["message"], "MCP error 1: no");
        let done = gemini.finished("done", &Usage { input_tokens: 100, output_tokens: 42 });
        assert_eq!(done[0]["role"], "assistant");
        let stats = &done[1]["stats"];
        assert_eq!(done[1]["status"], "success");
        assert_eq!(
            (stats["total_tokens"].as_u64(), stats["input_tokens"].as_u64(), stats["output_tokens"].as_u64()),
            (Some(142), Some(100), Some(42))
        );
        assert_eq!(
            (stats["cached"].as_u64(), stats["input"].as_u64(), stats["tool_calls"].as_u64()),
            (Some(0), Some(100), Some(1))
        );
        let failed = gemini.failed("gone");
        assert_eq!(failed[1]["status"], "error");
        assert_eq!(failed[1]["error"]["message"], "gone");
    }
}
