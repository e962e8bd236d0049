//! Liveness, readiness, metrics, the OpenAPI document, and the answers for unknown paths.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::respond;
use crate::state::ApiState;

/// The OAuth protected resource metadata (RFC 9728) MCP clients look for after a `401`: the
/// resource is this API (its admin MCP endpoint at `/mcp`), reached with a bearer token in the
/// header. It names no authorization server: the token is the operator token of the daemon's
/// state directory, handed over out of band, never issued by an OAuth flow.
pub async fn protected_resource(
    axum::Extension(scheme): axum::Extension<crate::auth::Scheme>,
    headers: axum::http::HeaderMap,
) -> Response {
    let base = crate::auth::base_url(&headers, scheme);
    respond::ok(&serde_json::json!({
        "resource": format!("{base}/mcp"),
        "bearer_methods_supported": ["header"],
        "resource_name": "Roundtable admin MCP endpoint and HTTP API",
        "resource_documentation": format!("{base}/v1/openapi.json"),
    }))
}

pub async fn healthz() -> Response {
    respond::with_type(StatusCode::OK, "text/plain; charset=utf-8", b"ok\n".to_vec())
}

/// Ready once the daemon's first scan is merged into the store: before that, reads would show
/// the state of the previous run.
pub async fn readyz(State(state): State<ApiState>) -> Response {
    if state.link.is_ready() {
        respond::with_type(StatusCode::OK, "text/plain; charset=utf-8", b"ready\n".to_vec())
    } else {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "the first scan of the spec directory has not finished",
        )
        .into_response()
    }
}

pub async fn metrics(State(state): State<ApiState>) -> Response {
    match crate::metrics::render(&state).await {
        Ok(text) => respond::with_type(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", text.into_bytes()),
        Err(error) => error.into_response(),
    }
}

/// The OpenAPI document's text, built from the route table with the router (`router.rs`), which
/// hands it to [`openapi`] as an extension: this route is a row of that table.
#[derive(Clone)]
pub(crate) struct Document(pub(crate) std::sync::Arc<str>);

pub async fn openapi(axum::Extension(Document(text)): axum::Extension<Document>) -> Response {
    respond::with_type(StatusCode::OK, respond::JSON, text.as_bytes().to_vec())
}

pub async fn not_found() -> ApiError {
    ApiError::not_found("not_found", "no such endpoint; GET /v1/openapi.json lists them")
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this endpoint does not take that method")
}
