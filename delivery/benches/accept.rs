//! Accept benchmark: a repository of 10,000 files with a proposal changing 1,000 of them (the
//! patch bench's shape). `branch::commit` (scratch index, commit-tree, update-ref) against the
//! baseline an operator would run by hand on a clone: `git apply --index` and `git commit`, the two
//! taking turns round by round (p50, p99). Then
//! what the gates read (`added::from_objects`: the proposal's tree, its changed blobs, their
//! lines), the secrets scanner's throughput over that patch's added lines, and over this repository's own
//! history (`git log -p`, every commit's added lines), where every finding is a false positive
//! or a test fixture: they are listed. Prints figures; asserts nothing.
//!
//! Environment: `BENCH_FILES` (10000), `BENCH_CHANGED` (1000), `BENCH_ROUNDS` (5).
//! `ROUNDTABLE_BENCH_SMOKE=1` makes them 200, 20 and 2 and reads only the last 20 commits of the
//! history: CI runs it so (benches/smoke.sh), to show the bench still runs to the end.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use roundtable_delivery::added;
use roundtable_delivery::branch::{self, CommitRequest, Identity};
use roundtable_delivery::held::HeldCredentials;
use roundtable_specs::secrets::fingerprint::CredentialFingerprint;
use roundtable_specs::secrets::patterns;

fn smoke() -> bool {
    std::env::var("ROUNDTABLE_BENCH_SMOKE").is_ok_and(|value| value == "1")
}

/// `name` from the environment, else `full`, or `tiny` in a smoke run.
fn env_number(name: &str, full: usize, tiny: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(if smoke() { tiny } else { full })
}

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.test")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.test")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// "p50 X ms, p99 Y ms" (nearest rank) of `times`.
fn p50_p99(mut times: Vec<Duration>) -> String {
    times.sort();
    let at = |p: f64| {
        let rank = ((p * times.len() as f64).ceil() as usize).clamp(1, times.len().max(1));
        times.get(rank - 1).copied().unwrap_or_default().as_secs_f64() * 1e3
    };
    format!("p50 {:8.1} ms, p99 {:8.1} ms", at(0.50), at(0.99))
}

