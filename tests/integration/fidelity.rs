//! Proposals you can trust, on the real engine: a pending proposal is exactly what the agent did
//! minus what was refused, and every refusal is visible. Each agent below tries one thing a
//! hostile tester tried; each proposal is exported, applied with plain `git apply` to a clone at
//! the base commit, and the resulting tree is compared byte for byte with what the agent left
//! (minus what was listed as refused).

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::{
    API, ShowLogOnPanic, commit_all, ensure_test_images, json, nothing_left, roundtable, session_phases,
    start_daemon_with_env, stdout, wait_until_within, write,
};

/// Every regular file below `dir` (`.git` excluded), by path bytes.
fn tree(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).expect("read_dir").flatten() {
            let path = entry.path();
            if entry.file_type().expect("type").is_dir() {
                if entry.file_name() != ".git" {
                    pending.push(path);
                }
            } else {
                let relative = path.strip_prefix(dir).expect("below").as_os_str().as_bytes().to_vec();
                files.insert(relative, std::fs::read(&path).expect("read"));
            }
        }
    }
    files
}

fn agent(name: &str, script: &str) -> String {
    format!(
        "{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: generic\n  task:\n    id: {name}\n    prompt: |\n      {script}\n  readablePaths: [README.md, docs/]\n---\n"
    )
}

/// The base repository every agent starts from.
fn base(root: &Path) {
    write(root, "README.md", "# Project\n");
    write(root, "docs/guide.md", "a guide\n");
    write(root, "docs/.env", "TOKEN=base-secret\n");
    write(root, "src/main.rs", "fn main() {}\n");
    std::fs::write(root.join("docs/latin1.txt"), b"caf\xe9\n").expect("latin-1");
    std::fs::write(root.join(std::ffi::OsStr::from_bytes(b"docs/caf\xe9.txt")), b"a Latin-1 name\n").expect("name");
}

/// The proposal of `assignment`, if any.
fn proposal(root: &Path, assignment: &str) -> Option<Value> {
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    proposals["items"].as_array()?.iter().find(|p| p["assignment"] == assignment).cloned()
}

/// Applies `assignment`'s exported proposal to a fresh clone at the base; the resulting tree.
fn applied(root: &Path, assignment: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let proposal = proposal(root, assignment).unwrap_or_else(|| panic!("{assignment} has no proposal"));
    let exported = roundtable(root, &["proposals", "export", proposal["id"].as_str().expect("id")]);
    assert!(exported.status.success(), "export {assignment}");
    let work = tempfile::tempdir().expect("tempdir");
    let clone = work.path().join("clone");
    assert!(Command::new("git").args(["clone", "-q"]).arg(root).arg(&clone).status().expect("clone").success());
    let patch = work.path().join("p.patch");
    std::fs::write(&patch, &exported.stdout).expect("write patch");
    let status =
        Command::new("git").args(["apply", "--binary"]).arg(&patch).current_dir(&clone).status().expect("apply");
    assert!(status.success(), "the exported patch of {assignment} applies to the base");
    tree(&clone)
}

/// The base tree with `changes` (path → new bytes, or `None` for deleted).
fn expected(root: &Path, changes: &[(&[u8], Option<&[u8]>)]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut files = tree(root);
    // The state directory is ignored by git: never in a clone.
    files.retain(|path, _| !path.starts_with(b".roundtable/state"));
    for (path, bytes) in changes {
        match bytes {
            Some(bytes) => files.insert(path.to_vec(), bytes.to_vec()),
            None => files.remove(*path),
        };
    }
    files
}

/// Asserts two trees are equal, naming the paths that differ.
#[track_caller]
fn assert_same(what: &str, got: &BTreeMap<Vec<u8>, Vec<u8>>, want: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let differing: Vec<String> = got
        .keys()
        .chain(want.keys())
        .filter(|path| got.get(*path) != want.get(*path))
        .map(|path| {
            let show = |bytes: Option<&Vec<u8>>| bytes.map(|b| String::from_utf8_lossy(b).into_owned());
            format!("{}: got {:?}, want {:?}", String::from_utf8_lossy(path), show(got.get(path)), show(want.get(path)))
        })
        .collect();
    assert!(differing.is_empty(), "{what}: the applied proposal differs from the agent's tree: {differing:#?}");
}

