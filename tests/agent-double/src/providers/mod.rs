//! Four fake provider CLIs (`codex`, `claude`, `gemini`, `opencode`) in headless mode. Each reads
//! its MCP manifest the way the real CLI does, starts the server it names, calls tools through it,
//! edits the workspace and prints the real CLI's machine-readable output, so Roundtable's tests
//! exercise their plans, manifests and output capture without a model.
//!
//! What a personality does is steered by its prompt (stdin) and by the brief it reads through
//! MCP; see [`script`]. The shared run is here, one function per phase; the provider modules hold
//! what differs: argv, manifest, environment given to the server, and output events.

mod args;
mod bench;
mod claude;
mod codex;
mod echo_server;
mod fields;
mod gemini;
mod ids;
mod mcp_client;
mod model;
mod opencode;
mod script;
mod toml;

use std::collections::BTreeMap;
use std::io::{self, IsTerminal as _, Read as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use mcp_client::{Client, ToolInfo};
use script::{Brief, Script, Step};

/// The MCP server every Roundtable manifest names.
pub const SERVER: &str = "roundtable";

/// Runs `behaviour` if it is one of the personalities here; `None` leaves it to the caller.
pub fn run(behaviour: &str, args: &[String]) -> Option<ExitCode> {
    Some(match behaviour {
        "codex" => drive::<codex::Codex>(args),
        "claude" => drive::<claude::Claude>(args),
        "gemini" => drive::<gemini::Gemini>(args),
        "opencode" => drive::<opencode::Opencode>(args),
        "mcp-echo-server" => echo_server::run(args),
        "mcp-bench" => bench::run(args),
        _ => return None,
    })
}

// === what the personalities share ===

/// The version a personality reports: `AGENT_DOUBLE_VERSION` when set (an image built with it
/// plays a newer release of the CLI), else its own.
pub fn version(own: &str) -> String {
    std::env::var("AGENT_DOUBLE_VERSION").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| own.to_owned())
}

/// The process environment as a personality sees it: a snapshot, so tests can give their own.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
    euid: Option<u32>,
}

impl Env {
    pub fn current() -> Self {
        // A variable that is not UTF-8 cannot be one Roundtable set; the CLIs' JSON could not carry it either.
        let vars =
            std::env::vars_os().filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)));
        Self { vars: vars.collect(), euid: effective_uid() }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    pub fn vars(&self) -> &BTreeMap<String, String> {
        &self.vars
    }

    pub fn euid(&self) -> Option<u32> {
        self.euid
    }

    #[cfg(test)]
    pub fn of(pairs: &[(&str, &str)]) -> Self {
        Self { vars: pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(), euid: Some(1000) }
    }

    #[cfg(test)]
    pub fn with_euid(mut self, euid: u32) -> Self {
        self.euid = Some(euid);
        self
    }
}

/// The effective UID from `/proc/self/status` (`Uid: real effective saved fs`).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// How to start the MCP server a manifest names, with the complete environment it gets.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub program: String,
    pub args: Vec<String>,
    /// Everything the server sees: the child's environment is cleared first.
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
}

/// A refusal before the session starts: what the CLI prints on stderr and its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u8,
    pub message: String,
}

impl Refusal {
    pub fn new(status: u8, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    /// A command line the personality does not accept: exit 2, so a wrong plan fails its test.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(2, message)
    }

    fn exit(self) -> ExitCode {
        let message = self.message.trim_end();
        eprintln!("{message}");
        ExitCode::from(self.status)
    }
}

/// What the command line asked for: a run, or text to print and exit 0 (`--help`, `--version`).
pub enum Parsed<P> {
    Run(P),
    Print(String),
}

/// The session as it starts.
pub struct Started<'a> {
    pub tools: &'a [String],
    /// Whether the server started and answered `initialize` and `tools/list`.
    pub server: Result<(), &'a str>,
    pub cwd: &'a str,
    pub prompt: &'a str,
}

/// One tool call, numbered in call order (`index` pairs a call's start with its end).
pub struct Call<'a> {
    pub index: usize,
    pub tool: &'a str,
    pub arguments: &'a Value,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The `result` of `tools/call`.
    Success(Value),
    /// A `result` with `isError: true` (the server refused the call).
    ToolError(Value),
    /// A JSON-RPC `error` response.
    RpcError { code: i64, message: String },
    /// The call never reached the server (invalid arguments, a permission rule, a dead server).
    NotSent(String),
}

