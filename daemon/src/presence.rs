//! This controller's presence in a store that several may share: its registration, the
//! heartbeat that keeps it and its execution leases alive, the stop of executions whose leases
//! another controller took over, the lease watch that queues what another controller stopped
//! holding, and the release of everything when it stops.

use std::time::Duration;

use roundtable_store::{LeaseRecord, Registration, Store};
use tokio::task::JoinHandle;

use roundtable_execution::ExecutionManager;
use roundtable_reconcilers::backend::{AuditEvent, AuditSink as _, ChainedEvents};

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

/// How long after the last heartbeat that renewed its leases a controller that cannot renew
/// them stops its executions: half the TTL. The other half covers stopping the containers and
/// the database's clock (by which leases expire) running ahead of this host's.
fn fence_after(ttl: Duration) -> Duration {
    ttl / 2
}

/// A time this controller was cut off from its store: since when (by this host's clock), and
/// the executions it stopped.
struct CutOff {
    since: String,
    started: std::time::Instant,
    stopped: Vec<String>,
}

async fn beat(store: Store, executions: ExecutionManager, id: String, ttl: Duration) {
    let mut ticks = tokio::time::interval(ttl / 3);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut watch = LeaseWatch::default();
    // Only on a shared store can another controller take an execution over; on SQLite the
    // daemon lock keeps every other controller out, so nothing is fenced there.
    let fences = store.is_shared();
    // Registration renewed everything just before the first beat.
    let mut renewed = tokio::time::Instant::now();
    let mut cut_off: Option<CutOff> = None;
    loop {
        let fence_at = renewed + fence_after(ttl);
        tokio::select! {
            _ = ticks.tick() => {}
            () = tokio::time::sleep_until(fence_at), if fences && cut_off.is_none() => {
                cut_off = Some(fence(&executions, renewed, ttl));
                continue;
            }
        }
        let sent = tokio::time::Instant::now();
        // A partition that drops packets leaves a query waiting for TCP's own timeout (minutes):
        // each beat gives up by the next.
        let heartbeat = tokio::time::timeout(ttl / 3, store.controller_heartbeat(&id, ttl));
        tokio::pin!(heartbeat);
        let beaten = loop {
            tokio::select! {
                beaten = &mut heartbeat => break beaten,
                () = tokio::time::sleep_until(fence_at), if fences && cut_off.is_none() => {
                    cut_off = Some(fence(&executions, renewed, ttl));
                }
            }
        };
        let held = match beaten {
            Ok(Ok(held)) => held,
            Ok(Err(error)) => {
                tracing::warn!(%error, "heartbeat failed; executions are taken over if it keeps failing");
                continue;
            }
            Err(_) => {
                tracing::warn!(
                    timeout_ms = (ttl / 3).as_millis() as u64,
                    "heartbeat timed out; the store did not answer"
                );
                continue;
            }
        };
        renewed = sent;
        if let Some(cut_off) = cut_off.take() {
            executions.unfence();
            rejoined(&executions, cut_off).await;
        }
        executions.stop_lost(&held);
        match store.execution_leases().await {
            Ok(leases) => executions.requeue(watch.ended(&id, &leases)),
            Err(error) => tracing::warn!(%error, "cannot read the execution leases; a resync looks again"),
        }
    }
}

/// Stops every execution here and all intake: the leases went unrenewed since `renewed`.
fn fence(executions: &ExecutionManager, renewed: tokio::time::Instant, ttl: Duration) -> CutOff {
    let stopped = executions.fence();
    tracing::error!(
        unrenewed_ms = renewed.elapsed().as_millis() as u64,
        lease_ttl_ms = ttl.as_millis() as u64,
        stopped = stopped.len(),
        "cut off from the store: the leases were not renewed in time, so every execution here is stopped \
         before another controller may take it over; none starts until the store answers again"
    );
    CutOff { since: roundtable_store::now(), started: std::time::Instant::now(), stopped }
}

