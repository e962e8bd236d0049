//! What an operator meets with the default flags: listener flags that contradict each other are
//! refused before anything starts, the daemons of two projects on one host run side by side,
//! `status` fails when it cannot tell, a fresh scaffold reads as intended on day one, and logs to
//! a pipe carry no colour.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{API, binary, commit_all, engine_or_skip, stderr, stdout, write};

const MOCK: &str = "kind: Adapter\nmetadata: {name: mock}\nspec:\n  timeout: 5m\n";

/// `roundtable ARGS` in `root` as an operator runs it: no listener in the environment, `envs`
/// added; killed after `limit` (a command that should have been refused might serve forever).
fn run(root: &Path, args: &[&str], envs: &[(&str, &str)], limit: Duration) -> Output {
    let mut child = command(root)
        .args(args)
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run roundtable");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().expect("output")
}

/// The binary in `root` with none of the variables a test run might carry.
fn command(root: &Path) -> Command {
    let mut command = Command::new(binary());
    command
        .current_dir(root)
        .env_remove("ROUNDTABLE_API_LISTEN")
        .env_remove("ROUNDTABLE_DIR")
        .env_remove("ROUNDTABLE_STATE_DIR")
        .env_remove("ROUNDTABLE_STORE")
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .env("ROUNDTABLE_AUDIT_KEY", root.join(".test-audit.key"));
    command
}

/// A committed project whose specs are `specs` (after the apiVersion line).
fn project(specs: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "README.md", "# Project\n");
    write(dir.path(), ".roundtable/specs.yaml", &format!("{API}\n{specs}"));
    commit_all(dir.path());
    dir
}

/// `roundtable start` with default listener flags (unless `envs` says otherwise), its stderr read through a pipe; SIGTERM, then
/// SIGKILL when dropped.
struct Daemon {
    child: Child,
    root: PathBuf,
    _executions: tempfile::TempDir,
    log: Option<std::thread::JoinHandle<String>>,
}

impl Daemon {
    fn start(root: &Path, envs: &[(&str, &str)]) -> Daemon {
        let executions = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(executions.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod 700");
        let mut child = command(root)
            .arg("start")
            .arg("--execution-root")
            .arg(executions.path())
            .env("RUST_LOG", "info")
            .envs(envs.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start");
        let mut pipe = child.stderr.take().expect("stderr");
        let log = std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        });
        Daemon { child, root: root.to_owned(), _executions: executions, log: Some(log) }
    }

    /// Waits (up to 60 s) until the daemon serves its API; the address it wrote.
    fn serving(&mut self) -> String {
        let file = self.root.join(".roundtable/state/api-address");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                let root = self.root.display().to_string();
                panic!("the daemon in {root} exited ({status}): {}", self.log());
            }
            if let Ok(address) = std::fs::read_to_string(&file)
                && !address.trim().is_empty()
            {
                return address.trim().to_owned();
            }
            assert!(Instant::now() < deadline, "the daemon in {} did not serve within 60 s", self.root.display());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM; the exit status and everything it wrote on stderr.
    fn stop(mut self) -> (ExitStatus, String) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().expect("kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "the daemon did not stop within 30 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        (status, self.log())
    }

    fn log(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log.take().map(|log| log.join().expect("log reader")).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every pair of listener flags that cannot both hold is a usage error (64) naming both, before
/// anything starts: TLS on a Unix socket used to serve plain HTTP without a word.
#[test]
fn contradictory_listener_flags_are_refused_before_anything_starts() {
    /// The flags given, the environment added, and what the refusal must name.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: [Case; 5] = [
        (
            &["--api-listen", "unix:api.sock", "--tls-cert", "/nonexistent", "--tls-key", "/nonexistent"],
            &[],
            &["--tls-cert", "--api-listen unix:api.sock"],
        ),
        (
            &["--tls-cert", "/nonexistent", "--tls-key", "/nonexistent"],
            &[("ROUNDTABLE_API_LISTEN", "unix:api.sock")],
            &["--tls-cert", "--api-listen unix:api.sock"],
        ),
        (&["--tls-cert", "/nonexistent", "--tls-key", "/nonexistent"], &[], &["--tls-cert", "--api-listen IP:PORT"]),
        (&["--api-listen", "127.0.0.1:0", "--tls-cert", "/nonexistent"], &[], &["--tls-cert needs --tls-key"]),
        (&["--api-listen", "127.0.0.1:0", "--tls-key", "/nonexistent"], &[], &["--tls-key needs --tls-cert"]),
    ];
    for (flags, envs, named) in cases {
        let dir = project(MOCK);
        let root = dir.path();
        let args: Vec<&str> = ["start"].iter().chain(flags).copied().collect();
        let out = run(root, &args, envs, Duration::from_secs(20));
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(64), "{flags:?} {envs:?}: {said}");
        for name in named {
            assert!(said.contains(name), "{flags:?} {envs:?}: the error names {name:?}: {said}");
        }
        assert!(!root.join(".roundtable/state").exists(), "{flags:?}: nothing was created");
        assert!(!root.join("api.sock").exists(), "{flags:?}: nothing listened");
    }
}