impl Outcome {
    fn from_result(result: Value) -> Self {
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            Self::ToolError(result)
        } else {
            Self::Success(result)
        }
    }

    pub fn is_error(&self) -> bool {
        !matches!(self, Self::Success(_))
    }

    /// The `content` blocks of a result (empty for an outcome without one).
    pub fn content(&self) -> Value {
        match self {
            Self::Success(result) | Self::ToolError(result) => {
                result.get("content").cloned().unwrap_or_else(|| json!([]))
            }
            _ => json!([]),
        }
    }

    /// The text a CLI shows for the outcome: the result's text blocks, else the error message.
    pub fn text(&self) -> String {
        match self {
            Self::Success(result) | Self::ToolError(result) => {
                let blocks = result.get("content").and_then(Value::as_array).into_iter().flatten();
                let texts: Vec<&str> = blocks.filter_map(|block| block.get("text").and_then(Value::as_str)).collect();
                if texts.is_empty() {
                    result.get("structuredContent").map(Value::to_string).unwrap_or_default()
                } else {
                    texts.join("\n")
                }
            }
            Self::RpcError { code, message } => format!("MCP error {code}: {message}"),
            Self::NotSent(message) => message.clone(),
        }
    }
}

/// A file the session wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Absolute, as the CLIs print it.
    pub path: String,
    pub created: bool,
    pub content: String,
}

/// Token counts the transcript reports: the prompt's length in bytes in, a fixed 42 out, so a
/// test can check that usage went from the CLI's output into the session record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

pub const OUTPUT_TOKENS: u64 = 42;

/// One fake CLI. The event methods return the lines to print, so their shapes are unit-tested.
pub trait Personality: Sized {
    const NAME: &'static str;

    fn parse(args: &[String], env: &Env) -> Result<Parsed<Self>, Refusal>;

    /// The directory the CLI works in when a flag names one (`-C`, `--dir`).
    fn workdir(&self) -> Option<&Path> {
        None
    }

    /// Checks made after changing directory and before reading the prompt.
    fn preflight(&self) -> Result<(), Refusal> {
        Ok(())
    }

    /// The prompt from the command line and/or stdin (`stdin` reads it to EOF).
    fn prompt(&self, stdin: &mut dyn FnMut() -> io::Result<String>) -> io::Result<String>;

    /// How the CLI fails when the prompt is empty.
    fn no_prompt(&self) -> Refusal;

    /// The `roundtable` server from the manifest. `Err`: the manifest is invalid and the CLI
    /// refuses to start; `Ok(Err)`: it starts, but has no such server to start.
    fn server(&mut self, env: &Env) -> Result<Result<ServerSpec, String>, Refusal>;

    /// Whether the CLI lets the model call `tool` without asking (nobody can answer in headless mode).
    fn permits(&mut self, _call: &Call<'_>, _read_only: bool) -> Result<(), String> {
        Ok(())
    }

    /// The model request the CLI makes when its base URL is set (`Ok(None)`: it is not, and the
    /// double asks no model). `Err`: the line to print instead, when the CLI cannot send it.
    fn model_request(&self, _env: &Env, _prompt: &str) -> Result<Option<model::Request>, Value> {
        Ok(None)
    }

    /// The request's outcome as a line of this CLI's output.
    fn model_replied(&mut self, record: Value) -> Vec<Value> {
        vec![record]
    }

