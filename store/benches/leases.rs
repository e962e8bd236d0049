//! The lease path under contention: N controllers (each with its own connection pool) loop over
//! 200 Assignments, each round reading a lease, claiming it with the compare-and-set, and
//! releasing it, as the reconciler does. Prints claims per second (won and lost) and the p50/p99
//! of one read-and-claim, for SQLite and a scratch PostgreSQL cluster, with 2 and 8 contenders.
//! `cargo bench -p roundtable-store --bench leases` (`ROUNDTABLE_BENCH_SMOKE=1`: 0.3 s per
//! figure instead of 4, as CI runs it to show the bench still runs to the end).

use std::time::{Duration, Instant};

use roundtable_store::{Registration, Store, StoreUrl};

const ASSIGNMENTS: usize = 200;
/// How long each figure's contenders run.
fn run() -> Duration {
    let smoke = std::env::var("ROUNDTABLE_BENCH_SMOKE").is_ok_and(|value| value == "1");
    if smoke { Duration::from_millis(300) } else { Duration::from_secs(4) }
}
const TTL: Duration = Duration::from_secs(30);

struct Tally {
    won: u64,
    lost: u64,
    latencies: Vec<Duration>,
}

async fn contender(store: Store, id: String, start: usize) -> Tally {
    let me = Registration { id: &id, host: "bench", pid: std::process::id(), checkout: "/bench" };
    store.register_controller(&me, TTL).await.expect("register");
    let mut tally = Tally { won: 0, lost: 0, latencies: Vec::new() };
    let deadline = Instant::now() + run();
    let mut n = start;
    while Instant::now() < deadline {
        let name = format!("a{}", n % ASSIGNMENTS);
        let assignment = roundtable_store::Identity { uid: name.clone(), name };
        n += 7;
        let began = Instant::now();
        let seen = store.execution_lease(&assignment.uid).await.expect("read");
        let claimed = store.claim_execution(&assignment, &id, seen.as_ref(), TTL).await.expect("claim");
        tally.latencies.push(began.elapsed());
        match claimed {
            Some(lease) => {
                tally.won += 1;
                store.release_execution(&lease).await.expect("release");
            }
            None => tally.lost += 1,
        }
    }
    tally
}

async fn measure(label: &str, url: &StoreUrl, contenders: usize) {
    let mut tasks = Vec::new();
    for c in 0..contenders {
        let store = Store::connect(url).await.expect("connect");
        tasks.push(tokio::spawn(contender(store, format!("{label}-{contenders}-{c}"), c * 13)));
    }
    let (mut won, mut lost, mut latencies) = (0, 0, Vec::new());
    for task in tasks {
        let tally = task.await.expect("task");
        won += tally.won;
        lost += tally.lost;
        latencies.extend(tally.latencies);
    }
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let seconds = run().as_secs_f64();
    println!(
        "{label:<10} {contenders} contenders: {:>7.0} claims/s won, {:>7.0} lost; read+claim p50 {:>6.2} ms, p99 {:>6.2} ms",
        won as f64 / seconds,
        lost as f64 / seconds,
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    for contenders in [2, 8] {
        let sqlite = StoreUrl::Sqlite(dir.path().join(format!("bench-{contenders}.db")));
        measure("sqlite", &sqlite, contenders).await;
        if let Some(cluster) = roundtable_store::scratch::cluster() {
            measure("postgres", &cluster.database().await, contenders).await;
        }
    }
}
