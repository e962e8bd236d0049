//! Traces over OTLP/HTTP, read by a receiver that decodes them with the official
//! `opentelemetry-proto` package (`tests/otlp/receiver.py`): a reconcile, the session it starts,
//! each phase, an egress decision, a broker decision and an MCP tool call, as one tree of spans.
//! And a collector that never answers holds nothing up.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{
    API, ShowLogOnPanic, commit_all, ensure_test_images, json, one_assignment_project, python_module_or_skip,
    repo_root, roundtable, start_daemon_with_env, wait_until_within, write,
};

const KEY: &str = "sk-acme-live-0f9e8d7c6b5a49382716";

/// The receiver, killed when dropped.
struct Receiver {
    child: Child,
    port: u16,
    spans: PathBuf,
}

impl Receiver {
    async fn start(dir: &Path, hang: bool) -> Self {
        let (port_file, spans) = (dir.join("receiver.port"), dir.join("spans.jsonl"));
        let mut command = Command::new("python3");
        command.arg(repo_root().join("tests/otlp/receiver.py")).arg(&port_file).arg(&spans);
        if hang {
            command.arg("--hang");
        }
        let child = command.spawn().expect("the receiver starts");
        wait_until_within("the receiver to listen", Duration::from_secs(20), || port_file.is_file()).await;
        let port = std::fs::read_to_string(&port_file).expect("port").trim().parse().expect("a port");
        Self { child, port, spans }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.spans).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).expect("a span line")).collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tools` calls an MCP tool, asks the gateway for a host off its list and edits README.md;
/// `keys` asks its broker for a path off the provider's list.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let tools = r#"{ printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' '{"jsonrpc":"2.0","method":"notifications/initialized"}' '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notes.append","arguments":{"text":"traced"}}}'; sleep 3; } | /roundtable/bin/roundtable mcp stdio
(printf 'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n'; sleep 1) | nc -w 2 127.0.0.1 3128
echo traced >> README.md"#;
    let keys = r#"wget -q -O - --header "Authorization: Bearer $ACME_API_KEY" "${ROUNDTABLE_BROKER_URL:-http://127.0.0.1:3129}/api.openai.com/v1/files"; echo asked"#;
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: tools}}\nspec:\n  image: roundtable-test/agent:latest\n  command: sh\n  args: [-c]\n  supportsMcp: true\n  providerHosts: [api.openai.com]\n---\n\
         {API}\nkind: Adapter\nmetadata: {{name: keys}}\nspec:\n  image: roundtable-test/agent:latest\n  command: sh\n  args: [-c]\n  credentialMode: broker\n  credentialEnv: [ACME_API_KEY]\n  providerHosts: [api.openai.com]\n---\n\
         {API}\nkind: Assignment\nmetadata: {{name: tools}}\nspec:\n  adapter: tools\n  requires: [mcp]\n  task: {{id: T-tools, prompt: {}}}\n  readablePaths: [README.md]\n---\n\
         {API}\nkind: Assignment\nmetadata: {{name: keys}}\nspec:\n  adapter: keys\n  task: {{id: T-keys, prompt: {}}}\n  readablePaths: [README.md]\n",
        serde_json::to_string(tools).expect("json"),
        serde_json::to_string(keys).expect("json"),
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    dir
}

fn finished(root: &Path, count: usize) -> bool {
    let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    listed["items"]
        .as_array()
        .is_some_and(|items| items.len() >= count && items.iter().all(|s| s["finishedAt"].is_string()))
}

/// The spans named `name`.
fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|span| span["name"] == name).collect()
}

/// Whether `span` descends from `ancestor` (by parent IDs, within one trace).
fn descends(spans: &HashMap<String, &Value>, span: &Value, ancestor: &Value) -> bool {
    let mut at = span;
    for _ in 0..32 {
        if at["trace"] != ancestor["trace"] {
            return false;
        }
        if at["span"] == ancestor["span"] {
            return true;
        }
        match spans.get(at["parent"].as_str().unwrap_or_default()) {
            Some(parent) => at = parent,
            None => return false,
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_one_trace_from_its_reconcile_to_each_decision() {
    let Some(engine) = crate::support::engine_or_skip().await else { return };
    if !python_module_or_skip("opentelemetry.proto", "opentelemetry-proto") {
        return;
    }
    ensure_test_images();
    let dir = project();
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(executions.path(), false).await;
    let endpoint = receiver.endpoint();
    let daemon =
        start_daemon_with_env(root, &["--otlp-endpoint", &endpoint], executions.path(), &[("ACME_API_KEY", KEY)]);
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until_within("both sessions to finish", Duration::from_secs(180), || finished(root, 2)).await;
    // Shutdown sends what is still queued.
    drop(daemon);
    let spans = receiver.spans();
    let by_id: HashMap<String, &Value> =
        spans.iter().map(|span| (span["span"].as_str().unwrap_or_default().to_owned(), span)).collect();
    let names: std::collections::BTreeSet<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    assert!(spans.iter().all(|s| s["resource"]["service.name"] == "roundtable"), "{names:?}");

    let session_of = |assignment: &str| -> &Value {
        named(&spans, "session")
            .into_iter()
            .find(|s| s["attributes"]["assignment"] == assignment)
            .unwrap_or_else(|| panic!("no session span of {assignment}: {names:?}"))
    };
    let tools = session_of("tools");
    let reconcile = by_id.get(tools["parent"].as_str().unwrap_or_default()).expect("the session's parent");
    assert_eq!(reconcile["name"], "reconcile", "a session starts in a reconcile: {reconcile}");
    assert_eq!(reconcile["attributes"]["key"], "Assignment/tools", "the key as a user writes it: {reconcile}");
    for phase in ["provision", "sandbox", "launch", "self_check", "agent", "export", "patch"] {
        let found = named(&spans, phase);
        assert!(
            found.iter().any(|span| descends(&by_id, span, tools)),
            "no {phase} span under the tools session: {names:?}"
        );
    }
    let denied = named(&spans, "egress.tunnel")
        .into_iter()
        .find(|span| span["attributes"]["host"] == "evil.example")
        .unwrap_or_else(|| panic!("no egress span for evil.example: {names:?}"));
    assert_eq!(denied["attributes"]["decision"], "deny", "{denied}");
    assert!(descends(&by_id, denied, tools), "the gateway's decision is the session's: {denied}");
    let tool = named(&spans, "mcp.tool").into_iter().next().unwrap_or_else(|| panic!("no mcp.tool span: {names:?}"));
    assert_eq!(tool["attributes"]["tool"], "notes.append", "{tool}");
    assert!(descends(&by_id, tool, tools), "the tool call is the session's: {tool}");

    let keys = session_of("keys");
    let asked =
        named(&spans, "broker.request").into_iter().next().unwrap_or_else(|| panic!("no broker span: {names:?}"));
    assert_eq!(asked["attributes"]["decision"], "deny", "{asked}");
    assert_eq!(asked["attributes"]["host"], "api.openai.com", "{asked}");
    assert!(descends(&by_id, asked, keys), "the broker's decision is the session's: {asked}");
    let rendered = serde_json::to_string(&spans).expect("json");
    assert!(!rendered.contains(KEY), "no credential in any span");
    crate::support::nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_holds_nothing_up() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    if !python_module_or_skip("opentelemetry.proto", "opentelemetry-proto") {
        return;
    }
    ensure_test_images();
    let dir = one_assignment_project("work", "echo done >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(executions.path(), true).await;
    let started = Instant::now();
    let mut daemon =
        start_daemon_with_env(root, &[], executions.path(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint())]);
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    wait_until_within("the session to finish", Duration::from_secs(120), || finished(root, 1)).await;
    let ran = started.elapsed();
    let listed = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    assert_eq!(listed["items"][0]["phase"], "Succeeded", "{listed}");
    // Stopped, it gives the exporter its timeout (5 s) and exits.
    let stopping = Instant::now();
    let pid = daemon.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    while daemon.0.try_wait().expect("wait").is_none() {
        assert!(stopping.elapsed() < Duration::from_secs(20), "the daemon did not stop within 20 s of SIGTERM");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(executions.path().join("daemon.log")).unwrap_or_default();
    assert!(log.contains("exporting traces over OTLP/HTTP"), "the variable turned exporting on: {log}");
    eprintln!("with a silent collector: the session ran in {ran:?}; the daemon stopped in {:?}", stopping.elapsed());
}
