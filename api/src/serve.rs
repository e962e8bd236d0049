//! The accept loop: axum's router served by hyper with what `axum::serve` does not offer, a
//! deadline on reading each request's head (a client that trickles headers, or holds an idle
//! keep-alive connection, is cut off), and a cap on open connections (beyond it, accepting waits).
//!
//! Nothing is trusted before the head has been judged by the [`Gate`] (the operator token): a
//! request that does not carry it has its body dropped unread (and its connection closed when one
//! was on its way), so an unauthenticated peer holds no more than its head buffer. An
//! authenticated request's body is read whole within a deadline and a size cap before any layer or
//! handler runs, so a client that trickles its body holds no handler, lease or idempotency key.
//! Every connection counts as unauthenticated until a request on it carries the token; those are
//! capped below the connection cap, and per peer, so a flood of them leaves room for operators.
//! The one exception to "no token, no body" is a route whose body authenticates it (the signed
//! git webhook, when configured): its body is read without the token, under a shorter deadline
//! and with only a few such reads at once, and its connection still counts as unauthenticated.
//! On shutdown, requests in flight finish (for up to a bound); idle connections close.

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, HttpBody as _, to_bytes};
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::serve::Listener;
use hyper::body::Incoming;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;
use crate::listen::Bound;
use crate::peers::{PeerLimit, PeerSlot};

/// The largest request body the API reads: its bodies are small JSON documents. The default of
/// [`Limits::max_body`], so the accept loop refuses a larger one unread; the idempotency layer and
/// the MCP endpoint, which read bodies again, hold them to the same bound. It lives here, with
/// the loop that reads first, so those layers look down to it rather than the loop up to them.
pub const MAX_BODY: usize = 1 << 20;

/// Judges a request by its head alone: whether it carries the credentials that earn it a body
/// read and a place beyond the unauthenticated limits.
pub trait Gate: Send + Sync + 'static {
    fn admits(&self, headers: &HeaderMap) -> bool;

    /// Whether a request to `path` with `method` that [`Gate::admits`] refused has its body read
    /// anyway, and under which bounds: its handler authenticates the body itself (a signed
    /// webhook), or the body is the credential (the console's login form).
    fn reads_unadmitted_body(&self, _method: &Method, _path: &str) -> Option<Unadmitted> {
        None
    }
}

/// Which kind of body is read without the token; each kind has its own slots and bounds, so one
/// cannot crowd the other out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unadmitted {
    /// A signed webhook call: up to `max_body`, within `unadmitted_body_read_timeout`.
    Signed,
    /// The console's login form: a few fields, small and quick.
    Login,
}

/// What one server allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From the connection's start (or the end of the previous response) to the end of the next
    /// request's head.
    pub header_read_timeout: Duration,
    /// From the end of an authenticated request's head to the end of its body.
    pub body_read_timeout: Duration,
    /// Request bodies are small JSON documents; a larger one is refused unread.
    pub max_body: usize,
    /// The largest request head, so also all an unauthenticated connection can make the server
    /// buffer (hyper allows no less than 8 KiB).
    pub max_head: usize,
    pub max_connections: usize,
    /// Connections on which no request has carried the token yet (every connection starts so).
    /// Below `max_connections`, so authenticated connections always find room; beyond it, a new
    /// connection is closed at once.
    pub max_unauthenticated: usize,
    /// Of those, how many one peer (an IPv4 address, an IPv6 /64) may hold; beyond it, its new
    /// connections are closed at once. Unix socket peers are not counted apart (the socket is
    /// private to its owner).
    pub max_unauthenticated_per_peer: usize,
    /// How long shutdown waits for requests in flight.
    pub drain: Duration,
    /// Bodies read without the token (see [`Gate::reads_unadmitted_body`]) at once, per
    /// listener; beyond it, such a request is answered `503 busy` unread. With `max_body` it
    /// bounds what unauthenticated peers can make the server buffer.
    pub max_unadmitted_bodies: usize,
    /// From the end of such a request's head to the end of its body.
    pub unadmitted_body_read_timeout: Duration,
    /// Login forms read at once, per listener (beyond it: `503 busy`, unread).
    pub max_login_bodies: usize,
    /// A login form's largest body and how long it may take to arrive.
    pub max_login_body: usize,
    pub login_body_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            // A whole 1 MiB body at about 35 KB/s.
            body_read_timeout: Duration::from_secs(30),
            max_body: MAX_BODY,
            max_head: 16 * 1024,
            max_connections: 1024,
            max_unauthenticated: 768,
            max_unauthenticated_per_peer: 32,
            drain: Duration::from_secs(5),
            max_unadmitted_bodies: 4,
            unadmitted_body_read_timeout: Duration::from_secs(10),
            max_login_bodies: 16,
            max_login_body: 4096,
            login_body_read_timeout: Duration::from_secs(2),
        }
    }
}

