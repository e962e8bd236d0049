//! The broker's metrics in the process-wide registry: requests by provider scheme and reason,
//! tokens by provider scheme and kind, and each request's duration. Labels are only those fixed
//! words, never hosts, paths or model names.

use std::sync::{Arc, OnceLock};

use roundtable_specs::broker::{BrokerReason, Scheme, Tokens};
use roundtable_telemetry::{CounterVec, Histogram};

/// Brokered requests by `provider` (the scheme's word) and `result` (the reason's word).
pub const REQUESTS_TOTAL: &str = "roundtable_broker_requests_total";
/// Tokens the providers' responses reported, by `provider` and `kind` (`input` | `output`).
pub const TOKENS_TOTAL: &str = "roundtable_broker_tokens_total";
/// Each brokered request, from its head arriving to the last byte passed back.
pub const REQUEST_SECONDS: &str = "roundtable_broker_request_seconds";

/// From a refusal answered at once, through a short completion, to a long agent turn streamed
/// for many minutes.
const REQUEST_SECONDS_BOUNDS: [f64; 14] =
    [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0];

struct Metrics {
    requests: Arc<CounterVec>,
    tokens: Arc<CounterVec>,
    request_seconds: Arc<Histogram>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = roundtable_telemetry::global();
        Metrics {
            requests: registry.counter_vec(
                REQUESTS_TOTAL,
                "Credential broker requests by provider scheme and result.",
                &["provider", "result"],
            ),
            tokens: registry.counter_vec(
                TOKENS_TOTAL,
                "Tokens the providers reported through the credential broker, by provider scheme and kind.",
                &["provider", "kind"],
            ),
            request_seconds: registry.histogram(
                REQUEST_SECONDS,
                "Durations of credential broker requests, from the request head to the last response byte.",
                &REQUEST_SECONDS_BOUNDS,
            ),
        }
    })
}

/// Registers every family, so a scrape shows them before the first request.
pub fn register() {
    metrics();
}

pub fn request(scheme: Scheme, reason: BrokerReason) {
    metrics().requests.with_label_values(&[scheme.as_str(), reason.as_str()]).inc();
}

pub fn tokens(scheme: Scheme, tokens: Tokens) {
    let family = &metrics().tokens;
    family.with_label_values(&[scheme.as_str(), "input"]).inc_by(tokens.input);
    family.with_label_values(&[scheme.as_str(), "output"]).inc_by(tokens.output);
}

pub fn duration(seconds: f64) {
    metrics().request_seconds.observe(seconds);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(series: &str) -> f64 {
        roundtable_telemetry::global().sample(series).unwrap_or(0.0)
    }

    #[test]
    fn the_series_are_rendered_in_the_process_registry() {
        register();
        // A labelled family shows from its first series on; the histogram from registration.
        let rendered = roundtable_telemetry::global().render();
        assert!(rendered.contains(&format!("# TYPE {REQUEST_SECONDS} histogram")), "{rendered}");

        let requests = format!("{REQUESTS_TOTAL}{{provider=\"anthropic\",result=\"budget_exhausted\"}}");
        let input = format!("{TOKENS_TOTAL}{{provider=\"gemini\",kind=\"input\"}}");
        let output = format!("{TOKENS_TOTAL}{{provider=\"gemini\",kind=\"output\"}}");
        let count = format!("{REQUEST_SECONDS}_count");
        let (requests_before, input_before, output_before, count_before) =
            (sample(&requests), sample(&input), sample(&output), sample(&count));

        request(Scheme::Anthropic, BrokerReason::BudgetExhausted);
        request(Scheme::Anthropic, BrokerReason::BudgetExhausted);
        tokens(Scheme::Gemini, Tokens { input: 120, output: 30 });
        duration(0.3);

        assert_eq!(sample(&requests) - requests_before, 2.0);
        assert_eq!(sample(&input) - input_before, 120.0);
        assert_eq!(sample(&output) - output_before, 30.0);
        assert_eq!(sample(&count) - count_before, 1.0);
        let rendered = roundtable_telemetry::global().render();
        assert!(rendered.contains(&format!("# TYPE {REQUESTS_TOTAL} counter")), "{rendered}");
        assert!(rendered.contains(&format!("# TYPE {TOKENS_TOTAL} counter")), "{rendered}");
        assert!(rendered.contains(&format!("{REQUEST_SECONDS}_bucket{{le=\"0.5\"}} ")), "{rendered}");
        assert!(sample(&format!("{REQUEST_SECONDS}_bucket{{le=\"0.25\"}}")) < sample(&count), "0.3 s is above 0.25");
    }
}
