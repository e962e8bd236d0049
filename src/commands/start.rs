//! `roundtable start`: takes the state directory's lock and runs the daemon until a signal.

use std::process::ExitCode;

use anyhow::Context as _;
use roundtable_reconcilers::daemon::{self, DaemonConfig};
use roundtable_store::Store;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::{Global, StartArgs};

pub async fn run(global: &Global, args: &StartArgs) -> anyhow::Result<ExitCode> {
    if !global.dir.is_dir() {
        anyhow::bail!("spec directory {} not found (run `roundtable init`, or pass --dir)", global.dir.display());
    }
    let state_dir = global.state_dir();
    roundtable_store::prepare_state_dir(&state_dir)?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let holder = format!("pid {} on {} since {}", std::process::id(), host.trim(), time_now());
    let _lock = roundtable_store::lock::acquire(&state_dir, &holder)?;
    let store = Store::open(&state_dir).await?;

    let mut config = DaemonConfig::new(global.dir.clone(), state_dir);
    config.controller.concurrency = args.concurrency.max(1);
    config.controller.grace = args.grace.as_std();
    config.resync = args.resync.as_std();

    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let shutdown = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    };
    eprintln!("roundtable: watching {} (state in {})", global.dir.display(), global.state_dir().display());
    let summary = daemon::run(config, store.clone(), shutdown).await?;
    store.close().await;
    eprintln!(
        "roundtable: stopped after {} reconciles ({} failed, {} abandoned at the grace period)",
        summary.reconciles, summary.failures, summary.abandoned
    );
    Ok(ExitCode::SUCCESS)
}

fn time_now() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}
