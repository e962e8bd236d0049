//! Provisioning under a controller whose umask is restrictive. A test binary of its own: the
//! umask is process-wide, and changing it beside other tests' threads would change their files.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use common::git;
use roundtable_workspace::provision;
use rustix::fs::Mode;

mod common;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o7777
}

#[test]
fn a_restrictive_umask_still_gives_a_tree_the_agent_can_read() {
    let repo = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(root.join("src/deep/er")).expect("mkdir");
    std::fs::write(root.join("src/deep/er/lib.rs"), b"pub fn f() {}\n").expect("write");
    std::fs::write(root.join("src/run.sh"), b"#!/bin/sh\n").expect("write");
    std::fs::set_permissions(root.join("src/run.sh"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "base"]);
    let commit = provision::resolve(root, "main").expect("resolve");

    // What a controller started by a careful service manager has: nothing for group or others.
    rustix::process::umask(Mode::from_raw_mode(0o077));
    let dest = tempfile::tempdir().expect("tempdir");
    let source = dest.path().join("source");
    provision::export(root, &commit, &["src/".into()], &source).expect("export");

    // The agent runs as another user: every folder must let it in, every file let it read.
    assert_eq!(mode(&source), 0o755, "the tree's root");
    for folder in ["src", "src/deep", "src/deep/er"] {
        assert_eq!(mode(&source.join(folder)), 0o755, "{folder}");
    }
    assert_eq!(mode(&source.join("src/deep/er/lib.rs")), 0o644);
    assert_eq!(mode(&source.join("src/run.sh")), 0o755);
}
