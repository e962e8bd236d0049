//! `GET /v1/status`, served from the materialised status view: the whole list, a page
//! (`limit`/`continue`, every page of one walk from the same snapshot), `ETag`/`If-None-Match`,
//! and `?watch=true` as server-sent events from a resource version.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde::Deserialize;

use crate::cursor;
use crate::error::{ApiError, ApiResult};
use crate::query::ApiQuery;
use crate::state::ApiState;
use crate::status_view::{Change, ChangeType, Since, StatusView};

/// The largest page of status rows.
pub const MAX_STATUS_LIMIT: usize = 1000;
/// How long a request waits for the daemon's first snapshot (computed at start).
const FIRST_SNAPSHOT: Duration = Duration::from_secs(30);
/// How often an idle watch hears a comment, so proxies and clients know it is alive.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The query of a list that can be watched (`GET /v1/status`, `GET /v1/events`); kept as text
/// so a bad value gets this API's error body. `pretty` is the status list's only.
#[derive(Debug, Default, Deserialize)]
pub struct WatchableListQuery {
    pub limit: Option<String>,
    #[serde(rename = "continue")]
    pub cursor: Option<String>,
    pub watch: Option<String>,
    #[serde(rename = "resourceVersion")]
    pub resource_version: Option<String>,
    pub pretty: Option<String>,
}

pub(crate) fn flag(name: &str, value: Option<&str>) -> ApiResult<bool> {
    match value {
        None | Some("false" | "0") => Ok(false),
        Some("true" | "1" | "") => Ok(true),
        Some(other) => Err(ApiError::bad_request("invalid_query", format!("{name} is true or false, not {other:?}"))),
    }
}

/// A resource version as given: a whole number.
pub(crate) fn version(text: &str) -> ApiResult<u64> {
    text.parse().map_err(|_| {
        ApiError::bad_request("invalid_resource_version", format!("resourceVersion is a whole number, not {text:?}"))
    })
}

/// Where a watch starts: `Last-Event-ID` (a reconnecting client), else `?resourceVersion=`.
pub(crate) fn resume_from(headers: &HeaderMap, query: Option<&str>) -> ApiResult<Option<u64>> {
    let from_header = headers.get("last-event-id").and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty());
    from_header.or(query.filter(|v| !v.is_empty())).map(version).transpose()
}

pub(crate) fn expired(oldest: u64) -> ApiError {
    ApiError::new(
        StatusCode::GONE,
        "expired",
        format!(
            "the version asked for is older than the oldest kept ({oldest}); list again and watch from its version"
        ),
    )
    .with_details(serde_json::json!({"oldest": oldest.to_string()}))
}

pub async fn status(
    State(state): State<ApiState>,
    ApiQuery(query): ApiQuery<WatchableListQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    if flag("watch", query.watch.as_deref())? {
        let from = resume_from(&headers, query.resource_version.as_deref())?;
        return watch(state.status.clone(), from).await;
    }
    let snapshot = state
        .status
        .snapshot(FIRST_SNAPSHOT)
        .await
        .map_err(|why| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "status_unavailable", why))?;
    let pretty = flag("pretty", query.pretty.as_deref())?;
    let (body, version) = match (query.limit.as_deref(), query.cursor.as_deref().filter(|c| !c.is_empty())) {
        (None, None) => (snapshot.body(), snapshot.version),
        (limit, token) => page(&state.status, &snapshot, limit, token)?,
    };
    let etag = format!("\"{version}\"");
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|tag| tag.trim() == etag || tag.trim() == "*"));
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else if pretty {
        let value: serde_json::Value = serde_json::from_slice(&body).map_err(|e| ApiError::internal(e.to_string()))?;
        crate::respond::ok(&value)
    } else {
        crate::respond::with_type(StatusCode::OK, crate::respond::JSON, body.to_vec())
    };
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    Ok(response)
}

