//! Provisioning and patches against real git repositories: exact scope, sensitive files withheld,
//! a manifest of what was provided, and patches that apply to the base commit and reproduce the
//! export byte for byte (binary file, deletion, rename, mode change).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use common::git;
use roundtable_workspace::patch;
use roundtable_workspace::provision::{self, ProvisionError};

mod common;

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

/// Every regular file below `dir`, with its bytes, by path.
fn tree_bytes(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).expect("read_dir").flatten() {
            let path = entry.path();
            if entry.file_type().expect("type").is_dir() {
                if entry.file_name() != ".git" {
                    pending.push(path);
                }
            } else {
                let relative = path.strip_prefix(dir).expect("below").display().to_string();
                files.insert(relative, std::fs::read(&path).expect("read"));
            }
        }
    }
    files
}

/// Regression: the patch passed through a lossy UTF-8 conversion, so a change to a Latin-1 file
/// or deleting a binary file without NUL bytes failed the session with "patch does not apply".
#[test]
fn bytes_are_bytes_through_the_patch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    write(root, "latin1.txt", b"caf\xe9\nna\xefve\n");
    write(root, "noise.bin", &[0xff, 0xfe, 0x80, 0x81, 0x0a, 0xc3, 0x28, 0x0a]);
    write(root, "crlf.txt", b"one\r\ntwo\r\nthree\r\n");
    write(root, "no-newline.txt", b"first\nlast");
    write(root, "loses-newline.txt", b"keep\n");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "base"]);
    let commit = provision::resolve(root, "main").expect("resolve");
    let work = tempfile::tempdir().expect("tempdir");
    let source = work.path().join("source");
    provision::export(root, &commit, &[".".into()], &source).expect("export");
    let export = work.path().join("export");
    Command::new("cp").args(["-a"]).arg(&source).arg(&export).status().expect("cp");
    write(&export, "latin1.txt", b"caf\xe9 cr\xe8me\nna\xefve\n");
    std::fs::remove_file(export.join("noise.bin")).expect("rm");
    write(&export, "crlf.txt", b"one\r\nTWO\r\nthree\r\n");
    write(&export, "no-newline.txt", b"first\nlast\nand more");
    write(&export, "loses-newline.txt", b"keep");
    write(&export, "new-latin1.txt", b"\xe0 la carte\n");

    let patch = patch::diff(&work.path().join("scratch"), &source, &export).expect("diff");
    assert!(patch.text.windows(2).any(|w| w == b"\xe8m"), "the Latin-1 bytes are in the patch unchanged");
    assert!(patch.text.windows(b"\\ No newline at end of file".len()).any(|w| w == b"\\ No newline at end of file"));
    patch::verify(root, &commit, &patch, &export, &work.path().join("verify")).expect("applies and reproduces");

    // Applied with plain git to a clone at the base, the tree is the agent's, byte for byte.
    let clone = work.path().join("clone");
    let status = Command::new("git").args(["clone", "-q"]).arg(root).arg(&clone).status().expect("clone");
    assert!(status.success());
    let patch_file = work.path().join("p.patch");
    std::fs::write(&patch_file, &patch.text).expect("write");
    git(&clone, &["apply", "--binary", patch_file.to_str().expect("utf-8")]);
    assert_eq!(tree_bytes(&clone), tree_bytes(&export));
}

