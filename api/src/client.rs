//! How the CLI reaches its running daemon: HTTP/1.1 over the state directory's private socket,
//! with the operator token. Small on purpose: one request, `Connection: close`, the whole answer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const DEADLINE: Duration = Duration::from_secs(30);
const MAX_ANSWER: u64 = 64 << 20;

/// Why the daemon could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no daemon answers at {path}")]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Token(#[from] crate::auth::TokenError),
    #[error("talking to the daemon failed")]
    Io(#[from] std::io::Error),
    #[error("the daemon did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the daemon's answer is not HTTP")]
    Malformed,
}

/// An answer: status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl ClientError {
    /// No daemon is there to ask (its socket is absent or refuses, or there is no token): the
    /// caller does the work itself. Anything else is a daemon that answered wrong.
    pub fn no_daemon(&self) -> bool {
        matches!(self, ClientError::Connect { .. } | ClientError::Token(_))
    }
}

/// The daemon's socket, connected, and the operator token to show it.
async fn connect(state_dir: &Path) -> Result<(tokio::net::UnixStream, String), ClientError> {
    let token = crate::auth::read_token(state_dir)?;
    let socket = crate::cli_socket(state_dir);
    let stream = tokio::net::UnixStream::connect(&socket)
        .await
        .map_err(|source| ClientError::Connect { path: socket.clone(), source })?;
    Ok((stream, token))
}

/// Sends `method path` with `body` (JSON, when given) to the daemon of `state_dir`.
pub async fn request(state_dir: &Path, method: &str, path: &str, body: Option<&[u8]>) -> Result<Answer, ClientError> {
    let exchange = async {
        let (mut stream, token) = connect(state_dir).await?;
        let body = body.unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: roundtable\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        let mut answer = Vec::new();
        stream.take(MAX_ANSWER).read_to_end(&mut answer).await?;
        parse(&answer)
    };
    tokio::time::timeout(DEADLINE, exchange).await.map_err(|_| ClientError::Timeout(DEADLINE))?
}

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// `event:` (`message` when the server named none).
    pub event: String,
    pub id: Option<String>,
    /// Every `data:` line, joined by line breaks.
    pub data: String,
}

/// A stream of server-sent events from the daemon (a watch, a followed log).
pub struct EventStream {
    stream: tokio::net::UnixStream,
    /// Bytes read, not yet de-chunked.
    raw: Vec<u8>,
    /// The body so far, not yet cut into events.
    body: Vec<u8>,
    /// Bytes left of the chunk being read (then its CRLF); `None` between chunks.
    chunk_left: Option<usize>,
    finished: bool,
}

/// Opens `GET path` on the daemon of `state_dir` as an event stream; a non-200 answer is returned
/// whole instead.
pub async fn stream(state_dir: &Path, path: &str) -> Result<Result<EventStream, Answer>, ClientError> {
    let open = async {
        let (mut stream, token) = connect(state_dir).await?;
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: roundtable\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await?;
        let mut raw = Vec::new();
        let end = loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            if raw.len() > 64 << 10 {
                return Err(ClientError::Malformed);
            }
            let mut buffer = [0u8; 8192];
            let read = stream.read(&mut buffer).await?;
            if read == 0 {
                return Err(ClientError::Malformed);
            }
            raw.extend_from_slice(&buffer[..read]);
        };
        Ok((stream, raw, end))
    };
    let (stream, mut raw, end) =
        tokio::time::timeout(DEADLINE, open).await.map_err(|_| ClientError::Timeout(DEADLINE))??;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| ClientError::Malformed)?.to_owned();
    let status: u16 =
        head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).ok_or(ClientError::Malformed)?;
    if status != 200 {
        let rest = async {
            stream.take(MAX_ANSWER).read_to_end(&mut raw).await?;
            parse(&raw)
        };
        return Ok(Err(tokio::time::timeout(DEADLINE, rest).await.map_err(|_| ClientError::Timeout(DEADLINE))??));
    }
    let chunked = head.lines().any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding") && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let rest = raw.split_off(end + 4);
    let mut events = EventStream { stream, raw: Vec::new(), body: Vec::new(), chunk_left: None, finished: false };
    if chunked {
        events.raw = rest;
    } else {
        // Without chunks the body runs to the connection's end.
        events.body = rest;
        events.chunk_left = Some(usize::MAX);
    }
    Ok(Ok(events))
}

