//! Debian's Podman (4.3.1) serving its Docker-compatible API on a socket in a private root (its
//! own storage and run folders), with the test images loaded: the engine a test points
//! `DOCKER_HOST` at. Stopped, unmounted and removed on drop.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{ensure_test_images, stderr, stdout};

/// A running `podman system service`.
pub struct Podman {
    child: Child,
    dir: tempfile::TempDir,
}

impl Podman {
    /// Starts the service, or `None` (skip) when Podman is not installed and not required.
    pub fn start() -> Option<Self> {
        let found = Path::new("/usr/bin/podman").exists();
        if !crate::support::present_or_skip(found, "ROUNDTABLE_REQUIRE_PODMAN", "podman", "apt-get install podman") {
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let at = |name: &str| dir.path().join(name).display().to_string();
        let child = Command::new("podman")
            .args(["--root", &at("root"), "--runroot", &at("run"), "system", "service", "--time=0"])
            .arg(format!("unix://{}", at("podman.sock")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("podman system service");
        let started = Instant::now();
        while !dir.path().join("podman.sock").exists() {
            assert!(started.elapsed() < Duration::from_secs(20), "podman's socket did not appear");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(Self { child, dir })
    }

    /// Its `DOCKER_HOST`.
    pub fn host(&self) -> String {
        format!("unix://{}", self.dir.path().join("podman.sock").display())
    }

    /// Copies the test images from the machine's engine into Podman (nothing can be pulled).
    pub fn load_images(&self) {
        ensure_test_images();
        let mut save = Command::new("docker")
            .args(["save", "roundtable-test/agent:latest", "roundtable-test/empty:latest"])
            .env_remove("DOCKER_HOST")
            .stdout(Stdio::piped())
            .spawn()
            .expect("docker save");
        let tar = save.stdout.take().expect("stdout");
        let load = Command::new("docker")
            .args(["--host", &self.host(), "load", "--quiet"])
            .stdin(tar)
            .output()
            .expect("docker load into podman");
        assert!(save.wait().is_ok_and(|s| s.success()) && load.status.success(), "{}{}", stdout(&load), stderr(&load));
    }
}

impl Drop for Podman {
    /// Its containers first (each with its conmon and mounts), then the service, then whatever is
    /// still mounted under its folder.
    fn drop(&mut self) {
        let at = |name: &str| self.dir.path().join(name).display().to_string();
        let _ = Command::new("podman")
            .args(["--root", &at("root"), "--runroot", &at("run"), "rm", "--all", "--force", "--time=0"])
            .output();
        let _ = self.child.kill();
        let _ = self.child.wait();
        // conmon outlives an exec by minutes (its --exit-delay): whatever names the folder goes,
        // then its overlay mounts.
        crate::support::kill_and_unmount_under(self.dir.path());
    }
}
