//! TLS interception for clients that ignore base URLs (docs/broker.md): a per-session CA,
//! name-constrained to the Adapter's provider hosts, that signs one leaf per host when the broker
//! is built and is then dropped, so its key never outlives the constructor and never leaves the
//! daemon's memory; and the TLS server each intercepted `CONNECT` speaks (ALPN `http/1.1` only).
//! The agent trusts the CA through the bundle the launch writes; what it sends inside the tunnel
//! is judged by the same rules as a base-URL request.

use std::collections::BTreeMap;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CidrSubnet, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::{Duration, OffsetDateTime};
use tokio_rustls::TlsAcceptor;

use crate::settings::BrokerError;

/// How long the CA and its leaves are valid: longer than any session may run (the Adapter
/// timeout's cap is a day), short enough that a copied certificate is soon worthless.
const VALIDITY: Duration = Duration::days(2);
/// Clock skew between the daemon and a container is none (one kernel), but a client that checks
/// `notBefore` to the second must not see a certificate from the future.
const BACKDATE: Duration = Duration::minutes(5);

/// The port a CONNECT must name: the providers' HTTPS.
pub(crate) const INTERCEPTED_PORT: u16 = 443;

/// One session's interception: the CA certificate the agent trusts and one TLS server per host.
pub struct SessionCa {
    certificate_pem: String,
    servers: BTreeMap<String, Arc<rustls::ServerConfig>>,
}

impl std::fmt::Debug for SessionCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCa").field("hosts", &self.servers.keys().collect::<Vec<_>>()).finish()
    }
}

fn tls(what: &str, error: impl std::fmt::Display) -> BrokerError {
    BrokerError::Tls(format!("{what}: {error}"))
}

impl SessionCa {
    /// A new CA for `hosts` (each a DNS name) and a leaf for each, signed and ready to serve.
    pub fn mint(hosts: &[String]) -> Result<Self, BrokerError> {
        let now = OffsetDateTime::now_utc();
        let ca_key = KeyPair::generate().map_err(|e| tls("the session CA's key", e))?;
        let mut ca = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, "Roundtable session CA (provider hosts only)");
        name.push(DnType::OrganizationName, "Roundtable credential broker");
        ca.distinguished_name = name;
        // Path length 0: it can sign leaves, never another CA.
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.not_before = now - BACKDATE;
        ca.not_after = now + VALIDITY;
        // Valid for the provider hosts alone, and for no IP address at all: a verifier that
        // honours name constraints refuses anything else this CA might be made to sign.
        ca.name_constraints = Some(NameConstraints {
            permitted_subtrees: hosts.iter().map(|host| GeneralSubtree::DnsName(host.clone())).collect(),
            excluded_subtrees: vec![
                GeneralSubtree::IpAddress(CidrSubnet::V4([0; 4], [0; 4])),
                GeneralSubtree::IpAddress(CidrSubnet::V6([0; 16], [0; 16])),
            ],
        });
        let ca_certificate = ca.self_signed(&ca_key).map_err(|e| tls("the session CA", e))?;
        let issuer = Issuer::new(ca, ca_key);
        let mut servers = BTreeMap::new();
        for host in hosts {
            let key = KeyPair::generate().map_err(|e| tls("a leaf key", e))?;
            let mut leaf = CertificateParams::new(vec![host.clone()]).map_err(|e| tls(host, e))?;
            leaf.distinguished_name = DistinguishedName::new();
            leaf.distinguished_name.push(DnType::CommonName, host.as_str());
            leaf.is_ca = IsCa::ExplicitNoCa;
            leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            leaf.not_before = now - BACKDATE;
            leaf.not_after = now + VALIDITY;
            let signed = leaf.signed_by(&key, &issuer).map_err(|e| tls(host, e))?;
            let chain = vec![CertificateDer::from(signed.der().to_vec()), ca_certificate.der().clone()];
            let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
            servers.insert(host.clone(), Arc::new(server_config(chain, private)?));
        }
        // `issuer` (and with it the CA's key) is dropped here: nothing can be signed after.
        Ok(Self { certificate_pem: ca_certificate.pem(), servers })
    }

    /// The CA certificate, PEM: what the agent's trust bundle holds. Public.
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// The TLS server for `host`, when it is one of the session's provider hosts.
    pub(crate) fn acceptor(&self, host: &str) -> Option<TlsAcceptor> {
        self.server_config(host).map(TlsAcceptor::from)
    }

    /// The server configuration for `host` (its leaf and the CA), when it is one of the hosts.
    pub(crate) fn server_config(&self, host: &str) -> Option<Arc<rustls::ServerConfig>> {
        self.servers.get(host).cloned()
    }
}

fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<rustls::ServerConfig, BrokerError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls("the interception server", e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| tls("the interception server's certificate", e))?;
    // The broker speaks HTTP/1.1 to both sides; a client offering only h2 fails the handshake.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The host of a `CONNECT` target (`host:443`), when it names the providers' port.
pub(crate) fn connect_host(authority: &str) -> Option<&str> {
    let (host, port) = authority.rsplit_once(':')?;
    (port.parse::<u16>().ok()? == INTERCEPTED_PORT && !host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;

    fn client(ca_pem: &str) -> tokio_rustls::TlsConnector {
        use rustls::pki_types::pem::PemObject as _;
        let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("pem");
        roundtable_net_fixtures::tls_connector(&ca, &[b"h2", b"http/1.1"]).expect("a connector")
    }

    /// A handshake of a client trusting only the session CA, naming `sni`, against the server
    /// the broker would use for `host`.
    async fn handshake(ca: &SessionCa, host: &str, sni: &str) -> Result<Option<Vec<u8>>, String> {
        let (near, far) = tokio::io::duplex(64 * 1024);
        let acceptor = ca.acceptor(host).expect("a server for the host");
        let server = tokio::spawn(async move { acceptor.accept(far).await.map(|_| ()) });
        let name = ServerName::try_from(sni.to_owned()).map_err(|e| e.to_string())?;
        let connected = client(ca.certificate_pem()).connect(name, near).await;
        let _ = server.await;
        connected.map(|stream| stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec)).map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn a_client_trusting_the_session_ca_reaches_each_provider_host_over_http_1_1() {
        let ca = SessionCa::mint(&["api.openai.com".into(), "llm.example.test".into()]).expect("mint");
        assert!(ca.certificate_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        for host in ["api.openai.com", "llm.example.test"] {
            assert_eq!(handshake(&ca, host, host).await, Ok(Some(b"http/1.1".to_vec())), "{host}");
        }
        assert!(ca.acceptor("example.com").is_none(), "no server for a host that is not the Adapter's");
    }

    #[tokio::test]
    async fn a_leaf_does_not_pass_for_another_name() {
        let ca = SessionCa::mint(&["api.openai.com".into()]).expect("mint");
        let refused = handshake(&ca, "api.openai.com", "evil.example.com").await;
        assert!(refused.is_err(), "the leaf names only its host: {refused:?}");
    }

    #[test]
    fn the_ca_is_name_constrained_and_each_session_gets_its_own() {
        let hosts = ["api.openai.com".to_owned()];
        let (one, two) = (SessionCa::mint(&hosts).expect("mint"), SessionCa::mint(&hosts).expect("mint"));
        assert_ne!(one.certificate_pem(), two.certificate_pem(), "a fresh key per session");
        use rustls::pki_types::pem::PemObject as _;
        let der = CertificateDer::from_pem_slice(one.certificate_pem().as_bytes()).expect("der");
        // id-ce-nameConstraints (2.5.29.30), and the permitted host inside it.
        let oid = [0x06, 0x03, 0x55, 0x1d, 0x1e];
        assert!(der.windows(oid.len()).any(|w| w == oid), "the CA carries name constraints");
        assert!(der.windows(14).any(|w| w == b"api.openai.com"));
    }

    #[test]
    fn only_the_providers_port_is_intercepted() {
        assert_eq!(connect_host("api.openai.com:443"), Some("api.openai.com"));
        assert_eq!(connect_host("api.openai.com:8443"), None);
        assert_eq!(connect_host("api.openai.com"), None);
        assert_eq!(connect_host(":443"), None);
    }
}
