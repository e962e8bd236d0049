//! What every per-session sidecar shares (the egress gateway, the MCP endpoint): a server on a
//! Unix socket in the session's socket directory, bound and handed to the agent's UID before the
//! container exists, kept for the whole session, and stopped after it. Dropped without
//! [`Served::stop`] (a panicking execution), it still stops serving and removes its socket.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// A running per-session server.
pub struct Served {
    /// What it is, for messages (`egress`, `mcp`).
    what: &'static str,
    socket: PathBuf,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Served {
    /// Runs `serve` until the token it is given is cancelled.
    pub fn spawn<F>(what: &'static str, socket: &Path, serve: impl FnOnce(CancellationToken) -> F) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let cancel = CancellationToken::new();
        let task = tokio::spawn(serve(cancel.clone()));
        Self { what, socket: socket.to_owned(), cancel, task: Some(task) }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stops serving, waiting up to `bound` for open connections to close, then removes the socket.
    pub async fn stop(mut self, bound: Duration) {
        self.cancel.cancel();
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(bound, &mut task).await.is_err()
        {
            tracing::warn!(socket = %self.socket.display(), what = self.what, "connections did not close in time; abandoned");
            task.abort();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}
