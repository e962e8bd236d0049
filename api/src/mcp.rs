//! The admin MCP endpoint at `/mcp`: MCP's streamable HTTP transport in its plain-JSON form (each
//! POSTed request is answered with one JSON response; no server-initiated stream, so GET is 405),
//! behind the same operator token as the rest of the API. Tools read status, adapters,
//! assignments, sessions and proposals, queue a reconcile, and accept or reject a proposal; each
//! answers with the same JSON as the matching endpoint. It never reaches a container: agents get their own endpoint per session.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use roundtable_specs::audit::ReconcileHow;
use roundtable_specs::delivery::Decision;
use roundtable_specs::output::{AdapterItem, ObjectStatus, ProposalItem, SessionItem};
use roundtable_specs::{Kind, List, ObjectKey};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::respond;
use crate::routes::write::ReconcileBody;
use crate::state::ApiState;

/// Protocol revisions this endpoint speaks, newest first.
const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

struct Tool {
    name: &'static str,
    description: &'static str,
    input: fn() -> Value,
    /// The JSON Schema of the tool's `structuredContent` (MCP's `outputSchema`): the same type the
    /// matching endpoint answers with.
    output: fn() -> Value,
}

/// `T`'s schema as a self-contained JSON Schema (its definitions under `$defs`), in the shapes
/// generators and SDK validators read.
fn output_schema<T: schemars::JsonSchema>() -> Value {
    let mut schema =
        schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>().to_value();
    roundtable_specs::schema::for_generators(&mut schema);
    schema
}

fn status_output() -> Value {
    output_schema::<List<ObjectStatus>>()
}

fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

fn object_argument() -> Value {
    json!({
        "type": "object",
        "properties": {"object": {"type": "string", "description": "Kind/name, like Assignment/fix-login"}},
        "required": ["object"],
        "additionalProperties": false
    })
}

const TOOLS: [Tool; 8] = [
    Tool {
        name: "status",
        description: "Every object's sync and health, as `roundtable status --format json`.",
        input: no_arguments,
        output: status_output,
    },
    Tool {
        name: "adapters",
        description: "Built-in and declared adapters, merged, as `roundtable adapters list --format json`.",
        input: no_arguments,
        output: output_schema::<List<AdapterItem>>,
    },
    Tool {
        name: "assignments",
        description: "The status rows of every Assignment.",
        input: no_arguments,
        output: status_output,
    },
    Tool {
        name: "sessions",
        description: "Every session, newest first.",
        input: no_arguments,
        output: output_schema::<List<SessionItem>>,
    },
    Tool {
        name: "proposals",
        description: "Every pending (or superseded, rejected) proposal, newest first.",
        input: no_arguments,
        output: output_schema::<List<ProposalItem>>,
    },
    Tool {
        name: "reconcile",
        description: "Queues a reconcile of one object now (clears a stall).",
        input: object_argument,
        output: output_schema::<ReconcileBody>,
    },
    Tool {
        name: "accept_proposal",
        description: "Accepts a pending proposal as `roundtable proposals accept`: review gates, a commit on a new branch, signed provenance. Answers the decision.",
        input: accept_arguments,
        output: output_schema::<Decision>,
    },
    Tool {
        name: "reject_proposal",
        description: "Rejects a pending proposal with a reason, as `roundtable proposals reject`. Answers the decision.",
        input: reject_arguments,
        output: output_schema::<Decision>,
    },
];

fn accept_arguments() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "A proposal ID or a unique prefix of one"},
            "branch": {"type": "string"},
            "push": {"type": "string", "description": "A remote name or URL"},
            "overrides": {"type": "array", "items": {
                "type": "object",
                "properties": {"gate": {"type": "string", "enum": ["secrets", "protectedPaths", "size"]}, "reason": {"type": "string"}},
                "required": ["gate", "reason"]
            }}
        },
        "required": ["id"],
        "additionalProperties": false
    })
}

fn reject_arguments() -> Value {
    json!({
        "type": "object",
        "properties": {"id": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["id", "reason"],
        "additionalProperties": false
    })
}

fn rpc_error(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub async fn get() -> Response {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this MCP endpoint sends no server-initiated stream; POST requests to it",
    )
    .into_response()
}

pub async fn delete() -> Response {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this MCP endpoint keeps no sessions to end")
        .into_response()
}

pub async fn post(State(state): State<ApiState>, headers: HeaderMap, body: Bytes) -> Response {
    use crate::origin::Origin;
    if matches!(crate::origin::origin_of(&headers), Origin::OtherSite | Origin::Opaque) {
        // A page of another site (or a DNS-rebound name, or one hiding where it is) in an
        // operator's browser must not drive the operator's tools, whatever the browser attaches;
        // no page of this API calls /mcp, so nothing legitimate is refused.
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "a request from a page of another site is refused (its Origin names another host than this endpoint)",
        )
        .into_response();
    }
    if let Some(version) = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok())
        && !PROTOCOL_VERSIONS.contains(&version)
    {
        return ApiError::bad_request(
            "unsupported_protocol_version",
            format!("MCP protocol version {version:?} is not one of {PROTOCOL_VERSIONS:?}"),
        )
        .into_response();
    }
    let message: Value = match serde_json::from_slice(&body) {
        Ok(message) => message,
        Err(error) => {
            return respond::json(StatusCode::BAD_REQUEST, &rpc_error(&Value::Null, PARSE_ERROR, error.to_string()));
        }
    };
    let answers: Vec<Value> = match &message {
        Value::Array(batch) if !batch.is_empty() => {
            let mut answers = Vec::new();
            for one in batch {
                answers.extend(handle(&state, one).await);
            }
            answers
        }
        _ => handle(&state, &message).await.into_iter().collect(),
    };
    match (message.is_array(), answers.len()) {
        // Only notifications or responses: accepted, nothing to say.
        (_, 0) => StatusCode::ACCEPTED.into_response(),
        (false, _) => respond::ok(&answers[0]),
        (true, _) => respond::ok(&answers),
    }
}

