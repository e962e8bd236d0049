//! The patch step on a 10,000-file / 200 MB workspace with 1,000 files changed (the shape of
//! `benches/execution.sh` section 2), without the engine: each phase the execution times as
//! `timingsMs.patch` (the base commit's paths, settle, diff, verify), beside
//! `git diff --no-index --binary` of the same two folders in the same run.
//! Wall time depends on what else the machine runs; CPU time (this process and the git processes
//! it waited for) is printed beside it, for both, as the steadier figure on a shared machine.
//! Run: `cargo bench -p roundtable-workspace --bench patch [-- RUNS]` (default 3; p50 and p99
//! printed, ours and the baseline taking turns run by run). `ROUNDTABLE_BENCH_SMOKE=1`: 200 files,
//! 20 changed, 1 run, as CI runs it to show the bench still runs to the end.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use roundtable_workspace::{patch, provision, settle};

const FILE_BYTES: usize = 20_000;

fn smoke() -> bool {
    std::env::var("ROUNDTABLE_BENCH_SMOKE").is_ok_and(|value| value == "1")
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?}");
}

/// The same data as `benches/execution.sh`: one random 20 kB block, rotated per file.
fn make_repo(root: &Path, files: usize) {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let block: Vec<u8> = (0..FILE_BYTES)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect();
    for i in 0..files {
        let dir = root.join(format!("data/d{:02}", i / 500));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let shift = i % 100;
        let mut contents = block[shift..].to_vec();
        contents.extend_from_slice(&block[..shift]);
        std::fs::write(dir.join(format!("f{i:05}.bin")), contents).expect("write");
    }
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "base"]);
}

/// A fresh copy of `source` (new files, as the extractor writes them) with the first `changed`
/// files in sorted order appended to, as the agent in `benches/execution.sh` does.
fn make_export(source: &Path, export: &Path, changed: usize) {
    let mut files = Vec::new();
    let mut pending = vec![source.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            if entry.file_type().expect("type").is_dir() {
                pending.push(entry.path());
            } else {
                files.push(entry.path().strip_prefix(source).expect("below").to_path_buf());
            }
        }
    }
    files.sort();
    for (n, relative) in files.iter().enumerate() {
        let target = export.join(relative);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        let mut contents = std::fs::read(source.join(relative)).expect("read");
        if n < changed {
            contents.extend_from_slice(b"changed\n");
        }
        std::fs::write(&target, contents).expect("write");
    }
}

/// CPU time used so far by this process and its waited-for children, from `/proc/self/stat`
/// (utime, stime, cutime, cstime in USER_HZ ticks, 100 a second on Linux).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The command name is in parentheses and may hold spaces: count fields after it.
    let after_name = &stat[stat.rfind(')').expect("stat format") + 2..];
    let ticks: u64 = after_name.split(' ').skip(11).take(4).map(|f| f.parse::<u64>().expect("ticks")).sum();
    Duration::from_millis(ticks * 10)
}

/// p50 and p99 (nearest rank) in milliseconds.
fn p50_p99(mut values: Vec<Duration>) -> (u128, u128) {
    values.sort();
    let at = |p: f64| {
        let rank = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len().max(1));
        values.get(rank - 1).copied().unwrap_or_default().as_millis()
    };
    (at(0.50), at(0.99))
}

fn main() {
    let (files, changed, default_runs) = if smoke() { (200, 20, 1) } else { (10_000, 1_000, 3) };
    let runs: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(default_runs).max(1);
    let work = tempfile::tempdir().expect("tempdir");
    let repo = work.path().join("repo");
    make_repo(&repo, files);
    let commit = provision::resolve(&repo, "main").expect("resolve");
    let source = work.path().join("source");
    let provided = provision::export(&repo, &commit, &["data/".into()], &source).expect("provision");
    let given: BTreeSet<String> = provided.files.iter().map(|f| f.path.clone()).collect();

    let phases = [
        "base paths",
        "settle",
        "diff",
        "verify",
        "patch total",
        "git diff --no-index --binary",
        "patch total, CPU",
        "git diff --no-index --binary, CPU",
    ];
    let mut timings: Vec<Vec<Duration>> = vec![Vec::new(); phases.len()];
    for run in 0..runs {
        let exec = work.path().join(format!("run-{run}"));
        let export = exec.join("export");
        make_export(&source, &export, changed);
        let mut laps = Vec::new();
        let cpu_started = cpu_time();
        let started = Instant::now();
        let mut lap = Instant::now();
        let mut next = |laps: &mut Vec<Duration>| {
            laps.push(lap.elapsed());
            lap = Instant::now();
        };
        let at_base = provision::commit_paths(&repo, &commit).expect("commit paths");
        next(&mut laps);
        settle::settle(&source, &export, &given, &at_base, &[]).expect("settle");
        next(&mut laps);
        let made = patch::diff(&exec.join("scratch"), &source, &export).expect("diff");
        next(&mut laps);
        patch::verify(&repo, &commit, &made, &export, &exec.join("scratch/check")).expect("verify");
        next(&mut laps);
        laps.push(started.elapsed());
        let cpu_ours = cpu_time() - cpu_started;
        assert_eq!(made.files_changed, changed as u64, "the patch holds every changed file");

        let (baseline, cpu_baseline) = (Instant::now(), cpu_time());
        let output = Command::new("git")
            .args(["diff", "--no-index", "--binary"])
            .arg(&source)
            .arg(&export)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git diff --no-index");
        laps.push(baseline.elapsed());
        laps.extend([cpu_ours, cpu_time() - cpu_baseline]);
        assert_eq!(output.status.code(), Some(1), "git diff --no-index sees the changes");
        for (all, value) in timings.iter_mut().zip(laps) {
            all.push(value);
        }
        std::fs::remove_dir_all(&exec).expect("clean up the run");
    }
    println!(
        "patch step, {files} files / {} MB, {changed} changed, {runs} runs, ours and the baseline taking turns (ms):",
        files * FILE_BYTES / 1_000_000
    );
    println!("  {:<34} {:>6} {:>6}", "", "p50", "p99");
    let spreads: Vec<(u128, u128)> = timings.into_iter().map(p50_p99).collect();
    for (phase, (p50, p99)) in phases.iter().zip(&spreads) {
        println!("  {phase:<34} {p50:>6} {p99:>6}");
    }
    let ratio = |ours: u128, baseline: u128| ours as f64 / baseline.max(1) as f64;
    let (ours, baseline, cpu_ours, cpu_baseline) = (spreads[4].0, spreads[5].0, spreads[6].0, spreads[7].0);
    println!(
        "p50: roundtable patch (diff + verify) {ours} ms vs git diff --no-index --binary {baseline} ms = {:.2}x wall; CPU {cpu_ours} ms vs {cpu_baseline} ms = {:.2}x",
        ratio(ours, baseline),
        ratio(cpu_ours, cpu_baseline)
    );
}
