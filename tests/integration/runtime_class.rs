//! Runtime classes on a real engine with gVisor (Debian's `runsc`) registered: a private
//! `dockerd` in its own network namespace, never the machine's engine reconfigured. A session
//! under `runsc` proves gVisor's kernel from inside before the agent runs and records it, its
//! receipt seals the class, and `requireRuntimeClass` refuses an Adapter on `runc`, whatever the
//! mode, before anything of its session exists; so are a runtime the engine lacks and a gVisor
//! runtime that cannot reach the session's sockets. `doctor` gives each runtime class a line.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::doctor::{doctor, feature};
use crate::private_engine::private_engine_or_skip;
use crate::support::{
    API, ShowLogOnPanic, commit_all, json, nothing_left, roundtable, start_daemon_with_env, stdout, wait_until_within,
    write,
};

/// Where runsc is (Debian's package).
pub const RUNSC: &str = "/usr/bin/runsc";

/// The private engine's daemon.json: `runsc` as docs/runtime-classes.md tells operators to
/// register it (no network of its own, host sockets allowed), and `runsc-sealed`, the same
/// without host sockets.
pub fn gvisor_engine_config(default_runtime: Option<&str>) -> String {
    let default = default_runtime.map(|d| format!("\"default-runtime\": \"{d}\", ")).unwrap_or_default();
    format!(
        "{{{default}\"runtimes\": {{\"runsc\": {{\"path\": \"{RUNSC}\", \"runtimeArgs\": [\"--network=none\", \"--host-uds=open\"]}}, \"runsc-sealed\": {{\"path\": \"{RUNSC}\", \"runtimeArgs\": [\"--network=none\"]}}}}}}"
    )
}

/// Whether runsc is installed; when it is not, a skip unless the run requires it.
pub fn runsc_or_skip() -> bool {
    crate::support::present_or_skip(
        Path::new(RUNSC).exists(),
        "ROUNDTABLE_REQUIRE_RUNSC",
        RUNSC,
        "apt-get install runsc",
    )
}

fn adapter(name: &str, runtime: &str, extra: &str) -> String {
    format!(
        "{API}\nkind: Adapter\nmetadata: {{name: {name}}}\nspec:\n  provider: generic\n  command: sh\n  args: [-c]\n  image: roundtable-test/agent:latest\n  runtimeClass: {runtime}\n{extra}---\n"
    )
}

fn assignment(name: &str, adapter: &str) -> String {
    format!(
        "{API}\nkind: Assignment\nmetadata: {{name: {name}}}\nspec:\n  adapter: {adapter}\n  task: {{id: {name}, prompt: 'cat /proc/version >> README.md; ls -ln README.md >> README.md'}}\n  readablePaths: [README.md, big.bin]\n---\n"
    )
}

/// The newest session of `assignment`, as `sessions show --format json` has it.
fn session_of(root: &Path, assignment: &str) -> Option<Value> {
    let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let id = listed["items"].as_array()?.iter().find(|s| s["assignment"] == assignment)?["id"].as_str()?.to_owned();
    let shown = json(&roundtable(root, &["sessions", "show", &id, "--format", "json"]));
    shown["items"].as_array()?.first().cloned()
}

