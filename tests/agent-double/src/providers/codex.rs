//! `codex exec --json`: Codex's headless mode. It reads `[mcp_servers.roundtable]` from
//! `$CODEX_HOME/config.toml`, gives the server only Codex's default variables plus `env_vars`
//! (copied from its own environment) and `env`, and prints `ThreadEvent` JSON lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::args::{self, Arg, ArgError, Flag};
use super::fields::{self, Object};
use super::version;
use super::{
    Call, Edit, Env, Outcome, Parsed, Personality, Refusal, SERVER, ServerSpec, Started, Usage, ids, model, toml,
};

const VERSION: &str = "0.171.0";

/// What Codex copies from its own environment into every stdio server's (`DEFAULT_ENV_VARS`).
const DEFAULT_ENV_VARS: [&str; 10] =
    ["HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ"];

const DEFAULT_STARTUP: Duration = Duration::from_secs(10);
const DEFAULT_TOOL: Duration = Duration::from_secs(60);

const FLAGS: &[Flag] = &[
    Flag::switch(&["--json", "--experimental-json"]),
    Flag::switch(&["--skip-git-repo-check"]),
    Flag::switch(&["--dangerously-bypass-approvals-and-sandbox", "--yolo"]),
    Flag::value(&["--cd", "-C"]),
    Flag::value(&["--model", "-m"]),
    Flag::value(&["--sandbox", "-s"]),
    Flag::switch(&["--ephemeral"]),
    Flag::value(&["--output-last-message", "-o"]),
    Flag::value(&["--color"]),
    Flag::switch(&["--full-auto"]),
    Flag::switch(&["--help", "-h"]),
    Flag::switch(&["--version", "-V"]),
];

/// The flags Codex declares `global`, the only ones accepted after `resume`.
const GLOBAL: &[&str] = &[
    "--json",
    "--output-last-message",
    "--skip-git-repo-check",
    "--ephemeral",
    "--model",
    "--dangerously-bypass-approvals-and-sandbox",
    "--help",
    "--version",
];

const HELP: &str = "Run Codex non-interactively (agent-double)\n\n\
Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] resume <SESSION_ID> [PROMPT]\n\n\
Arguments:\n  [PROMPT]  Instructions; if omitted or `-`, read from stdin\n\n\
Options:\n      --json                                      Print events to stdout as JSONL\n\
      --skip-git-repo-check                       Allow running outside a Git repository\n\
      --dangerously-bypass-approvals-and-sandbox  Skip all confirmation prompts and sandboxing\n\
  -C, --cd <DIR>                                  Working root\n\
  -m, --model <MODEL>                             Model\n\
  -s, --sandbox <MODE>                            read-only | workspace-write | danger-full-access\n\
      --ephemeral                                 Do not persist session files\n\
  -o, --output-last-message <FILE>                Write the last agent message to FILE\n\
      --color <COLOR>                             always | never | auto\n\
  -h, --help                                      Print help\n\
  -V, --version                                   Print version\n";

#[derive(Debug, Default)]
pub struct Codex {
    json: bool,
    skip_git_repo_check: bool,
    bypass: bool,
    cd: Option<PathBuf>,
    prompt: Option<String>,
    last_message_file: Option<PathBuf>,
    model: Option<String>,
    home: PathBuf,
    approvals: Approvals,
    /// `resume <UUID>`: the thread must be in `$CODEX_HOME/sessions/`.
    resuming: bool,
    // The transcript.
    thread_id: String,
    next_item: usize,
    call_items: BTreeMap<usize, String>,
}

/// `default_tools_approval_mode` and `tools.<name>.approval_mode`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Approvals {
    default: Option<String>,
    per_tool: BTreeMap<String, String>,
}

/// A clap-style usage error (clap exits 2).
fn clap_error(what: &str) -> Refusal {
    Refusal::usage(format!(
        "error: {what}\n\nUsage: codex exec [OPTIONS] [PROMPT]\n\nFor more information, try '--help'."
    ))
}

fn arg_error(error: ArgError) -> Refusal {
    match error {
        ArgError::Unknown(flag) => clap_error(&format!("unexpected argument '{flag}' found")),
        ArgError::MissingValue(flag) => clap_error(&format!("a value is required for '{flag}' but none was supplied")),
        ArgError::UnexpectedValue(flag) => clap_error(&format!("unexpected value for '{flag}'")),
    }
}

