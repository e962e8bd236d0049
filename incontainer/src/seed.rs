//! Seeding the workspace from inside the container, under runc: the checked process copies the
//! read-only source mount into the empty workspace volume before it reports, as the agent's user.
//! An engine upload would cost a second archive round trip through the engine on every launch;
//! this is one copy in the kernel per file. What is copied, and with which modes, is decided once
//! in `roundtable_session_runtime::seed` (which an upload from outside, under gVisor, uses too),
//! so what the agent finds is exactly the provisioned tree.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;
use std::time::UNIX_EPOCH;

use roundtable_session_runtime::seed::{FOLDER_MODE, SeedEntry, failed, walk};
pub use roundtable_session_runtime::seed::{SeedError, Seeded};

/// Copies what [`walk`] yields below `from` into `to`. Seeding again gives the same tree (a check
/// whose report the engine lost runs once more, after the first attempt may have seeded); nothing
/// but this copy writes there before the agent.
pub fn copy_tree(from: &Path, to: &Path) -> Result<Seeded, SeedError> {
    let mut seeded = Seeded::default();
    walk(from, |entry| {
        match entry {
            SeedEntry::Folder(relative) => {
                let target = to.join(relative);
                match std::fs::create_dir(&target) {
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists && target.is_dir() => {}
                    created => created.map_err(failed("create", &target))?,
                }
                // The mode asked for, whatever the process's umask.
                std::fs::set_permissions(&target, Permissions::from_mode(FOLDER_MODE))
                    .map_err(failed("set the mode of", &target))?;
            }
            SeedEntry::File { relative, mode } => {
                seeded.bytes += copy_file(&from.join(&relative), &to.join(&relative), mode)?;
                seeded.files += 1;
            }
        }
        Ok(())
    })?;
    Ok(seeded)
}

/// One file: its bytes (in the kernel where it can), its mode, and the epoch as its time, as the
/// provisioned tree's archive had.
fn copy_file(source: &Path, target: &Path, mode: u32) -> Result<u64, SeedError> {
    let mut input = File::open(source).map_err(failed("open", source))?;
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
