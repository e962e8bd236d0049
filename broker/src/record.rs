//! One request's account from head to last byte: its log line filling in as it goes, how its
//! response settles the ledger (usage read from a 2xx body, nothing from any other answer,
//! unknown when a sent request got no readable answer), its
//! place among the session's open requests and its upstream connection. Finished exactly once,
//! at the body's end or when the agent goes away, whichever comes first.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use roundtable_specs::broker::{BrokerReason, RequestLine, Scheme, Tokens};
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;

use crate::journal::{BrokerJournal, Tally};
use crate::ledger::Ledger;
use crate::metrics;
use crate::usage::UsageMeter;

/// What the broker shares with every request.
pub(crate) struct Shared {
    pub(crate) journal: Arc<dyn BrokerJournal>,
    pub(crate) ledger: Ledger,
    pub(crate) tally: Tally,
}

/// How the ledger hears of this request's end.
pub(crate) enum Settle {
    /// Not admitted: the ledger never counted it.
    Nothing,
    /// Admitted, but nothing billable: refused before anything was sent, or a non-2xx answer.
    Zero,
    /// The request went upstream but no answer was read (the agent left before the head, the
    /// head timed out, the exchange failed): what it cost is unknown.
    Unreadable,
    /// A 2xx answer: the usage its body reports.
    Usage(UsageMeter),
}

pub(crate) struct Record {
    shared: Arc<Shared>,
    pub(crate) line: RequestLine,
    pub(crate) scheme: Scheme,
    started: Instant,
    pub(crate) bytes_up: Arc<AtomicU64>,
    pub(crate) settle: Settle,
    pub(crate) permit: Option<OwnedSemaphorePermit>,
    /// Under a token budget, the one billing request's turn; given back only once settled.
    pub(crate) turn: Option<OwnedSemaphorePermit>,
    pub(crate) connection: Option<JoinHandle<()>>,
    /// The provider's body reached its end: what the meter read is the whole answer's.
    pub(crate) upstream_complete: bool,
    finished: bool,
}

impl Record {
    pub(crate) fn begin(shared: Arc<Shared>, id: u64, method: &str, started: Instant) -> Self {
        let line = RequestLine {
            id,
            at: crate::journal::now(),
            method: crate::route::truncate(method.to_owned(), 16),
            ..RequestLine::default()
        };
        Self {
            shared,
            line,
            scheme: Scheme::Custom,
            started,
            bytes_up: Arc::default(),
            settle: Settle::Nothing,
            permit: None,
            turn: None,
            connection: None,
            upstream_complete: false,
            finished: false,
        }
    }

    /// A body byte passed back to the agent.
    pub(crate) fn passed(&mut self, chunk: &[u8]) {
        if self.line.first_byte_ms.is_none() {
            self.line.first_byte_ms = Some(self.elapsed_ms());
        }
        self.line.bytes_down += chunk.len() as u64;
        if let Settle::Usage(meter) = &mut self.settle {
            meter.feed(chunk);
        }
    }

    /// A body byte read for its usage only, after the agent went away.
    pub(crate) fn drained(&mut self, chunk: &[u8]) {
        if let Settle::Usage(meter) = &mut self.settle {
            meter.feed(chunk);
        }
    }

    /// Whether the answer's usage is known already: its body ended, or its last event passed.
    pub(crate) fn usage_known(&self) -> bool {
        self.upstream_complete || matches!(&self.settle, Settle::Usage(meter) if meter.saw_last_event())
    }

    /// Whether this record is still waiting on a 2xx body's usage.
    pub(crate) fn wants_usage(&self) -> bool {
        !self.finished && matches!(self.settle, Settle::Usage(_)) && !self.usage_known()
    }

    /// The response head was passed back (the first byte, when the body is empty).
    pub(crate) fn head_passed(&mut self) {
        self.line
            .first_byte_ms
            .get_or_insert_with(|| u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX));
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Notes why a stream ended early (an idle or failed upstream body, an agent gone).
    pub(crate) fn cut(&mut self, detail: String) {
        self.line.detail.get_or_insert(detail);
    }

    /// Settles the ledger, counts, and writes the line; later calls do nothing.
    pub(crate) fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let tokens = match std::mem::replace(&mut self.settle, Settle::Nothing) {
            Settle::Nothing => None,
            Settle::Zero => {
                self.shared.ledger.settle(Some(Tokens::default()));
                None
            }
            Settle::Unreadable => {
                self.shared.ledger.settle(None);
                None
            }
            Settle::Usage(mut meter) => {
                // A body cut before its end may have billed more than it reported so far.
                let complete = self.upstream_complete || meter.saw_last_event();
                let usage = meter.finish().filter(|_| complete);
                self.shared.ledger.settle(usage);
                usage
            }
        };
        self.line.tokens = tokens;
        self.line.bytes_up = self.bytes_up.load(Ordering::Relaxed);
        self.line.duration_ms = self.elapsed_ms();
        self.shared.tally.record(self.line.reason);
        metrics::request(self.scheme, self.line.reason);
        if let Some(tokens) = tokens {
            metrics::tokens(self.scheme, tokens);
        }
        self.shared.journal.request(&self.line);
        self.permit = None;
        self.turn = None;
        if let Some(connection) = self.connection.take() {
            connection.abort();
        }
    }

    pub(crate) fn refused(&mut self, reason: BrokerReason, status: u16, detail: String) {
        self.line.reason = reason;
        self.line.status = status;
        self.line.detail = Some(detail);
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        if !self.finished && self.line.bytes_down == 0 && self.line.first_byte_ms.is_none() {
            self.cut("the agent went away before the answer".to_owned());
        }
        self.finish();
    }
}
