//! A distribution of observations (durations, sizes) counted into fixed buckets.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::exposition::{FloatText, write_sample};
use crate::metric::{Metric, Sealed};

/// Observations counted into buckets with fixed upper bounds (inclusive, as Prometheus' `le`),
/// plus an implicit `+Inf` bucket, and their sum.
#[derive(Debug)]
pub struct Histogram {
    /// Finite, ascending, without duplicates.
    bounds: Arc<[f64]>,
    /// One per bound, then the `+Inf` bucket; each counts only its own range, the exposition
    /// makes them cumulative.
    buckets: Box<[AtomicU64]>,
    /// The sum of observations as `f64` bits: there is no atomic float.
    sum_bits: AtomicU64,
}

impl Histogram {
    /// A histogram with these upper bounds; they are sorted, and duplicates and non-finite ones
    /// (`+Inf` is always there) dropped.
    pub fn new(bounds: &[f64]) -> Self {
        Self::with_shape(&normalize_bounds(bounds))
    }

    /// Counts `value` into its bucket. NaN is ignored: it has no bucket and would make the sum
    /// NaN forever.
    pub fn observe(&self, value: f64) {
        if value.is_nan() {
            return;
        }
        let index = self.bounds.partition_point(|bound| *bound < value);
        if let Some(bucket) = self.buckets.get(index) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        // Concurrent observers retry until their addition lands on the sum they read.
        let _ = self
            .sum_bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| Some((f64::from_bits(bits) + value).to_bits()));
    }

    /// Observes a duration in seconds (the Prometheus base unit).
    pub fn observe_duration(&self, elapsed: Duration) {
        self.observe(elapsed.as_secs_f64());
    }

    pub fn bounds(&self) -> &[f64] {
        &self.bounds
    }

    /// Observations so far: the total of the buckets, so `_count` always equals the `+Inf`
    /// bucket in one scrape.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|bucket| bucket.load(Ordering::Relaxed)).sum()
    }

    pub fn sum(&self) -> f64 {
        f64::from_bits(self.sum_bits.load(Ordering::Relaxed))
    }
}

/// `count` bounds from `start`, each `factor` times the one before (`start > 0`, `factor > 1`;
/// otherwise none).
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    if !(start > 0.0 && factor > 1.0) {
        return Vec::new();
    }
    std::iter::successors(Some(start), |bound| Some(bound * factor)).take(count).collect()
}

pub(crate) fn normalize_bounds(bounds: &[f64]) -> Arc<[f64]> {
    let mut bounds: Vec<f64> = bounds.iter().copied().filter(|bound| bound.is_finite()).collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    bounds.into()
}

impl Sealed for Histogram {}

impl Metric for Histogram {
    type Shape = Arc<[f64]>;
    const TYPE: &'static str = "histogram";

    fn with_shape(bounds: &Arc<[f64]>) -> Self {
        Self {
            bounds: bounds.clone(),
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_bits: AtomicU64::new(0.0_f64.to_bits()),
        }
    }

    fn write_samples(&self, name: &str, labels: &str, out: &mut String) {
        let separator = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0u64;
        let counts = self.buckets.iter().map(|bucket| bucket.load(Ordering::Relaxed));
        let upper = self.bounds.iter().map(|bound| FloatText(*bound)).map(Some).chain([None]);
        for (count, bound) in counts.zip(upper) {
            cumulative += count;
            let le = bound.map_or_else(|| "+Inf".to_owned(), |bound| bound.to_string());
            write_sample(out, &format!("{name}_bucket"), &format!("{labels}{separator}le=\"{le}\""), cumulative);
        }
        write_sample(out, &format!("{name}_sum"), labels, FloatText(self.sum()));
        write_sample(out, &format!("{name}_count"), labels, cumulative);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observation_lands_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        let histogram = Histogram::new(&[1.0, 0.5, f64::INFINITY, 0.5, f64::NAN]);
        assert_eq!(histogram.bounds(), [0.5, 1.0], "sorted, deduplicated, finite");
        for value in [0.5, 0.7, 1.0, 3.0, f64::NAN] {
            histogram.observe(value);
        }
        let mut out = String::new();
        histogram.write_samples("h", "", &mut out);
        let expected = "h_bucket{le=\"0.5\"} 1\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 4\nh_sum 5.2\nh_count 4\n";
        assert_eq!(out, expected);
    }

    #[test]
    fn concurrent_observations_all_reach_the_sum() {
        let histogram = Arc::new(Histogram::new(&[1.0]));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let histogram = histogram.clone();
                std::thread::spawn(move || (0..10_000).for_each(|_| histogram.observe(0.25)))
            })
            .collect();
        for thread in threads {
            thread.join().expect("observer thread");
        }
        assert_eq!(histogram.count(), 40_000);
        assert_eq!(histogram.sum(), 10_000.0, "quarters add up exactly in binary");
    }

    #[test]
    fn exponential_buckets_multiply_and_refuse_nonsense() {
        assert_eq!(exponential_buckets(1.0, 4.0, 4), [1.0, 4.0, 16.0, 64.0]);
        assert!(exponential_buckets(0.0, 2.0, 3).is_empty());
        assert!(exponential_buckets(1.0, 1.0, 3).is_empty());
    }
}
