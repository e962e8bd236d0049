//! Serving a broker on its socket: the gateway's supervised accept loop (a crashed loop is
//! restarted on the same socket), a bound on open connections, and HTTP/1.1 with keep-alive and
//! a header-read deadline and a bounded head (64 KiB, 64 fields) on each accepted Unix (or, for tests, TCP) connection. On stop, every
//! connection finishes its request in flight, within a grace period.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use roundtable_gateway::server::{Connection, accept_each, supervise};
use roundtable_gateway::{Dial, Listener, Resolve};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::broker::Broker;

/// The most a connection buffers of a request head (and of the body as it streams): with
/// [`MAX_HEADERS`], a connection's memory is bounded whatever the agent sends, so the
/// connection bound bounds the broker's.
pub(crate) const MAX_BUF_BYTES: usize = 64 * 1024;
/// The most header fields one request head may carry.
pub(crate) const MAX_HEADERS: usize = 64;

/// How long a stopping broker waits for requests in flight.
const STOP_GRACE: Duration = Duration::from_secs(10);

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
        connections.spawn(async move {
            let _permit = permit;
            match connection {
                Connection::Unix(stream) => serve_connection(broker, stream, cancel).await,
                Connection::Tcp(stream) => serve_connection(broker, stream, cancel).await,
            }
        });
    })
    .await;
}

async fn serve_connection<R, D, S>(broker: Arc<Broker<R, D>>, stream: S, cancel: CancellationToken)
where
    R: Resolve,
    D: Dial,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let header_timeout = broker.limits().header_timeout;
    let service = service_fn(move |request| {
        let broker = broker.clone();
        async move { Ok::<_, Infallible>(broker.handle(request).await) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true)
        .max_buf_size(MAX_BUF_BYTES)
        .max_headers(MAX_HEADERS)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = cancel.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(STOP_GRACE, connection).await;
        }
    }
}
