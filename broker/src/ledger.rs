//! One session's spending against its budget: requests admitted, tokens and unreadable usages
//! settled, and whether a request has been refused for it yet.

use std::sync::{Mutex, MutexGuard, PoisonError};

use roundtable_specs::broker::{Budget, Tokens};
use tokio::sync::watch;

/// Which budget is spent, with the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SpentBudget {
    #[error("token budget spent: {used} of {limit}")]
    Tokens { used: u64, limit: u64 },
    #[error("request budget spent: {used} of {limit}")]
    Requests { used: u64, limit: u64 },
    /// A budgeted session cannot tell what an unreadable response cost, so it ends there.
    #[error("budget spent: the usage of {responses} response(s) could not be read")]
    Unreadable { responses: u64 },
}

/// Why [`Ledger::admit`] refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{budget}")]
pub struct Spent {
    pub budget: SpentBudget,
}

/// What a ledger has counted so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerSnapshot {
    /// Requests admitted upstream.
    pub requests: u64,
    /// Tokens the settled responses reported.
    pub tokens: Tokens,
    /// Settled responses whose usage could not be read.
    pub unreadable: u64,
    /// The budget is spent: the next request would be refused.
    pub exhausted: bool,
}

/// A session's budget and what it has spent, shared by every request of the session.
#[derive(Debug)]
pub struct Ledger {
    budget: Budget,
    counts: Mutex<Counts>,
    refused: watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct Counts {
    requests: u64,
    tokens: Tokens,
    unreadable: u64,
}

impl Counts {
    fn spent(&self, budget: &Budget) -> Option<SpentBudget> {
        if let Some(limit) = budget.tokens {
            let used = self.tokens.total();
            if used >= limit {
                return Some(SpentBudget::Tokens { used, limit });
            }
        }
        if let Some(limit) = budget.requests
            && self.requests >= limit
        {
            return Some(SpentBudget::Requests { used: self.requests, limit });
        }
        if self.unreadable > 0 && !budget.is_unlimited() {
            return Some(SpentBudget::Unreadable { responses: self.unreadable });
        }
        None
    }
}

impl Ledger {
    pub fn new(budget: Budget) -> Self {
        Ledger { budget, counts: Mutex::new(Counts::default()), refused: watch::Sender::new(false) }
    }

    /// Before a request goes upstream: counts it, or refuses it when the budget is spent.
    /// Admission and the count are one step, so concurrent requests never pass a request
    /// budget.
    pub fn admit(&self) -> Result<(), Spent> {
        let mut counts = self.counts();
        if let Some(budget) = counts.spent(&self.budget) {
            drop(counts);
            self.refused.send_if_modified(|refused| !std::mem::replace(refused, true));
            return Err(Spent { budget });
        }
        counts.requests = counts.requests.saturating_add(1);
        Ok(())
    }

    /// After a response ends: the usage it reported, or `None` when it could not be read.
    pub fn settle(&self, usage: Option<Tokens>) {
        let mut counts = self.counts();
        match usage {
            Some(tokens) => counts.tokens.add(tokens),
            None => counts.unreadable = counts.unreadable.saturating_add(1),
        }
    }

    pub fn snapshot(&self) -> LedgerSnapshot {
        let counts = self.counts();
        LedgerSnapshot {
            requests: counts.requests,
            tokens: counts.tokens,
            unreadable: counts.unreadable,
            exhausted: counts.spent(&self.budget).is_some(),
        }
    }

    /// Turns true at the first refusal, and stays true.
    pub fn refused(&self) -> watch::Receiver<bool> {
        self.refused.subscribe()
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // The counts are plain numbers, whole after any panic.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    fn tokens(input: u64, output: u64) -> Tokens {
        Tokens { input, output }
    }

    enum Step {
        Admit(Result<(), SpentBudget>),
        Settle(Option<Tokens>),
    }
    use Step::{Admit, Settle};