/// With default flags the daemon listens on no TCP port (the CLI has its private socket), so a
/// second project's daemon on the same host starts too; both answer `status` and `reconcile`,
/// and `start` says where its API is.
#[test]
fn two_projects_on_one_host_both_run_with_default_flags() {
    let (first, second) = (project(MOCK), project(MOCK));
    let mut daemons = [Daemon::start(first.path(), &[]), Daemon::start(second.path(), &[])];
    for daemon in &mut daemons {
        let address = daemon.serving();
        assert!(address.starts_with("unix:"), "without --api-listen the API is the CLI's socket: {address}");
    }
    for root in [first.path(), second.path()] {
        let status = run(root, &["status"], &[], Duration::from_secs(60));
        assert_eq!(status.status.code(), Some(0), "{}{}", stdout(&status), stderr(&status));
        assert!(stdout(&status).contains("mock"), "{}", stdout(&status));
        let reconcile = run(root, &["reconcile", "Adapter/mock"], &[], Duration::from_secs(60));
        assert_eq!(reconcile.status.code(), Some(0), "{}", stderr(&reconcile));
        assert!(stdout(&reconcile).contains("the daemon"), "answered by the daemon: {}", stdout(&reconcile));
    }
    for daemon in daemons {
        let (status, log) = daemon.stop();
        assert!(status.success(), "{status}: {log}");
        assert!(
            log.contains("API and admin MCP listening") && log.contains("socket=unix:"),
            "start says where the API is: {log}"
        );
        assert!(log.contains("tcp=none"), "and that no TCP port is open: {log}");
    }
}

/// `--api-listen 127.0.0.1:0` is the opt-in: `start` names the port it actually got, and
/// `api-address` holds it.
#[test]
fn start_names_the_tcp_port_it_bound() {
    let dir = project(MOCK);
    let mut daemon = Daemon::start(dir.path(), &[("ROUNDTABLE_API_LISTEN", "127.0.0.1:0")]);
    let address = daemon.serving();
    let port: u16 = address.strip_prefix("127.0.0.1:").and_then(|p| p.parse().ok()).expect("127.0.0.1:PORT");
    assert_ne!(port, 0, "the real port, not the one asked for");
    std::net::TcpStream::connect(("127.0.0.1", port)).expect("the port answers");
    let (_, log) = daemon.stop();
    assert!(log.contains(&format!("tcp=127.0.0.1:{port}")), "{log}");
}

