//! Committed state as the desired state, with real git: a git source (`start --source`) over
//! `file://`, over the git protocol (`git daemon` on loopback) and over HTTP (git's dumb protocol
//! from a static server on loopback, with credentials in the URL that are never shown) converges
//! a push within a poll, a force-push that removes an Assignment deletes it, an unreachable remote keeps the last
//! good commit (and says so in `status`) until it is back; `--committed` reconciles a checkout's
//! HEAD, never its uncommitted edits; a signed webhook call fetches at once; a remote that
//! hangs does not hold shutdown up; two controllers on PostgreSQL following one source run each
//! Assignment once.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{
    API, Daemon, ShowLogOnPanic, binary, git, start_daemon, start_daemon_with_env, stderr, stdout, write,
};

const POLL: &str = "1s";

fn adapter(name: &str) -> String {
    format!("{API}\nkind: Adapter\nmetadata: {{name: {name}}}\nspec:\n  timeout: 5m\n")
}

/// A suspended Assignment: recorded and reconciled, never run.
fn suspended(name: &str) -> String {
    format!(
        "{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: mock\n  suspend: true\n  task: {{id: T, prompt: 'p'}}\n  readablePaths: [README.md]\n"
    )
}

/// A bare remote (`remote.git`, branch `main`) and a clone to push from (`work`), with `files`
/// committed and pushed; the state directory `state` beside them.
struct Fixture {
    base: tempfile::TempDir,
}

impl Fixture {
    fn new(files: &[(&str, &str)]) -> Self {
        let base = tempfile::tempdir().expect("tempdir");
        let fixture = Self { base };
        git(fixture.base.path(), &["init", "-q", "--bare", "-b", "main", "remote.git"]);
        git(fixture.base.path(), &["clone", "-q", "remote.git", "work"]);
        git(&fixture.work(), &["checkout", "-q", "-b", "main"]);
        write(&fixture.work(), "README.md", "# Project\n");
        for (path, text) in files {
            write(&fixture.work(), path, text);
        }
        fixture.push("base");
        std::fs::create_dir_all(fixture.executions()).expect("mkdir");
        fixture
    }

    fn path(&self) -> &Path {
        self.base.path()
    }

    fn work(&self) -> PathBuf {
        self.path().join("work")
    }

    fn remote(&self) -> PathBuf {
        self.path().join("remote.git")
    }

    fn state(&self) -> PathBuf {
        self.path().join("state")
    }

    fn executions(&self) -> PathBuf {
        self.path().join("executions")
    }

    fn file_url(&self) -> String {
        format!("file://{}", self.remote().display())
    }

    /// Commits everything in the clone and pushes it (forced: a rewrite is pushed as it is).
    fn push(&self, message: &str) {
        git(&self.work(), &["add", "-A"]);
        git(&self.work(), &["commit", "-q", "--allow-empty", "-m", message]);
        git(&self.work(), &["push", "-q", "-f", "origin", "main"]);
    }

    fn start(&self, url: &str) -> Daemon {
        let state = self.state().display().to_string();
        let args = ["--state-dir", &state, "--source", url, "--poll", POLL, "--resync", "10m"];
        start_daemon(self.path(), &args, &self.executions())
    }

    /// `roundtable --state-dir STATE args…` in the fixture, with the daemon's audit key.
    fn rt(&self, args: &[&str]) -> Output {
        Command::new(binary())
            .arg("--state-dir")
            .arg(self.state())
            .args(args)
            .current_dir(self.path())
            .env_remove("RUST_LOG")
            .env_remove("ROUNDTABLE_STORE")
            .env("ROUNDTABLE_AUDIT_KEY", self.executions().join("audit.key"))
            .output()
            .expect("run roundtable")
    }

