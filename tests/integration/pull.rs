//! Images from a registry, on the real engine against a real registry (Debian's
//! `docker-registry` on loopback, `registry.rs`): an Adapter's image named by digest that the
//! engine lacks is pulled once however many Adapters name it, its progress shown in `status`,
//! checked against the digest, and an Assignment then runs in it to a proposal; a digest the
//! registry serves no manifest for is refused and nothing runs; a tag is pulled only while the
//! AdmissionPolicy allows tags. The attacks (an edited manifest, a lying engine, a stuck
//! registry, credentials) are in `tests/hostile/pull.rs`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::registry::{Pace, PulledImages, Registry, Relay};
use crate::support::{
    API, ShowLogOnPanic, commit_all, engine_or_skip, ensure_test_images, json, nothing_left, roundtable,
    session_phases, start_daemon, stdout, wait_until_within, write,
};

/// The `Ready` condition of `kind/name` in `status --format json`: status, reason, message.
pub fn ready(root: &Path, kind: &str, name: &str) -> (String, String, String) {
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    let condition = status["items"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["kind"] == kind && r["name"] == name))
        .and_then(|row| row["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready").cloned())
        .unwrap_or_default();
    let text = |field: &str| condition[field].as_str().unwrap_or_default().to_owned();
    (text("status"), text("reason"), text("message"))
}

/// The condition `type_` of `kind/name`: status and reason.
pub fn condition(root: &Path, kind: &str, name: &str, type_: &str) -> (String, String) {
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    let condition = status["items"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["kind"] == kind && r["name"] == name))
        .and_then(|row| row["conditions"].as_array()?.iter().find(|c| c["type"] == type_).cloned())
        .unwrap_or_default();
    let text = |field: &str| condition[field].as_str().unwrap_or_default().to_owned();
    (text("status"), text("reason"))
}

