//! A `dockerd` of a test's own: its own data root, exec root, socket and managed containerd, in
//! a network namespace of its own, with the test images copied in. For what the machine's engine
//! must not be put through (a restart) or must not be reconfigured for (another OCI runtime).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use roundtable_docker::Engine;

use crate::support::{containers_required, ensure_test_images, is_root, stderr, stdout};

/// The test images, copied from the machine's engine (nothing can be pulled).
pub const IMAGES: [&str; 2] = ["roundtable-test/agent:latest", "roundtable-test/empty:latest"];
/// How long the private engine may take to answer after a start, or to exit after SIGTERM
/// (a graceful stop gives each container up to 10 s).
const ENGINE_BOUND: Duration = Duration::from_secs(30);

/// A `dockerd` of the test's own under a short temporary folder (Unix socket paths are limited
/// to 108 bytes, and containerd's sockets live under the exec root). Stopped, unmounted and
/// removed when dropped, even on panic; its log is printed when the test fails.
pub struct PrivateEngine {
    dir: tempfile::TempDir,
    dockerd: Option<Child>,
    /// More dockerd flags (a TCP listener with TLS).
    extra_flags: Vec<String>,
    /// A folder of this host the engine sees an empty tmpfs at instead, as an engine on another
    /// machine would not see it: dockerd runs in a mount namespace of its own with a tmpfs there.
    hidden: Option<PathBuf>,
}

impl PrivateEngine {
    /// Starts the engine with `config` as its daemon.json and `extra_flags` besides its own, and
    /// waits until it answers.
    /// With `hidden`, the engine sees an empty tmpfs at that folder of this host.
    pub async fn start_with(
        config: &str,
        extra_flags: Vec<String>,
        hidden: Option<PathBuf>,
    ) -> Result<(Self, Engine), String> {
        let dir = tempfile::Builder::new().prefix("rte-").tempdir_in("/tmp").map_err(|e| e.to_string())?;
        // Its own config file: the machine's daemon.json may set the data root or storage driver,
        // which dockerd refuses to have both as a flag and in a file.
        std::fs::write(dir.path().join("daemon.json"), config).map_err(|e| e.to_string())?;
        let mut engine = Self { dir, dockerd: None, extra_flags, hidden };
        match engine.spawn().await {
            Ok(connected) => Ok((engine, connected)),
            Err(error) => Err(format!("{error}\n--- private dockerd log ---\n{}", engine.log())),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The network namespace dockerd runs in, for a process that must reach its TCP listener.
    pub fn netns(&self) -> Option<String> {
        self.dockerd.as_ref().map(|child| format!("/proc/{}/ns/net", child.id()))
    }

    /// The `DOCKER_HOST` of this engine.
    pub fn host(&self) -> String {
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
        .into_iter()
        .chain(self.extra_flags.iter().cloned())
        .collect()
    }

    /// Starts dockerd (appending to its log) and waits until it answers.
    pub async fn spawn(&mut self) -> Result<Engine, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("dockerd.log"))
            .map_err(|e| e.to_string())?;
        // A network namespace of its own: with `--bridge=none` dockerd deletes the host's
        // `docker0` at start, which would cut the machine's engine off its default network.
        // unshare execs dockerd, so the child is dockerd itself (SIGTERM reaches it).
        let mut command = Command::new("unshare");
        match &self.hidden {
            None => command.args(["--net", "--", "dockerd"]),
            // A private mount namespace (unshare's default propagation): the tmpfs is seen by
            // this dockerd alone; `exec` keeps dockerd the child.
            Some(hidden) => command
                .args([
                    "--net",
                    "--mount",
                    "--",
                    "sh",
                    "-c",
                    "mount -t tmpfs -o size=1m hidden \"$0\" && exec dockerd \"$@\"",
                ])
                .arg(hidden),
        };
        let child = command
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
    pub fn stop(&mut self) -> Result<(), String> {
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
        // Its containerd, and any shim or runtime a wedged container left (their command lines
        // name the engine's folder), then its mounts.
        crate::support::kill_and_unmount_under(self.dir.path());
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

/// The private engine with `config` as its daemon.json and the test images, or `None` (skip)
/// when containers are not required and there is no engine or no way to run one; a failure when
/// they are required.
pub async fn private_engine_or_skip(config: &str) -> Option<(PrivateEngine, Engine)> {
    private_engine_with_flags_or_skip(config, Vec::new()).await
}

/// [`private_engine_or_skip`] with more dockerd flags.
pub async fn private_engine_with_flags_or_skip(config: &str, flags: Vec<String>) -> Option<(PrivateEngine, Engine)> {
    private_engine_started_or_skip(config, flags, None).await
}

/// The private engine seeing an empty folder at `hidden`, as an engine on another machine would
/// (see [`PrivateEngine::start_with`]).
pub async fn private_engine_hiding_or_skip(hidden: &std::path::Path) -> Option<(PrivateEngine, Engine)> {
    private_engine_started_or_skip("{}", Vec::new(), Some(hidden.to_owned())).await
}

async fn private_engine_started_or_skip(
    config: &str,
    flags: Vec<String>,
    hidden: Option<PathBuf>,
) -> Option<(PrivateEngine, Engine)> {
    crate::support::engine_or_skip().await?;
    if !is_root() && !containers_required() {
        eprintln!("skipping: a private dockerd needs root");
        return None;
    }
    ensure_test_images();
    let (private, engine) = match PrivateEngine::start_with(config, flags, hidden).await {
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
