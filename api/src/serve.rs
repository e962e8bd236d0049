//! The accept loop: axum's router served by hyper with what `axum::serve` does not offer, a
//! deadline on reading each request's head (a client that trickles headers, or holds an idle
//! keep-alive connection, is cut off), a deadline and a size cap on reading its body (read whole
//! before any layer or handler runs, so a client that trickles its body holds no handler, lease
//! or idempotency key open), and a cap on open connections (beyond it, accepting waits). On
//! shutdown, requests in flight finish (for up to a bound); idle connections close.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use axum::serve::Listener;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::listen::Bound;

/// What one server allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From the connection's start (or the end of the previous response) to the end of the next
    /// request's head.
    pub header_read_timeout: Duration,
    /// From the end of a request's head to the end of its body.
    pub body_read_timeout: Duration,
    /// Request bodies are small JSON documents; a larger one is refused unread.
    pub max_body: usize,
    pub max_connections: usize,
    /// How long shutdown waits for requests in flight.
    pub drain: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            // A whole 1 MiB body at about 35 KB/s.
            body_read_timeout: Duration::from_secs(30),
            max_body: crate::idempotency::MAX_BODY,
            max_connections: 1024,
            drain: Duration::from_secs(5),
        }
    }
}

/// Serves `app` on `bound` until `shutdown` resolves.
pub async fn serve_router(bound: Bound, app: Router, limits: Limits, shutdown: impl Future<Output = ()> + Send) {
    let app = app.layer(axum::middleware::from_fn(move |request, next| read_body_whole(request, next, limits)));
    match bound {
        Bound::Tcp(listener) => accept_loop(listener, app, limits, shutdown).await,
        Bound::Tls(listener) => accept_loop(listener, app, limits, shutdown).await,
        Bound::Unix(listener) => accept_loop(listener, app, limits, shutdown).await,
    }
}

async fn accept_loop<L: Listener>(mut listener: L, app: Router, limits: Limits, shutdown: impl Future<Output = ()>) {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
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
        let (stream, _peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
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

/// Reads the request's body whole, within the deadline and the cap, then hands the request on
/// with its body in memory. Answers `408` (and closes the connection) when the body is late,
/// `413` when it is too large or cannot be read.
async fn read_body_whole(request: Request, next: Next, limits: Limits) -> Response {
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(limits.body_read_timeout, to_bytes(body, limits.max_body)).await {
        Ok(Ok(body)) => next.run(Request::from_parts(parts, Body::from(body))).await,
        Ok(Err(_)) => ApiError::body_too_large(limits.max_body).into_response(),
        Err(_) => {
            let mut response = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!("the request body did not arrive whole within {} ms", limits.body_read_timeout.as_millis()),
            )
            .into_response();
            // The rest of the body may still be on its way: the connection cannot serve another.
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    async fn server(limits: Limits) -> (String, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let app = Router::new().route(
            "/",
            axum::routing::get(|| async { "hello" })
                .post(|body: axum::body::Bytes| async move { format!("{} bytes", body.len()) }),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve_router(Bound::Tcp(listener), app, limits, async move {
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
