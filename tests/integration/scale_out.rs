//! Several controllers on one PostgreSQL store, each with its own checkout of the same
//! repository and its own execution root: every Assignment runs exactly once, both take a share,
//! a killed controller's execution is taken over once its lease expires (and the fence keeps it
//! from recording anything when it comes back), and the audit chain that both and the CLI append
//! to verifies.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::support::{
    API, Daemon, ShowLogOnPanic, binary, commit_all, ensure_test_images, git, json, nothing_left,
    start_daemon_with_env, stdout, wait_until_within, write,
};

/// `roundtable` in `root` with the shared store and the shared audit key.
pub(crate) fn rt(root: &Path, store: &str, key: &Path, args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .current_dir(root)
        .env_remove("RUST_LOG")
        .env("ROUNDTABLE_STORE", store)
        .env("ROUNDTABLE_AUDIT_KEY", key)
        .output()
        .expect("run roundtable")
}

/// A committed project with `assignments` Assignments, each appending a line to README.md after
/// `seconds`, and a clone of it: two checkouts of one repository.
pub(crate) fn two_checkouts(assignments: usize, seconds: u32) -> (tempfile::TempDir, tempfile::TempDir) {
    let first = tempfile::tempdir().expect("tempdir");
    let root = first.path();
    write(root, "README.md", "# Project\n");
    let mut specs =
        format!("{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n");
    for n in 0..assignments {
        specs.push_str(&format!(
            "---\n{API}\nkind: Assignment\nmetadata: {{name: a{n:02}}}\nspec:\n  adapter: generic\n  task: {{id: T{n}, prompt: 'sleep {seconds}; echo line {n} >> README.md'}}\n  readablePaths: [README.md]\n"
        ));
    }
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    let second = tempfile::tempdir().expect("tempdir");
    git(second.path(), &["clone", "-q", &root.display().to_string(), "."]);
    (first, second)
}

struct Controller {
    daemon: Daemon,
    executions: tempfile::TempDir,
}

fn start(root: &Path, store: &str, key: &Path) -> Controller {
    let executions = tempfile::tempdir().expect("tempdir");
    let key = key.display().to_string();
    let env = [("ROUNDTABLE_STORE", store), ("ROUNDTABLE_AUDIT_KEY", key.as_str()), ("ROUNDTABLE_LEASE_TTL", "3s")];
    let daemon = start_daemon_with_env(root, &["--max-executions", "2"], executions.path(), &env);
    Controller { daemon, executions }
}

impl Controller {
    fn log(&self) -> String {
        daemon_log(self.executions.path())
    }

    fn run_id(&self) -> Option<String> {
        run_id_in(&self.log())
    }
}

/// The ids of the controllers `roundtable controllers` lists as live.
pub(crate) fn live_controllers(root: &Path, store: &str, key: &Path) -> Vec<String> {
    let controllers = json(&rt(root, store, key, &["controllers", "--format", "json"]));
    let items = controllers["items"].as_array().cloned().unwrap_or_default();
    items.iter().filter(|c| c["live"] == true).filter_map(|c| c["id"].as_str().map(str::to_owned)).collect()
}

/// The log of the daemon whose execution root is `executions`.
pub(crate) fn daemon_log(executions: &Path) -> String {
    std::fs::read_to_string(executions.join("daemon.log")).unwrap_or_default()
}

/// The controller run a daemon printed at start in its `log`.
pub(crate) fn run_id_in(log: &str) -> Option<String> {
    let line = log.lines().find(|l| l.contains("controller run started"))?;
    line.split("controller_run=").nth(1)?.split_whitespace().next().map(str::to_owned)
}

