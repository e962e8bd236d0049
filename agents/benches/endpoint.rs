//! The agent MCP endpoint's cost, measured (figures printed, nothing asserted): the daemon's
//! memory per live MCP session (endpoint + authenticated, initialised connection), the tool-call
//! round trip on the socket without the bridge, for comparison with `benches/mcp.sh` (which
//! measures through `roundtable mcp stdio` inside a hardened container), and the daemon's memory
//! while one session's agent attacks its endpoint: 20 connections each sending 15 MB of one
//! unterminated line, then requests sent without reading the answers.
//! Run: `cargo bench -p roundtable-agents --bench endpoint`.
//!
//! Environment (all optional): `BENCH_PARTS`, any of `memory round-trip flood` (all three);
//! `BENCH_CALLS` (1000 round trips); `ROUNDTABLE_BENCH_SMOKE=1` makes every size tiny (5
//! sessions, 20 calls, 2 connections × 1 MB, 2,000 unread requests): CI runs it so
//! (benches/smoke.sh), to show the bench still runs to the end.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use roundtable_agents::capability::{Authority, Role, Token};
use roundtable_agents::mcp::{self, SessionEndpoint};
use roundtable_agents::tools::{Activity, Board};
use roundtable_store::Store;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::sync::CancellationToken;

/// What one run measures, and how much.
struct Sizes {
    sessions: usize,
    calls: usize,
    /// The attack reproduced from issue 29: connections, and bytes of one line on each.
    flood_connections: usize,
    flood_line: usize,
    /// Requests one connection sends without reading an answer.
    unread_requests: usize,
    parts: Vec<String>,
}

impl Sizes {
    fn from_env() -> Self {
        let smoke = std::env::var("ROUNDTABLE_BENCH_SMOKE").is_ok_and(|value| value == "1");
        let size = |full, tiny| if smoke { tiny } else { full };
        let parts = std::env::var("BENCH_PARTS").unwrap_or_else(|_| "memory round-trip flood".into());
        Self {
            sessions: size(200, 5),
            calls: std::env::var("BENCH_CALLS").ok().and_then(|calls| calls.parse().ok()).unwrap_or(size(1000, 20)),
            flood_connections: size(20, 2),
            flood_line: size(15_000_000, 1_000_000),
            unread_requests: size(200_000, 2_000),
            parts: parts.split_whitespace().map(str::to_owned).collect(),
        }
    }

    fn runs(&self, part: &str) -> bool {
        self.parts.iter().any(|name| name == part)
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

struct Client {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next: u64,
}

impl Client {
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let line = format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.writer.write_all(line.as_bytes()).await.expect("write");
        loop {
            let mut answer = String::new();
            assert!(self.reader.read_line(&mut answer).await.expect("read") > 0, "closed");
            let message: Value = serde_json::from_str(&answer).expect("json");
            if message["id"] == json!(id) {
                return message;
            }
        }
    }
}

/// Serves `session`'s endpoint; its socket and capability.
async fn open_endpoint(
    dir: &Path,
    store: &Store,
    authority: &Arc<Authority>,
    session: &str,
    cancel: &CancellationToken,
) -> (PathBuf, Token) {
    let session = session.to_owned();
    let socket = dir.join(format!("{session}.sock"));
    let board = Board {
        store: store.clone(),
        session: session.clone(),
        assignment: "bench".into(),
        brief: json!({"assignment": "bench", "task": {"id": "T", "title": "a task title", "prompt": "x".repeat(512)}}),
        activity: Arc::new(Activity::default()),
    };
    let endpoint = Arc::new(SessionEndpoint {
        session: session.clone(),
        socket: socket.clone(),
        authority: authority.clone(),
        board: Arc::new(board),
    });
    let listener = mcp::bind(&socket).expect("bind");
    tokio::spawn(mcp::serve(endpoint, listener, cancel.clone()));
    let token = authority.issue(&session, &socket, Role::Implementer, Duration::from_secs(3600)).expect("issue");
    (socket, token)
}

/// A connection that presented `token`, and the endpoint's first answer (`{"ok":true}`, or the
/// refusal of a connection past the session's limit).
async fn authenticated(socket: &Path, token: &Token) -> (Client, String) {
    let (read, mut writer) = UnixStream::connect(socket).await.expect("connect").into_split();
    // A refused connection may be closed before the auth line is written.
    let _ = writer.write_all(format!("{}\n", json!({"roundtable_auth": token.reveal()})).as_bytes()).await;
    let mut reader = BufReader::new(read);
    let mut answer = String::new();
    let _ = reader.read_line(&mut answer).await;
    (Client { reader, writer, next: 0 }, answer)
}

async fn live_session(
    dir: &Path,
    store: &Store,
    authority: &Arc<Authority>,
    n: usize,
    cancel: &CancellationToken,
) -> Client {
    let (socket, token) = open_endpoint(dir, store, authority, &format!("s{n}"), cancel).await;
    let (mut client, _) = authenticated(&socket, &token).await;
    let init =
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}});
    client.request("initialize", init).await;
    client.writer.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await.expect("write");
    client.request("tools/list", json!({})).await;
    client
}

