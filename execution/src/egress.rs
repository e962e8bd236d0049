//! The egress sidecar of one session (docs/gateway.md): a gateway allowing exactly its Adapter's
//! `providerHosts`, on `egress.sock` in the session's socket directory. The socket is bound before
//! the container exists and kept for the whole session; a crashed accept loop is restarted on it
//! (tunnels wait in the backlog meanwhile, so they fail closed). Decisions go to the session's
//! `egress.log` (bounded); a `egress.json` beside it carries the live counters to `status`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use roundtable_gateway::{
    Close, CounterSnapshot, Counters, Decision, DirectDialer, DnsResolver, Endpoint, Gateway, Journal, Listener,
    Settings,
};
use roundtable_store::SessionRecord;
use serde::Serialize;

use tokio_util::task::AbortOnDropHandle;

use crate::folder::ExecutionFolder;
use crate::sidecar::{BoundedLog, Budget, Served, write_report};

/// The socket's name in the session's socket directory.
pub const SOCKET_NAME: &str = "egress.sock";
/// The decision log's bound.
const LOG_LIMIT: u64 = 8 << 20;

/// Daemon-wide gateway options (`start --gateway-resolver`, `--gateway-allow-cidr`,
/// `--gateway-dial-allow`, `--gateway-max-tunnels`).
#[derive(Debug, Clone)]
pub struct EgressOptions {
    /// The DNS server; `None` reads the nameservers of /etc/resolv.conf.
    pub resolver: Option<SocketAddr>,
    /// Exceptions for every gateway, besides each Adapter's own `egress.allowCidrs`.
    pub allow_cidrs: Vec<IpNet>,
    /// When not empty, the only networks any gateway dials.
    pub dial_allow: Vec<IpNet>,
    /// Tunnels one session may hold open at once. Every tunnel costs the daemon two descriptors,
    /// so a hostile agent must not be able to exhaust them for every other session.
    pub max_tunnels: usize,
    /// Roots the credential broker's upstream leg trusts besides the web's, DER
    /// (`start --broker-test-ca`: a test CA; production never needs one).
    pub broker_test_roots: Vec<Vec<u8>>,
}