/// One page: from the snapshot the token names (or the current one), `limit` rows.
fn page(
    view: &StatusView,
    current: &crate::status_view::Snapshot,
    limit: Option<&str>,
    token: Option<&str>,
) -> ApiResult<(bytes::Bytes, u64)> {
    let limit = match limit {
        None => cursor::DEFAULT_LIMIT,
        Some(text) => text.parse::<usize>().ok().filter(|n| (1..=MAX_STATUS_LIMIT).contains(n)).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_limit",
                format!("limit must be a whole number from 1 to {MAX_STATUS_LIMIT}, not {text:?}"),
            )
        })?,
    };
    let invalid = || ApiError::bad_request("invalid_cursor", "the continue token is not one this list issued");
    let (version, offset, rows) = match token {
        None => (current.version, 0, current.rows.clone()),
        Some(token) => {
            let position = cursor::decode("status", token)?;
            let (version, offset) = position.split_once(':').ok_or_else(invalid)?;
            let (version, offset): (u64, usize) =
                (version.parse().map_err(|_| invalid())?, offset.parse().map_err(|_| invalid())?);
            let rows = view.rows_at(version).ok_or_else(|| {
                ApiError::new(
                    StatusCode::GONE,
                    "expired",
                    "the continue token names a status no longer kept; list again from the first page",
                )
            })?;
            (version, offset, rows)
        }
    };
    let end = offset.saturating_add(limit).min(rows.len());
    let slice = rows.get(offset.min(rows.len())..end).unwrap_or_default();
    let next = (end < rows.len()).then(|| cursor::encode("status", &format!("{version}:{end}")));
    Ok((crate::status_view::list_body(slice, version, next.as_deref()), version))
}

/// Appends one event (`event`, `id`, `data` on one line) to `out` in the `text/event-stream`
/// format. Rows are compact JSON, which holds no line break.
fn push_event(out: &mut String, event: &str, id: u64, data: &str) {
    out.push_str("event: ");
    out.push_str(event);
    out.push_str("\nid: ");
    out.push_str(&id.to_string());
    out.push_str("\ndata: ");
    out.push_str(data);
    out.push_str("\n\n");
}

fn bookmark(out: &mut String, version: u64) {
    let data = serde_json::json!({"resourceVersion": version.to_string(), "initialEventsEnd": true});
    push_event(out, "BOOKMARK", version, &data.to_string());
}

fn events_of(changes: &[Change]) -> String {
    let mut out = String::with_capacity(changes.iter().map(|c| c.row.json.len() + 48).sum());
    for change in changes {
        push_event(&mut out, change.type_.as_str(), change.version, &change.row.json);
    }
    out
}

/// A watch: from `from` (the changes after it, or `410 Gone` when they are no longer kept), or
/// without one every row as `ADDED` then a `BOOKMARK`; then each change as it comes. A watch that
/// falls behind what is kept gets an `ERROR` event with code 410 and ends; every watch ends when
/// the daemon stops.
async fn watch(view: StatusView, from: Option<u64>) -> ApiResult<Response> {
    let mut seen = view.subscribe();
    // Whatever is published from here on wakes the watch; what is published before is in the
    // snapshot or the history read below.
    seen.mark_unchanged();
    let snapshot = view
        .snapshot(FIRST_SNAPSHOT)
        .await
        .map_err(|why| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "status_unavailable", why))?;
    // The first events go as one chunk (10,000 rows are one write, not 10,000).
    let (first, at) = match from {
        None => {
            let mut first = String::with_capacity(snapshot.rows.iter().map(|r| r.json.len() + 48).sum::<usize>() + 128);
            for row in snapshot.rows.iter() {
                push_event(&mut first, ChangeType::Added.as_str(), row.version, &row.json);
            }
            bookmark(&mut first, snapshot.version);
            (first, snapshot.version)
        }
        Some(from) => match view.since(from) {
            Since::Expired { oldest } => return Err(expired(oldest)),
            Since::Changes(changes) => (events_of(&changes), changes.last().map_or(from, |c| c.version)),
        },
    };
    let rest = futures::stream::unfold((view, seen, at, false), |(view, mut seen, at, done)| async move {
        if done {
            return None;
        }
        loop {
            let woke = tokio::select! {
                changed = StatusView::changed(&mut seen) => changed,
                () = tokio::time::sleep(KEEP_ALIVE) => return Some((": keep-alive\n\n".to_owned(), (view, seen, at, false))),
            };
            if !woke {
                return None;
            }
            match view.since(at) {
                Since::Changes(changes) if changes.is_empty() => continue,
                Since::Changes(changes) => {
                    let at = changes.last().map_or(at, |c| c.version);
                    return Some((events_of(&changes), (view, seen, at, false)));
                }
                Since::Expired { oldest } => {
                    let mut out = String::new();
                    push_event(&mut out, "ERROR", at, &expired(oldest).body().to_string());
                    return Some((out, (view, seen, at, true)));
                }
            }
        }
    });
    let body = futures::stream::iter([first])
        .chain(rest)
        .map(|text| Ok::<_, std::convert::Infallible>(bytes::Bytes::from(text)));
    let mut response = axum::body::Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}
