//! The gateway's metrics in the process-wide registry: one count per decision by reason code,
//! and the time or size of each lookup, dial, ClientHello and finished tunnel. Labels are only
//! reason codes and directions, never hosts or addresses.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use roundtable_specs::egress::GatewayReason;
use roundtable_telemetry::{CounterVec, Histogram, HistogramVec};

use crate::journal::Close;

/// Decisions by `reason` (the decision line's reason code: `allowed`, a refusal, or
/// `client_eof`/`gateway_shutdown` for an abandoned tunnel).
pub const DECISIONS_TOTAL: &str = "roundtable_gateway_decisions_total";
/// Each tunnel's one lookup, answered, failed or timed out.
pub const DNS_LOOKUP_SECONDS: &str = "roundtable_gateway_dns_lookup_seconds";
/// Each dial of a pinned address, connected, refused or timed out.
pub const CONNECT_SECONDS: &str = "roundtable_gateway_connect_seconds";
/// Each valid ClientHello, in bytes (its records' headers included).
pub const CLIENT_HELLO_BYTES: &str = "roundtable_gateway_client_hello_bytes";
/// Each finished tunnel's bytes by `direction`: `upstream` (client to upstream, the replayed
/// ClientHello included) and `downstream`.
pub const TUNNEL_BYTES: &str = "roundtable_gateway_tunnel_bytes";
/// Each finished tunnel, from accept to close.
pub const TUNNEL_DURATION_SECONDS: &str = "roundtable_gateway_tunnel_duration_seconds";

/// A cached lookup takes about a millisecond and the default DNS timeout is 5 s.
const LOOKUP_BOUNDS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];
/// A dial is one round trip (sub-millisecond nearby) up to the 10 s default connect timeout.
const CONNECT_BOUNDS: [f64; 13] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Classic ClientHellos are 250 to 700 bytes, post-quantum key shares push them near 2 KiB, and
/// 16 KiB is the default limit.
const CLIENT_HELLO_BOUNDS: [f64; 8] = [128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];
/// Powers of four from 1 KiB (a refused API call) to 1 GiB (a model or image download).
const TUNNEL_BYTES_BOUNDS: [f64; 11] = [
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
    268_435_456.0,
    1_073_741_824.0,
];
/// From a quick API call to a stream held open past the one-hour default idle timeout.
const TUNNEL_SECONDS_BOUNDS: [f64; 12] = [0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0];

struct Metrics {
    decisions: Arc<CounterVec>,
    dns_lookup: Arc<Histogram>,
    connect: Arc<Histogram>,
    client_hello: Arc<Histogram>,
    tunnel_bytes: Arc<HistogramVec>,
    tunnel_duration: Arc<Histogram>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = roundtable_telemetry::global();
        Metrics {
            decisions: registry.counter_vec(DECISIONS_TOTAL, "Egress gateway decisions by reason code.", &["reason"]),
            dns_lookup: registry.histogram(DNS_LOOKUP_SECONDS, "Egress gateway DNS lookups.", &LOOKUP_BOUNDS),
            connect: registry.histogram(CONNECT_SECONDS, "Egress gateway dials of a pinned address.", &CONNECT_BOUNDS),
            client_hello: registry.histogram(
                CLIENT_HELLO_BYTES,
                "Sizes of the valid ClientHellos the egress gateway checked.",
                &CLIENT_HELLO_BOUNDS,
            ),
            tunnel_bytes: registry.histogram_vec(
                TUNNEL_BYTES,
                "Bytes per finished egress tunnel and direction.",
                &["direction"],
                &TUNNEL_BYTES_BOUNDS,
            ),
            tunnel_duration: registry.histogram(
                TUNNEL_DURATION_SECONDS,
                "Durations of finished egress tunnels, from accept to close.",
                &TUNNEL_SECONDS_BOUNDS,
            ),
        }
    })
}

/// Registers every family, so a scrape shows them before the first tunnel.
pub fn register() {
    metrics();
}

pub(crate) fn decision(reason: GatewayReason) {
    metrics().decisions.with_label_values(&[reason.as_str()]).inc();
}

pub(crate) fn dns_lookup(elapsed: Duration) {
    metrics().dns_lookup.observe_duration(elapsed);
}

pub(crate) fn dial(elapsed: Duration) {
    metrics().connect.observe_duration(elapsed);
}

pub(crate) fn client_hello(bytes: usize) {
    metrics().client_hello.observe(bytes as f64);
}

pub(crate) fn tunnel_closed(close: &Close, elapsed: Duration) {
    let metrics = metrics();
    metrics.tunnel_bytes.with_label_values(&["upstream"]).observe(close.bytes_out as f64);
    metrics.tunnel_bytes.with_label_values(&["downstream"]).observe(close.bytes_in as f64);
    metrics.tunnel_duration.observe_duration(elapsed);
}
