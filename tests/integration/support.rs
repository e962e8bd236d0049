//! Helpers shared by the integration tests: running the binary, writing spec trees and
//! committed projects, finding the engine and the test images, running the daemon and waiting
//! on its sessions.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The repository root (the root package's manifest directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The static `roundtable` binary under test.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_roundtable"))
}

/// Runs `roundtable` with `args` in `cwd`, with a clean logging environment.
pub fn roundtable(cwd: &Path, args: &[&str]) -> Output {
    roundtable_with_env(cwd, args, &[])
}

/// [`roundtable`] with `env` set too (`DOCKER_HOST` of a private engine).
pub fn roundtable_with_env(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(binary())
        .args(args)
        .envs(env.iter().copied())
        .current_dir(cwd)
        // The tests reach the API over TCP (opt-in), each daemon on a free port.
        .env("ROUNDTABLE_API_LISTEN", "127.0.0.1:0")
        .env_remove("RUST_LOG")
        .env_remove("ROUNDTABLE_DIR")
        .env_remove("ROUNDTABLE_STATE_DIR")
        .env_remove("ROUNDTABLE_STORE")
        // A command that writes the audit chain keeps its key with the test project.
        .env("ROUNDTABLE_AUDIT_KEY", cwd.join(".test-audit.key"))
        .output()
        .expect("run roundtable")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes `files` (relative path, contents) under a fresh temporary directory.
pub fn spec_tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, text).expect("write");
    }
    dir
}

/// `found`, or why not: a tool a test needs that is missing fails the run when `require` (an
/// environment variable CI sets) is set, and is a skip otherwise, saying how to `install` it.
pub fn present_or_skip(found: bool, require: &str, missing: &str, install: &str) -> bool {
    if !found {
        assert!(std::env::var_os(require).is_none(), "{require} is set but {missing} is not installed");
        eprintln!("skipping: {install}");
    }
    found
}

/// Whether the Python package `module` can be imported (`pip` names it `package`): a client the
/// tests check our output with. Missing, it is a skip, unless the run requires the Python clients
/// (`ROUNDTABLE_REQUIRE_PYTHON_CLIENTS`, as CI does).
pub fn python_module_or_skip(module: &str, package: &str) -> bool {
    let probe = Command::new("python3").args(["-c", &format!("import {module}")]).output();
    let found = probe.is_ok_and(|out| out.status.success());
    present_or_skip(found, "ROUNDTABLE_REQUIRE_PYTHON_CLIENTS", package, &format!("pip install {package}"))
}

/// Whether container tests must run (CI) rather than skip when the engine is missing.
pub fn containers_required() -> bool {
    std::env::var("ROUNDTABLE_REQUIRE_CONTAINER_TESTS").is_ok_and(|v| v == "1")
}

/// Whether the tests run as root (mounting, running a private engine).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// Builds the test images once per test run (the script is idempotent and fast when current).
pub fn ensure_test_images() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let outcome = BUILT.get_or_init(|| {
        let status = Command::new("bash")
            .arg(repo_root().join("tests/images/build.sh"))
            .current_dir(repo_root())
            .status()
            .map_err(|e| e.to_string())?;
        if status.success() { Ok(()) } else { Err(format!("tests/images/build.sh failed: {status}")) }
    });
    if let Err(error) = outcome {
        panic!("{error}");
    }
}

/// The engine, or `None` (skip) when there is none and the run does not require one.
pub async fn engine_or_skip() -> Option<roundtable_docker::Engine> {
    match roundtable_docker::Engine::connect().await {
        Ok(engine) => Some(engine),
        Err(error) if containers_required() => panic!("ROUNDTABLE_REQUIRE_CONTAINER_TESTS=1 but no engine: {error}"),
        Err(error) => {
            eprintln!("skipping container test: {error}");
            None
        }
    }
}

// === projects, the daemon and its sessions ===

/// The `apiVersion` line every spec starts with.
pub const API: &str = "apiVersion: roundtable.dev/v1alpha1";

/// Runs git in `dir` without user or system config; panics on failure, returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("git");
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Writes `contents` to `root/path`, creating folders.
pub fn write(root: &Path, path: &str, contents: &str) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    std::fs::write(full, contents).expect("write");
}

/// The command's stdout as JSON; panics with its output when it is not.
pub fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(out), stderr(out)))
}

/// A committed project with the `generic` Adapter on the test image and one Assignment named
/// `name` that runs `prompt` with README.md readable.
pub fn one_assignment_project(name: &str, prompt: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n---\n{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: generic\n  task: {{id: T, prompt: '{prompt}'}}\n  readablePaths: [README.md]\n"
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    dir
}

/// Commits everything in `root` on `main`.
pub fn commit_all(root: &Path) {
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "base"]);
}

/// `roundtable start` in `root` with `args`, its executions under `executions`.
pub fn start_daemon(root: &Path, args: &[&str], executions: &Path) -> Daemon {
    start_daemon_with_env(root, args, executions, &[])
}

/// [`start_daemon`] with extra environment variables (like `DOCKER_HOST`).
pub fn start_daemon_with_env(root: &Path, args: &[&str], executions: &Path, env: &[(&str, &str)]) -> Daemon {
    spawn_daemon(Command::new(binary()), root, args, executions, env)
}

