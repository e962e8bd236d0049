//! What every per-session sidecar shares (the egress gateway, the credential broker, the MCP
//! endpoint): a server on a Unix socket in the session's socket directory, bound and handed to
//! the agent's UID before the container exists, kept for the whole session, and stopped after it
//! ([`Served`]); a log whose lines an agent causes, within budgets ([`BoundedLog`]); and a live
//! report rewritten atomically ([`write_report`]). Dropped without [`Served::stop`] (a panicking
//! execution), a server still stops serving and removes its socket.

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

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
        // Its work is part of the session's: its spans (each decision) are the session's children.
        let task = tokio::spawn(tracing::Instrument::in_current_span(serve(cancel.clone())));
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

/// Which budget of a [`BoundedLog`] a line is charged to: an agent hammering a sidecar with
/// refused calls must not push the calls it was allowed out of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Refusals,
    Allowed,
}

/// JSON lines appended to a file, each budget holding half of `limit` bytes; a line past its
/// budget is not written and `write` says so, for the caller to count.
pub struct BoundedLog {
    limit: u64,
    state: Mutex<LogState>,
}

struct LogState {
    file: Option<std::fs::File>,
    refusals: u64,
    allowed: u64,
}

impl BoundedLog {
    /// Opens `path` for appending; a log that cannot be opened writes nothing (and says so once).
    pub fn open(path: &Path, limit: u64, what: &str) -> Self {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path);
        if let Err(error) = &file {
            tracing::warn!(%error, path = %path.display(), what, "cannot open the sidecar log; its lines are only traced");
        }
        Self { limit, state: Mutex::new(LogState { file: file.ok(), refusals: 0, allowed: 0 }) }
    }

    /// Appends `value` as one line; `false` when the line was dropped over its budget.
    pub fn write(&self, value: &impl Serialize, budget: Budget) -> bool {
        let Ok(mut line) = serde_json::to_vec(value) else { return true };
        line.push(b'\n');
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let LogState { file, refusals, allowed } = &mut *state;
        let used = match budget {
            Budget::Refusals => refusals,
            Budget::Allowed => allowed,
        };
        if *used + line.len() as u64 > self.limit / 2 {
            return false;
        }
        if let Some(file) = file
            && file.write_all(&line).is_ok()
        {
            *used += line.len() as u64;
        }
        true
    }
}

/// The live reports of the running sessions whose sidecar still serves, each read from its
/// execution folder by `read`: what the `status` rows of a kind of sidecar are made from. A
/// stopped sidecar belongs to a session that is only wrapping up.
pub fn serving<T>(
    sessions: &[roundtable_store::SessionRecord],
    read: impl Fn(&Path) -> Option<T>,
    state: impl Fn(&T) -> roundtable_specs::session::SidecarState,
) -> impl Iterator<Item = (&roundtable_store::SessionRecord, T)> {
    sessions.iter().filter(|session| session.phase == roundtable_specs::session::SessionPhase::Running).filter_map(
        move |session| {
            let report = read(Path::new(session.exec_dir.as_deref()?))?;
            (state(&report) == roundtable_specs::session::SidecarState::Serving).then_some((session, report))
        },
    )
}

/// Writes a sidecar's live report atomically, so `status` never reads half a file.
pub fn write_report(path: &Path, report: &impl Serialize) {
    let temporary = path.with_extension("json.tmp");
    let written = serde_json::to_vec_pretty(report)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(&temporary, bytes))
        .and_then(|()| std::fs::rename(&temporary, path));
    if let Err(error) = written {
        tracing::warn!(%error, path = %path.display(), "cannot write a sidecar report");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_budget_holds_half_the_limit_and_refusals_cannot_crowd_out_allowed_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let log = BoundedLog::open(&path, 200, "test");
        let line = serde_json::json!({"n": "x".repeat(30)}); // 41 bytes with its newline
        let refused: Vec<bool> = (0..4).map(|_| log.write(&line, Budget::Refusals)).collect();
        assert_eq!(refused, [true, true, false, false]);
        assert!(log.write(&line, Budget::Allowed), "the allowed budget is untouched");
        assert_eq!(std::fs::read_to_string(&path).expect("log").lines().count(), 3);
    }
}
