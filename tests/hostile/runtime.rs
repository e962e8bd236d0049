//! Hostile tests of runtime classes: an AdmissionPolicy requires a runtime class the engine lacks
//! (`gvisor`, which the test first checks the engine does not have). The gate refused the agent,
//! yet admission's probe ran the Adapter's image under the engine's default runtime on every
//! reconcile, and the canary did too. Now nothing of the image runs, and status says why.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    API, ShowLogOnPanic, commit_all, docker, engine_or_skip, ensure_test_images, json, nothing_left, roundtable,
    start_daemon, wait_until_within, write,
};

/// The class required, which the engine must not have.
const LACKING: &str = "gvisor";

/// The Adapter's image under a tag of this test's own, so no other test's containers count.
struct OwnTag(String);

impl OwnTag {
    fn new(test: &str) -> Self {
        let tag = format!("roundtable-test/agent:hostile-{test}-{}", std::process::id());
        docker(&["tag", "roundtable-test/agent:latest", &tag]);
        Self(tag)
    }
}

impl Drop for OwnTag {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", &self.0]).output();
    }
}

/// `docker events` for every container created while it runs, each line the container's
/// attributes (its image and labels).
struct Creations {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Creations {
    fn watch() -> Self {
        let mut child = Command::new("docker")
            .args(["events", "--filter", "type=container", "--filter", "event=create"])
            .args(["--format", "{{json .Actor.Attributes}}"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker events");
        let stdout = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let collected = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str(&line) {
                    collected.lock().expect("lines").push(value);
                }
            }
        });
        // `docker events` subscribes as it starts; give it that moment.
        std::thread::sleep(Duration::from_millis(500));
        Self { child, lines }
    }

    /// The containers created so far of `image` or labelled for `project` (the engine names a
    /// probe's image by its ID, which other tests' images share: the label is what tells).
    fn of(&self, image: &str, project: &str) -> Vec<Value> {
        let lines = self.lines.lock().expect("lines");
        lines.iter().filter(|a| a["image"] == image || a["roundtable.dev/project"] == project).cloned().collect()
    }
}

impl Drop for Creations {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn project(image: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    write(
        root,
        ".roundtable/specs.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: boxed}}\nspec:\n  provider: generic\n  command: sh\n  args: [-c]\n  image: {image}\n---\n\
             {API}\nkind: Assignment\nmetadata: {{name: boxed-work}}\nspec:\n  adapter: boxed\n  task: {{id: T-1, prompt: 'echo ran >> README.md'}}\n  readablePaths: [README.md]\n---\n\
             {API}\nkind: AdmissionPolicy\nmetadata: {{name: policy}}\nspec:\n  requireRuntimeClass: [{LACKING}]\n"
        ),
    );
    // A contract, so admission has something to probe the image with (and a canary transcript).
    write(
        root,
        ".roundtable/contracts/boxed.yaml",
        "adapter: boxed\nversionCommand: [sh, -c, 'echo boxed 1.0.0']\nversionPattern: 'boxed (\\d+\\.\\d+\\.\\d+)'\nhelpCommand: [sh, -c, 'echo usage']\ntranscripts:\n  - name: run\n    prompt: echo hi\n    expect: {args: [-c, echo hi], stdin: empty, env: [HOME, PATH, TMPDIR]}\n    output: hi\n",
    );
    commit_all(root);
    dir
}

fn row(root: &Path, kind: &str, name: &str) -> Option<Value> {
    let status = json(&roundtable(root, &["status", "--format", "json"]));
    status["items"].as_array()?.iter().find(|r| r["kind"] == kind && r["name"] == name).cloned()
}

fn message(row: &Option<Value>) -> String {
    row.as_ref().and_then(|r| r["message"].as_str()).unwrap_or_default().to_owned()
}

