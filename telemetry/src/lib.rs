//! Roundtable's process-wide metrics, rendered in the Prometheus text format, and the one way a
//! failure is rendered for a log line or a message ([`error_chain`]).
//!
//! One [`Registry`] per process ([`global`]) holds named families of [`Counter`]s, [`Gauge`]s and
//! [`Histogram`]s. A family is registered once by name, help text and label names; registering
//! the same name again returns the same family, so each crate can register what it records where
//! it records it. Observations are lock-free atomics, apart from finding the child of a label set
//! (one short mutex per family). [`Registry::render`] writes the text exposition format 0.0.4
//! that Prometheus scrapes; [`Registry::render_with`] adds families computed at scrape time
//! ([`ComputedFamily`]).
//!
//! Memory stays bounded whatever the label values: a family keeps at most [`MAX_LABEL_SETS`]
//! label sets (later ones are counted under [`OVERFLOW_LABEL`]) and label values are cut to
//! [`MAX_LABEL_VALUE_BYTES`]. Nothing here panics on a misuse: a name that is not a valid
//! Prometheus name, or a name registered again as another type, gets a working metric that is
//! not exported, and a `tracing` warning says so.
//!
//! ```
//! let registry = roundtable_telemetry::Registry::new();
//! let requests = registry.counter_vec("demo_requests_total", "Requests by result.", &["result"]);
//! requests.with_label_values(&["ok"]).inc();
//! assert!(registry.render().contains("demo_requests_total{result=\"ok\"} 1\n"));
//! ```

mod computed;
mod counter;
mod errors;
mod exposition;
mod family;
mod gauge;
mod histogram;
mod metric;
mod process;
mod registry;

pub use computed::ComputedFamily;
pub use counter::Counter;
pub use errors::error_chain;
pub use exposition::{NameError, check_label_name, check_metric_name};
pub use family::{CounterVec, Family, GaugeVec, HistogramVec, MAX_LABEL_SETS, MAX_LABEL_VALUE_BYTES, OVERFLOW_LABEL};
pub use gauge::Gauge;
pub use histogram::{Histogram, exponential_buckets};
pub use metric::Metric;
pub use process::process_families;
pub use registry::Registry;

/// The process-wide registry every Roundtable crate records into and the metrics endpoint
/// renders.
pub fn global() -> &'static Registry {
    static GLOBAL: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(Registry::new)
}
