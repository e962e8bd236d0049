//! The live log tail: a running session's output as Server-Sent Events, each line masked by the
//! controller before it got here and escaped as the CLI escapes it. Each event's id is its line
//! number, so a reconnecting browser (`Last-Event-ID`) gets only what it missed. The console
//! session is checked again on every poll: a logout or an expiry ends the stream. A session
//! whose output is not on this controller gets one `end` event.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;

use super::Csrf;
use super::view::shown;
use crate::follow::Followed;
use crate::state::ApiState;

type Events = Vec<Result<Event, std::convert::Infallible>>;

fn end(reason: &str) -> Result<Event, std::convert::Infallible> {
    Ok(Event::default().event("end").data(reason))
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
    let sessions = state.console.clone();
    // The console session is checked again on every poll: a logout or an expiry ends the tail.
    let still = move || if sessions.admits(&headers) { Ok(()) } else { Err("logged out".to_owned()) };
    let lines = crate::follow::lines(log, after, still)
        .map(|found| -> Events {
            found
                .into_iter()
                .map(|followed| match followed {
                    Followed::Line(n, line) => Ok(Event::default().id(n.to_string()).data(shown(&line))),
                    Followed::End(reason) => end(&reason),
                })
                .collect()
        })
        .flat_map(futures::stream::iter);
    Sse::new(lines).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}