/// Serves `app` on `bound` until `shutdown` resolves, reading bodies only of requests `gate`
/// admits.
pub async fn serve_router(
    bound: Bound,
    app: Router,
    gate: Arc<dyn Gate>,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) {
    match bound {
        Bound::Tcp(listener) => accept_loop(listener, app, gate, limits, shutdown).await,
        Bound::Tls(listener) => accept_loop(listener, app, gate, limits, shutdown).await,
        Bound::Unix(listener) => accept_loop(listener, app, gate, limits, shutdown).await,
    }
}

/// The source address a listener reports for a connection, when it has one.
trait PeerAddress {
    fn ip(&self) -> Option<IpAddr>;
}

impl PeerAddress for std::net::SocketAddr {
    fn ip(&self) -> Option<IpAddr> {
        Some(std::net::SocketAddr::ip(self))
    }
}

impl PeerAddress for tokio::net::unix::SocketAddr {
    fn ip(&self) -> Option<IpAddr> {
        None
    }
}

async fn accept_loop<L>(
    mut listener: L,
    app: Router,
    gate: Arc<dyn Gate>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) where
    L: Listener,
    L::Addr: PeerAddress,
{
    let max_connections = limits.max_connections.max(1);
    let open = Arc::new(Semaphore::new(max_connections));
    let unauthenticated = Unauthenticated {
        total: Arc::new(Semaphore::new(limits.max_unauthenticated.clamp(1, max_connections))),
        per_peer: PeerLimit::new(limits.max_unauthenticated_per_peer),
    };
    let unadmitted_bodies = UnadmittedSlots {
        signed: Arc::new(Semaphore::new(limits.max_unadmitted_bodies)),
        login: Arc::new(Semaphore::new(limits.max_login_bodies)),
    };
    let router = TowerToHyperService::new(app);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = open.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let Some(slot) = unauthenticated.try_take(peer.ip()) else {
            // Dropping the stream closes it: the peer learns nothing and holds nothing.
            tracing::debug!(peer = ?peer.ip(), "API connection closed: too many unauthenticated connections");
            continue;
        };
        let connection = Arc::new(Connection { unauthenticated: Mutex::new(Some(slot)) });
        let (router, gate, unadmitted_bodies) = (router.clone(), gate.clone(), unadmitted_bodies.clone());
        let service = hyper::service::service_fn(move |request| {
            let server = Server {
                router: router.clone(),
                gate: gate.clone(),
                unadmitted_bodies: unadmitted_bodies.clone(),
                limits,
            };
            handle(request, server, connection.clone())
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_buf_size(limits.max_head.max(8192))
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "API connection ended with an error");
            }
            drop(permit);
        });
    }
    if tokio::time::timeout(limits.drain, graceful.shutdown()).await.is_err() {
        tracing::warn!(drain = ?limits.drain, "API requests still in flight at shutdown; abandoned");
    }
}

// === unauthenticated connections ===

