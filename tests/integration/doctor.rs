//! `roundtable doctor` proves what it says by doing it (`docker/src/trial.rs`): on the real engine
//! every step executions take succeeds and nothing it made is left; against Debian's Podman
//! 4.3.1 (its Docker-compatible service, started here in a private root) the tmpfs volumes fail
//! with the engine's own words, the later steps are not tried, and it exits 1.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{binary, engine_or_skip, stderr, stdout};

const STEPS: [&str; 6] = ["tmpfsVolumes", "hardenedContainer", "selfCheck", "hostSockets", "pause", "archive"];

/// `doctor --format json` against `docker_host` (the default engine when `None`): its exit code
/// and its features by name.
pub(crate) fn doctor(docker_host: Option<&str>) -> (Option<i32>, Vec<(String, bool, String)>) {
    let mut command = Command::new(binary());
    command.args(["doctor", "--format", "json"]);
    if let Some(host) = docker_host {
        command.env("DOCKER_HOST", host);
    }
    let out = command.output().expect("run doctor");
    let report: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(&out), stderr(&out)));
    let features = report["items"][0]["features"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let text = |key: &str| f[key].as_str().unwrap_or_default().to_owned();
            (text("name"), f["available"].as_bool().unwrap_or(false), text("detail"))
        })
        .collect();
    (out.status.code(), features)
}

pub(crate) fn feature<'f>(features: &'f [(String, bool, String)], name: &str) -> &'f (String, bool, String) {
    features.iter().find(|(n, _, _)| n == name).unwrap_or_else(|| panic!("no {name} in {features:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_proves_each_feature_by_doing_it_and_leaves_nothing() {
    let Some(engine) = engine_or_skip().await else { return };
    let (code, features) = doctor(None);
    assert_eq!(code, Some(0), "{features:#?}");
    for step in STEPS {
        let (_, available, detail) = feature(&features, step);
        assert!(available, "{step}: {detail}");
    }
    let checked = &feature(&features, "selfCheck").2;
    assert!(checked.contains("confirmed") && checked.contains("must show the host's kernel"), "{features:#?}");
    assert!(feature(&features, "hostSockets").2.contains("connected from inside"), "{features:#?}");
    assert!(feature(&features, "archive").2.contains("read it back unchanged"), "{features:#?}");
    let left = engine.labelled("doctor").await.expect("list");
    assert!(left.is_empty(), "the doctor left {left:?}");
}

/// Debian's Podman serving its Docker-compatible API on a socket in a private root, stopped and
/// removed on drop.
struct Podman {
    child: Child,
    dir: tempfile::TempDir,
}

impl Podman {
    fn start() -> Option<Self> {
        if !Path::new("/usr/bin/podman").exists() {
            assert!(
                std::env::var_os("ROUNDTABLE_REQUIRE_PODMAN").is_none(),
                "ROUNDTABLE_REQUIRE_PODMAN is set but podman is not installed"
            );
            eprintln!("skipping the Podman doctor test: apt-get install podman");
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

    fn host(&self) -> String {
        format!("unix://{}", self.dir.path().join("podman.sock").display())
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn doctor_names_what_podman_cannot_do_and_exits_1() {
    let Some(podman) = Podman::start() else { return };
    let (code, features) = doctor(Some(&podman.host()));
    assert_eq!(code, Some(1), "{features:#?}");
    let (_, available, detail) = feature(&features, "tmpfsVolumes");
    assert!(!available, "{detail}");
    // The engine's own words, once.
    assert!(detail.contains("volume options size and inodes not supported"), "{detail}");
    for step in &STEPS[1..] {
        let (_, available, detail) = feature(&features, step);
        assert!(!available && detail == "not tried: tmpfsVolumes failed", "{step}: {detail}");
    }
}
