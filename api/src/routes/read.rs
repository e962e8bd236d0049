//! The read endpoints: status, adapters, assignments, sessions and their logs, proposals and
//! their patches, events. Each returns what the matching CLI command prints with
//! `--format json`, from the same service call.

use axum::extract::{Path, State};

use crate::query::ApiQuery;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use roundtable_specs::output::{EventItem, ProposalItem, SessionItem, SessionLogsBody};
use roundtable_specs::{Kind, List, ObjectKey};
use serde::{Deserialize, Serialize};

use crate::cursor;
use crate::error::{ApiError, ApiResult};
use crate::respond;
use crate::state::ApiState;

/// `?limit=` and `?continue=`; kept as text so a bad value gets this API's error body.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    pub limit: Option<String>,
    #[serde(rename = "continue")]
    pub cursor: Option<String>,
}

fn listed<T: roundtable_specs::ListItem + Serialize>(items: Vec<T>, next: Option<String>) -> Response {
    let mut list = List::of(items);
    list.metadata.continue_token = next;
    respond::ok(&list)
}

pub async fn adapters(State(state): State<ApiState>) -> ApiResult<Response> {
    Ok(respond::ok(&adapter_list(&state).await?))
}

/// Built-in and declared adapters, merged (what `adapters list` prints).
pub async fn adapter_list(state: &ApiState) -> ApiResult<List<roundtable_specs::output::AdapterItem>> {
    let project = state.service.project().clone();
    let (items, _errors) =
        tokio::task::spawn_blocking(move || roundtable_service::adapters(&project.spec_dir, Ok(&project)))
            .await
            .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok(List::of(items))
}

pub async fn assignment(State(state): State<ApiState>, Path(name): Path<String>) -> ApiResult<Response> {
    let key = ObjectKey::new(Kind::Assignment, name.clone());
    match state.service.describe(&key).await {
        Ok(item) => Ok(respond::ok(&item)),
        Err(roundtable_service::ServiceError::UnknownObject { .. }) => {
            Err(ApiError::not_found("assignment_not_found", format!("no Assignment {name:?} is declared or recorded")))
        }
        Err(error) => Err(error.into()),
    }
}

/// Sessions, newest first.
pub async fn sessions(State(state): State<ApiState>, ApiQuery(query): ApiQuery<PageQuery>) -> ApiResult<Response> {
    let request = cursor::page("sessions", query.limit.as_deref(), query.cursor.as_deref())?;
    let items = state.service.sessions().await?;
    let (page, next) = cursor::slice("sessions", items, &request, session_key);
    Ok(listed(page, next))
}

fn session_key(item: &SessionItem) -> String {
    format!("{}/{}", item.created_at, item.id)
}

pub async fn session(State(state): State<ApiState>, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(respond::ok(&state.service.session(&id).await?))
}

#[derive(Debug, Default, Deserialize)]
pub struct LogsQuery {
    pub stream: Option<String>,
    pub follow: Option<String>,
}

pub async fn session_logs(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<LogsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    if super::status::flag("follow", query.follow.as_deref())? {
        let after = super::status::resume_from(&headers, None)?;
        return super::follow::session_logs(state, &id, after).await;
    }
    let logs = state.service.session_logs(&id).await?;
    match query.stream.as_deref() {
        None => Ok(respond::ok(&SessionLogsBody {
            session: logs.session,
            stdout: String::from_utf8_lossy(&logs.stdout).into_owned(),
            stdout_truncated: logs.stdout_truncated,
            stderr: String::from_utf8_lossy(&logs.stderr).into_owned(),
            stderr_truncated: logs.stderr_truncated,
        })),
        Some("stdout") => Ok(respond::with_type(StatusCode::OK, "application/octet-stream", logs.stdout)),
        Some("stderr") => Ok(respond::with_type(StatusCode::OK, "application/octet-stream", logs.stderr)),
        Some(other) => {
            Err(ApiError::bad_request("invalid_stream", format!("stream is stdout or stderr, not {other:?}")))
        }
    }
}

/// Proposals, newest first.
pub async fn proposals(State(state): State<ApiState>, ApiQuery(query): ApiQuery<PageQuery>) -> ApiResult<Response> {
    let request = cursor::page("proposals", query.limit.as_deref(), query.cursor.as_deref())?;
    let items = state.service.proposals().await?;
    let (page, next) = cursor::slice("proposals", items, &request, proposal_key);
    Ok(listed(page, next))
}

fn proposal_key(item: &ProposalItem) -> String {
    format!("{}/{}", item.created_at, item.id)
}

/// A proposal; its patch (integrity checked) when the client accepts `text/x-diff`.
pub async fn proposal(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let wants_patch = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.split(',').any(|t| t.trim().starts_with("text/x-diff")));
    let found = state.service.proposal(&id).await?;
    Ok(if wants_patch {
        respond::with_type(StatusCode::OK, "text/x-diff", found.patch)
    } else {
        respond::ok(&found.item)
    })
}

/// Events of every object, newest first; with `?watch=true`, each new one as it is recorded.
pub async fn events(
    State(state): State<ApiState>,
    ApiQuery(query): ApiQuery<super::status::WatchableListQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    if super::status::flag("watch", query.watch.as_deref())? {
        let from = super::status::resume_from(&headers, query.resource_version.as_deref())?;
        return super::follow::events(state, from).await;
    }
    let request = cursor::page("events", query.limit.as_deref(), query.cursor.as_deref())?;
    let before =
        match &request.after {
            Some(id) => Some(id.parse::<i64>().map_err(|_| {
                ApiError::bad_request("invalid_cursor", "the continue token is not one this list issued")
            })?),
            None => None,
        };
    let mut found = state.service.events(before, request.limit + 1).await?;
    let more = found.len() > request.limit;
    found.truncate(request.limit);
    let next = if more { found.last().map(|(id, _)| cursor::encode("events", &id.to_string())) } else { None };
    let items: Vec<EventItem> = found.into_iter().map(|(_, item)| item).collect();
    Ok(listed(items, next))
}
