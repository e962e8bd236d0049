//! The broker's metrics in the process-wide registry (a minimal stand-in until the `usage` branch
//! lands): requests by scheme and reason, tokens by scheme and direction. Labels are words only,
//! never hosts, paths or credentials.

use std::sync::{Arc, OnceLock};

use roundtable_specs::broker::{BrokerReason, Scheme, Tokens};
use roundtable_telemetry::CounterVec;

struct Metrics {
    requests: Arc<CounterVec>,
    tokens: Arc<CounterVec>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = roundtable_telemetry::global();
        Metrics {
            requests: registry.counter_vec(
                "roundtable_broker_requests_total",
                "Brokered requests by scheme and reason.",
                &["scheme", "reason"],
            ),
            tokens: registry.counter_vec(
                "roundtable_broker_tokens_total",
                "Tokens reported by brokered responses.",
                &["scheme", "direction"],
            ),
        }
    })
}

pub fn register() {
    metrics();
}

pub fn request(scheme: Scheme, reason: BrokerReason) {
    metrics().requests.with_label_values(&[scheme.as_str(), reason.as_str()]).inc();
}

pub fn tokens(scheme: Scheme, tokens: Tokens) {
    let metrics = metrics();
    metrics.tokens.with_label_values(&[scheme.as_str(), "input"]).inc_by(tokens.input);
    metrics.tokens.with_label_values(&[scheme.as_str(), "output"]).inc_by(tokens.output);
}