/// The highest RSS seen, sampled every 5 ms while `attack` runs.
async fn peak_rss_during<T>(attack: impl Future<Output = T>) -> (T, u64) {
    let peak = Arc::new(AtomicU64::new(rss_kib()));
    let sampling = CancellationToken::new();
    let sampler = tokio::spawn({
        let (peak, sampling) = (peak.clone(), sampling.clone());
        async move {
            while !sampling.is_cancelled() {
                peak.fetch_max(rss_kib(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    let outcome = attack.await;
    // The daemon may still be reading what was sent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    sampling.cancel();
    let _ = sampler.await;
    (outcome, peak.load(Ordering::Relaxed).max(rss_kib()))
}

/// One agent's attack on its own session's endpoint, as the daemon's RSS shows it.
async fn flood(dir: &Path, store: &Store, authority: &Arc<Authority>, cancel: &CancellationToken, sizes: &Sizes) {
    let (connections, line, unread) = (sizes.flood_connections, sizes.flood_line, sizes.unread_requests);
    let (socket, token) = open_endpoint(dir, store, authority, "flood", cancel).await;
    let token = Arc::new(token);
    let before = rss_kib();
    let ((accepted, held), peak) = peak_rss_during(async {
        let mut attackers = tokio::task::JoinSet::new();
        for _ in 0..connections {
            let (socket, token) = (socket.clone(), token.clone());
            attackers.spawn(async move {
                let (mut client, answer) = authenticated(&socket, &token).await;
                let accepted = answer.trim() == "{\"ok\":true}";
                let chunk = vec![b'a'; 64 * 1024];
                let write = async {
                    client
                        .writer
                        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"p\":\"")
                        .await?;
                    for _ in 0..line / chunk.len() {
                        client.writer.write_all(&chunk).await?;
                    }
                    std::io::Result::Ok(())
                };
                // Past the limit the endpoint stops reading; a write it never reads would wait forever.
                let _ = tokio::time::timeout(Duration::from_secs(10), write).await;
                (accepted, client)
            });
        }
        let mut accepted = 0;
        let mut held = Vec::new();
        while let Some(joined) = attackers.join_next().await {
            let (was_accepted, client) = joined.expect("attacker");
            accepted += usize::from(was_accepted);
            held.push(client);
        }
        (accepted, held)
    })
    .await;
    println!(
        "flood: {connections} connections × {} MB of one unterminated line: {accepted} accepted; daemon RSS {} KiB before, peak {} KiB (+{} KiB)",
        line / 1_000_000,
        before,
        peak,
        peak.saturating_sub(before)
    );
    drop(held);

    let (mut client, _) = authenticated(&socket, &token).await;
    let init =
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}});
    client.request("initialize", init).await;
    let before = rss_kib();
    let ((), peak) = peak_rss_during(async {
        // Written a thousand at a time, so the attacker's own buffer stays out of the figure.
        let write = async {
            for first in (0..unread).step_by(1000) {
                let mut lines = Vec::with_capacity(64 * 1000);
                for id in first..first + 1000 {
                    lines.extend_from_slice(
                        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n").as_bytes(),
                    );
                }
                client.writer.write_all(&lines).await?;
            }
            std::io::Result::Ok(())
        };
        // The answers are never read: the endpoint either stops reading or queues them.
        let _ = tokio::time::timeout(Duration::from_secs(5), write).await;
    })
    .await;
    println!(
        "unread answers: {unread} pings sent on one connection, no answer read: daemon RSS {} KiB before, peak {} KiB (+{} KiB)",
        before,
        peak,
        peak.saturating_sub(before)
    );
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes = Sizes::from_env();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("state")).await.expect("store");
    let authority = Arc::new(Authority::new());
    let cancel = CancellationToken::new();

    // Warm up the allocator and rmcp's statics with one session first.
    let mut first = live_session(dir.path(), &store, &authority, 0, &cancel).await;
    let mut clients = Vec::with_capacity(sizes.sessions);
    if sizes.runs("memory") {
        let before = rss_kib();
        for n in 1..=sizes.sessions {
            clients.push(live_session(dir.path(), &store, &authority, n, &cancel).await);
        }
        let after = rss_kib();
        println!(
            "memory: {} live MCP sessions (endpoint + authenticated, initialised connection): {} KiB RSS, {:.1} KiB per session",
            sizes.sessions,
            after.saturating_sub(before),
            after.saturating_sub(before) as f64 / sizes.sessions as f64
        );
    }

    if sizes.runs("round-trip") {
        let mut times = Vec::with_capacity(sizes.calls);
        for _ in 0..sizes.calls {
            let started = Instant::now();
            let answer = first.request("tools/call", json!({"name": "task.get", "arguments": {}})).await;
            times.push(started.elapsed());
            assert!(answer.get("result").is_some(), "task.get answered {answer}");
        }
        times.sort();
        println!(
            "round trip on the socket (no bridge), {} task.get calls: p50 {:.0} µs, p99 {:.0} µs",
            sizes.calls,
            percentile(&times, 0.50).as_secs_f64() * 1e6,
            percentile(&times, 0.99).as_secs_f64() * 1e6
        );
    }
    if sizes.runs("flood") {
        flood(dir.path(), &store, &authority, &cancel, &sizes).await;
    }
    cancel.cancel();
    drop(clients);
}
