//! This controller's presence in a store that several may share: its registration, the
//! heartbeat that keeps it and its execution leases alive, the stop of executions whose leases
//! another controller took over, and the release of everything when it stops.

use std::time::Duration;

use roundtable_store::{Registration, Store};
use tokio::task::JoinHandle;

use crate::execution::ExecutionManager;

/// How long a stopped or expired registration is still listed by `roundtable controllers`.
const FORGET_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

/// Registered until [`Presence::stop`]; heartbeating meanwhile.
pub struct Presence {
    store: Store,
    id: String,
    heartbeat: JoinHandle<()>,
}

impl Presence {
    /// Registers the controller `executions` runs for and starts its heartbeat (every third of
    /// the lease TTL). On a store of its own (SQLite) the daemon lock already proved that every
    /// earlier run is gone, so their registrations are marked stopped at once: their leases do
    /// not have to expire before a restart re-runs what they left.
    pub async fn start(
        store: &Store,
        executions: &ExecutionManager,
        checkout: &str,
    ) -> Result<Self, roundtable_store::Error> {
        let config = executions.config();
        let id = config.controller_run.clone();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let me = Registration { id: &id, host: host.trim(), pid: std::process::id(), checkout };
        store.register_controller(&me, config.lease_ttl).await?;
        if !store.is_shared() {
            store.forget_controllers_except(&id).await?;
        }
        // Every start registers anew; registrations gone for a week are only history.
        store.forget_controllers_before(&roundtable_store::cutoff(FORGET_AFTER)).await?;
        let heartbeat = tokio::spawn(beat(store.clone(), executions.clone(), id.clone(), config.lease_ttl));
        Ok(Self { store: store.clone(), id, heartbeat })
    }

    /// Stops heartbeating, marks the controller stopped and releases its leases (after the
    /// executions were recorded), so others need not wait for them to expire.
    pub async fn stop(self) {
        self.heartbeat.abort();
        if let Err(error) = self.store.deregister_controller(&self.id).await {
            tracing::warn!(%error, "cannot deregister this controller; its leases expire instead");
        }
    }
}

async fn beat(store: Store, executions: ExecutionManager, id: String, ttl: Duration) {
    let mut ticks = tokio::time::interval(ttl / 3);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match store.controller_heartbeat(&id, ttl).await {
            Ok(held) => {
                executions.stop_lost(&held);
            }
            Err(error) => tracing::warn!(%error, "heartbeat failed; executions are taken over if it keeps failing"),
        }
    }
}