pub(crate) fn sessions(root: &Path, store: &str, key: &Path) -> Vec<serde_json::Value> {
    json(&rt(root, store, key, &["sessions", "list", "--format", "json"]))["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Two controllers on one fresh PostgreSQL database, one per checkout of the same repository,
/// sharing the audit key.
struct Pair {
    store: String,
    key: std::path::PathBuf,
    _keys: tempfile::TempDir,
    first: tempfile::TempDir,
    second: tempfile::TempDir,
    a: Controller,
    b: Controller,
}

impl Pair {
    /// `None` (the test skips) without an engine or PostgreSQL, unless CI requires them.
    async fn start(assignments: usize, seconds: u32) -> Option<(roundtable_docker::Engine, Self)> {
        let engine = crate::support::engine_or_skip().await?;
        let cluster = roundtable_store::scratch::cluster()?;
        ensure_test_images();
        let store = cluster.database().await.expose();
        let (first, second) = two_checkouts(assignments, seconds);
        let keys = tempfile::tempdir().expect("tempdir");
        let key = keys.path().join("audit.key");
        let a = start(first.path(), &store, &key);
        let b = start(second.path(), &store, &key);
        Some((engine, Self { store, key, _keys: keys, first, second, a, b }))
    }

    /// `roundtable` in the first checkout, on the shared store.
    fn rt(&self, args: &[&str]) -> Output {
        rt(self.first.path(), &self.store, &self.key, args)
    }

    fn sessions(&self) -> Vec<serde_json::Value> {
        sessions(self.first.path(), &self.store, &self.key)
    }

    fn phases(&self) -> Vec<String> {
        self.sessions().iter().filter_map(|s| s["phase"].as_str().map(str::to_owned)).collect()
    }

    fn proposals(&self) -> serde_json::Value {
        json(&self.rt(&["proposals", "list", "--format", "json"]))
    }

    fn logs_on_panic(&self) -> [ShowLogOnPanic; 2] {
        [
            ShowLogOnPanic(self.a.executions.path().join("daemon.log"), self.first.path().to_path_buf()),
            ShowLogOnPanic(self.b.executions.path().join("daemon.log"), self.second.path().to_path_buf()),
        ]
    }

    /// Waits for the first session to run; whether the first controller (`a`) runs it.
    async fn a_runs_it(&self) -> bool {
        wait_until_within("the session to run", Duration::from_secs(60), || {
            self.sessions().first().is_some_and(|s| s["phase"] == "Running")
        })
        .await;
        let holder = self.sessions()[0]["controllerRun"].as_str().expect("run").to_owned();
        self.a.run_id().as_deref() == Some(holder.as_str())
    }

    /// Kills both daemons (SIGKILL) and waits for them.
    fn stop_both(&mut self) {
        for controller in [&mut self.a, &mut self.b] {
            let _ = controller.daemon.0.kill();
            let _ = controller.daemon.0.wait();
        }
    }

    fn verify_audit(&self) {
        let verified = self.rt(&["audit", "verify"]);
        assert!(verified.status.success(), "{}{}", stdout(&verified), String::from_utf8_lossy(&verified.stderr));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_share_twenty_assignments_and_run_each_exactly_once() {
    let Some((engine, mut pair)) = Pair::start(20, 1).await else { return };
    let _logs = pair.logs_on_panic();
    // The CLI appends to the same chain while both controllers do.
    for _ in 0..3 {
        let out = pair.rt(&["reconcile", "Adapter/generic"]);
        assert!(out.status.success(), "{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    }
    wait_until_within("20 succeeded sessions", Duration::from_secs(240), || {
        let phases = pair.phases();
        phases.len() >= 20 && phases.iter().all(|p| p == "Succeeded")
    })
    .await;
    let all = pair.sessions();
    let mut assignments: Vec<&str> = all.iter().filter_map(|s| s["assignment"].as_str()).collect();
    assignments.sort_unstable();
    let before = assignments.len();
    assignments.dedup();
    assert_eq!((before, assignments.len()), (20, 20), "every Assignment ran exactly once: {all:#?}");
    let (run_a, run_b) = (pair.a.run_id().expect("a's run"), pair.b.run_id().expect("b's run"));
    let share = |run: &str| all.iter().filter(|s| s["controllerRun"] == run).count();
    assert!(share(&run_a) > 0 && share(&run_b) > 0, "both took a share: a {} b {}", share(&run_a), share(&run_b));
    assert_eq!(share(&run_a) + share(&run_b), 20);
    let proposals = json(&rt(pair.second.path(), &pair.store, &pair.key, &["proposals", "list", "--format", "json"]));
    assert_eq!(proposals["items"].as_array().map(Vec::len), Some(20), "{proposals:#}");
    // Every proposal exports from either checkout, whichever controller made it.
    for item in proposals["items"].as_array().into_iter().flatten() {
        let id = item["id"].as_str().expect("id");
        let patch = pair.rt(&["proposals", "export", id]);
        let shown = format!("{}{}", stdout(&patch), String::from_utf8_lossy(&patch.stderr));
        assert!(shown.contains("+line "), "{id}: {shown}");
    }
    let live = live_controllers(pair.first.path(), &pair.store, &pair.key);
    assert!(live.contains(&run_a) && live.contains(&run_b), "{live:?}");
    pair.stop_both();
    pair.verify_audit();
    nothing_left(&engine, pair.first.path()).await;
    nothing_left(&engine, pair.second.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_controllers_execution_is_taken_over_once_and_it_records_nothing_when_back() {
    let Some((engine, mut pair)) = Pair::start(1, 6).await else { return };
    let _logs = pair.logs_on_panic();
    // kill -9 whichever runs it: no shutdown, no release, no cleanup.
    let a_runs = pair.a_runs_it().await;
    let Pair { a, b, first, second, .. } = &mut pair;
    let (dead, dead_root, survivor) = if a_runs { (a, first.path(), &*b) } else { (b, second.path(), &*a) };
    dead.daemon.0.kill().expect("kill -9");
    dead.daemon.0.wait().expect("reap");
    let (survivor_run, dead_root) = (survivor.run_id().expect("survivor's run"), dead_root.to_owned());
    wait_until_within("the take-over to succeed", Duration::from_secs(90), || {
        pair.phases() == ["Succeeded", "Interrupted"]
    })
    .await;
    let all = pair.sessions();
    assert_eq!(all[0]["controllerRun"], survivor_run.as_str(), "the survivor re-ran it: {all:#?}");
    let proposals = pair.proposals();
    assert_eq!(proposals["items"].as_array().map(Vec::len), Some(1), "exactly one proposal: {proposals:#}");

    // The dead controller comes back: it records nothing about the session it lost, and reaps
    // what its engine kept of it.
    let back = start(&dead_root, &pair.store, &pair.key);
    let _log_back = ShowLogOnPanic(back.executions.path().join("daemon.log"), dead_root.clone());
    nothing_left(&engine, &dead_root).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(pair.sessions(), all, "nothing more was recorded");
    drop(back);
    pair.stop_both();
    pair.verify_audit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_one_commit_behind_never_rolls_an_object_back() {
    if crate::support::engine_or_skip().await.is_none() {
        return;
    }
    let Some(cluster) = roundtable_store::scratch::cluster() else { return };
    let store = cluster.database().await.expose();
    // Suspended: nothing runs; only the desired state is at stake.
    let (first, second) = two_checkouts(1, 1);
    let specs = first.path().join(".roundtable/specs.yaml");
    let text =
        std::fs::read_to_string(&specs).expect("specs").replace("readablePaths:", "suspend: true\n  readablePaths:");
    std::fs::write(&specs, &text).expect("write");
    git(first.path(), &["commit", "-q", "-am", "suspend"]);
    git(second.path(), &["pull", "-q"]);
    // The first checkout moves one commit ahead; the second stays where it is.
    std::fs::write(&specs, text.replace("echo line 0", "echo newer line 0")).expect("write");
    git(first.path(), &["commit", "-q", "-am", "newer prompt"]);
    let keys = tempfile::tempdir().expect("tempdir");
    let key = keys.path().join("audit.key");
    let behind = start(second.path(), &store, &key);
    let _log_behind = ShowLogOnPanic(behind.executions.path().join("daemon.log"), second.path().to_path_buf());
    let prompt = |root: &Path| {
        let described = json(&rt(root, &store, &key, &["describe", "Assignment/a00", "--format", "json"]));
        let item = &described;
        (item["spec"].to_string(), item["status"]["generation"].as_i64())
    };
    wait_until_within("the older checkout to write first", Duration::from_secs(30), || {
        prompt(second.path()).0.contains("echo line 0")
    })
    .await;
    let ahead = start(first.path(), &store, &key);
    let _log_ahead = ShowLogOnPanic(ahead.executions.path().join("daemon.log"), first.path().to_path_buf());
    wait_until_within("the newer checkout to take over the desired state", Duration::from_secs(30), || {
        prompt(first.path()).0.contains("newer line 0")
    })
    .await;
    let (_, generation) = prompt(first.path());
    // The checkout that is behind rescans (an edit of its own specs, and its resyncs) but writes nothing.
    std::fs::write(second.path().join(".roundtable/specs.yaml"), format!("{text}\n# touched\n")).expect("touch");
    wait_until_within("the older controller to say it is behind", Duration::from_secs(30), || {
        let controllers = json(&rt(first.path(), &store, &key, &["controllers", "--format", "json"]));
        controllers["items"].as_array().into_iter().flatten().any(|c| {
            c["id"].as_str() == behind.run_id().as_deref()
                && c["syncNote"].as_str().is_some_and(|n| n.contains("behind"))
        })
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (now, generation_now) = prompt(first.path());
    assert!(now.contains("newer line 0"), "rolled back to {now:?}");
    assert_eq!(generation_now, generation, "the generation did not move");
    let status = rt(second.path(), &store, &key, &["status", "--format", "json"]);
    let rows = json(&status);
    let row = rows["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["kind"] == "Controller" && r["name"].as_str() == behind.run_id().as_deref())
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["sync"], "OutOfSync", "{rows:#}");
    drop(ahead);
    drop(behind);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_moves_from_sqlite_to_postgres_with_its_history() {
    if crate::support::engine_or_skip().await.is_none() {
        return;
    }
    let Some(cluster) = roundtable_store::scratch::cluster() else { return };
    ensure_test_images();
    let dir = crate::support::one_assignment_project("edit", "echo edited >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = crate::support::start_daemon(root, &[], executions.path());
    let _log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    crate::support::wait_until("the session to succeed", || {
        crate::support::session_phases(root, "edit") == ["Succeeded"]
    })
    .await;
    drop(daemon);
    let key = executions.path().join("audit.key");
    let store = cluster.database().await.expose();
    let migrated = rt(root, "sqlite:.roundtable/state/state.db", &key, &["state", "migrate", "--to", &store]);
    assert!(migrated.status.success(), "{}{}", stdout(&migrated), String::from_utf8_lossy(&migrated.stderr));
    assert!(stdout(&migrated).contains("sessions                  1 rows"), "{}", stdout(&migrated));
    // The same history, read from PostgreSQL: the session, the proposal (its patch), the chain.
    let sessions = sessions(root, &store, &key);
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    assert_eq!(sessions[0]["phase"], "Succeeded");
    let proposals = json(&rt(root, &store, &key, &["proposals", "list", "--format", "json"]));
    let id = proposals["items"][0]["id"].as_str().expect("a proposal").to_owned();
    let patch = rt(root, &store, &key, &["proposals", "export", &id]);
    assert!(stdout(&patch).contains("+edited"), "{}", stdout(&patch));
    let verified = rt(root, &store, &key, &["audit", "verify"]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), String::from_utf8_lossy(&verified.stderr));
    // A second migration into the same database is refused: it is not empty.
    let again = rt(root, "sqlite:.roundtable/state/state.db", &key, &["state", "migrate", "--to", &store]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("not empty"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_controller_that_wakes_after_a_take_over_is_fenced_off() {
    let Some((engine, pair)) = Pair::start(1, 6).await else { return };
    let _logs = pair.logs_on_panic();
    let (stalled, stalled_root) =
        if pair.a_runs_it().await { (&pair.a, pair.first.path()) } else { (&pair.b, pair.second.path()) };
    let pid = stalled.daemon.0.id().to_string();
    // SIGSTOP: the controller neither heartbeats nor records while its agent keeps running.
    assert!(Command::new("kill").args(["-STOP", &pid]).status().expect("kill").success());
    wait_until_within("the take-over to succeed", Duration::from_secs(90), || {
        pair.phases() == ["Succeeded", "Interrupted"]
    })
    .await;
    let taken_over = pair.sessions();
    // It wakes: its execution (whose agent has long finished) tries to record and is refused.
    assert!(Command::new("kill").args(["-CONT", &pid]).status().expect("kill").success());
    wait_until_within("the woken controller to notice", Duration::from_secs(30), || {
        let log = stalled.log();
        log.contains("not recording") || log.contains("taken over by another controller")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(pair.sessions(), taken_over, "the fence held: nothing more was recorded");
    let proposals = pair.proposals();
    assert_eq!(proposals["items"].as_array().map(Vec::len), Some(1), "exactly one proposal: {proposals:#}");
    // The woken controller still cleans up after its own engine.
    nothing_left(&engine, stalled_root).await;
}
