//! The container engine restarted under a running execution: the session ends `Interrupted`
//! naming the engine, a new attempt runs once the engine is back, one proposal results and
//! nothing labelled is left. Restarting the machine's engine would disturb every other test, so
//! this one runs a private `dockerd` of its own (own data root, exec root, socket and managed
//! containerd) and points the daemon at it with `DOCKER_HOST`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use roundtable_docker::Engine;

use crate::support::{
    ShowLogOnPanic, containers_required, ensure_test_images, is_root, json, nothing_left, one_assignment_project,
    roundtable, session_phases, start_daemon_with_env, stderr, stdout, wait_until,
};

/// The test images, copied from the machine's engine (nothing can be pulled).
const IMAGES: [&str; 2] = ["roundtable-test/agent:latest", "roundtable-test/empty:latest"];
/// How long the private engine may take to answer after a start, or to exit after SIGTERM
/// (a graceful stop gives each container up to 10 s).
const ENGINE_BOUND: Duration = Duration::from_secs(30);

/// A `dockerd` of the test's own under a short temporary folder (Unix socket paths are limited
/// to 108 bytes, and containerd's sockets live under the exec root). Stopped, unmounted and
/// removed when dropped, even on panic; its log is printed when the test fails.
struct PrivateEngine {
    dir: tempfile::TempDir,
    dockerd: Option<Child>,
}

impl PrivateEngine {
    /// Starts the engine and waits until it answers.
    async fn start() -> Result<(Self, Engine), String> {
        let dir = tempfile::Builder::new().prefix("rte-").tempdir_in("/tmp").map_err(|e| e.to_string())?;
        // Its own config file: the machine's daemon.json may set the data root or storage driver,
        // which dockerd refuses to have both as a flag and in a file.
        std::fs::write(dir.path().join("daemon.json"), "{}").map_err(|e| e.to_string())?;
        let mut engine = Self { dir, dockerd: None };
        match engine.spawn().await {
            Ok(connected) => Ok((engine, connected)),
            Err(error) => Err(format!("{error}\n--- private dockerd log ---\n{}", engine.log())),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The `DOCKER_HOST` of this engine.
    fn host(&self) -> String {
        format!("unix://{}", self.path("docker.sock").display())
    }

    /// The dockerd command line: no bridge or iptables (agents run with `network_mode: none`),
    /// vfs storage (works on any backing filesystem, no fuse or overlay needed), no live restore
    /// (the default): a restart kills running containers, which is what this test is about.
    fn flags(&self) -> Vec<String> {
        let dir = self.dir.path().display();
        vec![
            format!("--config-file={dir}/daemon.json"),
            format!("--data-root={dir}/data"),
            format!("--exec-root={dir}/exec"),
            format!("--pidfile={dir}/dockerd.pid"),
            format!("--host={}", self.host()),
            "--bridge=none".into(),
            "--iptables=false".into(),
            "--ip6tables=false".into(),
            "--storage-driver=vfs".into(),
        ]
    }

    /// Starts dockerd (appending to its log) and waits until it answers.
    async fn spawn(&mut self) -> Result<Engine, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("dockerd.log"))
            .map_err(|e| e.to_string())?;
        // A network namespace of its own: with `--bridge=none` dockerd deletes the host's
        // `docker0` at start, which would cut the machine's engine off its default network.
        // unshare execs dockerd, so the child is dockerd itself (SIGTERM reaches it).
        let child = Command::new("unshare")
            .args(["--net", "--", "dockerd"])
            .args(self.flags())
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run unshare --net dockerd: {e}"))?;
        self.dockerd = Some(child);
        let deadline = Instant::now() + ENGINE_BOUND;
        loop {
            if let Some(status) = self.dockerd.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.dockerd = None;
                return Err(format!("dockerd exited at start: {status}"));
            }
            match Engine::connect_to(self.host()).await {
                Ok(engine) if engine.docker().ping().await.is_ok() => return Ok(engine),
                _ if Instant::now() > deadline => {
                    return Err(format!("dockerd did not answer within {ENGINE_BOUND:?}"));
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// SIGTERM, then waits for dockerd to exit: it stops its containers and its containerd.
    fn stop(&mut self) -> Result<(), String> {
        let Some(mut child) = self.dockerd.take() else { return Ok(()) };
        signal("TERM", child.id());
        let deadline = Instant::now() + ENGINE_BOUND;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("dockerd did not stop within {ENGINE_BOUND:?}; killed"));
                }
            }
        }
    }

    /// Copies the test images from the machine's engine.
    fn load_images(&self) -> Result<(), String> {
        let mut save = Command::new("docker")
            .arg("save")
            .args(IMAGES)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("docker save: {e}"))?;
        let tar = save.stdout.take().ok_or("docker save: no stdout")?;
        let load = Command::new("docker")
            .args(["--host", &self.host(), "load", "--quiet"])
            .stdin(tar)
            .output()
            .map_err(|e| format!("docker load: {e}"))?;
        let saved = save.wait().map_err(|e| e.to_string())?;
        if saved.success() && load.status.success() {
            Ok(())
        } else {
            Err(format!("docker save: {saved}; docker load: {}{}", stdout(&load), stderr(&load)))
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("dockerd.log")).unwrap_or_default()
    }

    /// Kills what a failed stop left (dockerd, then its containerd) and lazily unmounts
    /// whatever is still mounted under the folder (dockerd bind-mounts its data root), deepest
    /// first, so the folder can be removed.
    fn force_clean(&mut self) {
        if let Some(mut child) = self.dockerd.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let containerd = std::fs::read_to_string(self.path("exec/containerd/containerd.pid")).unwrap_or_default();
        if let Ok(pid) = containerd.trim().parse::<u32>()
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&*self.dir.path().to_string_lossy()))
        {
            signal("KILL", pid);
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut under: Vec<&str> = mounts
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .filter(|point| Path::new(point).starts_with(self.dir.path()))
            .collect();
        under.sort_by_key(|point| std::cmp::Reverse(point.len()));
        for point in under {
            let _ = Command::new("umount").arg("-l").arg(point).status();
        }
    }
}

