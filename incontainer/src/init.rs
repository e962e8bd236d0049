//! PID 1 inside agent containers (`roundtable sandbox init`): reaps orphaned children and waits
//! until the container is stopped.

use rustix::process::{WaitOptions, wait};
use tokio::signal::unix::{SignalKind, signal};

/// Reaps every exited child without blocking; returns how many were reaped.
fn reap_exited() -> usize {
    let mut reaped = 0;
    while let Ok(Some(_)) = wait(WaitOptions::NOHANG) {
        reaped += 1;
    }
    reaped
}

/// Runs until SIGTERM or SIGINT, reaping on every SIGCHLD.
pub async fn run() -> std::io::Result<()> {
    let mut children = signal(SignalKind::child())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    loop {
        tokio::select! {
            _ = children.recv() => { reap_exited(); }
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
    }
    reap_exited();
    Ok(())
}
