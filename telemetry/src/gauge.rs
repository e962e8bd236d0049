//! A value that goes up and down (queue depth, work in flight).

use std::sync::atomic::{AtomicI64, Ordering};

use crate::exposition::write_sample;
use crate::metric::{Metric, Sealed};

/// An `i64` that is set, or moved by deltas. Several owners may each add their share and take it
/// back (each scheduler its queued keys), so the gauge reads as the process-wide total.
#[derive(Debug, Default)]
pub struct Gauge {
    value: AtomicI64,
}

impl Gauge {
    pub const fn new() -> Self {
        Self { value: AtomicI64::new(0) }
    }

    pub fn set(&self, value: i64) {
        self.value.store(value, Ordering::Relaxed);
    }

    pub fn inc(&self) {
        self.add(1);
    }

    pub fn dec(&self) {
        self.sub(1);
    }

    pub fn add(&self, amount: i64) {
        self.value.fetch_add(amount, Ordering::Relaxed);
    }

    pub fn sub(&self, amount: i64) {
        self.value.fetch_sub(amount, Ordering::Relaxed);
    }

    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }
}

impl Sealed for Gauge {}

impl Metric for Gauge {
    type Shape = ();
    const TYPE: &'static str = "gauge";

    fn with_shape((): &()) -> Self {
        Self::new()
    }

    fn write_samples(&self, name: &str, labels: &str, out: &mut String) {
        write_sample(out, name, labels, self.get());
    }
}
