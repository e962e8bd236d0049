//! `agent-double mcp-echo-server`: a small MCP server on stdin/stdout for the personalities' own
//! tests, standing in for `roundtable mcp stdio`. It is strict where the bridge is (no tool before
//! `notifications/initialized`), and noisy where servers are (a diagnostic line and a
//! notification before its first answer).
//!
//! `agent-double mcp-echo-server [--title T] [--log FILE] [--require-env NAME] [--fail-initialize]`
//!
//! Tools: `task.get` (a fixed brief), `notes.append`, `env.get` (its own environment),
//! `proposal.create` (always refused with `isError`), `rpc.fail` (a JSON-RPC error), `hang`
//! (never answers); any other name echoes its arguments. `--log` appends one JSON line per message
//! received, after a first line holding the server's environment.

use std::collections::BTreeMap;
use std::io::{self, BufRead as _, Write as _};
use std::process::ExitCode;

use serde_json::{Value, json};

use super::mcp_client::PROTOCOL_VERSION;

#[derive(Debug, Default)]
struct Options {
    title: Option<String>,
    log: Option<String>,
    require_env: Option<String>,
    fail_initialize: bool,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let mut value = || rest.next().cloned().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--title" => options.title = Some(value()?),
            "--log" => options.log = Some(value()?),
            "--require-env" => options.require_env = Some(value()?),
            "--fail-initialize" => options.fail_initialize = true,
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(options)
}

pub fn run(args: &[String]) -> ExitCode {
    let options = match options(args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("mcp-echo-server: {message}");
            return ExitCode::from(64);
        }
    };
    let mut log =
        options.log.as_ref().and_then(|path| std::fs::OpenOptions::new().create(true).append(true).open(path).ok());
    let environment: BTreeMap<String, String> = std::env::vars().collect();
    if let Some(file) = log.as_mut() {
        let _ = writeln!(file, "{}", json!({ "env": environment }));
    }
    // Like the bridge without its capability: refuse before answering anything.
    if let Some(name) = &options.require_env
        && std::env::var_os(name).is_none()
    {
        eprintln!("mcp-echo-server: {name} is not set");
        return ExitCode::from(1);
    }
    let mut server = Server { options: &options, environment, initialized: false };
    let stdout = io::stdout();
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(file) = log.as_mut() {
            let _ = writeln!(file, "{}", line.trim());
        }
        let mut out = stdout.lock();
        for reply in server.handle(&line) {
            let _ = writeln!(out, "{reply}");
        }
        let _ = out.flush();
    }
    ExitCode::SUCCESS
}

struct Server<'a> {
    options: &'a Options,
    environment: BTreeMap<String, String>,
    initialized: bool,
}

impl Server<'_> {
    /// The lines to print in answer to one received line (raw, so noise can be printed too).
    fn handle(&mut self, line: &str) -> Vec<String> {
        let message: Value = match serde_json::from_str(line) {
            Ok(message) => message,
            Err(error) => return vec![failure(&Value::Null, -32700, &format!("parse error: {error}")).to_string()],
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        let Some(id) = message.get("id").cloned() else {
            if method == "notifications/initialized" {
                self.initialized = true;
            }
            return Vec::new();
        };
        let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
        match method {
            "initialize" if self.options.fail_initialize => {
                vec![failure(&id, -32603, "initialize refused (--fail-initialize)").to_string()]
            }
            "initialize" => {
                let version = params.get("protocolVersion").and_then(Value::as_str).unwrap_or(PROTOCOL_VERSION);
                vec![
                    "mcp-echo-server: a diagnostic line that is not JSON".to_owned(),
                    json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "ready"}})
                        .to_string(),
                    success(
                        &id,
                        json!({
                            "protocolVersion": version,
                            "capabilities": { "tools": {} },
                            "serverInfo": { "name": "mcp-echo-server", "version": "0" },
                        }),
                    )
                    .to_string(),
                ]
            }
            "ping" => vec![success(&id, json!({})).to_string()],
            "tools/list" | "tools/call" if !self.initialized => {
                vec![failure(&id, -32600, "the client has not sent notifications/initialized").to_string()]
            }
            "tools/list" => vec![success(&id, tools_page(params.get("cursor").and_then(Value::as_str))).to_string()],
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
                let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
                self.call(&id, name, &arguments).map(|reply| reply.to_string()).into_iter().collect()
            }
            other => vec![failure(&id, -32601, &format!("method not found: {other}")).to_string()],
        }
    }

    fn call(&self, id: &Value, name: &str, arguments: &Value) -> Option<Value> {
        Some(match name {
            "task.get" => {
                let title = self.options.title.as_deref().unwrap_or("Fix the typo");
                structured(id, &brief(title), false)
            }
            "notes.append" => match arguments.get("text").and_then(Value::as_str) {
                Some(text) => structured(id, &json!({ "appended": text }), false),
                None => structured(id, &json!({ "error": "`text` is required" }), true),
            },
            "env.get" => structured(id, &json!(self.environment), false),
            "proposal.create" => {
                structured(id, &json!({ "error": "refused: proposals are made by the controller" }), true)
            }
            "rpc.fail" => failure(id, -32602, "rpc.fail always fails"),
            "hang" => return None,
            _ => structured(id, &json!({ "tool": name, "arguments": arguments }), false),
        })
    }
}

