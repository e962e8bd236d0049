//! A fake model API over TLS for offline runs of a real agent CLI: HTTP/1.1 on a loopback
//! address with a fresh certificate, a scripted server-sent-event stream per `POST` to the
//! responses path (one script per turn, in order), a fixed body for other `GET`s, `426` to a
//! WebSocket upgrade, and every request recorded for the test to inspect.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::upstream::TlsIdentity;

/// One request as it arrived (the body as received, after de-chunking).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// What the fake answers.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// The path streamed answers are posted to, e.g. `/v1/responses`.
    pub responses_path: String,
    /// One stream of SSE events (each a JSON object with a `type`) per POST, in order; past the
    /// last, the last is repeated.
    pub turns: Vec<Vec<serde_json::Value>>,
    /// The JSON body answered to any other GET (a model list).
    pub get_body: serde_json::Value,
}

/// The fake API server; stopped when dropped.
pub struct FakeResponses {
    pub address: SocketAddr,
    pub identity: TlsIdentity,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    task: JoinHandle<()>,
}

impl FakeResponses {
    pub async fn start(address: SocketAddr, names: &[&str], script: Script) -> io::Result<Self> {
        let identity = TlsIdentity::self_signed(names);
        let acceptor = identity.acceptor();
        let listener = TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let shared = (recorded.clone(), Arc::new(script), Arc::new(Mutex::new(0usize)));
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let (recorded, script, posts) = (shared.0.clone(), shared.1.clone(), shared.2.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else { return };
                    // One request per connection is enough for the clients we serve: every
                    // answer closes the connection.
                    let Ok(Some(request)) = read_request(&mut tls).await else { return };
                    recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(request.clone());
                    let answer = answer(&request, &script, &posts);
                    let _ = tls.write_all(&answer).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Ok(Self { address, identity, recorded, task })
    }

    /// Every request so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl Drop for FakeResponses {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(request: &Recorded, script: &Script, posts: &Mutex<usize>) -> Vec<u8> {
    let upgrade = request.header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if upgrade {
        return plain(426, "application/json", br#"{"error":{"message":"websockets are not offered here"}}"#);
    }
    if request.method == "POST" && request.path.split('?').next() == Some(script.responses_path.as_str()) {
        let turn = {
            let mut posts = posts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *posts += 1;
            *posts - 1
        };
        let events = script.turns.get(turn).or(script.turns.last()).cloned().unwrap_or_default();
        let mut body = String::new();
        for event in events {
            let kind = event.get("type").and_then(|t| t.as_str()).unwrap_or("message").to_owned();
            body.push_str(&format!("event: {kind}\ndata: {event}\n\n"));
        }
        return plain(200, "text/event-stream", body.as_bytes());
    }
    if request.method == "GET" {
        return plain(200, "application/json", script.get_body.to_string().as_bytes());
    }
    plain(404, "application/json", br#"{"error":{"message":"not here"}}"#)
}

fn plain(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        426 => "Upgrade Required",
        _ => "Status",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Reads one HTTP/1.1 request: the head, then a body by `content-length` or chunked.
pub(crate) async fn read_request<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> io::Result<Option<Recorded>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = find(&buffer, b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buffer.len() > 1 << 20 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (method, path) = (first.next().unwrap_or_default().to_owned(), first.next().unwrap_or_default().to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut rest = buffer[head_end + 4..].to_vec();
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let body = if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        while rest.len() < length {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            rest.extend_from_slice(&chunk[..n]);
        }
        rest.truncate(length);
        rest
    } else if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            if let Some(body) = dechunk(&rest) {
                break body;
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break Vec::new();
            }
            rest.extend_from_slice(&chunk[..n]);
        }
    } else {
        Vec::new()
    };
    Ok(Some(Recorded { method, path, headers, body }))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The body of a complete chunked encoding; `None` until the last chunk has arrived.
fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = find(data, b"\r\n")?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        if data.len() < size + 2 {
            return None;
        }
        body.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}
