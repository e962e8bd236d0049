//! Following a running session's output: the lines of its live log after a line number, as they
//! come, until the session ends or the reader's `still` check says stop. The console's tail and
//! `GET /v1/sessions/{id}/logs?follow=true` both read through it.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use roundtable_execution::live::LiveLog;

/// How often a follower looks for new lines.
const POLL: Duration = Duration::from_millis(300);

/// What a follower reads next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    /// A line: its number, and its text (masked, and what is shaped like a secret redacted).
    Line(u64, String),
    /// No more: why.
    End(String),
}

struct Position<F> {
    log: Arc<LiveLog>,
    after: Option<u64>,
    ended: bool,
    still: F,
}

/// The lines of `log` after line `after` (all kept, when `None`), then `End`. Before each poll
/// `still` is asked; an `Err(reason)` ends the stream with that reason.
pub fn lines<F>(log: Arc<LiveLog>, after: Option<u64>, still: F) -> impl Stream<Item = Vec<Followed>>
where
    F: FnMut() -> Result<(), String> + Send + 'static,
{
    futures::stream::unfold(Position { log, after, ended: false, still }, next)
}

async fn next<F: FnMut() -> Result<(), String>>(mut position: Position<F>) -> Option<(Vec<Followed>, Position<F>)> {
    if position.ended {
        return None;
    }
    loop {
        if let Err(reason) = (position.still)() {
            position.ended = true;
            return Some((vec![Followed::End(reason)], position));
        }
        let read = position.log.since(position.after);
        if !read.lines.is_empty() || read.ended {
            position.after = read.lines.last().map(|(n, _)| *n).or(position.after);
            let mut found: Vec<Followed> = read.lines.into_iter().map(|(n, line)| Followed::Line(n, line)).collect();
            if read.ended {
                found.push(Followed::End("the session ended".into()));
                position.ended = true;
            }
            return Some((found, position));
        }
        tokio::time::sleep(POLL).await;
    }
}
