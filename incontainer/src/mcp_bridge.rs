//! `roundtable mcp stdio --unix-socket PATH`: the bridge an agent CLI starts as its MCP server.
//! It presents the capability from `ROUNDTABLE_AGENT_CAPABILITY` on the session's socket, waits
//! for `{"ok":true}`, then copies bytes both ways unchanged. Plain threads and blocking IO: it
//! is tiny, runs once per CLI, and must work in any image.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use roundtable_specs::layout::CAPABILITY_ENV;

/// Why the bridge could not connect the agent to its endpoint.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("{CAPABILITY_ENV} is not set: the agent has no capability for this session")]
    NoCapability,
    #[error("cannot connect to {path}: {source}")]
    Connect { path: String, source: std::io::Error },
    #[error("the endpoint refused the capability (connection closed)")]
    Refused,
    #[error("the endpoint refused the connection: {0}")]
    Limit(String),
    #[error("the endpoint answered {0:?} instead of {{\"ok\":true}}")]
    Unexpected(String),
    #[error("bridge io: {0}")]
    Io(#[from] std::io::Error),
}

/// Connects, authenticates and relays until either side closes.
pub fn run(socket: &Path) -> Result<(), BridgeError> {
    let token = std::env::var(CAPABILITY_ENV).ok().filter(|t| !t.is_empty()).ok_or(BridgeError::NoCapability)?;
    let mut stream = UnixStream::connect(socket)
        .map_err(|source| BridgeError::Connect { path: socket.display().to_string(), source })?;
    let auth = serde_json::json!({ "roundtable_auth": token });
    stream.write_all(format!("{auth}\n").as_bytes())?;
    let answer = read_line(&mut stream)?;
    if answer.is_empty() {
        return Err(BridgeError::Refused);
    }
    let answered = serde_json::from_str::<serde_json::Value>(&answer).ok();
    if answered != Some(serde_json::json!({"ok": true})) {
        // A JSON-RPC error line: the session's connection limit (docs/providers.md).
        let message = answered.as_ref().and_then(|value| value["error"]["message"].as_str()).map(str::to_owned);
        return Err(message.map_or(BridgeError::Unexpected(answer), BridgeError::Limit));
    }
    relay(stream)
}

/// One line, one byte at a time, so no MCP byte after it is taken from the relay.
fn read_line(stream: &mut UnixStream) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stream.read(&mut byte)? == 1 && byte[0] != b'\n' {
        if line.len() > 4096 {
            break;
        }
        line.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

fn relay(stream: UnixStream) -> Result<(), BridgeError> {
    let mut to_endpoint = stream.try_clone()?;
    let mut from_endpoint = stream;
    // stdin → socket; at end of input the write half closes, so the endpoint sees the client leave.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut to_endpoint);
        let _ = to_endpoint.shutdown(std::net::Shutdown::Write);
    });
    let mut stdout = std::io::stdout().lock();
    let mut buffer = [0u8; 64 * 1024];
    loop {
        let read = from_endpoint.read(&mut buffer)?;
        if read == 0 {
            return Ok(());
        }
        // Flushed at once: the client waits for each response line.
        stdout.write_all(&buffer[..read])?;
        stdout.flush()?;
    }
}
