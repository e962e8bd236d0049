//! The broker's upstream leg: the route host through the gateway's pinned path (one lookup, every
//! answer admitted, only those addresses dialed, port 443), TLS with the Mozilla roots (plus a
//! test CA when given), SNI the route host and ALPN `http/1.1` only, then one HTTP/1.1 client
//! connection over that stream. Nothing here resolves a name by itself.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use roundtable_gateway::settings::UPSTREAM_PORT;
use roundtable_gateway::{Dial, GatewayReason, Resolve, Settings, pinned};
use roundtable_specs::broker::BrokerReason;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use crate::body::RequestBody;
use crate::settings::BrokerError;

/// A refusal or failure of one request: its reason and the detail the agent and the log get.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub(crate) reason: BrokerReason,
    pub(crate) detail: String,
}

impl Refusal {
    pub(crate) fn new(reason: BrokerReason, detail: impl Into<String>) -> Self {
        Self { reason, detail: detail.into() }
    }
}

/// An open HTTP/1.1 connection to the provider.
pub(crate) struct Opened {
    pub(crate) sender: SendRequest<RequestBody>,
    /// Drives the connection; aborted when the exchange ends.
    pub(crate) connection: JoinHandle<()>,
    pub(crate) dialed: SocketAddr,
}

pub(crate) struct Upstream<R, D> {
    settings: Settings,
    resolver: R,
    dialer: D,
    tls: TlsConnector,
}

/// The TLS client: the Mozilla roots and `extra_roots`, ALPN `http/1.1` only.
fn tls_config(extra_roots: &[CertificateDer<'static>]) -> Result<rustls::ClientConfig, BrokerError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for (index, root) in extra_roots.iter().enumerate() {
        roots.add(root.clone()).map_err(|error| BrokerError::BadRoot { index, message: error.to_string() })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| BrokerError::Tls(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The config of every broker without extra roots: the root store is built once per process,
/// not once per session.
fn shared_config() -> Result<Arc<rustls::ClientConfig>, BrokerError> {
    static SHARED: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    if let Some(config) = SHARED.get() {
        return Ok(config.clone());
    }
    let config = Arc::new(tls_config(&[])?);
    Ok(SHARED.get_or_init(|| config).clone())
}

fn pin_failure(error: pinned::PinError, stage: &str) -> Refusal {
    let reason = match error.reason {
        GatewayReason::DnsTimeout | GatewayReason::UpstreamConnectTimeout => BrokerReason::UpstreamTimeout,
        _ => BrokerReason::UpstreamFailed,
    };
    Refusal::new(reason, format!("{stage}: {error}"))
}

impl<R: Resolve, D: Dial> Upstream<R, D> {
    pub(crate) fn new(
        settings: Settings,
        resolver: R,
        dialer: D,
        extra_roots: &[CertificateDer<'static>],
    ) -> Result<Self, BrokerError> {
        let config = if extra_roots.is_empty() { shared_config()? } else { Arc::new(tls_config(extra_roots)?) };
        let tls = TlsConnector::from(config);
        Ok(Self { settings, resolver, dialer, tls })
    }

    /// Opens a connection to `host` (a route host, in the allowlist).
    pub(crate) async fn open(&self, host: &str) -> Result<Opened, Refusal> {
        if !self.settings.allowlist().iter().any(|allowed| allowed == host) {
            return Err(Refusal::new(BrokerReason::UpstreamFailed, "the host is not in the upstream allowlist"));
        }
        let limits = self.settings.limits;
        let addresses = pinned::resolve(&self.resolver, host, limits.dns_timeout)
            .await
            .result
            .map_err(|e| pin_failure(e, "lookup"))?;
        pinned::admit(&addresses, &self.settings.address_policy()).map_err(|e| pin_failure(e, "address policy"))?;
        let connected = pinned::dial(&self.dialer, &addresses, UPSTREAM_PORT, limits.connect_timeout)
            .await
            .result
            .map_err(|e| pin_failure(e, "dial"))?;
        let dialed = connected.dialed;
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| Refusal::new(BrokerReason::UpstreamFailed, "the host is not a TLS server name"))?;
        let tls = tokio::time::timeout(limits.connect_timeout, self.tls.connect(name, connected.stream))
            .await
            .map_err(|_| {
                Refusal::new(BrokerReason::UpstreamTimeout, format!("TLS handshake with {dialed}: no answer"))
            })?
            .map_err(|error| {
                Refusal::new(BrokerReason::UpstreamFailed, format!("TLS handshake with {dialed}: {error}"))
            })?;
        if tls.get_ref().1.alpn_protocol().is_some_and(|alpn| alpn != b"http/1.1") {
            return Err(Refusal::new(
                BrokerReason::UpstreamFailed,
                format!("{dialed} chose a protocol other than http/1.1"),
            ));
        }
        let (sender, connection) = http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|error| Refusal::new(BrokerReason::UpstreamFailed, format!("HTTP/1.1 with {dialed}: {error}")))?;
        let connection = tokio::spawn(async move {
            // Its end (or error) shows in the response or its body.
            let _ = connection.await;
        });
        Ok(Opened { sender, connection, dialed })
    }
}
