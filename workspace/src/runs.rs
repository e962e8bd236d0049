//! Controller-run leases on the host: a daemon holds an exclusive lock on
//! `<socket root>/runs/<controller run>.lock` for as long as it runs (the kernel releases it when
//! the process dies), so any other process on the host (a `prune` with another state directory,
//! another daemon) can tell a live controller run from a dead one before it removes what that run
//! labelled.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

/// Why a run's lease could not be taken.
#[derive(Debug, thiserror::Error)]
#[error("cannot hold the controller-run lease {path}")]
pub struct LeaseError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Held for as long as the daemon runs; removed when dropped.
#[derive(Debug)]
pub struct RunLease {
    path: PathBuf,
    _file: File,
}

impl Drop for RunLease {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What is known about a controller run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Its daemon holds the lease now.
    Alive,
    /// Its lease exists and nobody holds it: the daemon died without removing it.
    Dead,
    /// No lease: a run from before leases existed, from another host, or one that ended cleanly.
    Unknown,
}

fn lease_path(socket_root: &Path, run: &str) -> PathBuf {
    socket_root.join("runs").join(format!("{run}.lock"))
}

/// Takes the lease of `run` under `socket_root` (`/run/roundtable` as root).
pub fn hold(socket_root: &Path, run: &str) -> Result<RunLease, LeaseError> {
    let path = lease_path(socket_root, run);
    let fail = |source| LeaseError { path: path.clone(), source };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(fail)?;
    flock(&file, FlockOperation::NonBlockingLockExclusive).map_err(|errno| fail(errno.into()))?;
    Ok(RunLease { path, _file: file })
}

/// Whether the daemon of `run` is alive, as far as this host can tell.
pub fn liveness(socket_root: &Path, run: &str) -> Liveness {
    // A run ID is our own hex; anything else cannot name a lease file.
    if run.is_empty() || !run.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Liveness::Unknown;
    }
    let Ok(file) = File::open(lease_path(socket_root, run)) else { return Liveness::Unknown };
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => Liveness::Dead,
        Err(_) => Liveness::Alive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lease_is_alive_and_a_dropped_one_is_gone() {
        let root = tempfile::tempdir().expect("tempdir");
        assert_eq!(liveness(root.path(), "abc123"), Liveness::Unknown);
        let lease = hold(root.path(), "abc123").expect("hold");
        assert_eq!(liveness(root.path(), "abc123"), Liveness::Alive);
        assert!(hold(root.path(), "abc123").is_err(), "one holder");
        drop(lease);
        assert_eq!(liveness(root.path(), "abc123"), Liveness::Unknown, "removed on a clean exit");
        // A daemon that died leaves its lease unheld.
        std::fs::write(lease_path(root.path(), "dead01"), b"").expect("leftover");
        assert_eq!(liveness(root.path(), "dead01"), Liveness::Dead);
        assert_eq!(liveness(root.path(), "../../etc/passwd"), Liveness::Unknown);
    }
}
