//! A fake model provider over TLS for the credential broker's tests and benchmark: every request
//! recorded (method, target with its query, headers, body), each answered by the test's own
//! function with a status, headers and a body sent in timed chunks (chunked or by length), and
//! optionally held after its first chunk until the test releases it, so a test can tell a stream
//! passed event by event from one buffered whole.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::responses::{Recorded, read_request};
use crate::upstream::TlsIdentity;

/// One answer.
#[derive(Debug, Clone, Default)]
pub struct Canned {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body, in the pieces it is written in.
    pub chunks: Vec<Vec<u8>>,
    /// Sent with `Transfer-Encoding: chunked` (one chunk per piece) instead of a length.
    pub chunked: bool,
    /// Pause before each piece after the first.
    pub pause: Duration,
    /// When set, nothing after the first piece is sent until this is notified.
    pub gate: Option<Arc<Notify>>,
    /// Pause before the response head (a provider slow to answer at all).
    pub head_delay: Duration,
}

impl Canned {
    /// A whole JSON body.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![body.to_string().into_bytes()],
            ..Self::default()
        }
    }

    /// Server-sent events, one piece per event (`event:` from its `type`), chunked.
    pub fn sse(events: &[serde_json::Value]) -> Self {
        let chunks = events
            .iter()
            .map(|event| {
                let kind = event.get("type").and_then(|t| t.as_str()).unwrap_or("message");
                format!("event: {kind}\ndata: {event}\n\n").into_bytes()
            })
            .collect();
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks,
            chunked: true,
            ..Self::default()
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

type Answer = dyn Fn(&Recorded) -> Canned + Send + Sync;

/// The fake provider; stopped when dropped.
pub struct FakeProvider {
    pub address: SocketAddr,
    pub identity: TlsIdentity,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    task: JoinHandle<()>,
}

impl FakeProvider {
    /// Serves TLS for `names` on `address`, one request per connection, answered by `answer`.
    pub async fn start(
        address: SocketAddr,
        names: &[&str],
        answer: impl Fn(&Recorded) -> Canned + Send + Sync + 'static,
    ) -> io::Result<Self> {
        let identity = TlsIdentity::self_signed(names);
        let acceptor = identity.acceptor();
        let listener = TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Answer> = Arc::new(answer);
        let log = recorded.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let (acceptor, log, answer) = (acceptor.clone(), log.clone(), answer.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else { return };
                    let Ok(Some(request)) = read_request(&mut tls).await else { return };
                    log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(request.clone());
                    let canned = answer(&request);
                    let _ = write_answer(&mut tls, &canned).await;
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

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn write_answer<S: tokio::io::AsyncWrite + Unpin>(stream: &mut S, canned: &Canned) -> io::Result<()> {
    if !canned.head_delay.is_zero() {
        tokio::time::sleep(canned.head_delay).await;
    }
    let mut head = format!("HTTP/1.1 {} Canned\r\n", canned.status);
    for (name, value) in &canned.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if canned.chunked {
        head.push_str("transfer-encoding: chunked\r\n");
    } else {
        head.push_str(&format!("content-length: {}\r\n", canned.chunks.iter().map(Vec::len).sum::<usize>()));
    }
    head.push_str("connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    for (index, piece) in canned.chunks.iter().enumerate() {
        if index > 0 {
            if index == 1
                && let Some(gate) = &canned.gate
            {
                gate.notified().await;
            }
            if !canned.pause.is_zero() {
                tokio::time::sleep(canned.pause).await;
            }
        }
        if canned.chunked {
            stream.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await?;
            stream.write_all(piece).await?;
            stream.write_all(b"\r\n").await?;
        } else {
            stream.write_all(piece).await?;
        }
        stream.flush().await?;
    }
    if canned.chunked {
        stream.write_all(b"0\r\n\r\n").await?;
    }
    stream.flush().await
}
