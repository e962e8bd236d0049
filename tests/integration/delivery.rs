//! From proposal to branch on the real engine and real git (docs/delivery.md): an accepted
//! proposal is a commit on a new branch whose tree is the base plus the patch byte for byte,
//! made without touching the working tree, `HEAD` or the index; it is pushed to a bare repository
//! over `file://`, carries its trailers and a provenance note that our verifier and an
//! independent one (PyPI's securesystemslib) accept, and that fails after a flipped byte or with
//! another key. A proposal with secrets is refused with each finding named, and a `block` gate
//! cannot be overridden unless the policy says so; a reject is recorded. All of it is audited.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    API, ShowLogOnPanic, commit_all, engine_or_skip, ensure_test_images, git, json, nothing_left, roundtable,
    start_daemon, stderr, stdout, wait_until_within, write,
};

const LEAKY: &str = r#"printf 'aws_access_key_id = AKIAIOSFODNN7EXAMPLF\n-----BEGIN OPENSSH PRIVATE KEY-----\n' >> README.md; echo "key=$ACME_API_KEY" >> README.md; echo 'other: "beta-live-7a6b5c4d3e2f1a0b9c8d7e6f"' >> README.md"#;
const WORKFLOW: &str = "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml";
/// The value the daemon holds for the Adapter's `credentialEnv`.
const ACME_KEY: &str = "acme-live-0f1e2d3c4b5a69788796a5b4c3d2e1f0";
/// The value the daemon holds for another Adapter's `credentialEnv`, never given to the sessions
/// here; the leaky agent writes it anyway (it is in its prompt, standing for a leak from elsewhere).
const OTHER_KEY: &str = "beta-live-7a6b5c4d3e2f1a0b9c8d7e6f";

/// Three Assignments: `clean` appends a line to README.md, `leaky` appends an AWS-style key, a
/// private key's header, its `credentialEnv` variable and another Adapter's credential, `workflow`
/// adds a CI workflow.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n  credentialEnv: [ACME_API_KEY]\n---\n{API}\nkind: Adapter\nmetadata: {{name: other}}\nspec:\n  image: roundtable-test/agent:latest\n  credentialEnv: [OTHER_API_KEY]\n---\n{API}\nkind: Assignment\nmetadata: {{name: clean}}\nspec:\n  adapter: generic\n  task: {{id: T-1, title: Say hello in the README, prompt: 'echo hello from the agent >> README.md'}}\n  readablePaths: [README.md]\n---\n{API}\nkind: Assignment\nmetadata: {{name: leaky}}\nspec:\n  adapter: generic\n  task: {{id: T-2, prompt: {}}}\n  readablePaths: [README.md]\n---\n{API}\nkind: Assignment\nmetadata: {{name: workflow}}\nspec:\n  adapter: generic\n  task: {{id: T-3, prompt: {}}}\n  readablePaths: [README.md]\n",
        serde_json::to_string(LEAKY).expect("json"),
        serde_json::to_string(WORKFLOW).expect("json"),
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_as_operator(root);
    dir
}

/// Commits the project and gives its repository the operator's git identity (the committer of
/// what an accept makes).
pub(crate) fn commit_as_operator(root: &Path) {
    commit_all(root);
    git(root, &["config", "user.name", "Olive Operator"]);
    git(root, &["config", "user.email", "olive@example.test"]);
}

pub(crate) fn proposal_of(root: &Path, assignment: &str) -> Option<Value> {
    let listed = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    listed["items"].as_array()?.iter().find(|p| p["assignment"] == assignment).cloned()
}

/// `git status --porcelain` without the test's own key files (created beside the project).
fn status(root: &Path) -> String {
    git(root, &["status", "--porcelain"]).lines().filter(|l| !l.contains(".test-audit")).collect::<Vec<_>>().join("\n")
}

/// The accepted `commit`'s tree is its proposal's base plus its patch, byte for byte, as
/// `git apply` on a clone makes it.
pub(crate) fn assert_tree_is_base_plus_patch(root: &Path, id: &str, commit: &str) {
    let clone = tempfile::tempdir().expect("tempdir");
    git(clone.path(), &["clone", "-q", root.to_str().expect("utf-8"), "."]);
    git(clone.path(), &["checkout", "-q", &format!("{commit}^")]);
    let patch = roundtable(root, &["proposals", "export", id]);
    std::fs::write(clone.path().join("p.patch"), &patch.stdout).expect("patch");
    git(clone.path(), &["apply", "--index", "p.patch"]);
    assert_eq!(git(clone.path(), &["write-tree"]), git(root, &["rev-parse", &format!("{commit}^{{tree}}")]));
}

