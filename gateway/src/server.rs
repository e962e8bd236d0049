//! Serving a gateway on a listening socket: the accept loop with the tunnel limit, a supervisor
//! that restarts a crashed accept loop on the same socket (connections wait in the backlog
//! meanwhile, so tunnels fail closed), and a graceful stop that closes every tunnel.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::dial::Dial;
use crate::resolve::Resolve;
use crate::tunnel::Gateway;

/// The send buffer asked for on a client's Unix socket (and by the sandbox's relay on its own):
/// as much as one splice moves.
const UNIX_SEND_BUFFER: usize = 1024 * 1024;
/// Gives a Unix stream socket a send buffer as large as one splice moves. A Unix socket's send
/// buffer does not grow under load as TCP's does: at the default (about 200 KiB) bulk bytes are
/// handed over in small steps, each a wake-up on both sides. The kernel caps it at
/// `net.core.wmem_max`, and it is only taken while bytes wait for the peer; a refusal leaves the
/// default, which still works.
pub(crate) fn enlarge_send_buffer(stream: &UnixStream) {
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(stream, UNIX_SEND_BUFFER);
}

/// Pending connections a TCP listener queues (Unix sockets already get the kernel's maximum).
const LISTEN_BACKLOG: u32 = 4096;

/// Where a gateway listens or a proxy connects: `unix:PATH`, `IP:PORT` or `tcp:IP:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl FromStr for Endpoint {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("unix: needs a path".to_owned());
            }
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        let address = text.strip_prefix("tcp:").unwrap_or(text);
        address
            .parse()
            .map(Endpoint::Tcp)
            .map_err(|_| format!("{text:?} is neither unix:PATH, IP:PORT nor tcp:IP:PORT"))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
            Endpoint::Tcp(address) => write!(f, "{address}"),
        }
    }
}

/// A bound listening socket.
#[derive(Debug)]
pub enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// An accepted connection.
pub enum Connection {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Listener {
    /// Binds `endpoint`. A unix socket path must not exist yet: a stale socket is the operator's
    /// to remove, never silently replaced.
    pub async fn bind(endpoint: &Endpoint) -> io::Result<Self> {
        match endpoint {
            Endpoint::Unix(path) => UnixListener::bind(path).map(Listener::Unix),
            Endpoint::Tcp(address) => {
                let socket = if address.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
                socket.set_reuseaddr(true)?;
                socket.bind(*address)?;
                // tokio's default queue of 128 overflows when many clients connect at once, and
                // each dropped SYN costs its client a second; the kernel caps this at somaxconn.
                socket.listen(LISTEN_BACKLOG).map(Listener::Tcp)
            }
        }
    }

    pub async fn accept(&self) -> io::Result<Connection> {
        match self {
            Listener::Unix(listener) => listener.accept().await.map(|(stream, _)| {
                enlarge_send_buffer(&stream);
                Connection::Unix(stream)
            }),
            Listener::Tcp(listener) => listener.accept().await.map(|(stream, _)| {
                // Small writes (CONNECT replies, TLS handshakes) must not wait for Nagle.
                let _ = stream.set_nodelay(true);
                Connection::Tcp(stream)
            }),
        }
    }

    /// The bound address, for logs (a TCP port 0 becomes the real port).
    pub fn endpoint(&self) -> io::Result<Endpoint> {
        match self {
            Listener::Unix(listener) => listener
                .local_addr()?
                .as_pathname()
                .map(|path| Endpoint::Unix(path.to_path_buf()))
                .ok_or_else(|| io::Error::other("unnamed unix socket")),
            Listener::Tcp(listener) => listener.local_addr().map(Endpoint::Tcp),
        }
    }
}

/// Serves `gateway` on `listener` until `cancel`, restarting a crashed accept loop, then closes
/// every tunnel and waits for their close lines.
pub async fn serve<R: Resolve, D: Dial>(
    gateway: Arc<Gateway<R, D>>,
    listener: Arc<Listener>,
    cancel: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(gateway.settings().limits.max_tunnels));
    let tunnels = TaskTracker::new();
    let counters = gateway.counters();
    supervise(
        &cancel,
        || counters.restarted(),
        || accept_loop(gateway.clone(), listener.clone(), slots.clone(), tunnels.clone(), cancel.clone()),
    )
    .await;
    tunnels.close();
    tunnels.wait().await;
}

