//! The routes: which handler serves which path, behind which layers. Reads and writes under
//! `/v1` and `/mcp` need the operator token; `/healthz`, `/readyz` and the OpenAPI document do
//! not. Mutations pass the idempotency layer after auth.

pub(crate) mod agents;
mod ops;
pub(crate) mod read;
pub(crate) mod write;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};

use crate::state::ApiState;

/// The whole API.
pub fn router(state: ApiState) -> Router {
    let operator = Router::new()
        .route("/v1/status", get(read::status))
        .route("/v1/adapters", get(read::adapters))
        .route("/v1/assignments/{name}", get(read::assignment))
        .route("/v1/sessions", get(read::sessions).post(write::register_session))
        .route("/v1/sessions/{id}", get(read::session))
        .route("/v1/sessions/{id}/logs", get(read::session_logs))
        .route("/v1/proposals", get(read::proposals))
        .route("/v1/proposals/{id}", get(read::proposal))
        .route("/v1/events", get(read::events))
        .route("/v1/reconcile/{kind}/{name}", post(write::reconcile))
        .route("/v1/workspaces/{ws}/agents", get(agents::list))
        .route("/v1/workspaces/{ws}/agents/{id}", get(agents::detail))
        .route("/v1/workspaces/{ws}/agents/{id}/enable", post(agents::enable))
        .route("/v1/workspaces/{ws}/agents/{id}/disable", post(agents::disable))
        .route("/v1/workspaces/{ws}/agents/{id}/diagnostics", post(agents::diagnose).get(agents::diagnostics))
        .route("/v1/workspaces/{ws}/agents/{id}/diagnostics/{diagnostic}", get(agents::diagnostic))
        .route("/metrics", get(ops::metrics))
        .route("/mcp", post(crate::mcp::post).get(crate::mcp::get).delete(crate::mcp::delete))
        .layer(from_fn_with_state(state.clone(), crate::idempotency::idempotent))
        .layer(from_fn_with_state(state.token.clone(), crate::auth::require_operator));
    Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/v1/openapi.json", get(ops::openapi))
        .merge(operator)
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .with_state(state)
}
