//! Traces over OTLP/HTTP (protobuf) for the daemon: every `tracing` span (a reconcile, a session
//! and its phases, each egress and broker decision, each MCP tool call) exported through the
//! OpenTelemetry SDK's batch processor. Off unless `start --otlp-endpoint` or the standard
//! variables name a collector. The processor runs on its own thread with a bounded queue: a slow
//! or absent collector loses spans, it never holds the controller up.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The standard variables (OpenTelemetry's exporter specification): a base URL, to which
/// `/v1/traces` is added, and the traces endpoint itself, taken as it is.
pub const BASE_VARIABLE: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub const TRACES_VARIABLE: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// How long one export may take before it is abandoned (and its spans lost).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where traces go: `--otlp-endpoint` (a base URL, as the standard variable is), else
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else `OTEL_EXPORTER_OTLP_ENDPOINT` with
/// `/v1/traces`; `None` when nothing names one. Only `http://`: no TLS client is built in, so a
/// collector is reached on this host or through one of its own.
pub fn endpoint(flag: Option<&str>, traces: Option<&str>, base: Option<&str>) -> Result<Option<String>, String> {
    let given = |value: Option<&str>| value.map(str::trim).filter(|value| !value.is_empty()).map(str::to_owned);
    let (url, source) = match (given(flag), given(traces), given(base)) {
        (Some(flag), _, _) => (with_traces_path(&flag), "--otlp-endpoint"),
        (None, Some(traces), _) => (traces, TRACES_VARIABLE),
        (None, None, Some(base)) => (with_traces_path(&base), BASE_VARIABLE),
        (None, None, None) => return Ok(None),
    };
    match url.strip_prefix("http://") {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(Some(url)),
        _ if url.starts_with("https://") => Err(format!(
            "{source} {url:?}: traces are exported over plain HTTP only (no TLS client is built in); run a collector on this host, e.g. http://127.0.0.1:4318"
        )),
        _ => Err(format!("{source} {url:?} is not an http:// URL")),
    }
}

fn with_traces_path(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

/// The exporting pipeline; [`Exporting::shutdown`] sends what is queued (within the export
/// timeout) before the process exits.
pub struct Exporting {
    provider: SdkTracerProvider,
}

impl Exporting {
    /// Starts exporting to `url` (the traces endpoint) as service `roundtable` at `version`.
    pub fn start(url: &str, version: &str) -> Result<Self, String> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .with_timeout(EXPORT_TIMEOUT)
            .with_headers(Default::default())
            .build()
            .map_err(|error| format!("cannot export traces to {url}: {error}"))?;
        let resource = Resource::builder()
            .with_service_name("roundtable")
            .with_attribute(opentelemetry::KeyValue::new("service.version", version.to_owned()))
            .build();
        let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
        Ok(Self { provider })
    }

    /// The layer that turns `tracing` spans into OpenTelemetry spans.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("roundtable"))
    }

    /// Flushes what is queued and stops the exporter's thread.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("roundtable: traces not all exported at exit: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_and_the_base_variable_get_the_traces_path_and_the_traces_variable_is_taken_whole() {
        assert_eq!(endpoint(None, None, None), Ok(None));
        assert_eq!(
            endpoint(Some("http://127.0.0.1:4318/"), Some("http://x:1/t"), None),
            Ok(Some("http://127.0.0.1:4318/v1/traces".into()))
        );
        assert_eq!(endpoint(None, Some("http://x:1/t"), Some("http://y:2")), Ok(Some("http://x:1/t".into())));
        assert_eq!(endpoint(None, None, Some("http://y:2")), Ok(Some("http://y:2/v1/traces".into())));
        assert_eq!(endpoint(Some(" "), None, None), Ok(None), "an empty value names nothing");
        let refused = endpoint(Some("https://collector:4318"), None, None).expect_err("https");
        assert!(refused.contains("plain HTTP only"), "{refused}");
        assert!(endpoint(None, None, Some("collector:4318")).is_err());
    }
}
