//! Limits that hold before anyone is authenticated, over loopback: an unauthenticated body is
//! never read, floods of unauthenticated connections (plain or TLS, from one peer) leave an
//! operator from another peer served at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use roundtable_api::auth::{OperatorToken, require_operator};
use roundtable_api::serve::{Limits, serve_router};
use roundtable_api::{Bound, Listen, TlsFiles};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

const TOKEN: &str = "rt_preauth";
const OPERATOR: &str = "127.0.0.1";
const FLOODER: &str = "127.0.0.2";
/// What "served at once" means here: far below every deadline a flood could make us wait for.
const PROMPTLY: Duration = Duration::from_secs(2);

/// The API's shape: a public route and a route behind the operator token that reads its body.
fn app() -> Router {
    let operator = Router::new()
        .route("/v1/reconcile", post(|body: axum::body::Bytes| async move { format!("{} bytes", body.len()) }))
        .layer(from_fn_with_state(OperatorToken::from_secret(TOKEN), require_operator));
    Router::new().route("/healthz", get(|| async { "ok" })).merge(operator)
}

struct Server {
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(bound: Bound, limits: Limits) -> Self {
        let address = match &bound {
            Bound::Tcp(listener) => listener.local_addr().expect("address"),
            _ => bound.local().trim_start_matches("https://").parse().expect("an address"),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let gate = Arc::new(OperatorToken::from_secret(TOKEN));
        let task = tokio::spawn(serve_router(bound, app(), gate, limits, async move {
            let _ = stopped.await;
        }));
        Self { address, stop: Some(stop), task }
    }

    async fn plain(limits: Limits) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::start(Bound::Tcp(listener), limits).await
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.task).await;
    }
}

/// A small server, so a flood of a few hundred connections is more than it holds.
fn small() -> Limits {
    Limits { max_connections: 64, max_unauthenticated: 48, max_unauthenticated_per_peer: 16, ..Limits::default() }
}

async fn connect_from(source: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source.parse().expect("a loopback address"), 0))?;
    socket.connect(to).await
}

/// One request with `Connection: close`; the whole answer.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, request: &str) -> String {
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

fn operator_request() -> String {
    format!(
        "POST /v1/reconcile HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello"
    )
}

/// The operator, from its own address, gets its answer promptly.
async fn assert_operator_served(address: SocketAddr) {
    let started = Instant::now();
    let answer = tokio::time::timeout(PROMPTLY, async {
        exchange(connect_from(OPERATOR, address).await.expect("connect"), &operator_request()).await
    })
    .await
    .unwrap_or_else(|_| panic!("the operator was not answered within {PROMPTLY:?}"));
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("5 bytes"), "{answer}");
    eprintln!("operator answered in {:?}", started.elapsed());
}

