//! The periodic resync spread over its period: each key once, in a shuffled order, a few at a
//! time, so that a resync of 100,000 keys is a trickle through the period instead of a burst
//! that queues them all at once.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Batches are at least this far apart: a few keys every second rather than one key every few
/// milliseconds, which would wake the loop for each.
const MIN_TICK: Duration = Duration::from_secs(1);

/// One resync pass in progress: the keys still to queue and when the next few are due.
#[derive(Debug)]
pub struct Spread<K> {
    keys: VecDeque<K>,
    next: Option<Instant>,
    tick: Duration,
    /// Batches in the pass, and how many have been queued.
    ticks: usize,
    done: usize,
    /// Keys in the pass.
    total: usize,
}

impl<K> Default for Spread<K> {
    fn default() -> Self {
        Self { keys: VecDeque::new(), next: None, tick: MIN_TICK, ticks: 0, done: 0, total: 0 }
    }
}

impl<K> Spread<K> {
    /// Starts a pass over `keys` from `now`: shuffled, then queued evenly over `over` in batches
    /// a tick apart, the last at its end. What the previous pass had not queued yet is dropped:
    /// the new pass holds every key that is still live.
    pub fn start(&mut self, mut keys: Vec<K>, over: Duration, now: Instant) {
        fastrand::shuffle(&mut keys);
        self.total = keys.len();
        self.keys = keys.into();
        self.done = 0;
        // One batch a second at most, and never more batches than keys.
        let seconds = usize::try_from(over.as_millis() / MIN_TICK.as_millis()).unwrap_or(usize::MAX);
        self.ticks = seconds.clamp(1, self.total.max(1));
        self.tick = over / u32::try_from(self.ticks).unwrap_or(u32::MAX);
        self.next = (self.total > 0).then(|| now + self.tick);
    }

    /// When the next batch is due; `None` once the pass is done.
    pub fn deadline(&self) -> Option<Instant> {
        self.next
    }

    /// The keys due at `now` (none before the deadline). Batch `i` brings the pass to
    /// `total × i / ticks` keys, so batches differ by one key at most.
    pub fn due(&mut self, now: Instant) -> Vec<K> {
        let Some(next) = self.next.filter(|next| *next <= now) else { return Vec::new() };
        self.done += 1;
        let target = if self.done >= self.ticks { self.total } else { self.total * self.done / self.ticks };
        let taken = self.total - self.keys.len();
        let batch: Vec<K> = self.keys.drain(..target.saturating_sub(taken).min(self.keys.len())).collect();
        self.next = if self.keys.is_empty() { None } else { Some(next + self.tick) };
        batch
    }

    /// Keys of this pass not queued yet.
    pub fn remaining(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn every_key_is_queued_once_a_few_at_a_time_within_the_period() {
        let start = Instant::now();
        let mut spread = Spread::default();
        let keys: Vec<u32> = (0..10_000).collect();
        let over = Duration::from_secs(540);
        spread.start(keys, over, start);
        let mut seen = Vec::new();
        let mut batches = 0;
        while let Some(at) = spread.deadline() {
            assert!(at <= start + over, "the pass ends within its period");
            assert!(spread.due(at - Duration::from_millis(1)).is_empty(), "nothing before its deadline");
            let batch = spread.due(at);
            assert!((18..=19).contains(&batch.len()), "{} keys at once", batch.len());
            seen.extend(batch);
            batches += 1;
        }
        assert_eq!(batches, 540, "one batch a second");
        assert_eq!(spread.remaining(), 0);
        seen.sort_unstable();
        assert_eq!(seen, (0..10_000).collect::<Vec<_>>(), "every key once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_few_keys_are_spread_one_by_one_and_a_new_pass_replaces_the_old() {
        let start = Instant::now();
        let mut spread = Spread::default();
        spread.start(vec!["a", "b", "c"], Duration::from_secs(600), start);
        assert_eq!(spread.deadline(), Some(start + Duration::from_secs(200)));
        assert_eq!(spread.due(start + Duration::from_secs(200)).len(), 1);
        spread.start(vec!["a"], Duration::from_secs(60), start + Duration::from_secs(300));
        assert_eq!(spread.remaining(), 1, "the earlier pass's keys are dropped");
        assert_eq!(spread.due(start + Duration::from_secs(360)), vec!["a"]);
        assert_eq!(spread.deadline(), None);
        spread.start(Vec::new(), Duration::from_secs(60), start);
        assert_eq!(spread.deadline(), None, "nothing to queue, nothing due");
    }
}