    fn status(&self) -> Value {
        let out = self.rt(&["status", "--format", "json"]);
        serde_json::from_str(&stdout(&out))
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(&out), stderr(&out)))
    }

    fn log(&self) -> ShowLogOnPanic {
        ShowLogOnPanic(self.executions().join("daemon.log"), self.path().to_path_buf())
    }

    /// Polls `status` until `check` holds; fails with the last status after `limit`.
    fn wait(&self, what: &str, limit: Duration, check: impl Fn(&Value) -> bool) -> (Value, Duration) {
        let started = Instant::now();
        loop {
            let status = self.status();
            if check(&status) {
                return (status, started.elapsed());
            }
            assert!(started.elapsed() < limit, "timed out waiting for {what}; last status: {status:#}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn row<'a>(status: &'a Value, kind: &str, name: &str) -> Option<&'a Value> {
    status["items"].as_array()?.iter().find(|r| r["kind"] == kind && r["name"] == name)
}

fn source_row(status: &Value) -> Option<&Value> {
    status["items"].as_array()?.iter().find(|r| r["kind"] == "Source")
}

fn synced(status: &Value, kind: &str, name: &str) -> bool {
    row(status, kind, name).is_some_and(|r| r["sync"] == "Synced" && r["observedGeneration"] == 1)
}

fn head_of(fixture: &Fixture) -> String {
    git(&fixture.work(), &["rev-parse", "HEAD"])
}

/// A push converges within one poll (1 s, jittered by 10 %) plus the scan and reconcile; the
/// source shows as `shown` (its credentials redacted).
fn a_push_converges_within_a_poll(fixture: &Fixture, url: &str, shown: &str) {
    let _daemon = fixture.start(url);
    let _log = fixture.log();
    let (first, _) = fixture.wait("the first commit", Duration::from_secs(30), |s| synced(s, "Adapter", "one"));
    let source = source_row(&first).expect("a Source row");
    assert_eq!(source["name"], format!("git source {shown}@main"), "{source:#}");
    assert!(
        source["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("commit {} fetched at", &head_of(fixture)[..7]))),
        "{source:#}"
    );

    write(&fixture.work(), ".roundtable/two.yaml", &adapter("two"));
    fixture.push("add two");
    let (status, took) = fixture.wait("the pushed commit", Duration::from_secs(30), |s| synced(s, "Adapter", "two"));
    assert!(took < Duration::from_secs(4), "a push took {took:?} to converge with a 1 s poll");
    let source = source_row(&status).expect("a Source row");
    assert!(source["message"].as_str().is_some_and(|m| m.contains(&head_of(fixture)[..7])), "{source:#}");

    let text = stdout(&fixture.rt(&["status"]));
    assert!(text.starts_with(&format!("source: git source {shown}@main\n")), "{text}");
}

#[test]
fn a_push_to_a_file_url_source_converges_within_one_poll() {
    let fixture = Fixture::new(&[(".roundtable/one.yaml", &adapter("one"))]);
    let url = fixture.file_url();
    a_push_converges_within_a_poll(&fixture, &url, &url);

    // A receipt sealed into the exported tree would vanish at the next commit followed: refused
    // without a checkout, written into the checkout's spec directory with one, to be committed.
    let nowhere = fixture.rt(&["admission", "check", "mock", "--seal"]);
    assert!(!nowhere.status.success(), "{}", stdout(&nowhere));
    assert!(stderr(&nowhere).contains("pass --dir with the spec directory of a clone"), "{}", stderr(&nowhere));
    assert!(!fixture.state().join("source/tree/current/.roundtable/admission").exists(), "nothing in the tree");
    // Nor through another spelling of the exported tree.
    let exported = fixture.state().join("source/tree/current/.roundtable").display().to_string();
    let spelled = fixture.rt(&["--dir", &exported, "admission", "check", "mock", "--seal"]);
    assert!(stderr(&spelled).contains("names the exported tree"), "{}", stderr(&spelled));
    let spec_dir = fixture.work().join(".roundtable");
    let sealed = fixture.rt(&["--dir", &spec_dir.display().to_string(), "admission", "check", "mock", "--seal"]);
    assert!(sealed.status.success(), "{}{}", stdout(&sealed), stderr(&sealed));
    assert!(spec_dir.join("admission/mock.json").is_file(), "{}", stdout(&sealed));
    assert!(stderr(&sealed).contains("commit"), "says to commit it: {}", stderr(&sealed));
    assert!(!fixture.state().join("source/tree/current/.roundtable/admission").exists(), "nothing in the tree");
}

/// `git daemon` serving the fixture's remote on a loopback port, killed when dropped.
struct GitDaemon(std::process::Child, u16);

impl GitDaemon {
    fn serve(base: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port();
        // `git-daemon` itself, not the `git daemon` wrapper: killing the wrapper would leave the
        // server it spawned running.
        let exec_path = git(base, &["--exec-path"]);
        let child = Command::new(Path::new(&exec_path).join("git-daemon"))
            .args(["--export-all", "--reuseaddr", "--listen=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "git daemon did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self(child, port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_push_to_a_git_protocol_source_on_loopback_converges_within_one_poll() {
    let fixture = Fixture::new(&[(".roundtable/one.yaml", &adapter("one"))]);
    let served = GitDaemon::serve(fixture.path());
    let url = format!("git://127.0.0.1:{}/remote.git", served.1);
    a_push_converges_within_a_poll(&fixture, &url, &url);
}

/// A static HTTP server on loopback for git's dumb HTTP protocol: the remote's files as they
/// are (`git update-server-info` after each push keeps its listings current). Stopped when
/// dropped.
struct StaticHttp {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StaticHttp {
    fn serve(root: &Path) -> Self {
        use std::io::{BufRead as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("address").port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (root, stopping) = (root.to_path_buf(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = stream.set_nonblocking(false);
                let mut reader = std::io::BufReader::new(stream);
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    continue;
                }
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let path = request.split_whitespace().nth(1).unwrap_or("/").split('?').next().unwrap_or("/");
                let file = root.join(path.trim_start_matches('/'));
                let body = (!path.contains("..")).then(|| std::fs::read(&file).ok()).flatten();
                let mut stream = reader.into_inner();
                let _ = match body {
                    Some(body) => {
                        let head =
                            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                        stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body))
                    }
                    None => {
                        stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    }
                };
            }
        });
        Self { port, stop, thread: Some(thread) }
    }
}

impl Drop for StaticHttp {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn a_push_to_an_http_source_with_credentials_converges_and_never_shows_them() {
    let fixture = Fixture::new(&[(".roundtable/one.yaml", &adapter("one"))]);
    // The dumb protocol reads the listings `update-server-info` writes; the hook keeps them current.
    let hook = fixture.remote().join("hooks/post-update");
    std::fs::write(&hook, "#!/bin/sh\nexec git update-server-info\n").expect("hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    git(&fixture.remote(), &["update-server-info"]);
    let served = StaticHttp::serve(fixture.path());
    let url = format!("http://bench:s3cret-token@127.0.0.1:{}/remote.git", served.port);
    let shown = format!("http://***@127.0.0.1:{}/remote.git", served.port);
    a_push_converges_within_a_poll(&fixture, &url, &shown);
    let everything = format!(
        "{}{}",
        stdout(&fixture.rt(&["status", "--format", "json"])),
        std::fs::read_to_string(fixture.executions().join("daemon.log")).unwrap_or_default()
    );
    assert!(!everything.contains("s3cret-token"), "the credentials are shown: {everything}");
}

#[test]
fn a_force_push_that_removes_an_assignment_deletes_it() {
    let specs = format!("{}---\n{}---\n{}", adapter("mock"), suspended("kept"), suspended("dropped"));
    let fixture = Fixture::new(&[(".roundtable/specs.yaml", &specs)]);
    let _daemon = fixture.start(&fixture.file_url());
    let _log = fixture.log();
    fixture.wait("both Assignments", Duration::from_secs(30), |s| {
        row(s, "Assignment", "kept").is_some_and(|r| r["generation"] == 1)
            && row(s, "Assignment", "dropped").is_some_and(|r| r["generation"] == 1)
    });
    // The history is rewritten: the one commit is replaced by one without `dropped`.
    write(&fixture.work(), ".roundtable/specs.yaml", &format!("{}---\n{}", adapter("mock"), suspended("kept")));
    git(&fixture.work(), &["add", "-A"]);
    git(&fixture.work(), &["commit", "-q", "--amend", "-m", "rewritten"]);
    git(&fixture.work(), &["push", "-q", "-f", "origin", "main"]);
    fixture.wait("the removed Assignment deleted", Duration::from_secs(30), |s| {
        row(s, "Assignment", "dropped").is_none() && row(s, "Assignment", "kept").is_some()
    });
    let describe = fixture.rt(&["describe", "Assignment/dropped"]);
    assert_eq!(describe.status.code(), Some(1), "forgotten after cleanup: {}", stdout(&describe));
}

#[test]
fn an_unreachable_remote_keeps_the_last_good_commit_and_recovers() {
    let fixture = Fixture::new(&[(".roundtable/one.yaml", &adapter("one"))]);
    let _daemon = fixture.start(&fixture.file_url());
    let _log = fixture.log();
    fixture.wait("the first commit", Duration::from_secs(30), |s| synced(s, "Adapter", "one"));
    let good = head_of(&fixture);

    let away = fixture.path().join("moved-away.git");
    std::fs::rename(fixture.remote(), &away).expect("move the remote away");
    let (status, _) = fixture.wait("the fetch failure", Duration::from_secs(30), |s| {
        source_row(s).is_some_and(|r| r["message"].as_str().is_some_and(|m| m.starts_with("fetch failed at ")))
    });
    let source = source_row(&status).expect("a Source row");
    let message = source["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("reconciling the last good commit {}", &good[..7])), "{message}");
    assert_eq!(source["sync"], "Error", "{source:#}");
    assert!(synced(&status, "Adapter", "one"), "the last good commit's objects stay: {status:#}");
    let text = fixture.rt(&["status"]);
    assert_eq!(text.status.code(), Some(1), "a failing source is an error: {}", stdout(&text));
    assert!(stdout(&text).contains("fetch failed at "), "{}", stdout(&text));

    std::fs::rename(&away, fixture.remote()).expect("bring the remote back");
    write(&fixture.work(), ".roundtable/two.yaml", &adapter("two"));
    fixture.push("add two");
    let (status, _) = fixture.wait("the recovery", Duration::from_secs(30), |s| synced(s, "Adapter", "two"));
    let source = source_row(&status).expect("a Source row");
    assert_eq!(source["sync"], "Synced", "the error is cleared: {source:#}");
    assert!(
        source["message"].as_str().is_some_and(|m| m.starts_with(&format!("commit {}", &head_of(&fixture)[..7]))),
        "{source:#}"
    );
}

#[test]
fn a_pushed_spec_directory_that_links_out_of_the_tree_is_refused_and_the_last_good_commit_kept() {
    let fixture = Fixture::new(&[(".roundtable/one.yaml", &adapter("one"))]);
    let _daemon = fixture.start(&fixture.file_url());
    let _log = fixture.log();
    fixture.wait("the first commit", Duration::from_secs(30), |s| synced(s, "Adapter", "one"));
    // Whoever can push replaces the spec directory with a link to a folder of the host.
    let host = tempfile::tempdir().expect("tempdir");
    write(host.path(), "planted.yaml", &adapter("planted"));
    std::fs::remove_dir_all(fixture.work().join(".roundtable")).expect("rm");
    std::os::unix::fs::symlink(host.path(), fixture.work().join(".roundtable")).expect("link");
    fixture.push("link the specs out");
    let (status, _) = fixture.wait("the refusal", Duration::from_secs(30), |s| {
        source_row(s).is_some_and(|r| r["message"].as_str().is_some_and(|m| m.contains("is a symbolic link")))
    });
    assert!(row(&status, "Adapter", "planted").is_none(), "the host's folder was read: {status:#}");
    assert!(synced(&status, "Adapter", "one"), "the last good commit's objects stay: {status:#}");
}

#[test]
fn committed_mode_reconciles_head_never_an_uncommitted_edit() {
    let project = tempfile::tempdir().expect("tempdir");
    let root = project.path();
    write(root, ".roundtable/one.yaml", &adapter("one"));
    crate::support::commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &["--committed", "--poll", POLL, "--resync", "10m"], executions.path());
    let _log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let status = |root: &Path| crate::support::json(&crate::support::roundtable(root, &["status", "--format", "json"]));
    let wait = |what: &str, check: &dyn Fn(&Value) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = status(root);
            if check(&now) {
                return now;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}: {now:#}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let first = wait("HEAD", &|s| synced(s, "Adapter", "one"));
    let source = source_row(&first).expect("a Source row");
    assert!(source["name"].as_str().is_some_and(|n| n.starts_with("committed (HEAD) ")), "{source:#}");

    // Uncommitted: saved, and left alone for three polls.
    write(root, ".roundtable/two.yaml", &adapter("two"));
    std::thread::sleep(Duration::from_secs(3));
    let describe = crate::support::roundtable(root, &["describe", "Adapter/two"]);
    assert_eq!(describe.status.code(), Some(1), "an uncommitted edit is never recorded: {}", stdout(&describe));
    assert!(row(&status(root), "Adapter", "two").is_none(), "status reads the committed tree");

    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "two"]);
    wait("the commit", &|s| synced(s, "Adapter", "two"));
    let text = stdout(&crate::support::roundtable(root, &["status"]));
    assert!(text.starts_with("source: committed (HEAD) "), "{text}");

    // `validate` checks the working tree (what is about to be committed) and says so; `status`
    // the commit; `plan --local` previews the edit against the state.
    write(root, ".roundtable/broken.yaml", "kind: [\n");
    write(root, ".roundtable/three.yaml", &adapter("three"));
    let validate = crate::support::roundtable(root, &["validate"]);
    assert_eq!(validate.status.code(), Some(1), "{}", stdout(&validate));
    assert!(stdout(&validate).contains("broken.yaml"), "{}", stdout(&validate));
    assert!(crate::support::stderr(&validate).contains("plan --local"), "{}", crate::support::stderr(&validate));
    assert!(row(&status(root), "File", ".roundtable/broken.yaml").is_none(), "status reads the committed tree");
    let committed = stdout(&crate::support::roundtable(root, &["plan"]));
    assert!(!committed.contains("Adapter/three"), "plan reads the committed tree: {committed}");
    let local = stdout(&crate::support::roundtable(root, &["plan", "--local"]));
    assert!(local.contains("  + Adapter/three: create at generation 1"), "{local}");
    assert!(local.contains("broken.yaml"), "{local}");

    // Committed, the broken file is named as in the repository, and the Source row says its
    // commit does not wholly load.
    std::fs::remove_file(root.join(".roundtable/three.yaml")).expect("rm");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "broken"]);
    let now = wait("the broken commit", &|s| row(s, "File", ".roundtable/broken.yaml").is_some());
    let source = source_row(&now).expect("a Source row");
    assert_eq!(source["health"], "Degraded", "{source:#}");
    assert!(source["message"].as_str().is_some_and(|m| m.contains("1 spec file of it does not load")), "{source:#}");
    let text = stdout(&crate::support::roundtable(root, &["status"]));
    assert!(!text.contains("source/tree"), "no exported tree's path is shown: {text}");
}

/// `roundtable` on the shared store with the shared audit key, from `state`.
fn on_store(cwd: &Path, state: &Path, store: &str, key: &Path, args: &[&str]) -> Output {
    Command::new(binary())
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .env("ROUNDTABLE_STORE", store)
        .env("ROUNDTABLE_AUDIT_KEY", key)
        .output()
        .expect("run roundtable")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_on_postgres_following_one_source_run_each_assignment_once() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    let Some(cluster) = roundtable_store::scratch::cluster() else { return };
    crate::support::ensure_test_images();
    let store = cluster.database().await.expose();
    let generic =
        format!("{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n");
    let fixture = Fixture::new(&[(".roundtable/adapters.yaml", &generic)]);
    let key = fixture.path().join("audit.key");
    let url = fixture.file_url();
    let key_text = key.display().to_string();
    let env = [
        ("ROUNDTABLE_STORE", store.as_str()),
        ("ROUNDTABLE_AUDIT_KEY", key_text.as_str()),
        ("ROUNDTABLE_LEASE_TTL", "3s"),
    ];
    let mut daemons = Vec::new();
    let mut logs = Vec::new();
    for name in ["a", "b"] {
        let (state, executions) =
            (fixture.path().join(format!("state-{name}")), fixture.path().join(format!("executions-{name}")));
        std::fs::create_dir_all(&executions).expect("mkdir");
        let state = state.display().to_string();
        let args = ["--state-dir", &state, "--source", &url, "--poll", POLL, "--max-executions", "2"];
        daemons.push(start_daemon_with_env(fixture.path(), &args, &executions, &env));
        logs.push(ShowLogOnPanic(executions.join("daemon.log"), fixture.path().to_path_buf()));
    }
    let state_a = fixture.path().join("state-a");
    let sessions = || -> Vec<Value> {
        let out = on_store(fixture.path(), &state_a, &store, &key, &["sessions", "list", "--format", "json"]);
        crate::support::json(&out)["items"].as_array().cloned().unwrap_or_default()
    };
    // Both have synced the first commit (the Adapter), then one push adds the Assignments.
    crate::support::wait_until_within("both controllers synced", Duration::from_secs(60), || {
        daemons.len() == 2
            && ["a", "b"].iter().all(|name| {
                std::fs::read_to_string(fixture.path().join(format!("executions-{name}/daemon.log")))
                    .is_ok_and(|log| log.contains("roundtable is running"))
            })
    })
    .await;
    let mut specs = String::new();
    for n in 0..6 {
        specs.push_str(&format!(
            "---\n{API}\nkind: Assignment\nmetadata: {{name: a{n}}}\nspec:\n  adapter: generic\n  task: {{id: T{n}, prompt: 'echo line {n} >> README.md'}}\n  readablePaths: [README.md]\n"
        ));
    }
    write(&fixture.work(), ".roundtable/assignments.yaml", &specs);
    fixture.push("six assignments");
    crate::support::wait_until_within("6 succeeded sessions", Duration::from_secs(240), || {
        let all = sessions();
        all.len() >= 6 && all.iter().all(|s| s["phase"] == "Succeeded")
    })
    .await;
    // Both keep polling the same commit: nothing runs again.
    std::thread::sleep(Duration::from_secs(3));
    let all = sessions();
    let mut assignments: Vec<&str> = all.iter().filter_map(|s| s["assignment"].as_str()).collect();
    assignments.sort_unstable();
    assert_eq!(assignments, ["a0", "a1", "a2", "a3", "a4", "a5"], "every Assignment ran exactly once: {all:#?}");
    let commit = head_of(&fixture);
    for based in all.iter().filter_map(|s| s["baseCommit"].as_str()) {
        assert_eq!(based, commit, "provisioned from the mirror at the pushed commit");
    }
    drop(daemons);
    for name in ["a", "b"] {
        let project = roundtable_source::Project::resolve(&fixture.path().join(".roundtable"))
            .expect("project")
            .with_state(
                fixture.path().join(format!("state-{name}")),
                roundtable_store::StoreUrl::in_state_dir(&state_a),
            )
            .followed()
            .expect("followed");
        let leftovers = engine.labelled(&project.id).await.expect("list");
        assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    }
}

#[test]
fn a_remote_that_never_answers_does_not_hold_shutdown_up() {
    let fixture = Fixture::new(&[(".roundtable/one.yaml", &adapter("one"))]);
    // Takes the connection, never answers: every fetch hangs until git's timeout (120 s).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("git://{}/remote.git", silent.local_addr().expect("address"));
    let mut daemon = fixture.start(&url);
    let _log = fixture.log();
    std::thread::sleep(Duration::from_secs(2));
    let pid = daemon.0.id().to_string();
    let stopping = Instant::now();
    Command::new("kill").args(["-TERM", &pid]).status().expect("kill -TERM");
    while daemon.0.try_wait().expect("wait").is_none() {
        assert!(stopping.elapsed() < Duration::from_secs(15), "SIGTERM waited for the hung fetch");
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(fixture.executions().join("daemon.log")).unwrap_or_default();
    assert!(log.contains("following the git source"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_webhook_call_fetches_at_once_instead_of_at_the_poll() {
    use crate::http::{Api, request};
    let fixture = Fixture::new(&[(".roundtable/one.yaml", &adapter("one"))]);
    let secret = fixture.path().join("hook.secret");
    std::fs::write(&secret, "a shared secret\n").expect("write");
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let (state, url) = (fixture.state().display().to_string(), fixture.file_url());
    let args = [
        "--state-dir",
        &state,
        "--source",
        &url,
        "--poll",
        "10m",
        "--webhook-secret-file",
        secret.to_str().expect("utf-8"),
    ];
    let _daemon = start_daemon(fixture.path(), &args, &fixture.executions());
    let _log = fixture.log();
    fixture.wait("the first commit", Duration::from_secs(30), |s| synced(s, "Adapter", "one"));
    let api = Api::of(&fixture.state()).await;

    write(&fixture.work(), ".roundtable/two.yaml", &adapter("two"));
    fixture.push("add two");
    let body = r#"{"ref":"refs/heads/main"}"#;
    let signature = roundtable_api::hook::HookSecret::from_bytes(b"a shared secret").signature(body.as_bytes());
    let answered = request(&api.address, "POST", "/v1/hooks/git", &[("X-Hub-Signature-256", &signature)], Some(body));
    assert!(answered.status / 100 == 2, "{} {}", answered.status, answered.text());
    // The poll is ten minutes away: only the call can have fetched it.
    fixture.wait("the pushed commit, fetched on the call", Duration::from_secs(10), |s| synced(s, "Adapter", "two"));
}