fn codex_home(env: &Env) -> PathBuf {
    match env.get("CODEX_HOME") {
        Some(home) => PathBuf::from(home),
        None => PathBuf::from(env.get("HOME").unwrap_or("/")).join(".codex"),
    }
}

impl Codex {
    /// Where this thread's rollout lives.
    fn rollout(&self) -> PathBuf {
        self.home.join("sessions").join(format!("{}.jsonl", self.thread_id))
    }

    fn item_id(&mut self) -> String {
        let id = format!("item_{}", self.next_item);
        self.next_item += 1;
        id
    }

    fn flag(&mut self, name: &str, value: Option<String>) -> Result<Option<Parsed<Self>>, Refusal> {
        let value = value.unwrap_or_default();
        match name {
            "--help" => return Ok(Some(Parsed::Print(HELP.to_owned()))),
            "--version" => return Ok(Some(Parsed::Print(format!("codex-cli {}\n", version(VERSION))))),
            "--json" => self.json = true,
            "--skip-git-repo-check" => self.skip_git_repo_check = true,
            "--dangerously-bypass-approvals-and-sandbox" => self.bypass = true,
            "--cd" => self.cd = Some(PathBuf::from(value)),
            "--model" => self.model = Some(value),
            "--ephemeral" => {}
            "--output-last-message" => self.last_message_file = Some(PathBuf::from(value)),
            "--sandbox" if ["read-only", "workspace-write", "danger-full-access"].contains(&value.as_str()) => {}
            "--color" if ["always", "never", "auto"].contains(&value.as_str()) => {}
            "--sandbox" | "--color" => {
                return Err(clap_error(&format!("invalid value '{value}' for '{name}'")));
            }
            "--full-auto" => {
                return Err(Refusal::usage("`--full-auto` is deprecated; use `--sandbox workspace-write`"));
            }
            other => return Err(clap_error(&format!("unexpected argument '{other}' found"))),
        }
        Ok(None)
    }
}

impl Personality for Codex {
    const NAME: &'static str = "codex";

    fn parse(argv: &[String], env: &Env) -> Result<Parsed<Self>, Refusal> {
        let Some((command, rest)) = argv.split_first() else {
            return Err(Refusal::usage("agent-double plays only `codex exec` (the interactive TUI needs a terminal)"));
        };
        match command.as_str() {
            "exec" | "e" => {}
            "--help" | "-h" => return Ok(Parsed::Print(HELP.to_owned())),
            "--version" | "-V" => return Ok(Parsed::Print(format!("codex-cli {}\n", version(VERSION)))),
            other => {
                return Err(clap_error(&format!(
                    "unrecognized subcommand '{other}' (agent-double plays only `codex exec`)"
                )));
            }
        }
        let mut codex = Self { home: codex_home(env), thread_id: ids::uuid(), ..Self::default() };
        let mut positionals = Vec::new();
        let mut resume = false;
        for arg in args::read(rest, FLAGS).map_err(arg_error)? {
            match arg {
                Arg::Positional(word) if word == "resume" && positionals.is_empty() && !resume => resume = true,
                Arg::Positional(word) => positionals.push(word),
                Arg::Flag { name, .. } if resume && !GLOBAL.contains(&name) => {
                    return Err(clap_error(&format!("unexpected argument '{name}' found")));
                }
                Arg::Flag { name, value } => {
                    if let Some(print) = codex.flag(name, value)? {
                        return Ok(print);
                    }
                }
            }
        }
        let mut positionals = positionals.into_iter();
        if resume {
            let Some(id) = positionals.next() else {
                return Err(clap_error("resume needs a SESSION_ID (agent-double does not play --last)"));
            };
            // A UUID names a thread to resume; another word is a thread name, and real Codex
            // starts a new thread when no thread has that name (the double keeps no threads).
            if ids::is_uuid(&id) {
                codex.thread_id = id.to_ascii_lowercase();
                codex.resuming = true;
            }
        }
        codex.prompt = positionals.next();
        if let Some(extra) = positionals.next() {
            return Err(clap_error(&format!("unexpected argument '{extra}' found")));
        }
        Ok(Parsed::Run(codex))
    }

