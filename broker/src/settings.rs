//! What one session's broker is given: the provider hosts it routes to (each with its scheme),
//! the session's credentials, its budget, its bounds, and the gateway settings its upstream leg
//! is held to (allowlist, address policy, `dial_allow`, DNS and connect timeouts).

use std::time::Duration;

use roundtable_specs::broker::{Budget, Scheme};
use rustls::pki_types::CertificateDer;

use crate::secret::Credential;

/// One provider host of the Adapter; the first path segment of a request names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub host: String,
    pub scheme: Scheme,
}

impl Route {
    /// The route for `host`, its scheme decided by the host alone.
    pub fn new(host: impl Into<String>) -> Self {
        let host = host.into();
        let scheme = Scheme::of_host(&host);
        Self { host, scheme }
    }
}

/// Bounds with safe defaults.
#[derive(Debug, Clone, Copy)]
pub struct BrokerLimits {
    /// From the connection's accept (or its last response) to a complete request head.
    pub header_timeout: Duration,
    /// The most request body bytes one request may send upstream.
    pub max_body_bytes: u64,
    /// Requests of one session open at once; more are answered `429 too_many_requests`.
    pub max_open_requests: usize,
    /// Connections open at once; more are closed at accept.
    pub max_connections: usize,
    /// How much of a non-2xx response body is held to mask echoes of the key; the rest is cut.
    pub error_body_bytes: usize,
    /// From the request sent upstream to the provider's response head (a model can think long).
    pub response_head_timeout: Duration,
    /// A response body with no byte for this long is cut.
    pub body_idle_timeout: Duration,
}

impl Default for BrokerLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            max_body_bytes: 32 * 1024 * 1024,
            max_open_requests: 64,
            max_connections: 256,
            error_body_bytes: 64 * 1024,
            response_head_timeout: Duration::from_secs(300),
            body_idle_timeout: Duration::from_secs(300),
        }
    }
}

/// One session's broker.
pub struct BrokerSettings {
    pub routes: Vec<Route>,
    pub credentials: Vec<Credential>,
    pub budget: Budget,
    pub limits: BrokerLimits,
    /// The upstream leg's policy: its allowlist must hold every route host.
    pub upstream: roundtable_gateway::Settings,
    /// Trusted beside the Mozilla roots: a test CA only.
    pub extra_roots: Vec<CertificateDer<'static>>,
}

/// Why a broker was not built. Never carries a credential value or placeholder.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("a broker needs at least one provider host")]
    NoRoutes,
    #[error("provider host {0:?} is listed twice")]
    DuplicateRoute(String),
    #[error("provider host {0:?} is not in the upstream allowlist (a canonical host the gateway also accepts)")]
    RouteNotAllowed(String),
    #[error("a broker needs at least one credential")]
    NoCredentials,
    #[error("the placeholder of {0} is not a Roundtable placeholder")]
    BadPlaceholder(String),
    #[error("the credential {name} is bound to {host:?}, which is no provider host of this broker")]
    CredentialHost { name: String, host: String },
    #[error("two credentials share the placeholder of {0}")]
    DuplicatePlaceholder(String),
    #[error("the value of {0} cannot be sent in an HTTP header (empty, or a control character)")]
    BadValue(String),
    #[error("extra root certificate {index} is not usable: {message}")]
    BadRoot { index: usize, message: String },
    #[error("TLS client: {0}")]
    Tls(String),
}
