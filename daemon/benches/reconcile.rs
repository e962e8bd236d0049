//! Prints the reconcile engine's figures at 10,000 objects in 1,000 files: first scan + parse +
//! diff, a resync with nothing changed, resident memory, and file edit → reconcile start latency
//! with a no-op reconciler. Run: `cargo bench -p roundtable-daemon --bench reconcile`
//! (`ROUNDTABLE_BENCH_SMOKE=1`: 200 objects in 20 files and 5 edits, as CI runs it).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{NoOp, fail_in_smoke, percentile, sized};

use roundtable_daemon::{DaemonConfig, run_with};
use roundtable_reconcilers::desired::{sync, sync_with};
use roundtable_source::{ScanCache, scan_cached, scan_changed};
use roundtable_specs::ObjectKey;
use roundtable_store::Store;
use tokio::sync::mpsc;

const PER_FILE: usize = 10;

fn write_file(dir: &Path, file: usize, timeout_minutes: usize) {
    let mut docs = Vec::new();
    for i in 0..PER_FILE {
        let n = file * PER_FILE + i;
        if i == 0 {
            docs.push(format!(
                "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {{name: agent-{n}}}\nspec:\n  image: sha256:{n:064x}\n  command: agent\n  timeout: {timeout_minutes}m\n  providerHosts: [api.example.com]\n  credentialEnv: [AGENT_KEY]\n"
            ));
        } else {
            docs.push(format!(
                "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata:\n  name: task-{n}\n  labels: {{team: t{}}}\nspec:\n  adapter: agent-{}\n  task: {{id: T-{n}, title: Task {n}, prompt: Fix issue {n}.}}\n  readablePaths: [README.md, docs/]\n",
                file % 7,
                file * PER_FILE
            ));
        }
    }
    std::fs::write(dir.join(format!("specs-{file:04}.yaml")), docs.join("---\n")).expect("write");
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

#[tokio::main]
async fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let (files, edits) = (sized(1000, 20), sized(60, 5));
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join(".roundtable");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for file in 0..files {
        write_file(&dir, file, 20);
    }
    let project = roundtable_source::Project::resolve(&dir).expect("project");
    let store = Store::open(&project.state_dir).await.expect("store");

    let mut cache = ScanCache::default();
    let started = Instant::now();
    let first = scan_cached(&project, &mut cache);
    let scanned_at = started.elapsed();
    let outcome = sync(&store, &store, &first).await.expect("sync");
    let first_total = started.elapsed();
    assert_eq!(outcome.changed.len(), files * PER_FILE);
    println!("objects                                  {}", first.objects.len());
    println!("first scan + parse + validate            {:8.1} ms", scanned_at.as_secs_f64() * 1e3);
    println!("first scan + parse + diff + record       {:8.1} ms", first_total.as_secs_f64() * 1e3);

    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let again = scan_cached(&project, &mut cache);
    let unchanged = sync(&store, &store, &again).await.expect("sync");
    let resync = started.elapsed();
    assert!(unchanged.changed.is_empty());
    println!("resync reuses parses of unchanged files (content hash)");
    println!("resync, nothing changed (wall)           {:8.1} ms", resync.as_secs_f64() * 1e3);
    println!("resync, nothing changed (CPU)            {:8.1} ms", (cpu_seconds() - cpu_before) * 1e3);
    println!("peak resident memory after the scans     {:8.1} MiB (target < 64)", peak_rss_mib());
    let started = Instant::now();
    let loaded = roundtable_source::load(&project);
    let load_time = started.elapsed();
    let started = Instant::now();
    let findings = roundtable_specs::validate(&loaded.objects);
    let validate_time = started.elapsed();
    let started = Instant::now();
    let declared = roundtable_reconcilers::desired::declared(&first);
    let digests: usize = declared.values().map(|d| d.digest().len()).sum();
    let digest_time = started.elapsed();
    println!(
        "  of which: read + parse {:.1} ms, validate {:.1} ms ({} findings), declare + digest {:.1} ms ({digests})",
        load_time.as_secs_f64() * 1e3,
        validate_time.as_secs_f64() * 1e3,
        findings.len(),
        digest_time.as_secs_f64() * 1e3
    );

    // What the daemon does per edit, without the debounce and the queue: a targeted rescan of
    // the one changed file and a sync against the cached index.
    let mut sync_cache = roundtable_reconcilers::desired::SyncCache::default();
    let _ = sync_with(&store, &store, &again, &mut sync_cache).await.expect("sync");
    let (mut rescans, mut syncs, mut across) = (Vec::new(), Vec::new(), Vec::new());
    for edit in 0..edits {
        let file = (edit * 53) % files;
        write_file(&dir, file, 200 + edit);
        let changed = [dir.join(format!("specs-{file:04}.yaml"))];
        let started = Instant::now();
        let scanned = scan_changed(&project, &mut cache, Some(&changed));
        rescans.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        let outcome = sync_with(&store, &store, &scanned, &mut sync_cache).await.expect("sync");
        syncs.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(outcome.changed.len(), 1);
        let started = Instant::now();
        let _ = roundtable_specs::validate::validate_across(&scanned.objects);
        across.push(started.elapsed().as_secs_f64() * 1e3);
    }
    for figures in [&mut rescans, &mut syncs, &mut across] {
        figures.sort_by(f64::total_cmp);
    }
    println!(
        "one edited file, p50: targeted rescan {:.1} ms (cross-object rules {:.1} ms), sync {:.1} ms",
        percentile(&rescans, 0.5),
        percentile(&across, 0.5),
        percentile(&syncs, 0.5)
    );

    drop((first, again, cache));

    // Edit → reconcile start, through the real daemon loop with a no-op reconciler.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut config = DaemonConfig::new(project.clone());
    config.resync = Duration::from_secs(3600);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(run_with(config, store.clone(), Arc::new(NoOp(tx)), |_| {}, async move {
        let _ = stopped.await;
    }));
    // The first pass reconciles everything once.
    let mut seen = 0;
    while seen < files * PER_FILE {
        if tokio::time::timeout(Duration::from_secs(60), rx.recv()).await.ok().flatten().is_none() {
            break;
        }
        seen += 1;
    }
    let mut missed = 0;
    if seen < files * PER_FILE {
        println!("first pass: {seen} of {} objects reconciled, then none for 60 s", files * PER_FILE);
        missed += 1;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    while rx.try_recv().is_ok() {}
    let mut latencies = Vec::new();
    for edit in 0..edits {
        let file = (edit * 37) % files;
        let key = ObjectKey::new(roundtable_specs::Kind::Adapter, format!("agent-{}", file * PER_FILE));
        let edited_at = Instant::now();
        write_file(&dir, file, 21 + edit);
        let deadline = edited_at + Duration::from_secs(10);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(remaining, rx.recv()).await {
                Ok(Some((started_key, at))) if started_key == key => {
                    latencies.push((at - edited_at).as_secs_f64() * 1e3);
                    break;
                }
                Ok(Some(_)) => continue,
                _ => {
                    println!("edit {edit}: no reconcile within 10 s");
                    missed += 1;
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let _ = stop.send(());
    let _ = daemon.await;
    latencies.sort_by(f64::total_cmp);
    if !latencies.is_empty() {
        println!(
            "edit → reconcile start, {} edits          p50 {:6.1} ms   p99 {:6.1} ms   (target p50 < 150, p99 < 250; the debounce alone is 100)",
            latencies.len(),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99)
        );
    }
    println!("peak resident memory overall             {:8.1} MiB", peak_rss_mib());
    fail_in_smoke(missed);

    // The same first scan and resync on PostgreSQL (a scratch cluster on a Unix socket), after
    // the figures above so they are not disturbed.
    if let Some(cluster) = roundtable_store::scratch::cluster() {
        let pg = Store::connect(&cluster.database().await).await.expect("postgres store");
        let mut cache = ScanCache::default();
        let started = Instant::now();
        let first = scan_cached(&project, &mut cache);
        let outcome = sync(&pg, &pg, &first).await.expect("sync");
        let first_total = started.elapsed();
        assert_eq!(outcome.changed.len(), files * PER_FILE);
        let started = Instant::now();
        let again = scan_cached(&project, &mut cache);
        let unchanged = sync(&pg, &pg, &again).await.expect("sync");
        let resync = started.elapsed();
        assert!(unchanged.changed.is_empty());
        println!("PostgreSQL: first scan + parse + diff + record {:8.1} ms", first_total.as_secs_f64() * 1e3);
        println!("PostgreSQL: resync, nothing changed (wall)      {:8.1} ms", resync.as_secs_f64() * 1e3);
    }
}
