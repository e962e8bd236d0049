//! Delays and deduplicates reconcile requests by key: a key is queued at most once, and when it
//! is scheduled again the earliest deadline wins.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::Arc;

use roundtable_telemetry::Gauge;
use tokio::time::Instant;

/// Pending reconciles, one per key, ordered by deadline.
#[derive(Debug)]
pub struct Scheduler<K> {
    /// Each queued key's deadline and sequence number (which breaks ties between equal
    /// deadlines in arrival order): its place in `queue`.
    deadlines: HashMap<K, (Instant, u64)>,
    queue: BTreeSet<(Instant, u64, K)>,
    sequence: u64,
    /// Holds this scheduler's share of the queued keys: each key adds one while it is queued,
    /// and a dropped scheduler takes back what it still holds.
    depth: Arc<Gauge>,
}

impl<K: Clone + Eq + Hash + Ord> Default for Scheduler<K> {
    /// A scheduler counted in the process-wide `roundtable_queue_depth`.
    fn default() -> Self {
        Self::counted_in(crate::metrics::queue_depth())
    }
}

impl<K> Drop for Scheduler<K> {
    fn drop(&mut self) {
        self.depth.sub(gauge_amount(self.deadlines.len()));
    }
}

fn gauge_amount(keys: usize) -> i64 {
    i64::try_from(keys).unwrap_or(i64::MAX)
}

impl<K: Clone + Eq + Hash + Ord> Scheduler<K> {
    /// A scheduler whose queued keys are counted in `depth`.
    pub fn counted_in(depth: Arc<Gauge>) -> Self {
        Self { deadlines: HashMap::new(), queue: BTreeSet::new(), sequence: 0, depth }
    }

    /// Queues `key` at `at`, unless it is already queued at or before `at`.
    pub fn schedule(&mut self, key: K, at: Instant) {
        if let Some(&(current, sequence)) = self.deadlines.get(&key) {
            if current <= at {
                return;
            }
            self.queue.remove(&(current, sequence, key.clone()));
        } else {
            self.depth.inc();
        }
        self.sequence += 1;
        self.deadlines.insert(key.clone(), (at, self.sequence));
        self.queue.insert((at, self.sequence, key));
    }

    /// Drops a queued key.
    pub fn cancel(&mut self, key: &K) {
        if let Some((at, sequence)) = self.deadlines.remove(key) {
            self.queue.remove(&(at, sequence, key.clone()));
            self.depth.dec();
        }
    }

    pub fn len(&self) -> usize {
        self.deadlines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.deadlines.is_empty()
    }

    /// The earliest deadline, if any key is queued.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queue.first().map(|(at, _, _)| *at)
    }

    /// Removes and returns the earliest key whose deadline has passed.
    pub fn pop_due(&mut self, now: Instant) -> Option<K> {
        let (at, _, key) = self.queue.first()?.clone();
        if at > now {
            return None;
        }
        self.cancel(&key);
        Some(key)
    }

    /// Waits until the earliest deadline; pending forever while nothing is queued.
    pub async fn wait_for_deadline(&self) {
        match self.next_deadline() {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn earliest_deadline_wins_and_keys_are_unique() {
        let now = Instant::now();
        let mut scheduler = Scheduler::default();
        scheduler.schedule("a", now + Duration::from_secs(10));
        scheduler.schedule("a", now + Duration::from_secs(5));
        scheduler.schedule("a", now + Duration::from_secs(20));
        scheduler.schedule("b", now + Duration::from_secs(7));
        assert_eq!(scheduler.len(), 2);
        assert_eq!(scheduler.pop_due(now + Duration::from_secs(4)), None);
        assert_eq!(scheduler.pop_due(now + Duration::from_secs(6)), Some("a"));
        assert_eq!(scheduler.pop_due(now + Duration::from_secs(6)), None);
        assert_eq!(scheduler.pop_due(now + Duration::from_secs(30)), Some("b"));
        assert!(scheduler.is_empty());
    }

    #[test]
    fn the_depth_gauge_follows_the_queued_keys_and_is_given_back_on_drop() {
        let now = Instant::now();
        let depth = Arc::new(Gauge::new());
        let mut scheduler = Scheduler::counted_in(depth.clone());
        scheduler.schedule("a", now + Duration::from_secs(5));
        scheduler.schedule("a", now);
        scheduler.schedule("b", now + Duration::from_secs(5));
        scheduler.schedule("c", now + Duration::from_secs(5));
        assert_eq!(depth.get(), 3, "a rescheduled key counts once");
        assert_eq!(scheduler.pop_due(now), Some("a"));
        scheduler.cancel(&"b");
        scheduler.cancel(&"b");
        assert_eq!(depth.get(), 1);
        let other = Scheduler::<&str>::counted_in(depth.clone());
        drop(other);
        drop(scheduler);
        assert_eq!(depth.get(), 0, "a dropped scheduler takes back what it held");
    }

    #[test]
    fn cancel_removes_a_key() {
        let now = Instant::now();
        let mut scheduler = Scheduler::default();
        scheduler.schedule(1, now);
        scheduler.cancel(&1);
        assert_eq!(scheduler.pop_due(now), None);
        assert_eq!(scheduler.next_deadline(), None);
    }
}
