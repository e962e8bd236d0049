//! Name resolution for tunnels: one lookup per tunnel, as an FQDN, with no hosts file and no
//! search list, through hickory against explicit nameservers (a `--resolver`, or the
//! `nameserver` lines of /etc/resolv.conf and nothing else from it).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::{Resolver, TokioResolver};

/// Why a lookup produced no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("no A or AAAA record")]
    NoRecords,
    #[error("lookup failed: {0}")]
    Failed(String),
}

/// Resolves a name to every address it has. The gateway bounds the time itself.
pub trait Resolve: Send + Sync + 'static {
    /// `fqdn` ends with a dot.
    fn lookup(&self, fqdn: &str) -> impl Future<Output = Result<Vec<IpAddr>, LookupError>> + Send;
}

#[derive(Debug, thiserror::Error)]
pub enum ResolverError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} names no nameserver; pass --resolver IP:PORT")]
    NoNameserver { path: String },
    #[error("cannot build the resolver: {0}")]
    Build(String),
}

/// hickory, configured so nothing but the given nameservers answers.
pub struct DnsResolver {
    inner: TokioResolver,
}

impl DnsResolver {
    /// A resolver asking exactly these nameservers (UDP, then TCP on truncation or error).
    pub fn new(nameservers: &[SocketAddr]) -> Result<Self, ResolverError> {
        let servers = nameservers
            .iter()
            .map(|server| {
                let mut udp = ConnectionConfig::udp();
                udp.port = server.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = server.port();
                NameServerConfig::new(server.ip(), true, vec![udp, tcp])
            })
            .collect();
        let mut options = ResolverOpts::default();
        options.use_hosts_file = ResolveHosts::Never;
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        // Pinning is per tunnel; a cache would only hide a rebinding from the logs.
        options.cache_size = 0;
        options.ndots = 0;
        options.attempts = 2;
        let config = ResolverConfig::from_parts(None, vec![], servers);
        let inner = Resolver::builder_with_config(config, TokioRuntimeProvider::default())
            .with_options(options)
            .build()
            .map_err(|error| ResolverError::Build(error.to_string()))?;
        Ok(Self { inner })
    }

    /// The `nameserver` lines of a resolv.conf file (port 53); its `search` and `domain` are
    /// ignored on purpose.
    pub fn from_resolv_conf(path: &Path) -> Result<Self, ResolverError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ResolverError::Read { path: path.display().to_string(), source })?;
        let servers: Vec<SocketAddr> = text
            .lines()
            .filter_map(|line| line.trim().strip_prefix("nameserver"))
            .filter_map(|rest| rest.trim().parse::<IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, 53))
            .collect();
        if servers.is_empty() {
            return Err(ResolverError::NoNameserver { path: path.display().to_string() });
        }
        Self::new(&servers)
    }
}

impl Resolve for DnsResolver {
    async fn lookup(&self, fqdn: &str) -> Result<Vec<IpAddr>, LookupError> {
        match self.inner.lookup_ip(fqdn).await {
            Ok(answer) => {
                let addresses: Vec<IpAddr> = answer.iter().collect();
                if addresses.is_empty() { Err(LookupError::NoRecords) } else { Ok(addresses) }
            }
            Err(error) if error.is_no_records_found() || error.is_nx_domain() => Err(LookupError::NoRecords),
            Err(error) => Err(LookupError::Failed(error.to_string())),
        }
    }
}