/// [`start_daemon_with_env`] in the network namespace `netns` (`/proc/PID/ns/net`): to reach an
/// engine that listens on that namespace's loopback.
pub fn start_daemon_in_netns(
    netns: &str,
    root: &Path,
    args: &[&str],
    executions: &Path,
    env: &[(&str, &str)],
) -> Daemon {
    // nsenter execs the binary, so the child is the daemon itself (SIGTERM reaches it).
    let mut command = Command::new("nsenter");
    command.arg(format!("--net={netns}")).arg("--").arg(binary());
    spawn_daemon(command, root, args, executions, env)
}

fn spawn_daemon(mut command: Command, root: &Path, args: &[&str], executions: &Path, env: &[(&str, &str)]) -> Daemon {
    // The daemon refuses an execution root others can reach; the test made this one.
    std::fs::set_permissions(executions, std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod 700");
    let log = std::fs::File::create(executions.join("daemon.log")).expect("log");
    let child = command
        .arg("start")
        .args(args)
        // The tests reach the API over TCP (opt-in), each daemon on a free port.
        .env("ROUNDTABLE_API_LISTEN", "127.0.0.1:0")
        .arg("--execution-root")
        .arg(executions)
        .current_dir(root)
        .env("RUST_LOG", "info,roundtable_docker=debug")
        // The audit key stays with the test, not under the host's /var/lib/roundtable.
        .env("ROUNDTABLE_AUDIT_KEY", executions.join("audit.key"))
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start");
    Daemon(child)
}

/// The daemon process, killed when dropped.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    /// SIGTERM first, as an operator stops a daemon: it removes what it has in flight (a probe
    /// container, say) on the way out, which a SIGKILL would leave behind. Killed after 20 s.
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The phases of `assignment`'s sessions, newest first.
pub fn session_phases(root: &Path, assignment: &str) -> Vec<String> {
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let items = sessions["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter(|s| s["assignment"] == assignment)
        .filter_map(|s| s["phase"].as_str().map(str::to_owned))
        .collect()
}

/// Waits (up to 20 s) until no container or volume labelled for the project in `root` remains.
pub async fn nothing_left(engine: &roundtable_docker::Engine, root: &Path) {
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let leftovers = engine.labelled(&project_id).await.expect("list");
        if leftovers.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "left behind: {leftovers:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls `check` until it holds; panics after 60 s.
pub async fn wait_until(what: &str, check: impl Fn() -> bool) {
    wait_until_within(what, Duration::from_secs(60), check).await;
}

/// Polls `check` until it holds; panics after `limit`.
pub async fn wait_until_within(what: &str, limit: Duration, check: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs the `docker` CLI (for image fixtures the runtime does not make); panics on failure,
/// returns trimmed stdout.
pub fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().expect("docker");
    assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Prints the daemon's log and the sessions when a test fails, for diagnosis.
pub struct ShowLogOnPanic(pub PathBuf, pub PathBuf);

impl Drop for ShowLogOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- daemon log ---\n{}", std::fs::read_to_string(&self.0).unwrap_or_default());
            let sessions = roundtable(&self.1, &["sessions", "list"]);
            let status = roundtable(&self.1, &["status"]);
            eprintln!("--- sessions ---\n{}--- status ---\n{}", stdout(&sessions), stdout(&status));
            for object in ["Assignment/long", "Adapter/generic"] {
                eprintln!("--- {object} ---\n{}", stdout(&roundtable(&self.1, &["describe", object])));
            }
        }
    }
}

/// The daemon arguments that send every broker's upstream leg to `provider`, a fake HTTPS model
/// API on a loopback address that `dns` resolves its host to: the resolver, the address
/// exception, dialing only loopback, and the fake's certificate (written under `executions`)
/// trusted through `--broker-test-ca`.
pub fn fake_provider_args(
    executions: &Path,
    provider: &roundtable_net_fixtures::FakeResponses,
    dns: &roundtable_net_fixtures::FakeDns,
) -> Vec<String> {
    let ca = executions.join("provider-ca.pem");
    std::fs::write(&ca, &provider.identity.pem).expect("the provider's certificate");
    [
        "--gateway-resolver".to_owned(),
        dns.address().to_string(),
        "--gateway-allow-cidr".to_owned(),
        format!("{}/32", provider.address.ip()),
        "--gateway-dial-allow".to_owned(),
        "127.0.0.0/8".to_owned(),
        "--broker-test-ca".to_owned(),
        ca.display().to_string(),
    ]
    .into()
}

/// Kills every process whose command line names `dir` (an engine's shims, runtimes and monitors
/// that outlived it), then lazily unmounts whatever is mounted below it, deepest first, so the
/// folder can be removed.
pub fn kill_and_unmount_under(dir: &Path) {
    let name = dir.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(&name)) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut under: Vec<&str> = mounts
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| Path::new(point).starts_with(dir))
        .collect();
    under.sort_by_key(|point| std::cmp::Reverse(point.len()));
    for point in under {
        let _ = Command::new("umount").arg("-l").arg(point).status();
    }
}