impl EventStream {
    /// The next event; `None` once the daemon ended the stream.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, ClientError> {
        loop {
            if let Some(event) = self.take_event() {
                return Ok(Some(event));
            }
            if self.finished {
                return Ok(None);
            }
            if self.dechunk()? {
                continue;
            }
            let mut buffer = [0u8; 16384];
            let read = self.stream.read(&mut buffer).await?;
            if read == 0 {
                self.finished = true;
                continue;
            }
            if self.chunk_left == Some(usize::MAX) {
                self.body.extend_from_slice(&buffer[..read]);
            } else {
                self.raw.extend_from_slice(&buffer[..read]);
            }
        }
    }

    /// Moves what it can of the chunked bytes read into the body; whether it moved anything.
    fn dechunk(&mut self) -> Result<bool, ClientError> {
        let mut moved = false;
        loop {
            match self.chunk_left {
                Some(usize::MAX) => return Ok(moved),
                None => {
                    let Some(line_end) = self.raw.windows(2).position(|w| w == b"\r\n") else { return Ok(moved) };
                    let size_text = std::str::from_utf8(&self.raw[..line_end]).map_err(|_| ClientError::Malformed)?;
                    let size = usize::from_str_radix(size_text.split(';').next().unwrap_or_default().trim(), 16)
                        .map_err(|_| ClientError::Malformed)?;
                    self.raw.drain(..line_end + 2);
                    if size == 0 {
                        self.finished = true;
                        return Ok(true);
                    }
                    self.chunk_left = Some(size);
                    moved = true;
                }
                Some(left) => {
                    if self.raw.len() < left + 2 {
                        // Take what is here of the chunk; the rest comes later.
                        let take = self.raw.len().min(left);
                        if take == 0 {
                            return Ok(moved);
                        }
                        self.body.extend(self.raw.drain(..take));
                        self.chunk_left = Some(left - take);
                        return Ok(true);
                    }
                    self.body.extend(self.raw.drain(..left));
                    self.raw.drain(..2);
                    self.chunk_left = None;
                    moved = true;
                }
            }
        }
    }

    /// The first whole event of the body, comments skipped.
    fn take_event(&mut self) -> Option<SseEvent> {
        loop {
            let end = self.body.windows(2).position(|w| w == b"\n\n")?;
            let block: Vec<u8> = self.body.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&block);
            let mut event = SseEvent { event: "message".into(), ..SseEvent::default() };
            let mut data: Vec<&str> = Vec::new();
            for line in text.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => event.event = value.to_owned(),
                    "id" => event.id = Some(value.to_owned()),
                    "data" => data.push(value),
                    _ => {}
                }
            }
            if !data.is_empty() || event.event != "message" {
                event.data = data.join("\n");
                return Some(event);
            }
        }
    }
}

/// Status and body of an HTTP/1.1 answer (`Content-Length` or chunked).
fn parse(answer: &[u8]) -> Result<Answer, ClientError> {
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or(ClientError::Malformed)?;
    let head = std::str::from_utf8(&answer[..end]).map_err(|_| ClientError::Malformed)?;
    let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).ok_or(ClientError::Malformed)?;
    let chunked = head.lines().any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding") && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let rest = &answer[end + 4..];
    let body = if chunked { dechunk(rest)? } else { rest.to_vec() };
    Ok(Answer { status, body })
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, ClientError> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").ok_or(ClientError::Malformed)?;
        let size_text = std::str::from_utf8(&rest[..line_end]).map_err(|_| ClientError::Malformed)?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or_default().trim(), 16)
            .map_err(|_| ClientError::Malformed)?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = rest.get(..size).ok_or(ClientError::Malformed)?;
        body.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or(ClientError::Malformed)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_come_whole_across_chunks_and_reads() {
        let (ours, mut theirs) = tokio::net::UnixStream::pair().expect("pair");
        let mut events =
            EventStream { stream: ours, raw: Vec::new(), body: Vec::new(), chunk_left: None, finished: false };
        let body = ": keep-alive\n\nevent: ADDED\nid: 7\ndata: {\"a\":1}\n\ndata: plain\n\n";
        // Chunks cut mid-event and mid-line, written in two reads.
        let (first, second) = body.split_at(20);
        let wire = format!("{:x}\r\n{first}\r\n{:x}\r\n{second}\r\n0\r\n\r\n", first.len(), second.len());
        let (a, b) = wire.as_bytes().split_at(9);
        theirs.write_all(a).await.expect("write");
        let writer = tokio::spawn({
            let b = b.to_vec();
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                theirs.write_all(&b).await.expect("write");
            }
        });
        let added = events.next().await.expect("reads").expect("an event");
        assert_eq!((added.event.as_str(), added.id.as_deref(), added.data.as_str()), ("ADDED", Some("7"), "{\"a\":1}"));
        let plain = events.next().await.expect("reads").expect("an event");
        assert_eq!((plain.event.as_str(), plain.data.as_str()), ("message", "plain"));
        assert_eq!(events.next().await.expect("reads"), None, "the last chunk ends the stream");
        writer.await.expect("writer");
    }

    #[test]
    fn answers_parse_with_a_length_or_in_chunks() {
        let plain = parse(b"HTTP/1.1 202 Accepted\r\ncontent-length: 2\r\n\r\n{}").expect("parses");
        assert_eq!((plain.status, plain.body.as_slice()), (202, b"{}".as_slice()));
        let chunked = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
            .expect("parses");
        assert_eq!(chunked.body, b"abcde");
        assert!(parse(b"garbage").is_err());
    }
}