/// Says in the log and in the store (an event on each Assignment whose execution was stopped)
/// that this controller was cut off and is back.
async fn rejoined(executions: &ExecutionManager, cut_off: CutOff) {
    let seconds = cut_off.started.elapsed().as_secs();
    tracing::info!(
        since = %cut_off.since,
        cut_off_s = seconds,
        stopped = cut_off.stopped.len(),
        "reconnected to the store: this controller renews its leases and starts executions again"
    );
    let controller = &executions.config().controller_run;
    let events: Vec<AuditEvent> = cut_off
        .stopped
        .into_iter()
        .map(|assignment| AuditEvent {
            object: roundtable_specs::ObjectKey::new(roundtable_specs::Kind::Assignment, assignment),
            warning: true,
            reason: roundtable_specs::events::EventReason::ExecutionFenced.into(),
            message: format!(
                "controller {controller} was cut off from the store from {} for about {seconds} s and stopped this execution before its lease could expire",
                cut_off.since
            ),
        })
        .collect();
    if events.is_empty() {
        return;
    }
    let sink = ChainedEvents { store: executions.store().clone(), key: executions.config().audit_key.clone() };
    if let Err(error) = sink.record_all(events).await {
        tracing::warn!(%error, "cannot record the executions stopped while cut off from the store");
    }
}

/// The Assignments other controllers held at the last heartbeat. One read of the leases per
/// heartbeat finds those whose hold ended (released, expired, or their holder stopped), so a
/// reconcile of an Assignment held elsewhere need not look again on a timer: at 10,000
/// Assignments that was 10,000 reconciles per lease TTL to learn nothing.
#[derive(Debug, Default)]
struct LeaseWatch {
    held_elsewhere: std::collections::BTreeSet<String>,
}

impl LeaseWatch {
    /// The Assignments held elsewhere at the last look and not now, given every lease `leases`
    /// (as read, by the store's lease clock); remembers who holds what now.
    fn ended(&mut self, me: &str, leases: &[LeaseRecord]) -> Vec<String> {
        let now: std::collections::BTreeSet<String> = leases
            .iter()
            .filter(|lease| lease.holder != me && lease.held())
            .map(|lease| lease.assignment.clone())
            .collect();
        let ended = self.held_elsewhere.difference(&now).cloned().collect();
        self.held_elsewhere = now;
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(assignment: &str, holder: &str, expires_at: &str) -> LeaseRecord {
        LeaseRecord {
            assignment: assignment.into(),
            assignment_uid: format!("uid-{assignment}"),
            holder: holder.into(),
            fence: 1,
            acquired_at: "2026-01-01T00:00:00Z".into(),
            expires_at: expires_at.into(),
            released_at: None,
            holder_live: true,
            read_at: "2026-01-01T00:00:10Z".into(),
        }
    }

    #[test]
    fn a_hold_that_ends_is_reported_once() {
        let mut watch = LeaseWatch::default();
        let at = "2026-01-01T00:00:10Z";
        let live = "2026-01-01T00:00:20Z";
        let both = [lease("a", "other", live), lease("b", "other", live), lease("mine", "me", live)];
        assert!(watch.ended("me", &both).is_empty(), "nothing has ended yet");
        // `a` released, `b` expired: both reported, this controller's own lease never.
        let mut released = lease("a", "other", live);
        released.released_at = Some(at.into());
        let expired = lease("b", "other", "2026-01-01T00:00:05Z");
        assert_eq!(watch.ended("me", &[released, expired, lease("mine", "me", "2026-01-01T00:00:01Z")]), ["a", "b"]);
        assert!(watch.ended("me", &[]).is_empty(), "reported once");
    }

    #[test]
    fn a_holder_that_stopped_heartbeating_ends_its_hold() {
        let mut watch = LeaseWatch::default();
        watch.ended("me", &[lease("a", "other", "2026-01-01T00:00:20Z")]);
        let mut dead = lease("a", "other", "2026-01-01T00:00:20Z");
        dead.holder_live = false;
        assert_eq!(watch.ended("me", &[dead]), ["a"]);
    }
}
