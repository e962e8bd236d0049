//! Our registry beside the Prometheus project's `prometheus-client`, measured in one run: the cost
//! of an observation, of a scrape of a realistic registry, and of a flood of distinct label
//! values. Prints the figures side by side and asserts nothing; the dependency table in
//! `docs/architecture.md` quotes them.
//!
//! `cargo bench -p roundtable-telemetry --bench versus_prometheus_client`. Each timed figure is
//! measured in rounds, ours and the library's taking turns so drift on the machine hits both
//! alike, and printed as p50 / p99 over the rounds. The flood runs each implementation in a
//! child process of its own (this binary again, with `--flood-child`), so the resident-memory
//! figures of one do not include the other's. `ROUNDTABLE_BENCH_SMOKE=1` makes every count tiny:
//! CI runs it so (benches/smoke.sh), to show the bench still runs to the end.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, LazyLock};
use std::time::{Duration, Instant};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

/// How much each figure measures: the full sizes, or tiny ones in a smoke run.
struct Sizes {
    /// Rounds per timed figure; p50 and p99 over them are printed.
    rounds: usize,
    /// Calls per round of an observation figure on a child in hand, and of one with a lookup:
    /// each round lasts some tens of milliseconds, so two threads do overlap.
    calls: u64,
    lookup_calls: u64,
    /// Scrapes per round of a scrape figure.
    scrapes: u64,
    /// Distinct label values in the flood.
    flood: u64,
}

static SIZES: LazyLock<Sizes> = LazyLock::new(|| {
    if std::env::var("ROUNDTABLE_BENCH_SMOKE").is_ok_and(|value| value == "1") {
        Sizes { rounds: 3, calls: 20_000, lookup_calls: 20_000, scrapes: 2, flood: 10_000 }
    } else {
        Sizes { rounds: 7, calls: 10_000_000, lookup_calls: 1_000_000, scrapes: 50, flood: 1_000_000 }
    }
});

/// Families of the realistic registry, by type, each with [`LABEL_SETS`] label sets.
const COUNTER_FAMILIES: usize = 28;
const GAUGE_FAMILIES: usize = 8;
const HISTOGRAM_FAMILIES: usize = 4;
const METHODS: [&str; 4] = ["GET", "POST", "PUT", "DELETE"];
const ROUTES: [&str; 5] = ["/v1/sessions", "/v1/sessions/{id}", "/v1/sessions/{id}/logs", "/v1/proposals", "/healthz"];
const LABEL_SETS: usize = METHODS.len() * ROUTES.len();
/// Twelve latency buckets, in seconds.
const BOUNDS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(position) = args.iter().position(|arg| arg == "--flood-child") {
        let which = args.get(position + 1).map(String::as_str);
        let figures = match which {
            Some("roundtable") => flood::<ours::Flood>(),
            Some("prometheus-client") => flood::<library::Flood>(),
            other => return Err(format!("--flood-child needs roundtable or prometheus-client, not {other:?}").into()),
        };
        println!("{}", figures.to_line());
        return Ok(());
    }

    println!("roundtable-telemetry versus prometheus-client 0.26 (text format 0.0.4 encoder), release build");
    println!(
        "p50 / p99 of {} rounds, the two taking turns; 2-thread figures are wall time per call of the slower thread",
        SIZES.rounds
    );
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?");
    println!("{cpus} CPUs, load average {load} at the start (other work skews the 2-thread figures most)\n");
    observation_costs();
    scrape_costs();
    label_flood()?;
    Ok(())
}

// === Observation ===

