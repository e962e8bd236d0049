//! The state directory is private to its owner whatever the umask: the folder (and every folder
//! in it) 0700, every file 0600 or tighter. New files are created so; existing ones that others
//! can reach are tightened when a command prepares the directory, and each change is reported.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A file or folder whose group and other permissions were removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tightened {
    pub path: PathBuf,
    pub from: u32,
    pub to: u32,
}

impl std::fmt::Display for Tightened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tightened {} from {:04o} to {:04o} (the state directory is private to its owner)",
            self.path.display(),
            self.from,
            self.to
        )
    }
}

fn failed(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::StateDir { path: path.to_owned(), source }
}

/// What the controller writes directly in the state directory (folders among them are
/// tightened whole). Only these are touched: a state directory pointed at a folder holding other
/// things (`--state-dir ~`) never has those changed.
const WRITTEN: [&str; 9] = [
    ".gitignore",
    crate::DATABASE_FILE,
    "state.db-wal",
    "state.db-shm",
    crate::lock::LOCK_FILE,
    crate::lock::MIGRATION_LOCK_FILE,
    "api-token",
    "api-address",
    "proposals",
];

/// Creates the state directory (0700) with a `.gitignore` that keeps it out of commits, and
/// removes group and other permissions from it and from what the controller wrote in it
/// (symbolic links are not followed). What was tightened, for the caller to say. A folder with
/// the sticky bit (`/tmp`) is shared by design and refused.
pub fn prepare(state_dir: &Path) -> Result<Vec<Tightened>> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(state_dir).map_err(failed(state_dir))?;
    let meta = std::fs::metadata(state_dir).map_err(failed(state_dir))?;
    if meta.permissions().mode() & 0o1000 != 0 {
        return Err(Error::StateDir {
            path: state_dir.to_owned(),
            source: std::io::Error::other(
                "a shared folder (sticky bit set) cannot be a state directory; pass --state-dir DIR of its own",
            ),
        });
    }
    let ignore = state_dir.join(".gitignore");
    if !ignore.exists() {
        write_private(&ignore, b"# Roundtable's runtime state; never commit it.\n*\n")?;
    }
    let mut tightened = Vec::new();
    tighten(state_dir, &mut tightened)?;
    let mut pending: Vec<PathBuf> = WRITTEN.iter().map(|name| state_dir.join(name)).collect();
    while let Some(path) = pending.pop() {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(failed(&path)(error)),
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        tighten(&path, &mut tightened)?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).map_err(failed(&path))? {
                pending.push(entry.map_err(failed(&path))?.path());
            }
        }
    }
    tightened.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(tightened)
}

/// Removes group and other permissions from `path` (not a symbolic link) if it has any.
fn tighten(path: &Path, tightened: &mut Vec<Tightened>) -> Result<()> {
    let mode = std::fs::symlink_metadata(path).map_err(failed(path))?.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        let to = mode & !0o077;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(to)).map_err(failed(path))?;
        tightened.push(Tightened { path: path.to_owned(), from: mode, to });
    }
    Ok(())
}

/// Creates `path` as an empty 0600 file when it does not exist, so that whatever opens it next
/// (SQLite, which gives its -wal and -shm files the database's mode) keeps it private.
pub fn create_private(path: &Path) -> Result<()> {
    match create_new_private(path) {
        Ok(_) | Err(Error::TargetExists { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Creates `path` as a new, empty 0600 file for a copy of the state (a backup, a migration's
/// target), refusing anything already there. `create_new` is `O_CREAT | O_EXCL`, which never
/// follows a symbolic link at `path`: a link planted there is refused, and where it points is
/// never written.
pub fn create_new_private(path: &Path) -> Result<std::fs::File> {
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(file) => Ok(file),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(Error::TargetExists { path: path.to_owned() })
        }
        Err(error) => Err(failed(path)(error)),
    }
}

/// Writes `contents` to `path` (replacing it) as a 0600 file.
pub fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(failed(path))?;
    // An existing file keeps its mode through `open`.
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(failed(path))?;
    file.write_all(contents).map_err(failed(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).expect("stat").permissions().mode() & 0o777
    }

    #[test]
    fn what_others_can_reach_is_tightened_and_named() {
        let base = tempfile::tempdir().expect("tempdir");
        let state = base.path().join("state");
        std::fs::create_dir_all(state.join("proposals")).expect("mkdir");
        std::fs::write(state.join("state.db"), "").expect("write");
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(state.join("state.db"), std::fs::Permissions::from_mode(0o644)).expect("chmod");
        std::fs::set_permissions(state.join("proposals"), std::fs::Permissions::from_mode(0o750)).expect("chmod");
        std::os::unix::fs::symlink(base.path().join("elsewhere"), state.join("proposals/link")).expect("symlink");
        std::fs::write(base.path().join("elsewhere"), "").expect("write");
        std::fs::set_permissions(base.path().join("elsewhere"), std::fs::Permissions::from_mode(0o644)).expect("chmod");
        std::fs::write(state.join("notes.txt"), "").expect("write");
        std::fs::set_permissions(state.join("notes.txt"), std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let tightened = prepare(&state).expect("prepare");
        let named: Vec<(PathBuf, u32, u32)> = tightened.into_iter().map(|t| (t.path, t.from, t.to)).collect();
        assert_eq!(
            named,
            [
                (state.clone(), 0o755, 0o700),
                (state.join("proposals"), 0o750, 0o700),
                (state.join("state.db"), 0o644, 0o600)
            ]
        );
        // Links are not followed, and what the controller did not write is left alone.
        assert_eq!(mode(&state.join(".gitignore")), 0o600);
        assert_eq!((mode(&base.path().join("elsewhere")), mode(&state.join("notes.txt"))), (0o644, 0o644));
        assert_eq!(prepare(&state).expect("again"), []);
    }
}

#[cfg(test)]
mod shared {
    #[test]
    fn a_sticky_folder_is_refused_untouched() {
        use std::os::unix::fs::PermissionsExt as _;
        let base = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        let error = super::prepare(base.path()).expect_err("refused");
        assert!(format!("{:?}", error).contains("sticky"), "{error:?}");
        let mode = std::fs::metadata(base.path()).expect("stat").permissions().mode() & 0o7777;
        assert_eq!(mode, 0o1777);
    }
}