fn ended(session: &Option<Value>) -> bool {
    // Only the gVisor session ever starts.
    session.as_ref().is_some_and(|s| s["finishedAt"].is_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gvisor_session_proves_its_kernel_and_a_required_runtime_class_refuses_the_rest() {
    if !runsc_or_skip() {
        return;
    }
    let Some((private, engine)) = private_engine_or_skip(&gvisor_engine_config(None)).await else { return };
    let host = private.host();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    std::fs::write(root.join("big.bin"), vec![7u8; 3 << 20]).expect("big.bin");
    let mut specs = String::new();
    specs.push_str(&adapter("gvisor", "runsc", ""));
    // A workspace too small for what it is given: the seed, uploaded from outside under gVisor,
    // fails the check as the copy inside does under runc, and the agent never runs.
    specs.push_str(&adapter("cramped", "runsc", "  resources: {workspaceSize: 2Mi}\n"));
    specs.push_str(&adapter("host", "runc", ""));
    specs.push_str(&adapter("sealed", "runsc-sealed", "  providerHosts: [api.example.test]\n"));
    specs.push_str(&adapter("vm", "kata", ""));
    for (name, adapter) in [
        ("sandboxed", "gvisor"),
        ("overfull", "cramped"),
        ("shared", "host"),
        ("socketless", "sealed"),
        ("absent", "vm"),
    ] {
        specs.push_str(&assignment(name, adapter));
    }
    // `warn`, the default mode: the runtime class refuses anyway.
    specs.push_str(&format!(
        "{API}\nkind: AdmissionPolicy\nmetadata: {{name: policy}}\nspec:\n  mode: warn\n  requireRuntimeClass: [runsc, runsc-sealed, kata]\n"
    ));
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let _show = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let daemon = start_daemon_with_env(root, &[], executions.path(), &[("DOCKER_HOST", host.as_str())]);
    let refused = |name: &str| {
        let rows = json(&roundtable(root, &["status", "--format", "json"]));
        let row = rows["items"].as_array().and_then(|r| r.iter().find(|r| r["name"] == name).cloned());
        row.and_then(|r| r["message"].as_str().map(str::to_owned)).filter(|m| m.contains("runtimeClass refused"))
    };
    wait_until_within("the gVisor session to end and the rest to be refused", Duration::from_secs(180), || {
        ended(&session_of(root, "sandboxed"))
            && ended(&session_of(root, "overfull"))
            && ["shared", "socketless", "absent"].iter().all(|n| refused(n).is_some())
    })
    .await;

    // Under gVisor: its kernel proven from inside, recorded, and the agent saw it too.
    let sandboxed = session_of(root, "sandboxed").expect("sandboxed");
    assert_eq!(sandboxed["phase"], "Succeeded", "{sandboxed:#}");
    let detail = &sandboxed["detail"];
    assert_eq!((&detail["runtime"]["class"], &detail["runtime"]["kernel"]), (&"runsc".into(), &"gvisor".into()));
    let items = detail["selfCheck"]["items"].as_array().expect("items");
    let kernel = items.iter().find(|i| i["name"] == "kernel").expect("a kernel item");
    assert_eq!(kernel["ok"], true, "{kernel:#}");
    let said = kernel["detail"].as_str().unwrap_or_default();
    assert!(said.contains("/proc/sentry-meminfo present") && said.contains("not seen"), "{said}");
    let memory = items.iter().find(|i| i["name"] == "memoryLimit").expect("memory");
    assert!(memory["detail"].as_str().unwrap_or_default().contains("MemTotal"), "{memory:#}");
    let id = sandboxed["id"].as_str().expect("id");
    let shown = stdout(&roundtable(root, &["sessions", "show", id]));
    assert!(shown.contains("runsc (gVisor's user-space kernel, proven by the self-check)"), "{shown}");
    let listed = json(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let proposal = listed["items"].as_array().and_then(|p| p.iter().find(|p| p["assignment"] == "sandboxed").cloned());
    let patch =
        stdout(&roundtable(root, &["proposals", "export", proposal.expect("a proposal")["id"].as_str().expect("id")]));
    assert!(patch.contains("+Linux version 4.4.0"), "the agent ran on gVisor's kernel: {patch}");
    // The workspace was uploaded from outside: whole, as the agent's user, with the seed's modes.
    let seed = items.iter().find(|i| i["name"] == "workspaceSeed").expect("a seed item");
    let said = seed["detail"].as_str().unwrap_or_default();
    assert!(
        seed["ok"] == true && said.starts_with("2 files, 3145738 bytes") && said.ends_with("(uploaded)"),
        "{seed:#}"
    );
    assert!(!patch.contains("new file mode"), "README.md was there before the agent: {patch}");
    let listing = patch.lines().find(|l| l.starts_with("+-r")).unwrap_or_default();
    let fields: Vec<&str> = listing.split_whitespace().collect();
    assert_eq!(fields.get(..4), Some(["+-rw-r--r--", "1", "1000", "1000"].as_slice()), "{patch}");

    // Too big for its workspace: failed on the seed, named, and the agent never ran.
    let overfull = session_of(root, "overfull").expect("overfull");
    assert_eq!(overfull["phase"], "Failed", "{overfull:#}");
    let items = overfull["detail"]["selfCheck"]["items"].as_array().expect("items");
    let failed: Vec<&Value> = items.iter().filter(|i| i["ok"] == false).collect();
    assert_eq!(failed.len(), 1, "{items:#?}");
    assert_eq!(failed[0]["name"], "workspaceSeed", "{items:#?}");
    let said = failed[0]["detail"].as_str().unwrap_or_default();
    assert!(said.contains("no space left on device"), "{said}");

    // Refused before any session, so before any folder, socket or container, whatever the mode.
    for (name, reason, says) in [
        (
            "shared",
            "runtime_not_allowed",
            "would run under runc (its own spec.runtimeClass); the AdmissionPolicy requires runsc or runsc-sealed or kata; the engine has ",
        ),
        ("socketless", "runtime_without_host_sockets", "--host-uds=open"),
        ("absent", "runtime_unavailable", "the engine has no runtime \"kata\""),
    ] {
        let message = refused(name).unwrap_or_default();
        assert!(message.contains(&format!("runtimeClass refused ({reason})")) && message.contains(says), "{message}");
        assert!(session_of(root, name).is_none(), "{name} never had a session");
    }
    let described = stdout(&roundtable(root, &["describe", "Adapter/host"]));
    assert!(described.contains("RuntimeNotAllowed") && described.contains("spawns are refused"), "{described}");
    drop(daemon);
    nothing_left(&engine, root).await;

    // The receipt seals the class; a spawn under another no longer matches it.
    std::fs::copy(executions.path().join("audit.key"), root.join(".test-audit.key")).expect("the audit key");
    let sealed = crate::support::roundtable_with_env(
        root,
        &["admission", "check", "gvisor", "--seal", "--format", "json"],
        &[("DOCKER_HOST", host.as_str())],
    );
    let receipt = std::fs::read(root.join(".roundtable/admission/gvisor.json"))
        .unwrap_or_else(|e| panic!("no receipt ({e}): {}{}", stdout(&sealed), crate::support::stderr(&sealed)));
    let receipt: Value = serde_json::from_slice(&receipt).expect("json");
    assert_eq!(receipt["receipt"]["runtimeClass"], "runsc", "{receipt:#}");

    // doctor: one line per runtime class, each proven by doing it.
    let (code, features) = doctor(Some(&host));
    assert_eq!(code, Some(0), "a runtime class that fails is informational: {features:#?}");
    let (_, ok, said) = feature(&features, "runtimeClass/runsc");
    assert!(*ok && said.contains("gVisor's user-space kernel"), "{said}");
    let (_, ok, said) = feature(&features, "runtimeClass/runsc-sealed");
    assert!(!*ok && said.starts_with("hostSockets:") && said.contains("Operation not permitted"), "{said}");
    assert!(engine.labelled("doctor").await.expect("list").is_empty());
}
