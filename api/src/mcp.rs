//! The admin MCP endpoint at `/mcp`: rmcp's streamable HTTP server in its stateless form (each
//! POSTed request is answered with one JSON response; no session, no server-initiated stream, so
//! GET and DELETE are 405), behind the same operator token as the rest of the API. Tools read
//! status, adapters, assignments, sessions and proposals, queue a reconcile, and accept or reject
//! a proposal; each answers with the same JSON as the matching endpoint. It never reaches a
//! container: agents get their own endpoint per session. With `agents/src/mcp.rs`, the only
//! module that names rmcp in this crate: its API changes between majors.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool as McpTool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use roundtable_specs::audit::ReconcileHow;
use roundtable_specs::delivery::Decision;
use roundtable_specs::output::{AdapterItem, ObjectStatus, ProposalItem, SessionItem};
use roundtable_specs::{Kind, List, ObjectKey};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::routes::write::ReconcileBody;
use crate::state::ApiState;

struct Tool {
    name: &'static str,
    description: &'static str,
    /// Whether calling it changes nothing (MCP's `readOnlyHint`).
    read_only: bool,
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
        read_only: true,
        input: no_arguments,
        output: status_output,
    },
    Tool {
        name: "adapters",
        description: "Built-in and declared adapters, merged, as `roundtable adapters list --format json`.",
        read_only: true,
        input: no_arguments,
        output: output_schema::<List<AdapterItem>>,
    },
    Tool {
        name: "assignments",
        description: "The status rows of every Assignment.",
        read_only: true,
        input: no_arguments,
        output: status_output,
    },
    Tool {
        name: "sessions",
        description: "Every session, newest first.",
        read_only: true,
        input: no_arguments,
        output: output_schema::<List<SessionItem>>,
    },
    Tool {
        name: "proposals",
        description: "Every pending (or superseded, rejected) proposal, newest first.",
        read_only: true,
        input: no_arguments,
        output: output_schema::<List<ProposalItem>>,
    },
    Tool {
        name: "reconcile",
        description: "Queues a reconcile of one object now (clears a stall).",
        read_only: false,
        input: object_argument,
        output: output_schema::<ReconcileBody>,
    },
    Tool {
        name: "accept_proposal",
        description: "Accepts a pending proposal as `roundtable proposals accept`: review gates, a commit on a new branch, signed provenance. Answers the decision.",
        read_only: false,
        input: accept_arguments,
        output: output_schema::<Decision>,
    },
    Tool {
        name: "reject_proposal",
        description: "Rejects a pending proposal with a reason, as `roundtable proposals reject`. Answers the decision.",
        read_only: false,
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

/// rmcp's server without sessions, answering each request with JSON. It checks no `Host`: the API
/// may listen on any address (TCP, TLS, a Unix socket), and [`post`] has already refused a page
/// of another site by its `Origin` and the operator token has been checked.
fn config() -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(crate::serve::MAX_BODY)
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

pub async fn post(State(state): State<ApiState>, request: Request) -> Response {
    use crate::origin::Origin;
    if matches!(crate::origin::origin_of(request.headers()), Origin::OtherSite | Origin::Opaque) {
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
    // rmcp may answer on another task: tool spans name the request's span as their parent.
    let span = tracing::Span::current();
    let service = StreamableHttpService::new(
        move || Ok(AdminTools { state: state.clone(), span: span.clone() }),
        Arc::new(NeverSessionManager::default()),
        config(),
    );
    let answer = service.handle(request).await.map(axum::body::Body::new);
    as_api_error(answer).await
}

/// The transport's own refusals (a wrong `Accept` or `Content-Type`, a malformed message, an
/// unsupported protocol version) are plain text from rmcp; this API answers every error with its
/// JSON error body, so clients parse one shape.
async fn as_api_error(answer: Response) -> Response {
    let status = answer.status();
    let is_text = answer
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_none_or(|value| value.starts_with("text/plain"));
    if !(status.is_client_error() || status.is_server_error()) || !is_text {
        return answer;
    }
    let code = match status {
        StatusCode::NOT_ACCEPTABLE => "not_acceptable",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        status if status.is_server_error() => "internal",
        _ => "invalid_mcp_request",
    };
    // rmcp's refusals are one short line; more is not read.
    let text = axum::body::to_bytes(answer.into_body(), 4096).await.unwrap_or_default();
    ApiError::new(status, code, String::from_utf8_lossy(&text).trim().to_owned()).into_response()
}

/// The tools of one request.
struct AdminTools {
    state: ApiState,
    span: tracing::Span,
}

fn describe(tool: &Tool) -> McpTool {
    let object = |value: Value| match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(serde_json::Map::new()),
    };
    McpTool::new(tool.name, tool.description, object((tool.input)()))
        .with_raw_output_schema(object((tool.output)()))
        .with_annotations(ToolAnnotations::new().read_only(tool.read_only))
}

impl ServerHandler for AdminTools {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("roundtable-admin", env!("CARGO_PKG_VERSION")))
            .with_instructions("Roundtable's operator tools for this daemon's workspace.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(TOOLS.iter().map(describe).collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = TOOLS.iter().find(|t| t.name == request.name) else {
            return Err(ErrorData::invalid_params(format!("no tool {:?}", request.name), None));
        };
        let arguments = request.arguments.map_or(json!({}), Value::Object);
        let span =
            tracing::info_span!(parent: &self.span, "mcp.tool", tool = tool.name, outcome = tracing::field::Empty);
        let called = tracing::Instrument::instrument(call(&self.state, tool.name, &arguments), span.clone()).await;
        span.record("outcome", if called.is_ok() { "ok" } else { "error" });
        Ok(CallToolResponse::Complete(match called {
            Ok(value) => CallToolResult::structured(value),
            // No structuredContent: it would not be of the tool's outputSchema.
            Err(error) => CallToolResult::error(vec![ContentBlock::text(crate::respond::json_text(&error.body()))]),
        }))
    }
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