    fn started(&mut self, started: &Started<'_>) -> Vec<Value>;
    fn tool_started(&mut self, call: &Call<'_>) -> Vec<Value>;
    fn tool_finished(&mut self, call: &Call<'_>, outcome: &Outcome) -> Vec<Value>;
    fn edited(&mut self, edits: &[Edit]) -> Vec<Value>;
    fn finished(&mut self, message: &str, usage: &Usage) -> Vec<Value>;
    fn failed(&mut self, message: &str) -> Vec<Value>;
}

/// Model tool names are `[A-Za-z0-9_-]`; Claude and OpenCode replace anything else with `_`.
pub fn sanitize(name: &str, also_allowed: &[char]) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' || also_allowed.contains(&c) { c } else { '_' })
        .collect()
}

// === the run, one function per phase ===

fn drive<P: Personality>(args: &[String]) -> ExitCode {
    let env = Env::current();
    let mut personality = match P::parse(args, &env) {
        Ok(Parsed::Run(personality)) => personality,
        Ok(Parsed::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(refusal) => return refusal.exit(),
    };
    if let Err(refusal) = enter_workdir(&personality).and_then(|()| personality.preflight()) {
        return refusal.exit();
    }
    let prompt = match personality.prompt(&mut read_stdin) {
        Ok(prompt) if prompt.trim().is_empty() => return personality.no_prompt().exit(),
        Ok(prompt) => prompt,
        Err(error) => return Refusal::new(1, format!("Error: cannot read the prompt from stdin: {error}")).exit(),
    };
    let server = match personality.server(&env) {
        Ok(server) => server,
        Err(refusal) => return refusal.exit(),
    };
    let mut out = Output { sink: io::stdout() };
    ask_the_model(&mut personality, &env, &prompt, &mut out);
    session(&mut personality, server, &prompt, &mut out)
}

/// One real model request when the CLI's base URL is set; the session goes on whatever it got.
fn ask_the_model<P: Personality, W: io::Write>(personality: &mut P, env: &Env, prompt: &str, out: &mut Output<W>) {
    let record = match personality.model_request(env, prompt) {
        Ok(None) => return,
        Ok(Some(request)) => model::record(&request, &model::send(&request)),
        Err(record) => record,
    };
    out.emit(personality.model_replied(record));
}

fn enter_workdir<P: Personality>(personality: &P) -> Result<(), Refusal> {
    match personality.workdir() {
        Some(dir) => std::env::set_current_dir(dir).map_err(|error| {
            Refusal::new(1, format!("Error: cannot use {} as the working directory: {error}", dir.display()))
        }),
        None => Ok(()),
    }
}

/// Stdin to EOF; a terminal is not waited on (the CLIs read stdin only when it is piped).
fn read_stdin() -> io::Result<String> {
    let stdin = io::stdin();
    if stdin.is_terminal() {
        return Ok(String::new());
    }
    let mut bytes = Vec::new();
    stdin.lock().read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn session<P: Personality, W: io::Write>(
    personality: &mut P,
    server: Result<ServerSpec, String>,
    prompt: &str,
    out: &mut Output<W>,
) -> ExitCode {
    let cwd = std::env::current_dir().map(|dir| dir.display().to_string()).unwrap_or_default();
    let connection = server.and_then(|spec| {
        Client::connect(&spec, &format!("{}-double", P::NAME))
            .map_err(|error| format!("MCP server `{SERVER}`: {error}"))
    });
    let tools: Vec<ToolInfo> = connection.as_ref().map(|client| client.tools().to_vec()).unwrap_or_default();
    let names: Vec<String> = tools.iter().map(|tool| tool.name.clone()).collect();
    out.emit(personality.started(&Started {
        tools: &names,
        server: connection.as_ref().map(|_| ()).map_err(String::as_str),
        cwd: &cwd,
        prompt,
    }));
    let mut client = match connection {
        Ok(client) => client,
        Err(message) => {
            out.emit(personality.failed(&message));
            return ExitCode::from(1);
        }
    };
    let worked = Work { personality: &mut *personality, client: &mut client, out: &mut *out, tools: &tools, calls: 0 }
        .run(&Script::parse(prompt), P::NAME);
    if let Some(status) = client.close()
        && !status.success()
    {
        eprintln!("{}: the MCP server exited with {status}", P::NAME);
    }
    match worked {
        Ok(message) => {
            let usage = Usage { input_tokens: prompt.len() as u64, output_tokens: OUTPUT_TOKENS };
            out.emit(personality.finished(&message, &usage));
            ExitCode::SUCCESS
        }
        Err(message) => {
            out.emit(personality.failed(&message));
            ExitCode::from(1)
        }
    }
}

/// The session's work once the server is up.
struct Work<'a, P, W: io::Write> {
    personality: &'a mut P,
    client: &'a mut Client,
    out: &'a mut Output<W>,
    tools: &'a [ToolInfo],
    calls: usize,
}

impl<P: Personality, W: io::Write> Work<'_, P, W> {
    /// Reads the brief, leaves a note, follows the prompt's script, then signs the workspace.
    /// Returns the final message, or why the session failed.
    fn run(mut self, script: &Script, name: &str) -> Result<String, String> {
        let brief = self.required("task.get", json!({}))?;
        let brief = Brief::from_result(&brief)?;
        self.required("notes.append", json!({ "text": format!("{name} read task {}", brief.task_id) }))?;
        let mut edits = Vec::new();
        let mut refused = 0;
        for step in &script.steps {
            match step {
                Step::Call { tool, arguments, invalid } => {
                    if self.call(tool, arguments, invalid.clone())?.is_error() {
                        refused += 1;
                    }
                }
                Step::Write { path, text } => edits.push(script::write_file(path, &format!("{text}\n"))?),
                Step::Sleep(duration) => std::thread::sleep(*duration),
                Step::Scan(roots) => {
                    let token = std::env::var("ROUNDTABLE_AGENT_CAPABILITY").unwrap_or_default();
                    if token.is_empty() {
                        return Err("scan: no capability in the environment to look for".into());
                    }
                    let holding = script::files_holding(roots, &token);
                    if !holding.is_empty() {
                        return Err(format!("scan: the capability is in {}", holding.join(", ")));
                    }
                }
            }
        }
        let signature = format!("{name}-was-here.md");
        edits.push(script::write_file(&signature, &format!("task: {}\n", brief.title))?);
        self.out.emit(self.personality.edited(&edits));
        let mut message = format!("Read task {} ({}) and wrote {signature}.", brief.task_id, brief.title);
        if refused > 0 {
            message.push_str(&format!(" {refused} tool call(s) were refused."));
        }
        Ok(message)
    }

    /// A call the session cannot go on without.
    fn required(&mut self, tool: &str, arguments: Value) -> Result<Value, String> {
        match self.call(tool, &arguments, None)? {
            Outcome::Success(result) => Ok(result),
            failed => Err(format!("{tool} failed: {}", failed.text())),
        }
    }

    /// One tool call, reported as it starts and ends. `Err` only when the server is gone or
    /// stopped answering: nothing after that could work.
    fn call(&mut self, tool: &str, arguments: &Value, invalid: Option<String>) -> Result<Outcome, String> {
        let call = Call { index: self.calls, tool, arguments };
        self.calls += 1;
        self.out.emit(self.personality.tool_started(&call));
        let read_only = self.tools.iter().any(|known| known.name == tool && known.read_only);
        let mut fatal = None;
        let outcome = if let Some(why) = invalid {
            Outcome::NotSent(why)
        } else if let Err(why) = self.personality.permits(&call, read_only) {
            Outcome::NotSent(why)
        } else {
            match self.client.call_tool(tool, arguments) {
                Ok(Ok(result)) => Outcome::from_result(result),
                Ok(Err(error)) => Outcome::RpcError { code: error.code, message: error.message },
                Err(error) => {
                    let message = format!("MCP server `{SERVER}`: {error}");
                    fatal = Some(message.clone());
                    Outcome::NotSent(message)
                }
            }
        };
        self.out.emit(self.personality.tool_finished(&call, &outcome));
        match fatal {
            Some(message) => Err(message),
            None => Ok(outcome),
        }
    }
}

/// JSON lines on stdout. A reader that went away does not stop the session (the real CLIs differ
/// here, but a test that stops reading wants the workspace edits anyway).
struct Output<W: io::Write> {
    sink: W,
}

impl<W: io::Write> Output<W> {
    fn emit(&mut self, events: Vec<Value>) {
        for event in events {
            let _ = writeln!(self.sink, "{event}");
        }
        let _ = self.sink.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_text_prefers_text_blocks() {
        let ok =
            Outcome::from_result(json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}));
        assert_eq!(ok.text(), "a\nb");
        assert!(!ok.is_error());
        let structured = Outcome::from_result(json!({"content": [], "structuredContent": {"x": 1}}));
        assert_eq!(structured.text(), "{\"x\":1}");
        let refused = Outcome::from_result(json!({"content": [{"type": "text", "text": "no"}], "isError": true}));
        assert!(matches!(refused, Outcome::ToolError(_)) && refused.is_error());
        assert_eq!(Outcome::RpcError { code: -32602, message: "bad".into() }.text(), "MCP error -32602: bad");
    }

    #[test]
    fn sanitize_keeps_model_safe_names() {
        assert_eq!(sanitize("task.get", &[]), "task_get");
        assert_eq!(sanitize("task.get", &['.']), "task.get");
        assert_eq!(sanitize("a b/c-d_e", &[]), "a_b_c-d_e");
    }

    #[test]
    fn output_writes_one_compact_line_per_event() {
        let mut out = Output { sink: Vec::new() };
        let events = vec![json!({"type": "a"}), json!({"type": "b", "n": [1, 2]})];
        out.emit(events.clone());
        let text = String::from_utf8_lossy(&out.sink).into_owned();
        assert!(text.ends_with('\n') && !text.contains(' '), "{text}");
        let lines: Vec<Value> = text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
        assert_eq!(lines, events);
    }
}
