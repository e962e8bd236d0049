//! The real Codex CLI, offline, end to end: in its hardened container, with every byte of its
//! traffic through the session's egress gateway to a fake Responses API on loopback (TLS with a
//! test certificate Codex trusts through `SSL_CERT_FILE`), it calls Roundtable's `task.get` over
//! MCP, edits the workspace with its own patch tool, and the edit becomes a pending proposal.

use std::net::SocketAddr;

use roundtable_net_fixtures::{FakeDns, FakeResponses, Reply, Script};
use serde_json::{Value, json};

use crate::support::{
    API, ShowLogOnPanic, commit_all, docker, engine_or_skip, json as json_of, nothing_left, roundtable,
    start_daemon_with_env, stdout, write,
};

const MODEL_HOST: &str = "api.openai.com";
const FAKE_API: &str = "127.0.0.202:443";
/// Where the test image carries the fake API's certificate.
const CA_PATH: &str = "/etc/roundtable-test-ca.pem";

/// `image` plus `pem` at [`CA_PATH`]: the new image's ID.
fn image_with_ca(image: &str, pem: &str) -> String {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), pem).expect("write the certificate");
    std::fs::set_permissions(file.path(), std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod");
    let container = docker(&["create", image, "true"]);
    docker(&["cp", file.path().to_str().expect("utf-8"), &format!("{container}:{CA_PATH}")]);
    let id = docker(&["commit", &container, "roundtable-codex-test-ca:latest"]);
    docker(&["rm", &container]);
    id
}

fn completed(id: &str) -> Value {
    json!({"type": "response.completed", "response": {"id": id, "usage": {
        "input_tokens": 120, "input_tokens_details": {"cached_tokens": 20},
        "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 5}, "total_tokens": 150
    }}})
}

/// The scripted edit: Codex's own patch tool, invoked as its shell tool.
const PATCH_COMMAND: &str = "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: README.md\n@@\n-Teh quick brown fox.\n+The quick brown fox.\n*** End Patch\nPATCH\n";

fn call(id: &str, item: Value) -> Vec<Value> {
    vec![
        json!({"type": "response.created", "response": {"id": id}}),
        json!({"type": "response.output_item.done", "item": item}),
        completed(id),
    ]
}

