//! What a reconcile asks for next: a requeue after a delay, or nothing until something changes.

use std::time::Duration;

/// The outcome of a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Reconcile again after `duration`, even if nothing changes: for an answer that time alone,
    /// or something no event reports, can change. An answer that only an event can change waits
    /// for that event instead ([`Action::await_change`]): a timer per waiting key is a reconcile
    /// per key per period that learns nothing.
    pub const fn requeue(duration: Duration) -> Self {
        Self { requeue_after: Some(duration) }
    }

    /// Do nothing until the spec changes, a resync or another trigger comes, or someone asks.
    pub const fn await_change() -> Self {
        Self { requeue_after: None }
    }

    pub const fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}