/// The slots of connections no request has authenticated yet: all of them, and per peer.
struct Unauthenticated {
    total: Arc<Semaphore>,
    per_peer: PeerLimit,
}

/// What one unauthenticated connection holds until a request on it carries the token.
struct UnauthenticatedSlot {
    _total: OwnedSemaphorePermit,
    _peer: Option<PeerSlot>,
}

impl Unauthenticated {
    fn try_take(&self, peer: Option<IpAddr>) -> Option<UnauthenticatedSlot> {
        let peer = match peer {
            Some(address) => Some(self.per_peer.try_take(address)?),
            None => None,
        };
        let total = self.total.clone().try_acquire_owned().ok()?;
        Some(UnauthenticatedSlot { _total: total, _peer: peer })
    }
}

/// One connection's state across its requests.
struct Connection {
    unauthenticated: Mutex<Option<UnauthenticatedSlot>>,
}

impl Connection {
    /// A request on it carried the token: it no longer counts as unauthenticated.
    fn authenticated(&self) {
        self.unauthenticated.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

// === one request ===

/// What every request on a listener shares.
/// The slots of each kind of body read without the token.
#[derive(Clone)]
struct UnadmittedSlots {
    signed: Arc<Semaphore>,
    login: Arc<Semaphore>,
}

struct Server {
    router: TowerToHyperService<Router>,
    gate: Arc<dyn Gate>,
    unadmitted_bodies: UnadmittedSlots,
    limits: Limits,
}

/// Judges the head, then reads the body whole (authenticated, or a route whose body
/// authenticates it) or drops it unread (anything else: the router answers `401` on routes that
/// need the token, and the public ones take no body).
async fn handle(
    request: Request<Incoming>,
    server: Server,
    connection: Arc<Connection>,
) -> Result<Response, Infallible> {
    let Server { router, gate, unadmitted_bodies, limits } = server;
    let (parts, body) = request.into_parts();
    if gate.admits(&parts.headers) {
        connection.authenticated();
        return read_then_route(parts, body, router, limits.body_read_timeout, limits.max_body).await;
    }
    if let Some(kind) = gate.reads_unadmitted_body(&parts.method, parts.uri.path()) {
        let (slots, deadline, max_body, busy) = match kind {
            Unadmitted::Signed => (
                &unadmitted_bodies.signed,
                limits.unadmitted_body_read_timeout,
                limits.max_body,
                "too many webhook calls at once; retry later",
            ),
            Unadmitted::Login => (
                &unadmitted_bodies.login,
                limits.login_body_read_timeout,
                limits.max_login_body,
                "too many logins at once; retry later",
            ),
        };
        // Held until the handler has answered: the body is buffered that long.
        let Ok(_slot) = slots.clone().try_acquire_owned() else {
            let mut response = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy", busy).into_response();
            close(&mut response);
            return Ok(response);
        };
        return read_then_route(parts, body, router, deadline, max_body).await;
    }
    let unread = !body.is_end_stream();
    drop(body);
    let mut response = router.call(Request::from_parts(parts, Body::empty())).await?;
    if unread {
        // The body may still be on its way: the connection cannot serve another request.
        close(&mut response);
    }
    Ok(response)
}

/// Reads the body whole within `deadline` and `max_body` bytes, then hands the request to the
/// router; a late or oversized body is answered at once and its connection closed.
async fn read_then_route(
    parts: axum::http::request::Parts,
    body: Incoming,
    router: TowerToHyperService<Router>,
    deadline: Duration,
    max_body: usize,
) -> Result<Response, Infallible> {
    match tokio::time::timeout(deadline, to_bytes(Body::new(body), max_body)).await {
        Ok(Ok(body)) => router.call(Request::from_parts(parts, Body::from(body))).await,
        Ok(Err(_)) => {
            let mut response = ApiError::body_too_large(max_body).into_response();
            close(&mut response);
            Ok(response)
        }
        Err(_) => {
            let mut response = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!("the request body did not arrive whole within {} ms", deadline.as_millis()),
            )
            .into_response();
            close(&mut response);
            Ok(response)
        }
    }
}

fn close(response: &mut Response) {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A gate for the tests of what every request meets, credentials or not.
    struct Everyone;

    impl Gate for Everyone {
        fn admits(&self, _: &HeaderMap) -> bool {
            true
        }
    }

    async fn server(limits: Limits) -> (String, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let app = Router::new().route(
            "/",
            axum::routing::get(|| async { "hello" })
                .post(|body: axum::body::Bytes| async move { format!("{} bytes", body.len()) }),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve_router(Bound::Tcp(listener), app, Arc::new(Everyone), limits, async move {
            let _ = stopped.await;
        }));
        (address, stop, task)
    }

    #[tokio::test]
    async fn a_client_that_trickles_its_headers_is_cut_off() {
        let limits = Limits { header_read_timeout: Duration::from_millis(300), ..Limits::default() };
        let (address, stop, task) = server(limits).await;
        let mut slow = tokio::net::TcpStream::connect(&address).await.expect("connect");
        slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.expect("write");
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "the server closed the connection within the deadline");
        assert!(!String::from_utf8_lossy(&answer).contains("hello"), "no request was served");

        let mut quick = tokio::net::TcpStream::connect(&address).await.expect("connect");
        quick.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.expect("write");
        let mut answer = String::new();
        quick.read_to_string(&mut answer).await.expect("read");
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"), "{answer}");
        let _ = stop.send(());
        task.await.expect("stops");
    }

