//! The in-container side: `roundtable proxy` listens on loopback inside the network-less
//! container and carries each connection, byte for byte, to the gateway's socket. It decides
//! nothing; the gateway on the host enforces everything. Bytes move as the gateway's do: in the
//! kernel (`zero_copy.rs`) unless `ROUNDTABLE_GATEWAY_SPLICE` says copy, no pipes can be had, or
//! the sandbox's seccomp filter refuses `splice(2)` (that direction then copies).

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::server::{Connection, Endpoint, Listener, enlarge_send_buffer};
use crate::settings::SplicePath;
use crate::zero_copy::{self, Pipes, Socket, Tally};

/// Forwards every connection accepted on `listener` to `upstream` until `cancel`.
pub async fn forward(listener: Listener, upstream: Endpoint, cancel: CancellationToken) {
    let upstream = Arc::new(upstream);
    let connections = TaskTracker::new();
    crate::server::accept_each(&listener, &cancel, |connection| {
        let upstream = upstream.clone();
        connections.spawn(async move {
            let result = match connection {
                Connection::Tcp(stream) => carry(stream, &upstream).await,
                Connection::Unix(stream) => carry(stream, &upstream).await,
            };
            if let Err(error) = result {
                tracing::warn!(%error, upstream = %upstream, "proxy connection ended with an error");
            }
        });
    })
    .await;
    connections.close();
    connections.wait().await;
}

async fn carry<S>(mut client: S, upstream: &Endpoint) -> io::Result<()>
where
    S: Socket + AsyncRead + AsyncWrite + Unpin,
{
    match upstream {
        Endpoint::Unix(path) => {
            let mut gateway = UnixStream::connect(path).await?;
            // Uploads reach the gateway in splice-sized steps, as downloads reach this relay.
            enlarge_send_buffer(&gateway);
            relay(&mut client, &mut gateway).await
        }
        Endpoint::Tcp(address) => {
            let mut gateway = TcpStream::connect(address).await?;
            gateway.set_nodelay(true)?;
            relay(&mut client, &mut gateway).await
        }
    }
}

/// Carries both ways in the kernel when it can, by copying otherwise.
async fn relay<A, B>(client: &mut A, gateway: &mut B) -> io::Result<()>
where
    A: Socket + AsyncRead + AsyncWrite + Unpin,
    B: Socket + AsyncRead + AsyncWrite + Unpin,
{
    match Pipes::when(SplicePath::from_env()) {
        Some(pipes) => zero_copy::splice(client, gateway, pipes, &Uncounted).await,
        None => crate::splice::splice(client, gateway).await,
    }
}

// === the ready line ===

/// How `roundtable proxy`'s ready line begins. The runtime waits for it before it starts the
/// agent, and the egress benchmark reads from it where the relay listens: one owner for both.
const READY: &str = "roundtable proxy: listening, forwarding ";

/// The line `roundtable proxy` prints once every listener is bound: each route as `LISTEN to
/// UPSTREAM`, in the order of the flags.
pub fn ready_line(routes: &[(Endpoint, Endpoint)]) -> String {
    let said: Vec<String> = routes.iter().map(|(listen, upstream)| format!("{listen} to {upstream}")).collect();
    format!("{READY}{}", said.join(", "))
}

/// Where the relay listens, route by route, read back from its ready line; `None` for any other
/// line.
pub fn ready_listeners(line: &str) -> Option<Vec<Endpoint>> {
    line.strip_prefix(READY)?
        .split(", ")
        .map(|route| route.split_once(" to ").and_then(|(listen, _)| listen.parse().ok()))
        .collect()
}

/// The relay counts nothing: the gateway counts every tunnel's bytes.
struct Uncounted;

impl Tally for Uncounted {
    fn read(&self, _: usize) {}

    fn written(&self, _: usize) {}
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::UnixListener;

    use super::*;

    #[test]
    fn the_ready_line_names_each_listener_and_reads_back() {
        let routes = [
            ("127.0.0.1:3128".parse().expect("tcp"), "unix:/run/roundtable/egress.sock".parse().expect("unix")),
            ("127.0.0.1:3129".parse().expect("tcp"), "unix:/run/roundtable/broker.sock".parse().expect("unix")),
        ];
        let line = ready_line(&routes);
        // The runtime waits for this word (`docker/src/session/proxy.rs`).
        assert!(line.contains("listening"), "{line}");
        let listeners: Vec<Endpoint> = routes.iter().map(|(listen, _)| listen.clone()).collect();
        assert_eq!(ready_listeners(&line), Some(listeners));
        assert_eq!(ready_listeners("roundtable gateway: listening on 127.0.0.1:1"), None);
        assert_eq!(ready_listeners("roundtable proxy: listening, forwarding nowhere to unix:/x"), None);
    }

    #[tokio::test]
    async fn bytes_pass_whole_both_ways_and_an_end_is_passed_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("gateway.sock");
        // A stand-in for the gateway: echoes everything back, then closes after the client's end.
        let gateway = UnixListener::bind(&socket).expect("bind");
        tokio::spawn(async move {
            let (mut stream, _) = gateway.accept().await.expect("accept");
            let (mut read, mut write) = stream.split();
            tokio::io::copy(&mut read, &mut write).await.expect("echo");
            write.shutdown().await.expect("close");
        });
        let listener = Listener::bind(&"127.0.0.1:0".parse().expect("endpoint")).await.expect("listen");
        let Endpoint::Tcp(address) = listener.endpoint().expect("endpoint") else { panic!("not TCP") };
        let cancel = CancellationToken::new();
        let relay = tokio::spawn(forward(listener, Endpoint::Unix(socket), cancel.clone()));

        let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let (mut read, mut write) = TcpStream::connect(address).await.expect("connect").into_split();
        let send = async {
            write.write_all(&payload).await.expect("send");
            write.shutdown().await.expect("half-close");
        };
        let mut echoed = Vec::new();
        let ((), received) = tokio::join!(send, read.read_to_end(&mut echoed));
        received.expect("read to the gateway's end");
        assert!(echoed == payload, "{} bytes came back, {} were sent", echoed.len(), payload.len());

        cancel.cancel();
        relay.await.expect("the relay stops when cancelled");
    }
}