impl Default for EgressOptions {
    fn default() -> Self {
        Self {
            resolver: None,
            allow_cidrs: Vec::new(),
            dial_allow: Vec::new(),
            max_tunnels: 256,
            broker_test_roots: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("invalid egress settings: {0}")]
    Settings(#[from] roundtable_gateway::settings::SettingsError),
    #[error("no resolver for the gateway: {0}")]
    Resolver(#[from] roundtable_gateway::resolve::ResolverError),
    #[error("cannot bind the gateway socket {path}: {source}")]
    Bind { path: PathBuf, source: std::io::Error },
    #[error("cannot hand the gateway socket to the agent: {0}")]
    Handover(#[from] roundtable_workspace::sockets::SocketDirError),
}

pub use roundtable_specs::session::{EgressReport, SidecarState};

/// How long a stop waits for tunnels to close before abandoning them.
const STOP_BOUND: Duration = Duration::from_secs(10);

/// The gateway policy for `hosts`: the same for the session's tunnels and for the broker's
/// upstream leg, so exact hosts, pinned DNS and the address policy are one decision.
pub fn gateway_settings(
    options: &EgressOptions,
    hosts: &[String],
    adapter_cidrs: &[IpNet],
) -> Result<Settings, SidecarError> {
    let mut settings = Settings::new(hosts)?;
    settings.set_allow_cidrs(options.allow_cidrs.iter().chain(adapter_cidrs).copied())?;
    settings.dial_allow = options.dial_allow.clone();
    settings.self_addresses = roundtable_gateway::local::interface_addresses();
    settings.limits.max_tunnels = options.max_tunnels;
    Ok(settings)
}

/// The resolver every gateway and broker of the daemon uses: `--gateway-resolver`, or the
/// nameservers of /etc/resolv.conf.
pub fn resolver(options: &EgressOptions) -> Result<DnsResolver, SidecarError> {
    Ok(match options.resolver {
        Some(server) => DnsResolver::new(&[server])?,
        None => DnsResolver::from_resolv_conf(Path::new("/etc/resolv.conf"))?,
    })
}

/// A running sidecar. Dropped without [`Sidecar::stop`] (a panicking execution), it still stops
/// serving and removes its socket.
pub struct Sidecar {
    served: Served,
    reporter: AbortOnDropHandle<()>,
    counters: Arc<Counters>,
    report: EgressReport,
    report_path: PathBuf,
}

impl Sidecar {
    /// Binds the socket in `socket_dir`, gives it to the agent's UID and starts serving.
    pub async fn start(
        options: &EgressOptions,
        hosts: &[String],
        adapter_cidrs: &[IpNet],
        socket_dir: &Path,
        folder: &ExecutionFolder,
        session: &str,
    ) -> Result<Self, SidecarError> {
        let settings = gateway_settings(options, hosts, adapter_cidrs)?;
        let resolver = resolver(options)?;
        let path = socket_dir.join(SOCKET_NAME);
        let listener = Listener::bind(&Endpoint::Unix(path.clone()))
            .await
            .map_err(|source| SidecarError::Bind { path: path.clone(), source })?;
        roundtable_workspace::sockets::hand_to_agent(&path)?;
        let report = EgressReport {
            state: SidecarState::Serving,
            socket: path.display().to_string(),
            hosts: settings.allowlist().to_vec(),
            allow_cidrs: settings.allow_cidrs().iter().map(ToString::to_string).collect(),
            counters: CounterSnapshot::default(),
        };
        tracing::info!(
            session,
            socket = %path.display(),
            hosts = ?report.hosts,
            allow_cidrs = ?report.allow_cidrs,
            "egress gateway serving"
        );
        let counters = Arc::new(Counters::default());
        let journal = Arc::new(FileJournal::open(&folder.egress_log(), session, counters.clone()));
        let gateway = Arc::new(Gateway::with_counters(settings, resolver, DirectDialer, journal, counters.clone()));
        let listener = Arc::new(listener);
        let served = Served::spawn("egress", &path, |cancel| roundtable_gateway::serve(gateway, listener, cancel));
        let report_path = folder.egress_report();
        let reporter =
            AbortOnDropHandle::new(tokio::spawn(keep_reporting(report.clone(), counters.clone(), report_path.clone())));
        Ok(Self { served, reporter, counters, report, report_path })
    }

    /// Closes every tunnel (waiting a bounded time for their close lines) and the socket; the
    /// final report.
    pub async fn stop(self) -> EgressReport {
        let Sidecar { served, reporter, counters, mut report, report_path } = self;
        reporter.abort();
        served.stop(STOP_BOUND).await;
        report.state = SidecarState::Stopped;
        report.counters = counters.snapshot();
        write_report(&report_path, &report);
        report
    }
}

/// Rewrites the live report whenever the counters change (checked each second).
async fn keep_reporting(mut report: EgressReport, counters: Arc<Counters>, path: PathBuf) {
    write_report(&path, &report);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = counters.snapshot();
        if now != report.counters {
            report.counters = now;
            write_report(&path, &report);
        }
    }
}

/// Decision and close lines in the session's bounded `egress.log`: refusals share one half of
/// [`LOG_LIMIT`], allowed tunnels and their close lines the other. Lines past a budget are
/// counted as dropped, not written.
struct FileJournal {
    session: String,
    log: BoundedLog,
    counters: Arc<Counters>,
}

impl FileJournal {
    fn open(path: &Path, session: &str, counters: Arc<Counters>) -> Self {
        Self { session: session.to_owned(), log: BoundedLog::open(path, LOG_LIMIT, "egress"), counters }
    }

    fn append(&self, value: &impl Serialize, refusal: bool) {
        let budget = if refusal { Budget::Refusals } else { Budget::Allowed };
        if !self.log.write(value, budget) {
            self.counters.line_dropped();
        }
    }
}

impl Journal for FileJournal {
    fn decision(&self, decision: &Decision) {
        // Debug, not info: a hostile agent decides how many of these there are.
        tracing::debug!(
            session = %self.session,
            host = decision.host.as_deref().unwrap_or("-"),
            decision = decision.decision.as_str(),
            reason = %decision.reason,
            "egress decision"
        );
        // Abandoned tunnels are written as `deny` and share the refusals' budget.
        self.append(decision, decision.decision == roundtable_gateway::egress::Decision::Deny);
    }

    fn close(&self, close: &Close) {
        self.append(close, false);
    }
}

/// The live report of a running session's sidecar, if it has one.
pub fn read_report(exec_dir: &Path) -> Option<EgressReport> {
    serde_json::from_slice(&std::fs::read(ExecutionFolder::at(exec_dir).egress_report()).ok()?).ok()
}

/// The report of each running session with a gateway, for its `status` row.
pub fn serving_reports(sessions: &[SessionRecord]) -> impl Iterator<Item = (&SessionRecord, EgressReport)> {
    crate::sidecar::serving(sessions, read_report, |report| report.state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_root() -> bool {
        rustix::process::geteuid().is_root()
    }

    async fn sidecar(dir: &Path) -> Sidecar {
        let options =
            EgressOptions { resolver: Some("127.0.0.1:9".parse().expect("addr")), ..EgressOptions::default() };
        Sidecar::start(&options, &["api.example.com".into()], &[], dir, &ExecutionFolder::at(dir), "test")
            .await
            .expect("sidecar")
    }

    #[tokio::test]
    async fn a_dropped_sidecar_stops_serving_and_removes_its_socket() {
        if !is_root() {
            return; // handing the socket to UID 1000 needs root
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join(SOCKET_NAME);
        let running = sidecar(dir.path()).await;
        assert!(tokio::net::UnixStream::connect(&socket).await.is_ok());
        // As when the execution holding it panics.
        drop(running);
        assert!(!socket.exists());
        assert!(tokio::net::UnixStream::connect(&socket).await.is_err());
    }

    #[tokio::test]
    async fn a_stopped_sidecar_reports_its_counters_once_more() {
        if !is_root() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let running = sidecar(dir.path()).await;
        let mut client = tokio::net::UnixStream::connect(dir.path().join(SOCKET_NAME)).await.expect("connect");
        tokio::io::AsyncWriteExt::write_all(&mut client, b"CONNECT evil.example.com:443 HTTP/1.1\r\n\r\n")
            .await
            .expect("write");
        let mut answer = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut client, &mut answer).await.expect("read");
        let report = running.stop().await;
        assert_eq!(report.state, SidecarState::Stopped);
        assert_eq!(report.counters.denials.get(&roundtable_gateway::GatewayReason::HostNotAllowlisted), Some(&1));
        assert_eq!(read_report(dir.path()), Some(report));
        let log = std::fs::read_to_string(ExecutionFolder::at(dir.path()).egress_log()).expect("log");
        assert!(log.contains("\"reason\":\"host_not_allowlisted\""), "{log}");
    }
}
