//! The live log tail: a running session's output as Server-Sent Events, each line masked by the
//! controller before it got here and escaped as the CLI escapes it. A session that is not running
//! on this controller gets one `end` event; its page then shows the whole log.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use roundtable_core::execution::live::LiveLog;

use super::Csrf;
use super::view::shown;
use crate::state::ApiState;

/// How often a tail looks for new lines.
const POLL: Duration = Duration::from_millis(300);

type Events = Vec<Result<Event, std::convert::Infallible>>;

/// The next events of `log` after line `after`: waits until there are some, or the session ended.
async fn next(
    log: Arc<LiveLog>,
    after: Option<u64>,
    ended: bool,
) -> Option<(Events, (Arc<LiveLog>, Option<u64>, bool))> {
    if ended {
        return None;
    }
    loop {
        let read = log.since(after);
        if !read.lines.is_empty() || read.ended {
            let last = read.lines.last().map(|(n, _)| *n).or(after);
            let mut events: Events =
                read.lines.iter().map(|(_, line)| Ok(Event::default().data(shown(line)))).collect();
            if read.ended {
                events.push(Ok(Event::default().event("end").data("the session ended")));
            }
            return Some((events, (log, last, read.ended)));
        }
        tokio::time::sleep(POLL).await;
    }
}

pub(crate) async fn tail(State(state): State<ApiState>, Csrf(_csrf): Csrf, Path(id): Path<String>) -> Response {
    let Some(log) = state.link.live_log(&id) else {
        let end: Events = vec![Ok(Event::default().event("end").data("the session is not running on this controller"))];
        return Sse::new(futures::stream::iter(end)).into_response();
    };
    let lines = futures::stream::unfold((log, None, false), |(log, after, ended)| next(log, after, ended))
        .flat_map(futures::stream::iter);
    Sse::new(lines).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}
