//! The agent MCP endpoint of one session: a Unix socket whose every connection first presents a
//! capability (`{"roundtable_auth": "<token>"}` → `{"ok": true}`, or the connection is closed),
//! then speaks MCP. The only module (with its submodule) that names rmcp: its API changes
//! between majors.

mod framing;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool as McpTool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use crate::capability::{Authority, Refused, Role};
use crate::tools::{Board, McpClient, Tool};

use framing::BoundedTransport;
pub use framing::{LIMIT_REACHED, MCP_LIMITS, McpLimits};

/// The auth line's bound: a token is 70 bytes; anything far longer is not one.
const MAX_AUTH_LINE: usize = 1024;
/// How long a connection may take to present its capability.
const AUTH_TIMEOUT: Duration = Duration::from_secs(10);

/// One session's endpoint: which session and socket it serves, who checks tokens, and the board.
pub struct SessionEndpoint {
    pub session: String,
    /// The socket's path on the host: tokens are pinned to it.
    pub socket: PathBuf,
    pub authority: Arc<Authority>,
    pub board: Arc<Board>,
}

/// Why a connection was closed before MCP.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no auth line within {0:?}")]
    Timeout(Duration),
    #[error("the auth line is longer than {MAX_AUTH_LINE} bytes")]
    TooLong,
    #[error("the connection closed before the auth line")]
    Closed,
    #[error("the first line is not {{\"roundtable_auth\": \"<token>\"}}")]
    Malformed,
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("reading the auth line: {0}")]
    Io(#[from] std::io::Error),
}