    fn workdir(&self) -> Option<&Path> {
        self.cd.as_deref()
    }

    fn preflight(&self) -> Result<(), Refusal> {
        if !self.json {
            return Err(Refusal::usage(
                "agent-double plays `codex exec --json` only: without --json Codex prints text",
            ));
        }
        let cwd = std::env::current_dir().unwrap_or_default();
        if !self.skip_git_repo_check && !self.bypass && !cwd.ancestors().any(|dir| dir.join(".git").exists()) {
            return Err(Refusal::new(1, "Not inside a trusted directory and --skip-git-repo-check was not specified."));
        }
        // Real Codex keeps a rollout per thread under CODEX_HOME; resuming an unknown UUID fails.
        if self.resuming && !self.rollout().is_file() {
            return Err(Refusal::new(1, format!("Error: no rollout found for thread id {}", self.thread_id)));
        }
        Ok(())
    }

    fn prompt(&self, stdin: &mut dyn FnMut() -> std::io::Result<String>) -> std::io::Result<String> {
        match self.prompt.as_deref() {
            None | Some("-") => stdin(),
            Some(prompt) => {
                // Piped input next to a prompt argument is appended as a `<stdin>` block.
                let piped = stdin()?;
                if piped.trim().is_empty() {
                    Ok(prompt.to_owned())
                } else {
                    Ok(format!("{prompt}\n\n<stdin>\n{piped}\n</stdin>"))
                }
            }
        }
    }

    fn no_prompt(&self) -> Refusal {
        Refusal::new(1, "No prompt provided via stdin.")
    }