/// Regression: a non-UTF-8 tracked name reached the agent under another name and came back
/// rejected, so every proposal deleted it. Such names are withheld and stay unchanged.
#[test]
fn names_the_way_back_cannot_carry_are_withheld_not_renamed() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    write(root, "README.md", b"# x\n");
    std::fs::write(root.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), b"latin-1 name\n").expect("write");
    std::fs::write(root.join("tab\there.txt"), b"control character\n").expect("write");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "base"]);
    let commit = provision::resolve(root, "main").expect("resolve");
    let work = tempfile::tempdir().expect("tempdir");
    let source = work.path().join("source");
    let provided = provision::export(root, &commit, &[".".into()], &source).expect("export");
    let given: Vec<&str> = provided.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(given, ["README.md"]);
    let withheld: Vec<&str> = provided.withheld.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(withheld, ["caf\\x{e9}.txt", "tab\\u{9}here.txt"]);
    assert!(provided.withheld.iter().all(|w| w.reason.contains("proposals leave it unchanged")));
    assert_eq!(std::fs::read_dir(&source).expect("read").count(), 1, "nothing under another name");

    // The agent edits README.md; the patch touches nothing else and applies to the base.
    let export = work.path().join("export");
    Command::new("cp").args(["-a"]).arg(&source).arg(&export).status().expect("cp");
    write(&export, "README.md", b"# x\nedited\n");
    let patch = patch::diff(&work.path().join("scratch"), &source, &export).expect("diff");
    assert_eq!(patch.paths, ["README.md"]);
    patch::verify(root, &commit, &patch, &export, &work.path().join("verify")).expect("applies");
}

/// The reference: git's own diff between the whole of both folders, each staged in full (what
/// `patch::diff` did before it handed git only the changed files).
fn whole_folder_diff(base: &Path, export: &Path) -> Vec<u8> {
    let scratch = tempfile::tempdir().expect("tempdir");
    let git_dir = scratch.path().join("ref.git");
    let run = |work_tree: Option<&Path>, index: &str, args: &[&str]| {
        let mut command = Command::new("git");
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_INDEX_FILE", scratch.path().join(index))
            .arg(format!("--git-dir={}", git_dir.display()));
        if let Some(tree) = work_tree {
            command.arg(format!("--work-tree={}", tree.display()));
        }
        let output = command.args(args).output().expect("git");
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        output.stdout
    };
    let init = git_dir.display().to_string();
    run(None, "unused", &["init", "-q", "--bare", &init]);
    let mut trees = Vec::new();
    for (folder, index) in [(base, "before"), (export, "after")] {
        run(Some(folder), index, &["add", "--all", "--force", "."]);
        trees.push(String::from_utf8(run(None, index, &["write-tree"])).expect("id").trim().to_owned());
    }
    let flags = ["--binary", "--no-ext-diff", "--no-textconv", "--no-color", "--find-renames", "--full-index"];
    let mut args = vec!["diff"];
    args.extend(flags);
    args.extend(trees.iter().map(String::as_str));
    run(None, "unused", &args)
}

/// A base folder of text and binary files, in several folders.
fn many_files(root: &Path) {
    for i in 0..60 {
        write(root, &format!("src/m{}/file{i:02}.txt", i % 4), format!("line one of {i}\nline two\n").as_bytes());
        let binary: Vec<u8> = (0..4000u32).map(|n| ((n * 7 + i) % 256) as u8).collect();
        write(root, &format!("assets/blob{i:02}.bin"), &binary);
    }
    write(root, "tool.sh", b"#!/bin/sh\necho tool\n");
}

