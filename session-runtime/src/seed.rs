//! What seeding a workspace from its source copies, for both ways of seeding it (inside the
//! container under runc, an engine upload from outside under gVisor): the folders and regular
//! files below the source, links and special files left out, folders 0755, files 0755 or 0644 by
//! their executable bit, each with the epoch as its time. One walk, so the two ways cannot differ.

use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// A seeded folder's mode.
pub const FOLDER_MODE: u32 = 0o755;

/// A seeded file's mode: 0755 when any executable bit is set at the source, else 0644.
pub fn file_mode(source_mode: u32) -> u32 {
    if source_mode & 0o111 != 0 { 0o755 } else { 0o644 }
}

/// One entry to seed: its path relative to the source, and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedEntry {
    /// A folder, always before what is in it.
    Folder(PathBuf),
    /// A regular file, with the mode it gets (see [`file_mode`]).
    File { relative: PathBuf, mode: u32 },
}

/// What a seed copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seeded {
    pub files: u64,
    pub bytes: u64,
}

/// Why the workspace could not be seeded (a workspace too small is the usual one).
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct SeedError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// Maps an I/O error about `path` while doing `action` to a [`SeedError`].
pub fn failed<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SeedError + 'a {
    move |source| SeedError { action, path: path.to_path_buf(), source }
}

/// Walks the folders and regular files below `from`, each folder before its contents; `visit`
/// sees each entry once and may stop the walk with an error. The entries are not followed
/// through links: a link, a socket or a device is left out.
pub fn walk(from: &Path, mut visit: impl FnMut(SeedEntry) -> Result<(), SeedError>) -> Result<(), SeedError> {
    let mut folders = vec![PathBuf::new()];
    while let Some(relative) = folders.pop() {
        let folder = from.join(&relative);
        for entry in std::fs::read_dir(&folder).map_err(failed("list", &folder))? {
            let entry = entry.map_err(failed("list", &folder))?;
            let relative = relative.join(entry.file_name());
            // The entry itself, not what a link points to.
            let kind = entry.file_type().map_err(failed("inspect", &entry.path()))?;
            if kind.is_dir() {
                visit(SeedEntry::Folder(relative.clone()))?;
                folders.push(relative);
            } else if kind.is_file() {
                let source = entry.path();
                let metadata = entry.metadata().map_err(failed("inspect", &source))?;
                visit(SeedEntry::File { relative, mode: file_mode(metadata.permissions().mode()) })?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_come_before_their_contents_and_links_are_left_out() {
        let from = tempfile::tempdir().expect("from");
        std::fs::create_dir_all(from.path().join("a/b")).expect("folders");
        std::fs::write(from.path().join("a/b/run.sh"), b"#!/bin/sh\n").expect("script");
        std::fs::set_permissions(from.path().join("a/b/run.sh"), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        std::fs::write(from.path().join("notes.txt"), b"x").expect("notes");
        std::os::unix::fs::symlink("/etc/passwd", from.path().join("link")).expect("symlink");
        let mut seen = Vec::new();
        walk(from.path(), |entry| {
            seen.push(entry);
            Ok(())
        })
        .expect("walk");
        let position = |wanted: &SeedEntry| seen.iter().position(|entry| entry == wanted).expect("seen");
        let a = position(&SeedEntry::Folder("a".into()));
        let b = position(&SeedEntry::Folder("a/b".into()));
        let script = position(&SeedEntry::File { relative: "a/b/run.sh".into(), mode: 0o755 });
        assert!(a < b && b < script, "{seen:?}");
        assert!(seen.contains(&SeedEntry::File { relative: "notes.txt".into(), mode: 0o644 }));
        assert_eq!(seen.len(), 4, "the link is left out: {seen:?}");
    }
}