fn observation_costs() {
    header("observation", "ns/op");
    let ours = ours::Observers::new();
    let library = library::Observers::new();
    let (calls, lookups) = (SIZES.calls, SIZES.lookup_calls);

    row(
        "counter inc(), child in hand, 1 thread",
        taking_turns(
            Some(&mut || ns_per_call(calls, || ours.counter.inc())),
            Some(&mut || {
                ns_per_call(calls, || {
                    library.counter.inc();
                })
            }),
        ),
    );
    row(
        "counter inc(), child in hand, 2 threads, same child",
        taking_turns(
            Some(&mut || ns_per_call_contended(calls, |_| ours.counter.inc())),
            Some(&mut || {
                ns_per_call_contended(calls, |_| {
                    library.counter.inc();
                })
            }),
        ),
    );
    row(
        "histogram observe(), child in hand, 1 thread",
        taking_turns(
            Some(&mut || ns_per_call(calls, || ours.histogram.observe(black_box(0.042)))),
            Some(&mut || ns_per_call(calls, || library.histogram.observe(black_box(0.042)))),
        ),
    );
    row(
        "histogram observe(), child in hand, 2 threads, same child",
        taking_turns(
            Some(&mut || ns_per_call_contended(calls, |_| ours.histogram.observe(black_box(0.042)))),
            Some(&mut || ns_per_call_contended(calls, |_| library.histogram.observe(black_box(0.042)))),
        ),
    );
    row(
        "lookup by label values + inc(), 1 thread [a]",
        taking_turns(
            Some(&mut || {
                ns_per_call(lookups, || ours.family.with_label_values(&[black_box("GET"), black_box(ROUTES[2])]).inc())
            }),
            Some(&mut || {
                ns_per_call(lookups, || {
                    library
                        .family
                        .get_or_create(&library::RouteLabels::new(black_box("GET"), black_box(ROUTES[2])))
                        .inc();
                })
            }),
        ),
    );
    let prebuilt = library::RouteLabels::new("GET", ROUTES[2]);
    row(
        "lookup + inc(), label set built once, 1 thread [b]",
        taking_turns(
            None,
            Some(&mut || {
                ns_per_call(lookups, || {
                    library.family.get_or_create(black_box(&prebuilt)).inc();
                })
            }),
        ),
    );
    row(
        "lookup by label values + inc(), 2 threads, 2 label sets",
        taking_turns(
            Some(&mut || {
                ns_per_call_contended(lookups, |thread| {
                    ours.family.with_label_values(&[METHODS[thread], black_box(ROUTES[2])]).inc();
                })
            }),
            Some(&mut || {
                ns_per_call_contended(lookups, |thread| {
                    library
                        .family
                        .get_or_create(&library::RouteLabels::new(METHODS[thread], black_box(ROUTES[2])))
                        .inc();
                })
            }),
        ),
    );
    println!("  [a] ours: with_label_values(&[\"GET\", route]); library: get_or_create(&Labels {{ method, route }})");
    println!("      with the label set's Strings built from the two &str per call (ours copies them too)");
    println!("  [b] library only: a label set built once and reused; ours has no such call\n");
}

/// p50 and p99 of a figure over its rounds.
#[derive(Clone, Copy)]
struct Spread {
    p50: f64,
    p99: f64,
}

/// One round of ours and one of the library's, untimed, then [`Sizes::rounds`] rounds of each
/// taking turns, so drift on the machine (other work, a CPU's clock) hits both alike.
fn taking_turns<'a>(
    mut ours: Option<&'a mut (dyn FnMut() -> f64 + 'a)>,
    mut library: Option<&'a mut (dyn FnMut() -> f64 + 'a)>,
) -> [Option<Spread>; 2] {
    let mut figures = [Vec::new(), Vec::new()];
    for round in 0..=SIZES.rounds {
        for (side, figures) in [&mut ours, &mut library].into_iter().zip(&mut figures) {
            if let Some(measure) = side {
                let figure = measure();
                if round > 0 {
                    figures.push(figure);
                }
            }
        }
    }
    figures.map(|mut figures| {
        figures.sort_by(f64::total_cmp);
        let at = |p: f64| figures[((p * figures.len() as f64).ceil() as usize).clamp(1, figures.len()) - 1];
        (!figures.is_empty()).then(|| Spread { p50: at(0.50), p99: at(0.99) })
    })
}

