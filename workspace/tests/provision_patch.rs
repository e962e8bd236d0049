//! Provisioning and patches against real git repositories: exact scope, sensitive files withheld,
//! a manifest of what was provided, and patches that apply to the base commit and reproduce the
//! export byte for byte (binary file, deletion, rename, mode change).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use roundtable_workspace::patch;
use roundtable_workspace::provision::{self, ProvisionError};

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?}");
}

fn write(root: &Path, path: &str, contents: &[u8]) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    std::fs::write(full, contents).expect("write");
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    write(root, "README.md", b"# Project\n");
    write(root, "docs/guide.md", b"guide\n");
    write(root, "docs/old-name.md", b"a file that will be renamed\nwith several lines\nso git sees the rename\n");
    write(root, "docs/remove-me.md", b"bye\n");
    write(root, "docs/script.sh", b"#!/bin/sh\necho hi\n");
    write(root, "docs/.env", b"TOKEN=secret\n");
    write(root, "docs/keys/server.pem", b"-----BEGIN-----\n");
    write(root, "docs/.ssh/config", b"Host *\n");
    write(root, "src/main.rs", b"fn main() {}\n");
    std::os::unix::fs::symlink("../README.md", root.join("docs/link.md")).expect("symlink");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "base"]);
    dir
}

#[test]
fn provisions_exactly_the_readable_paths_without_secrets() {
    let repo = repo();
    let commit = provision::resolve(repo.path(), "main").expect("resolve");
    assert_eq!(commit.len(), 40);
    let dest = tempfile::tempdir().expect("tempdir");
    let source = dest.path().join("source");
    let provided =
        provision::export(repo.path(), &commit, &["README.md".into(), "docs/".into()], &source).expect("export");
    let mut paths: Vec<&str> = provided.files.iter().map(|f| f.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["README.md", "docs/guide.md", "docs/old-name.md", "docs/remove-me.md", "docs/script.sh"]);
    assert!(!source.join("src").exists() && !source.join("docs/.env").exists() && !source.join(".git").exists());
    let withheld: Vec<&str> = provided.withheld.iter().map(|w| w.path.as_str()).collect();
    assert!(withheld.contains(&"docs/.env") && withheld.contains(&"docs/keys/server.pem"), "{withheld:?}");
    assert!(withheld.contains(&"docs/.ssh/config") && withheld.contains(&"docs/link.md"), "{withheld:?}");
    let readme = provided.files.iter().find(|f| f.path == "README.md").expect("readme");
    assert_eq!(readme.size, 10);
    assert_eq!(readme.sha256, roundtable_specs::digest::sha256_hex(b"# Project\n"));
    assert!(provided.files.iter().find(|f| f.path == "docs/script.sh").is_some_and(|f| !f.executable));
    let mode = std::fs::metadata(source.join("README.md")).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "readable by the agent's UID");
}

#[test]
fn provisioning_fails_closed() {
    let repo = repo();
    let commit = provision::resolve(repo.path(), "HEAD").expect("resolve");
    let dest = tempfile::tempdir().expect("tempdir");
    let only_secrets = provision::export(repo.path(), &commit, &["docs/.env".into()], &dest.path().join("a"));
    assert!(matches!(only_secrets, Err(ProvisionError::EmptyScope)), "{only_secrets:?}");
    let missing = provision::export(repo.path(), &commit, &["nope/".into()], &dest.path().join("b"));
    assert!(matches!(missing, Err(ProvisionError::PathNotFound { .. })), "{missing:?}");
    assert!(matches!(provision::resolve(repo.path(), "no-such-branch"), Err(ProvisionError::Revision { .. })));
    let nested = repo.path().join("docs");
    assert!(matches!(provision::resolve(&nested, "HEAD"), Err(ProvisionError::NotWorkTreeTop { .. })));
}

#[test]
fn patches_apply_to_the_base_and_reproduce_the_export() {
    let repo = repo();
    let commit = provision::resolve(repo.path(), "main").expect("resolve");
    let work = tempfile::tempdir().expect("tempdir");
    let source = work.path().join("source");
    provision::export(repo.path(), &commit, &["README.md".into(), "docs/".into()], &source).expect("export");
    // The "agent's" result: an edit, a binary file, a deletion, a rename and a mode change.
    let export = work.path().join("export");
    Command::new("cp").args(["-a"]).arg(&source).arg(&export).status().expect("cp");
    write(&export, "README.md", b"# Project\n\nEdited by the agent.\n");
    write(&export, "docs/logo.bin", &[0u8, 159, 146, 150, 255, 0, 1, 2, 3]);
    std::fs::remove_file(export.join("docs/remove-me.md")).expect("rm");
    std::fs::rename(export.join("docs/old-name.md"), export.join("docs/new-name.md")).expect("mv");
    std::fs::set_permissions(export.join("docs/script.sh"), std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let patch = patch::diff(&work.path().join("scratch"), &source, &export).expect("diff");
    let text = String::from_utf8_lossy(&patch.text);
    assert!(text.contains("rename from docs/old-name.md") && text.contains("rename to docs/new-name.md"), "{text}");
    assert!(text.contains("deleted file mode 100644") && text.contains("GIT binary patch"), "{text}");
    assert!(text.contains("old mode 100644\nnew mode 100755"), "{text}");
    assert_eq!(patch.files_changed, 5);
    assert_eq!(patch.sha256, roundtable_specs::digest::sha256_hex(&patch.text));
    patch::verify(repo.path(), &commit, &patch, &export, &work.path().join("verify")).expect("applies and reproduces");

    // An unchanged export gives an empty patch.
    let same = patch::diff(&work.path().join("scratch2"), &source, &source).expect("diff");
    assert!(same.is_empty());
}