#[tokio::test]
async fn an_unauthenticated_body_is_never_read_it_is_answered_401_at_once() {
    let server = Server::plain(Limits::default()).await;
    for authorization in ["", "Authorization: Bearer rt_wrong\r\n"] {
        let mut stream = connect_from(OPERATOR, server.address).await.expect("connect");
        let head = format!("POST /v1/reconcile HTTP/1.1\r\nHost: x\r\n{authorization}Content-Length: 1048576\r\n\r\n");
        stream.write_all(head.as_bytes()).await.expect("head");
        stream.write_all(&[b'x'; 1000]).await.expect("the start of the body");
        // The rest of the body never comes: the answer must not wait for it (30 s by default).
        let mut answer = Vec::new();
        tokio::time::timeout(PROMPTLY, stream.read_to_end(&mut answer))
            .await
            .expect("answered and closed before the body arrived")
            .expect("read");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 401") && answer.contains("unauthorized"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    }
    // The same request with the token has its body read whole.
    let mut stream = connect_from(OPERATOR, server.address).await.expect("connect");
    let head = format!(
        "POST /v1/reconcile HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\nContent-Length: 2000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(&[b'x'; 1000]).await.expect("half");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answer = exchange(stream, &"y".repeat(1000)).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("2000 bytes"), "{answer}");
    server.stop().await;
}

/// 200 connections without the token, each declaring a 1 MiB body and sending only part of it:
/// each is answered and closed at once, none waits out the body deadline, and the operator is
/// served while they come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unauthenticated_bodies_leaves_the_operator_served() {
    let server = Server::plain(small()).await;
    let address = server.address;
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..200 {
        flood.spawn(async move {
            let Ok(mut stream) = connect_from(FLOODER, address).await else { return true };
            let head = "POST /v1/reconcile HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n";
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&[b'x'; 16 * 1024]).await;
            let mut answer = Vec::new();
            // Ended (answered, closed or reset) long before the 30 s body deadline.
            tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await.is_ok()
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_operator_served(address).await;
    let mut held = 0;
    while let Some(ended) = flood.join_next().await {
        held += usize::from(!ended.expect("a flood task"));
    }
    assert_eq!(held, 0, "flood connections the server kept open waiting for their bodies");
    server.stop().await;
}

/// Idle connections from one peer (no head ever sent) fill only that peer's share of the
/// unauthenticated slots: the server's cap is 64, the flood opens 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_from_one_peer_leave_room_for_another() {
    let server = Server::plain(small()).await;
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(connect_from(FLOODER, server.address).await.expect("connect (the kernel's backlog)"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_operator_served(server.address).await;
    drop(idle);
    server.stop().await;
}

/// Once a request on a connection carried the token, the connection no longer counts against
/// its peer's unauthenticated share.
#[tokio::test]
async fn an_authenticated_connection_leaves_its_peers_share() {
    let limits = Limits { max_unauthenticated_per_peer: 1, ..Limits::default() };
    let server = Server::plain(limits).await;
    let mut kept = connect_from(OPERATOR, server.address).await.expect("connect");
    let request = format!("GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    kept.write_all(request.as_bytes()).await.expect("write");
    let mut buffer = [0u8; 512];
    let n = kept.read(&mut buffer).await.expect("answer");
    assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 200"), "kept alive, authenticated");
    assert_operator_served(server.address).await;
    drop(kept);
    server.stop().await;
}

/// A head larger than `max_head` is refused: it is all an unauthenticated peer can make the
/// server buffer.
#[tokio::test]
async fn an_oversized_head_is_refused() {
    let server = Server::plain(Limits::default()).await;
    let stream = connect_from(OPERATOR, server.address).await.expect("connect");
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: {}\r\nConnection: close\r\n\r\n",
        "p".repeat(64 * 1024)
    );
    let answer = tokio::time::timeout(PROMPTLY, exchange(stream, &request)).await.expect("answered");
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    server.stop().await;
}

/// 300 TCP connections from one peer that never start their TLS handshake (more than the 256
/// handshakes the listener runs at once): an operator from another address completes its
/// handshake and gets its answer at once, and the idle ones are cut off well within 10 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshakes_from_one_peer_leave_room_for_another() {
    let identity = roundtable_net_fixtures::TlsIdentity::self_signed(&["localhost"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let files = TlsFiles { cert: dir.path().join("cert.pem"), key: dir.path().join("key.pem") };
    std::fs::write(&files.cert, &identity.pem).expect("write the certificate");
    std::fs::write(&files.key, &identity.key_pem).expect("write the key");
    let bound = roundtable_api::listen::bind(&Listen::Tcp("127.0.0.1:0".parse().expect("address")), Some(&files))
        .await
        .expect("bind with TLS");
    let server = Server::start(bound, Limits::default()).await;
    let started = Instant::now();
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(connect_from(FLOODER, server.address).await.expect("connect (the kernel's backlog)"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    let operator = Instant::now();
    let answer = tokio::time::timeout(PROMPTLY, async {
        let tcp = connect_from(OPERATOR, server.address).await.expect("connect");
        let tls = roundtable_net_fixtures::tls_client(tcp, "localhost", &identity.certificate, true)
            .await
            .expect("handshake");
        exchange(tls, &operator_request()).await
    })
    .await
    .unwrap_or_else(|_| panic!("the operator's TLS request was not answered within {PROMPTLY:?}"));
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("5 bytes"), "{answer}");
    eprintln!("operator answered over TLS in {:?}", operator.elapsed());

    let mut cut_off = tokio::task::JoinSet::new();
    for mut stream in idle {
        cut_off.spawn(async move {
            let mut rest = Vec::new();
            tokio::time::timeout(Duration::from_secs(8), stream.read_to_end(&mut rest)).await.is_ok()
        });
    }
    let mut held = 0;
    while let Some(ended) = cut_off.join_next().await {
        held += usize::from(!ended.expect("a task"));
    }
    assert_eq!(held, 0, "idle TLS connections still open {:?} after they were opened", started.elapsed());
    server.stop().await;
}
