//! A minimal MCP client over a child's stdin/stdout: newline-delimited JSON-RPC 2.0, protocol
//! version 2025-06-18. It starts the server, does the handshake (`initialize`, the `initialized`
//! notification, `tools/list` with pagination) and calls tools; every read has a deadline so a
//! hung server fails the session instead of hanging it.

use std::io::{self, BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::ServerSpec;

pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// No read waits longer than this, whatever the manifest allows: a test must fail, not hang.
pub const READ_LIMIT: Duration = Duration::from_secs(30);

/// How long the server gets to exit once its stdin is closed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Pages of `tools/list` read at most; a server whose cursor never ends is broken.
const MAX_PAGES: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolInfo {
    pub name: String,
    /// `annotations.readOnlyHint`: some CLIs call such tools without asking.
    pub read_only: bool,
}

/// A JSON-RPC `error` response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

/// Why the client cannot go on talking to the server.
#[derive(Debug)]
pub enum ClientError {
    Spawn {
        program: String,
        source: io::Error,
    },
    Send {
        method: String,
        source: io::Error,
    },
    Closed {
        method: String,
        status: Option<ExitStatus>,
    },
    Timeout {
        method: String,
        after: Duration,
    },
    /// The server answered a handshake request with an error.
    Refused {
        method: String,
        error: RpcError,
    },
    Malformed {
        method: String,
        detail: String,
    },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Spawn { program, source } => write!(f, "cannot start {program}: {source}"),
            Self::Send { method, source } => write!(f, "cannot send {method}: {source}"),
            Self::Closed { method, status: Some(status) } => {
                write!(f, "the server closed its output before answering {method} ({status})")
            }
            Self::Closed { method, status: None } => {
                write!(f, "the server closed its output before answering {method}")
            }
            Self::Timeout { method, after } => write!(f, "no answer to {method} within {}s", after.as_secs_f64()),
            Self::Refused { method, error } => {
                write!(f, "{method} failed: MCP error {}: {}", error.code, error.message)
            }
            Self::Malformed { method, detail } => write!(f, "a malformed answer to {method}: {detail}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn { source, .. } | Self::Send { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Lines of the server's stdout, read by a thread so every read can have a deadline.
    lines: Receiver<String>,
    next_id: u64,
    tools: Vec<ToolInfo>,
    tool_timeout: Duration,
    closed: Option<Option<ExitStatus>>,
}

impl Client {
    /// Starts the server with exactly `spec.env` and completes the handshake.
    pub fn connect(spec: &ServerSpec, client_name: &str) -> Result<Self, ClientError> {
        let mut command = Command::new(&spec.program);
        command.args(&spec.args).env_clear().envs(&spec.env).stdin(Stdio::piped()).stdout(Stdio::piped());
        // The server's diagnostics go where the CLI's go: the agent's stderr, captured by Roundtable.
        command.stderr(Stdio::inherit());
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        let mut child =
            command.spawn().map_err(|source| ClientError::Spawn { program: spec.program.clone(), source })?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ClientError::Malformed { method: "spawn".into(), detail: "no stdout pipe".into() });
        };
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if sender.send(String::from_utf8_lossy(&line).into_owned()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut client = Self {
            child,
            stdin,
            lines,
            next_id: 0,
            tools: Vec::new(),
            tool_timeout: spec.tool_timeout.min(READ_LIMIT),
            closed: None,
        };
        match client.handshake(client_name, spec.startup_timeout.min(READ_LIMIT)) {
            Ok(()) => Ok(client),
            Err(error) => {
                client.close();
                Err(error)
            }
        }
    }

    fn handshake(&mut self, client_name: &str, timeout: Duration) -> Result<(), ClientError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": client_name, "version": "0" },
        });
        self.request("initialize", params, timeout)?
            .map_err(|error| ClientError::Refused { method: "initialize".into(), error })?;
        self.send("notifications/initialized", &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))?;
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let page = self
                .request("tools/list", params, timeout)?
                .map_err(|error| ClientError::Refused { method: "tools/list".into(), error })?;
            let tools = page.get("tools").and_then(Value::as_array).ok_or_else(|| ClientError::Malformed {
                method: "tools/list".into(),
                detail: "no `tools` array".into(),
            })?;
            self.tools.extend(tools.iter().filter_map(|tool| {
                let name = tool.get("name")?.as_str()?.to_owned();
                let read_only = tool.pointer("/annotations/readOnlyHint").and_then(Value::as_bool) == Some(true);
                Some(ToolInfo { name, read_only })
            }));
            cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
            if cursor.is_none() {
                return Ok(());
            }
        }
        Err(ClientError::Malformed { method: "tools/list".into(), detail: format!("more than {MAX_PAGES} pages") })
    }

    pub fn tools(&self) -> &[ToolInfo] {
        &self.tools
    }

    /// `tools/call`: the `result` (which may say `isError`), or the JSON-RPC error.
    pub fn call_tool(&mut self, name: &str, arguments: &Value) -> Result<Result<Value, RpcError>, ClientError> {
        let timeout = self.tool_timeout;
        self.request("tools/call", json!({ "name": name, "arguments": arguments }), timeout)
    }

    fn send(&mut self, method: &str, message: &Value) -> Result<(), ClientError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(ClientError::Closed { method: method.into(), status: None });
        };
        let mut line = message.to_string();
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|source| ClientError::Send { method: method.into(), source })
    }

    fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Result<Value, RpcError>, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(method, &json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(ClientError::Timeout { method: method.into(), after: timeout });
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.try_wait().ok().flatten();
                    return Err(ClientError::Closed { method: method.into(), status });
                }
            };
            // Servers print diagnostics too; only JSON objects are messages.
            let Ok(Value::Object(message)) = serde_json::from_str::<Value>(line.trim()) else { continue };
            if message.contains_key("method") {
                // A request from the server (a notification needs no answer).
                if let Some(request_id) = message.get("id") {
                    let asked = message.get("method").and_then(Value::as_str).unwrap_or_default();
                    self.answer(request_id.clone(), asked)?;
                }
                continue;
            }
            // An answer to a request given up on (after a timeout) is not this one's.
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
                let text =
                    error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
                return Ok(Err(RpcError { code, message: text }));
            }
            return match message.get("result") {
                Some(result) => Ok(Ok(result.clone())),
                None => Err(ClientError::Malformed {
                    method: method.into(),
                    detail: "a response with neither `result` nor `error`".into(),
                }),
            };
        }
    }

    /// Answers a server's request: `ping` is answered, anything else is a method this client
    /// does not offer (it declared no capabilities).
    fn answer(&mut self, id: Value, method: &str) -> Result<(), ClientError> {
        let reply = if method == "ping" {
            json!({ "jsonrpc": "2.0", "id": id, "result": {} })
        } else {
            json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": format!("method not found: {method}") } })
        };
        self.send(method, &reply)
    }

    /// Closes the server's stdin (the MCP stdio way to end a session), gives it a few seconds to
    /// exit, then kills it. Returns how it ended; later calls return the same.
    pub fn close(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.closed {
            return status;
        }
        drop(self.stdin.take());
        let deadline = Instant::now() + CLOSE_GRACE;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.child.kill();
                    break self.child.wait().ok();
                }
            }
        };
        self.closed = Some(status);
        status
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A server played by `sh`: `script` reads requests with `read` and prints answers.
    fn shell(script: &str, timeout: Duration) -> ServerSpec {
        ServerSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: BTreeMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())]),
            cwd: None,
            startup_timeout: timeout,
            tool_timeout: timeout,
        }
    }

    const INIT: &str = r#"read l; echo 'not json'; echo '{"jsonrpc":"2.0","method":"notifications/message","params":{}}'; echo '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}}}}'; read n;"#;

    #[test]
    fn handshake_skips_noise_follows_cursors_and_calls_a_tool() {
        let script = format!(
            "{INIT} read l; echo '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"tools\":[{{\"name\":\"a\",\"annotations\":{{\"readOnlyHint\":true}}}}],\"nextCursor\":\"p2\"}}}}'; \
             read l; echo '{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"ping\"}}'; echo '{{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{{\"tools\":[{{\"name\":\"b\"}}]}}}}'; \
             read pong; read l; echo '{{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{{\"code\":-32602,\"message\":\"nope\"}}}}'; \
             read l; echo '{{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{{\"content\":[]}}}}'; read eof || exit 0"
        );
        let mut client = Client::connect(&shell(&script, Duration::from_secs(5)), "test").expect("connect");
        assert_eq!(
            client.tools(),
            [ToolInfo { name: "a".into(), read_only: true }, ToolInfo { name: "b".into(), read_only: false }]
        );
        let refused = client.call_tool("a", &json!({})).expect("answered");
        assert_eq!(refused, Err(RpcError { code: -32602, message: "nope".into() }));
        assert_eq!(client.call_tool("b", &json!({"x": 1})).expect("answered"), Ok(json!({"content": []})));
        assert!(client.close().is_some_and(|status| status.success()));
    }

    #[test]
    fn a_silent_server_times_out() {
        let started = Instant::now();
        let error = Client::connect(&shell("sleep 20", Duration::from_millis(300)), "test").err();
        assert!(matches!(error, Some(ClientError::Timeout { .. })), "{error:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "close killed the server");
    }

    #[test]
    fn a_server_that_exits_is_reported_with_its_status() {
        let error = Client::connect(&shell("read l; exit 3", Duration::from_secs(5)), "test").err();
        match error {
            Some(ClientError::Closed { method, .. }) => assert_eq!(method, "initialize"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_program_cannot_start() {
        let mut spec = shell("", Duration::from_secs(1));
        spec.program = "/nonexistent/roundtable".into();
        let error = Client::connect(&spec, "test").err();
        assert!(matches!(error, Some(ClientError::Spawn { .. })), "{error:?}");
    }

    #[test]
    fn an_initialize_error_is_a_refusal() {
        let script = r#"read l; echo '{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"no capability"}}'"#;
        let error = Client::connect(&shell(script, Duration::from_secs(5)), "test").err();
        assert_eq!(error.map(|e| e.to_string()), Some("initialize failed: MCP error -32603: no capability".to_owned()));
    }
}
