//! The daemon end to end with the real binary: edits converge, a broken file keeps its objects,
//! a removed spec is cleaned up, `status --exit-code` follows, one daemon per state directory.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{binary, roundtable, spec_tree, stderr, stdout};

const MOCK: &str = "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: mock}\nspec:\n  timeout: 5m\n";

/// A running `roundtable start`, stopped with SIGTERM (then killed) when dropped.
struct Daemon(Child);

impl Daemon {
    fn start(project: &Path) -> Daemon {
        let child = Command::new(binary())
            .args(["start", "--resync", "1m"])
            .current_dir(project)
            // The tests reach the API over TCP (opt-in), each daemon on a free port.
            .env("ROUNDTABLE_API_LISTEN", "127.0.0.1:0")
            .env("ROUNDTABLE_AUDIT_KEY", project.join(".test-audit.key"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the daemon");
        Daemon(child)
    }

    /// Sends SIGTERM and waits for a clean exit.
    fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.0.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().expect("kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.0.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the daemon did not stop within 20 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status_json(project: &Path) -> Value {
    let out = roundtable(project, &["status", "--format", "json"]);
    serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("status is not JSON ({e}): {}{}", stdout(&out), stderr(&out)))
}

fn row<'a>(status: &'a Value, kind: &str, name: &str) -> Option<&'a Value> {
    status["items"].as_array()?.iter().find(|r| r["kind"] == kind && r["name"] == name)
}

