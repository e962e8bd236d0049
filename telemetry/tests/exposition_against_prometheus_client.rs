//! Where what a scrape gets from our registry differs from what the Prometheus project's
//! `prometheus-client` (0.26, its text format 0.0.4 encoder unless said) writes for the same
//! calls: the evidence behind keeping `telemetry/` in `docs/architecture.md`'s dependency table.
//! Each test asserts our behaviour and pins the library's; if a library upgrade fails one, the
//! library changed, and the table's row needs another look.
//!
//! Where the two agree it is not tested here: both escape `\`, `"` and a newline in label values
//! alike (the library since 0.25.2), and both write `NaN` and `+Inf`.

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use roundtable_telemetry::{MAX_LABEL_SETS, MAX_LABEL_VALUE_BYTES, Registry, check_label_name, check_metric_name};

type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect()
}

fn library_text(registry: &prometheus_client::registry::Registry) -> String {
    let mut out = String::new();
    prometheus_text::encode(&mut out, registry).expect("writing to a String cannot fail");
    out
}

/// What makes each sample line of `text` unreadable to a Prometheus scrape: a metric or label
/// name outside the grammar, or a label name given twice. Empty for a valid exposition.
fn problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for line in text.lines().filter(|line| !line.is_empty() && !line.starts_with('#')) {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        if check_metric_name(&line[..name_end]).is_err() {
            problems.push(format!("metric name in {line:?}"));
        }
        let mut seen: Vec<&str> = Vec::new();
        for name in label_names(&line[name_end..]) {
            if check_label_name(name).is_err() {
                problems.push(format!("label name {name:?} in {line:?}"));
            }
            if seen.contains(&name) {
                problems.push(format!("label {name:?} twice in {line:?}"));
            }
            seen.push(name);
        }
    }
    problems
}

/// The label names of a sample line's rest, `{a="x",b="y\"z"} 1`.
fn label_names(rest: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let Some(mut rest) = rest.strip_prefix('{') else { return names };
    while let Some((name, value_and_after)) = rest.split_once("=\"") {
        names.push(name);
        // The value ends at the first quote no backslash escapes.
        let mut escaped = false;
        let end = value_and_after.char_indices().find_map(|(index, c)| match (escaped, c) {
            (true, _) => {
                escaped = false;
                None
            }
            (false, '\\') => {
                escaped = true;
                None
            }
            (false, '"') => Some(index),
            (false, _) => None,
        });
        let after = end.and_then(|end| value_and_after.get(end + 1..)).unwrap_or_default();
        match after.strip_prefix(',') {
            Some(next) => rest = next,
            None => break,
        }
    }
    names
}

#[test]
fn a_label_flood_is_capped_here_and_kept_whole_by_prometheus_client() {
    let hosts = 5_000;
    let host = |n: usize| format!("refused-{n}.{}", "x".repeat(300));

    let ours = Registry::new();
    let refused = ours.counter_vec("gateway_refused_total", "", &["host"]);
    for n in 0..hosts {
        refused.with_label_values(&[&host(n)]).inc();
    }
    let text = ours.render();
    let series: Vec<&str> = text.lines().filter(|line| !line.starts_with('#')).collect();
    assert_eq!(series.len(), MAX_LABEL_SETS + 1, "the cap, plus the overflow series");
    assert!(series.contains(&"gateway_refused_total{host=\"_overflow\"} 4000"));
    assert!(series.iter().all(|line| line.len() < MAX_LABEL_VALUE_BYTES + 64), "values are cut");

    let mut library = prometheus_client::registry::Registry::default();
    let family = Family::<Labels, Counter>::default();
    library.register("gateway_refused", "", family.clone());
    for n in 0..hosts {
        family.get_or_create(&labels(&[("host", &host(n))])).inc();
    }
    let text = library_text(&library);
    let series: Vec<&str> = text.lines().filter(|line| !line.starts_with('#')).collect();
    assert_eq!(series.len(), hosts, "prometheus-client keeps a series per value");
    assert!(series.iter().all(|line| line.len() > 300), "and every value whole");
}