/// Nanoseconds per call of `call` on this thread, over one round of `calls` calls.
fn ns_per_call(calls: u64, mut call: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        call();
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// Nanoseconds per call with two threads making `calls` calls each at once (`call` gets the
/// thread's index), of the slower thread.
fn ns_per_call_contended(calls: u64, call: impl Fn(usize) + Sync) -> f64 {
    let call = &call;
    let barrier = Barrier::new(2);
    let barrier = &barrier;
    let slowest = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..2)
            .map(|thread| {
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..calls {
                        call(thread);
                    }
                    start.elapsed()
                })
            })
            .collect();
        threads.into_iter().map(|thread| thread.join().expect("observer thread")).max()
    });
    slowest.unwrap_or_default().as_nanos() as f64 / calls as f64
}

// === Scrape ===

fn scrape_costs() {
    let samples = COUNTER_FAMILIES * LABEL_SETS + GAUGE_FAMILIES * LABEL_SETS;
    let histogram_series = HISTOGRAM_FAMILIES * LABEL_SETS;
    header(
        &format!(
            "scrape of {} families x {LABEL_SETS} label sets ({samples} counter/gauge samples, {histogram_series} histograms of {} buckets)",
            COUNTER_FAMILIES + GAUGE_FAMILIES + HISTOGRAM_FAMILIES,
            BOUNDS.len()
        ),
        "",
    );
    let ours = ours::realistic_registry();
    let library = library::realistic_registry();
    let ours_text = ours.render();
    let library_text = library::render_text(&library);
    let library_openmetrics = library::render_openmetrics(&library);
    row(
        "µs per scrape, text format 0.0.4",
        taking_turns(
            Some(&mut || us_per_scrape(|| ours.render())),
            Some(&mut || us_per_scrape(|| library::render_text(&library))),
        ),
    );
    row(
        "µs per scrape, library's OpenMetrics encoder",
        taking_turns(None, Some(&mut || us_per_scrape(|| library::render_openmetrics(&library)))),
    );
    values("bytes per scrape, text format 0.0.4", Some(ours_text.len() as f64), Some(library_text.len() as f64));
    values("bytes per scrape, library's OpenMetrics encoder", None, Some(library_openmetrics.len() as f64));
    values("sample lines", Some(sample_lines(&ours_text) as f64), Some(sample_lines(&library_text) as f64));
    println!();
}

/// Microseconds per scrape over one round of [`Sizes::scrapes`] scrapes.
fn us_per_scrape(scrape: impl Fn() -> String) -> f64 {
    let start = Instant::now();
    for _ in 0..SIZES.scrapes {
        black_box(scrape());
    }
    start.elapsed().as_nanos() as f64 / SIZES.scrapes as f64 / 1_000.0
}

fn sample_lines(text: &str) -> usize {
    text.lines().filter(|line| !line.starts_with('#')).count()
}

// === Label flood ===

/// What one implementation needs for the flood: a family with one label, `host`.
trait FloodTarget: Sync {
    fn new() -> Self;
    fn observe(&self, host: &str);
    fn scrape(&self) -> String;
}

/// The flood's figures, as one child process reports them on a line of `key=value` pairs.
#[derive(Debug, Default)]
struct FloodFigures(BTreeMap<String, f64>);

impl FloodFigures {
    fn set(&mut self, key: &str, value: f64) {
        self.0.insert(key.to_owned(), value);
    }

    fn get(&self, key: &str) -> Option<f64> {
        self.0.get(key).copied()
    }

    fn to_line(&self) -> String {
        self.0.iter().map(|(key, value)| format!("{key}={value}")).collect::<Vec<_>>().join(" ")
    }

    fn from_line(line: &str) -> Self {
        let pairs = line.split_whitespace().filter_map(|pair| pair.split_once('='));
        Self(pairs.filter_map(|(key, value)| Some((key.to_owned(), value.parse().ok()?))).collect())
    }
}