impl Drop for PrivateEngine {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            eprintln!("private engine: {error}");
        }
        self.force_clean();
        if std::thread::panicking() {
            eprintln!("--- private dockerd log ---\n{}", self.log());
        }
    }
}

fn signal(name: &str, pid: u32) {
    let _ = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status();
}

/// The private engine with the test images, or `None` (skip) when containers are not required
/// and there is no engine or no way to run one; a failure when they are required.
async fn private_engine_or_skip() -> Option<(PrivateEngine, Engine)> {
    crate::support::engine_or_skip().await?;
    if !is_root() && !containers_required() {
        eprintln!("skipping: a private dockerd needs root");
        return None;
    }
    ensure_test_images();
    let (private, engine) = match PrivateEngine::start().await {
        Ok(started) => started,
        Err(error) if containers_required() => panic!("ROUNDTABLE_REQUIRE_CONTAINER_TESTS=1 but {error}"),
        Err(error) => {
            eprintln!("skipping: cannot start a private dockerd: {error}");
            return None;
        }
    };
    if let Err(error) = private.load_images() {
        panic!("cannot load the test images into the private engine: {error}");
    }
    Some((private, engine))
}

/// The sessions of `assignment`, newest first.
fn sessions(root: &Path, assignment: &str) -> Vec<serde_json::Value> {
    let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let items = listed["items"].as_array().cloned().unwrap_or_default();
    items.into_iter().filter(|s| s["assignment"] == assignment).collect()
}

