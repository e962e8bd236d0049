//! A rehearsal broker for the admission canary (docs/admission.md): the session broker itself,
//! with placeholders of stand-in values, in front of a scripted provider on this process's own
//! loopback. The CLI under test is launched against it in its image; which of its requests reach
//! the broker, and carrying what, proves (or disproves) that the CLI takes the broker's route.
//! No real key is involved, and nothing leaves the machine.

use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use roundtable_gateway::resolve::LookupError;
use roundtable_gateway::{Dial, Listener, Resolve, Settings};
use roundtable_specs::broker::{Budget, RequestLine};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::broker::Broker;
use crate::intercept::SessionCa;
use crate::journal::BrokerJournal;
use crate::placeholders::Placeholders;
use crate::secret::{Credential, Secret};
use crate::settings::{BrokerError, BrokerLimits, BrokerSettings, Route};

/// What the scripted provider answers every request with: an error no CLI retries, so the
/// canary ends at once once the route is proven.
pub const SCRIPTED_STATUS: u16 = 400;
const SCRIPTED_BODY: &str = r#"{"error":{"type":"invalid_request_error","code":"roundtable_admission_canary","message":"roundtable admission canary: this request reached the credential broker; no model answers here"}}"#;

/// The rehearsal's log: every line the broker writes, kept in memory.
#[derive(Default)]
struct Lines(Mutex<Vec<RequestLine>>);

impl BrokerJournal for Lines {
    fn request(&self, line: &RequestLine) {
        if let Ok(mut lines) = self.0.lock() {
            lines.push(line.clone());
        }
    }
}

/// Every provider host resolves to this process's loopback.
struct Loopback;

impl Resolve for Loopback {
    async fn lookup(&self, _fqdn: &str, _timeout: Duration) -> Result<Vec<IpAddr>, LookupError> {
        Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
    }
}

/// Every dial reaches the scripted provider, whatever port the broker names.
struct ToScripted(SocketAddr);

impl Dial for ToScripted {
    async fn dial(&self, _target: SocketAddr) -> io::Result<TcpStream> {
        TcpStream::connect(self.0).await
    }
}

/// A running rehearsal: the broker on its listener and the scripted provider behind it.
pub struct Rehearsal {
    broker: Arc<Broker<Loopback, ToScripted>>,
    lines: Arc<Lines>,
    placeholders: Placeholders,
    cancel: CancellationToken,
    serving: AbortOnDropHandle<()>,
    _provider: AbortOnDropHandle<()>,
}

impl Rehearsal {
    /// Starts a broker on `listener` for `hosts`, with a placeholder for each `(variable, host)`
    /// credential standing for a random value that is no key at all.
    pub async fn start(
        hosts: &[String],
        credentials: &[(String, String)],
        listener: Listener,
    ) -> Result<Self, BrokerError> {
        let provider_ca = SessionCa::mint(hosts)?;
        let root = CertificateDer::from_pem_slice(provider_ca.certificate_pem().as_bytes())
            .map_err(|error| BrokerError::Tls(format!("the scripted provider's CA: {error}")))?;
        let scripted = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|error| BrokerError::Tls(format!("the scripted provider cannot listen: {error}")))?;
        let address =
            scripted.local_addr().map_err(|error| BrokerError::Tls(format!("the scripted provider: {error}")))?;
        let provider = AbortOnDropHandle::new(tokio::spawn(scripted_provider(scripted, provider_ca)));

        let placeholders = Placeholders::mint(credentials.iter().map(|(name, _)| name.as_str()))
            .map_err(|error| BrokerError::Tls(format!("the OS random source: {error}")))?;
        let mut stand_ins = Vec::new();
        for (name, host) in credentials {
            let mut random = [0u8; 16];
            getrandom::fill(&mut random).map_err(|error| BrokerError::Tls(format!("the OS random source: {error}")))?;
            let value: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
            stand_ins.push(Credential {
                name: name.clone(),
                placeholder: placeholders.get(name).unwrap_or_default().to_owned(),
                value: Secret::new(format!("canary-stand-in-{value}")),
                host: host.clone(),
            });
        }
        let mut upstream = Settings::new(hosts).map_err(|error| BrokerError::Tls(error.to_string()))?;
        let loopback = ipnet::IpNet::from(IpAddr::V4(Ipv4Addr::LOCALHOST));
        upstream.set_allow_cidrs([loopback]).map_err(|error| BrokerError::Tls(error.to_string()))?;
        upstream.dial_allow = vec![loopback];
        let settings = BrokerSettings {
            routes: hosts.iter().map(Route::new).collect(),
            credentials: stand_ins,
            budget: Budget::default(),
            limits: BrokerLimits { header_timeout: Duration::from_secs(30), ..BrokerLimits::default() },
            upstream,
            extra_roots: vec![root],
        };
        let lines = Arc::new(Lines::default());
        let broker = Arc::new(Broker::new(settings, Loopback, ToScripted(address), lines.clone())?);
        let cancel = CancellationToken::new();
        let serving =
            AbortOnDropHandle::new(tokio::spawn(crate::serve(broker.clone(), Arc::new(listener), cancel.clone())));
        Ok(Self { broker, lines, placeholders, cancel, serving, _provider: provider })
    }

    /// The session CA the CLI's trust bundle holds.
    pub fn ca_pem(&self) -> &str {
        self.broker.ca_pem()
    }

    /// `(variable, placeholder)`: what the CLI's environment holds.
    pub fn placeholders(&self) -> &Placeholders {
        &self.placeholders
    }

    /// Stops the broker; every line it wrote.
    pub async fn stop(self) -> Vec<RequestLine> {
        self.cancel.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.serving).await;
        self.lines.0.lock().map(|lines| lines.clone()).unwrap_or_default()
    }
}

/// Answers every request on every connection with [`SCRIPTED_STATUS`], over TLS for whichever
/// provider host the client names.
async fn scripted_provider(listener: TcpListener, ca: SessionCa) {
    let ca = Arc::new(ca);
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let ca = ca.clone();
        tokio::spawn(async move {
            let start = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
            let Ok(Ok(handshake)) = tokio::time::timeout(Duration::from_secs(10), start).await else { return };
            let Some(config) = handshake.client_hello().server_name().and_then(|name| ca.server_config(name)) else {
                return;
            };
            let Ok(tls) = handshake.into_stream(config).await else { return };
            let service = service_fn(|_request| async {
                let mut response = Response::new(Full::new(Bytes::from_static(SCRIPTED_BODY.as_bytes())));
                *response.status_mut() = StatusCode::from_u16(SCRIPTED_STATUS).unwrap_or(StatusCode::BAD_REQUEST);
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
                Ok::<_, Infallible>(response)
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}