/// One JSON-RPC message's answer; `None` for a notification.
async fn handle(state: &ApiState, message: &Value) -> Option<Value> {
    let id = message.get("id").cloned();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        // A response from the client, or nonsense: answer nonsense that has an id.
        return match (&id, message.get("result").or_else(|| message.get("error"))) {
            (Some(_), Some(_)) | (None, _) => None,
            (Some(id), None) => Some(rpc_error(id, INVALID_REQUEST, "not a JSON-RPC request")),
        };
    };
    let id = id?;
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    Some(match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
            let version = PROTOCOL_VERSIONS.iter().find(|v| **v == asked).copied().unwrap_or(PROTOCOL_VERSIONS[0]);
            rpc_result(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "roundtable-admin", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": "Roundtable's operator tools for this daemon's workspace."
                }),
            )
        }
        "ping" => rpc_result(&id, json!({})),
        "tools/list" => {
            let tools: Vec<Value> = TOOLS
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description, "inputSchema": (t.input)(), "outputSchema": (t.output)()})
                })
                .collect();
            rpc_result(&id, json!({"tools": tools}))
        }
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return Some(rpc_error(&id, INVALID_PARAMS, "tools/call needs params.name"));
            };
            if !TOOLS.iter().any(|t| t.name == name) {
                return Some(rpc_error(&id, INVALID_PARAMS, format!("no tool {name:?}")));
            }
            let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
            let result = match call(state, name, &arguments).await {
                Ok(value) => json!({
                    "content": [{"type": "text", "text": respond::json_text(&value)}],
                    "structuredContent": value,
                    "isError": false
                }),
                // No structuredContent: it would not be of the tool's outputSchema.
                Err(error) => json!({
                    "content": [{"type": "text", "text": respond::json_text(&error.body())}],
                    "isError": true
                }),
            };
            rpc_result(&id, result)
        }
        other => rpc_error(&id, METHOD_NOT_FOUND, format!("no method {other:?}")),
    })
}

async fn call(state: &ApiState, tool: &str, arguments: &Value) -> Result<Value, ApiError> {
    let service = &state.service;
    let value = |v: Result<Value, serde_json::Error>| v.map_err(|e| ApiError::internal(e.to_string()));
    match tool {
        "status" => value(serde_json::to_value(List::of(state.status_rows().await?))),
        "adapters" => value(serde_json::to_value(crate::routes::read::adapter_list(state).await?)),
        "assignments" => {
            let rows = state.status_rows().await?;
            let rows: Vec<_> = rows.into_iter().filter(|r| r.kind == Kind::Assignment.as_str()).collect();
            value(serde_json::to_value(List::of(rows)))
        }
        "sessions" => value(serde_json::to_value(List::of(service.sessions().await?))),
        "proposals" => value(serde_json::to_value(List::of(service.proposals().await?))),
        "reconcile" => {
            let object = arguments.get("object").and_then(Value::as_str).unwrap_or_default();
            let queued =
                crate::routes::write::queue_reconcile(state, parse_key(object)?, ReconcileHow::Mcp, None).await?;
            value(serde_json::to_value(queued))
        }
        "accept_proposal" | "reject_proposal" => {
            let id = arguments.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
            let decision = if tool == "accept_proposal" {
                let body: crate::routes::delivery::AcceptBody = serde_json::from_value(
                    json!({"branch": arguments.get("branch"), "push": arguments.get("push"), "overrides": arguments.get("overrides").cloned().unwrap_or(json!([]))}),
                )
                .map_err(|e| ApiError::bad_request("invalid_arguments", e.to_string()))?;
                crate::routes::delivery::accepted(state, &id, body).await?
            } else {
                let reason = arguments.get("reason").and_then(Value::as_str).unwrap_or_default();
                crate::routes::delivery::rejected(state, &id, reason, "api").await?
            };
            value(serde_json::to_value(decision))
        }
        _ => Err(ApiError::not_found("no_such_tool", format!("no tool {tool:?}"))),
    }
}

fn parse_key(object: &str) -> Result<ObjectKey, ApiError> {
    let invalid = || ApiError::bad_request("invalid_object", format!("object must be Kind/name, not {object:?}"));
    let (kind, name) = object.split_once('/').ok_or_else(invalid)?;
    let kind = Kind::parse(kind).ok_or_else(invalid)?;
    if name.is_empty() {
        return Err(invalid());
    }
    Ok(ObjectKey::new(kind, name))
}
