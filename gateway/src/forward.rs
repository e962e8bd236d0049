//! The in-container side: `roundtable proxy` listens on loopback inside the network-less
//! container and carries each connection, byte for byte, to the gateway's socket. It decides
//! nothing; the gateway on the host enforces everything.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::server::{Connection, Endpoint, Listener};

/// Forwards every connection accepted on `listener` to `upstream` until `cancel`.
pub async fn forward(listener: Listener, upstream: Endpoint, cancel: CancellationToken) {
    let upstream = Arc::new(upstream);
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = cancel.cancelled() => break,
        };
        let Ok(connection) = accepted else {
            // Out of descriptors or a transient error: pause rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
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
    }
    connections.close();
    connections.wait().await;
}

async fn carry<S: AsyncRead + AsyncWrite + Unpin>(mut client: S, upstream: &Endpoint) -> io::Result<()> {
    match upstream {
        Endpoint::Unix(path) => {
            let gateway = UnixStream::connect(path).await?;
            crate::splice::splice(&mut client, gateway).await?;
        }
        Endpoint::Tcp(address) => {
            let gateway = TcpStream::connect(address).await?;
            gateway.set_nodelay(true)?;
            crate::splice::splice(&mut client, gateway).await?;
        }
    }
    Ok(())
}
