//! `Idempotency-Key` on every mutating request: the key, a hash of the method, path, query and
//! body, and the stored response, kept 24 hours. A retry of the same request replays the stored
//! response (byte for byte, with `Idempotent-Replayed: true`) without acting; the same key with
//! another request is `409 idempotency_key_reused`; a retry while the first is still being served
//! is `409 idempotency_key_in_flight`. Empty bodies hash like any other. Requests without a key
//! act every time, as HTTP says a POST may.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use roundtable_store::idempotency::{Claimed, StoredResponse};
use sha2::{Digest as _, Sha256};

use crate::error::ApiError;
use crate::serve::MAX_BODY;
use crate::state::ApiState;

pub const HEADER: &str = "idempotency-key";
pub const REPLAYED: &str = "idempotent-replayed";
const MAX_KEY: usize = 255;

fn mutating(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH | Method::DELETE)
}

fn request_hash(method: &Method, path_and_query: &str, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(method.as_str().as_bytes());
    hasher.update(b"\n");
    hasher.update(path_and_query.as_bytes());
    hasher.update(b"\n");
    hasher.update(body);
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The middleware; operator auth runs before it, so a refused request stores nothing.
pub async fn idempotent(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    if !mutating(request.method()) {
        return next.run(request).await;
    }
    let Some(key) = request.headers().get(HEADER) else {
        return next.run(request).await;
    };
    let key = match key.to_str() {
        Ok(key) if (1..=MAX_KEY).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic()) => key.to_owned(),
        _ => {
            return ApiError::bad_request(
                "invalid_idempotency_key",
                format!("Idempotency-Key must be 1 to {MAX_KEY} visible ASCII characters"),
            )
            .into_response();
        }
    };
    let (parts, body) = request.into_parts();
    let body = match to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(_) => return ApiError::body_too_large(MAX_BODY).into_response(),
    };
    let path = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_owned(), ToString::to_string);
    let hash = request_hash(&parts.method, &path, &body);
    let store = state.service.store();
    match store.claim_idempotency_key(&key, &hash).await {
        Ok(Claimed::New) => {}
        Ok(Claimed::Replay(stored)) => return replay(stored),
        Ok(Claimed::Reused) => {
            return ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_key_reused",
                "this Idempotency-Key was used with another request (method, path or body differ); use a new key",
            )
            .into_response();
        }
        Ok(Claimed::InFlight) => {
            return ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_key_in_flight",
                "a request with this Idempotency-Key is still being served; retry when it has answered",
            )
            .into_response();
        }
        Err(error) => return ApiError::internal(roundtable_telemetry::error_chain(&error)).into_response(),
    }
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    let (parts, body) = response.into_parts();
    let body = match to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(error) => {
            let _ = store.release_idempotency_key(&key).await;
            return ApiError::internal(format!("cannot buffer the response: {error}")).into_response();
        }
    };
    if parts.status.is_server_error() {
        // Nothing was done (or it failed half-way); a retry should act, not replay a failure.
        if let Err(error) = store.release_idempotency_key(&key).await {
            tracing::warn!(%error, "cannot release an idempotency key");
        }
    } else {
        let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let stored = StoredResponse {
            status: parts.status.as_u16(),
            content_type: content_type.to_owned(),
            body: body.to_vec(),
        };
        if let Err(error) = store.finish_idempotent(&key, &stored).await {
            tracing::error!(%error, "cannot store an idempotent response; a retry will be refused as in flight for 15 minutes");
        }
    }
    Response::from_parts(parts, Body::from(body))
}

fn replay(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut response = crate::respond::with_type(status, &stored.content_type, stored.body);
    response.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
    response
}