    fn server(&mut self, env: &Env) -> Result<Result<ServerSpec, String>, Refusal> {
        let path = self.home.join("config.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Err(format!("no MCP server `{SERVER}` is configured ({} does not exist)", path.display())));
            }
            Err(error) => {
                return Err(Refusal::new(1, format!("Error loading config.toml: {}: {error}", path.display())));
            }
        };
        let table = toml::read_table(&text, &["mcp_servers", SERVER])
            .map_err(|error| Refusal::new(1, format!("Error loading config.toml: {}: {error}", path.display())))?;
        let Some(table) = table else {
            return Ok(Err(format!("no MCP server `{SERVER}` in {}", path.display())));
        };
        let (server, approvals) = server_spec(&table, env)
            .map_err(|error| Refusal::new(1, format!("Error loading config.toml: {}: {error}", path.display())))?;
        self.approvals = approvals;
        Ok(server)
    }

    fn permits(&mut self, call: &Call<'_>, read_only: bool) -> Result<(), String> {
        let mode = self.approvals.per_tool.get(call.tool).or(self.approvals.default.as_ref()).map(String::as_str);
        // Exec has no one to ask: a call that needs approval is declined as if the user cancelled.
        match mode {
            _ if self.bypass => Ok(()),
            Some("approve") => Ok(()),
            None | Some("auto") if read_only => Ok(()),
            _ => Err("user cancelled MCP tool call".to_owned()),
        }
    }

    fn model_request(&self, env: &Env, prompt: &str) -> Result<Option<model::Request>, Value> {
        // Codex speaks to the provider `model_provider` selects; the built-in `openai` one is
        // not played (it would leave the machine).
        let Ok(text) = std::fs::read_to_string(self.home.join("config.toml")) else { return Ok(None) };
        let selected = toml::read_table(&text, &[])
            .ok()
            .flatten()
            .and_then(|top| top.get("model_provider").and_then(Value::as_str).map(str::to_owned));
        let Some(id) = selected.filter(|id| id != "openai") else { return Ok(None) };
        let provider = toml::read_table(&text, &["model_providers", &id]).ok().flatten();
        let Some(base) = provider.as_ref().and_then(|p| p.get("base_url")).and_then(Value::as_str) else {
            return Err(json!({
                "type": model::EVENT, "status": null,
                "error": format!("Model provider `{id}` not found in model_providers"),
            }));
        };
        let url = model::join(base, "/responses");
        let mut headers = vec![("Accept".to_owned(), "text/event-stream".to_owned())];
        if let Some(name) = provider.as_ref().and_then(|p| p.get("env_key")).and_then(Value::as_str) {
            headers.push(("Authorization".into(), format!("Bearer {}", model::key(env, &url, name)?)));
        }
        Ok(Some(model::Request {
            url,
            headers,
            body: json!({
                "model": self.model.as_deref().unwrap_or("gpt-5-codex"),
                "instructions": "",
                "input": [{ "type": "message", "role": "user", "content": [{ "type": "input_text", "text": prompt }] }],
                "stream": true,
                "store": false,
            }),
        }))
    }

    fn started(&mut self, started: &Started<'_>) -> Vec<Value> {
        // The thread's rollout, so a later `resume` of it (with the same CODEX_HOME) finds it.
        let rollout = self.rollout();
        let recorded = rollout.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
            use std::io::Write as _;
            let line = json!({"type": "turn", "resumed": self.resuming, "prompt_bytes": started.prompt.len()});
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&rollout)?
                .write_all(format!("{line}\n").as_bytes())
        });
        if let Err(error) = recorded {
            eprintln!("codex: cannot record the rollout {}: {error}", rollout.display());
        }
        let mut events = vec![json!({ "type": "thread.started", "thread_id": self.thread_id })];
        if started.server.is_ok() {
            events.push(json!({ "type": "turn.started" }));
        }
        events
    }

    fn tool_started(&mut self, call: &Call<'_>) -> Vec<Value> {
        let id = self.item_id();
        self.call_items.insert(call.index, id.clone());
        vec![json!({
            "type": "item.started",
            "item": {
                "id": id, "type": "mcp_tool_call", "server": SERVER, "tool": call.tool,
                "arguments": call.arguments, "result": null, "error": null, "status": "in_progress",
            },
        })]
    }

    fn tool_finished(&mut self, call: &Call<'_>, outcome: &Outcome) -> Vec<Value> {
        let id = self.call_items.get(&call.index).cloned().unwrap_or_default();
        let (result, error, status) = match outcome {
            Outcome::Success(result) => (tool_result(result), Value::Null, "completed"),
            Outcome::ToolError(result) => (tool_result(result), json!({ "message": outcome.text() }), "failed"),
            Outcome::RpcError { .. } | Outcome::NotSent(_) => {
                (Value::Null, json!({ "message": outcome.text() }), "failed")
            }
        };
        vec![json!({
            "type": "item.completed",
            "item": {
                "id": id, "type": "mcp_tool_call", "server": SERVER, "tool": call.tool,
                "arguments": call.arguments, "result": result, "error": error, "status": status,
            },
        })]
    }

    fn edited(&mut self, edits: &[Edit]) -> Vec<Value> {
        let changes: Vec<Value> = edits
            .iter()
            .map(|edit| json!({ "path": edit.path, "kind": if edit.created { "add" } else { "update" } }))
            .collect();
        vec![json!({
            "type": "item.completed",
            "item": { "id": self.item_id(), "type": "file_change", "changes": changes, "status": "completed" },
        })]
    }

    fn finished(&mut self, message: &str, usage: &Usage) -> Vec<Value> {
        if let Some(file) = &self.last_message_file
            && let Err(error) = std::fs::write(file, message)
        {
            eprintln!("Failed to write last message file {}: {error}", file.display());
        }
        vec![
            json!({ "type": "item.completed", "item": { "id": self.item_id(), "type": "agent_message", "text": message } }),
            json!({
                "type": "turn.completed",
                "usage": { "input_tokens": usage.input_tokens, "cached_input_tokens": 0, "output_tokens": usage.output_tokens },
            }),
        ]
    }

    fn failed(&mut self, message: &str) -> Vec<Value> {
        vec![
            json!({ "type": "error", "message": message }),
            json!({ "type": "turn.failed", "error": { "message": message } }),
        ]
    }
}

/// A `CallToolResult` as Codex prints it.
fn tool_result(result: &Value) -> Value {
    json!({
        "content": result.get("content").cloned().unwrap_or_else(|| json!([])),
        "structured_content": result.get("structuredContent").cloned().unwrap_or(Value::Null),
    })
}