/// A strict parser (Python's `prometheus_client`, say) rejects the library's whole exposition
/// here: `bad-name 1`, `{bad-label="x"}` and `{le="x",le="1"}` are not the format.
#[test]
fn invalid_names_are_left_out_here_and_emitted_by_prometheus_client() {
    let ours = Registry::new();
    ours.gauge("bad-name", "").set(1);
    ours.counter_vec("labelled_total", "", &["bad-label"]).with_label_values(&["x"]).inc();
    ours.histogram_vec("latency_seconds", "", &["le"], &[1.0]).with_label_values(&["x"]).observe(0.5);
    ours.counter("good_total", "").inc();
    let text = ours.render();
    assert_eq!(text, "# TYPE good_total counter\ngood_total 1\n", "only the valid family");

    let mut library = prometheus_client::registry::Registry::default();
    let gauge: Gauge = Gauge::default();
    gauge.set(1);
    library.register("bad-name", "", gauge);
    let labelled = Family::<Labels, Counter>::default();
    labelled.get_or_create(&labels(&[("bad-label", "x")])).inc();
    library.register("labelled", "", labelled);
    let latency = Family::<Labels, Histogram>::new_with_constructor(|| Histogram::new([1.0]));
    latency.get_or_create(&labels(&[("le", "x")])).observe(0.5);
    library.register("latency_seconds", "", latency);
    let problems = problems(&library_text(&library));
    assert_eq!(
        problems,
        [
            "metric name in \"bad-name 1\"",
            "label name \"bad-label\" in \"labelled_total{bad-label=\\\"x\\\"} 1\"",
            "label \"le\" twice in \"latency_seconds_bucket{le=\\\"x\\\",le=\\\"1\\\"} 1\"",
            "label \"le\" twice in \"latency_seconds_bucket{le=\\\"x\\\",le=\\\"+Inf\\\"} 1\"",
        ]
    );
}

/// Two crates registering the same counter: one family here; two families of one name in the
/// library, which OpenMetrics forbids (Python's parser: "Received metadata after samples").
#[test]
fn a_name_registered_twice_is_one_family_here_and_two_in_prometheus_client() {
    let ours = Registry::new();
    ours.counter("retries_total", "Retries.").inc();
    ours.counter("retries_total", "Retries.").inc_by(2);
    assert_eq!(ours.render(), "# HELP retries_total Retries.\n# TYPE retries_total counter\nretries_total 3\n");

    let mut library = prometheus_client::registry::Registry::default();
    let (first, second): (Counter, Counter) = (Counter::default(), Counter::default());
    first.inc();
    second.inc_by(2);
    library.register("retries", "Retries", first);
    library.register("retries", "Retries", second);
    let mut openmetrics = String::new();
    text::encode(&mut openmetrics, &library).expect("writing to a String cannot fail");
    assert_eq!(openmetrics.matches("# TYPE retries counter\n").count(), 2, "{openmetrics}");
    assert_eq!(library_text(&library).matches("# TYPE retries_total counter\n").count(), 2);
}

/// Bucket bounds given out of order: sorted here; kept in order by the library, whose cumulative
/// counts then say an observation of 0.5 was at most 0.1.
#[test]
fn unsorted_bucket_bounds_are_sorted_here_and_kept_in_order_by_prometheus_client() {
    let ours = Registry::new();
    ours.histogram("wait_seconds", "", &[1.0, 0.1]).observe(0.5);
    let text = ours.render();
    assert!(text.contains("wait_seconds_bucket{le=\"0.1\"} 0\nwait_seconds_bucket{le=\"1\"} 1\n"), "{text}");

    let mut library = prometheus_client::registry::Registry::default();
    let histogram = Histogram::new([1.0, 0.1]);
    histogram.observe(0.5);
    library.register("wait_seconds", "", histogram);
    let text = library_text(&library);
    assert!(text.contains("wait_seconds_bucket{le=\"1\"} 1\nwait_seconds_bucket{le=\"0.1\"} 1\n"), "{text}");
}

/// Help text with a newline: escaped here and by the library's 0.0.4 encoder; written raw by its
/// OpenMetrics encoder (`encoding::text`), which leaves a line that is no sample and no comment.
#[test]
fn a_newline_in_help_is_escaped_here_and_raw_in_prometheus_clients_openmetrics() {
    let ours = Registry::new();
    ours.counter("jobs_total", "Jobs run.\nSee the docs.").inc();
    assert!(ours.render().starts_with("# HELP jobs_total Jobs run.\\nSee the docs.\n"));

    let mut library = prometheus_client::registry::Registry::default();
    library.register("jobs", "Jobs run.\nSee the docs", Counter::<u64>::default());
    assert!(library_text(&library).starts_with("# HELP jobs_total Jobs run.\\nSee the docs.\n"));
    let mut openmetrics = String::new();
    text::encode(&mut openmetrics, &library).expect("writing to a String cannot fail");
    assert!(openmetrics.starts_with("# HELP jobs Jobs run.\nSee the docs.\n"), "{openmetrics}");
}

#[test]
fn the_line_checker_reads_escaped_values() {
    assert_eq!(label_names("{a=\"x\\\",b=\\\\\",c=\"\"} 1"), ["a", "c"]);
    assert!(problems("ok{a=\"1\",b=\"2\"} 1\nok 2\n# HELP x-y anything\n").is_empty());
}