fn flags(proposal: &Value) -> Vec<String> {
    proposal["flags"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_are_what_the_agent_did_minus_what_was_refused() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    agents_and_their_proposals(&engine, &[], "runc", Deep::Refused).await;
}

/// The same agents on Debian's Podman 4.3.1, through its Docker-compatible API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_podman_proposals_are_what_the_agent_did_minus_what_was_refused() {
    let Some(podman) = crate::podman::Podman::start() else { return };
    podman.load_images();
    let engine = roundtable_docker::Engine::connect_to(podman.host()).await.expect("podman answers");
    agents_and_their_proposals(&engine, &[("DOCKER_HOST", podman.host().as_str())], "runc", Deep::ExportFails).await;
}

/// The same agents under gVisor: a private engine whose default runtime is `runsc`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_gvisor_proposals_are_what_the_agent_did_minus_what_was_refused() {
    use crate::runtime_class::{gvisor_engine_config, runsc_or_skip};
    if !runsc_or_skip() {
        return;
    }
    let config = gvisor_engine_config(Some("runsc"));
    let Some((private, engine)) = crate::private_engine::private_engine_or_skip(&config).await else { return };
    agents_and_their_proposals(&engine, &[("DOCKER_HOST", private.host().as_str())], "runsc", Deep::Refused).await;
}

/// What becomes of a path too deep for the host.
#[derive(PartialEq)]
enum Deep {
    /// The engine's archive carries it: the extractor refuses it and the rest is proposed.
    Refused,
    /// The engine's archive stops short at it (Podman's, of a paused container): the export is
    /// checked against the inventory and fails, and nothing is proposed, rather than the files
    /// it left out being proposed as deleted.
    ExportFails,
}

