//! The daemon lock: one `roundtable start` per state directory. The lock file names its holder,
//! so a second `start` can say who holds it.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use std::os::unix::fs::OpenOptionsExt as _;

use rustix::fs::{FlockOperation, flock};

/// The lock file inside the state directory.
pub const LOCK_FILE: &str = "daemon.lock";

/// The file whose lock serialises migrations of a new database.
pub const MIGRATION_LOCK_FILE: &str = "migrate.lock";

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another roundtable daemon holds {path}: {holder}")]
    Held { path: PathBuf, holder: String },
    #[error("cannot use the lock file {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Held for as long as the daemon runs; the kernel releases it when the process dies.
#[derive(Debug)]
pub struct DaemonLock {
    _file: File,
}

fn open(path: &Path) -> Result<File, LockError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|source| LockError::Io { path: path.to_owned(), source })
}

fn read_holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.seek(SeekFrom::Start(0)).and_then(|_| file.read_to_string(&mut text));
    let text = text.trim();
    if text.is_empty() { "holder unknown".into() } else { text.to_owned() }
}

/// Takes the lock and records `holder` (pid, host, start time) in it.
pub fn acquire(state_dir: &Path, holder: &str) -> Result<DaemonLock, LockError> {
    let path = state_dir.join(LOCK_FILE);
    let mut file = open(&path)?;
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        return Err(LockError::Held { holder: read_holder(&mut file), path });
    }
    let io = |source| LockError::Io { path: path.clone(), source };
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    file.write_all(format!("{holder}\n").as_bytes()).map_err(io)?;
    file.flush().map_err(io)?;
    Ok(DaemonLock { _file: file })
}

/// Held while migrations run; released on drop.
#[derive(Debug)]
pub struct MigrationGuard {
    _file: File,
}

/// Waits (up to 30 s) for the exclusive migration lock of `state_dir`.
pub async fn migration_guard(state_dir: &Path) -> std::io::Result<MigrationGuard> {
    let path = state_dir.join(MIGRATION_LOCK_FILE);
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(MigrationGuard { _file: file }),
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Who holds the lock, if anyone does (without taking it).
pub fn holder(state_dir: &Path) -> Option<String> {
    let path = state_dir.join(LOCK_FILE);
    if !path.exists() {
        return None;
    }
    let mut file = open(&path).ok()?;
    if flock(&file, FlockOperation::NonBlockingLockShared).is_ok() {
        let _ = flock(&file, FlockOperation::Unlock);
        return None;
    }
    Some(read_holder(&mut file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_and_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(holder(dir.path()), None);
        let lock = acquire(dir.path(), "pid=1 host=a").expect("first");
        assert_eq!(holder(dir.path()).as_deref(), Some("pid=1 host=a"));
        match acquire(dir.path(), "pid=2 host=b") {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, "pid=1 host=a"),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(lock);
        assert_eq!(holder(dir.path()), None);
        acquire(dir.path(), "pid=3").expect("free again");
    }
}
