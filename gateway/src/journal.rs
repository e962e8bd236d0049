//! What a gateway tells: one decision line per tunnel and one close line per spliced tunnel
//! (JSON, modelled on smokescreen's canonical lines), and counters a status view can read.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use roundtable_specs::egress::{self, CloseReason, GatewayReason};
use serde::Serialize;

/// The one decision of a tunnel.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Decision {
    pub event: &'static str,
    pub time: String,
    pub id: u64,
    /// The authority as the client wrote it (printable ASCII, at most 255 bytes), whatever its
    /// fate: `CONNECT 169.254.169.254:443` leaves a record of what was asked.
    pub requested_host: Option<String>,
    /// The canonical CONNECT host, when the request got that far.
    pub host: Option<String>,
    pub port: Option<u16>,
    /// `allow` or `deny`; always `reason.decision()`.
    pub decision: egress::Decision,
    /// `allowed`, the reason code of the refusal, or why the tunnel was abandoned.
    pub reason: GatewayReason,
    /// What failed, for `dns_error` and upstream failures.
    pub error: Option<String>,
    /// Every address the one lookup returned, in its order.
    pub resolved: Vec<IpAddr>,
    /// The `allowCidrs` entries that admitted a non-public address of this tunnel.
    pub allowed_by_cidr: Vec<String>,
    pub dialed: Option<SocketAddr>,
    pub sni: Option<String>,
    pub client_hello_bytes: Option<usize>,
    pub dns_ms: Option<f64>,
    pub connect_ms: Option<f64>,
}

impl Decision {
    /// The decision of tunnel `id`, begun now: nothing known yet, and until a reason concludes
    /// it, it reads as a client that left (every line is written with the reason it ended with).
    pub fn begin(id: u64) -> Self {
        Decision {
            event: "decision",
            time: now(),
            id,
            requested_host: None,
            host: None,
            port: None,
            decision: egress::Decision::Deny,
            reason: GatewayReason::ClientEof,
            error: None,
            resolved: Vec::new(),
            allowed_by_cidr: Vec::new(),
            dialed: None,
            sni: None,
            client_hello_bytes: None,
            dns_ms: None,
            connect_ms: None,
        }
    }

    /// Settles the tunnel's reason, and with it the decision.
    pub fn conclude(&mut self, reason: GatewayReason) {
        self.reason = reason;
        self.decision = reason.decision();
    }
}

/// The end of a spliced tunnel.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Close {
    pub event: &'static str,
    pub time: String,
    pub id: u64,
    pub host: String,
    /// Bytes from upstream to the client.
    pub bytes_in: u64,
    /// Bytes from the client to upstream, the replayed ClientHello included.
    pub bytes_out: u64,
    pub duration_ms: f64,
    /// `completed`, `idle_timeout`, `gateway_shutdown` or `error: …`.
    pub close_reason: CloseReason,
}

/// Where decision and close lines go.
pub trait Journal: Send + Sync + 'static {
    fn decision(&self, decision: &Decision);
    fn close(&self, close: &Close);
}

/// JSON lines on stdout (`roundtable gateway serve`), written by a thread of their own through a
/// bounded queue: a reader that stalls the pipe must not stall the tunnels. Lines that find the
/// queue full are counted as dropped.
pub struct StdoutJournal {
    lines: std::sync::mpsc::SyncSender<String>,
    counters: Arc<Counters>,
}

impl StdoutJournal {
    /// Lines queued before new ones are dropped.
    const QUEUE: usize = 16 * 1024;

    /// The journal and its writer; [`JournalWriter::finish`] waits for the queued lines once the
    /// journal (every gateway holding it) is gone.
    pub fn new(counters: Arc<Counters>) -> (Self, JournalWriter) {
        let (lines, queued) = std::sync::mpsc::sync_channel::<String>(Self::QUEUE);
        let thread = std::thread::spawn(move || {
            let mut out = std::io::stdout().lock();
            for line in queued {
                // A closed stdout must not take tunnels down with it.
                if out.write_all(line.as_bytes()).and_then(|()| out.flush()).is_err() {
                    return;
                }
            }
        });
        (Self { lines, counters }, JournalWriter { thread })
    }

    fn line(&self, value: &impl Serialize) {
        if let Ok(mut text) = serde_json::to_string(value) {
            text.push('\n');
            if self.lines.try_send(text).is_err() {
                self.counters.line_dropped();
            }
        }
    }
}

