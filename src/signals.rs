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
