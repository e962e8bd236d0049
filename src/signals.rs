//! Stopping on SIGINT or SIGTERM, for every long-running command.

use std::future::Future;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};

/// A future that resolves on the first SIGINT or SIGTERM. The handlers are installed now, so a
/// signal that arrives before the future is awaited is not lost.
pub fn shutdown() -> anyhow::Result<impl Future<Output = ()>> {
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    Ok(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    })
}

/// Two futures for a daemon: the first SIGINT/SIGTERM, and the one after it (which asks the
/// daemon to hurry its shutdown). The handlers are installed now.
pub fn shutdown_then_hurry() -> anyhow::Result<(impl Future<Output = ()>, impl Future<Output = ()>)> {
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let (count, mut seen) = tokio::sync::watch::channel(0u32);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                Some(()) = terminate.recv() => {}
                Some(()) = interrupt.recv() => {}
                else => return,
            }
            count.send_modify(|n| *n += 1);
        }
    });
    let mut seen_again = seen.clone();
    let first = async move {
        let _ = seen.wait_for(|n| *n >= 1).await;
    };
    let second = async move {
        let _ = seen_again.wait_for(|n| *n >= 2).await;
    };
    Ok((first, second))
}