fn label_flood() -> Result<()> {
    header(
        &format!(
            "label flood: {} distinct values of one label (\"refused-0000042.attacker.example\"), each implementation in its own process",
            SIZES.flood
        ),
        "",
    );
    let ours = flood_child("roundtable")?;
    let library = flood_child("prometheus-client")?;
    let mib = |figures: &FloodFigures, key: &str| figures.get(key).map(|bytes| bytes / (1024.0 * 1024.0));
    let pick = |label: &str, key: &str, scale: &dyn Fn(&FloodFigures, &str) -> Option<f64>| {
        values(label, scale(&ours, key), scale(&library, key));
    };
    let plain = |figures: &FloodFigures, key: &str| figures.get(key);
    pick("resident memory growth after the flood, MiB", "rss_growth_bytes", &mib);
    pick("peak resident growth incl. one scrape, MiB", "peak_growth_bytes", &mib);
    pick("time to observe the flood, ms", "flood_ms", &plain);
    pick("series kept", "series", &plain);
    pick("scrape after the flood, ms", "scrape_ms", &plain);
    pick("scrape after the flood, MiB", "scrape_bytes", &mib);
    pick("longest observe() of a new value during that scrape, µs", "stall_us", &plain);
    println!("  (resident memory from VmRSS and VmHWM in /proc/self/status)");
    Ok(())
}

fn flood_child(which: &str) -> Result<FloodFigures> {
    let output = Command::new(std::env::current_exe()?).args(["--flood-child", which]).output()?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("the {which} flood child failed ({}): {stderr}", output.status).into());
    }
    let stdout = String::from_utf8(output.stdout)?;
    Ok(FloodFigures::from_line(stdout.lines().last().unwrap_or_default()))
}

/// Runs in the child: observes [`Sizes::flood`] distinct host names, scrapes once, then scrapes again
/// while this thread keeps observing new host names and times the longest such call.
fn flood<T: FloodTarget>() -> FloodFigures {
    let target = T::new();
    let mut figures = FloodFigures::default();
    let (rss_before, _) = resident_bytes();

    let start = Instant::now();
    for n in 0..SIZES.flood {
        target.observe(&refused_host(n));
    }
    figures.set("flood_ms", millis(start.elapsed()));
    let (rss_after, _) = resident_bytes();
    figures.set("rss_growth_bytes", rss_after.saturating_sub(rss_before) as f64);

    let start = Instant::now();
    let text = target.scrape();
    figures.set("scrape_ms", millis(start.elapsed()));
    figures.set("scrape_bytes", text.len() as f64);
    figures.set("series", sample_lines(&text) as f64);
    let (_, peak) = resident_bytes();
    figures.set("peak_growth_bytes", peak.saturating_sub(rss_before) as f64);
    drop(text);

    let scraped = AtomicBool::new(false);
    let longest = std::thread::scope(|scope| {
        scope.spawn(|| {
            black_box(target.scrape());
            scraped.store(true, Ordering::Release);
        });
        let mut longest = Duration::ZERO;
        let mut n = SIZES.flood;
        while !scraped.load(Ordering::Acquire) {
            let host = refused_host(n);
            let start = Instant::now();
            target.observe(&host);
            longest = longest.max(start.elapsed());
            n += 1;
        }
        longest
    });
    figures.set("stall_us", longest.as_secs_f64() * 1e6);
    figures
}

fn refused_host(n: u64) -> String {
    format!("refused-{n:07}.attacker.example")
}

/// Resident and peak resident memory of this process, in bytes (zero where unreadable).
fn resident_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |field: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (kib("VmRSS:") * 1024, kib("VmHWM:") * 1024)
}

// === Printing ===

fn header(title: &str, unit: &str) {
    println!("{title}{}", if unit.is_empty() { String::new() } else { format!(", {unit}") });
    println!("  {:<58} {:>18} {:>20}", "", "roundtable", "prometheus-client");
}

