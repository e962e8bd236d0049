//! Dialing a pinned address. A trait so tests can record every dial and route "public" fixture
//! addresses to loopback servers; production dials directly.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use tokio::net::TcpStream;

pub trait Dial: Send + Sync + 'static {
    fn dial(&self, target: SocketAddr) -> impl Future<Output = io::Result<TcpStream>> + Send;
}

/// Connects to exactly the address given, never resolving anything.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectDialer;

impl Dial for DirectDialer {
    async fn dial(&self, target: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream::connect(target).await?;
        // Tunnels carry interactive TLS; small writes must not wait for Nagle.
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

impl<D: Dial> Dial for std::sync::Arc<D> {
    fn dial(&self, target: SocketAddr) -> impl Future<Output = io::Result<TcpStream>> + Send {
        self.as_ref().dial(target)
    }
}
