//! Room left on the disk under a SQLite store: below a floor it counts as full, so intake stops
//! before writes start failing half-way through an execution, and `status` says why.

use std::path::{Path, PathBuf};

use crate::{Store, StoreUrl};

/// Free space under which a SQLite store counts as full: room for its write-ahead log to grow by
/// a few transactions and for a checkpoint, and for a proposal's patch file beside it.
const FULL_BELOW: u64 = 4 * 1024 * 1024;

/// A store whose disk is full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the disk under the state store {} is full ({} KiB free, {} KiB needed): no execution starts \
     until space returns",
    folder.display(),
    available / 1024,
    FULL_BELOW / 1024
)]
pub struct DiskFull {
    pub folder: PathBuf,
    pub available: u64,
}

/// The space an unprivileged writer may use on the file system holding `folder`.
fn available(folder: &Path) -> Option<u64> {
    let stats = rustix::fs::statvfs(folder).ok()?;
    Some(stats.f_bavail.saturating_mul(stats.f_frsize))
}

impl Store {
    /// Whether the disk under this store is full; never for PostgreSQL (its server reports its own
    /// disk) or an in-memory store.
    pub fn disk_full(&self) -> Option<DiskFull> {
        let StoreUrl::Sqlite(file) = &self.url else { return None };
        let folder = file.parent().filter(|folder| !folder.as_os_str().is_empty())?;
        let available = available(folder)?;
        (available < FULL_BELOW).then(|| DiskFull { folder: folder.to_owned(), available })
    }
}