/// The thread writing a [`StdoutJournal`]'s lines.
pub struct JournalWriter {
    thread: std::thread::JoinHandle<()>,
}

impl JournalWriter {
    /// Waits until every queued line is written, which ends when the last journal is dropped.
    pub fn finish(self) {
        let _ = self.thread.join();
    }
}

impl Journal for StdoutJournal {
    fn decision(&self, decision: &Decision) {
        self.line(decision);
    }

    fn close(&self, close: &Close) {
        self.line(close);
    }
}

/// Running totals of one gateway.
#[derive(Debug, Default)]
pub struct Counters {
    allowed: AtomicU64,
    denied: AtomicU64,
    abandoned: AtomicU64,
    lines_dropped: AtomicU64,
    active: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    restarts: AtomicU64,
    reasons: Mutex<BTreeMap<GatewayReason, u64>>,
}

/// A copy of [`Counters`] at one moment (the type sessions and `status` record).
pub use roundtable_specs::session::EgressCounters as CounterSnapshot;

impl Counters {
    pub(crate) fn record(&self, decision: &Decision) {
        let reason = decision.reason;
        if reason.is_allowed() {
            self.allowed.fetch_add(1, Ordering::Relaxed);
        } else if reason.is_abandoned() {
            // Not a refusal: nobody asked for anything the policy said no to.
            self.abandoned.fetch_add(1, Ordering::Relaxed);
        } else {
            self.denied.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut reasons) = self.reasons.lock() {
                *reasons.entry(reason).or_default() += 1;
            }
        }
    }

    pub(crate) fn tunnel_opened(&self) {
        self.active.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn tunnel_closed(&self, close: &Close) {
        self.active.fetch_sub(1, Ordering::Relaxed);
        self.bytes_in.fetch_add(close.bytes_in, Ordering::Relaxed);
        self.bytes_out.fetch_add(close.bytes_out, Ordering::Relaxed);
    }

    /// A journal line that was not written (a journal's own budget or queue was full).
    pub fn line_dropped(&self) {
        self.lines_dropped.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn restarted(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            allowed: self.allowed.load(Ordering::Relaxed),
            denied: self.denied.load(Ordering::Relaxed),
            abandoned: self.abandoned.load(Ordering::Relaxed),
            lines_dropped: self.lines_dropped.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            restarts: self.restarts.load(Ordering::Relaxed),
            denials: self.reasons.lock().map(|reasons| reasons.clone()).unwrap_or_default(),
        }
    }
}

/// RFC 3339 UTC with milliseconds, for log lines.
pub(crate) fn now() -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    time::OffsetDateTime::now_utc().format(&format).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use roundtable_specs::egress::AddressClass;

    use super::*;

    #[test]
    fn lines_carry_the_wire_strings_and_counters_sort_reasons_apart() {
        let mut decision = Decision {
            time: "2025-01-01T12:00:00.000Z".into(),
            requested_host: Some("api.example.com:443".into()),
            host: Some("api.example.com".into()),
            port: Some(443),
            resolved: vec!["169.254.169.254".parse().expect("ip")],
            ..Decision::begin(1)
        };
        decision.conclude(AddressClass::Metadata.into());
        let line = serde_json::to_string(&decision).expect("json");
        assert!(line.contains(r#""decision":"deny","reason":"address_denied:metadata","error":null"#), "{line}");
        let close = Close {
            event: "close",
            time: "2025-01-01T12:00:01.000Z".into(),
            id: 1,
            host: "api.example.com".into(),
            bytes_in: 1,
            bytes_out: 2,
            duration_ms: 3.5,
            close_reason: CloseReason::Error("Broken pipe (os error 32)".into()),
        };
        let line = serde_json::to_string(&close).expect("json");
        assert!(line.ends_with(r#""close_reason":"error: Broken pipe (os error 32)"}"#), "{line}");

        let counters = Counters::default();
        counters.record(&decision);
        decision.conclude(GatewayReason::ClientEof);
        counters.record(&decision);
        decision.conclude(GatewayReason::GatewayShutdown);
        counters.record(&decision);
        decision.conclude(GatewayReason::Allowed);
        assert_eq!(decision.decision, egress::Decision::Allow);
        counters.record(&decision);
        let snapshot = counters.snapshot();
        assert_eq!((snapshot.allowed, snapshot.denied, snapshot.abandoned), (1, 1, 2));
        assert_eq!(snapshot.denials, BTreeMap::from([(GatewayReason::AddressDenied(AddressClass::Metadata), 1)]));
    }
}