/// The events of `object` (`Kind/name`): reason and message, newest first.
pub fn events(root: &Path, object: &str) -> Vec<(String, String)> {
    let listed = json(&roundtable(root, &["events", object, "--format", "json"]));
    listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (e["reason"].as_str().unwrap_or_default().to_owned(), e["message"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

/// A committed project: the `generic` Adapter on `image`, and one Assignment on it.
pub fn project_on(image: &str, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: '{image}'\n---\n{API}\nkind: Assignment\nmetadata: {{name: pulled}}\nspec:\n  adapter: generic\n  task: {{id: T, prompt: 'echo pulled >> README.md'}}\n  readablePaths: [README.md]\n{extra}"
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    dir
}

/// The engine's image ID under `reference`, if it holds one.
pub fn image_id(reference: &str) -> Option<String> {
    let out = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", reference])
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_named_by_digest_is_pulled_once_with_its_progress_shown_checked_and_run() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let registry = Registry::start();
    let pushed =
        registry.push_unique("rt-pull-test", &format!("run-{}", std::process::id()), "pull-run", 6 << 20, None);
    // Through a relay at 1.5 MiB/s the pull takes seconds, long enough to watch its progress.
    let relay = Relay::start(registry.address, Pace::Throttled(3 << 19));
    let reference = pushed.by_digest(&relay.host());
    let _pulled = PulledImages(vec![reference.clone()]);
    assert_eq!(image_id(&reference), None, "the engine must not have it before the test");

    // A second Adapter names the same image: one pull serves both.
    let twin = format!(
        "---\n{API}\nkind: Adapter\nmetadata: {{name: twin}}\nspec: {{provider: generic, command: sh, args: ['-c'], image: '{reference}'}}\n"
    );
    let project = project_on(&reference, &twin);
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    // While it pulls, the Adapter's Ready condition (and so its status row) shows how far it is,
    // and the Assignment waiting on it says so.
    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut progress, mut waiting) = (None, None);
    loop {
        let (status, reason, message) = ready(root, "Adapter", "generic");
        if reason == "ImagePulling" && message.contains(" MiB)") && !message.contains("(0.0 of") {
            assert_eq!(status, "Unknown", "{message}");
            progress.get_or_insert(message.clone());
        }
        let (_, assignment_reason, assignment_message) = ready(root, "Assignment", "pulled");
        if assignment_reason == "AdapterNotReady" && assignment_message.contains("pulling") {
            waiting.get_or_insert(assignment_message);
        }
        if status == "True" {
            break;
        }
        assert!(Instant::now() < deadline, "the Adapter did not become Ready: {status} {reason} {message}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let progress = progress.expect("the pull's progress was shown");
    eprintln!("seen while pulling: {progress}");
    assert!(progress.starts_with(&format!("pulling {reference} (")) && progress.contains(" of 6.0 MiB)"), "{progress}");
    eprintln!("the Assignment meanwhile: {}", waiting.as_deref().unwrap_or("(not seen)"));

    // What the engine holds is what was pushed, and both Adapters resolved it from one pull.
    assert_eq!(image_id(&reference).as_deref(), Some(pushed.image_id.as_str()));
    let (_, reason, message) = ready(root, "Adapter", "generic");
    assert_eq!(reason, "ImageResolved", "{message}");
    wait_until_within("the twin to resolve the same pull", Duration::from_secs(30), || {
        ready(root, "Adapter", "twin").1 == "ImageResolved"
    })
    .await;
    let log = std::fs::read_to_string(executions.path().join("daemon.log")).unwrap_or_default();
    let pulls = log.lines().filter(|l| l.contains("pulling an image") && l.contains(&pushed.digest)).count();
    assert_eq!(pulls, 1, "one pull for two Adapters:\n{log}");
    for adapter in ["Adapter/generic", "Adapter/twin"] {
        let events = events(root, adapter);
        let pulled: Vec<&(String, String)> = events.iter().filter(|(reason, _)| reason == "ImagePulled").collect();
        assert_eq!(pulled.len(), 1, "{adapter}: {events:?}");
        assert!(pulled[0].1.starts_with(&format!("pulled {reference} as {}", pushed.image_id)), "{pulled:?}");
    }
    assert!(log.contains("pulled an image"), "the daemon logs the pull's end:\n{log}");

    // An Assignment on it runs to a proposal.
    wait_until_within("the Assignment to propose", Duration::from_secs(90), || {
        session_phases(root, "pulled").first().is_some_and(|phase| phase == "Succeeded")
    })
    .await;
    let proposals = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let proposal =
        proposals["items"].as_array().and_then(|items| items.iter().find(|p| p["assignment"] == "pulled").cloned());
    let proposal = proposal.unwrap_or_else(|| panic!("a proposal: {proposals:#}"));
    let patch = stdout(&roundtable(root, &["proposals", "export", proposal["id"].as_str().expect("id")]));
    assert!(patch.contains("+pulled"), "{patch}");

    drop(daemon);
    nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_the_registry_serves_no_manifest_for_is_refused_and_nothing_runs() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let registry = Registry::start();
    let pushed =
        registry.push_unique("rt-pull-test", &format!("blob-{}", std::process::id()), "pull-blob", 64 << 10, None);
    // The digest of another blob of that repository (its config, whose digest is the image ID):
    // the registry has it, but not as a manifest.
    let reference = format!("{}/{}@{}", registry.host(), pushed.repository, pushed.image_id);
    let _pulled = PulledImages(vec![reference.clone()]);
    let project = project_on(&reference, "");
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    wait_until_within("the pull to fail", Duration::from_secs(60), || {
        ready(root, "Adapter", "generic").1 == "ImagePullBackOff"
    })
    .await;
    let (status, _, message) = ready(root, "Adapter", "generic");
    assert_eq!(status, "False");
    assert!(message.starts_with(&format!("pulling {reference} failed (attempt 1): ")), "{message}");
    assert!(message.contains("tried again 10 s after it failed"), "{message}");
    let failed: Vec<(String, String)> =
        events(root, "Adapter/generic").into_iter().filter(|(reason, _)| reason == "ImagePullFailed").collect();
    assert!(!failed.is_empty(), "an ImagePullFailed event");

    // Nothing runs: the Assignment waits on its Adapter and never gets a session.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, reason, message) = ready(root, "Assignment", "pulled");
    assert_eq!(reason, "AdapterNotReady", "{message}");
    assert!(session_phases(root, "pulled").is_empty(), "no session");
    assert_eq!(image_id(&reference), None);

    drop(daemon);
    nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_is_pulled_only_while_the_admission_policy_allows_tags() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let registry = Registry::start();
    let run = std::process::id();
    let allowed = registry.push_unique("rt-pull-test", &format!("tag-{run}"), "pull-tag", 64 << 10, None);
    let refused = registry.push_unique("rt-pull-test", &format!("pinned-{run}"), "pull-pinned", 64 << 10, None);
    let tagged = allowed.by_tag(&registry.host());
    let _pulled = PulledImages(vec![tagged.clone(), refused.by_tag(&registry.host())]);

    // No AdmissionPolicy: tags are allowed (with a warning), so it is pulled, and the Adapter is
    // Degraded for being unpinned.
    let project = project_on(&tagged, "");
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until_within("the tag to be pulled", Duration::from_secs(60), || {
        ready(root, "Adapter", "generic").0 == "True"
    })
    .await;
    assert_eq!(image_id(&tagged).as_deref(), Some(allowed.image_id.as_str()));
    assert_eq!(condition(root, "Adapter", "generic", "Degraded"), ("True".into(), "ImageNotPinned".into()));
    drop(daemon);
    nothing_left(&engine, root).await;

    // requireDigest: the tag is an error where it is written, and nothing is asked of the registry.
    let policy =
        format!("---\n{API}\nkind: AdmissionPolicy\nmetadata: {{name: policy}}\nspec: {{requireDigest: true}}\n");
    let strict_tag = refused.by_tag(&registry.host());
    let project = project_on(&strict_tag, &policy);
    let root = project.path();
    let validated = roundtable(root, &["validate"]);
    assert_eq!(validated.status.code(), Some(1));
    assert!(stdout(&validated).contains("requireDigest"), "{}", stdout(&validated));
    let executions = tempfile::tempdir().expect("tempdir");
    let mark = registry.log().len();
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until_within("the file error in status", Duration::from_secs(30), || {
        let status = json(&roundtable(root, &["status", "--format", "json"]));
        status.to_string().contains("requireDigest")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let asked = registry.requests_since(mark);
    assert!(asked.is_empty(), "the registry was asked for the refused tag: {asked:#?}");
    assert_eq!(image_id(&strict_tag), None);
    drop(daemon);
    nothing_left(&engine, root).await;
}