/// Polls `status` until `check` holds, failing with the last status after 15 s.
fn wait_for(project: &Path, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let status = status_json(project);
        if check(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}; last status: {status:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn exit_code(project: &Path) -> Option<i32> {
    roundtable(project, &["status", "--exit-code"]).status.code()
}

#[test]
fn the_daemon_converges_edits_keeps_broken_files_and_cleans_up() {
    let project = spec_tree(&[(".roundtable/adapters.yaml", MOCK)]);
    let root = project.path();
    assert_eq!(exit_code(root), Some(2), "new objects are drift before the daemon runs");
    assert!(!root.join(".roundtable/state").exists(), "status creates nothing");

    let daemon = Daemon::start(root);
    wait_for(root, "the first convergence", |s| {
        row(s, "Adapter", "mock").is_some_and(|r| r["sync"] == "Synced" && r["observedGeneration"] == 1)
    });
    assert_eq!(exit_code(root), Some(0));

    let second = roundtable(root, &["start"]);
    assert_eq!(second.status.code(), Some(1));
    assert!(stderr(&second).contains("another roundtable daemon holds"), "{}", stderr(&second));
    assert!(stderr(&second).contains(&format!("pid {}", daemon.0.id())), "{}", stderr(&second));

    // An edit: the new generation is observed.
    std::fs::write(root.join(".roundtable/adapters.yaml"), MOCK.replace("5m", "7m")).expect("edit");
    wait_for(root, "generation 2 observed", |s| {
        row(s, "Adapter", "mock")
            .is_some_and(|r| r["generation"] == 2 && r["observedGeneration"] == 2 && r["sync"] == "Synced")
    });

    // A broken file: the object keeps its last valid spec and the error shows.
    std::fs::write(root.join(".roundtable/adapters.yaml"), format!("{MOCK}  bogus: [\n")).expect("break");
    let status = wait_for(root, "the file error", |s| row(s, "File", ".roundtable/adapters.yaml").is_some());
    let kept = row(&status, "Adapter", "mock").expect("the object is kept");
    assert_eq!(kept["generation"], 2);
    assert!(kept["message"].as_str().is_some_and(|m| m.contains("keeping the last valid spec")), "{kept:#}");
    assert_eq!(exit_code(root), Some(1), "an error outranks drift");

    // Removed: cleanup, then forgotten.
    std::fs::remove_file(root.join(".roundtable/adapters.yaml")).expect("remove");
    wait_for(root, "the cleanup", |s| s["items"].as_array().is_some_and(|items| items.is_empty()));
    assert_eq!(exit_code(root), Some(0));
    let describe = roundtable(root, &["describe", "Adapter/mock"]);
    assert_eq!(describe.status.code(), Some(1), "forgotten after cleanup");

    assert!(daemon.stop().success(), "SIGTERM stops the daemon cleanly");
}

#[test]
fn plan_describe_and_reconcile_without_a_daemon() {
    let project = spec_tree(&[(".roundtable/adapters.yaml", MOCK)]);
    let root = project.path();
    let plan = roundtable(root, &["plan"]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let shown = stdout(&plan);
    assert!(shown.contains("+ Adapter/mock: create at generation 1"), "{shown}");
    assert!(shown.contains("~ Adapter/mock: condition Ready = True (NoImageNeeded)"), "{shown}");

    let reconciled = roundtable(root, &["reconcile", "adapter/mock"]);
    assert!(reconciled.status.success(), "{}", stderr(&reconciled));
    let plan = roundtable(root, &["plan"]);
    assert!(stdout(&plan).contains("No changes."), "converged, then the plan is empty: {}", stdout(&plan));

    let describe = roundtable(root, &["describe", "Adapter/mock"]);
    let shown = stdout(&describe);
    assert!(shown.contains("Generation:  1 (observed 1)"), "{shown}");
    assert!(shown.contains("NoImageNeeded"), "{shown}");
    assert!(shown.contains("SpecChanged"), "events are listed: {shown}");
    // One object, as the API answers it: not a list of one.
    let as_json = roundtable(root, &["describe", "Adapter/mock", "--format", "json"]);
    let item: Value = serde_json::from_str(&stdout(&as_json)).expect("json");
    assert_eq!(item["status"]["health"], "Healthy", "{item:#}");
    assert_eq!(item["items"], Value::Null, "{item:#}");
    // YAML as kubectl writes it: the stored resource's kind and metadata before its spec.
    let as_yaml = stdout(&roundtable(root, &["describe", "Adapter/mock", "-o", "yaml"]));
    assert!(as_yaml.starts_with("spec:\n  apiVersion: "), "{as_yaml}");
    let (kind, metadata, spec) = (as_yaml.find("\n  kind: "), as_yaml.find("\n  metadata:"), as_yaml.find("\n  spec:"));
    assert!(kind < metadata && metadata < spec && kind.is_some(), "{as_yaml}");
    // `-o name` and a JSONPath template, over listings and one object alike.
    assert_eq!(stdout(&roundtable(root, &["describe", "adapters/mock", "-o", "name"])), "Adapter/mock\n");
    let names = stdout(&roundtable(root, &["status", "-o", "name"]));
    assert!(names.lines().any(|line| line == "Adapter/mock"), "{names}");
    let health = roundtable(
        root,
        &["status", "-o", r#"jsonpath={range .items[?(@.kind=="Adapter")]}{.name}={.health}{"\n"}{end}"#],
    );
    assert!(stdout(&health).lines().any(|line| line == "mock=Healthy"), "{}{}", stdout(&health), stderr(&health));
    let broken = roundtable(root, &["status", "-o", "jsonpath={.items"]);
    assert_eq!(broken.status.code(), Some(64), "a broken template is a usage error");
    assert!(stderr(&broken).contains("unclosed '{'"), "{}", stderr(&broken));

    assert_eq!(roundtable(root, &["describe", "Widget/x"]).status.code(), Some(1));
    assert_eq!(roundtable(root, &["reconcile", "Adapter/nothing"]).status.code(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labelled_leftovers_no_spec_owns_require_pruning() {
    use roundtable_session_runtime::labels::{Ownership, Purpose};
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    let project = spec_tree(&[(".roundtable/adapters.yaml", MOCK)]);
    let root = project.path();
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let name = format!("rt-leftover-{}", std::process::id());
    let labels = Ownership {
        project: project_id,
        assignment: Some("long-gone".into()),
        session: "s1".into(),
        controller_run: "an-earlier-run".into(),
        purpose: Purpose::Agent,
    }
    .labels();
    let volume =
        roundtable_docker::profile::tmpfs_volume(&name, 1 << 20, roundtable_docker::profile::TmpfsRoot::Agent, labels);
    engine.docker().create_volume(volume).await.expect("create a labelled volume");
    let status = status_json(root);
    let leftover = row(&status, "Volume", &name).map(|r| r["message"].as_str().unwrap_or_default().to_owned());
    engine
        .docker()
        .remove_volume(&name, None::<roundtable_docker::bollard::query_parameters::RemoveVolumeOptions>)
        .await
        .expect("remove");
    let message = leftover.unwrap_or_else(|| panic!("the labelled volume is not listed: {status:#}"));
    assert!(message.starts_with("requires pruning"), "{message}");
}

/// Regression: `start --execution-root /tmp/x` used to re-mode `/tmp` itself to 0700.
#[test]
fn start_never_remodes_a_folder_it_did_not_create() {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |path: &Path| std::fs::metadata(path).expect("metadata").permissions().mode() & 0o7777;
    let project = spec_tree(&[(".roundtable/adapters.yaml", MOCK)]);
    let root = project.path();
    let shared = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod");

    // A new execution root under a shared sticky folder: created 0700, the folder left alone.
    let executions = shared.path().join("executions");
    let child = Command::new(binary())
        .args(["start", "--execution-root"])
        .arg(&executions)
        .current_dir(root)
        // The tests reach the API over TCP (opt-in), each daemon on a free port.
        .env("ROUNDTABLE_API_LISTEN", "127.0.0.1:0")
        .env("ROUNDTABLE_AUDIT_KEY", root.join(".test-audit.key"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    let daemon = Daemon(child);
    wait_for(root, "the daemon to converge", |s| row(s, "Adapter", "mock").is_some_and(|r| r["sync"] == "Synced"));
    assert!(daemon.stop().success());
    assert_eq!(mode(shared.path()), 0o1777, "the shared parent keeps its mode");
    assert_eq!(mode(&executions), 0o700, "the execution root is private");

    // An existing execution root others can read is refused, not re-moded.
    std::fs::set_permissions(&executions, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let refused = roundtable(root, &["start", "--execution-root", executions.to_str().expect("utf-8")]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("has mode 0755") && stderr(&refused).contains("chmod 700"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(mode(&executions), 0o755, "left as it was");
    assert_eq!(mode(shared.path()), 0o1777);

    // A parent others can write without the sticky bit is refused.
    let open = shared.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let refused = roundtable(root, &["start", "--execution-root", open.join("x").to_str().expect("utf-8")]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("without the sticky bit"), "{}", stderr(&refused));
    assert_eq!(mode(&open), 0o777);
    assert!(!open.join("x").exists(), "nothing was created in it");
}

/// A committed project whose `generic` Adapter runs on the test image, with one Assignment per
/// `(name, script)`.
fn agent_project(assignments: &[(&str, &str)]) -> tempfile::TempDir {
    use crate::support::{API, commit_all, write};
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let mut specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n  resources: {{memory: 256Mi, cpus: 1, pids: 64, workspaceSize: 32Mi, tmpSize: 16Mi}}\n"
    );
    for (name, script) in assignments {
        specs.push_str(&format!(
            "---\n{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: generic\n  task:\n    id: {name}\n    prompt: |\n      {script}\n  source: {{repo: ., revision: main}}\n  readablePaths: [README.md]\n"
        ));
    }
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    dir
}

/// The newest session of `assignment`, as `sessions list --format json` has it.
fn newest_session(root: &Path, assignment: &str) -> Option<Value> {
    let sessions = crate::support::json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    sessions["items"].as_array()?.iter().find(|s| s["assignment"] == assignment).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_controls_an_agent_writes_never_reach_the_terminal() {
    use crate::support::{ShowLogOnPanic, ensure_test_images, start_daemon, wait_until};
    const RLO: char = '\u{202e}';
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    // A patch line and a rejected entry (a symbolic link) whose names carry U+202E.
    let project = agent_project(&[(
        "bidi",
        r#"printf "x\342\200\256y\n" >> README.md && ln -s README.md "$(printf "l\342\200\256nk")""#,
    )]);
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the bidi session to finish", || {
        newest_session(root, "bidi").is_some_and(|s| s["phase"] == "Succeeded" || s["phase"] == "Failed")
    })
    .await;
    drop(daemon);
    let session = newest_session(root, "bidi").expect("a session");
    assert_eq!(session["phase"], "Succeeded", "{session:#}");
    let id = session["id"].as_str().expect("id");
    let rejected = session["detail"]["export"]["rejected"].to_string();
    assert!(rejected.contains(RLO), "the record keeps the exact name: {rejected}");

    // `sessions show`: a readable block, the rejected name escaped.
    let shown = roundtable(root, &["sessions", "show", id]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let text = stdout(&shown);
    assert!(!text.contains(RLO), "raw U+202E reached the terminal through sessions show: {text:?}");
    assert!(text.contains("Rejected:") && text.contains("l\\u{202e}nk"), "{text}");

    // `proposals show`: the patch line escaped; `export` keeps the bytes for `git apply`.
    let proposals = crate::support::json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let proposal = proposals["items"][0]["id"].as_str().expect("a proposal").to_owned();
    let shown = roundtable(root, &["proposals", "show", &proposal]);
    let text = stdout(&shown);
    assert!(!text.contains(RLO), "raw U+202E reached the terminal through proposals show: {text:?}");
    assert!(text.contains("+x\\u{202e}y"), "{text}");
    let exported = stdout(&roundtable(root, &["proposals", "export", &proposal]));
    assert!(exported.contains(&format!("+x{RLO}y")), "{exported:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_show_prints_a_readable_block_and_json_on_request() {
    use crate::support::{ShowLogOnPanic, ensure_test_images, start_daemon, wait_until};
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = agent_project(&[("edit", "echo edited >> README.md")]);
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the session to succeed", || newest_session(root, "edit").is_some_and(|s| s["phase"] == "Succeeded"))
        .await;
    drop(daemon);
    let session = newest_session(root, "edit").expect("a session");
    let id = session["id"].as_str().expect("id");

    let text = roundtable(root, &["sessions", "show", id]);
    assert!(text.status.success(), "{}", stderr(&text));
    let shown = stdout(&text);
    assert!(!shown.trim_start().starts_with('{'), "text is not JSON: {shown}");
    for line in [
        format!("Session:     {id}"),
        "Assignment:  edit (execution generation 1, attempt 1)".to_owned(),
        "Adapter:     generic".to_owned(),
        "Image:       roundtable-test/agent:latest".to_owned(),
        "Phase:       Succeeded".to_owned(),
        "Cause:       Exited".to_owned(),
        "Exit code:   0".to_owned(),
        "Manifest:    1 file given to the agent".to_owned(),
        "Self-check:  passed".to_owned(),
    ] {
        assert!(shown.lines().any(|l| l.starts_with(&line)), "no line {line:?} in:\n{shown}");
    }
    for label in ["Message:", "Base commit:", "Started:", "Finished:", "Timings:", "Export:"] {
        assert!(shown.lines().any(|l| l.starts_with(label)), "no {label} line in:\n{shown}");
    }
    // The phases in the order they happened, not alphabetically.
    let timings = shown.lines().find(|l| l.starts_with("Timings:")).unwrap_or_default();
    let phases: Vec<&str> =
        timings.trim_start_matches("Timings:").split(", ").filter_map(|p| p.split_whitespace().next()).collect();
    // The container's removal follows the outcome and is no phase of the session.
    assert_eq!(phases, ["provision", "launch", "selfCheck", "agent", "export", "patch"], "{timings}");

    let as_json = roundtable(root, &["sessions", "show", id, "--format", "json"]);
    let list = crate::support::json(&as_json);
    assert_eq!(list["kind"], "SessionList");
    assert_eq!(list["items"][0]["id"], id);
    assert_eq!(list["items"][0]["phase"], "Succeeded");
    // Times to the second, and how long it ran.
    let started = shown.lines().find(|l| l.starts_with("Started:")).unwrap_or_default();
    assert!(started.ends_with('Z') && !started.contains('.'), "{started}");
    assert!(shown.lines().any(|l| l.starts_with("Duration:")), "{shown}");

    // The session's events as an operator reads them: one admission entry naming its gates, an
    // end with its duration and exit code; neither a first attempt's queueing twice nor a first
    // start's wait for the Adapter.
    let events = stdout(&roundtable(root, &["events", "--limit", "100"]));
    let of_session: Vec<&str> = events.lines().filter(|l| l.contains(&format!("Session/{id}"))).collect();
    let admissions: Vec<&&str> = of_session.iter().filter(|l| l.contains("admission.gate")).collect();
    assert_eq!(admissions.len(), 1, "one admission entry per spawn: {events}");
    // No receipt is sealed here (the policy warns): the refusal, then the gates that admitted.
    assert!(
        admissions[0].contains("Warning") && admissions[0].contains("refused (no_receipt, not blocking)"),
        "{events}"
    );
    assert!(admissions[0].contains("; admitted by securityFloor"), "{events}");
    let ended = of_session.iter().find(|l| l.contains("session.ended")).expect("session.ended");
    assert!(ended.contains("Succeeded after ") && ended.contains(", exit code 0: "), "{ended}");
    let of_assignment = stdout(&roundtable(root, &["events", "Assignment/edit"]));
    assert!(of_assignment.contains(" Queued "), "{of_assignment}");
    assert!(!of_assignment.contains("ExecutionQueued"), "a first attempt is queued once: {of_assignment}");
    assert!(!of_assignment.contains("AdapterNotReady"), "a first start's ordering is no event: {of_assignment}");
    let key = executions.path().join("audit.key");
    let verified = roundtable(root, &["--audit-key", key.to_str().expect("utf-8"), "audit", "verify"]);
    assert!(stdout(&verified).starts_with("audit chain verified"), "{}{}", stdout(&verified), stderr(&verified));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_running_session_as_running_not_queued() {
    use crate::support::{ShowLogOnPanic, ensure_test_images, start_daemon, wait_until};
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = agent_project(&[("slow", "sleep 8; echo done >> README.md")]);
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the session to run", || newest_session(root, "slow").is_some_and(|s| s["phase"] == "Running")).await;
    let status = status_json(root);
    let assignment = row(&status, "Assignment", "slow").cloned().expect("the Assignment row");
    let message = assignment["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("Running"), "{assignment:#}");
    assert!(!message.to_lowercase().contains("queued"), "a running session is not queued: {assignment:#}");
    let text = stdout(&roundtable(root, &["status"]));
    let line = text.lines().find(|l| l.starts_with("Assignment")).unwrap_or_default().to_owned();
    assert!(line.contains("Running") && !line.to_lowercase().contains("queued"), "{text}");
    // Let it finish so nothing is left running.
    wait_until("the session to finish", || newest_session(root, "slow").is_some_and(|s| s["phase"] != "Running")).await;
    drop(daemon);
}

/// `--log-format json`: every line on stderr is one JSON object (nothing printed past the
/// subscriber), numbers are numbers, and a session's lines carry its span (session, assignment,
/// adapter): its start, its end with phase, cause and duration, and its proposal, at INFO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_only_json_lines_and_a_sessions_lines_carry_its_ids() {
    use crate::support::{ShowLogOnPanic, ensure_test_images, start_daemon, wait_until};
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let project = agent_project(&[("logged", "echo logged >> README.md")]);
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &["--log-format", "json"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until("the session to succeed", || newest_session(root, "logged").is_some_and(|s| s["phase"] == "Succeeded"))
        .await;
    drop(daemon);
    let log = std::fs::read_to_string(executions.path().join("daemon.log")).expect("log");
    let lines: Vec<Value> = log
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}")))
        .collect();
    let said = |message: &str| lines.iter().find(|l| l["fields"]["message"] == message).cloned();
    let session = newest_session(root, "logged").expect("a session");
    for message in ["session started", "session ended", "proposal recorded"] {
        let line = said(message).unwrap_or_else(|| panic!("no {message:?} line in {log}"));
        assert_eq!(line["level"], "INFO", "{line:#}");
        // The session's span is among the line's spans (the innermost may be a phase of it).
        let span = line["spans"]
            .as_array()
            .and_then(|spans| spans.iter().find(|span| span["name"] == "session"))
            .unwrap_or_else(|| panic!("no session span: {line:#}"));
        assert_eq!(
            (&span["session"], &span["assignment"], &span["adapter"]),
            (&session["id"], &"logged".into(), &"generic".into())
        );
    }
    let ended = said("session ended").expect("ended");
    assert_eq!(ended["fields"]["phase"], "Succeeded");
    assert!(ended["fields"]["duration_ms"].is_u64(), "a number, not a string: {ended:#}");
    assert!(ended["fields"]["exit_code"].is_i64(), "{ended:#}");
    let started = said("controller run started").expect("the controller run");
    assert!(started["fields"]["max_executions"].is_u64(), "{started:#}");
    assert!(
        said("stopped (executions interrupted at the grace period are re-run on the next start)").is_some(),
        "{log}"
    );
}
