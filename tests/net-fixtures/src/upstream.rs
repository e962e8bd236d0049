//! Upstream servers on loopback and a TLS client for them: a TLS echo server with a fresh
//! self-signed certificate (end-to-end integrity through the gateway), a raw recorder (what
//! exactly reached upstream), and a real rustls ClientHello for any name.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::{TlsAcceptor, TlsConnector};

fn install_provider() {
    // One provider is compiled (ring); installing it twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A certificate for some names and its key.
#[derive(Clone)]
pub struct TlsIdentity {
    pub certificate: CertificateDer<'static>,
    /// The same certificate in PEM (what `SSL_CERT_FILE` names).
    pub pem: String,
    /// The private key in PEM (what a server's `--tls-key` names).
    pub key_pem: String,
    key: Arc<PrivatePkcs8KeyDer<'static>>,
}

impl TlsIdentity {
    pub fn self_signed(names: &[&str]) -> Self {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let generated = rcgen::generate_simple_self_signed(names).expect("rcgen generates a certificate");
        Self {
            pem: generated.cert.pem(),
            key_pem: generated.signing_key.serialize_pem(),
            certificate: generated.cert.der().clone(),
            key: Arc::new(PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der())),
        }
    }

    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        install_provider();
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![self.certificate.clone()], PrivateKeyDer::Pkcs8(self.key.as_ref().clone_key()))
            .expect("a valid certificate and key");
        TlsAcceptor::from(Arc::new(config))
    }
}

/// A TLS server echoing every byte back; stopped when dropped.
pub struct TlsEcho {
    pub address: SocketAddr,
    pub identity: TlsIdentity,
    task: JoinHandle<()>,
}

impl TlsEcho {
    pub async fn start(address: SocketAddr, names: &[&str]) -> io::Result<Self> {
        let identity = TlsIdentity::self_signed(names);
        let acceptor = identity.acceptor();
        let listener = TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else { return };
                    let (mut reader, mut writer) = tokio::io::split(tls);
                    let _ = tokio::io::copy(&mut reader, &mut writer).await;
                    let _ = writer.shutdown().await;
                });
            }
        });
        Ok(Self { address, identity, task })
    }
}

impl Drop for TlsEcho {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A TCP server recording every byte of every connection and answering each with `reply`;
/// stopped when dropped.
pub struct RawUpstream {
    pub address: SocketAddr,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
    task: JoinHandle<()>,
}

impl RawUpstream {
    pub async fn start(address: SocketAddr, reply: Vec<u8>) -> io::Result<Self> {
        let listener = TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                let reply = reply.clone();
                tokio::spawn(async move {
                    let _ = stream.write_all(&reply).await;
                    let mut bytes = Vec::new();
                    let _ = stream.read_to_end(&mut bytes).await;
                    if let Ok(mut log) = log.lock() {
                        log.push(bytes);
                    }
                });
            }
        });
        Ok(Self { address, received, task })
    }

    /// The bytes of each connection that has ended.
    pub fn received(&self) -> Vec<Vec<u8>> {
        self.received.lock().map(|log| log.clone()).unwrap_or_default()
    }
}

impl Drop for RawUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A rustls client configuration trusting `root` alone.
fn client_config(root: &CertificateDer<'static>) -> io::Result<rustls::ClientConfig> {
    install_provider();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).map_err(io::Error::other)?;
    Ok(rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth())
}

/// A rustls connector trusting `root` alone, offering `alpn` (nothing when empty).
pub fn tls_connector(root: &CertificateDer<'static>, alpn: &[&[u8]]) -> io::Result<TlsConnector> {
    let mut config = client_config(root)?;
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// A rustls client trusting `certificate`, over an already-established stream (a tunnel), for
/// `server_name`, with or without SNI.
pub async fn tls_client<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    server_name: &str,
    certificate: &CertificateDer<'static>,
    send_sni: bool,
) -> io::Result<tokio_rustls::client::TlsStream<S>> {
    let mut config = client_config(certificate)?;
    config.enable_sni = send_sni;
    let name = ServerName::try_from(server_name.to_owned()).map_err(io::Error::other)?;
    TlsConnector::from(Arc::new(config)).connect(name, stream).await
}

/// Reads an HTTP response head (up to and with its blank line) byte by byte, so nothing of what
/// follows (a tunnel's first bytes) is consumed; what arrived when the peer closed or went quiet
/// for 10 s.
pub async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// The ClientHello a real rustls client sends for `server_name`, as the bytes on the wire.
pub fn client_hello_for(server_name: &str) -> Vec<u8> {
    install_provider();
    let roots = rustls::RootCertStore::empty();
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let name = ServerName::try_from(server_name.to_owned()).expect("a valid server name");
    let mut connection = rustls::ClientConnection::new(Arc::new(config), name).expect("a client connection");
    let mut bytes = Vec::new();
    connection.write_tls(&mut bytes).expect("write to a Vec");
    bytes
}