/// The brief `task.get` returns, shaped like Roundtable's.
fn brief(title: &str) -> Value {
    json!({
        "assignment": "fix-typo",
        "role": "agent",
        "task": { "id": "T-1", "title": title, "prompt": "Fix it." },
        "baseCommit": "0000000000000000000000000000000000000000",
        "readablePaths": ["README.md"],
        "manifest": [],
    })
}

/// Two pages, so clients must follow `nextCursor`.
fn tools_page(cursor: Option<&str>) -> Value {
    let tool = |name: &str, read_only: bool| {
        json!({
            "name": name,
            "description": format!("{name} (echo server)"),
            "inputSchema": { "type": "object" },
            "annotations": { "readOnlyHint": read_only },
        })
    };
    match cursor {
        None => json!({
            "tools": [tool("task.get", true), tool("notes.append", false), tool("env.get", true)],
            "nextCursor": "page-2",
        }),
        Some(_) => json!({ "tools": [tool("claims.acquire", false), tool("session.heartbeat", false)] }),
    }
}

/// A tool result as rmcp's `CallToolResult::structured` makes it: the JSON as text and as structure.
fn structured(id: &Value, value: &Value, is_error: bool) -> Value {
    success(
        id,
        json!({
            "content": [{ "type": "text", "text": value.to_string() }],
            "structuredContent": value,
            "isError": is_error,
        }),
    )
}

fn success(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

fn failure(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(options: &Options) -> Server<'_> {
        Server { options, environment: BTreeMap::new(), initialized: false }
    }

    fn reply(server: &mut Server<'_>, line: &str) -> Value {
        let lines = server.handle(line);
        let last = lines.last().cloned().unwrap_or_default();
        serde_json::from_str(&last).unwrap_or(Value::Null)
    }

    #[test]
    fn tools_wait_for_the_initialized_notification() {
        let options = Options::default();
        let mut server = server(&options);
        let early = reply(&mut server, r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        assert_eq!(early["error"]["code"], -32600);
        assert!(server.handle(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_empty());
        let page = reply(&mut server, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
        assert_eq!(page["result"]["nextCursor"], "page-2");
        let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"task.get","arguments":{}}}"#;
        assert_eq!(reply(&mut server, call)["result"]["structuredContent"]["task"]["id"], "T-1");
        let refused = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"proposal.create"}}"#;
        assert_eq!(reply(&mut server, refused)["result"]["isError"], true);
        let hang = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hang"}}"#;
        assert!(server.handle(hang).is_empty());
    }

    #[test]
    fn initialize_answers_after_noise_or_fails_on_request() {
        let options = Options::default();
        let mut normal = server(&options);
        let lines = normal
            .handle(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#);
        assert_eq!(lines.len(), 3);
        let failing = Options { fail_initialize: true, ..Options::default() };
        let mut failing = server(&failing);
        let answer = reply(&mut failing, r#"{"jsonrpc":"2.0","id":0,"method":"initialize"}"#);
        assert_eq!(answer["error"]["code"], -32603);
    }

    #[test]
    fn options_are_strict() {
        assert!(options(&["--log".into()]).is_err());
        assert!(options(&["--nope".into()]).is_err());
        let parsed = options(&["--title".into(), "T".into(), "--fail-initialize".into()]).expect("options");
        assert_eq!(parsed.title.as_deref(), Some("T"));
        assert!(parsed.fail_initialize);
    }
}
