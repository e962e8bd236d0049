//! Hostile tests of protected paths: a proposal that changes CI through a file the old list
//! missed (a local composite action, another CI system's file, a CODEOWNERS in `docs/`), or
//! names a protected file in another case (`.VSCode/tasks.json`, `.GITATTRIBUTES`: the same
//! files on the case-insensitive checkouts where reviewers open branches), is flagged
//! `protectedPath`, so the `protectedPaths` gate holds it for review.

use roundtable_execution::proposal_flags;
use roundtable_specs::session::ProposalFlagKind;

/// What an agent writes to run code in CI, or in a reviewer's editor, without a review.
const ATTACKS: [&str; 10] = [
    ".github/actions/x/action.yml",
    ".gitlab-ci.yml",
    "Jenkinsfile",
    "docs/CODEOWNERS",
    ".VSCode/tasks.json",
    ".GITATTRIBUTES",
    ".circleci/config.yml",
    "services/api/azure-pipelines.yml",
    ".vscode\\tasks.json",
    ".gitattributes.",
];

#[test]
fn ci_files_of_every_system_and_protected_names_in_any_case_are_flagged() {
    let paths: Vec<String> = ATTACKS.map(String::from).into();
    // Everything is readable: only the protected-path rule can flag them.
    let flags = proposal_flags(&paths, &[".".to_owned()]);
    let flagged: Vec<&str> =
        flags.iter().filter(|f| f.kind == ProposalFlagKind::ProtectedPath).map(|f| f.path.as_str()).collect();
    assert_eq!(flagged, ATTACKS, "each is flagged protectedPath: {flags:?}");
    assert!(flags.iter().all(|f| f.kind == ProposalFlagKind::ProtectedPath), "{flags:?}");
    // Ordinary files stay unflagged: the rule is not "flag everything".
    let ordinary: Vec<String> = ["README.md", "docs/github-actions.md", "src/jenkins.rs", "x/.github/workflows/ci.yml"]
        .map(String::from)
        .into();
    assert!(proposal_flags(&ordinary, &[".".to_owned()]).is_empty());
}

/// Hostile pass B7: files that make a tool run repository code or fetch another toolchain with
/// no prompt (Yarn's `yarnPath`, mise and asdf, rustup, the Gradle and Maven wrappers, Bazel's
/// flags, Git LFS's server, pytest's `conftest.py`), and NTFS 8.3 short names a Windows checkout
/// resolves to `.vscode/`, `.github/` or `.gitattributes`, were not flagged.
const TOOLCHAIN_ATTACKS: [&str; 18] = [
    "VSCODE~1/tasks.json",
    "GITHUB~1/workflows/ci.yml",
    "GITATT~1",
    ".yarnrc.yml",
    ".yarnrc",
    "mise.toml",
    ".mise.toml",
    ".tool-versions",
    "rust-toolchain.toml",
    "rust-toolchain",
    "gradle/wrapper/gradle-wrapper.properties",
    ".mvn/extensions.xml",
    ".mvn/wrapper/maven-wrapper.properties",
    ".lfsconfig",
    ".bazelrc",
    "conftest.py",
    "tests/unit/conftest.py",
    "web/.yarnrc.yml",
];

#[test]
fn toolchain_files_test_configuration_and_ntfs_short_names_are_flagged() {
    let paths: Vec<String> = TOOLCHAIN_ATTACKS.map(String::from).into();
    let flags = proposal_flags(&paths, &[".".to_owned()]);
    let flagged: Vec<&str> =
        flags.iter().filter(|f| f.kind == ProposalFlagKind::ProtectedPath).map(|f| f.path.as_str()).collect();
    assert_eq!(flagged, TOOLCHAIN_ATTACKS, "each is flagged protectedPath: {flags:?}");
    let ordinary: Vec<String> =
        ["docs/mise.md", "src/gradle/wrapper.rs", "notes~draft.md", "backup~1.json.bak"].map(String::from).into();
    assert!(proposal_flags(&ordinary, &[".".to_owned()]).is_empty());
}

/// The same on the real engine: an agent that adds a local composite action and a folder-open
/// task under `.VSCode/` gets a proposal flagged for both, and accept holds it for review.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_composite_action_and_uppercase_editor_task_are_held_for_review() {
    use std::time::Duration;

    use crate::support::{
        ShowLogOnPanic, engine_or_skip, ensure_test_images, git, json, nothing_left, one_assignment_project,
        roundtable, start_daemon, stderr, stdout, wait_until_within,
    };

    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let prompt = "mkdir -p .github/actions/x .VSCode && echo runs > .github/actions/x/action.yml && echo tasks > .VSCode/tasks.json";
    let dir = one_assignment_project("ci", prompt);
    let root = dir.path();
    git(root, &["config", "user.name", "Olive Operator"]);
    git(root, &["config", "user.email", "olive@example.test"]);
    let executions = tempfile::tempdir().expect("tempdir");
    let _show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let daemon = start_daemon(root, &[], executions.path());
    let proposal = || {
        let listed = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
        listed["items"].as_array().and_then(|items| items.first().cloned())
    };
    wait_until_within("a proposal", Duration::from_secs(120), || proposal().is_some()).await;
    drop(daemon);
    nothing_left(&engine, root).await;
    std::fs::copy(executions.path().join("audit.key"), root.join(".test-audit.key")).expect("the audit key");

    let proposal = proposal().expect("the proposal");
    let flags: Vec<&str> = proposal["flags"].as_array().into_iter().flatten().filter_map(|f| f.as_str()).collect();
    for path in [".github/actions/x/action.yml", ".VSCode/tasks.json"] {
        assert!(flags.contains(&format!("protectedPath: {path}").as_str()), "{path} in {flags:?}");
    }
    let id = proposal["id"].as_str().expect("id");
    let refused = roundtable(root, &["proposals", "accept", id]);
    assert_eq!(refused.status.code(), Some(1), "{}{}", stdout(&refused), stderr(&refused));
    for path in [".github/actions/x/action.yml", ".VSCode/tasks.json"] {
        let finding = format!("protectedPaths: protected-path at {path} (needs --override protectedPaths");
        assert!(stderr(&refused).contains(&finding), "{}", stderr(&refused));
    }
    assert!(git(root, &["branch", "--list", "roundtable/*"]).is_empty(), "no branch for a held proposal");
}
