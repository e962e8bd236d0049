//! The MCP sidecar of one session (docs/providers.md): the agent endpoint on `mcp.sock` in the
//! session's socket directory, and the session's capability. The token is issued when the
//! endpoint starts and revoked when it stops, or when it is dropped (a panicking execution):
//! whatever ends the execution ends the capability.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use roundtable_agents::capability::{Authority, IssueError, Role, Token};
use roundtable_agents::mcp::{self, SessionEndpoint};
use roundtable_agents::tools::{Activity, ActivitySnapshot, Board};
use roundtable_store::Store;

use crate::sidecar::Served;

/// The socket's name in the session's socket directory.
pub const SOCKET_NAME: &str = "mcp.sock";
/// How long a stop waits for open MCP connections.
const STOP_BOUND: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum McpSidecarError {
    #[error("cannot bind the MCP socket {path}: {source}")]
    Bind { path: String, source: std::io::Error },
    #[error("cannot hand the MCP socket to the agent: {0}")]
    Handover(#[from] roundtable_workspace::sockets::SocketDirError),
    #[error(transparent)]
    Issue(#[from] IssueError),
}

/// Who the endpoint serves.
pub struct McpSession<'a> {
    pub session: &'a str,
    pub assignment: &'a str,
    pub role: Role,
    /// The brief, as the agent reads it at `/roundtable/task.json`.
    pub brief: serde_json::Value,
    /// The capability lives this long at most (the execution's timeout plus a margin).
    pub ttl: Duration,
}

/// A running endpoint and the session's capability.
pub struct McpSidecar {
    /// Taken by `stop`.
    served: Option<Served>,
    authority: Arc<Authority>,
    session: String,
    activity: Arc<Activity>,
}

impl Drop for McpSidecar {
    fn drop(&mut self) {
        self.authority.revoke(&self.session);
        self.authority.forget(&self.session);
    }
}

impl McpSidecar {
    /// Binds the socket, hands it to the agent's UID, issues the capability and starts serving.
    pub fn start(
        store: &Store,
        authority: &Arc<Authority>,
        socket_dir: &Path,
        who: McpSession<'_>,
    ) -> Result<(Self, Token), McpSidecarError> {
        let path = socket_dir.join(SOCKET_NAME);
        let listener =
            mcp::bind(&path).map_err(|source| McpSidecarError::Bind { path: path.display().to_string(), source })?;
        roundtable_workspace::sockets::hand_to_agent(&path)?;
        let token = authority.issue(who.session, &path, who.role, who.ttl)?;
        let activity = Arc::new(Activity::default());
        let board = Board {
            store: store.clone(),
            session: who.session.to_owned(),
            assignment: who.assignment.to_owned(),
            brief: who.brief,
            activity: activity.clone(),
        };
        let endpoint = Arc::new(SessionEndpoint {
            session: who.session.to_owned(),
            socket: path.clone(),
            authority: authority.clone(),
            board: Arc::new(board),
        });
        tracing::info!(session = who.session, socket = %path.display(), role = who.role.as_str(), "MCP endpoint serving");
        let served = Served::spawn("mcp", &path, |cancel| mcp::serve(endpoint, listener, cancel));
        let sidecar =
            Self { served: Some(served), authority: authority.clone(), session: who.session.to_owned(), activity };
        Ok((sidecar, token))
    }

    /// Revokes the capability, closes the endpoint; what the agent did through it.
    pub async fn stop(mut self) -> ActivitySnapshot {
        self.authority.revoke(&self.session);
        if let Some(served) = self.served.take() {
            served.stop(STOP_BOUND).await;
        }
        self.activity.snapshot()
    }
}