/// Plain `status` fails (1) when it cannot tell: no project here, or the engine unreachable.
#[test]
fn status_fails_without_a_project_or_a_reachable_engine() {
    let empty = tempfile::tempdir().expect("tempdir");
    let out = run(empty.path(), &["status"], &[], Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("spec directory not found"), "{}", stdout(&out));

    let dir = project(MOCK);
    let nowhere = [("DOCKER_HOST", "unix:///nonexistent/roundtable-test/docker.sock")];
    for format in ["text", "json"] {
        let out = run(dir.path(), &["status", "--format", format], &nowhere, Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(1), "{format}: {}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).contains("container engine unreachable"), "{format}: {}", stdout(&out));
    }
}

/// `init`, `start`, `status`: nothing reads as broken on day one. The example Adapter (which has
/// no image yet) is commented out, and the suspended example Assignment is `Suspended`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_scaffold_shows_no_unhealthy_row_on_day_one() {
    let Some(_engine) = engine_or_skip().await else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    commit_all(root);
    let init = run(root, &["init"], &[], Duration::from_secs(60));
    assert!(init.status.success(), "{}", stderr(&init));
    let mut daemon = Daemon::start(root, &[]);
    daemon.serving();
    let deadline = Instant::now() + Duration::from_secs(60);
    let rows = loop {
        let out = run(root, &["status", "--format", "json"], &[], Duration::from_secs(60));
        let status: Value = serde_json::from_str(&stdout(&out)).expect("status JSON");
        let rows = status["items"].as_array().cloned().unwrap_or_default();
        if !rows.is_empty() && rows.iter().all(|row| row["sync"] == "Synced") {
            break rows;
        }
        assert!(Instant::now() < deadline, "the scaffold did not converge: {status:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let unhealthy: Vec<&Value> = rows.iter().filter(|row| row["health"] == "Unhealthy").collect();
    assert!(unhealthy.is_empty(), "day one reads as broken: {unhealthy:#?}");
    let example = rows.iter().find(|row| row["kind"] == "Assignment" && row["name"] == "example").expect("example");
    assert_eq!(example["health"], "Suspended", "{example:#}");
    let text = run(root, &["status"], &[], Duration::from_secs(60));
    assert_eq!(text.status.code(), Some(0), "{}", stdout(&text));
    assert!(stdout(&text).contains("Suspended"), "{}", stdout(&text));
    let strict = run(root, &["status", "--exit-code"], &[], Duration::from_secs(60));
    assert_eq!(strict.status.code(), Some(0), "in sync: {}", stdout(&strict));
    let (status, log) = daemon.stop();
    assert!(status.success(), "{log}");
}

/// Text logs to a pipe (a file, a journal, `2>&1 | less`) carry no ANSI colour.
#[test]
fn a_daemons_log_to_a_pipe_holds_no_escape_byte() {
    let dir = project(MOCK);
    let mut daemon = Daemon::start(dir.path(), &[]);
    daemon.serving();
    let (_, log) = daemon.stop();
    assert!(log.contains("INFO") || log.contains("WARN"), "the daemon logged through tracing: {log}");
    assert!(!log.contains('\u{1b}'), "ANSI escapes in a piped log: {log:?}");
}

/// `examples/images/build.sh OUT` takes relative paths (OUT, `ROUNDTABLE_PROVIDER_CLIS`) as the
/// caller's: the Adapters land in the caller's folder, never in Roundtable's checkout.
#[test]
fn the_image_build_writes_a_relative_output_in_the_callers_folder() {
    let Some(clis) = crate::real_clis::provider_clis() else { return };
    let caller = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(&clis, caller.path().join("clis")).expect("symlink");
    let out = Command::new("bash")
        .arg(crate::support::repo_root().join("examples/images/build.sh"))
        .arg("built-here/adapters.yaml")
        .current_dir(caller.path())
        .env("ROUNDTABLE_PROVIDER_CLIS", "clis")
        .output()
        .expect("bash");
    let stray = crate::support::repo_root().join("built-here");
    let in_checkout = stray.exists();
    if in_checkout {
        let _ = std::fs::remove_dir_all(&stray);
    }
    assert!(!in_checkout, "build.sh wrote into Roundtable's checkout: {}", stderr(&out));
    assert!(out.status.success(), "{}", stderr(&out));
    let adapters = std::fs::read_to_string(caller.path().join("built-here/adapters.yaml")).expect("the caller's file");
    assert!(adapters.contains("metadata: {name: codex}"), "{adapters}");
}

/// On a terminal the text logs are coloured, unless `NO_COLOR` is set (no-color.org): the choice
/// `--log-format text` makes for a pipe must not take colour away from a person, nor force it on
/// one who opted out. `script` gives the command a pseudo-terminal.
#[test]
fn logs_on_a_terminal_are_coloured_unless_no_color_is_set() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipping: no `script` (util-linux) to make a pseudo-terminal");
        return;
    }
    let dir = project(MOCK);
    let on_a_terminal = |no_color: &str| {
        // SQL at debug, which RUST_LOG must name to see.
        let line = format!("env RUST_LOG=debug,sqlx=debug NO_COLOR={no_color} {} status", binary().display());
        let out = Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .current_dir(dir.path())
            .env_remove("ROUNDTABLE_API_LISTEN")
            .env("ROUNDTABLE_AUDIT_KEY", dir.path().join(".test-audit.key"))
            .stdin(Stdio::null())
            .output()
            .expect("script");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let coloured = on_a_terminal("");
    assert!(coloured.contains("DEBUG") && coloured.contains('\u{1b}'), "a terminal gets colour: {coloured:?}");
    let plain = on_a_terminal("1");
    assert!(plain.contains("DEBUG") && !plain.contains('\u{1b}'), "NO_COLOR=1 gets none: {plain:?}");
}
