//! Per-key error backoff: exponential from 1 s to 5 min, ×2, with ±20 % jitter, reset on
//! success; the base sequence comes from backon.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// The shape of the backoff; the defaults are 1 s to 5 min, ×2, ±20 % jitter.
#[derive(Debug, Clone, Copy)]
pub struct BackoffConfig {
    pub min: Duration,
    pub max: Duration,
    pub factor: f32,
    /// The jitter as a fraction: 0.2 spreads each delay over ±20 %.
    pub jitter: f64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self { min: Duration::from_secs(1), max: Duration::from_secs(300), factor: 2.0, jitter: 0.2 }
    }
}

/// One key's backoff state.
#[derive(Debug)]
pub struct KeyBackoff {
    config: BackoffConfig,
    sequence: ExponentialBackoff,
    failures: u32,
}

impl KeyBackoff {
    pub fn new(config: BackoffConfig) -> Self {
        Self { config, sequence: Self::sequence(config), failures: 0 }
    }

    fn sequence(config: BackoffConfig) -> ExponentialBackoff {
        ExponentialBuilder::default()
            .with_min_delay(config.min)
            .with_max_delay(config.max)
            .with_factor(config.factor)
            .without_max_times()
            .build()
    }

    /// Records a failure and returns how long to wait before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        self.failures += 1;
        let base = self.sequence.next().unwrap_or(self.config.max);
        let spread = 1.0 + self.config.jitter * (2.0 * fastrand::f64() - 1.0);
        base.mul_f64(spread.max(0.0))
    }

    /// Consecutive failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A success: start over from the minimum delay.
    pub fn reset(&mut self) {
        self.sequence = Self::sequence(self.config);
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_doubles_caps_and_resets_within_the_jitter() {
        let mut backoff = KeyBackoff::new(BackoffConfig::default());
        let expected = [1u64, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300];
        for seconds in expected {
            let delay = backoff.next_delay().as_secs_f64();
            let base = seconds as f64;
            assert!(delay >= base * 0.8 - 1e-9 && delay <= base * 1.2 + 1e-9, "{delay} not within ±20 % of {base}");
        }
        assert_eq!(backoff.failures(), expected.len() as u32);
        backoff.reset();
        assert_eq!(backoff.failures(), 0);
        let first = backoff.next_delay().as_secs_f64();
        assert!((0.8..=1.2).contains(&first), "after a reset the delay starts over: {first}");
    }
}
