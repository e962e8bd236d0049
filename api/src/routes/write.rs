//! Mutations besides agents: registering a session run elsewhere (the code path of
//! `roundtable sessions register`), and reconciling an object now.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use roundtable_service::resume::RegisterRequest;
use roundtable_specs::audit::{ReconcileHow, ReconcileRequested, SessionRegistered};
use roundtable_specs::{Kind, ObjectKey};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult};
use crate::query::ApiQuery;
use crate::respond;
use crate::state::ApiState;

/// A session a provider CLI ran outside Roundtable, to record so it can be resumed.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterSessionBody {
    pub assignment: String,
    pub adapter: String,
    #[serde(default)]
    pub external_session_id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub working_dir: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

fn body<T>(parsed: Result<Json<T>, JsonRejection>) -> ApiResult<T> {
    parsed.map(|Json(value)| value).map_err(|rejection| ApiError::bad_request("invalid_body", rejection.body_text()))
}

pub async fn register_session(
    State(state): State<ApiState>,
    parsed: Result<Json<RegisterSessionBody>, JsonRejection>,
) -> ApiResult<Response> {
    let request = body(parsed)?;
    let registered = state
        .service
        .register_session(RegisterRequest {
            assignment: request.assignment,
            adapter: request.adapter,
            external_session_id: request.external_session_id,
            model: request.model,
            working_dir: request.working_dir,
            metadata: request.metadata,
        })
        .await?;
    let record = SessionRegistered::Api {
        session: &registered.id,
        assignment: &registered.assignment,
        adapter: &registered.adapter,
    };
    state.record_operator(&registered.id, record).await;
    Ok(respond::json(StatusCode::CREATED, &registered))
}

/// What a reconcile request did.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileBody {
    pub object: String,
    /// `queued`: the daemon's controller has it now.
    pub how: String,
    /// With `rerun=true`: the new execution generation, which runs the agent afresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun: Option<i64>,
}

/// `?rerun=true`: run an Assignment's agent afresh instead of reusing an earlier result.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconcileQuery {
    #[serde(default)]
    pub rerun: bool,
}

pub async fn reconcile(
    State(state): State<ApiState>,
    Path((kind, name)): Path<(String, String)>,
    ApiQuery(query): ApiQuery<ReconcileQuery>,
) -> ApiResult<Response> {
    let kind = Kind::parse(&kind).ok_or_else(|| {
        ApiError::bad_request("invalid_kind", format!("{kind:?} is not a kind (Adapter, Assignment, AdmissionPolicy)"))
    })?;
    let key = ObjectKey::new(kind, name);
    let rerun = match query.rerun {
        true => Some(state.service.rerun(&key).await?),
        false => None,
    };
    let queued = queue_reconcile(&state, key, ReconcileHow::Api, rerun).await?;
    Ok(respond::json(StatusCode::ACCEPTED, &queued))
}

/// Hands `key` to the daemon's controller now and anchors the request (`via`: api or mcp), with
/// the execution generation a rerun made, if it was one.
pub async fn queue_reconcile(
    state: &ApiState,
    key: ObjectKey,
    via: ReconcileHow,
    rerun: Option<i64>,
) -> ApiResult<ReconcileBody> {
    let known = state
        .service
        .store()
        .object(&key)
        .await
        .map_err(|e| ApiError::internal(roundtable_telemetry::error_chain(&e)))?;
    if known.is_none() {
        return Err(ApiError::not_found("object_not_found", format!("{key} is neither declared nor recorded")));
    }
    if !state.link.reconcile(key.clone()) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "daemon_stopping",
            "the daemon is shutting down; nothing new is reconciled",
        ));
    }
    let record = ReconcileRequested { object: key.to_string(), how: via, rerun };
    state.record_operator(&key.to_string(), record).await;
    Ok(ReconcileBody { object: key.to_string(), how: "queued".into(), rerun })
}
