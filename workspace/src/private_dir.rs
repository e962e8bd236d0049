//! The controller's private directories on the host (the execution root): made by the
//! controller with mode 0700, and never a directory someone else owns or can write re-moded.
//!
//! An existing directory is checked, not changed: re-moding a shared parent such as `/tmp` or
//! `/var/tmp` would break every other user and service of the host. The rules follow OpenSSH's
//! `StrictModes`: the private directory is owned by the controller's user and closed to everyone
//! else; its parent is owned by that user or by root and, when others can write it, sticky (so
//! nobody else can rename or replace the private directory inside it).

use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

/// Why a private directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    #[error("cannot create {path}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot inspect {path}")]
    Inspect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a directory (a symbolic link or another kind of file); choose another folder")]
    NotADirectory { path: PathBuf },
    #[error("{path} is owned by UID {owner}, not by this controller (UID {uid}); choose a folder this user owns")]
    NotOwned { path: PathBuf, owner: u32, uid: u32 },
    #[error(
        "{path} has mode {mode:04o}, so other users can reach what the controller keeps there; run `chmod 700 {path}` or choose another folder (roundtable never re-modes a folder it did not create)"
    )]
    NotPrivate { path: PathBuf, mode: u32 },
    #[error("the parent folder {path} is owned by UID {owner} (neither root nor UID {uid}); choose another folder")]
    ParentNotTrusted { path: PathBuf, owner: u32, uid: u32 },
    #[error(
        "the parent folder {path} has mode {mode:04o}: others can write it without the sticky bit, so they could replace the private folder; choose another folder"
    )]
    ParentWritable { path: PathBuf, mode: u32 },
}

/// Makes sure `dir` exists as a directory private to this user: missing folders (and their
/// missing ancestors) are created with mode 0700; an existing one must already satisfy the rules.
/// Returns the directory's canonical path.
pub fn prepare(dir: &Path) -> Result<PathBuf, PrivateDirError> {
    let uid = rustix::process::geteuid().as_raw();
    // The parent is checked before anything is created in it.
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_missing(parent)?;
        let parent =
            parent.canonicalize().map_err(|source| PrivateDirError::Inspect { path: parent.to_owned(), source })?;
        let meta =
            std::fs::metadata(&parent).map_err(|source| PrivateDirError::Inspect { path: parent.clone(), source })?;
        check_parent(&parent, &meta, uid)?;
    }
    create_missing(dir)?;
    let meta =
        std::fs::symlink_metadata(dir).map_err(|source| PrivateDirError::Inspect { path: dir.to_owned(), source })?;
    check_private(dir, &meta, uid)?;
    dir.canonicalize().map_err(|source| PrivateDirError::Inspect { path: dir.to_owned(), source })
}

/// Creates `dir` and any missing ancestors, each with mode 0700 (the umask can only narrow it).
fn create_missing(dir: &Path) -> Result<(), PrivateDirError> {
    let mut missing = Vec::new();
    let mut cursor = Some(dir);
    while let Some(path) = cursor {
        if path.as_os_str().is_empty() || std::fs::symlink_metadata(path).is_ok() {
            break;
        }
        missing.push(path);
        cursor = path.parent();
    }
    for path in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => {}
            // Someone made it meanwhile: it is checked like any existing folder.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(PrivateDirError::Create { path: path.to_owned(), source }),
        }
    }
    Ok(())
}

/// The private directory itself: a real directory, ours, closed to group and others.
fn check_private(path: &Path, meta: &std::fs::Metadata, uid: u32) -> Result<(), PrivateDirError> {
    if !meta.file_type().is_dir() {
        return Err(PrivateDirError::NotADirectory { path: path.to_owned() });
    }
    if meta.uid() != uid {
        return Err(PrivateDirError::NotOwned { path: path.to_owned(), owner: meta.uid(), uid });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(PrivateDirError::NotPrivate { path: path.to_owned(), mode });
    }
    Ok(())
}

/// The parent: owned by us or root; writable by others only when sticky.
fn check_parent(path: &Path, meta: &std::fs::Metadata, uid: u32) -> Result<(), PrivateDirError> {
    if meta.uid() != uid && meta.uid() != 0 {
        return Err(PrivateDirError::ParentNotTrusted { path: path.to_owned(), owner: meta.uid(), uid });
    }
    let mode = meta.mode() & 0o7777;
    let sticky = mode & 0o1000 != 0;
    if mode & 0o022 != 0 && !sticky {
        return Err(PrivateDirError::ParentWritable { path: path.to_owned(), mode });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("metadata").mode() & 0o7777
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn a_new_folder_is_created_private_and_its_shared_parent_is_left_alone() {
        let base = tempfile::tempdir().expect("tempdir");
        let shared = base.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        chmod(&shared, 0o1777);
        let root = shared.join("a/b/executions");
        prepare(&root).expect("prepared");
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&shared.join("a")), 0o700, "missing ancestors are created private too");
        assert_eq!(mode(&shared), 0o1777, "the shared parent keeps its mode");
    }

    #[test]
    fn an_existing_folder_is_checked_not_changed() {
        let base = tempfile::tempdir().expect("tempdir");
        let root = base.path().join("executions");
        std::fs::create_dir(&root).expect("mkdir");
        chmod(&root, 0o755);
        let error = prepare(&root).expect_err("not private");
        assert!(matches!(error, PrivateDirError::NotPrivate { mode: 0o755, .. }), "{error}");
        assert!(error.to_string().contains("chmod 700"), "{error}");
        assert_eq!(mode(&root), 0o755, "left as it was");
        chmod(&root, 0o700);
        prepare(&root).expect("private now");
    }

    #[test]
    fn a_parent_others_can_write_without_the_sticky_bit_is_refused() {
        let base = tempfile::tempdir().expect("tempdir");
        let open = base.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        chmod(&open, 0o777);
        let error = prepare(&open.join("executions")).expect_err("open parent");
        assert!(matches!(error, PrivateDirError::ParentWritable { mode: 0o777, .. }), "{error}");
        assert_eq!(mode(&open), 0o777, "left as it was");
        assert!(!open.join("executions").exists(), "nothing is created in it");
    }

    #[test]
    fn a_symlink_is_not_a_private_folder() {
        let base = tempfile::tempdir().expect("tempdir");
        let target = base.path().join("target");
        std::fs::create_dir(&target).expect("mkdir");
        chmod(&target, 0o700);
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert!(matches!(prepare(&link), Err(PrivateDirError::NotADirectory { .. })));
    }

    #[test]
    fn ownership_rules() {
        let base = tempfile::tempdir().expect("tempdir");
        let meta = std::fs::metadata(base.path()).expect("metadata");
        let other = meta.uid().wrapping_add(4242);
        assert!(matches!(check_private(base.path(), &meta, other), Err(PrivateDirError::NotOwned { .. })));
        // A parent owned by someone who is neither root nor us is refused (unless we are that owner).
        if meta.uid() != 0 {
            assert!(check_parent(base.path(), &meta, other).is_err());
        }
    }
}
