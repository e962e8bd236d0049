//! Where the API listens: the CLI's private Unix socket and, when the operator asks for one, a TCP
//! address or another `unix:PATH`; TCP optionally with TLS (rustls, from PEM files). TLS
//! handshakes run beside the accept loop, each with a short deadline and at most a few per peer at
//! once, so clients that never finish one (from one address or a few) cannot hold up the others.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::peers::PeerLimit;

/// A TLS 1.3 handshake takes one round trip (two for TLS 1.2, or a retried hello): a few seconds
/// leave room for a slow link and none for a client that sends nothing.
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(3);
/// Handshakes in progress at once; beyond it, accepting waits.
const MAX_HANDSHAKES: usize = 256;
/// Handshakes in progress from one peer (an IPv4 address, an IPv6 /64); beyond it, that peer's new
/// connections are closed at once, so a flood from one peer leaves the rest to others.
const MAX_HANDSHAKES_PER_PEER: usize = 16;

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("unix: needs a path, like unix:/run/roundtable/api.sock".into());
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        text.parse::<SocketAddr>()
            .map(Listen::Tcp)
            .map_err(|_| format!("{text:?} is neither HOST:PORT (an IP address and a port) nor unix:PATH"))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(address) => write!(f, "{address}"),
            Listen::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// Why the listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on {at}")]
    Bind {
        at: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} holds no PEM {what}")]
    NoPem { path: PathBuf, what: &'static str },
    #[error("the TLS certificate and key do not make a server configuration")]
    Tls(#[from] rustls::Error),
}

/// A bound listener, ready to serve.
pub enum Bound {
    Tcp(TcpListener),
    Tls(TlsListener),
    Unix(UnixListener),
}

impl Bound {
    /// Where it listens, for messages (the real port when 0 was asked for).
    pub fn local(&self) -> String {
        match self {
            Bound::Tcp(listener) => listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Bound::Tls(listener) => listener.tcp.local_addr().map(|a| format!("https://{a}")).unwrap_or_default(),
            Bound::Unix(listener) => listener
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| format!("unix:{}", p.display())))
                .unwrap_or_default(),
        }
    }
}

/// TLS from PEM files: the certificate chain and its private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn read_pem(path: &Path) -> Result<Vec<u8>, ListenError> {
    std::fs::read(path).map_err(|source| ListenError::Read { path: path.to_owned(), source })
}

fn server_config(files: &TlsFiles) -> Result<rustls::ServerConfig, ListenError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&read_pem(&files.cert)?).filter_map(Result::ok).collect();
    if certs.is_empty() {
        return Err(ListenError::NoPem { path: files.cert.clone(), what: "certificate" });
    }
    let key = PrivateKeyDer::from_pem_slice(&read_pem(&files.key)?)
        .map_err(|_| ListenError::NoPem { path: files.key.clone(), what: "private key" })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Binds `at`; a Unix socket is created mode 0600 (replacing a stale one).
pub async fn bind(at: &Listen, tls: Option<&TlsFiles>) -> Result<Bound, ListenError> {
    let bind_error = |source| ListenError::Bind { at: at.to_string(), source };
    match at {
        Listen::Tcp(address) => {
            let listener = TcpListener::bind(address).await.map_err(bind_error)?;
            match tls {
                None => Ok(Bound::Tcp(listener)),
                Some(files) => {
                    Ok(Bound::Tls(TlsListener::new(listener, TlsAcceptor::from(Arc::new(server_config(files)?)))))
                }
            }
        }
        Listen::Unix(path) => Ok(Bound::Unix(bind_unix(path).map_err(bind_error)?)),
    }
}

/// A Unix socket only its owner can connect to (its folder is created 0700 when missing). A stale
/// socket file is replaced; one that a server still answers on is refused (`AddrInUse`), so a
/// second daemon never takes over the first one's socket.
pub fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent)?;
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt as _;
        m.file_type().is_socket()
    }) {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("a running server answers on {}; stop it or choose another path", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// TCP with TLS: handshakes complete beside the accept loop.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
    per_peer: PeerLimit,
}

impl TlsListener {
    fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> Self {
        Self { tcp, acceptor, handshakes: JoinSet::new(), per_peer: PeerLimit::new(MAX_HANDSHAKES_PER_PEER) }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                accepted = self.tcp.accept(), if self.handshakes.len() < MAX_HANDSHAKES => match accepted {
                    Ok((stream, peer)) => {
                        let Some(slot) = self.per_peer.try_take(peer.ip()) else {
                            tracing::debug!(%peer, "TLS connection closed: too many handshakes from this peer");
                            continue;
                        };
                        let acceptor = self.acceptor.clone();
                        self.handshakes.spawn(async move {
                            let _slot = slot;
                            match tokio::time::timeout(HANDSHAKE_DEADLINE, acceptor.accept(stream)).await {
                                Ok(Ok(tls)) => Some((tls, peer)),
                                Ok(Err(error)) => {
                                    tracing::debug!(%peer, %error, "TLS handshake failed");
                                    None
                                }
                                Err(_) => {
                                    tracing::debug!(%peer, "TLS handshake timed out");
                                    None
                                }
                            }
                        });
                    }
                    Err(error) => {
                        // Out of descriptors, most likely: back off instead of spinning.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(ready)) = done {
                        return ready;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_unix_socket_is_taken_over_only_when_nobody_answers_on_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("api.sock");
        let first = bind_unix(&path).expect("bind");
        let refused = bind_unix(&path).expect_err("a live socket is not replaced");
        assert_eq!(refused.kind(), std::io::ErrorKind::AddrInUse, "{refused}");
        drop(first);
        assert!(path.exists(), "the stale socket file stays behind");
        bind_unix(&path).expect("a stale socket is replaced");
    }
}