/// Every agent on `engine` (the daemon started with `env`), each session under `runtime`.
async fn agents_and_their_proposals(
    engine: &roundtable_docker::Engine,
    env: &[(&str, &str)],
    runtime: &str,
    deep: Deep,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    base(root);
    let mut specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n  resources: {{memory: 256Mi, cpus: 1, pids: 64, workspaceSize: 32Mi, tmpSize: 16Mi}}\n---\n"
    );
    specs.push_str(&agent("hardlink", "echo edited >> README.md; ln README.md docs/copy.md"));
    specs.push_str(&agent("symlinked", "rm docs/guide.md; ln -s /etc/passwd docs/guide.md; echo ok >> README.md"));
    specs.push_str(&agent("fifo", "rm docs/guide.md; mkfifo docs/guide.md"));
    specs.push_str(&agent(
        "gitdir",
        "mkdir -p docs/sub; printf 'gitdir: /root/.git\\n' > docs/sub/.git; echo a > docs/sub/a.txt",
    ));
    specs.push_str(&agent(
        "secret",
        "mkdir -p src; echo stolen > docs/.env; echo 'fn main() { evil() }' > src/main.rs; echo ok >> README.md",
    ));
    specs.push_str(&agent(
        "deep",
        "for i in $(seq 1 70); do mkdir aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa && cd aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; done; echo deep > f; cd /roundtable/workspace; echo ok >> README.md",
    ));
    specs.push_str(&agent("sparse", "truncate -s 200M docs/sparse.bin; echo ok >> README.md"));
    specs.push_str(&agent(
        "latin1",
        "printf 'caf\\351 cr\\350me\\n' > docs/latin1.txt; printf '\\377\\376' > docs/noise.bin",
    ));
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon_with_env(root, &["--max-executions", "3"], executions.path(), env);
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let names = ["hardlink", "symlinked", "fifo", "gitdir", "secret", "latin1", "deep", "sparse"];
    let finished = |name: &str| session_phases(root, name).first().is_some_and(|p| p == "Succeeded" || p == "Failed");
    // Eight agents through three slots on the slowest engine (Podman under gVisor in CI): the
    // claim is what they propose, not how fast.
    wait_until_within("every agent to finish", std::time::Duration::from_secs(180), || {
        names.iter().all(|name| finished(name))
    })
    .await;
    drop(daemon);
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    for session in sessions["items"].as_array().into_iter().flatten() {
        assert_eq!(session["detail"]["runtime"]["class"], runtime, "{session:#}");
    }
    let truncated = deep == Deep::ExportFails;
    for name in names.into_iter().filter(|name| *name != "sparse" && !(truncated && *name == "deep")) {
        assert_eq!(
            session_phases(root, name),
            ["Succeeded"],
            "{name}: {}",
            stdout(&roundtable(root, &["sessions", "list"]))
        );
    }

    // 1. A hard link never costs the target its content: both names carry it, flagged.
    let edited: &[u8] = b"# Project\nedited\n";
    assert_same(
        "hardlink",
        &applied(root, "hardlink"),
        &expected(root, &[(b"README.md", Some(edited)), (b"docs/copy.md", Some(edited))]),
    );
    let hardlink = proposal(root, "hardlink").expect("proposal");
    assert!(flags(&hardlink).iter().any(|f| f.starts_with("hardLink: ")), "{hardlink:#}");

    // 3. A file replaced by a symlink or a FIFO is kept unchanged, never an unflagged deletion;
    //    the refusal shows on the proposal, in JSON and in text.
    assert_same("symlinked", &applied(root, "symlinked"), &expected(root, &[(b"README.md", Some(b"# Project\nok\n"))]));
    let symlinked = proposal(root, "symlinked").expect("proposal");
    assert!(flags(&symlinked).contains(&"rejectedEntry: docs/guide.md".to_owned()), "{symlinked:#}");
    assert!(symlinked["rejected"].to_string().contains("a symbolic link"), "{symlinked:#}");
    let shown = stdout(&roundtable(root, &["proposals", "show", symlinked["id"].as_str().expect("id")]));
    assert!(shown.contains("docs/guide.md") && shown.contains("a symbolic link"), "{shown}");
    // Only a FIFO where the guide was: nothing the agent did can be carried back, and it says so.
    assert!(proposal(root, "fifo").is_none(), "nothing to propose");
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let fifo = sessions["items"].as_array().and_then(|s| s.iter().find(|s| s["assignment"] == "fifo")).expect("fifo");
    assert!(
        fifo["message"].as_str().is_some_and(|m| m.contains("nothing the agent changed could be carried back")),
        "{fifo:#}"
    );

    // 5. A .git written by the agent never points git anywhere: rejected and listed, and the
    //    files beside it are proposed.
    assert_same("gitdir", &applied(root, "gitdir"), &expected(root, &[(b"docs/sub/a.txt", Some(b"a\n"))]));
    let gitdir = proposal(root, "gitdir").expect("proposal");
    assert!(gitdir["rejected"].to_string().contains("docs/sub/.git"), "{gitdir:#}");

    // 7. Writes to files the agent was not given do not fail the session or lose the edit.
    assert_same("secret", &applied(root, "secret"), &expected(root, &[(b"README.md", Some(b"# Project\nok\n"))]));
    let secret = flags(&proposal(root, "secret").expect("proposal"));
    assert!(
        secret.contains(&"notGiven: docs/.env".to_owned()) && secret.contains(&"notGiven: src/main.rs".to_owned()),
        "{secret:?}"
    );

    // 4 and 2. Bytes are bytes (a Latin-1 edit, a binary without NUL); the tracked Latin-1 name
    //    the agent never saw is neither deleted nor renamed.
    assert_same(
        "latin1",
        &applied(root, "latin1"),
        &expected(root, &[(b"docs/latin1.txt", Some(b"caf\xe9 cr\xe8me\n")), (b"docs/noise.bin", Some(b"\xff\xfe"))]),
    );
    // 6. A path too deep for the host is refused and listed, and the rest is proposed; where the
    //    engine's archive stops short at it, the export fails and nothing is proposed.
    if truncated {
        let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
        let deep =
            sessions["items"].as_array().and_then(|s| s.iter().find(|s| s["assignment"] == "deep")).expect("deep");
        assert_eq!(
            (deep["phase"].as_str(), deep["cause"].as_str()),
            (Some("Failed"), Some("ExportFailed")),
            "{deep:#}"
        );
        assert!(deep["message"].as_str().is_some_and(|m| m.contains("the engine's export left out")), "{deep:#}");
        assert!(proposal(root, "deep").is_none(), "nothing is proposed");
    } else {
        assert_same("deep", &applied(root, "deep"), &expected(root, &[(b"README.md", Some(b"# Project\nok\n"))]));
        let deep = proposal(root, "deep").expect("proposal");
        assert!(deep["rejected"].to_string().contains("too long or too deep"), "{deep:#}");
    }

    // 8. A sparse file that is small in tmpfs is dense in the archive: the export stops at its
    //    cap, and the session keeps the agent's exit code and says why nothing is proposed.
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let sparse =
        sessions["items"].as_array().and_then(|s| s.iter().find(|s| s["assignment"] == "sparse")).expect("sparse");
    assert_eq!(
        (sparse["phase"].as_str(), sparse["cause"].as_str()),
        (Some("Failed"), Some("ExportFailed")),
        "{sparse:#}"
    );
    assert_eq!(sparse["exitCode"], 0, "{sparse:#}");
    assert!(sparse["message"].as_str().is_some_and(|m| m.contains("could not be exported")), "{sparse:#}");
    assert!(proposal(root, "sparse").is_none());
    nothing_left(engine, root).await;
}
