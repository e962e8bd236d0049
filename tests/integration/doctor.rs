//! `roundtable doctor` proves what it says by doing it (`docker/src/trial.rs`): on the real engine
//! every step executions take succeeds and nothing it made is left; against Debian's Podman
//! 4.3.1 (its Docker-compatible service, started here in a private root) too, where the kernel
//! proof catches the runtimes Podman's compatible API quietly ignores.

use std::process::Command;

use serde_json::Value;

use crate::podman::Podman;
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
    // An engine with only its default runtime: doctor says how to add gVisor (informational).
    let classes: Vec<&String> =
        features.iter().map(|(name, _, _)| name).filter(|n| n.starts_with("runtimeClass/")).collect();
    if classes.iter().all(|name| name.as_str() == "runtimeClass/others") {
        let (_, available, said) = feature(&features, "runtimeClass/others");
        assert!(!available && said.contains("no runtime but runc") && said.contains("install runsc"), "{said}");
    }
    let left = engine.labelled("doctor").await.expect("list");
    assert!(left.is_empty(), "the doctor left {left:?}");
}

/// Podman 4.3.1 through its Docker-compatible API, once refused (its volumes took `size=` for a
/// quota request, its archive of a paused container names the top folder `/`, its default
/// limits exceed what the host grants): every step now proven. Its runtimes other than its
/// default are a different story: the compatible API ignores the runtime a container asks for
/// (containers/podman#28429), so they are named unavailable with that reason, as admission
/// refuses them.
#[test]
fn doctor_proves_every_step_on_podman_and_names_the_runtime_choice_it_ignores() {
    let Some(podman) = Podman::start() else { return };
    let (code, features) = doctor(Some(&podman.host()));
    assert_eq!(code, Some(0), "{features:#?}");
    for step in STEPS {
        let (_, available, detail) = feature(&features, step);
        assert!(available, "{step}: {detail}");
    }
    if let Some((_, available, detail)) = features.iter().find(|(name, _, _)| name == "runtimeClass/runsc") {
        assert!(!available && detail.contains("ignores HostConfig.Runtime (containers/podman#28429)"), "{detail}");
    }
}
