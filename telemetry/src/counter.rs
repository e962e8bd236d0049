//! A count that only goes up (events, bytes, decisions).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::exposition::write_sample;
use crate::metric::{Metric, Sealed};

/// A monotonically increasing `u64`.
#[derive(Debug, Default)]
pub struct Counter {
    value: AtomicU64,
}

impl Counter {
    pub const fn new() -> Self {
        Self { value: AtomicU64::new(0) }
    }

    pub fn inc(&self) {
        self.inc_by(1);
    }

    pub fn inc_by(&self, amount: u64) {
        // Relaxed: a scrape needs each value, not an order between them.
        self.value.fetch_add(amount, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }
}

impl Sealed for Counter {}

impl Metric for Counter {
    type Shape = ();
    const TYPE: &'static str = "counter";

    fn with_shape((): &()) -> Self {
        Self::new()
    }

    fn write_samples(&self, name: &str, labels: &str, out: &mut String) {
        write_sample(out, name, labels, self.get());
    }
}
