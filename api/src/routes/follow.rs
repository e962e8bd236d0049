//! The streams a client follows: `GET /v1/events?watch=true` (each new event, from an event ID)
//! and `GET /v1/sessions/{id}/logs?follow=true` (a session's output as it is produced), both as
//! server-sent events whose IDs let a reconnecting client resume.

use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use roundtable_specs::output::LogLine;
use roundtable_specs::session::SessionPhase;

use crate::error::{ApiError, ApiResult};
use crate::follow::Followed;
use crate::state::ApiState;

/// Events read from the store per batch.
const BATCH: usize = 500;
/// How often a watch reads the store when nothing in this process wrote (another controller of
/// a shared store may have).
const REREAD: Duration = Duration::from_secs(2);
/// How often a follower of a session that has not started yet looks again.
const NOT_STARTED_POLL: Duration = Duration::from_millis(300);
/// A running session whose output has not appeared here after this long runs elsewhere.
const RUNNING_ELSEWHERE: Duration = Duration::from_secs(30);
/// How long the end of a followed log waits for its session's phase (export and patch run
/// after the agent's output ends).
const RECORDING: Duration = Duration::from_secs(300);
const KEEP_ALIVE: Duration = Duration::from_secs(15);

type Events = Vec<Result<Event, std::convert::Infallible>>;

/// Each event after `from` (after the newest, without one) as `ADDED`, its ID the event's; a
/// `BOOKMARK` first with the version it starts from. Ends when the daemon stops.
pub async fn events(state: ApiState, from: Option<u64>) -> ApiResult<Response> {
    let after = match from {
        Some(from) => {
            i64::try_from(from).map_err(|_| ApiError::bad_request("invalid_resource_version", "too large"))?
        }
        None => state.service.store().last_event_id().await.map_err(roundtable_service::ServiceError::from)?,
    };
    let bookmark = serde_json::json!({"resourceVersion": after.to_string()});
    let first: Events = vec![Ok(Event::default().event("BOOKMARK").id(after.to_string()).data(bookmark.to_string()))];
    let writes = state.service.store().writes();
    let running = state.status.subscribe();
    // `None` once an error has been sent: the stream ends.
    let rest = futures::stream::unfold(
        (state, writes, running, Some(after)),
        |(state, mut writes, mut running, after)| async move {
            let after = after?;
            loop {
                let found = match state.service.events_after(after, BATCH).await {
                    Ok(found) => found,
                    Err(error) => {
                        let error = ApiError::from(error).body();
                        return Some((
                            vec![Ok(Event::default().event("ERROR").data(error.to_string()))],
                            (state, writes, running, None),
                        ));
                    }
                };
                if let Some((last, _)) = found.last() {
                    let last = *last;
                    let events: Events = found
                        .iter()
                        .map(|(id, item)| {
                            let data = serde_json::to_string(item).unwrap_or_default();
                            Ok(Event::default().event("ADDED").id(id.to_string()).data(data))
                        })
                        .collect();
                    return Some((events, (state, writes, running, Some(last))));
                }
                writes.mark_unchanged();
                tokio::select! {
                    _ = writes.changed() => {}
                    stopped = running.changed() => if stopped.is_err() { return None },
                    () = tokio::time::sleep(REREAD) => {}
                }
            }
        },
    );
    let stream = futures::stream::iter([first]).chain(rest).flat_map(futures::stream::iter);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response())
}

/// The phase session `id` ends in: its output ends before its changes are exported and recorded,
/// so this waits (up to [`RECORDING`]) for the phase that says how it ended.
async fn finished_phase(service: &roundtable_service::Service, id: &str) -> Option<SessionPhase> {
    let deadline = tokio::time::Instant::now() + RECORDING;
    loop {
        let phase = service.session(id).await.ok().map(|s| s.phase);
        if phase.is_none_or(SessionPhase::is_finished) || tokio::time::Instant::now() >= deadline {
            return phase;
        }
        tokio::time::sleep(NOT_STARTED_POLL).await;
    }
}

fn line_event(number: u64, text: &str) -> Result<Event, std::convert::Infallible> {
    let data = serde_json::to_string(&LogLine { line: number, text: text.to_owned() }).unwrap_or_default();
    Ok(Event::default().event("line").id(number.to_string()).data(data))
}

fn end_event(reason: &str, phase: Option<SessionPhase>) -> Result<Event, std::convert::Infallible> {
    let data = serde_json::json!({"reason": reason, "phase": phase.map(|p| p.to_string())});
    Ok(Event::default().event("end").data(data.to_string()))
}

/// Session `id`'s output as it is produced: each line as a `line` event (`{"line", "text"}`,
/// its ID the line number), then `end` (`{"reason", "phase"}`). A session that has not started
/// yet is waited for; one that finished, or runs on another controller, gets `end` at once (its
/// kept log is at `/v1/sessions/{id}/logs`).
pub async fn session_logs(state: ApiState, id: &str, after: Option<u64>) -> ApiResult<Response> {
    let session = state.service.session(id).await?;
    let id = session.id.clone();
    // A queued session is waited for however long its queue is; a running one whose output does
    // not appear here within the provisioning time runs on another controller.
    let mut running_since: Option<tokio::time::Instant> = None;
    let first = loop {
        if let Some(log) = state.link.live_log(&id) {
            break Ok(log);
        }
        let now = state.service.session(&id).await?;
        match now.phase {
            SessionPhase::Queued => {}
            SessionPhase::Running
                if running_since.get_or_insert_with(tokio::time::Instant::now).elapsed() < RUNNING_ELSEWHERE => {}
            phase => break Err(phase),
        }
        tokio::time::sleep(NOT_STARTED_POLL).await;
    };
    let log = match first {
        Ok(log) => log,
        Err(phase) => {
            let reason = if phase.is_finished() {
                "the session has finished; its kept output is at /v1/sessions/{id}/logs"
            } else {
                "the session's output is not on this controller"
            };
            let events = futures::stream::iter(vec![end_event(reason, Some(phase))]);
            return Ok(Sse::new(events).into_response());
        }
    };
    let running = state.status.subscribe();
    let still = move || if running.has_changed().is_err() { Err("the daemon is stopping".to_owned()) } else { Ok(()) };
    let service = state.service.clone();
    let lines = crate::follow::lines(log, after, still).then(move |found| {
        let (service, id) = (service.clone(), id.clone());
        async move {
            let mut events = Events::new();
            for followed in found {
                match followed {
                    Followed::Line(n, text) => events.push(line_event(n, &text)),
                    Followed::End(reason) => {
                        let phase = finished_phase(&service, &id).await;
                        events.push(end_event(&reason, phase));
                    }
                }
            }
            events
        }
    });
    let stream = lines.flat_map(futures::stream::iter);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response())
}
