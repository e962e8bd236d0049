//! Where a broker reports: one [`RequestLine`] per request to a [`BrokerJournal`], and its
//! counters (requests passed, refusals by reason, and the ledger's tokens and state).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use roundtable_specs::broker::{BrokerReason, RequestLine, Tokens};

/// Takes the broker's lines (the daemon's bounded `broker.log`).
pub trait BrokerJournal: Send + Sync {
    fn request(&self, line: &RequestLine);
}

/// What a broker has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerCounters {
    /// Requests passed to a provider (answered with the provider's status).
    pub requests: u64,
    /// Requests refused or failed, by reason.
    pub refused: BTreeMap<BrokerReason, u64>,
    pub tokens: Tokens,
    /// Allowed responses whose usage could not be read.
    pub unreadable: u64,
    /// The budget was spent.
    pub exhausted: bool,
    /// Accept-loop restarts after a panic.
    pub restarts: u64,
}

#[derive(Default)]
pub(crate) struct Tally {
    passed: AtomicU64,
    refused: Mutex<BTreeMap<BrokerReason, u64>>,
    restarts: AtomicU64,
}

impl Tally {
    pub(crate) fn record(&self, reason: BrokerReason) {
        if reason == BrokerReason::Allowed {
            self.passed.fetch_add(1, Ordering::Relaxed);
        } else {
            *self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(reason).or_default() += 1;
        }
    }

    pub(crate) fn restarted(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn passed(&self) -> u64 {
        self.passed.load(Ordering::Relaxed)
    }

    pub(crate) fn refused(&self) -> BTreeMap<BrokerReason, u64> {
        self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    pub(crate) fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }
}

/// RFC 3339 UTC with milliseconds.
pub(crate) fn now() -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    time::OffsetDateTime::now_utc().format(&format).unwrap_or_default()
}