/// Only the changed files reach git, possibly in several diffs at once; the patch must still be
/// byte for byte git's diff of the whole folders, with renames and without.
#[test]
fn the_patch_is_gits_diff_of_the_whole_folders() {
    let work = tempfile::tempdir().expect("tempdir");
    let base = work.path().join("base");
    many_files(&base);

    // Edits only (nothing can pair as a rename): the diff may be split.
    let edits = work.path().join("edits");
    Command::new("cp").args(["-a"]).arg(&base).arg(&edits).status().expect("cp");
    for i in (0..60).step_by(3) {
        write(&edits, &format!("src/m{}/file{i:02}.txt", i % 4), format!("line one of {i}\nchanged\n").as_bytes());
        let mut binary = std::fs::read(edits.join(format!("assets/blob{i:02}.bin"))).expect("read");
        binary.extend_from_slice(b"\x00\xffappended");
        write(&edits, &format!("assets/blob{i:02}.bin"), &binary);
    }
    std::fs::set_permissions(edits.join("tool.sh"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // Same bytes written again: unchanged.
    write(&edits, "src/m1/file01.txt", b"line one of 1\nline two\n");

    // Renames, deletions, additions and a file replaced by a folder: one diff.
    let moves = work.path().join("moves");
    Command::new("cp").args(["-a"]).arg(&edits).arg(&moves).status().expect("cp");
    std::fs::rename(moves.join("src/m0/file00.txt"), moves.join("src/renamed.txt")).expect("mv");
    std::fs::create_dir_all(moves.join("assets/moved")).expect("mkdir");
    std::fs::rename(moves.join("assets/blob01.bin"), moves.join("assets/moved/blob01.bin")).expect("mv");
    std::fs::remove_file(moves.join("src/m2/file02.txt")).expect("rm");
    std::fs::remove_file(moves.join("tool.sh")).expect("rm");
    write(&moves, "tool.sh/inside.txt", b"a folder where a file was\n");
    write(&moves, "new/latin1.txt", b"caf\xe9\n");

    for (name, export, files) in [("edits", &edits, 41), ("moves", &moves, 45)] {
        let patch = patch::diff(&work.path().join(format!("scratch-{name}")), &base, export).expect("diff");
        assert_eq!(patch.text, whole_folder_diff(&base, export), "{name}: {}", String::from_utf8_lossy(&patch.text));
        assert_eq!(patch.files_changed, files, "{name}: {:?}", patch.paths);
    }
    assert!(patch::diff(&work.path().join("scratch-same"), &base, &base).expect("diff").is_empty());
}

/// The check is real: an export that no longer matches the patch (content or executable bit),
/// or a patch that does not apply to the base commit, fails it.
#[test]
fn verification_fails_when_the_patch_does_not_reproduce_the_export() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("repo");
    many_files(&root);
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    let commit = provision::resolve(&root, "main").expect("resolve");
    let work = dir.path().join("work");
    let source = work.join("source");
    provision::export(&root, &commit, &[".".into()], &source).expect("export");
    let export = work.join("export");
    Command::new("cp").args(["-a"]).arg(&source).arg(&export).status().expect("cp");
    write(&export, "src/m0/file00.txt", b"edited\n");
    write(&export, "assets/blob03.bin", b"\x00\x01 now tiny");
    std::fs::remove_file(export.join("tool.sh")).expect("rm");
    write(&export, "tool.sh/inside.txt", b"a folder where a file was\n");
    let made = patch::diff(&work.join("scratch"), &source, &export).expect("diff");
    patch::verify(&root, &commit, &made, &export, &work.join("ok")).expect("reproduces the export");

    write(&export, "assets/blob03.bin", b"\x00\x01 changed after the diff");
    let error = patch::verify(&root, &commit, &made, &export, &work.join("content")).expect_err("content differs");
    assert!(matches!(&error, patch::PatchError::Mismatch { path, .. } if path == "assets/blob03.bin"), "{error}");
    write(&export, "assets/blob03.bin", b"\x00\x01 now tiny");

    std::fs::set_permissions(export.join("src/m0/file00.txt"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let error = patch::verify(&root, &commit, &made, &export, &work.join("mode")).expect_err("mode differs");
    assert!(matches!(&error, patch::PatchError::Mismatch { path, .. } if path == "src/m0/file00.txt"), "{error}");
    std::fs::set_permissions(export.join("src/m0/file00.txt"), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    patch::verify(&root, &commit, &made, &export, &work.join("again")).expect("reproduces the export again");

    // A patch made against a base that is not the commit's does not apply to it.
    write(&source, "src/m0/file00.txt", b"not what the commit holds\n");
    let stale = patch::diff(&work.join("scratch-stale"), &source, &export).expect("diff");
    let error = patch::verify(&root, &commit, &stale, &export, &work.join("stale")).expect_err("does not apply");
    assert!(matches!(&error, patch::PatchError::Git(failure) if failure.args.contains("apply")), "{error}");
}