/// Accepts connections until `cancel`; each one is authenticated, then served on its own task.
/// Past [`MCP_LIMITS`]`.connections` open at once, a new connection gets one JSON-RPC error line
/// and is closed. Connections still open when `cancel` fires are closed.
pub async fn serve(endpoint: Arc<SessionEndpoint>, listener: UnixListener, cancel: CancellationToken) {
    let mut connections = tokio::task::JoinSet::new();
    // A place is held by its connection's task until the task ends.
    let places = Arc::new(tokio::sync::Semaphore::new(MCP_LIMITS.connections));
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => match places.clone().try_acquire_owned() {
                    Ok(place) => {
                        let connection = connection(endpoint.clone(), stream, cancel.child_token());
                        connections.spawn(tracing::Instrument::in_current_span(async move {
                            connection.await;
                            drop(place);
                        }));
                    }
                    Err(_) => refuse_over_limit(&endpoint, &stream),
                },
                Err(error) => {
                    tracing::warn!(session = %endpoint.session, %error, "MCP accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

/// Answers a connection past the session's limit and lets it close. `try_write` because a new
/// socket's buffer holds the line, and the accept loop must not wait on a client that never reads.
fn refuse_over_limit(endpoint: &SessionEndpoint, stream: &UnixStream) {
    let limit = MCP_LIMITS.connections;
    let message = format!(
        "session {} already has {limit} MCP connections open, the most one session may have; \
         close one before opening another",
        endpoint.session
    );
    let line = framing::error_line(None, LIMIT_REACHED, &message, Some(serde_json::json!({"limit": limit})));
    if let Err(error) = stream.try_write(&line) {
        tracing::debug!(session = %endpoint.session, %error, "MCP refusal not written");
    }
    tracing::warn!(session = %endpoint.session, limit, "MCP connection refused: too many open");
    endpoint.board.activity.refused();
}

/// Reads one line, one byte at a time, so nothing after it (the client's MCP) is consumed here.
async fn auth_line(stream: &mut UnixStream) -> Result<String, AuthError> {
    let mut line = Vec::with_capacity(128);
    let read = async {
        loop {
            let byte = match stream.read_u8().await {
                Ok(byte) => byte,
                Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Err(AuthError::Closed),
                Err(error) => return Err(AuthError::Io(error)),
            };
            if byte == b'\n' {
                return Ok(());
            }
            if line.len() == MAX_AUTH_LINE {
                return Err(AuthError::TooLong);
            }
            line.push(byte);
        }
    };
    tokio::time::timeout(AUTH_TIMEOUT, read).await.map_err(|_| AuthError::Timeout(AUTH_TIMEOUT))??;
    String::from_utf8(line).map_err(|_| AuthError::Malformed)
}

/// The token in an auth line.
fn presented_token(line: &str) -> Result<String, AuthError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Auth {
        roundtable_auth: String,
    }
    serde_json::from_str::<Auth>(line).map(|auth| auth.roundtable_auth).map_err(|_| AuthError::Malformed)
}

async fn authenticate(endpoint: &SessionEndpoint, stream: &mut UnixStream) -> Result<(String, Role), AuthError> {
    let token = presented_token(&auth_line(stream).await?)?;
    let role = endpoint.authority.check(&token, &endpoint.session, &endpoint.socket)?;
    stream.write_all(b"{\"ok\":true}\n").await?;
    Ok((token, role))
}

async fn connection(endpoint: Arc<SessionEndpoint>, mut stream: UnixStream, cancel: CancellationToken) {
    let (token, role) = match authenticate(&endpoint, &mut stream).await {
        Ok(granted) => granted,
        Err(error) => {
            // The token itself is never logged.
            tracing::warn!(session = %endpoint.session, %error, "MCP connection refused");
            endpoint.board.activity.refused();
            return;
        }
    };
    let handler = Handler { endpoint: endpoint.clone(), token, role, span: tracing::Span::current() };
    let running = match handler.serve(BoundedTransport::new(stream, MCP_LIMITS, endpoint.board.activity.clone())).await
    {
        Ok(running) => running,
        Err(error) => {
            tracing::debug!(session = %endpoint.session, %error, "MCP initialisation failed");
            return;
        }
    };
    let closer = running.cancellation_token();
    tokio::select! {
        _ = running.waiting() => {}
        () = cancel.cancelled() => closer.cancel(),
    }
}

/// The MCP side of one authenticated connection. It keeps the presented token so that every
/// request is checked again: a revoked or expired capability stops working mid-connection.
struct Handler {
    endpoint: Arc<SessionEndpoint>,
    token: String,
    role: Role,
    /// The span the endpoint serves under (the session's): each tool call is a child of it,
    /// whatever task the MCP library runs the call on.
    span: tracing::Span,
}

impl Handler {
    fn recheck(&self) -> Result<Role, ErrorData> {
        let endpoint = &self.endpoint;
        match endpoint.authority.check(&self.token, &endpoint.session, &endpoint.socket) {
            Ok(role) if role == self.role => Ok(role),
            Ok(_) | Err(_) => {
                endpoint.board.activity.refused();
                let reason = endpoint
                    .authority
                    .check(&self.token, &endpoint.session, &endpoint.socket)
                    .err()
                    .map_or_else(|| "capability changed".to_owned(), |refused| refused.to_string());
                Err(ErrorData::invalid_request(reason, None))
            }
        }
    }
}

fn describe(tool: Tool) -> McpTool {
    let schema = match tool.input_schema() {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let mut described = McpTool::new(tool.name(), tool.description(), Arc::new(schema));
    if tool.read_only() {
        described.annotations = Some(ToolAnnotations::new().read_only(true));
    }
    described
}

impl ServerHandler for Handler {
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // The connection presented a valid capability before MCP began: this client is the CLI.
        self.endpoint.board.activity.initialized(McpClient {
            name: request.client_info.name.clone(),
            version: request.client_info.version.clone(),
            protocol_version: request.protocol_version.to_string(),
        });
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("roundtable", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Roundtable's session tools: read your brief with task.get, leave notes, claim paths. \
                 Your changes to the workspace become a pending proposal when you exit.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let role = self.recheck()?;
        self.endpoint.board.activity.listed_tools();
        Ok(ListToolsResult::with_all_items(Board::tools_for(role).into_iter().map(describe).collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let role = self.recheck()?;
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let span = tracing::info_span!(parent: &self.span, "mcp.tool", tool = %request.name, role = ?role, outcome = tracing::field::Empty);
        let called =
            tracing::Instrument::instrument(self.endpoint.board.call(role, &request.name, arguments), span.clone())
                .await;
        span.record("outcome", if called.is_ok() { "ok" } else { "error" });
        match called {
            Ok(value) => Ok(CallToolResponse::Complete(CallToolResult::structured(value))),
            Err(error) => Ok(CallToolResponse::Complete(CallToolResult::structured_error(
                serde_json::json!({"error": error.to_string()}),
            ))),
        }
    }
}

/// Binds `path` for one session (removing a stale socket first).
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    UnixListener::bind(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_auth_object_is_an_auth_line() {
        assert_eq!(presented_token(r#"{"roundtable_auth":"rtcap_ab"}"#).ok().as_deref(), Some("rtcap_ab"));
        for bad in ["", "rtcap_ab", r#"{"token":"x"}"#, r#"{"roundtable_auth":"x","role":"supervisor"}"#, "[1]"] {
            assert!(matches!(presented_token(bad), Err(AuthError::Malformed)), "{bad}");
        }
    }
}