/// `[mcp_servers.roundtable]` to a launch. Outer `Err`: the table is invalid (Codex refuses the
/// file); inner `Err`: the server is valid but not one this double can start.
fn server_spec(table: &Object, env: &Env) -> Result<(Result<ServerSpec, String>, Approvals), String> {
    let at = format!("mcp_servers.{SERVER}");
    let mut approvals =
        Approvals { default: fields::string(table, "default_tools_approval_mode", &at)?, ..Approvals::default() };
    if let Some(mode) = &approvals.default
        && !["auto", "prompt", "approve"].contains(&mode.as_str())
    {
        return Err(format!(
            "`{at}.default_tools_approval_mode`: unknown variant `{mode}`, expected auto, prompt or approve"
        ));
    }
    if let Some(tools) = fields::object(table, "tools", &at)? {
        for (tool, settings) in tools {
            if let Some(mode) = settings.get("approval_mode").and_then(Value::as_str) {
                approvals.per_tool.insert(tool.clone(), mode.to_owned());
            }
        }
    }
    if fields::boolean(table, "enabled", &at)? == Some(false) {
        return Ok((Err(format!("MCP server `{SERVER}` is disabled (enabled = false)")), approvals));
    }
    if fields::string(table, "url", &at)?.is_some() {
        return Ok((
            Err(format!("`{at}` is a streamable HTTP server; the double starts only stdio servers")),
            approvals,
        ));
    }
    let program =
        fields::string(table, "command", &at)?.ok_or_else(|| format!("`{at}` has neither `command` nor `url`"))?;
    let mut child_env = BTreeMap::new();
    let inherited = fields::strings(table, "env_vars", &at)?.unwrap_or_default();
    for name in DEFAULT_ENV_VARS.iter().copied().chain(inherited.iter().map(String::as_str)) {
        if let Some(value) = env.get(name) {
            child_env.insert(name.to_owned(), value.to_owned());
        }
    }
    child_env.extend(fields::string_map(table, "env", &at)?.unwrap_or_default());
    let startup = match fields::duration(table, "startup_timeout_sec", &at, Duration::from_secs(1))? {
        Some(timeout) => Some(timeout),
        None => fields::duration(table, "startup_timeout_ms", &at, Duration::from_millis(1))?,
    };
    let spec = ServerSpec {
        program,
        args: fields::strings(table, "args", &at)?.unwrap_or_default(),
        env: child_env,
        cwd: fields::string(table, "cwd", &at)?.map(PathBuf::from),
        startup_timeout: startup.unwrap_or(DEFAULT_STARTUP),
        tool_timeout: fields::duration(table, "tool_timeout_sec", &at, Duration::from_secs(1))?.unwrap_or(DEFAULT_TOOL),
    };
    Ok((Ok(spec), approvals))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    /// A parsed Codex with a home of its own (`started` records rollouts in it), removed when
    /// the test drops it: a home kept in a static was never removed and left a folder in the
    /// temporary directory on every run.
    struct WithHome {
        codex: Codex,
        _home: tempfile::TempDir,
    }

    impl std::ops::Deref for WithHome {
        type Target = Codex;
        fn deref(&self) -> &Codex {
            &self.codex
        }
    }

    impl std::ops::DerefMut for WithHome {
        fn deref_mut(&mut self) -> &mut Codex {
            &mut self.codex
        }
    }

    fn parse(line: &str) -> Result<WithHome, Refusal> {
        let home = tempfile::tempdir().expect("tempdir");
        let env = Env::of(&[("CODEX_HOME", &home.path().display().to_string())]);
        match Codex::parse(&argv(line), &env)? {
            Parsed::Run(codex) => Ok(WithHome { codex, _home: home }),
            Parsed::Print(text) => Err(Refusal::new(0, text)),
        }
    }

    const PLAN: &str = "exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -C /roundtable/workspace --model=o3 -";

    #[test]
    fn accepts_roundtables_plan_and_its_resume() {
        let codex = parse(PLAN).expect("plan");
        assert!(codex.json && codex.skip_git_repo_check && codex.bypass);
        assert_eq!(codex.cd.as_deref(), Some(Path::new("/roundtable/workspace")));
        assert_eq!(codex.prompt.as_deref(), Some("-"));
        assert!(codex.home.is_dir(), "CODEX_HOME comes from the environment");
        assert!(ids::is_uuid(&codex.thread_id));
        let resumed = parse(
            "exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -C /w resume 0199A213-81c0-7800-8aa1-bbab2a035a53 go-on",
        )
        .expect("resume");
        assert_eq!(resumed.thread_id, "0199a213-81c0-7800-8aa1-bbab2a035a53");
        assert_eq!(resumed.prompt.as_deref(), Some("go-on"));
        let named = parse("exec --json resume my-thread -").expect("named");
        assert!(ids::is_uuid(&named.thread_id));
    }

    #[test]
    fn refuses_what_codex_exec_does_not_take() {
        let cases = [
            ("exec --json --frobnicate -", 2, "unexpected argument '--frobnicate' found"),
            ("exec --json -C", 2, "a value is required for '--cd'"),
            ("exec --json --sandbox=none -", 2, "invalid value 'none'"),
            ("exec --json --full-auto -", 2, "deprecated"),
            ("exec --json - extra", 2, "unexpected argument 'extra'"),
            ("exec resume x --sandbox=read-only", 2, "unexpected argument '--sandbox'"),
            ("exec --json resume", 2, "SESSION_ID"),
            ("chat", 2, "unrecognized subcommand 'chat'"),
            ("", 2, "codex exec"),
            ("exec --help", 0, "Usage: codex exec"),
            ("--version", 0, "codex-cli 0.171.0"),
        ];
        for (line, status, needle) in cases {
            let refusal = parse(line).err().unwrap_or_else(|| Refusal::new(99, "accepted"));
            assert_eq!(refusal.status, status, "{line}: {}", refusal.message);
            assert!(refusal.message.contains(needle), "{line}: {}", refusal.message);
        }
    }

    #[test]
    fn json_output_is_required() {
        let codex = parse("exec --skip-git-repo-check -").expect("parse");
        assert_eq!(codex.preflight().map_err(|r| r.status), Err(2));
    }

    fn table(text: &str) -> Object {
        toml::read_table(text, &["mcp_servers", SERVER]).ok().flatten().unwrap_or_default()
    }

    const MANIFEST: &str = "[mcp_servers.roundtable]\n\
        command = \"/roundtable/bin/roundtable\"\n\
        args = [\"mcp\", \"stdio\", \"--unix-socket\", \"/run/roundtable/mcp.sock\"]\n\
        env_vars = [\"ROUNDTABLE_AGENT_CAPABILITY\"]\n\
        startup_timeout_sec = 20\n\
        tool_timeout_sec = 600\n\
        required = true\n\
        default_tools_approval_mode = \"approve\"\n";

    #[test]
    fn the_server_gets_only_the_default_variables_env_vars_and_env() {
        let env = Env::of(&[
            ("HOME", "/tmp/roundtable/home"),
            ("PATH", "/usr/local/bin:/bin"),
            ("TZ", "UTC"),
            ("ROUNDTABLE_AGENT_CAPABILITY", "rtcap_x"),
            ("CODEX_API_KEY", "sk-secret"),
            ("HTTPS_PROXY", "http://127.0.0.1:3128"),
        ]);
        let (spec, approvals) = server_spec(&table(MANIFEST), &env).expect("valid");
        let spec = spec.expect("startable");
        assert_eq!(spec.program, "/roundtable/bin/roundtable");
        assert_eq!(spec.args, ["mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"]);
        let names: Vec<&str> = spec.env.keys().map(String::as_str).collect();
        assert_eq!(names, ["HOME", "PATH", "ROUNDTABLE_AGENT_CAPABILITY", "TZ"]);
        assert_eq!(spec.env.get("ROUNDTABLE_AGENT_CAPABILITY").map(String::as_str), Some("rtcap_x"));
        assert_eq!(spec.startup_timeout, Duration::from_secs(20));
        assert_eq!(spec.tool_timeout, Duration::from_secs(600));
        assert_eq!(approvals.default.as_deref(), Some("approve"));

        // A manifest that forgets `env_vars` starts a server without the capability.
        let forgetful =
            MANIFEST.replace("env_vars = [\"ROUNDTABLE_AGENT_CAPABILITY\"]\n", "env = { LITERAL = \"v\" }\n");
        let (spec, _) = server_spec(&table(&forgetful), &env).expect("valid");
        let spec = spec.expect("startable");
        assert!(!spec.env.contains_key("ROUNDTABLE_AGENT_CAPABILITY"));
        assert_eq!(spec.env.get("LITERAL").map(String::as_str), Some("v"));
        assert_eq!(spec.startup_timeout, Duration::from_secs(20));
    }

    #[test]
    fn invalid_or_unstartable_servers_are_told_apart() {
        let env = Env::of(&[]);
        let invalid = [
            "[mcp_servers.roundtable]\nargs = [\"x\"]\n",
            "[mcp_servers.roundtable]\ncommand = 1\n",
            "[mcp_servers.roundtable]\ncommand = \"x\"\nargs = \"x\"\n",
            "[mcp_servers.roundtable]\ncommand = \"x\"\nenv_vars = [1]\n",
            "[mcp_servers.roundtable]\ncommand = \"x\"\ndefault_tools_approval_mode = \"always\"\n",
            "[mcp_servers.roundtable]\ncommand = \"x\"\ntool_timeout_sec = -1\n",
        ];
        for text in invalid {
            assert!(server_spec(&table(text), &env).is_err(), "{text}");
        }
        let unstartable = [
            "[mcp_servers.roundtable]\ncommand = \"x\"\nenabled = false\n",
            "[mcp_servers.roundtable]\nurl = \"http://127.0.0.1:1/mcp\"\n",
        ];
        for text in unstartable {
            assert!(matches!(server_spec(&table(text), &env), Ok((Err(_), _))), "{text}");
        }
    }

    #[test]
    fn approvals_follow_codex_exec() {
        let call = Call { index: 0, tool: "notes.append", arguments: &Value::Null };
        let mut codex = parse("exec --json -").expect("parse");
        assert_eq!(codex.permits(&call, false), Err("user cancelled MCP tool call".into()));
        assert_eq!(codex.permits(&call, true), Ok(()));
        codex.approvals.default = Some("approve".into());
        assert_eq!(codex.permits(&call, false), Ok(()));
        codex.approvals.per_tool.insert("notes.append".into(), "prompt".into());
        assert!(codex.permits(&call, true).is_err());
        codex.bypass = true;
        assert_eq!(codex.permits(&call, false), Ok(()));
    }

    #[test]
    fn events_have_codex_shapes() {
        let mut codex = parse(PLAN).expect("plan");
        let tools = ["task.get".to_owned()];
        let started = codex.started(&Started { tools: &tools, server: Ok(()), cwd: "/w", prompt: "p" });
        assert_eq!(started[0]["type"], "thread.started");
        assert_eq!(started[0]["thread_id"], codex.thread_id.as_str());
        assert_eq!(started[1], json!({"type": "turn.started"}));
        let arguments = json!({"summary": "x"});
        let call = Call { index: 0, tool: "proposal.create", arguments: &arguments };
        let begun = codex.tool_started(&call);
        assert_eq!(begun[0]["item"]["status"], "in_progress");
        let refused = Outcome::ToolError(json!({"content": [{"type": "text", "text": "refused"}], "isError": true}));
        let ended = codex.tool_finished(&call, &refused);
        let item = &ended[0]["item"];
        assert_eq!(item["id"], begun[0]["item"]["id"]);
        assert_eq!(
            (item["type"].as_str(), item["server"].as_str(), item["tool"].as_str()),
            (Some("mcp_tool_call"), Some("roundtable"), Some("proposal.create"))
        );
        assert_eq!(item["status"], "failed");
        assert_eq!(item["error"]["message"], "refused");
        assert_eq!(item["result"]["content"][0]["text"], "refused");
        let ok = codex.tool_finished(&call, &Outcome::Success(json!({"content": [], "structuredContent": {"a": 1}})));
        assert_eq!(ok[0]["item"]["result"]["structured_content"], json!({"a": 1}));
        assert_eq!(ok[0]["item"]["error"], Value::Null);
        let edits = [Edit { path: "/w/a.md".into(), created: true, content: String::new() }];
        assert_eq!(codex.edited(&edits)[0]["item"]["changes"], json!([{"path": "/w/a.md", "kind": "add"}]));
        let done = codex.finished("done", &Usage { input_tokens: 12, output_tokens: 42 });
        assert_eq!(done[0]["item"]["type"], "agent_message");
        assert_eq!(
            done[1],
            json!({"type": "turn.completed", "usage": {"input_tokens": 12, "cached_input_tokens": 0, "output_tokens": 42}})
        );
        let failed = codex.failed("gone");
        assert_eq!(failed[1], json!({"type": "turn.failed", "error": {"message": "gone"}}));
    }
}
