//! Seeding the workspace from inside the container: the checked process copies the read-only
//! source mount into the empty workspace volume before it reports, as the agent's user. An
//! engine upload would cost a second archive round trip through the engine on every launch; this
//! is one copy in the kernel per file. Only folders and regular files are copied, with the modes
//! an upload would give them (0755 folders, 0755 or 0644 files by the executable bit), so what the
//! agent finds is exactly the provisioned tree.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// What a seed copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seeded {
    pub files: u64,
    pub bytes: u64,
}

/// Why the workspace could not be seeded (a full workspace is the usual one).
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct SeedError {
    action: &'static str,
    path: PathBuf,
    #[source]
    source: io::Error,
}

fn failed<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SeedError + 'a {
    move |source| SeedError { action, path: path.to_path_buf(), source }
}

/// Copies the folders and regular files below `from` into `to`; links and special files are left
/// out. Seeding again gives the same tree (a check whose report the engine lost runs once more,
/// after the first attempt may have seeded); nothing but this copy writes there before the agent.
pub fn copy_tree(from: &Path, to: &Path) -> Result<Seeded, SeedError> {
    let mut seeded = Seeded::default();
    let mut folders = vec![PathBuf::new()];
    while let Some(relative) = folders.pop() {
        let folder = from.join(&relative);
        for entry in std::fs::read_dir(&folder).map_err(failed("list", &folder))? {
            let entry = entry.map_err(failed("list", &folder))?;
            let (source, relative) = (entry.path(), relative.join(entry.file_name()));
            let target = to.join(&relative);
            // The entry itself, not what a link points to.
            let kind = entry.file_type().map_err(failed("inspect", &source))?;
            if kind.is_dir() {
                match std::fs::create_dir(&target) {
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists && target.is_dir() => {}
                    created => created.map_err(failed("create", &target))?,
                }
                // The mode asked for, whatever the process's umask.
                std::fs::set_permissions(&target, Permissions::from_mode(0o755))
                    .map_err(failed("set the mode of", &target))?;
                folders.push(relative);
            } else if kind.is_file() {
                seeded.bytes += copy_file(&source, &target)?;
                seeded.files += 1;
            }
        }
    }
    Ok(seeded)
}

/// One file: its bytes (in the kernel where it can), its executable bit, and the epoch as its
/// time, as the provisioned tree's archive had.
fn copy_file(source: &Path, target: &Path) -> Result<u64, SeedError> {
    let mut input = File::open(source).map_err(failed("open", source))?;
    let executable = input.metadata().map_err(failed("inspect", source))?.permissions().mode() & 0o111 != 0;
    let mode = if executable { 0o755 } else { 0o644 };
    let mut output = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(target)
        .map_err(failed("create", target))?;
    let bytes = io::copy(&mut input, &mut output).map_err(failed("write", target))?;
    output.set_permissions(Permissions::from_mode(mode)).map_err(failed("set the mode of", target))?;
    output.set_modified(UNIX_EPOCH).map_err(failed("set the time of", target))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("metadata").mode() & 0o7777
    }

    #[test]
    fn folders_and_files_arrive_whole_with_their_modes_and_nothing_else() {
        let from = tempfile::tempdir().expect("from");
        let to = tempfile::tempdir().expect("to");
        std::fs::create_dir_all(from.path().join("src/deep")).expect("folders");
        std::fs::create_dir(from.path().join("empty")).expect("empty folder");
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
        std::fs::write(from.path().join("src/deep/blob.bin"), &bytes).expect("blob");
        std::fs::write(from.path().join("run.sh"), b"#!/bin/sh\n").expect("script");
        std::fs::set_permissions(from.path().join("run.sh"), Permissions::from_mode(0o700)).expect("chmod");
        std::fs::write(from.path().join("notes.txt"), b"x").expect("notes");
        std::fs::set_permissions(from.path().join("notes.txt"), Permissions::from_mode(0o600)).expect("chmod");
        std::os::unix::fs::symlink("/etc/passwd", from.path().join("link")).expect("symlink");

        let seeded = copy_tree(from.path(), to.path()).expect("seed");

        assert_eq!(seeded, Seeded { files: 3, bytes: bytes.len() as u64 + 11 });
        assert!(std::fs::read(to.path().join("src/deep/blob.bin")).expect("read") == bytes);
        assert_eq!(mode(&to.path().join("run.sh")), 0o755, "executable: 0755");
        assert_eq!(mode(&to.path().join("notes.txt")), 0o644, "not executable: 0644");
        assert_eq!(mode(&to.path().join("src/deep")), 0o755);
        assert!(to.path().join("empty").is_dir(), "an empty folder is kept");
        assert!(std::fs::symlink_metadata(to.path().join("link")).is_err(), "links are left out");
        let modified = std::fs::metadata(to.path().join("notes.txt")).expect("metadata").mtime();
        assert_eq!(modified, 0, "files carry the epoch, as the archive did");
    }

    #[test]
    fn seeding_again_gives_the_same_tree() {
        let from = tempfile::tempdir().expect("from");
        let to = tempfile::tempdir().expect("to");
        std::fs::create_dir(from.path().join("src")).expect("folder");
        std::fs::write(from.path().join("src/a.txt"), b"the provisioned bytes").expect("a");
        let first = copy_tree(from.path(), to.path()).expect("first seed");
        // A first attempt cut short leaves a longer, different file behind.
        std::fs::write(to.path().join("src/a.txt"), b"a longer leftover of an earlier attempt").expect("leftover");
        let second = copy_tree(from.path(), to.path()).expect("second seed");
        assert_eq!(first, second);
        assert_eq!(std::fs::read(to.path().join("src/a.txt")).expect("read"), b"the provisioned bytes");
    }

    #[test]
    fn a_failure_names_what_and_where() {
        let to = tempfile::tempdir().expect("to");
        let missing = to.path().join("no-such-source");
        let error = copy_tree(&missing, to.path()).expect_err("no source");
        assert!(error.to_string().starts_with("cannot list "), "{error}");
        assert!(error.to_string().contains("no-such-source"), "{error}");
    }
}
