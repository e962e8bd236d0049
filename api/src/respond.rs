//! Response bodies: JSON as the CLI prints it (pretty, with a trailing newline). `GET /v1/status`
//! is the exception: it is served compact from the materialised status (`routes::status`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub const JSON: &str = "application/json";

/// `value` as pretty JSON with a trailing newline.
pub fn json_text<T: Serialize + ?Sized>(value: &T) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
    text.push('\n');
    text
}

pub fn json<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> Response {
    with_type(status, JSON, json_text(value).into_bytes())
}

pub fn ok<T: Serialize + ?Sized>(value: &T) -> Response {
    json(StatusCode::OK, value)
}

pub fn with_type(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response {
    let mut response = (status, body).into_response();
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}