fn message(id: &str, text: &str) -> Vec<Value> {
    vec![
        json!({"type": "response.created", "response": {"id": id}}),
        json!({"type": "response.output_item.done", "item": {
            "type": "message", "role": "assistant", "id": format!("msg_{id}"),
            "content": [{"type": "output_text", "text": text}]
        }}),
        completed(id),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_codex_edits_through_the_gateway_and_proposes() {
    let Some(clis) = crate::real_clis::provider_clis() else { return };
    let Some(engine) = engine_or_skip().await else { return };
    let address: SocketAddr = FAKE_API.parse().expect("address");
    let script = Script {
        responses_path: "/v1/responses".into(),
        turns: vec![
            call(
                "resp_1",
                json!({"type": "function_call", "id": "fc_1", "call_id": "call_task", "namespace": "mcp__roundtable", "name": "task_get", "arguments": "{}"}),
            ),
            call(
                "resp_2",
                json!({"type": "function_call", "id": "fc_2", "call_id": "call_patch", "name": "exec_command", "arguments": json!({"cmd": PATCH_COMMAND}).to_string()}),
            ),
            message("resp_3", "Fixed the typo in README.md."),
        ],
        get_body: json!({"models": [], "data": [], "object": "list"}),
    };
    let api = FakeResponses::start(address, &[MODEL_HOST], script).await.expect("fake API on 127.0.0.202:443");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("address")).await.expect("fake DNS");
    dns.answer(MODEL_HOST, vec![Reply::Addresses(vec![address.ip()])]);

    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n\nTeh quick brown fox.\n");
    let adapters = crate::real_clis::real_cli_adapters(&clis);
    let codex = adapters.split("---\n").find(|doc| doc.contains("name: codex")).expect("codex adapter").to_owned();
    let image = codex.split('"').nth(1).expect("the image ID").to_owned();
    // The test image carries this run's certificate at a fixed path (the export withholds
    // `*.pem` from workspaces, as it should).
    let with_ca = image_with_ca(&image, &api.identity.pem);
    let codex = codex.replace(&image, &with_ca).replace("\"}", "\", credentialEnv: [CODEX_API_KEY, SSL_CERT_FILE]}");
    write(root, ".roundtable/adapters.yaml", &codex);
    write(
        root,
        ".roundtable/fix.yaml",
        &format!(
            "{API}\nkind: Assignment\nmetadata: {{name: fix}}\nspec:\n  adapter: codex\n  task: {{id: T, prompt: Fix the typo in README.md.}}\n  readablePaths: [README.md]\n  model: gpt-5-codex\n  timeout: 90s\n"
        ),
    );
    commit_all(root);
    let executions = tempfile::tempdir().expect("executions");
    let _log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_owned());
    let resolver = dns.address().to_string();
    let daemon = start_daemon_with_env(
        root,
        &[
            "--gateway-resolver",
            &resolver,
            "--gateway-allow-cidr",
            "127.0.0.202/32",
            "--gateway-dial-allow",
            "127.0.0.0/8",
        ],
        executions.path(),
        &[("CODEX_API_KEY", "sk-offline-test"), ("SSL_CERT_FILE", CA_PATH)],
    );
    let finished = || {
        let sessions = json_of(&roundtable(root, &["sessions", "list", "--format", "json"]));
        sessions["items"][0]["phase"].as_str().is_some_and(|p| p != "Running" && p != "Queued")
    };
    crate::support::wait_until_within("the Codex session to end", std::time::Duration::from_secs(150), finished).await;
    drop(daemon);
    let sessions = json_of(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let session = sessions["items"][0].clone();
    let id = session["id"].as_str().expect("id").to_owned();
    let logs = stdout(&roundtable(root, &["sessions", "logs", &id]));
    assert_eq!(session["phase"], "Succeeded", "{session:#}\n{logs}");

    // The real thread id and the usage of the three scripted turns are captured.
    let thread = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["type"] == "thread.started")
        .and_then(|event| event["thread_id"].as_str().map(str::to_owned))
        .expect("thread.started");
    assert_eq!(session["externalSessionId"], thread.as_str());
    let agent = &session["detail"]["agent"];
    assert_eq!(
        (agent["usage"]["inputTokens"].as_u64(), agent["usage"]["outputTokens"].as_u64()),
        (Some(360), Some(90)),
        "{agent:#}"
    );
    // The real client called task.get through the session's endpoint.
    assert_eq!(agent["toolCalls"]["task.get"], 1, "{agent:#}");
    assert!(
        agent["mcpClients"].as_array().is_some_and(|c| c.iter().any(|c| c["name"] == "codex-mcp-client")),
        "{agent:#}"
    );

    // Three turns were posted: the task.get result and the patch's result went back to the model.
    let posts: Vec<String> = api
        .recorded()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(posts.len(), 3, "{posts:?}");
    assert!(posts[1].contains("\"call_id\":\"call_task\"") && posts[1].contains("baseCommit"), "the brief went back");
    assert!(posts[2].contains("Success. Updated the following files"), "the patch applied");

    // The gateway let exactly the model host through and denied everything else Codex tried.
    let egress = std::fs::read_to_string(executions.path().join(&id).join("egress.log")).expect("egress.log");
    let decisions: Vec<(String, String)> = egress
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["event"] == "decision")
        .map(|line| (line["host"].as_str().unwrap_or("").to_owned(), line["reason"].as_str().unwrap_or("").to_owned()))
        .collect();
    assert!(decisions.iter().any(|(host, reason)| host == MODEL_HOST && reason == "allowed"), "{egress}");
    for (host, reason) in &decisions {
        let expected = if host == MODEL_HOST { "allowed" } else { "host_not_allowlisted" };
        assert_eq!(reason, expected, "{host}: {egress}");
    }
    assert!(decisions.iter().any(|(host, _)| host == "chatgpt.com"), "Codex tries chatgpt.com: {egress}");

    // The proposal is exactly the scripted edit.
    let proposals = json_of(&roundtable(root, &["proposals", "list", "--format", "json"]));
    let proposal = proposals["items"][0]["id"].as_str().expect("a proposal").to_owned();
    let patch = stdout(&roundtable(root, &["proposals", "export", &proposal]));
    let changed: Vec<&str> = patch
        .lines()
        .filter(|l| (l.starts_with('-') || l.starts_with('+')) && !l.starts_with("---") && !l.starts_with("+++"))
        .collect();
    let scripted: Vec<&str> = PATCH_COMMAND.lines().filter(|l| l.starts_with('-') || l.starts_with('+')).collect();
    assert_eq!(changed, scripted, "{patch}");
    assert!(patch.contains("a/README.md") && patch.matches("diff --git").count() == 1, "{patch}");
    nothing_left(&engine, root).await;
    let _ = std::process::Command::new("docker").args(["image", "rm", "-f", &with_ca]).output();
}
