//! Agents of the workspace this daemon serves: listing with cursors, detail, enable and disable
//! with drain, and diagnostics that probe inside the agent's image.

use axum::extract::{Path, State};

use crate::query::ApiQuery;
use axum::http::StatusCode;
use axum::response::Response;
use roundtable_specs::List;
use roundtable_specs::audit::{AgentChanged, DiagnosticsRan};
use roundtable_specs::output::{AgentItem, AgentState};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cursor;
use crate::error::{ApiError, ApiResult};
use crate::respond;
use crate::routes::read::PageQuery;
use crate::state::ApiState;

/// Any workspace but the one this daemon serves is not found.
fn check_workspace(state: &ApiState, ws: &str) -> ApiResult<()> {
    if ws == state.workspace {
        Ok(())
    } else {
        Err(ApiError::not_found(
            "workspace_not_found",
            format!("this daemon serves workspace {:?}, not {ws:?}", state.workspace),
        )
        .with_details(serde_json::json!({"workspace": ws})))
    }
}

pub async fn list(
    State(state): State<ApiState>,
    Path(ws): Path<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Response> {
    check_workspace(&state, &ws)?;
    let request = cursor::page("agents", query.limit.as_deref(), query.cursor.as_deref())?;
    let page = state.service.agents(request.after.as_deref(), request.limit).await?;
    let mut list = List::of(page.items);
    list.metadata.continue_token = page.next_after.map(|last| cursor::encode("agents", &last));
    Ok(respond::ok(&list))
}

pub async fn detail(State(state): State<ApiState>, Path((ws, id)): Path<(String, String)>) -> ApiResult<Response> {
    check_workspace(&state, &ws)?;
    Ok(respond::ok(&state.service.agent(&id).await?))
}

/// What enable and disable answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentChangeBody {
    pub agent: AgentItem,
    /// The override before the change (`null`: the spec applied).
    pub previous_state: Option<AgentState>,
    /// Sessions that were queued or running when the change was made.
    pub active_sessions: Vec<String>,
    /// How many of them a forced disable asked to stop.
    pub cancelled: usize,
}

#[derive(Debug, Default, Deserialize)]
pub struct DisableQuery {
    pub force: Option<String>,
}

pub async fn enable(State(state): State<ApiState>, Path((ws, id)): Path<(String, String)>) -> ApiResult<Response> {
    change(state, ws, id, true, false).await
}

pub async fn disable(
    State(state): State<ApiState>,
    Path((ws, id)): Path<(String, String)>,
    ApiQuery(query): ApiQuery<DisableQuery>,
) -> ApiResult<Response> {
    let force = match query.force.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::bad_request("invalid_force", format!("force is true or false, not {other:?}")));
        }
    };
    change(state, ws, id, false, force).await
}

async fn change(state: ApiState, ws: String, id: String, enabled: bool, force: bool) -> ApiResult<Response> {
    check_workspace(&state, &ws)?;
    let link = state.link.clone();
    let done = state.service.set_agent_enabled(&id, enabled, force, |name| link.cancel_sessions_of(name)).await?;
    let record = AgentChanged {
        enabled,
        agent: &id,
        state: done.agent.state,
        previous: done.before,
        force,
        active_sessions: &done.active_sessions,
        cancelled: done.cancelled,
    };
    state.record_operator(&format!("Adapter/{id}"), record).await;
    // The Adapter's status and the Assignments waiting on it see the change at once.
    state.link.reconcile(roundtable_specs::ObjectKey::new(roundtable_specs::Kind::Adapter, id.clone()));
    for key in state.service.assignments_of(&id).await? {
        state.link.reconcile(key);
    }
    let body = AgentChangeBody {
        agent: done.agent,
        previous_state: done.before,
        active_sessions: done.active_sessions,
        cancelled: done.cancelled,
    };
    Ok(respond::ok(&body))
}

/// Probes inside the agent's image (never on the host) and answers `201` with the stored report.
pub async fn diagnose(State(state): State<ApiState>, Path((ws, id)): Path<(String, String)>) -> ApiResult<Response> {
    check_workspace(&state, &ws)?;
    // Its own task: a client that hangs up must not cut the probe short (its container and
    // capability are cleaned up by the call itself).
    let (service, binary, agent) = (state.service.clone(), state.binary.clone(), id.clone());
    let report = tokio::spawn(async move { service.diagnose(&agent, &binary).await })
        .await
        .map_err(|error| ApiError::internal(format!("the diagnostic task failed: {error}")))??;
    let record = DiagnosticsRan { agent: &id, diagnostic: &report.id, status: report.status };
    state.record_operator(&format!("Adapter/{id}"), record).await;
    let mut response = respond::json(StatusCode::CREATED, &report);
    let location = format!("/v1/workspaces/{ws}/agents/{id}/diagnostics/{}", report.id);
    if let Ok(value) = axum::http::HeaderValue::from_str(&location) {
        response.headers_mut().insert(axum::http::header::LOCATION, value);
    }
    Ok(response)
}

pub async fn diagnostics(State(state): State<ApiState>, Path((ws, id)): Path<(String, String)>) -> ApiResult<Response> {
    check_workspace(&state, &ws)?;
    state.service.agent(&id).await?;
    Ok(respond::ok(&List::of(state.service.diagnostics(&id).await?)))
}

pub async fn diagnostic(
    State(state): State<ApiState>,
    Path((ws, id, diagnostic)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    check_workspace(&state, &ws)?;
    let report = state.service.diagnostic(&diagnostic).await?;
    if report.agent != id {
        return Err(ApiError::not_found("diagnostic_not_found", format!("agent {id} has no diagnostic {diagnostic}")));
    }
    Ok(respond::ok(&report))
}
