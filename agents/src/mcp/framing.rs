//! The endpoint's MCP transport: newline-delimited JSON-RPC on one authenticated connection, with
//! the per-connection bounds of [`McpLimits`] and a JSON-RPC 2.0 answer to every line that is not
//! a message (rmcp's own transport drops those silently and buffers a line up to 16 MiB).

use std::sync::Arc;

use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::tools::Activity;

/// JSON-RPC 2.0: the line is not JSON (or not UTF-8, or nested past the parser's depth).
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0: JSON, but not a request, notification or response; also a line over the limit.
pub const INVALID_REQUEST: i64 = -32600;
/// The implementation-defined server-error range of JSON-RPC 2.0: a session limit was reached.
pub const LIMIT_REACHED: i64 = -32000;

/// What one session's agent may hold in the daemon through its MCP socket. Together they bound the
/// daemon's memory per session: about `connections × (line + in_flight × one answer)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpLimits {
    /// Connections open at once, authenticated or not. A CLI opens one; a few more cover
    /// subagents and a reconnect that overlaps the old connection's close.
    pub connections: usize,
    /// Bytes of one message line. The largest request the tools take is a note of 8 KiB, at most
    /// 48 KiB once JSON-escaped; a quarter of a MiB leaves room for every CLI's framing and
    /// metadata, and is a sixty-fourth of rmcp's default.
    pub line: usize,
    /// Requests of one connection read and not yet answered: past it, the connection is not read
    /// until an answer has been written, so a client that sends without reading holds no more.
    pub in_flight: usize,
}

/// The limits every session endpoint applies (docs/providers.md, "Limits per session").
pub const MCP_LIMITS: McpLimits = McpLimits { connections: 8, line: 256 * 1024, in_flight: 16 };

/// One JSON-RPC 2.0 error object with `"id": null` (rmcp omits a missing id; the spec wants null)
/// or the id of the request it answers, as one line.
pub fn error_line(id: Option<&Value>, code: i64, message: &str, data: Option<Value>) -> Vec<u8> {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    let mut line = json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null), "error": error}).to_string();
    line.push('\n');
    line.into_bytes()
}

/// What one complete line is.
#[derive(Debug)]
enum Decoded {
    Message(Box<ClientJsonRpcMessage>),
    /// Shaped as a notification but not one rmcp reads: notifications get no answer.
    Skip,
    /// Not a message: this error line is the answer, and the connection goes on.
    Answer(Vec<u8>),
}

/// UTF-8 byte order mark, which RFC 8259 §8.1 lets a parser ignore.
const BOM: &[u8] = b"\xEF\xBB\xBF";

fn decode(line: &[u8]) -> Decoded {
    let line = line.strip_prefix(BOM).unwrap_or(line);
    let Ok(text) = std::str::from_utf8(line) else {
        return Decoded::Answer(error_line(None, PARSE_ERROR, "Parse error: the line is not valid UTF-8", None));
    };
    // serde_json refuses nesting past 128 levels as a syntax error, so a deeply nested line is
    // answered here too.
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(error) => {
            let message = format!("Parse error: {error}");
            return Decoded::Answer(error_line(None, PARSE_ERROR, &message, None));
        }
    };
    let id = value.get("id").filter(|id| id.is_string() || id.is_number()).cloned();
    let is_notification = value.get("id").is_none() && value.get("method").is_some_and(Value::is_string);
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(message) => Decoded::Message(Box::new(message)),
        Err(_) if is_notification => Decoded::Skip,
        Err(error) => {
            let message = format!("Invalid Request: {error}");
            Decoded::Answer(error_line(id.as_ref(), INVALID_REQUEST, &message, None))
        }
    }
}

/// One line for the writer, and whether it answers a request (which frees a place in flight).
struct Outgoing {
    bytes: Vec<u8>,
    answers_request: bool,
}

/// The transport of one connection. Reading and writing are cancel-safe: rmcp polls `receive`
/// inside a `select!`, so a partial line and an unsent answer live here, not in a future.
pub struct BoundedTransport {
    reader: BufReader<OwnedReadHalf>,
    line: Vec<u8>,
    limits: McpLimits,
    outgoing: mpsc::Sender<Outgoing>,
    /// An answer to a line that was not a message, not yet handed to the writer.
    pending: Option<Vec<u8>>,
    in_flight: Arc<Semaphore>,
    /// The place the next request will take, held before its line is read.
    place: Option<OwnedSemaphorePermit>,
    /// Set once the connection is being closed: `receive` ends it.
    closing: bool,
    /// The session's counters: a line over the limit is a refusal, like a connection past it.
    activity: Arc<Activity>,
}

impl BoundedTransport {
    pub fn new(stream: UnixStream, limits: McpLimits, activity: Arc<Activity>) -> Self {
        let (read, write) = stream.into_split();
        let in_flight = Arc::new(Semaphore::new(limits.in_flight));
        // Each queued line is an answer already bounded by `in_flight`, or one error line.
        let (outgoing, queue) = mpsc::channel(limits.in_flight.max(1));
        tokio::spawn(write_lines(write, queue, in_flight.clone()));
        Self {
            reader: BufReader::new(read),
            line: Vec::new(),
            limits,
            outgoing,
            pending: None,
            in_flight,
            place: None,
            closing: false,
            activity,
        }
    }

