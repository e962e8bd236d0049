//! Hostile tests of how a repository reaches the workspace: a tree entry named `..` (written by
//! hand with git's plumbing) that provisioning joined to its destination and so wrote outside
//! it, on the host; and, under gVisor, a file whose name begins with `BZh` that made the engine
//! read the uploaded workspace archive as bzip2 (its first bytes are the first entry's name), so
//! the seed failed there while the same repository ran under runc.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::private_engine::private_engine_or_skip;
use crate::runtime_class::{gvisor_engine_config, runsc_or_skip};
use crate::support::{
    API, ShowLogOnPanic, commit_all, json, roundtable, start_daemon_with_env, wait_until_within, write,
};

/// `git` in `repo` with `input` on stdin; its trimmed stdout.
fn git(repo: &Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write as _;
    let mut child = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "h")
        .env("GIT_AUTHOR_EMAIL", "h@h")
        .env("GIT_COMMITTER_NAME", "h")
        .env("GIT_COMMITTER_EMAIL", "h@h")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git");
    child.stdin.take().expect("stdin").write_all(input).expect("write");
    let out = child.wait_with_output().expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A tree object with `entries` (mode, name, object id), written as git stores it, without the
/// checks `git mktree` makes.
fn tree(repo: &Path, entries: &[(&str, &str, &str)]) -> String {
    let mut raw = Vec::new();
    for (mode, name, id) in entries {
        raw.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        let bytes: Vec<u8> =
            (0..id.len()).step_by(2).map(|i| u8::from_str_radix(&id[i..i + 2], 16).expect("hex")).collect();
        raw.extend_from_slice(&bytes);
    }
    git(repo, &["hash-object", "-w", "--literally", "-t", "tree", "--stdin"], &raw)
}

#[test]
fn a_tree_entry_named_dot_dot_is_withheld_not_written_outside_the_destination() {
    let base = tempfile::tempdir().expect("tempdir");
    let repo = base.path().join("repo");
    std::fs::create_dir_all(&repo).expect("repo");
    git(&repo, &["init", "-q", "-b", "main"], b"");
    let readme = git(&repo, &["hash-object", "-w", "--stdin"], b"# r\n");
    let payload = git(&repo, &["hash-object", "-w", "--stdin"], b"written outside\n");
    // `../../escaped.txt` from the root: two levels of trees named `..`.
    let inner = tree(&repo, &[("100644", "escaped.txt", &payload)]);
    let middle = tree(&repo, &[("40000", "..", &inner)]);
    let root = tree(&repo, &[("40000", "..", &middle), ("100644", "README.md", &readme)]);
    let commit = git(&repo, &["commit-tree", &root, "-m", "crafted"], b"");
    let listed = git(&repo, &["ls-tree", "-r", "--name-only", &commit], b"");
    assert!(listed.contains("../../escaped.txt"), "git lists the crafted path as is: {listed}");

    let dest = base.path().join("a/b/source");
    let provided = roundtable_workspace::provision::export(&repo, &commit, &[".".into()], &dest).expect("provisions");
    let names: Vec<&str> = provided.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["README.md"], "only the plain path is provided");
    for escaped in [base.path().join("a/escaped.txt"), base.path().join("a/b/escaped.txt"), dest.join("escaped.txt")] {
        assert!(!escaped.exists(), "written outside the destination: {}", escaped.display());
    }
    let withheld = provided.withheld.iter().find(|w| w.path.contains("escaped.txt")).expect("withheld, and said");
    assert!(withheld.reason.contains("'..'"), "{withheld:?}");
}

/// A session under gVisor whose only readable file is `BZh91AY&SY.md` (bzip2's magic, then a
/// block header): the workspace arrives whole, as under runc.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_named_like_a_compression_header_seeds_under_gvisor() {
    if !runsc_or_skip() {
        return;
    }
    let Some((private, _engine)) = private_engine_or_skip(&gvisor_engine_config(None)).await else { return };
    let host = private.host();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let name = "BZh91AY&SY.md";
    write(root, name, "the only file\n");
    write(
        root,
        ".roundtable/specs.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: gvisor}}\nspec:\n  provider: generic\n  command: sh\n  args: [-c]\n  image: roundtable-test/agent:latest\n  runtimeClass: runsc\n---\n{API}\nkind: Assignment\nmetadata: {{name: magic}}\nspec:\n  adapter: gvisor\n  task: {{id: magic, prompt: 'cat \"{name}\" >> seen.txt'}}\n  readablePaths: ['{name}']\n"
        ),
    );
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let _show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let _daemon = start_daemon_with_env(root, &[], executions.path(), &[("DOCKER_HOST", host.as_str())]);
    let session = || -> Option<Value> {
        let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
        listed["items"].as_array()?.iter().find(|s| s["assignment"] == "magic" && s["finishedAt"].is_string()).cloned()
    };
    wait_until_within("the session to end", Duration::from_secs(120), || session().is_some()).await;
    let ended = session().expect("ended");
    assert_eq!(ended["phase"], "Succeeded", "{ended:#}");
    let id = ended["id"].as_str().expect("id");
    let shown = json(&roundtable(root, &["sessions", "show", id, "--format", "json"]));
    let items = shown["items"][0]["detail"]["selfCheck"]["items"].as_array().cloned().unwrap_or_default();
    let seed = items.iter().find(|i| i["name"] == "workspaceSeed").cloned().unwrap_or_default();
    assert!(seed["ok"] == true && seed["detail"].as_str().unwrap_or_default().starts_with("1 file"), "{seed:#}");
}