    #[tokio::test]
    async fn a_client_that_trickles_its_body_is_answered_408_and_cut_off() {
        let limits = Limits { body_read_timeout: Duration::from_millis(300), max_body: 64, ..Limits::default() };
        let (address, stop, task) = server(limits).await;
        let mut slow = tokio::net::TcpStream::connect(&address).await.expect("connect");
        slow.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc").await.expect("write");
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "the server closed the connection within the deadline");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408") && answer.contains("body_timeout"), "{answer}");
        assert!(!answer.contains("bytes\""), "the handler never ran: {answer}");

        let mut large = tokio::net::TcpStream::connect(&address).await.expect("connect");
        let head = b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 65\r\n\r\n";
        large.write_all(&[&head[..], &[b'x'; 65]].concat()).await.expect("write");
        let mut answer = String::new();
        large.read_to_string(&mut answer).await.expect("read");
        assert!(answer.starts_with("HTTP/1.1 413") && answer.contains("at most 64 bytes"), "{answer}");

        let mut whole = tokio::net::TcpStream::connect(&address).await.expect("connect");
        let head = b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 10\r\n\r\nabc";
        whole.write_all(head).await.expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        whole.write_all(b"defghij").await.expect("the rest, within the deadline");
        let mut answer = String::new();
        whole.read_to_string(&mut answer).await.expect("read");
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("10 bytes"), "{answer}");
        let _ = stop.send(());
        task.await.expect("stops");
    }

    #[tokio::test]
    async fn beyond_the_connection_cap_accepting_waits() {
        let limits = Limits { max_connections: 1, ..Limits::default() };
        let (address, stop, task) = server(limits).await;
        let mut first = tokio::net::TcpStream::connect(&address).await.expect("connect");
        first.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
        let mut buffer = [0u8; 256];
        let n = first.read(&mut buffer).await.expect("answer");
        assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 200"));
        // The first connection is kept alive: a second waits for it.
        let mut second = tokio::net::TcpStream::connect(&address).await.expect("connect (the kernel's backlog)");
        second.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.expect("write");
        let waiting = tokio::time::timeout(Duration::from_millis(300), second.read(&mut buffer)).await;
        assert!(waiting.is_err(), "not served while the first holds the only slot");
        drop(first);
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(5), second.read_to_string(&mut answer))
            .await
            .expect("served")
            .expect("read");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let _ = stop.send(());
        task.await.expect("stops");
    }
}