/// A timed figure of both: p50 / p99 over the rounds.
fn row(label: &str, [ours, library]: [Option<Spread>; 2]) {
    let cell = |spread: Option<Spread>| {
        spread.map_or_else(|| "-".to_owned(), |spread| format!("{} / {}", figure(spread.p50), figure(spread.p99)))
    };
    println!("  {label:<58} {:>18} {:>20}", cell(ours), cell(library));
}

/// A figure measured once for each.
fn values(label: &str, ours: Option<f64>, library: Option<f64>) {
    let cell = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), figure);
    println!("  {label:<58} {:>18} {:>20}", cell(ours), cell(library));
}

/// Three significant digits, whole numbers without a fraction.
fn figure(value: f64) -> String {
    match value.abs() {
        v if v >= 100.0 => format!("{value:.0}"),
        v if v >= 10.0 => format!("{value:.1}"),
        _ => format!("{value:.2}"),
    }
}

fn millis(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e3
}

// === Ours ===

mod ours {
    use std::sync::Arc;

    use roundtable_telemetry::{Counter, CounterVec, Histogram, Registry};

    use super::{BOUNDS, COUNTER_FAMILIES, GAUGE_FAMILIES, HISTOGRAM_FAMILIES, METHODS, ROUTES};

    pub struct Observers {
        pub counter: Arc<Counter>,
        pub histogram: Arc<Histogram>,
        pub family: Arc<CounterVec>,
    }

    impl Observers {
        pub fn new() -> Self {
            let registry = Registry::new();
            let family = registry.counter_vec("http_requests_total", "Requests handled.", &["method", "route"]);
            for method in METHODS {
                for route in ROUTES {
                    family.with_label_values(&[method, route]).inc();
                }
            }
            let histograms =
                registry.histogram_vec("http_request_duration_seconds", "Request latency.", &["method"], &BOUNDS);
            Self {
                counter: family.with_label_values(&["GET", ROUTES[0]]),
                histogram: histograms.with_label_values(&["GET"]),
                family,
            }
        }
    }

    pub fn realistic_registry() -> Registry {
        let registry = Registry::new();
        let label_names = ["method", "route"];
        for index in 0..COUNTER_FAMILIES {
            let family = registry.counter_vec(&format!("demo_counter_{index}_total"), "A counter.", &label_names);
            for (n, (method, route)) in label_sets().enumerate() {
                family.with_label_values(&[method, route]).inc_by((n * 7919 + index) as u64);
            }
        }
        for index in 0..GAUGE_FAMILIES {
            let family = registry.gauge_vec(&format!("demo_gauge_{index}"), "A gauge.", &label_names);
            for (n, (method, route)) in label_sets().enumerate() {
                family.with_label_values(&[method, route]).set((n * 31) as i64 - 100);
            }
        }
        for index in 0..HISTOGRAM_FAMILIES {
            let family = registry.histogram_vec(
                &format!("demo_histogram_{index}_seconds"),
                "A histogram.",
                &label_names,
                &BOUNDS,
            );
            for (n, (method, route)) in label_sets().enumerate() {
                let child = family.with_label_values(&[method, route]);
                for k in 0..8 {
                    child.observe(((n + k) % 13) as f64 * 0.37);
                }
            }
        }
        registry
    }

    fn label_sets() -> impl Iterator<Item = (&'static str, &'static str)> {
        METHODS.into_iter().flat_map(|method| ROUTES.into_iter().map(move |route| (method, route)))
    }

    pub struct Flood {
        registry: Registry,
        family: Arc<CounterVec>,
    }

    impl super::FloodTarget for Flood {
        fn new() -> Self {
            let registry = Registry::new();
            let family = registry.counter_vec("gateway_refused_total", "Connections refused, by host.", &["host"]);
            Self { registry, family }
        }

        fn observe(&self, host: &str) {
            self.family.with_label_values(&[host]).inc();
        }

        fn scrape(&self) -> String {
            self.registry.render()
        }
    }
}

// === prometheus-client ===

mod library {
    use prometheus_client::encoding::{EncodeLabelSet, prometheus_text, text};
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::registry::Registry;

