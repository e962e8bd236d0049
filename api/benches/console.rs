//! The console's status page at 10,000 objects: the time to render the first page (filter, sort,
//! paginate, template) and its weight, against the whole table rendered in one page as the
//! baseline from the same run, the renders taking turns round by round. A filtered page too.
//! p50 and p99 of each. Prints figures; asserts nothing.
//!
//! Environment: `BENCH_OBJECTS` (10000), `BENCH_ROUNDS` (20); `ROUNDTABLE_BENCH_SMOKE=1` makes
//! them 300 and 3: CI runs it so (benches/smoke.sh), to show the bench still runs to the end.

use std::time::{Duration, Instant};

use roundtable_api::console::{PAGE_ROWS, status_html};
use roundtable_specs::output::{Health, ObjectStatus, SyncStatus};

/// `name` from the environment, else `full`, or `tiny` in a smoke run.
fn env_number(name: &str, full: usize, tiny: usize) -> usize {
    let smoke = std::env::var("ROUNDTABLE_BENCH_SMOKE").is_ok_and(|value| value == "1");
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(if smoke { tiny } else { full })
}

/// `count` rows shaped like a large project's: Assignments mostly, every tenth out of sync.
fn rows(count: usize) -> Vec<ObjectStatus> {
    (0..count)
        .map(|i| ObjectStatus {
            kind: if i % 50 == 0 { "Adapter".into() } else { "Assignment".into() },
            name: format!("task-{i:05}-refactor-the-module"),
            generation: Some(1),
            observed_generation: Some(1),
            sync: if i % 10 == 0 { SyncStatus::OutOfSync } else { SyncStatus::Synced },
            health: if i % 7 == 0 { Health::Degraded } else { Health::Healthy },
            created_at: Some("2026-12-03T12:00:00Z".into()),
            message: format!("pending proposal {i:012x}-abcdef012345; awaits review"),
            conditions: Vec::new(),
        })
        .collect()
}

/// The `p` quantile (nearest rank) of times sorted ascending.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied().unwrap_or_default()
}

type Render = Box<dyn Fn(Vec<ObjectStatus>) -> String>;

fn main() {
    let (objects, rounds) = (env_number("BENCH_OBJECTS", 10_000, 300), env_number("BENCH_ROUNDS", 20, 3).max(1));
    println!("status page at {objects} objects, {PAGE_ROWS} rows a page, {rounds} rounds, the renders taking turns");
    let renders: [(&str, Render); 4] = [
        ("first page (sort by kind)", Box::new(|rows| status_html(rows, "", "kind", 1, PAGE_ROWS))),
        ("last page (sort by name)", Box::new(|rows| status_html(rows, "", "name", usize::MAX, PAGE_ROWS))),
        ("filtered (q=OutOfSync)", Box::new(|rows| status_html(rows, "OutOfSync", "kind", 1, PAGE_ROWS))),
        ("baseline: the whole table in one page", Box::new(|rows| status_html(rows, "", "kind", 1, usize::MAX))),
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); renders.len()];
    let mut sizes = vec![0; renders.len()];
    for _ in 0..rounds {
        // Each render in turn, so drift on the machine hits the baseline as it hits the pages.
        for ((_, render), (times, size)) in renders.iter().zip(times.iter_mut().zip(&mut sizes)) {
            let input = rows(objects);
            let started = Instant::now();
            *size = render(input).len();
            times.push(started.elapsed());
        }
    }
    println!("{:<46} {:>10} {:>10} {:>10}", "", "p50 ms", "p99 ms", "KiB");
    for ((label, _), (mut times, size)) in renders.iter().zip(times.into_iter().zip(sizes)) {
        times.sort();
        println!(
            "{label:<46} {:>10.2} {:>10.2} {:>10.1}",
            percentile(&times, 0.50).as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3,
            size as f64 / 1024.0
        );
    }
}
