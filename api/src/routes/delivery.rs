//! Accept and reject (docs/delivery.md): the same service functions as `roundtable proposals
//! accept|reject`, behind the operator token. Idempotent: asking again for what a proposal already
//! is (accepted, rejected) answers `200` with the decision recorded; the other decision is `409`.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use roundtable_service::ServiceError;
use roundtable_service::delivery::{AcceptOptions, DeliveryError};
use roundtable_specs::audit::ReconcileHow;
use roundtable_specs::delivery::{Decision, GateOverride};
use roundtable_specs::session::ProposalState;
use roundtable_specs::{Kind, ObjectKey};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::{ApiError, ApiResult};
use crate::respond;
use crate::state::ApiState;

/// What an accept asks for; every field optional.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcceptBody {
    /// A new branch (default `roundtable/ASSIGNMENT/PROPOSAL`).
    #[serde(default)]
    pub branch: Option<String>,
    /// A remote (name or URL) to push the branch and the provenance notes to.
    #[serde(default)]
    pub push: Option<String>,
    /// Gates let through, each with its reason.
    #[serde(default)]
    pub overrides: Vec<GateOverride>,
}

/// Why a proposal is rejected.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RejectBody {
    pub reason: String,
}

fn parsed<T>(body: Result<Json<T>, JsonRejection>) -> ApiResult<T> {
    body.map(|Json(value)| value).map_err(|rejection| ApiError::bad_request("invalid_body", rejection.body_text()))
}

/// The decision already recorded, when the proposal is already in `state`.
async fn already(state: &ApiState, id: &str, wanted: ProposalState) -> ApiResult<Option<Decision>> {
    let item = state.service.proposal(id).await?.item;
    Ok((item.state == wanted).then_some(item.decision).flatten())
}

fn refused(error: ServiceError) -> ApiError {
    let message = roundtable_telemetry::error_chain(&error);
    let ServiceError::Delivery(delivery) = &error else { return error.into() };
    match delivery.as_ref() {
        DeliveryError::NotPending { state, .. } => ApiError::new(StatusCode::CONFLICT, "not_pending", message)
            .with_details(serde_json::json!({"state": state})),
        DeliveryError::Gates { unmet, .. } => {
            let unmet: Vec<String> = unmet.iter().map(ToString::to_string).collect();
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "gates_refused", message)
                .with_details(serde_json::json!({"unmet": unmet}))
        }
        DeliveryError::Gone(_) => ApiError::not_found("proposal_not_found", message),
        DeliveryError::ClaimLost(_) => ApiError::new(StatusCode::CONFLICT, "not_pending", message)
            .with_details(serde_json::json!({"state": ProposalState::Pending})),
        DeliveryError::NoReason => ApiError::bad_request("reason_required", message),
        DeliveryError::MirrorNeedsPush => ApiError::bad_request("push_required", message),
        DeliveryError::Branch(roundtable_delivery::branch::BranchError::BranchExists(_)) => {
            ApiError::new(StatusCode::CONFLICT, "branch_exists", message)
        }
        DeliveryError::Branch(roundtable_delivery::branch::BranchError::BadBranch(_)) => {
            ApiError::bad_request("invalid_branch", message)
        }
        DeliveryError::Branch(roundtable_delivery::branch::BranchError::BaseMissing(_)) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "base_missing", message)
        }
        // The decision stands; only the note's write or push failed. A retry answers the decision.
        DeliveryError::Unpublished { commit, retry, .. } => {
            ApiError::new(StatusCode::BAD_GATEWAY, "provenance_not_published", message).with_details(
                serde_json::json!({"state": ProposalState::Accepted, "commit": commit, "finishByHand": retry}),
            )
        }
        _ => ApiError::internal(message),
    }
}

fn audit_key(state: &ApiState) -> ApiResult<&roundtable_store::audit::AuditKey> {
    state.audit_key.as_deref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_audit_chain",
            "this daemon keeps no audit chain to record decisions in",
        )
    })
}

/// Accepts `id` (or answers the decision it already has).
pub(crate) async fn accepted(state: &ApiState, id: &str, body: AcceptBody) -> ApiResult<Decision> {
    let key = audit_key(state)?;
    if let Some(decision) = already(state, id, ProposalState::Accepted).await? {
        return Ok(decision);
    }
    let options = AcceptOptions {
        repo: None,
        branch: body.branch,
        push: body.push,
        overrides: body.overrides,
        signing_key: state.provenance_key.clone(),
    };
    let decision = state.service.accept_proposal(id, &options, key).await.map_err(refused)?.decision;
    refresh(state, id).await;
    Ok(decision)
}

/// The proposal's Assignment reconciled now, so its status says where the review stands.
async fn refresh(state: &ApiState, id: &str) {
    let Ok(found) = state.service.proposal(id).await else { return };
    let key = ObjectKey::new(Kind::Assignment, found.item.assignment);
    if let Err(error) = crate::routes::write::queue_reconcile(state, key, ReconcileHow::Api, None).await {
        tracing::warn!(proposal = id, error = %error.body(), "the Assignment of a decided proposal was not reconciled now");
    }
}

/// Rejects `id` (or answers the decision it already has).
pub(crate) async fn rejected(state: &ApiState, id: &str, reason: &str, by: &str) -> ApiResult<Decision> {
    let key = audit_key(state)?;
    if let Some(decision) = already(state, id, ProposalState::Rejected).await? {
        return Ok(decision);
    }
    let rejected = state.service.reject_proposal(id, reason, by, key).await.map_err(refused)?;
    refresh(state, &rejected.proposal).await;
    Ok(rejected.decision)
}

pub async fn accept(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Result<Json<AcceptBody>, JsonRejection>,
) -> ApiResult<Response> {
    let decision = accepted(&state, &id, parsed(body)?).await?;
    Ok(respond::ok(&decision))
}

pub async fn reject(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Result<Json<RejectBody>, JsonRejection>,
) -> ApiResult<Response> {
    let decision = rejected(&state, &id, &parsed(body)?.reason, "api").await?;
    Ok(respond::ok(&decision))
}