/// The independent verifier, when its package is installed (CI installs it and requires it).
fn python_verify(envelope: &Path, key: &Path) -> Option<bool> {
    let script = crate::support::repo_root().join("tests/provenance/verify_dsse.py");
    if !crate::support::python_module_or_skip("securesystemslib", "securesystemslib cryptography") {
        return None;
    }
    let out = Command::new("python3").arg(script).arg(envelope).arg(key).output().expect("python3");
    Some(out.status.success())
}

/// The project, its daemon (with its executions folder and its log shown on a panic) once both
/// proposals are made.
struct Running {
    dir: tempfile::TempDir,
    executions: tempfile::TempDir,
    daemon: crate::support::Daemon,
    _show: ShowLogOnPanic,
}

async fn run_both() -> Running {
    let dir = project();
    let executions = tempfile::tempdir().expect("tempdir");
    let show = ShowLogOnPanic(executions.path().join("daemon.log"), dir.path().to_path_buf());
    let secrets = executions.path().join("secrets.env");
    std::fs::write(&secrets, format!("ACME_API_KEY={ACME_KEY}\nOTHER_API_KEY={OTHER_KEY}\n")).expect("secrets");
    std::fs::set_permissions(&secrets, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let daemon = start_daemon(dir.path(), &["--secrets-file", secrets.to_str().expect("utf-8")], executions.path());
    let root = dir.path();
    // A proposal is recorded before the reconcile that marks its Assignment as awaiting review:
    // wait for that too, or the daemon may stop in between and leave the status one step behind.
    wait_until_within("three proposals awaiting review", Duration::from_secs(120), || {
        let rows = json(&roundtable(root, &["status", "--format", "json"]));
        ["clean", "leaky", "workflow"].iter().all(|name| {
            proposal_of(root, name).is_some()
                && rows["items"].as_array().into_iter().flatten().any(|r| {
                    r["kind"] == "Assignment"
                        && r["name"] == *name
                        && r["message"].as_str().is_some_and(|m| m.contains("awaits review"))
                })
        })
    })
    .await;
    Running { dir, executions, daemon, _show: show }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_proposal_is_a_verified_signed_branch_and_secrets_stop_one() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let Running { dir, executions, daemon, _show } = run_both().await;
    let root = dir.path();
    drop(daemon);
    nothing_left(&engine, root).await;
    // The operator's commands write the chain the daemon wrote, with its key.
    std::fs::copy(executions.path().join("audit.key"), root.join(".test-audit.key")).expect("the audit key");

    let clean = proposal_of(root, "clean").expect("clean");
    let id = clean["id"].as_str().expect("id").to_owned();
    let base = clean["baseCommit"].as_str().expect("base").to_owned();
    let head_before = git(root, &["rev-parse", "HEAD"]);
    let status_before = status(root);
    let bare = tempfile::tempdir().expect("tempdir");
    git(bare.path(), &["init", "-q", "--bare"]);
    let remote = format!("file://{}", bare.path().display());

    let accepted = roundtable(root, &["proposals", "accept", &id, "--push", &remote, "--format", "json"]);
    assert_eq!(accepted.status.code(), Some(0), "{}{}", stdout(&accepted), stderr(&accepted));
    let decision = json(&accepted);
    let commit = decision["commit"].as_str().expect("commit").to_owned();
    let branch = format!("refs/heads/roundtable/clean/{id}");
    assert_eq!(decision["branch"], branch.as_str());
    assert_eq!(git(root, &["rev-parse", &branch]), commit);
    assert_eq!(git(bare.path(), &["rev-parse", &branch]), commit, "--push landed the ref");
    assert_eq!(git(root, &["rev-parse", &format!("{commit}^")]), base, "one commit on the base");

    // The working tree, HEAD and the index are as they were.
    assert_eq!(git(root, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(status(root), status_before);

    assert_tree_is_base_plus_patch(root, &id, &commit);

    // `status` says where the review stands: accepted here, awaiting review for the other.
    let rows = json(&roundtable(root, &["status", "--format", "json"]));
    let message = |name: &str| {
        rows["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["kind"] == "Assignment" && r["name"] == name)
            .map(|r| r["message"].to_string())
    };
    assert!(message("clean").is_some_and(|m| m.contains(&format!("accepted as {commit}"))), "{rows:#}");
    assert!(message("leaky").is_some_and(|m| m.contains("awaits review")), "{rows:#}");
    let stat = stdout(&roundtable(root, &["proposals", "diff", &id, "--stat"]));
    assert!(
        stat.contains("README.md | +1 -0") && stat.contains("1 file changed, 1 insertion(+), 0 deletions(-)"),
        "{stat}"
    );

    // Author, committer and trailers.
    assert_eq!(git(root, &["log", "-1", "--format=%an <%ae>", &commit]), "generic <roundtable+generic@localhost>");
    assert_eq!(git(root, &["log", "-1", "--format=%cn <%ce>", &commit]), "Olive Operator <olive@example.test>");
    let body = git(root, &["log", "-1", "--format=%B", &commit]);
    assert!(body.starts_with("T-1: Say hello in the README"), "{body}");
    for trailer in [
        "Roundtable-Proposal: ",
        "Roundtable-Session: ",
        "Roundtable-Adapter: generic",
        "Roundtable-Image: ",
        "Roundtable-Receipt: ",
    ] {
        assert!(body.contains(trailer), "{trailer} in {body}");
    }

    // A second accept is refused; the state is recorded.
    let again = roundtable(root, &["proposals", "accept", &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("is accepted, not pending"), "{}", stderr(&again));
    let shown = json(&roundtable(root, &["proposals", "list", "--state", "accepted", "--format", "json"]));
    assert_eq!(shown["items"].as_array().map(Vec::len), Some(1));

    // Provenance: in the store and as a git note; ours and securesystemslib verify it, and
    // neither does after a flipped byte or with another key.
    let work = tempfile::tempdir().expect("tempdir");
    let envelope_path = work.path().join("envelope.json");
    let key_path = work.path().join("key.json");
    std::fs::write(&envelope_path, roundtable(root, &["proposals", "provenance", &id]).stdout).expect("envelope");
    std::fs::write(&key_path, roundtable(root, &["provenance", "key"]).stdout).expect("key");
    let note = git(root, &["notes", "--ref", "refs/notes/roundtable", "show", &commit]);
    let noted: Value = serde_json::from_str(&note).expect("the note is the envelope");
    let stored: Value = serde_json::from_slice(&std::fs::read(&envelope_path).expect("read")).expect("json");
    assert_eq!(noted, stored);
    let verify = |envelope: &Path, key: &Path| {
        roundtable(
            root,
            &["provenance", "verify", envelope.to_str().expect("utf-8"), "--public-key", key.to_str().expect("utf-8")],
        )
    };
    use base64::Engine as _;
    let payload =
        base64::engine::general_purpose::STANDARD.decode(stored["payload"].as_str().expect("payload")).expect("b64");
    let statement: Value = serde_json::from_slice(&payload).expect("the statement");
    assert_eq!(statement["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(statement["subject"][0]["digest"]["gitCommit"], commit.as_str());
    assert_eq!(statement["predicate"]["baseCommit"], base.as_str());
    let (first, last) =
        (&statement["predicate"]["auditSequence"]["first"], &statement["predicate"]["auditSequence"]["last"]);
    assert!(first.as_i64().is_some_and(|f| f > 0 && last.as_i64().is_some_and(|l| l >= f)), "{statement:#}");
    // What the spawn gate saw, kept on the session: the image by ID and the contract's hash.
    let admitted = &statement["predicate"]["admittedUnder"];
    assert!(admitted["imageId"].as_str().is_some_and(|id| id.starts_with("sha256:")), "{statement:#}");
    assert_eq!(statement["predicate"]["image"], admitted["imageId"], "the image the run used, by ID");
    assert_eq!(admitted["contractHash"].as_str().map(str::len), Some(64), "{statement:#}");
    assert!(body.contains(&format!("Roundtable-Image: {}", admitted["imageId"].as_str().unwrap_or("?"))), "{body}");
    let verified = verify(&envelope_path, &key_path);
    assert_eq!(verified.status.code(), Some(0), "{}{}", stdout(&verified), stderr(&verified));
    assert!(stdout(&verified).contains(&commit), "{}", stdout(&verified));
    assert!(python_verify(&envelope_path, &key_path).unwrap_or(true), "securesystemslib verifies it");

    let mut flipped = stored.clone();
    let payload = flipped["payload"].as_str().expect("payload").to_owned();
    let swapped = if payload.starts_with('e') { payload.replacen('e', "f", 1) } else { format!("e{}", &payload[1..]) };
    flipped["payload"] = Value::String(swapped);
    let flipped_path = work.path().join("flipped.json");
    std::fs::write(&flipped_path, flipped.to_string()).expect("flipped");
    assert_eq!(verify(&flipped_path, &key_path).status.code(), Some(1));
    assert!(!python_verify(&flipped_path, &key_path).unwrap_or(false), "securesystemslib refuses a flipped byte");
    let other = tempfile::tempdir().expect("tempdir");
    let other_key = Command::new(crate::support::binary())
        .args(["provenance", "key"])
        .current_dir(root)
        .env("ROUNDTABLE_AUDIT_KEY", other.path().join("other.key"))
        .output()
        .expect("another key");
    let other_path = work.path().join("other.json");
    std::fs::write(&other_path, &other_key.stdout).expect("other key");
    assert_eq!(verify(&envelope_path, &other_path).status.code(), Some(1));
    assert!(!python_verify(&envelope_path, &other_path).unwrap_or(false), "securesystemslib refuses another key");

    // Secrets: shown first, refused with each finding named; `block` is not overridable by default.
    let leaky = proposal_of(root, "leaky").expect("leaky")["id"].as_str().expect("id").to_owned();
    let shown = stdout(&roundtable(root, &["proposals", "show", &leaky]));
    let finding = shown.find("Finding:     secrets: aws-access-key at README.md:2").expect("the finding is shown");
    assert!(finding < shown.find("diff --git").expect("the diff"), "findings come before the diff: {shown}");
    let refused = roundtable(root, &["proposals", "accept", &leaky]);
    assert_eq!(refused.status.code(), Some(1));
    let said = stderr(&refused);
    assert!(said.contains("secrets: aws-access-key at README.md:2 (blocks)"), "{said}");
    assert!(said.contains("secrets: private-key at README.md:3 (blocks)"), "{said}");
    // The agent held a placeholder for its credential and wrote it down: the daemon's canary
    // flag and the placeholder rule both name it.
    assert!(said.contains("secrets: credential-value at README.md (blocks)"), "{said}");
    assert!(said.contains("secrets: roundtable-placeholder at README.md:4 (blocks)"), "{said}");
    // Another Adapter's credential, which this session never held, is found at accept by its
    // keyed hash: the accepting process does not hold the value.
    assert!(said.contains("secrets: credential-value (OTHER_API_KEY) at README.md:5 (blocks)"), "{said}");
    assert!(!said.contains(ACME_KEY) && !said.contains(OTHER_KEY), "a finding never carries the value");
    let overridden =
        roundtable(root, &["proposals", "accept", &leaky, "--override", "secrets", "--reason", "test keys"]);
    assert_eq!(overridden.status.code(), Some(1));
    assert!(stderr(&overridden).contains("does not allow overriding secrets"), "{}", stderr(&overridden));
    assert!(git(root, &["branch", "--list", "roundtable/leaky/*"]).is_empty(), "no branch for a refused accept");

    // A policy that allows the override lets a reasoned accept through, the reason on the commit.
    write(
        root,
        ".roundtable/policy.yaml",
        &format!(
            "{API}\nkind: AdmissionPolicy\nmetadata: {{name: default}}\nspec: {{proposals: {{allowOverride: [secrets]}}}}\n"
        ),
    );
    let allowed = roundtable(
        root,
        &[
            "proposals",
            "accept",
            &leaky,
            "--override",
            "secrets",
            "--reason",
            "fixture keys, not real",
            "--format",
            "json",
        ],
    );
    assert_eq!(allowed.status.code(), Some(0), "{}{}", stdout(&allowed), stderr(&allowed));
    let leaky_commit = json(&allowed)["commit"].as_str().expect("commit").to_owned();
    let body = git(root, &["log", "-1", "--format=%B", &leaky_commit]);
    assert!(body.contains("Roundtable-Override: secrets: fixture keys, not real"), "{body}");

    // A protected path needs a review: refused without an override, accepted with one on a named
    // branch, the reason on the commit.
    let workflow = proposal_of(root, "workflow").expect("workflow")["id"].as_str().expect("id").to_owned();
    let refused = roundtable(root, &["proposals", "accept", &workflow]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains(
            "protectedPaths: protected-path at .github/workflows/ci.yml (needs --override protectedPaths --reason TEXT)"
        ),
        "{}",
        stderr(&refused)
    );
    let reviewed = roundtable(
        root,
        &[
            "proposals",
            "accept",
            &workflow,
            "--branch",
            "feature/ci",
            "--override",
            "protectedPaths",
            "--reason",
            "CI change reviewed",
            "--format",
            "json",
        ],
    );
    assert_eq!(reviewed.status.code(), Some(0), "{}{}", stdout(&reviewed), stderr(&reviewed));
    let reviewed_commit = json(&reviewed)["commit"].as_str().expect("commit").to_owned();
    assert_eq!(git(root, &["rev-parse", "refs/heads/feature/ci"]), reviewed_commit);
    let body = git(root, &["log", "-1", "--format=%B", &reviewed_commit]);
    assert!(body.contains("Roundtable-Override: protectedPaths: CI change reviewed"), "{body}");

    // A reject needs a reason and is recorded.
    let rejected = roundtable(root, &["proposals", "reject", &leaky, "--reason", "too late"]);
    assert_eq!(rejected.status.code(), Some(1), "an accepted proposal cannot be rejected");

    // Every decision is in the chain, which verifies.
    let verify_chain = roundtable(root, &["audit", "verify"]);
    assert!(verify_chain.status.success(), "{}{}", stdout(&verify_chain), stderr(&verify_chain));
    let exported = stdout(&roundtable(root, &["audit", "export"]));
    for kind in ["proposal.accepted", "proposal.acceptRefused"] {
        assert!(exported.contains(kind), "{kind} in the chain");
    }
    nothing_left(&engine, root).await;
}

/// Accept and reject through the API and the admin MCP tool: refused without the operator token
/// (nothing happens), idempotent with it, the other decision a conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_and_reject_through_the_api_and_the_admin_mcp_tool_need_the_operator_token() {
    use crate::http::{Api, MCP_HEADERS, request};
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let Running { dir, executions: _executions, daemon, _show } = run_both().await;
    let root = dir.path();
    let api = Api::of(&root.join(".roundtable/state")).await;
    let clean = proposal_of(root, "clean").expect("clean")["id"].as_str().expect("id").to_owned();
    let leaky = proposal_of(root, "leaky").expect("leaky")["id"].as_str().expect("id").to_owned();

    // Without the token: 401, and nothing happened.
    let accept_path = format!("/v1/proposals/{clean}/accept");
    assert_eq!(request(&api.address, "POST", &accept_path, &[], Some("{}")).status, 401);
    let call = |name: &str, arguments: Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
            .to_string()
    };
    let mcp_accept = call("accept_proposal", serde_json::json!({"id": clean}));
    assert_eq!(request(&api.address, "POST", "/mcp", &MCP_HEADERS, Some(&mcp_accept)).status, 401);
    assert_eq!(proposal_of(root, "clean").expect("clean")["state"], "pending");

    // With it: accepted once, and asking again answers the same decision.
    let json_type = [("Content-Type", "application/json")];
    let first = api.call("POST", &accept_path, &json_type, Some("{}"));
    assert_eq!(first.status, 200, "{}", first.text());
    let commit = first.json()["commit"].as_str().expect("commit").to_owned();
    assert_eq!(git(root, &["rev-parse", &format!("refs/heads/roundtable/clean/{clean}")]), commit);
    let again = api.call("POST", &accept_path, &json_type, Some("{}"));
    assert_eq!((again.status, again.json()["commit"].as_str()), (200, Some(commit.as_str())));
    let conflict = api.call("POST", &format!("/v1/proposals/{clean}/reject"), &json_type, Some(r#"{"reason":"no"}"#));
    assert_eq!((conflict.status, conflict.code().as_str()), (409, "not_pending"));

    // The gates answer 422 with what they found; the MCP tool rejects.
    let gated = api.call("POST", &format!("/v1/proposals/{leaky}/accept"), &json_type, Some("{}"));
    assert_eq!((gated.status, gated.code().as_str()), (422, "gates_refused"), "{}", gated.text());
    let unmet = gated.json()["error"]["details"]["unmet"].to_string();
    assert!(unmet.contains("aws-access-key"), "{unmet}");
    let mcp_reject = call("reject_proposal", serde_json::json!({"id": leaky, "reason": "it adds a key"}));
    let rejected = api.mcp(&mcp_reject).json();
    assert_eq!(rejected["result"]["isError"], false, "{rejected}");
    assert_eq!(rejected["result"]["structuredContent"]["reason"], "it adds a key");
    assert_eq!(proposal_of(root, "leaky").expect("leaky")["state"], "rejected");
    drop(daemon);
    nothing_left(&engine, root).await;
}

/// A git-source project has no working repository: an accept commits in the state directory's
/// mirror, outside the refs a fetch prunes, and must push; the branch and its provenance note
/// land on the remote, whose other branches are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_source_accept_commits_in_the_mirror_and_lands_by_push() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let base = tempfile::tempdir().expect("tempdir");
    let (remote, work, state, executions) =
        (base.path().join("remote.git"), base.path().join("work"), base.path().join("state"), base.path().join("x"));
    git(base.path(), &["init", "-q", "--bare", "-b", "main", "remote.git"]);
    git(base.path(), &["clone", "-q", "remote.git", "work"]);
    git(&work, &["checkout", "-q", "-b", "main"]);
    write(&work, "README.md", "# Project\n");
    write(
        &work,
        ".roundtable/specs.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n---\n{API}\nkind: Assignment\nmetadata: {{name: hello}}\nspec:\n  adapter: generic\n  task: {{id: T-9, title: Greet, prompt: 'echo hello from the agent >> README.md'}}\n  readablePaths: [README.md]\n"
        ),
    );
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "base"]);
    git(&work, &["push", "-q", "origin", "main"]);
    std::fs::create_dir_all(&executions).expect("mkdir");
    let _show = ShowLogOnPanic(executions.join("daemon.log"), base.path().to_path_buf());
    let url = format!("file://{}", remote.display());
    let state_arg = state.display().to_string();
    let daemon = start_daemon(base.path(), &["--state-dir", &state_arg, "--source", &url, "--poll", "1s"], &executions);
    let rt = |args: &[&str]| {
        Command::new(crate::support::binary())
            .arg("--state-dir")
            .arg(&state)
            .args(args)
            .current_dir(base.path())
            .env_remove("ROUNDTABLE_STORE")
            .env("ROUNDTABLE_AUDIT_KEY", executions.join("audit.key"))
            .env("GIT_COMMITTER_NAME", "Olive Operator")
            .env("GIT_COMMITTER_EMAIL", "olive@example.test")
            .output()
            .expect("run roundtable")
    };
    let proposal = || -> Option<Value> {
        let listed: Value = serde_json::from_str(&stdout(&rt(&["proposals", "list", "--format", "json"]))).ok()?;
        listed["items"].as_array()?.first().cloned()
    };
    wait_until_within("a proposal", Duration::from_secs(120), || proposal().is_some()).await;
    drop(daemon);
    nothing_left(&engine, base.path()).await;
    let id = proposal().expect("proposal")["id"].as_str().expect("id").to_owned();
    let main_before = git(&remote, &["rev-parse", "refs/heads/main"]);

    let unpushed = rt(&["proposals", "accept", &id]);
    assert_eq!(unpushed.status.code(), Some(1));
    assert!(stderr(&unpushed).contains("follows a git source"), "{}", stderr(&unpushed));
    let accepted = rt(&["proposals", "accept", &id, "--push", &url, "--format", "json"]);
    assert_eq!(accepted.status.code(), Some(0), "{}{}", stdout(&accepted), stderr(&accepted));
    let decision = json(&accepted);
    let branch = format!("refs/heads/roundtable/hello/{id}");
    assert_eq!(decision["branch"], branch.as_str());
    let commit = decision["commit"].as_str().expect("commit").to_owned();
    assert_eq!(git(&remote, &["rev-parse", &branch]), commit, "the branch is on the remote");
    assert_eq!(git(&remote, &["rev-parse", "refs/heads/main"]), main_before, "main is untouched");
    assert_eq!(
        git(&remote, &["show", &format!("{commit}:README.md")]),
        "# Project\nhello from the agent",
        "the tree is the base plus the patch"
    );
    let note = git(&remote, &["notes", "--ref", "refs/notes/roundtable", "show", &commit]);
    assert!(note.contains("\"payloadType\": \"application/vnd.in-toto+json\""), "{note}");
    // In the mirror the branch is outside what a fetch prunes.
    let mirrored =
        git(&state.join("source/mirror.git"), &["for-each-ref", "--format=%(refname)", "refs/roundtable/accepted/"]);
    assert_eq!(mirrored, format!("refs/roundtable/accepted/roundtable/hello/{id}"));
}
