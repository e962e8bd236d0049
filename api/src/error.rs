//! The API's error body, `{"error": {"code", "message", "details"}}`, and how service errors map
//! to it: stable codes a client can branch on, messages a person can act on.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use roundtable_service::ServiceError;
use schemars::JsonSchema;
use serde::Serialize;

// The schema of what `ApiError::body` writes, for the OpenAPI document. Its doc line is the
// schema's description, so it stays one line.
/// The error body every failure has.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorDetail {
    /// Stable and machine-readable, like `agent_not_found` or `idempotency_key_reused`.
    pub code: String,
    pub message: String,
    pub details: serde_json::Value,
}

/// An error response.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: serde_json::Value,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), details: serde_json::Value::Object(Default::default()) }
    }

    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// A request body over `limit` bytes (or one that could not be read whole).
    pub fn body_too_large(limit: usize) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", format!("request bodies are at most {limit} bytes"))
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The JSON body alone (also what the admin MCP endpoint reports as a tool error).
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {"code": self.code, "message": self.message, "details": self.details}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = self.code, detail = %self.message, "API request failed");
        }
        let mut response = crate::respond::json(self.status, &self.body());
        if self.status == StatusCode::UNAUTHORIZED
            && let Ok(value) = axum::http::HeaderValue::from_str("Bearer realm=\"roundtable\"")
        {
            response.headers_mut().insert(axum::http::header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        let message = roundtable_telemetry::error_chain(&error);
        match &error {
            ServiceError::NotFound { what, id } => {
                let code = match *what {
                    "agent" | "adapter" => "agent_not_found",
                    "session" => "session_not_found",
                    "proposal" => "proposal_not_found",
                    "assignment" => "assignment_not_found",
                    _ => "not_found",
                };
                ApiError::not_found(code, message).with_details(serde_json::json!({"kind": what, "id": id}))
            }
            ServiceError::UnknownObject { key } => ApiError::not_found("object_not_found", message)
                .with_details(serde_json::json!({"object": key.to_string()})),
            ServiceError::Ambiguous { matches, .. } => ApiError::new(StatusCode::CONFLICT, "ambiguous_id", message)
                .with_details(serde_json::json!({"matches": matches})),
            ServiceError::Register(_) => ApiError::bad_request("invalid_session", message),
            ServiceError::NotRunnable { .. } => ApiError::bad_request("not_runnable", message),
            ServiceError::PatchTampered { .. } | ServiceError::PatchNotSealed { .. } => {
                ApiError::new(StatusCode::CONFLICT, "patch_tampered", message)
            }
            _ => ApiError::internal(message),
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