    #[test]
    fn each_rule_of_the_budget() {
        let unlimited = Budget::default();
        let tokens_1000 = Budget { tokens: Some(1000), requests: None };
        let requests_2 = Budget { tokens: None, requests: Some(2) };
        let both = Budget { tokens: Some(100), requests: Some(5) };
        let cases: Vec<(&str, Budget, Vec<Step>, LedgerSnapshot)> = vec![
            (
                "unlimited admits anything and counts unreadable usage without spending",
                unlimited,
                vec![Admit(Ok(())), Settle(Some(tokens(5000, 5000))), Admit(Ok(())), Settle(None), Admit(Ok(()))],
                LedgerSnapshot { requests: 3, tokens: tokens(5000, 5000), unreadable: 1, exhausted: false },
            ),
            (
                "tokens below the budget admit",
                tokens_1000,
                vec![Admit(Ok(())), Settle(Some(tokens(900, 99))), Admit(Ok(()))],
                LedgerSnapshot { requests: 2, tokens: tokens(900, 99), unreadable: 0, exhausted: false },
            ),
            (
                "tokens reaching the budget refuse with the figures",
                tokens_1000,
                vec![
                    Admit(Ok(())),
                    Settle(Some(tokens(1000, 200))),
                    Admit(Err(SpentBudget::Tokens { used: 1200, limit: 1000 })),
                ],
                LedgerSnapshot { requests: 1, tokens: tokens(1000, 200), unreadable: 0, exhausted: true },
            ),
            (
                "the request budget admits exactly that many",
                requests_2,
                vec![
                    Admit(Ok(())),
                    Admit(Ok(())),
                    Admit(Err(SpentBudget::Requests { used: 2, limit: 2 })),
                    Admit(Err(SpentBudget::Requests { used: 2, limit: 2 })),
                ],
                LedgerSnapshot { requests: 2, tokens: Tokens::default(), unreadable: 0, exhausted: true },
            ),
            (
                "an unreadable usage spends a request budget",
                requests_2,
                vec![Admit(Ok(())), Settle(None), Admit(Err(SpentBudget::Unreadable { responses: 1 }))],
                LedgerSnapshot { requests: 1, tokens: Tokens::default(), unreadable: 1, exhausted: true },
            ),
            (
                "an unreadable usage spends a token budget",
                tokens_1000,
                vec![Admit(Ok(())), Settle(None), Admit(Err(SpentBudget::Unreadable { responses: 1 }))],
                LedgerSnapshot { requests: 1, tokens: Tokens::default(), unreadable: 1, exhausted: true },
            ),
            (
                "the token budget is named first when both are spent",
                both,
                vec![
                    Admit(Ok(())),
                    Settle(Some(tokens(60, 40))),
                    Admit(Err(SpentBudget::Tokens { used: 100, limit: 100 })),
                ],
                LedgerSnapshot { requests: 1, tokens: tokens(60, 40), unreadable: 0, exhausted: true },
            ),
            (
                "a zero budget refuses the first request",
                Budget { tokens: None, requests: Some(0) },
                vec![Admit(Err(SpentBudget::Requests { used: 0, limit: 0 }))],
                LedgerSnapshot { requests: 0, tokens: Tokens::default(), unreadable: 0, exhausted: true },
            ),
            (
                "settling in flight adds up after the last admission",
                tokens_1000,
                vec![Admit(Ok(())), Admit(Ok(())), Settle(Some(tokens(400, 100))), Settle(Some(tokens(400, 100)))],
                LedgerSnapshot { requests: 2, tokens: tokens(800, 200), unreadable: 0, exhausted: true },
            ),
        ];
        for (name, budget, steps, expected) in cases {
            let ledger = Ledger::new(budget);
            let refused = ledger.refused();
            let mut any_refused = false;
            for (index, step) in steps.into_iter().enumerate() {
                match step {
                    Admit(want) => {
                        let got = ledger.admit().map_err(|spent| spent.budget);
                        assert_eq!(got, want, "{name}: step {index}");
                        any_refused |= got.is_err();
                    }
                    Settle(usage) => ledger.settle(usage),
                }
            }
            assert_eq!(ledger.snapshot(), expected, "{name}");
            assert_eq!(*refused.borrow(), any_refused, "{name}: refused()");
        }
    }

    #[test]
    fn a_refusal_says_which_budget_and_the_figures() {
        let ledger = Ledger::new(Budget { tokens: Some(1000), requests: None });
        ledger.admit().expect("the first request is admitted");
        ledger.settle(Some(tokens(1100, 100)));
        let spent = ledger.admit().expect_err("the spent budget refuses");
        assert_eq!(spent.to_string(), "token budget spent: 1200 of 1000");
        assert_eq!(
            Spent { budget: SpentBudget::Requests { used: 3, limit: 3 } }.to_string(),
            "request budget spent: 3 of 3"
        );
    }

    #[test]
    fn refused_flips_once_at_the_first_refusal() {
        let ledger = Ledger::new(Budget { tokens: None, requests: Some(1) });
        let mut refused = ledger.refused();
        ledger.admit().expect("the first request is admitted");
        assert!(!refused.has_changed().expect("the ledger is alive"), "an admission flips nothing");
        assert!(ledger.admit().is_err());
        assert!(refused.has_changed().expect("the ledger is alive"), "the first refusal notifies");
        assert!(*refused.borrow_and_update());
        assert!(ledger.admit().is_err());
        assert!(!refused.has_changed().expect("the ledger is alive"), "a second refusal notifies no one again");
        assert!(*ledger.refused().borrow(), "a later subscriber sees it too");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_admissions_admit_exactly_the_request_budget() {
        const BUDGET: u64 = 37;
        let ledger = Arc::new(Ledger::new(Budget { tokens: None, requests: Some(BUDGET) }));
        let admitted = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..200)
            .map(|_| {
                let (ledger, admitted) = (ledger.clone(), admitted.clone());
                tokio::spawn(async move {
                    for _ in 0..3 {
                        if ledger.admit().is_ok() {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("no task panics");
        }
        assert_eq!(admitted.load(Ordering::Relaxed), BUDGET);
        assert_eq!(ledger.snapshot().requests, BUDGET);
        assert!(ledger.snapshot().exhausted);
        assert!(*ledger.refused().borrow());
    }

    #[test]
    fn the_ledger_is_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Ledger>();
    }
}
