//! The registry: families by name, registered idempotently, and the text a scrape gets.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::computed::ComputedFamily;
use crate::counter::Counter;
use crate::exposition::{check_family, write_header};
use crate::family::{CounterVec, Family, GaugeVec, HistogramVec};
use crate::gauge::Gauge;
use crate::histogram::{Histogram, normalize_bounds};
use crate::metric::Metric;

/// Named metric families. Most code uses the process-wide one, [`crate::global`]; tests that
/// compare exact output use their own.
#[derive(Default)]
pub struct Registry {
    families: Mutex<BTreeMap<String, Registered>>,
}

struct Registered {
    help: String,
    family: Arc<dyn Exposed>,
}

/// A family of any metric type, as the registry stores and renders it.
trait Exposed: Any + Send + Sync {
    fn kind(&self) -> &'static str;
    fn write_samples(&self, name: &str, out: &mut String);
}

impl<M: Metric> Exposed for Family<M> {
    fn kind(&self) -> &'static str {
        M::TYPE
    }

    fn write_samples(&self, name: &str, out: &mut String) {
        Family::write_samples(self, name, out);
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.lock().keys().cloned().collect();
        f.debug_struct("Registry").field("families", &names).finish()
    }
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The counter `name`, registered on first call.
    pub fn counter(&self, name: &str, help: &str) -> Arc<Counter> {
        self.register::<Counter>(name, help, &[], ()).with_label_values(&[])
    }

    /// The gauge `name`, registered on first call.
    pub fn gauge(&self, name: &str, help: &str) -> Arc<Gauge> {
        self.register::<Gauge>(name, help, &[], ()).with_label_values(&[])
    }

    /// The histogram `name` with these bucket upper bounds (see [`Histogram::new`]), registered
    /// on first call.
    pub fn histogram(&self, name: &str, help: &str, bounds: &[f64]) -> Arc<Histogram> {
        self.register::<Histogram>(name, help, &[], normalize_bounds(bounds)).with_label_values(&[])
    }

    /// The counter family `name` with these label names, registered on first call.
    pub fn counter_vec(&self, name: &str, help: &str, label_names: &[&str]) -> Arc<CounterVec> {
        self.register(name, help, label_names, ())
    }

    /// The gauge family `name` with these label names, registered on first call.
    pub fn gauge_vec(&self, name: &str, help: &str, label_names: &[&str]) -> Arc<GaugeVec> {
        self.register(name, help, label_names, ())
    }

    /// The histogram family `name` with these label names and bucket bounds, registered on first
    /// call.
    pub fn histogram_vec(&self, name: &str, help: &str, label_names: &[&str], bounds: &[f64]) -> Arc<HistogramVec> {
        self.register(name, help, label_names, normalize_bounds(bounds))
    }

    /// The family `name` if it is registered with this type, these label names and this shape;
    /// a new one, registered, if the name is free. Otherwise (an invalid name, or the name taken
    /// by something else) a detached family that works but is never rendered: a metric must not
    /// take its process down, and the warning names the conflict.
    fn register<M: Metric>(&self, name: &str, help: &str, label_names: &[&str], shape: M::Shape) -> Arc<Family<M>> {
        let label_names: Vec<String> = label_names.iter().map(|label| (*label).to_owned()).collect();
        if let Err(error) = check_family(name, &label_names, M::TYPE == "histogram") {
            tracing::warn!(%error, "metric {name} cannot be exported; it is recorded but not rendered");
            return Arc::new(Family::new(label_names, shape));
        }
        let mut families = self.lock();
        if let Some(existing) = families.get(name) {
            let any: Arc<dyn Any + Send + Sync> = existing.family.clone();
            return match any.downcast::<Family<M>>() {
                Ok(family) if family.label_names() == label_names && *family.shape() == shape => family,
                _ => {
                    tracing::warn!(
                        "metric {name} is already registered as a {} with other labels or buckets; \
                         this {} {label_names:?} is recorded but not rendered",
                        existing.family.kind(),
                        M::TYPE,
                    );
                    Arc::new(Family::new(label_names, shape))
                }
            };
        }
        let family = Arc::new(Family::<M>::new(label_names, shape));
        if family.label_names().is_empty() {
            // An unlabelled metric is rendered (as zero) from its registration on.
            family.with_label_values(&[]);
        }
        families.insert(name.to_owned(), Registered { help: help.to_owned(), family: family.clone() });
        family
    }

    /// Every registered family, in the text exposition format 0.0.4, sorted by name; a labelled
    /// family with no series yet has its `HELP` and `TYPE` lines, so a scraper and a dashboard
    /// see every family from the start.
    /// The value of one rendered series (`name{labels}` exactly as rendered), if present: what a
    /// test reads back.
    pub fn sample(&self, series: &str) -> Option<f64> {
        let prefix = format!("{series} ");
        self.render().lines().find_map(|line| line.strip_prefix(&prefix)).and_then(|value| value.parse().ok())
    }

    pub fn render(&self) -> String {
        self.render_with(&[])
    }

    /// [`Self::render`] with families computed for this scrape merged in by name. A computed
    /// family whose name is invalid or already registered is left out (with a warning): a name
    /// may appear once in an exposition.
    pub fn render_with(&self, computed: &[ComputedFamily]) -> String {
        enum Source<'a> {
            Registered(String, Arc<dyn Exposed>),
            Computed(&'a ComputedFamily),
        }
        let mut sources: BTreeMap<String, Source> = self
            .lock()
            .iter()
            .map(|(name, registered)| {
                (name.clone(), Source::Registered(registered.help.clone(), registered.family.clone()))
            })
            .collect();
        for family in computed {
            if let Err(error) = family.check() {
                tracing::warn!(%error, "computed metric {} is left out of the scrape", family.name());
            } else if sources.contains_key(family.name()) {
                tracing::warn!("computed metric {} is a registered name too; it is left out", family.name());
            } else {
                sources.insert(family.name().to_owned(), Source::Computed(family));
            }
        }
        // The registry's lock is not held from here: rendering never blocks a registration.
        let mut out = String::new();
        for (name, source) in sources {
            match source {
                Source::Registered(help, family) => {
                    write_header(&mut out, &name, &help, family.kind());
                    family.write_samples(&name, &mut out);
                }
                Source::Computed(family) => family.write(&mut out),
            }
        }
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Registered>> {
        // A poisoned lock only means a registration panicked elsewhere; the map is intact.
        self.families.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_is_rendered_exactly() {
        let registry = Registry::new();
        let decisions = registry.counter("test_decisions_total", "Decisions made.");
        decisions.inc();
        decisions.inc_by(2);
        assert_eq!(
            registry.render(),
            "# HELP test_decisions_total Decisions made.\n# TYPE test_decisions_total counter\ntest_decisions_total 3\n"
        );
    }

    #[test]
    fn a_labelled_gauge_is_rendered_exactly_with_children_in_label_order() {
        let registry = Registry::new();
        let depth = registry.gauge_vec("test_depth", "Keys queued.", &["queue", "kind"]);
        depth.with_label_values(&["slow", "b"]).set(-2);
        depth.with_label_values(&["fast", "a\"b\\c\nd"]).inc();
        let expected = concat!(
            "# HELP test_depth Keys queued.\n",
            "# TYPE test_depth gauge\n",
            "test_depth{queue=\"fast\",kind=\"a\\\"b\\\\c\\nd\"} 1\n",
            "test_depth{queue=\"slow\",kind=\"b\"} -2\n",
        );
        assert_eq!(registry.render(), expected);
    }

    #[test]
    fn a_histogram_is_rendered_exactly_with_cumulative_buckets() {
        let registry = Registry::new();
        let sizes = registry.histogram_vec("test_bytes", "Bytes per tunnel.", &["direction"], &[100.0, 1000.0]);
        let up = sizes.with_label_values(&["upstream"]);
        for bytes in [50.0, 100.0, 500.0, 5000.0] {
            up.observe(bytes);
        }
        let expected = concat!(
            "# HELP test_bytes Bytes per tunnel.\n",
            "# TYPE test_bytes histogram\n",
            "test_bytes_bucket{direction=\"upstream\",le=\"100\"} 2\n",
            "test_bytes_bucket{direction=\"upstream\",le=\"1000\"} 3\n",
            "test_bytes_bucket{direction=\"upstream\",le=\"+Inf\"} 4\n",
            "test_bytes_sum{direction=\"upstream\"} 5650\n",
            "test_bytes_count{direction=\"upstream\"} 4\n",
        );
        assert_eq!(registry.render(), expected);
    }

    #[test]
    fn an_unlabelled_histogram_shows_zeroes_from_registration() {
        let registry = Registry::new();
        registry.histogram("test_seconds", "", &[0.5]);
        let expected = concat!(
            "# TYPE test_seconds histogram\n",
            "test_seconds_bucket{le=\"0.5\"} 0\n",
            "test_seconds_bucket{le=\"+Inf\"} 0\n",
            "test_seconds_sum 0\n",
            "test_seconds_count 0\n",
        );
        assert_eq!(registry.render(), expected);
    }

    #[test]
    fn registering_again_returns_the_same_metric_and_a_conflict_a_detached_one() {
        let registry = Registry::new();
        registry.counter("test_total", "first").inc();
        registry.counter("test_total", "second help is ignored").inc();
        assert_eq!(registry.counter("test_total", "").get(), 2);
        let family = registry.counter_vec("test_labelled_total", "", &["a"]);
        assert!(Arc::ptr_eq(&family, &registry.counter_vec("test_labelled_total", "", &["a"])));
        let same_bounds = registry.histogram("test_h", "", &[1.0, 2.0]);
        assert!(Arc::ptr_eq(&same_bounds, &registry.histogram("test_h", "", &[2.0, 1.0, 2.0])));

        // Another type, other labels or other buckets under a taken name: recorded, not rendered.
        registry.gauge("test_total", "").set(99);
        registry.counter_vec("test_total", "", &["a"]).with_label_values(&["x"]).inc();
        registry.counter_vec("test_labelled_total", "", &["b"]).with_label_values(&["x"]).inc();
        registry.histogram("test_h", "", &[3.0]).observe(1.0);
        // Invalid names are never rendered either.
        registry.counter("test-dash", "").inc();
        registry.histogram_vec("test_le", "", &["le"], &[1.0]).with_label_values(&["x"]).observe(1.0);
        let text = registry.render();
        assert!(text.contains("# TYPE test_total counter\ntest_total 2\n"), "{text}");
        assert!(!text.contains("99") && !text.contains("b=\"x\"") && !text.contains("test-dash"), "{text}");
        assert!(!text.contains("test_le"), "{text}");
        assert!(text.contains("test_h_count 0\n"), "{text}");
        assert!(
            text.contains("# TYPE test_labelled_total counter\n") && !text.contains("test_labelled_total{"),
            "an empty family has its header and no series: {text}"
        );
    }

    #[test]
    fn families_are_sorted_by_name_and_computed_ones_merged_in() {
        let registry = Registry::new();
        registry.counter("b_total", "").inc();
        registry.gauge("d", "").set(4);
        let mut phases = ComputedFamily::gauge("c_executions", "By phase\\cause.", &["phase", "cause"]);
        phases.add(&["Running", ""], 1.0).add(&["Running", ""], 1.0).set(&["Failed", "Timeout"], 1.0);
        let mut total = ComputedFamily::counter("a_total", "", &[]);
        total.set(&[], 0.5);
        let clash = ComputedFamily::gauge("d", "", &[]).set(&[], 7.0).clone();
        let invalid = ComputedFamily::gauge("e-f", "", &[]).set(&[], 1.0).clone();
        let empty = ComputedFamily::gauge("f_empty", "", &["x"]);
        let expected = concat!(
            "# TYPE a_total counter\n",
            "a_total 0.5\n",
            "# TYPE b_total counter\n",
            "b_total 1\n",
            "# HELP c_executions By phase\\\\cause.\n",
            "# TYPE c_executions gauge\n",
            "c_executions{phase=\"Failed\",cause=\"Timeout\"} 1\n",
            "c_executions{phase=\"Running\",cause=\"\"} 2\n",
            "# TYPE d gauge\n",
            "d 4\n",
            "# TYPE f_empty gauge\n",
        );
        assert_eq!(registry.render_with(&[phases, total, clash, invalid, empty]), expected);
    }

    #[test]
    fn a_hostile_label_value_stream_keeps_the_rendering_bounded() {
        let registry = Registry::new();
        let hosts = registry.counter_vec("test_hosts_total", "", &["host"]);
        for n in 0..5000 {
            hosts.with_label_values(&[&format!("{n}{}", "x".repeat(10_000))]).inc();
        }
        let text = registry.render();
        let lines = text.lines().filter(|line| line.starts_with("test_hosts_total{")).count();
        assert_eq!(lines, crate::MAX_LABEL_SETS + 1);
        assert!(text.contains("test_hosts_total{host=\"_overflow\"} 4000\n"));
        assert!(text.len() < (crate::MAX_LABEL_SETS + 1) * (crate::MAX_LABEL_VALUE_BYTES + 64));
    }

    #[test]
    fn the_global_registry_is_one_per_process() {
        assert!(std::ptr::eq(crate::global(), crate::global()));
    }
}