    /// Appends to `self.line` up to the next newline, never holding more than the limit.
    /// `Ok(true)`: a whole line is there; `Ok(false)`: the peer closed.
    async fn read_line(&mut self) -> Result<bool, LineTooLong> {
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(available) if !available.is_empty() => available,
                Ok(_) | Err(_) => return Ok(false),
            };
            let newline = available.iter().position(|byte| *byte == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if self.line.len().saturating_add(take) > self.limits.line.saturating_add(1) {
                return Err(LineTooLong);
            }
            self.line.extend_from_slice(&available[..take]);
            self.reader.consume(take);
            if newline.is_some() {
                return Ok(true);
            }
        }
    }

    /// `None` once the writer is gone (the connection is closed).
    async fn hand_pending_to_writer(&mut self) -> Option<()> {
        if self.pending.is_some() {
            let place = self.outgoing.reserve().await.ok()?;
            if let Some(bytes) = self.pending.take() {
                place.send(Outgoing { bytes, answers_request: false });
            }
        }
        Some(())
    }
}

/// The line in `BoundedTransport::read_line` grew past the limit.
struct LineTooLong;

/// Writes queued lines in order; an answer to a request gives its place in flight back once it is
/// written. At the end of the queue the write half is shut down, so the client sees the close.
async fn write_lines(mut write: OwnedWriteHalf, mut queue: mpsc::Receiver<Outgoing>, in_flight: Arc<Semaphore>) {
    while let Some(line) = queue.recv().await {
        if write.write_all(&line.bytes).await.is_err() {
            return;
        }
        if line.answers_request {
            in_flight.add_permits(1);
        }
    }
    let _ = write.shutdown().await;
}

impl Transport<RoleServer> for BoundedTransport {
    type Error = std::io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let outgoing = self.outgoing.clone();
        async move {
            let answers_request = match &item {
                JsonRpcMessage::Response(_) => true,
                JsonRpcMessage::Error(error) => error.id.is_some(),
                JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => false,
            };
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            outgoing
                .send(Outgoing { bytes, answers_request })
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::NotConnected, "the connection is closed"))
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            self.hand_pending_to_writer().await?;
            if self.closing {
                return None;
            }
            if self.place.is_none() {
                self.place = Some(self.in_flight.clone().acquire_owned().await.ok()?);
            }
            match self.read_line().await {
                Ok(true) => {}
                Ok(false) => return None,
                Err(LineTooLong) => {
                    self.activity.refused();
                    let limit = self.limits.line;
                    let message = format!(
                        "Invalid Request: a message line is longer than {limit} bytes, the most this endpoint \
                         reads; the connection is closed"
                    );
                    self.pending =
                        Some(error_line(None, INVALID_REQUEST, &message, Some(json!({"limitBytes": limit}))));
                    self.line = Vec::new();
                    self.closing = true;
                    continue;
                }
            }
            let line = std::mem::take(&mut self.line);
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            if body.is_empty() {
                continue;
            }
            match decode(body) {
                Decoded::Message(message) => {
                    if matches!(*message, JsonRpcMessage::Request(_))
                        && let Some(place) = self.place.take()
                    {
                        // Given back by the writer once the answer is written.
                        place.forget();
                    }
                    return Some(*message);
                }
                Decoded::Skip => {}
                Decoded::Answer(answer) => self.pending = Some(answer),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closing = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(line: &[u8]) -> Value {
        match decode(line) {
            Decoded::Answer(bytes) => serde_json::from_slice(&bytes).expect("an error line is JSON"),
            other => panic!("not answered: {other:?}"),
        }
    }

    #[test]
    fn lines_that_are_not_messages_are_answered_as_json_rpc_says() {
        let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let cases: [(&[u8], i64); 6] = [
            (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"", PARSE_ERROR),
            (b"\xff\xfe{}", PARSE_ERROR),
            (nested.as_bytes(), PARSE_ERROR),
            (b"[1,2]", INVALID_REQUEST),
            (b"{\"jsonrpc\":\"2.0\",\"method\":1}", INVALID_REQUEST),
            (b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":5,\"error\":5}", INVALID_REQUEST),
        ];
        for (line, code) in cases {
            let answer = answered(line);
            assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
            assert_eq!(answer["error"]["code"], code, "{answer}");
            assert!(answer.get("id").is_some(), "the id member is present: {answer}");
        }
        assert_eq!(
            answered(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":5}")["id"],
            7,
            "an id that can be read is echoed"
        );
        assert_eq!(answered(b"not json")["id"], Value::Null);
    }

    #[test]
    fn messages_and_unknown_notifications_are_not_answered() {
        let request = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert!(matches!(decode(request), Decoded::Message(_)));
        assert!(matches!(
            decode(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"),
            Decoded::Message(_)
        ));
        assert!(matches!(decode(br#"{"jsonrpc":"2.0","method":"notifications/unheard-of"}"#), Decoded::Message(_)));
        // A notification gets no answer, even a malformed one (JSON-RPC 2.0 §4.1).
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":5}"#),
            Decoded::Skip
        ));
    }
}