/// Whether the engine has `class` registered.
fn engine_has(class: &str) -> bool {
    docker(&["info", "--format", "{{json .Runtimes}}"]).contains(&format!("\"{class}\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_runtime_class_the_engine_lacks_runs_nothing_of_the_adapters_image() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    assert!(!engine_has(LACKING), "the engine has {LACKING}: this test needs a class it lacks");
    let tag = OwnTag::new("runtime");
    let dir = project(&tag.0);
    let root = dir.path();
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let created = Creations::watch();

    let executions = tempfile::tempdir().expect("tempdir");
    let _show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let daemon = start_daemon(root, &["--resync", "1s"], executions.path());
    let refused = |kind: &str, name: &str| message(&row(root, kind, name)).contains("runtimeClass refused");
    wait_until_within("the Adapter and its Assignment to be refused", Duration::from_secs(60), || {
        refused("Adapter", "boxed") && refused("Assignment", "boxed-work")
    })
    .await;
    // A few more reconcile passes (one a second), each of which used to probe the image.
    tokio::time::sleep(Duration::from_secs(5)).await;

    for (kind, name) in [("Adapter", "boxed"), ("Assignment", "boxed-work")] {
        let said = message(&row(root, kind, name));
        assert!(
            said.contains("runtimeClass refused (runtime_not_allowed)")
                && said.contains(&format!("requires {LACKING}"))
                && said.contains("the engine has ")
                && said.contains("runc"),
            "{kind}/{name} does not say why, naming the class and the engine's runtimes: {said}"
        );
    }
    // The canary is a container of the image too (it appends to the chain, with the daemon's key).
    std::fs::copy(executions.path().join("audit.key"), root.join(".test-audit.key")).expect("the audit key");
    let canary = roundtable(root, &["admission", "canary", "boxed"]);
    let said = format!("{}{}", crate::support::stdout(&canary), crate::support::stderr(&canary));
    assert!(!canary.status.success() && said.contains("nothing of adapter boxed's image is started"), "{said}");
    drop(daemon);
    // What the engine announced last is read.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let ran = created.of(&tag.0, &project_id);
    assert!(ran.is_empty(), "containers of the refused Adapter's image were created: {ran:#?}");
    assert!(crate::support::session_phases(root, "boxed-work").is_empty(), "no session");
    nothing_left(&engine, root).await;
}

/// The canary run from the CLI before any daemon recorded the policy: it decided by the
/// recorded policy (none yet, so no required class) and ran the image under runc, green.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_before_any_daemon_decides_by_the_declared_policy_and_runs_nothing() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    assert!(!engine_has(LACKING), "the engine has {LACKING}: this test needs a class it lacks");
    let tag = OwnTag::new("canary");
    let dir = project(&tag.0);
    let root = dir.path();
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let created = Creations::watch();
    let canary = roundtable(root, &["admission", "canary", "boxed"]);
    let said = format!("{}{}", crate::support::stdout(&canary), crate::support::stderr(&canary));
    assert!(!canary.status.success() && said.contains("nothing of adapter boxed's image is started"), "{said}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ran = created.of(&tag.0, &project_id);
    assert!(ran.is_empty(), "containers of the refused Adapter's image were created: {ran:#?}");
    nothing_left(&engine, root).await;
}

/// Agent diagnostics start a probe container of the image too: refused, they report the
/// refusal and start nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_of_an_adapter_refused_its_runtime_class_start_nothing() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    assert!(!engine_has(LACKING), "the engine has {LACKING}: this test needs a class it lacks");
    let tag = OwnTag::new("diagnostics");
    let dir = project(&tag.0);
    let root = dir.path();
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let created = Creations::watch();
    let executions = tempfile::tempdir().expect("tempdir");
    let _show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let daemon = start_daemon(root, &[], executions.path());
    let api = crate::http::Api::of(&root.join(".roundtable/state")).await;
    wait_until_within("the Adapter to be refused", Duration::from_secs(60), || {
        message(&row(root, "Adapter", "boxed")).contains("runtimeClass refused")
    })
    .await;
    let workspace = root.file_name().and_then(|n| n.to_str()).expect("a folder name");
    let report = api.call("POST", &format!("/v1/workspaces/{workspace}/agents/boxed/diagnostics"), &[], None);
    assert!(
        report.text().contains("nothing of adapter boxed's image is started"),
        "{} {}",
        report.status,
        report.text()
    );
    drop(daemon);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ran = created.of(&tag.0, &project_id);
    assert!(ran.is_empty(), "diagnostics created containers of the refused Adapter's image: {ran:#?}");
    nothing_left(&engine, root).await;
}
