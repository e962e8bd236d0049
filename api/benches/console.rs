//! The console's status page at 10,000 objects: the time to render the first page (filter, sort,
//! paginate, template) and its weight, against the whole table rendered in one page as the
//! baseline from the same run. A filtered page too. Prints figures; asserts nothing.
//!
//! Environment: `BENCH_OBJECTS` (10000), `BENCH_ROUNDS` (20).

use std::time::{Duration, Instant};

use roundtable_api::console::{PAGE_ROWS, status_html};
use roundtable_specs::output::{Health, ObjectStatus, SyncStatus};

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
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

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The median time and the size of `render` over `rounds`.
fn measure(rounds: usize, objects: usize, render: impl Fn(Vec<ObjectStatus>) -> String) -> (Duration, usize) {
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..rounds {
        let input = rows(objects);
        let started = Instant::now();
        size = render(input).len();
        times.push(started.elapsed());
    }
    (median(times), size)
}

fn main() {
    let (objects, rounds) = (env_number("BENCH_OBJECTS", 10_000), env_number("BENCH_ROUNDS", 20));
    println!("status page at {objects} objects, {PAGE_ROWS} rows a page, {rounds} rounds (median)");
    let show = |label: &str, (time, size): (Duration, usize)| {
        println!("{label:<46} {:>8.2} ms {:>10.1} KiB", time.as_secs_f64() * 1e3, size as f64 / 1024.0);
    };
    show("first page (sort by kind)", measure(rounds, objects, |rows| status_html(rows, "", "kind", 1, PAGE_ROWS)));
    show(
        "last page (sort by name)",
        measure(rounds, objects, |rows| status_html(rows, "", "name", usize::MAX, PAGE_ROWS)),
    );
    show(
        "filtered (q=OutOfSync)",
        measure(rounds, objects, |rows| status_html(rows, "OutOfSync", "kind", 1, PAGE_ROWS)),
    );
    show(
        "baseline: the whole table in one page",
        measure(rounds, objects, |rows| status_html(rows, "", "kind", 1, usize::MAX)),
    );
}