fn main() {
    let files = env_number("BENCH_FILES", 10_000, 200);
    let changed = env_number("BENCH_CHANGED", 1_000, 20);
    let rounds = env_number("BENCH_ROUNDS", 5, 2).max(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "bench"]);
    git(&repo, &["config", "user.email", "bench@example.test"]);
    for n in 0..files {
        let path = repo.join(format!("d{:03}/f{n:05}.txt", n / 100));
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, format!("file {n}\n{}\n", "content line\n".repeat(20))).expect("write");
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let base = String::from_utf8_lossy(&git(&repo, &["rev-parse", "HEAD"])).trim().to_owned();
    for n in (0..files).step_by((files / changed.max(1)).max(1)).take(changed) {
        let path = repo.join(format!("d{:03}/f{n:05}.txt", n / 100));
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str("a line the agent added\n");
        std::fs::write(&path, text).expect("write");
    }
    let patch = git(&repo, &["diff", "--binary"]);
    git(&repo, &["checkout", "-q", "--", "."]);
    println!(
        "repository: {files} files, proposal changing {changed} ({} KiB patch), {rounds} rounds",
        patch.len() / 1024
    );

    let author = Identity { name: "bench-agent".into(), email: "roundtable+bench@localhost".into() };
    let clone = dir.path().join("clone");
    git(dir.path(), &["clone", "-q", repo.to_str().expect("utf-8"), "clone"]);
    let patch_file = dir.path().join("p.patch");
    std::fs::write(&patch_file, &patch).expect("patch");
    let (mut accepts, mut baseline) = (Vec::new(), Vec::new());
    // Taking turns, so drift on the machine hits the baseline as it hits the accept.
    for round in 0..rounds {
        let name = format!("roundtable/bench/{round}");
        let started = Instant::now();
        branch::commit(&CommitRequest {
            repo: &repo,
            base: &base,
            patch: &patch,
            branch: &name,
            namespace: "refs/heads/",
            author: &author,
            message: "T: bench\n",
        })
        .expect("commit");
        accepts.push(started.elapsed());

        git(&clone, &["checkout", "-q", "-f", &base]);
        let started = Instant::now();
        git(&clone, &["apply", "--index", patch_file.to_str().expect("utf-8")]);
        git(&clone, &["commit", "-q", "-m", "T: bench"]);
        baseline.push(started.elapsed());
    }
    println!("{:<44} {}", "accept (scratch index, commit-tree, ref)", p50_p99(accepts));
    println!("{:<44} {}", "baseline: git apply --index + git commit", p50_p99(baseline));

    // What the gates read: the proposal's objects.
    let mut reads = Vec::new();
    let mut read = added::Added::default();
    for _ in 0..rounds {
        let started = Instant::now();
        read = added::from_objects(&repo, &base, &patch).expect("objects");
        reads.push(started.elapsed());
    }
    println!(
        "{:<44} {:>10.1} ms (median, {} files, {} added bytes)",
        "added::from_objects (tree, diff-tree, blobs)",
        median(reads).as_secs_f64() * 1e3,
        read.files.len(),
        read.added_bytes
    );

    // The scanner over the proposal's added lines.
    let lines: Vec<&str> = read.files.iter().flat_map(|f| f.added.iter().map(|(_, t)| t.as_str())).collect();
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    let started = Instant::now();
    let mut found = 0;
    for _ in 0..20 {
        found += lines.iter().map(|line| patterns::scan_line(line).len()).sum::<usize>();
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "secrets scan of added lines: {:.1} MB/s ({} lines, {found} findings)",
        20.0 * bytes as f64 / 1e6 / seconds,
        lines.len()
    );

    // The held credentials' keyed hashes over the same lines: three values of typical lengths
    // (an OpenAI, an Anthropic and a Google key), hashed with HMAC-SHA256 as the store's are.
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"bench fingerprint key");
    let digest =
        |bytes: &[u8]| ring::hmac::sign(&key, bytes).as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>();
    let values = ["x".repeat(51), "y".repeat(108), "z".repeat(39)];
    let prints: Vec<_> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| CredentialFingerprint::of(&format!("KEY_{i}"), v, &digest))
        .collect();
    let held = HeldCredentials::new(&prints, &digest);
    let started = Instant::now();
    let found: usize = lines.iter().map(|line| held.scan_line(line).len()).sum();
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "held credentials (3 keyed hashes) over added lines: {:.1} MB/s ({found} found)",
        bytes as f64 / 1e6 / seconds
    );

    // This repository's own history.
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // A smoke run reads a few commits: it shows the scan works, not how fast.
    let limit = if smoke() { vec!["-n", "20"] } else { Vec::new() };
    let history = Command::new("git")
        .args(["log", "-p", "--no-color", "--no-ext-diff", "--format=commit %H"])
        .args(limit)
        .current_dir(&own)
        .output();
    let Ok(history) = history else { return };
    let read = added::read(&history.stdout);
    let started = Instant::now();
    let mut by_rule: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    let mut scanned = 0usize;
    for file in &read.files {
        for (line, text) in &file.added {
            scanned += text.len() + 1;
            for rule in patterns::scan_line(text) {
                by_rule.entry(rule).or_default().push(format!("{}:{line}", file.path));
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let total: usize = by_rule.values().map(Vec::len).sum();
    println!(
        "this repository's history: {:.1} MB of added lines in {} file changes, {:.1} MB/s, {total} findings (each a fixture or a false positive)",
        scanned as f64 / 1e6,
        read.files.len(),
        scanned as f64 / 1e6 / seconds
    );
    for (rule, places) in &by_rule {
        let mut unique = places.clone();
        unique.sort();
        unique.dedup();
        println!(
            "  {rule}: {} ({} places), e.g. {}",
            places.len(),
            unique.len(),
            unique.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
        );
    }
}
