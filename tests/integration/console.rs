//! The review console in a real browser (docs/console.md): Debian's chromium and chromedriver,
//! driven by Selenium from PyPI (`tests/console/browser.py`), against a daemon on the real engine.
//! The browser logs in, watches a running session's live tail, sees a spec edit turn Synced,
//! reads a proposal's findings with a bidi file name escaped, reads another as a reviewer does
//! (files and counts first, lines numbered on both sides and one line high, a finding at its line,
//! a rename found, whitespace ignored, split, a file folded), accepts the first with the reason its
//! gate asks for, has forged POSTs refused, verifies the audit chain, finds every page behind the
//! login without the cookie, and rejects another proposal with JavaScript off. This side then
//! checks the branch's tree and the recorded decisions. Screenshots are kept in
//! `target/console-artifacts/`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::delivery::{assert_tree_is_base_plus_patch, commit_as_operator, proposal_of};
use crate::support::{
    API, ShowLogOnPanic, engine_or_skip, ensure_test_images, git, json, nothing_left, repo_root, roundtable,
    start_daemon, stderr, stdout, wait_until_within, write,
};

/// Whether the browser, its driver and Selenium are here; CI requires them.
fn browser_or_skip() -> bool {
    let found = Path::new("/usr/bin/chromium").exists()
        && Path::new("/usr/bin/chromedriver").exists()
        && Command::new("python3").args(["-c", "import selenium"]).output().is_ok_and(|out| out.status.success());
    crate::support::present_or_skip(
        found,
        "ROUNDTABLE_REQUIRE_BROWSER",
        "chromium, chromium-driver or selenium",
        "apt-get install chromium chromium-driver; pip install selenium",
    )
}

/// `reviewed` adds a CI workflow (a protected path: an override with a reason is asked for) and
/// a file whose name holds a bidi control; `plain` re-indents and appends a line, moves a file and
/// adds one with a secret-shaped line; `ticking` prints a line a second until it is stopped (the
/// live tail).
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let reviewed = r#"mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml && echo x > "$(printf 'evil\342\200\256gpj.md')""#;
    // Long enough to outlast a slow browser start; the daemon's shutdown cancels it.
    let ticking = "for i in $(seq 1 600); do echo tick $i; sleep 1; done";
    write(root, "notes.txt", &(1..=12).map(|n| format!("note {n}\n")).collect::<String>());
    // What a reviewer reads line by line: a line re-indented and one added, a file moved as it
    // is, a new file whose third line is shaped like an AWS key (the secrets gate's finding).
    let plain = "sed -i 's/^# Project$/#   Project/' README.md && echo plain >> README.md && mv notes.txt moved.txt && printf 'one\\ntwo\\naws_access_key_id = AKIAIOSFODNN7EXAMPLF\\n' > config.txt";
    let assignment = |name: &str, prompt: &str, readable: &str| {
        format!(
            "---\n{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: generic\n  task: {{id: T-{name}, prompt: {}}}\n  readablePaths: [{readable}]\n",
            serde_json::to_string(prompt).expect("json")
        )
    };
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n{}{}{}",
        assignment("reviewed", reviewed, "README.md"),
        assignment("plain", plain, "README.md, notes.txt"),
        assignment("ticking", ticking, "README.md"),
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_as_operator(root);
    dir
}

fn running(root: &Path, assignment: &str) -> bool {
    let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    listed["items"].as_array().into_iter().flatten().any(|s| s["assignment"] == assignment && s["phase"] == "Running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_console_in_a_real_browser() {
    let Some(engine) = engine_or_skip().await else { return };
    if !browser_or_skip() {
        return;
    }
    ensure_test_images();
    let dir = project();
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let _show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    // A short grace: at the end, shutdown cancels the ticking session and removes its container.
    let daemon = start_daemon(root, &["--grace", "1s"], executions.path());
    wait_until_within("two proposals and a ticking session", Duration::from_secs(120), || {
        proposal_of(root, "reviewed").is_some() && proposal_of(root, "plain").is_some() && running(root, "ticking")
    })
    .await;
    let state = root.join(".roundtable/state");
    let address = std::fs::read_to_string(state.join("api-address")).expect("the API's address");
    let said = std::fs::read_to_string(executions.path().join("daemon.log")).unwrap_or_default();
    let url = format!("the review console is at http://{}/ui/", address.trim());
    assert!(said.contains(&url), "start says where the console is: {said}");
    let id = |name: &str| proposal_of(root, name).expect("proposal")["id"].as_str().expect("id").to_owned();
    let (reviewed, plain) = (id("reviewed"), id("plain"));
    let artifacts = repo_root().join("target/console-artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts");

    // The browser's own temporary files stay with the test.
    let browser_tmp = tempfile::tempdir().expect("tempdir");
    let browsed = Command::new("python3")
        .arg(repo_root().join("tests/console/browser.py"))
        .env("CONSOLE_URL", format!("http://{}", address.trim()))
        .env("CONSOLE_TOKEN_FILE", state.join("api-token"))
        .env("SPECS_FILE", root.join(".roundtable/specs.yaml"))
        .env("ARTIFACTS", &artifacts)
        .env("REVIEWED_PROPOSAL", &reviewed)
        .env("REJECTED_PROPOSAL", &plain)
        .env("TICKING_ASSIGNMENT", "ticking")
        .env("TMPDIR", browser_tmp.path())
        .output()
        .expect("python3");
    assert!(browsed.status.success(), "the browser test failed:\n{}{}", stdout(&browsed), stderr(&browsed));
    let done: Value = serde_json::from_str(stdout(&browsed).trim()).expect("the browser's report");
    assert!(done["liveTail"].as_u64().is_some_and(|n| n > 0), "{done}");

    // What the browser did is what the store and git say.
    let accepted = proposal_of(root, "reviewed").expect("reviewed");
    assert_eq!(accepted["state"], "accepted", "{accepted:#}");
    let commit = accepted["decision"]["commit"].as_str().expect("commit").to_owned();
    assert_eq!(git(root, &["rev-parse", &format!("refs/heads/roundtable/reviewed/{reviewed}")]), commit);
    assert_tree_is_base_plus_patch(root, &reviewed, &commit);
    let body = git(root, &["log", "-1", "--format=%B", &commit]);
    assert!(body.contains("Roundtable-Override: protectedPaths: CI change reviewed in the browser"), "{body}");
    let rejected = proposal_of(root, "plain").expect("plain");
    assert_eq!((rejected["state"].as_str(), rejected["decision"]["by"].as_str()), (Some("rejected"), Some("console")));
    assert_eq!(rejected["decision"]["reason"], "not this one");
    let page = &done["proposalPage"];
    assert_eq!(page["files"]["notes.txt \u{2192} moved.txt"][0], "renamed", "{done}");
    for shot in
        ["status.png", "proposal.png", "proposal-full.png", "proposal-split.png", "session.png", "status-narrow.png"]
    {
        let size = std::fs::metadata(artifacts.join(shot)).map(|m| m.len()).unwrap_or(0);
        assert!(size > 1000, "the screenshot {shot} was saved ({size} bytes)");
    }

    drop(daemon);
    nothing_left(&engine, root).await;
}
