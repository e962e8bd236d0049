//! The credential broker of one session (docs/broker.md): on `broker.sock` in the session's socket
//! directory, beside the egress gateway and the MCP endpoint, through the same sidecar
//! mechanism. Its placeholders are minted here, per session and per credential, from the OS
//! random source; the real values go to the broker and nowhere else. Requests go to the
//! session's bounded `broker.log`; a `broker.json` beside it carries the live totals.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ipnet::IpNet;
use roundtable_broker::{Broker, BrokerJournal, BrokerSettings, Credential, RequestLine, Route, Secret};
use roundtable_gateway::{DirectDialer, DnsResolver, Endpoint, Listener};
use roundtable_specs::broker::{BrokerReason, BrokerReport, Budget, Scheme};
use roundtable_specs::session::SidecarState;
use roundtable_store::SessionRecord;
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

use crate::egress::{EgressOptions, SidecarError};
use crate::folder::ExecutionFolder;
use crate::sidecar::{BoundedLog, Budget as LogBudget, Served, write_report};
use roundtable_broker::Placeholders;

/// The socket's name in the session's socket directory.
pub const SOCKET_NAME: &str = "broker.sock";
/// The request log's bound.
const LOG_LIMIT: u64 = 8 << 20;
/// How long a stop waits for open requests to finish.
const STOP_BOUND: Duration = Duration::from_secs(10);

/// Why `--broker-test-ca` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TestRootsError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not PEM certificates: {detail}")]
    NotPem { path: PathBuf, detail: String },
    #[error("{path} holds no certificate")]
    Empty { path: PathBuf },
}

/// The certificates of a PEM file, DER, for [`EgressOptions::broker_test_roots`].
pub fn read_test_roots(path: &Path) -> Result<Vec<Vec<u8>>, TestRootsError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let pem = std::fs::read(path).map_err(|source| TestRootsError::Read { path: path.to_owned(), source })?;
    let roots = CertificateDer::pem_slice_iter(&pem)
        .map(|der| der.map(|der| der.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TestRootsError::NotPem { path: path.to_owned(), detail: error.to_string() })?;
    if roots.is_empty() {
        return Err(TestRootsError::Empty { path: path.to_owned() });
    }
    Ok(roots)
}

/// What a session's broker is started with.
pub struct BrokerStart<'a> {
    pub hosts: &'a [String],
    pub adapter_cidrs: &'a [IpNet],
    /// `(variable, real value, the one host it may be spent on)` for every credential the agent
    /// holds a placeholder of (`ResolvedAdapter::credential_host`).
    pub credentials: Vec<(&'a str, &'a str, String)>,
    pub placeholders: &'a Placeholders,
    pub budget: Budget,
}

