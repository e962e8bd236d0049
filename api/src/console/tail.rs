//! The live log tail: a running session's output as Server-Sent Events, each line masked by the
//! controller before it got here and escaped as the CLI escapes it. Each event's id is its line
//! number, so a reconnecting browser (`Last-Event-ID`) gets only what it missed. The console
//! session is checked again on every poll: a logout or an expiry ends the stream. A session
//! whose output is not on this controller gets one `end` event.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use roundtable_core::execution::live::LiveLog;

use super::Csrf;
use super::login::ConsoleSessions;
use super::view::shown;
use crate::state::ApiState;

/// How often a tail looks for new lines.
const POLL: Duration = Duration::from_millis(300);

type Events = Vec<Result<Event, std::convert::Infallible>>;

/// One tail's position.
struct Tail {
    log: Arc<LiveLog>,
    after: Option<u64>,
    ended: bool,
    sessions: Arc<ConsoleSessions>,
    headers: HeaderMap,
}

fn end(reason: &str) -> Result<Event, std::convert::Infallible> {
    Ok(Event::default().event("end").data(reason))
}

/// The next events of the tail: waits until there are some, the session ended, or the console
/// session did.
async fn next(mut tail: Tail) -> Option<(Events, Tail)> {
    if tail.ended {
        return None;
    }
    loop {
        if !tail.sessions.admits(&tail.headers) {
            tail.ended = true;
            return Some((vec![end("logged out")], tail));
        }
        let read = tail.log.since(tail.after);
        if !read.lines.is_empty() || read.ended {
            let mut events: Events =
                read.lines.iter().map(|(n, line)| Ok(Event::default().id(n.to_string()).data(shown(line)))).collect();
            tail.after = read.lines.last().map(|(n, _)| *n).or(tail.after);
            if read.ended {
                events.push(end("the session ended"));
                tail.ended = true;
            }
            return Some((events, tail));
        }
        tokio::time::sleep(POLL).await;
    }
}

pub(crate) async fn tail(
    State(state): State<ApiState>,
    Csrf(_csrf): Csrf,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(log) = state.link.live_log(&id) else {
        return Sse::new(futures::stream::iter(vec![end("the session's output is not on this controller")]))
            .into_response();
    };
    let after = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let tail = Tail { log, after, ended: false, sessions: state.console.clone(), headers };
    let lines = futures::stream::unfold(tail, next).flat_map(futures::stream::iter);
    Sse::new(lines).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}
