//! The agent MCP endpoint's cost, measured (figures printed, nothing asserted): the daemon's
//! memory per live MCP session (endpoint + authenticated, initialised connection), and the
//! tool-call round trip on the socket without the bridge, for comparison with `benches/mcp.sh`
//! (which measures through `roundtable mcp stdio` inside a hardened container).
//! Run: `cargo bench -p roundtable-agents --bench endpoint`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roundtable_agents::capability::{Authority, Role};
use roundtable_agents::mcp::{self, SessionEndpoint};
use roundtable_agents::tools::{Activity, Board};
use roundtable_store::Store;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::sync::CancellationToken;

const SESSIONS: usize = 200;
const CALLS: usize = 1000;

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

async fn live_session(
    dir: &Path,
    store: &Store,
    authority: &Arc<Authority>,
    n: usize,
    cancel: &CancellationToken,
) -> Client {
    let session = format!("s{n}");
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
    let (read, mut writer) = UnixStream::connect(&socket).await.expect("connect").into_split();
    writer.write_all(format!("{}\n", json!({"roundtable_auth": token.reveal()})).as_bytes()).await.expect("auth");
    let mut reader = BufReader::new(read);
    let mut ok = String::new();
    reader.read_line(&mut ok).await.expect("ok");
    let mut client = Client { reader, writer, next: 0 };
    let init =
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}});
    client.request("initialize", init).await;
    client.writer.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await.expect("write");
    client.request("tools/list", json!({})).await;
    client
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("state")).await.expect("store");
    let authority = Arc::new(Authority::new());
    let cancel = CancellationToken::new();

    // Warm up the allocator and rmcp's statics with one session first.
    let mut first = live_session(dir.path(), &store, &authority, 0, &cancel).await;
    let before = rss_kib();
    let mut clients = Vec::with_capacity(SESSIONS);
    for n in 1..=SESSIONS {
        clients.push(live_session(dir.path(), &store, &authority, n, &cancel).await);
    }
    let after = rss_kib();
    println!(
        "memory: {SESSIONS} live MCP sessions (endpoint + authenticated, initialised connection): {} KiB RSS, {:.1} KiB per session",
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 / SESSIONS as f64
    );

    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let answer = first.request("tools/call", json!({"name": "task.get", "arguments": {}})).await;
        times.push(started.elapsed());
        assert!(answer.get("result").is_some());
    }
    times.sort();
    println!(
        "round trip on the socket (no bridge), {CALLS} task.get calls: p50 {:.0} µs, p99 {:.0} µs",
        percentile(&times, 0.50).as_secs_f64() * 1e6,
        percentile(&times, 0.99).as_secs_f64() * 1e6
    );
    cancel.cancel();
    drop(clients);
}