/// Waits until the agent's `command` runs in the project's container: past the launch and the
/// self-check.
async fn agent_running(engine: &Engine, root: &Path, command: &str) {
    let project_id = roundtable_core::source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let containers = engine.labelled(&project_id).await.expect("list");
        for container in containers.iter().filter(|l| l.kind == roundtable_session_runtime::ResourceKind::Container) {
            let top = engine.docker().top_processes(&container.name, None).await;
            let rows = top.ok().and_then(|t| t.processes).unwrap_or_default();
            if rows.iter().flatten().any(|column| column.contains(command)) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "`{command}` never ran: {containers:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The daemon process is alive and `roundtable status` answers.
fn assert_healthy(daemon: &mut crate::support::Daemon, root: &Path, when: &str) {
    assert!(daemon.0.try_wait().is_ok_and(|s| s.is_none()), "the daemon exited {when}");
    let status = roundtable(root, &["status"]);
    assert!(status.status.success(), "status failed {when}: {}", stderr(&status));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_restart_interrupts_the_running_session_and_it_is_rerun_once() {
    let host_bridge = Path::new("/sys/class/net/docker0").exists();
    let Some((mut private, engine)) = private_engine_or_skip().await else { return };
    let started = Instant::now();
    let dir = one_assignment_project("restart", "sleep 5; echo edited >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let host = private.host();
    let mut daemon = start_daemon_with_env(root, &[], executions.path(), &[("DOCKER_HOST", host.as_str())]);
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    // Restart the engine while the agent runs (its `sleep` is a process in the container).
    wait_until("the first session to run", || {
        sessions(root, "restart").first().is_some_and(|s| s["phase"] == "Running" && s["message"] == "running")
    })
    .await;
    agent_running(&engine, root, "sleep 5").await;
    let restarted = Instant::now();
    private.stop().expect("stop the private engine");
    assert_healthy(&mut daemon, root, "while the engine was down");
    let engine = private.spawn().await.unwrap_or_else(|e| panic!("restart the private engine: {e}"));
    let down_for = restarted.elapsed();

    // The first session ends Interrupted, naming the engine; a second attempt succeeds.
    wait_until("the re-run to succeed", || session_phases(root, "restart") == ["Succeeded", "Interrupted"]).await;
    assert_healthy(&mut daemon, root, "after the restart");
    let [rerun, first] = <[serde_json::Value; 2]>::try_from(sessions(root, "restart")).expect("two sessions");
    assert_eq!(first["cause"], "EngineLost", "{first:#}");
    let message = first["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("the container engine at {host} went away")) && message.contains("restarted"),
        "the reason names the engine: {first:#}"
    );
    let shown = json(&roundtable(root, &["sessions", "show", first["id"].as_str().expect("id"), "--format", "json"]));
    let shown = &shown["items"][0];
    assert_eq!((&shown["phase"], &shown["message"]), (&first["phase"], &first["message"]), "{shown:#}");
    let described = stdout(&roundtable(root, &["describe", "Assignment/restart"]));
    assert!(described.contains("Rerunning") && described.contains(&host), "the re-run says why: {described}");
    assert_eq!((rerun["attempt"].as_i64(), rerun["executionGeneration"].as_i64()), (Some(2), Some(1)), "{rerun:#}");
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    let row = status["items"].as_array().and_then(|r| r.iter().find(|r| r["name"] == "restart").cloned());
    assert!(row.is_some_and(|r| r["conditions"].to_string().contains("ProposalPending")), "{status:#}");

    // Exactly one proposal, from the re-run; nothing labelled left on the engine.
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let items = proposals["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "exactly one proposal: {proposals:#}");
    assert_eq!(items[0]["session"], rerun["id"], "{proposals:#}");
    let patch = stdout(&roundtable(root, &["proposals", "export", items[0]["id"].as_str().expect("id")]));
    assert!(patch.contains("+edited"), "{patch}");
    nothing_left(&engine, root).await;
    assert_healthy(&mut daemon, root, "at the end");
    assert_eq!(Path::new("/sys/class/net/docker0").exists(), host_bridge, "the machine's docker0 is untouched");
    eprintln!(
        "engine down and back in {down_for:?}; interrupted: {message}; re-run succeeded; whole test {:?}",
        started.elapsed()
    );
}

/// The daemon's engine event stream outlives an engine restart: once the private engine is back
/// the daemon subscribes again (and re-reconciles its Adapters, since events were missed), and an
/// image tagged after that shows in `status` within seconds. Without the events, an Adapter whose
/// image is missing is looked at again only once a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_engine_restart_the_daemon_follows_the_engines_events_again() {
    let Some((mut private, _engine)) = private_engine_or_skip().await else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    crate::support::write(
        root,
        ".roundtable/specs.yaml",
        &format!(
            "{}\nkind: Adapter\nmetadata: {{name: generic}}\nspec: {{image: 'roundtable-test/hinted:latest'}}\n",
            crate::support::API
        ),
    );
    crate::support::commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let host = private.host();
    let log = executions.path().join("daemon.log");
    let mut daemon =
        start_daemon_with_env(root, &["--resync", "1h"], executions.path(), &[("DOCKER_HOST", host.as_str())]);
    let _show_log = ShowLogOnPanic(log.clone(), root.to_path_buf());
    let ready = |root: &Path| -> Option<String> {
        let status = json(&roundtable(root, &["status", "--format", "json"]));
        let row =
            status["items"].as_array()?.iter().find(|r| r["kind"] == "Adapter" && r["name"] == "generic")?.clone();
        let condition = row["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")?.clone();
        Some(format!("{} {}", condition["status"].as_str()?, condition["reason"].as_str()?))
    };
    wait_until("the Adapter to find its image missing", || ready(root).is_some_and(|r| r.starts_with("False"))).await;

    private.stop().expect("stop the private engine");
    assert_healthy(&mut daemon, root, "while the engine was down");
    private.spawn().await.unwrap_or_else(|e| panic!("restart the private engine: {e}"));
    wait_until("the daemon to subscribe to the engine's events again", || {
        std::fs::read_to_string(&log).is_ok_and(|text| text.contains("engine event stream resumed"))
    })
    .await;

    let tagged = Command::new("docker")
        .args(["--host", &host, "tag", IMAGES[0], "roundtable-test/hinted:latest"])
        .output()
        .expect("docker tag");
    assert!(tagged.status.success(), "{}", stderr(&tagged));
    let moved = Instant::now();
    crate::support::wait_until_within("the tagged image to show in status", Duration::from_secs(10), || {
        ready(root).is_some_and(|r| r.starts_with("True"))
    })
    .await;
    eprintln!("the image tagged after the restart showed in status after {:?}", moved.elapsed());
    assert_healthy(&mut daemon, root, "at the end");
}
