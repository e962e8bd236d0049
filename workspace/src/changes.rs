//! Which files differ between two folders (presence, executable bit, bytes), found by comparing
//! the files themselves, so only the changed set is ever handed to git to hash, store and diff:
//! a file the agent left alone costs two reads and a comparison, not two SHA-1s and two writes.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// Why two folders could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum ChangesError {
    #[error("cannot {step} {path}")]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is a .git entry; refusing to let git read it")]
    GitEntry { path: PathBuf },
}

/// What git would record for one entry below a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File {
        len: u64,
        executable: bool,
    },
    /// Anything else git could record (a symbolic link): never assumed unchanged, git decides.
    Other,
}

/// The paths (relative, as bytes) whose entry differs between the two folders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Changed or deleted: present in the first folder.
    pub in_before: Vec<Vec<u8>>,
    /// Changed or added: present in the second folder.
    pub in_after: Vec<Vec<u8>>,
}

fn io_error(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ChangesError {
    let path = path.to_owned();
    move |source| ChangesError::Io { step, path, source }
}

/// Every entry below `dir` except folders, by relative path. A `.git` entry anywhere is refused:
/// git must never be pointed at another repository through either folder.
fn listing(dir: &Path) -> Result<BTreeMap<Vec<u8>, Kind>, ChangesError> {
    let mut entries = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).map_err(io_error("list", &folder))? {
            let entry = entry.map_err(io_error("list", &folder))?;
            let path = entry.path();
            if entry.file_name() == ".git" {
                return Err(ChangesError::GitEntry { path });
            }
            let kind = entry.file_type().map_err(io_error("inspect", &path))?;
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path.strip_prefix(dir).unwrap_or(&path).as_os_str().as_bytes().to_vec();
            if kind.is_file() {
                let metadata = entry.metadata().map_err(io_error("inspect", &path))?;
                // git records 100755 for a file its owner may execute (the extractor and
                // provisioning only write 0755 or 0644).
                let executable = metadata.permissions().mode() & 0o100 != 0;
                entries.insert(relative, Kind::File { len: metadata.len(), executable });
            } else {
                entries.insert(relative, Kind::Other);
            }
        }
    }
    Ok(entries)
}

/// Whether two files of the same length hold the same bytes.
fn same_bytes(first: &Path, second: &Path, buffers: &mut (Vec<u8>, Vec<u8>)) -> Result<bool, ChangesError> {
    let mut a = std::fs::File::open(first).map_err(io_error("open", first))?;
    let mut b = std::fs::File::open(second).map_err(io_error("open", second))?;
    loop {
        let read = fill(&mut a, &mut buffers.0).map_err(io_error("read", first))?;
        let other = fill(&mut b, &mut buffers.1).map_err(io_error("read", second))?;
        if buffers.0[..read] != buffers.1[..other] {
            return Ok(false);
        }
        if read < buffers.0.len() {
            return Ok(true);
        }
    }
}

/// Reads until `buffer` is full or the file ends; the bytes read.
fn fill(file: &mut std::fs::File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

const CHUNK: usize = 1 << 20;

/// What differs between `before` and `after`.
pub fn changes(before: &Path, after: &Path) -> Result<Changes, ChangesError> {
    let (old, new) = (listing(before)?, listing(after)?);
    let mut found = Changes::default();
    // Same path, same mode, same length: equal only if the bytes are; compared on every core.
    let mut candidates = Vec::new();
    for (path, kind) in &old {
        match (kind, new.get(path)) {
            (Kind::File { .. }, Some(other)) if other == kind => candidates.push(path),
            (_, Some(_)) => {
                found.in_before.push(path.clone());
                found.in_after.push(path.clone());
            }
            (_, None) => found.in_before.push(path.clone()),
        }
    }
    found.in_after.extend(new.keys().filter(|path| !old.contains_key(*path)).cloned());
    let workers = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, 4);
    let share = candidates.len().div_ceil(workers).max(1);
    let differing = std::thread::scope(|scope| {
        let tasks: Vec<_> = candidates
            .chunks(share)
            .map(|chunk| {
                scope.spawn(move || {
                    let mut buffers = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
                    let mut differing = Vec::new();
                    for path in chunk {
                        let relative = Path::new(std::ffi::OsStr::from_bytes(path));
                        if !same_bytes(&before.join(relative), &after.join(relative), &mut buffers)? {
                            differing.push((*path).clone());
                        }
                    }
                    Ok::<_, ChangesError>(differing)
                })
            })
            .collect();
        let mut differing = Vec::new();
        for task in tasks {
            match task.join() {
                Ok(part) => differing.extend(part?),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok::<_, ChangesError>(differing)
    })?;
    found.in_before.extend(differing.iter().cloned());
    found.in_after.extend(differing);
    found.in_before.sort();
    found.in_after.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, contents: &[u8], mode: u32) {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(&full, contents).expect("write");
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    fn names(paths: &[Vec<u8>]) -> Vec<&str> {
        paths.iter().map(|p| std::str::from_utf8(p).expect("utf-8")).collect()
    }

    #[test]
    fn only_what_differs_in_bytes_mode_or_presence_is_listed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (before, after) = (dir.path().join("before"), dir.path().join("after"));
        let big: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        let mut big_changed_at_end = big.clone();
        if let Some(last) = big_changed_at_end.last_mut() {
            *last ^= 1;
        }
        for (path, old, new) in [
            ("same.txt", &b"same\n"[..], &b"same\n"[..]),
            ("edited.txt", b"abc\n", b"abd\n"),
            ("grown.txt", b"abc\n", b"abc\nmore\n"),
            ("big/same.bin", &big[..], &big[..]),
            ("big/last-byte.bin", &big[..], &big_changed_at_end[..]),
        ] {
            write(&before, path, old, 0o644);
            write(&after, path, new, 0o644);
        }
        write(&before, "tool.sh", b"#!/bin/sh\n", 0o644);
        write(&after, "tool.sh", b"#!/bin/sh\n", 0o755);
        write(&before, "gone.txt", b"bye\n", 0o644);
        write(&before, "was-a-file", b"file\n", 0o644);
        write(&after, "was-a-file/now-inside.txt", b"inside\n", 0o644);
        write(&after, "docs/new.md", b"new\n", 0o644);
        std::fs::create_dir_all(after.join("empty")).expect("an empty folder is nothing to git");

        let found = changes(&before, &after).expect("changes");
        assert_eq!(
            names(&found.in_before),
            ["big/last-byte.bin", "edited.txt", "gone.txt", "grown.txt", "tool.sh", "was-a-file"]
        );
        assert_eq!(
            names(&found.in_after),
            ["big/last-byte.bin", "docs/new.md", "edited.txt", "grown.txt", "tool.sh", "was-a-file/now-inside.txt"]
        );
        assert_eq!(changes(&before, &before).expect("same"), Changes::default());
    }

    #[test]
    fn a_git_entry_on_either_side_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (before, after) = (dir.path().join("before"), dir.path().join("after"));
        write(&before, "a.txt", b"a\n", 0o644);
        write(&after, "sub/.git", b"gitdir: /elsewhere\n", 0o644);
        let error = changes(&before, &after).expect_err("refused");
        assert!(matches!(&error, ChangesError::GitEntry { path } if path.ends_with("sub/.git")), "{error}");
        let error = changes(&after, &before).expect_err("refused");
        assert!(matches!(error, ChangesError::GitEntry { .. }));
    }
}