#[derive(Debug, thiserror::Error)]
pub enum BrokerSidecarError {
    #[error(transparent)]
    Egress(#[from] SidecarError),
    #[error("the broker refused its settings: {0}")]
    Broker(#[from] roundtable_broker::BrokerError),
    #[error("credential {0} has no placeholder")]
    NoPlaceholder(String),
}

type SessionBroker = Broker<DnsResolver, DirectDialer>;

/// A running broker. Dropped without [`BrokerSidecar::stop`] (a panicking execution), it still
/// stops serving and removes its socket.
pub struct BrokerSidecar {
    served: Served,
    reporter: AbortOnDropHandle<()>,
    broker: Arc<SessionBroker>,
    journal: Arc<FileJournal>,
    report: BrokerReport,
    report_path: PathBuf,
}

impl BrokerSidecar {
    /// Binds the socket in `socket_dir`, gives it to the agent's UID and starts serving.
    pub async fn start(
        egress: &EgressOptions,
        start: BrokerStart<'_>,
        socket_dir: &Path,
        folder: &ExecutionFolder,
        session: &str,
    ) -> Result<Self, BrokerSidecarError> {
        let upstream = crate::egress::gateway_settings(egress, start.hosts, start.adapter_cidrs)?;
        let resolver = crate::egress::resolver(egress)?;
        let mut credentials = Vec::new();
        for (name, value, host) in &start.credentials {
            let placeholder =
                start.placeholders.get(name).ok_or_else(|| BrokerSidecarError::NoPlaceholder((*name).to_owned()))?;
            credentials.push(Credential {
                name: (*name).to_owned(),
                placeholder: placeholder.to_owned(),
                value: Secret::new((*value).to_owned()),
                host: host.clone(),
            });
        }
        let settings = BrokerSettings {
            routes: start
                .hosts
                .iter()
                .map(|host| Route { host: host.clone(), scheme: Scheme::of_host(host) })
                .collect(),
            credentials,
            budget: start.budget,
            limits: Default::default(),
            upstream,
            extra_roots: egress.broker_test_roots.iter().map(|der| der.clone().into()).collect(),
        };
        let path = socket_dir.join(SOCKET_NAME);
        let listener = Listener::bind(&Endpoint::Unix(path.clone()))
            .await
            .map_err(|source| SidecarError::Bind { path: path.clone(), source })?;
        roundtable_workspace::sockets::hand_to_agent(&path).map_err(SidecarError::from)?;
        let journal = Arc::new(FileJournal::open(&folder.broker_log(), session));
        let broker = Arc::new(Broker::new(settings, resolver, DirectDialer, journal.clone())?);
        let report = BrokerReport {
            state: SidecarState::Serving,
            socket: path.display().to_string(),
            hosts: start.hosts.to_vec(),
            budget: start.budget,
            ..BrokerReport::default()
        };
        tracing::info!(session, socket = %path.display(), hosts = ?report.hosts, "credential broker serving");
        let listener = Arc::new(listener);
        let serving = broker.clone();
        let served = Served::spawn("broker", &path, |cancel| roundtable_broker::serve(serving, listener, cancel));
        let report_path = folder.broker_report();
        let reporter = AbortOnDropHandle::new(tokio::spawn(keep_reporting(
            report.clone(),
            broker.clone(),
            journal.clone(),
            report_path.clone(),
        )));
        Ok(Self { served, reporter, broker, journal, report, report_path })
    }

    /// The session CA's certificate (PEM, public) the agent's trust bundle holds.
    pub fn ca_pem(&self) -> &str {
        self.broker.ca_pem()
    }

    /// Turns true when the broker first refuses a model request because the budget is spent.
    pub fn budget_refused(&self) -> watch::Receiver<bool> {
        self.broker.budget_refused()
    }

    /// Stops serving (waiting a bounded time for open requests) and removes the socket; the
    /// final report.
    pub async fn stop(self) -> BrokerReport {
        let BrokerSidecar { served, reporter, broker, journal, report, report_path } = self;
        reporter.abort();
        served.stop(STOP_BOUND).await;
        let mut report = current(&report, &broker, &journal);
        report.state = SidecarState::Stopped;
        write_report(&report_path, &report);
        report
    }
}

/// The report with the broker's totals now.
fn current(base: &BrokerReport, broker: &SessionBroker, journal: &FileJournal) -> BrokerReport {
    let counters = broker.counters();
    BrokerReport {
        requests: counters.requests,
        refused: counters.refused,
        tokens: counters.tokens,
        unreadable_usage: counters.unreadable,
        exhausted: counters.exhausted,
        lines_dropped: journal.dropped.load(Ordering::Relaxed),
        ..base.clone()
    }
}

/// Rewrites the live report whenever the totals change (checked each second).
async fn keep_reporting(base: BrokerReport, broker: Arc<SessionBroker>, journal: Arc<FileJournal>, path: PathBuf) {
    let mut last = current(&base, &broker, &journal);
    write_report(&path, &last);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = current(&base, &broker, &journal);
        if now != last {
            write_report(&path, &now);
            last = now;
        }
    }
}

/// The live report of a running session's broker, if it has one.
pub fn read_report(exec_dir: &Path) -> Option<BrokerReport> {
    serde_json::from_slice(&std::fs::read(ExecutionFolder::at(exec_dir).broker_report()).ok()?).ok()
}

/// The report of each running session with a broker, for its `status` row.
pub fn serving_reports(sessions: &[SessionRecord]) -> impl Iterator<Item = (&SessionRecord, BrokerReport)> {
    crate::sidecar::serving(sessions, read_report, |report| report.state)
}

/// One line per request in the session's bounded `broker.log`: refusals share one half of the
/// bound, passed requests the other.
struct FileJournal {
    session: String,
    log: BoundedLog,
    dropped: AtomicU64,
}

impl FileJournal {
    fn open(path: &Path, session: &str) -> Self {
        Self {
            session: session.to_owned(),
            log: BoundedLog::open(path, LOG_LIMIT, "broker"),
            dropped: AtomicU64::new(0),
        }
    }
}

impl BrokerJournal for FileJournal {
    fn request(&self, line: &RequestLine) {
        // Debug, not info: a hostile agent decides how many of these there are.
        tracing::debug!(session = %self.session, host = line.host.as_deref().unwrap_or("-"), reason = %line.reason, status = line.status, "brokered request");
        let budget = if line.reason == BrokerReason::Allowed { LogBudget::Allowed } else { LogBudget::Refusals };
        if !self.log.write(line, budget) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}