    use super::{BOUNDS, COUNTER_FAMILIES, GAUGE_FAMILIES, HISTOGRAM_FAMILIES, METHODS, ROUTES};

    /// The label set the library's documentation derives for a family.
    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    pub struct RouteLabels {
        method: String,
        route: String,
    }

    impl RouteLabels {
        pub fn new(method: &str, route: &str) -> Self {
            Self { method: method.to_owned(), route: route.to_owned() }
        }
    }

    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct HostLabels {
        host: String,
    }

    fn latency_histogram() -> Histogram {
        Histogram::new(BOUNDS)
    }

    pub struct Observers {
        pub counter: Counter,
        pub histogram: Histogram,
        pub family: Family<RouteLabels, Counter>,
    }

    impl Observers {
        pub fn new() -> Self {
            let mut registry = Registry::default();
            let family = Family::<RouteLabels, Counter>::default();
            registry.register("http_requests", "Requests handled", family.clone());
            for method in METHODS {
                for route in ROUTES {
                    family.get_or_create(&RouteLabels::new(method, route)).inc();
                }
            }
            let histograms = Family::<RouteLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _);
            registry.register("http_request_duration_seconds", "Request latency", histograms.clone());
            Self {
                counter: family.get_or_create_owned(&RouteLabels::new("GET", ROUTES[0])),
                histogram: histograms.get_or_create_owned(&RouteLabels::new("GET", ROUTES[0])),
                family,
            }
        }
    }

    /// The same families, label sets and values as `ours::realistic_registry` (counter names
    /// without `_total` and help without the full stop: the library adds both).
    pub fn realistic_registry() -> Registry {
        let mut registry = Registry::default();
        for index in 0..COUNTER_FAMILIES {
            let family = Family::<RouteLabels, Counter>::default();
            registry.register(format!("demo_counter_{index}"), "A counter", family.clone());
            for (n, labels) in label_sets().enumerate() {
                family.get_or_create(&labels).inc_by((n * 7919 + index) as u64);
            }
        }
        for index in 0..GAUGE_FAMILIES {
            let family = Family::<RouteLabels, Gauge>::default();
            registry.register(format!("demo_gauge_{index}"), "A gauge", family.clone());
            for (n, labels) in label_sets().enumerate() {
                family.get_or_create(&labels).set((n * 31) as i64 - 100);
            }
        }
        for index in 0..HISTOGRAM_FAMILIES {
            let family = Family::<RouteLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _);
            registry.register(format!("demo_histogram_{index}_seconds"), "A histogram", family.clone());
            for (n, labels) in label_sets().enumerate() {
                let child = family.get_or_create(&labels);
                for k in 0..8 {
                    child.observe(((n + k) % 13) as f64 * 0.37);
                }
            }
        }
        registry
    }

    fn label_sets() -> impl Iterator<Item = RouteLabels> {
        METHODS.into_iter().flat_map(|method| ROUTES.into_iter().map(move |route| RouteLabels::new(method, route)))
    }

    /// The Prometheus text format 0.0.4, as ours writes.
    pub fn render_text(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_text::encode(&mut out, registry).expect("writing to a String cannot fail");
        out
    }

    /// OpenMetrics text, the library's first encoder (it ends with `# EOF`).
    pub fn render_openmetrics(registry: &Registry) -> String {
        let mut out = String::new();
        text::encode(&mut out, registry).expect("writing to a String cannot fail");
        out
    }

    pub struct Flood {
        registry: Registry,
        family: Family<HostLabels, Counter>,
    }

    impl super::FloodTarget for Flood {
        fn new() -> Self {
            let mut registry = Registry::default();
            let family = Family::<HostLabels, Counter>::default();
            registry.register("gateway_refused", "Connections refused, by host", family.clone());
            Self { registry, family }
        }

        fn observe(&self, host: &str) {
            self.family.get_or_create(&HostLabels { host: host.to_owned() }).inc();
        }

        fn scrape(&self) -> String {
            render_text(&self.registry)
        }
    }
}