/// Runs the loop `make` builds until it returns; when it panics, counts a restart and runs a new
/// one after a short pause.
pub async fn supervise<F, Fut>(cancel: &CancellationToken, on_restart: impl Fn(), make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        // The loop's spans stay under the span it is supervised in (a session's).
        match tokio::spawn(tracing::Instrument::in_current_span(make())).await {
            Ok(()) => return,
            Err(error) if error.is_panic() && !cancel.is_cancelled() => {
                on_restart();
                tracing::error!("the gateway's accept loop crashed; restarting it on the same socket");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(_) => return,
        }
    }
}

/// Accepts on `listener` until `cancel`, handing each connection to `each`. An accept error (out
/// of file descriptors, or transient) pauses the loop rather than letting it spin. The one accept
/// loop of every per-session server: the gateway's tunnels and the credential broker's requests.
pub async fn accept_each(listener: &Listener, cancel: &CancellationToken, mut each: impl FnMut(Connection)) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = cancel.cancelled() => return,
        };
        match accepted {
            Ok(connection) => each(connection),
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn accept_loop<R: Resolve, D: Dial>(
    gateway: Arc<Gateway<R, D>>,
    listener: Arc<Listener>,
    slots: Arc<Semaphore>,
    tunnels: TaskTracker,
    cancel: CancellationToken,
) {
    accept_each(&listener, &cancel, |connection| {
        let permit = slots.clone().try_acquire_owned();
        let gateway = gateway.clone();
        let cancel = cancel.clone();
        // Each tunnel's span is a child of the one the gateway serves under (a session's).
        tunnels.spawn(tracing::Instrument::in_current_span(async move {
            match (permit, connection) {
                (Ok(_permit), Connection::Unix(stream)) => gateway.handle(stream, &cancel).await,
                (Ok(_permit), Connection::Tcp(stream)) => gateway.handle(stream, &cancel).await,
                (Err(_), Connection::Unix(stream)) => gateway.refuse_over_limit(stream).await,
                (Err(_), Connection::Tcp(stream)) => gateway.refuse_over_limit(stream).await,
            }
        }));
    })
    .await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_client_on_the_unix_socket_gets_a_larger_send_buffer_than_the_default() {
        use rustix::net::sockopt::socket_send_buffer_size;
        let dir = tempfile::tempdir().expect("tempdir");
        let listener = Listener::bind(&Endpoint::Unix(dir.path().join("gateway.sock"))).await.expect("bind");
        let Endpoint::Unix(path) = listener.endpoint().expect("endpoint") else { panic!("not a unix endpoint") };
        let (client, accepted) = tokio::join!(UnixStream::connect(&path), listener.accept());
        let _client = client.expect("connect");
        let Connection::Unix(accepted) = accepted.expect("accept") else { panic!("not a unix connection") };
        let (plain, _) = UnixStream::pair().expect("pair");
        let default = socket_send_buffer_size(&plain).expect("default size");
        let raised = socket_send_buffer_size(&accepted).expect("size");
        assert!(raised > default, "{raised} bytes, the default is {default}");
    }

    #[test]
    fn endpoints_parse_in_every_documented_form() {
        assert_eq!("unix:/run/x.sock".parse(), Ok(Endpoint::Unix("/run/x.sock".into())));
        assert_eq!("127.0.0.1:3128".parse(), Ok(Endpoint::Tcp("127.0.0.1:3128".parse().expect("addr"))));
        assert_eq!("tcp:[::1]:8080".parse(), Ok(Endpoint::Tcp("[::1]:8080".parse().expect("addr"))));
        for bad in ["unix:", "localhost:80", "127.0.0.1", "http://x"] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_crashed_loop_is_restarted_and_a_clean_end_is_final() {
        let runs = Arc::new(AtomicUsize::new(0));
        let restarts = AtomicUsize::new(0);
        let cancel = CancellationToken::new();
        let make = || {
            let runs = runs.clone();
            async move {
                // The first two runs crash; the third ends cleanly.
                assert!(runs.fetch_add(1, Ordering::SeqCst) >= 2, "injected crash");
            }
        };
        supervise(&cancel, || _ = restarts.fetch_add(1, Ordering::SeqCst), make).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        assert_eq!(restarts.load(Ordering::SeqCst), 2);
    }
}
