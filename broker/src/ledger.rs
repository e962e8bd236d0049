//! One session's spending against its budget (a minimal stand-in until the `usage` branch lands):
//! requests counted as they are admitted, tokens as responses settle, and a session whose usage
//! could not be read is spent when it has a budget.

use std::sync::Mutex;

use roundtable_specs::broker::{Budget, Tokens};
use tokio::sync::watch;

/// The budget is spent: the request is not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the session's budget is spent")]
pub struct Spent;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerSnapshot {
    pub requests: u64,
    pub tokens: Tokens,
    pub unreadable: u64,
    pub exhausted: bool,
}

pub struct Ledger {
    budget: Budget,
    state: Mutex<LedgerSnapshot>,
    refused: watch::Sender<bool>,
}

impl Ledger {
    pub fn new(budget: Budget) -> Self {
        Self { budget, state: Mutex::new(LedgerSnapshot::default()), refused: watch::Sender::new(false) }
    }

    pub fn admit(&self) -> Result<(), Spent> {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let spent = state.exhausted
            || self.budget.requests.is_some_and(|cap| state.requests >= cap)
            || self.budget.tokens.is_some_and(|cap| state.tokens.total() >= cap)
            || (!self.budget.is_unlimited() && state.unreadable > 0);
        if spent {
            state.exhausted = true;
            self.refused.send_replace(true);
            return Err(Spent);
        }
        state.requests += 1;
        Ok(())
    }

    pub fn settle(&self, usage: Option<Tokens>) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match usage {
            Some(tokens) => state.tokens.add(tokens),
            None => state.unreadable += 1,
        }
    }

    pub fn snapshot(&self) -> LedgerSnapshot {
        *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn refused(&self) -> watch::Receiver<bool> {
        self.refused.subscribe()
    }
}
