//! Serving a broker on its socket: the gateway's supervised accept loop (a crashed loop is
//! restarted on the same socket), a bound on open connections, and HTTP/1.1 with keep-alive and
//! a header-read deadline and a bounded head (64 KiB, 64 fields) on each accepted Unix (or, for
//! tests, TCP) connection. A `CONNECT` to a provider host turns its connection into a tunnel the
//! broker terminates with the session CA (`intercept.rs`). On stop, every connection finishes
//! its request in flight, within a grace period.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use roundtable_gateway::server::{Connection, accept_each, supervise};
use roundtable_gateway::{Dial, Listener, Resolve};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::body::Outgoing;
use crate::broker::Broker;

/// The most a connection buffers of a request head (and of the body as it streams): with
/// [`MAX_HEADERS`], a connection's memory is bounded whatever the agent sends, so the
/// connection bound bounds the broker's.
pub(crate) const MAX_BUF_BYTES: usize = 64 * 1024;
/// The most header fields one request head may carry.
pub(crate) const MAX_HEADERS: usize = 64;

/// How long a stopping broker waits for requests in flight.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Drives a hyper connection to its end, or on `cancel` lets its request in flight finish
/// (within [`STOP_GRACE`]); true when it ended by itself. A macro because hyper's plain and
/// upgradeable connections share the method but no trait.
macro_rules! serve_until_cancelled {
    ($connection:ident, $cancel:ident) => {{
        tokio::pin!($connection);
        tokio::select! {
            _ = $connection.as_mut() => true,
            () = $cancel.cancelled() => {
                $connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(STOP_GRACE, $connection).await;
                false
            }
        }
    }};
}

/// Serves `broker` on `listener` until `cancel`, then lets open requests finish (bounded).
pub async fn serve<R: Resolve, D: Dial>(broker: Arc<Broker<R, D>>, listener: Arc<Listener>, cancel: CancellationToken) {
    let slots = Arc::new(Semaphore::new(broker.limits().max_connections));
    let connections = TaskTracker::new();
    supervise(
        &cancel,
        || broker.restarted(),
        || accept_loop(broker.clone(), listener.clone(), slots.clone(), connections.clone(), cancel.clone()),
    )
    .await;
    connections.close();
    connections.wait().await;
}

async fn accept_loop<R: Resolve, D: Dial>(
    broker: Arc<Broker<R, D>>,
    listener: Arc<Listener>,
    slots: Arc<Semaphore>,
    connections: TaskTracker,
    cancel: CancellationToken,
) {
    accept_each(&listener, &cancel, |connection| {
        // Over the bound, the connection is closed unanswered: the agent sees a reset.
        let Ok(permit) = slots.clone().try_acquire_owned() else { return };
        let (broker, cancel) = (broker.clone(), cancel.clone());
        // Each request's span is a child of the one the broker serves under (a session's).
        connections.spawn(tracing::Instrument::in_current_span(async move {
            let _permit = permit;
            match connection {
                Connection::Unix(stream) => serve_connection(broker, stream, cancel).await,
                Connection::Tcp(stream) => serve_connection(broker, stream, cancel).await,
            }
        }));
    })
    .await;
}

async fn serve_connection<R, D, S>(broker: Arc<Broker<R, D>>, stream: S, cancel: CancellationToken)
where
    R: Resolve,
    D: Dial,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // A `CONNECT` the broker accepts leaves its tunnel here; the connection is then carried on
    // inside the tunnel, in this same task, holding the same connection slot.
    let tunnel: Arc<Mutex<Option<Tunnel>>> = Arc::default();
    let service = {
        let (broker, tunnel) = (broker.clone(), tunnel.clone());
        service_fn(move |request: Request<Incoming>| {
            let (broker, tunnel) = (broker.clone(), tunnel.clone());
            async move {
                if request.method() != Method::CONNECT {
                    return Ok::<_, Infallible>(broker.handle(request).await);
                }
                Ok(match broker.tunnel(&request) {
                    Ok((host, acceptor)) => {
                        let upgrade = hyper::upgrade::on(request);
                        if let Ok(mut slot) = tunnel.lock() {
                            *slot = Some(Tunnel { host, acceptor, upgrade });
                        }
                        Response::new(Outgoing::empty())
                    }
                    Err(refused) => *refused,
                })
            }
        })
    };
    let connection =
        builder(broker.limits().header_timeout).serve_connection(TokioIo::new(stream), service).with_upgrades();
    if !serve_until_cancelled!(connection, cancel) {
        return;
    }
    let taken = tunnel.lock().ok().and_then(|mut slot| slot.take());
    if let Some(tunnel) = taken {
        serve_tunnel(broker, tunnel, cancel).await;
    }
}

/// HTTP/1.1 with keep-alive, a header-read deadline and a bounded head.
fn builder(header_timeout: Duration) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true)
        .max_buf_size(MAX_BUF_BYTES)
        .max_headers(MAX_HEADERS);
    builder
}

/// An accepted `CONNECT`: the provider host it named, the TLS server for it, and the stream
/// once hyper hands it over.
struct Tunnel {
    host: String,
    acceptor: TlsAcceptor,
    upgrade: hyper::upgrade::OnUpgrade,
}

/// Terminates TLS inside an accepted tunnel with the session CA's leaf for its host, then serves
/// HTTP/1.1 in it, each request judged as if it had come to `/<host>/…`. A client that names
/// another server in its SNI is closed: the host is the tunnel's.
async fn serve_tunnel<R: Resolve, D: Dial>(broker: Arc<Broker<R, D>>, tunnel: Tunnel, cancel: CancellationToken) {
    let Tunnel { host, acceptor, upgrade } = tunnel;
    let timeout = broker.limits().header_timeout;
    let accepted = tokio::time::timeout(timeout, async {
        let upgraded = upgrade.await.ok()?;
        acceptor.accept(TokioIo::new(upgraded)).await.ok()
    });
    let stream = tokio::select! {
        accepted = accepted => match accepted { Ok(Some(stream)) => stream, _ => return },
        () = cancel.cancelled() => return,
    };
    if stream.get_ref().1.server_name().is_some_and(|named| !named.eq_ignore_ascii_case(&host)) {
        return;
    }
    let service = service_fn(move |request| {
        let (broker, host) = (broker.clone(), host.clone());
        async move { Ok::<_, Infallible>(broker.handle_intercepted(&host, request).await) }
    });
    let connection = builder(timeout).serve_connection(TokioIo::new(stream), service);
    serve_until_cancelled!(connection, cancel);
}
