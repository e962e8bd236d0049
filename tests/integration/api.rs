//! The HTTP API of a real daemon over a real listener: every endpoint, operator auth, cursors,
//! idempotent replay, enable and disable with drain, the admin MCP endpoint, and the CLI
//! reaching its daemon through the API.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::{Api, MCP_HEADERS, Reply, request};
use crate::support::{
    API, ShowLogOnPanic, commit_all, ensure_test_images, one_assignment_project, roundtable, start_daemon, stderr,
    stdout, wait_until, wait_until_within, write,
};

fn ready(api: &Api) -> bool {
    request(&api.address, "GET", "/readyz", &[], None).status == 200
}

fn names(list: &Value) -> Vec<String> {
    list["items"].as_array().into_iter().flatten().filter_map(|i| i["id"].as_str().map(str::to_owned)).collect()
}

/// Every item of a list endpoint, following `metadata.continue` verbatim.
fn walk(api: &Api, path: &str, limit: usize) -> (Vec<Value>, usize) {
    let (mut items, mut pages, mut cursor) = (Vec::new(), 0, None::<String>);
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}?limit={limit}&continue={c}"),
            None => format!("{path}?limit={limit}"),
        };
        let page = api.get(&url);
        assert_eq!(page.status, 200, "{}", page.text());
        let body = page.json();
        pages += 1;
        items.extend(body["items"].as_array().cloned().unwrap_or_default());
        match body["metadata"]["continue"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (items, pages),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_serves_reads_writes_and_mcp_behind_the_operator_token() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = one_assignment_project("work", "echo from-the-agent >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &["--workspace", "demo"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let state_dir = root.join(".roundtable/state");
    let api = Api::of(&state_dir).await;
    wait_until("the API to be ready", || ready(&api)).await;
    wait_until_within("a proposal", Duration::from_secs(120), || {
        api.get("/v1/proposals").json()["items"].as_array().is_some_and(|items| !items.is_empty())
    })
    .await;

    // Auth: nothing without the token, and nothing happens on a refused write.
    assert_eq!(request(&api.address, "GET", "/healthz", &[], None).status, 200);
    for path in ["/v1/status", "/metrics", "/v1/sessions", "/v1/workspaces/demo/agents"] {
        let refused = request(&api.address, "GET", path, &[], None);
        assert_eq!((refused.status, refused.code().as_str()), (401, "unauthorized"), "{path}");
        assert!(refused.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")));
        let wrong = request(&api.address, "GET", path, &[("Authorization", "Bearer rt_0000")], None);
        assert_eq!(wrong.status, 401, "{path}");
    }
    let mcp_refused =
        request(&api.address, "POST", "/mcp", &MCP_HEADERS, Some(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#));
    assert_eq!(mcp_refused.status, 401);
    // MCP's authorization spec: the challenge says where the resource's metadata is, and the
    // metadata (public) names the endpoint and how its token is sent.
    let metadata = format!("http://{}/.well-known/oauth-protected-resource", api.address);
    let challenge = mcp_refused.header("www-authenticate").unwrap_or_default().to_owned();
    assert!(challenge.contains(&format!("resource_metadata=\"{metadata}\"")), "{challenge}");
    let described = request(&api.address, "GET", "/.well-known/oauth-protected-resource", &[], None);
    assert_eq!(described.status, 200);
    assert_eq!(described.json()["resource"], format!("http://{}/mcp", api.address));
    assert_eq!(described.json()["bearer_methods_supported"], json!(["header"]));
    let wrong = format!("Bearer {}x", api.token);
    let refused =
        request(&api.address, "POST", "/v1/workspaces/demo/agents/generic/disable", &[("Authorization", &wrong)], None);
    assert_eq!(refused.status, 401);
    assert_eq!(
        api.get("/v1/workspaces/demo/agents/generic").json()["state"],
        "enabled",
        "a refused disable did nothing"
    );

    // Status: the rows the CLI prints (retried while reconciles still move things).
    let mut same = false;
    for _ in 0..10 {
        let served = api.get("/v1/status").json();
        let printed: Value = serde_json::from_str(&stdout(&roundtable(root, &["status", "--format", "json"])))
            .expect("status prints JSON");
        if served["items"] == printed["items"] {
            same = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(same, "GET /v1/status differs from `roundtable status --format json`");

    let adapters = api.get("/v1/adapters").json();
    assert_eq!(adapters["kind"], "AdapterList");
    assert!(adapters["items"].as_array().expect("items").iter().any(|a| a["name"] == "generic"));
    let assignment = api.get("/v1/assignments/work");
    assert_eq!(assignment.json()["status"]["name"], "work");
    let missing = api.get("/v1/assignments/nope");
    assert_eq!((missing.status, missing.code().as_str()), (404, "assignment_not_found"));

    let sessions = api.get("/v1/sessions").json();
    let session = sessions["items"][0]["id"].as_str().expect("a session").to_owned();
    assert_eq!(api.get(&format!("/v1/sessions/{session}")).json()["id"], session.as_str());
    let logs = api.get(&format!("/v1/sessions/{session}/logs"));
    assert_eq!(logs.json()["session"], session.as_str());
    assert_eq!(
        api.get(&format!("/v1/sessions/{session}/logs?stream=stdout")).header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(api.get("/v1/sessions/zzzz").code(), "session_not_found");

    let proposal = api.get("/v1/proposals").json()["items"][0]["id"].as_str().expect("id").to_owned();
    assert_eq!(api.get(&format!("/v1/proposals/{proposal}")).json()["id"], proposal.as_str());
    let patch = api.call("GET", &format!("/v1/proposals/{proposal}"), &[("Accept", "text/x-diff")], None);
    assert_eq!(patch.header("content-type"), Some("text/x-diff"));
    assert!(patch.text().contains("+from-the-agent"), "{}", patch.text());

    let (events, pages) = walk(&api, "/v1/events", 2);
    assert!(events.len() >= 3 && pages >= 2, "{} events in {pages} pages", events.len());
    assert_eq!(api.get("/v1/events?limit=0").code(), "invalid_limit");
    assert_eq!(api.get("/v1/events?continue=abc").code(), "invalid_cursor");

    let metrics = api.get("/metrics");
    assert!(metrics.header("content-type").is_some_and(|t| t.starts_with("text/plain; version=0.0.4")));
    let metrics = metrics.text();
    for line in [
        "roundtable_reconciles_total{result=\"ok\"}",
        "roundtable_executions{phase=\"Succeeded\",cause=\"Exited\"} 1",
        "roundtable_queue_depth",
        "roundtable_reconcile_duration_seconds_bucket{le=\"+Inf\"}",
        "# TYPE roundtable_store_round_trips_total counter\nroundtable_store_round_trips_total ",
        // What this binary is, and the process's own, as every Prometheus client exports them.
        "roundtable_build_info{version=\"0.1.0\",commit=\"",
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_max_fds ",
        "process_start_time_seconds ",
        // Every family from the start, before its first series: no tunnel or broker request ran.
        "# TYPE roundtable_gateway_decisions_total counter\n",
        "# TYPE roundtable_broker_requests_total counter\n",
        "roundtable_image_pulls_total{result=\"digest_mismatch\"} 0\n",
        "# TYPE roundtable_image_pull_duration_seconds histogram\n",
        "roundtable_reconciles_total{result=\"error\"}",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    prometheus_client_parses(&metrics);
    let openapi = request(&api.address, "GET", "/v1/openapi.json", &[], None).json();
    assert_eq!(openapi["openapi"], "3.1.0");

    // The workspace in a path is this daemon's project; any other is not found.
    assert_eq!(api.get("/v1/workspaces/other/agents").code(), "workspace_not_found");
    assert_eq!(api.get("/v1/workspaces/demo/agents/nobody").code(), "agent_not_found");
    let agent = api.get("/v1/workspaces/demo/agents/generic").json();
    assert_eq!(agent["capabilities"], json!(["readonlyWorkspace"]), "derived from the adapter's configuration");
    assert!(agent["imageId"].as_str().is_some_and(|id| id.starts_with("sha256:")), "{agent}");

    // Idempotency: the second request replays the first answer byte for byte, acting once.
    let before = api.get("/v1/sessions?limit=200").json()["items"].as_array().map_or(0, Vec::len);
    let register = r#"{"assignment": "work", "adapter": "generic", "metadata": {"via": "api-test"}}"#;
    let first = api.call("POST", "/v1/sessions", &[("Idempotency-Key", "k-1")], Some(register));
    assert_eq!(first.status, 201, "{}", first.text());
    let second = api.call("POST", "/v1/sessions", &[("Idempotency-Key", "k-1")], Some(register));
    assert_eq!((second.status, second.body.clone()), (201, first.body.clone()));
    assert_eq!(second.header("idempotent-replayed"), Some("true"));
    let after = api.get("/v1/sessions?limit=200").json()["items"].as_array().map_or(0, Vec::len);
    assert_eq!(after, before + 1, "acted once");
    let reused = api.call(
        "POST",
        "/v1/sessions",
        &[("Idempotency-Key", "k-1")],
        Some(r#"{"assignment": "work", "adapter": "generic"}"#),
    );
    assert_eq!((reused.status, reused.code().as_str()), (409, "idempotency_key_reused"));
    // Empty bodies too: the reconcile request is replayed, not run again.
    let queued = api.call("POST", "/v1/reconcile/Assignment/work", &[("Idempotency-Key", "k-2")], None);
    assert_eq!(queued.status, 202, "{}", queued.text());
    let replayed = api.call("POST", "/v1/reconcile/Assignment/work", &[("Idempotency-Key", "k-2")], None);
    assert_eq!((replayed.body.clone(), replayed.header("idempotent-replayed")), (queued.body.clone(), Some("true")));
    let other_path = api.call("POST", "/v1/reconcile/Adapter/generic", &[("Idempotency-Key", "k-2")], None);
    assert_eq!(other_path.code(), "idempotency_key_reused");
    let bad = api.call("POST", "/v1/sessions", &[], Some(r#"{"assignment": "work"}"#));
    assert_eq!((bad.status, bad.code().as_str()), (400, "invalid_body"));

    // The CLI reaches the daemon through the API.
    let cli = roundtable(root, &["reconcile", "Assignment/work"]);
    assert!(cli.status.success(), "{}", stderr(&cli));
    assert!(stdout(&cli).contains("is reconciling Assignment/work now"), "{}", stdout(&cli));

    // `events`, as kubectl lists them: the same events the API pages through.
    let listed: Value = serde_json::from_str(&stdout(&roundtable(root, &["events", "-o", "json"]))).expect("json");
    let first_page = api.get("/v1/events?limit=50").json();
    assert_eq!(listed["kind"], "EventList");
    assert_eq!(listed["items"], first_page["items"], "the CLI and the API list the same events, newest first");
    let work: Value =
        serde_json::from_str(&stdout(&roundtable(root, &["events", "Assignment/work", "--format", "json"])))
            .expect("json");
    let objects: Vec<&str> =
        work["items"].as_array().expect("items").iter().filter_map(|e| e["object"].as_str()).collect();
    assert!(!objects.is_empty() && objects.iter().all(|o| *o == "Assignment/work"), "{objects:?}");
    // One order everywhere: newest first, and `--limit` keeps the newest.
    let at: Vec<&str> = work["items"].as_array().expect("items").iter().filter_map(|e| e["at"].as_str()).collect();
    assert!(at.len() > 1 && at.windows(2).all(|pair| pair[0] >= pair[1]), "newest first: {at:?}");
    let newest: Value = serde_json::from_str(&stdout(&roundtable(
        root,
        &["events", "Assignment/work", "--limit", "1", "--format", "json"],
    )))
    .expect("json");
    assert_eq!(newest["items"][0], work["items"][0], "--limit 1 keeps the newest");
    let text = stdout(&roundtable(root, &["events", "--limit", "2"]));
    assert_eq!(text.lines().count(), 3, "a header and two events: {text}");
    assert!(text.starts_with("AGE") && text.contains("OBJECT"), "{text}");
    assert_eq!(roundtable(root, &["events", "Assignment/nope"]).status.code(), Some(1));
    // As kubectl reads them: a plural or a short name names the same object.
    let described = crate::support::json(&roundtable(root, &["describe", "Assignment/work", "--format", "json"]));
    for written in ["assignments/work", "asg/work"] {
        let same = roundtable(root, &["describe", written, "--format", "json"]);
        assert!(same.status.success(), "{written}: {}", stderr(&same));
        let same = crate::support::json(&same);
        assert_eq!(described["status"]["name"], same["status"]["name"], "{written}");
        assert_eq!(same["status"]["kind"], "Assignment", "{written}");
    }

    // The admin MCP endpoint.
    let initialized = api.mcp(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#).json();
    assert_eq!(initialized["result"]["serverInfo"]["name"], "roundtable-admin");
    assert_eq!(initialized["result"]["protocolVersion"], "2025-11-25", "{initialized}");
    let notified = api.mcp(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(notified.status, 202);
    let tools = api.mcp(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).json();
    let tool_names: Vec<&str> =
        tools["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        tool_names,
        [
            "status",
            "adapters",
            "assignments",
            "sessions",
            "proposals",
            "reconcile",
            "accept_proposal",
            "reject_proposal"
        ]
    );
    let called = api
        .mcp(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"proposals","arguments":{}}}"#)
        .json();
    assert_eq!(called["result"]["structuredContent"]["items"][0]["id"], proposal.as_str());
    let reconciled = api.mcp(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"reconcile","arguments":{"object":"Assignment/work"}}}"#).json();
    assert_eq!(reconciled["result"]["structuredContent"]["how"], "queued");
    assert_eq!(api.get("/mcp").status, 405);
    // The transport's refusals come in this API's error body, like every other error.
    let json_only = [("Content-Type", "application/json"), ("Accept", "application/json")];
    let unacceptable = api.call("POST", "/mcp", &json_only, Some(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#));
    assert_eq!((unacceptable.status, unacceptable.code().as_str()), (406, "not_acceptable"));

    // Diagnostics: probed in the image, stored, and there to read back.
    let diagnosed = api.call("POST", "/v1/workspaces/demo/agents/generic/diagnostics", &[], None);
    assert_eq!(diagnosed.status, 201, "{}", diagnosed.text());
    let location = diagnosed.header("location").expect("a Location").to_owned();
    assert_eq!(api.get(&location).body, diagnosed.body, "the stored report");

    // A backup while the daemon runs.
    let backup = root.join("backup.db");
    let backed = roundtable(root, &["state", "backup", backup.to_str().expect("utf-8")]);
    assert!(backed.status.success(), "{}", stderr(&backed));
    assert!(stdout(&backed).contains("integrity ok"));
    let again = roundtable(root, &["state", "backup", backup.to_str().expect("utf-8")]);
    assert!(!again.status.success(), "a backup never overwrites");
}

/// Agents: a cursor taken verbatim from `metadata.continue` walks 500 declared adapters and the
/// built-ins once each, in name order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_cursor_walks_five_hundred_adapters_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let mut specs = String::new();
    for i in 0..500 {
        specs.push_str(&format!(
            "{API}\nkind: Adapter\nmetadata: {{name: agent-{i:03}}}\nspec: {{command: agent, enabled: false}}\n---\n"
        ));
    }
    write(root, ".roundtable/adapters.yaml", &specs);
    commit_all(root);
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let api = Api::of(&root.join(".roundtable/state")).await;
    wait_until("the API to be ready", || ready(&api)).await;
    let workspace = root.file_name().expect("name").to_string_lossy().into_owned();
    let path = format!("/v1/workspaces/{workspace}/agents");

    let (items, pages) = walk(&api, &path, 37);
    let listed: Vec<String> = items.iter().filter_map(|i| i["id"].as_str().map(str::to_owned)).collect();
    let mut expected = listed.clone();
    expected.sort();
    expected.dedup();
    assert_eq!(listed, expected, "in name order, none twice");
    assert_eq!(listed.iter().filter(|n| n.starts_with("agent-")).count(), 500);
    assert!(listed.iter().any(|n| n == "codex") && listed.iter().any(|n| n == "mock"), "built-ins too");
    assert_eq!(pages, listed.len().div_ceil(37));
    let first = api.get(&path);
    assert_eq!(names(&first.json()).len(), 50, "50 by default");
    assert_eq!(api.get(&format!("{path}?limit=201")).code(), "invalid_limit");
    // Another list's cursor is refused.
    let agents_cursor = first.json()["metadata"]["continue"].as_str().expect("a cursor").to_owned();
    assert_eq!(api.get(&format!("/v1/events?continue={agents_cursor}")).code(), "invalid_cursor");
    let one = api.get(&format!("{path}/agent-042")).json();
    assert_eq!((one["state"].as_str(), one["specEnabled"].as_bool()), (Some("disabled"), Some(false)));
}

fn agent(api: &Api, workspace: &str) -> Value {
    api.get(&format!("/v1/workspaces/{workspace}/agents/generic")).json()
}

fn adapter_row(root: &Path) -> Value {
    let status = crate::support::json(&roundtable(root, &["status", "--format", "json"]));
    status["items"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["kind"] == "Adapter" && r["name"] == "generic")
        .cloned()
        .expect("Adapter/generic")
}

/// Disabling an agent with a running session drains it: no new session starts, the running one
/// finishes, then the agent is disabled; the change is an event and an audit entry, and drift
/// in `status` until the spec agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_an_agent_with_a_running_session_drains_it_first() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = one_assignment_project("long", "sleep 5; echo done >> README.md");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &["--workspace", "w"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let api = Api::of(&root.join(".roundtable/state")).await;
    wait_until("a running session", || {
        agent(&api, "w")["activeSessions"].as_array().is_some_and(|s| !s.is_empty())
            && api.get("/v1/sessions").json()["items"][0]["phase"] == "Running"
    })
    .await;
    let disabled: Reply =
        api.call("POST", "/v1/workspaces/w/agents/generic/disable", &[("Idempotency-Key", "d-1")], None);
    assert_eq!(disabled.status, 200, "{}", disabled.text());
    let body = disabled.json();
    assert_eq!(body["agent"]["state"], "draining", "{body}");
    assert_eq!(body["activeSessions"].as_array().map(Vec::len), Some(1));
    wait_until_within("the drain to complete", Duration::from_secs(60), || agent(&api, "w")["state"] == "disabled")
        .await;
    let sessions = api.get("/v1/sessions").json();
    assert_eq!(sessions["items"].as_array().map(Vec::len), Some(1), "no new session started: {sessions}");
    assert_eq!(sessions["items"][0]["phase"], "Succeeded", "the running session finished");
    let events = api.get("/v1/events?limit=200").text();
    assert!(events.contains("OperatorDraining") && events.contains("DrainCompleted"), "{events}");
    let key = executions.path().join("audit.key");
    let chain = stdout(&roundtable(root, &["--audit-key", key.to_str().expect("utf-8"), "audit", "export"]));
    assert!(chain.contains("operator.disable"), "{chain}");

    // Drift until the spec agrees.
    wait_until("drift in status", || {
        adapter_row(root)["message"].as_str().is_some_and(|m| m.contains("runtime override"))
    })
    .await;
    assert_eq!(adapter_row(root)["sync"], "OutOfSync");
    let enabled = api.call("POST", "/v1/workspaces/w/agents/generic/enable", &[], None);
    assert_eq!(enabled.json()["agent"]["state"], "enabled");
    assert!(!adapter_row(root)["message"].as_str().unwrap_or_default().contains("runtime override"));
    let replay = api.call("POST", "/v1/workspaces/w/agents/generic/disable", &[("Idempotency-Key", "d-1")], None);
    assert_eq!(replay.body, disabled.body, "a retry replays the first answer and does not disable again");
    assert_eq!(agent(&api, "w")["state"], "enabled");
}

/// One request over an established stream (TLS or Unix); the whole answer as text.
async fn exchange<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
    path: &str,
    token: &str,
) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: roundtable\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// `--tls-cert`/`--tls-key` serve HTTPS that a client trusting the certificate reaches (and plain
/// HTTP does not); `--api-listen unix:PATH` serves on a socket only its owner can connect to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_listens_with_tls_and_on_a_unix_socket() {
    use std::os::unix::fs::PermissionsExt as _;
    let identity = roundtable_net_fixtures::TlsIdentity::self_signed(&["localhost"]);
    let project = |name: &str| {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            ".roundtable/specs.yaml",
            &format!("{API}\nkind: Adapter\nmetadata: {{name: {name}}}\nspec: {{command: x, enabled: false}}\n"),
        );
        commit_all(dir.path());
        dir
    };
    let tls_project = project("a");
    let root = tls_project.path();
    std::fs::write(root.join("cert.pem"), &identity.pem).expect("cert");
    std::fs::write(root.join("key.pem"), &identity.key_pem).expect("key");
    let executions = tempfile::tempdir().expect("tempdir");
    let cert = root.join("cert.pem");
    let key = root.join("key.pem");
    let args = ["--tls-cert", cert.to_str().expect("utf-8"), "--tls-key", key.to_str().expect("utf-8")];
    let _daemon = start_daemon(root, &args, executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let api = Api::of(&root.join(".roundtable/state")).await;
    let address = api.address.strip_prefix("https://").expect("an https address").to_owned();
    let tcp = tokio::net::TcpStream::connect(&address).await.expect("connect");
    let tls =
        roundtable_net_fixtures::tls_client(tcp, "localhost", &identity.certificate, true).await.expect("handshake");
    let answer = exchange(tls, "/v1/workspaces/x/agents", &api.token).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains("workspace_not_found"), "{answer}");
    let plain = tokio::net::TcpStream::connect(&address).await.expect("connect");
    let answer = tokio::time::timeout(Duration::from_secs(15), exchange(plain, "/healthz", &api.token))
        .await
        .unwrap_or_default();
    assert!(!answer.contains("200 OK"), "plain HTTP on the TLS port: {answer}");

    let unix_project = project("b");
    let root = unix_project.path();
    let socket = root.join("api.sock");
    let executions = tempfile::tempdir().expect("tempdir");
    let listen = format!("unix:{}", socket.display());
    let _daemon = start_daemon(root, &["--api-listen", &listen], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let api = Api::of(&root.join(".roundtable/state")).await;
    assert_eq!(api.address, listen);
    let mode = std::fs::metadata(&socket).expect("socket").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let stream = tokio::net::UnixStream::connect(&socket).await.expect("connect");
    let workspace = root.file_name().expect("name").to_string_lossy().into_owned();
    let answer = exchange(stream, &format!("/v1/workspaces/{workspace}/agents/b"), &api.token).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"specEnabled\": false"), "{answer}");
}

/// `?force=true` cancels the running session instead of waiting for it; the drain completes when
/// it has been recorded, and nothing starts again while the agent is disabled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_disable_cancels_the_running_session() {
    let Some(_engine) = crate::support::engine_or_skip().await else { return };
    ensure_test_images();
    let dir = one_assignment_project("endless", "sleep 120");
    let root = dir.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let _daemon = start_daemon(root, &["--workspace", "w"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let api = Api::of(&root.join(".roundtable/state")).await;
    wait_until("a running session", || api.get("/v1/sessions").json()["items"][0]["phase"] == "Running").await;
    let forced = api.call("POST", "/v1/workspaces/w/agents/generic/disable?force=true", &[], None).json();
    assert_eq!(
        (forced["agent"]["state"].as_str(), forced["cancelled"].as_u64()),
        (Some("draining"), Some(1)),
        "{forced}"
    );
    wait_until_within("the drain to complete", Duration::from_secs(60), || agent(&api, "w")["state"] == "disabled")
        .await;
    let sessions = api.get("/v1/sessions").json();
    assert_eq!(sessions["items"][0]["phase"], "Cancelled", "{sessions}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(api.get("/v1/sessions").json()["items"].as_array().map(Vec::len), Some(1), "nothing started again");
    let assignment = api.get("/v1/assignments/endless").json();
    let message = assignment["status"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("disabled by an operator"), "the Assignment says why it waits: {message}");
}

/// The Prometheus project's own Python client parses the exposition (when installed; CI installs
/// and requires it) and finds the build info among its families.
fn prometheus_client_parses(metrics: &str) {
    use std::io::Write as _;
    let script = "import sys\nfrom prometheus_client.parser import text_string_to_metric_families as parse\nprint('\\n'.join(f.name for f in parse(sys.stdin.read())))";
    if !crate::support::python_module_or_skip("prometheus_client", "prometheus_client") {
        return;
    }
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().expect("stdin").write_all(metrics.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("python3");
    assert!(out.status.success(), "prometheus_client refused the exposition: {}", String::from_utf8_lossy(&out.stderr));
    let names = String::from_utf8_lossy(&out.stdout);
    for family in
        ["roundtable_build_info", "process_cpu_seconds", "roundtable_gateway_decisions", "roundtable_executions"]
    {
        assert!(names.lines().any(|name| name == family), "{family} not among {names}");
    }
}
