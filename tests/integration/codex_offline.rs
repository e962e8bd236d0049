//! The real Codex CLI, offline, end to end: in its hardened container, holding only a placeholder
//! for its key, it talks to the session's credential broker through the custom model provider
//! Roundtable writes into its configuration; the broker swaps in the key and reaches a fake
//! Responses API on loopback over TLS (a test CA the broker trusts through `--broker-test-ca`).
//! Codex calls Roundtable's `task.get` over MCP, edits the workspace with its own patch tool, and
//! the edit becomes a pending proposal. With a token budget below the first turn's usage, the
//! broker refuses the second request and the session ends `BudgetExceeded`.

use std::net::SocketAddr;
use std::path::Path;

use roundtable_net_fixtures::{FakeDns, FakeResponses, Reply, Script};
use serde_json::{Value, json};

use crate::support::{
    API, ShowLogOnPanic, commit_all, engine_or_skip, json as json_of, nothing_left, roundtable, start_daemon_with_env,
    stdout, write,
};

const REAL_KEY: &str = "sk-offline-test-0f1e2d3c4b5a69788796a5b4";

const MODEL_HOST: &str = "api.openai.com";
const FAKE_API: &str = "127.0.0.202:443";

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

fn script() -> Script {
    Script {
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
    }
}

/// A project with the real Codex adapter and one Assignment (`extra` appended to its spec), and a
/// daemon whose broker reaches the fake API at `address`; returns when the session has ended.
struct Ended {
    _dir: tempfile::TempDir,
    executions: tempfile::TempDir,
    session: Value,
    logs: String,
}

impl Ended {
    fn root(&self) -> &Path {
        self._dir.path()
    }
}

async fn run_codex(clis: &Path, api: &FakeResponses, extra: &str) -> Ended {
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("address")).await.expect("fake DNS");
    dns.answer(MODEL_HOST, vec![Reply::Addresses(vec![api.address.ip()])]);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n\nTeh quick brown fox.\n");
    let adapters = crate::real_clis::real_cli_adapters(clis);
    let codex = adapters.split("---\n").find(|doc| doc.contains("name: codex")).expect("codex adapter").to_owned();
    write(root, ".roundtable/adapters.yaml", &codex);
    write(
        root,
        ".roundtable/fix.yaml",
        &format!(
            "{API}\nkind: Assignment\nmetadata: {{name: fix}}\nspec:\n  adapter: codex\n  task: {{id: T, prompt: Fix the typo in README.md.}}\n  readablePaths: [README.md]\n  model: gpt-5-codex\n  timeout: 90s\n{extra}"
        ),
    );
    commit_all(root);
    let executions = tempfile::tempdir().expect("executions");
    let _log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_owned());
    let args = crate::support::fake_provider_args(executions.path(), api, &dns);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let daemon = start_daemon_with_env(root, &args, executions.path(), &[("CODEX_API_KEY", REAL_KEY)]);
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
    Ended { _dir: dir, executions, session, logs }
}

/// The broker log's lines of `ended`'s session.
fn broker_lines(ended: &Ended) -> Vec<Value> {
    let id = ended.session["id"].as_str().expect("id");
    let log = std::fs::read_to_string(ended.executions.path().join(id).join("broker.log")).expect("broker.log");
    log.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_codex_edits_through_the_broker_and_proposes() {
    let Some(clis) = crate::real_clis::provider_clis() else { return };
    let Some(engine) = engine_or_skip().await else { return };
    let address: SocketAddr = FAKE_API.parse().expect("address");
    let api = FakeResponses::start(address, &[MODEL_HOST], script()).await.expect("fake API on 127.0.0.202:443");
    let ended = run_codex(&clis, &api, "").await;
    let (session, logs, root) = (&ended.session, &ended.logs, ended.root());
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

    // Three turns were posted with the real key, swapped in by the broker: Codex held only a
    // placeholder, and the key never reached the container or its logs.
    let posts: Vec<_> = api.recorded().into_iter().filter(|r| r.method == "POST").collect();
    assert_eq!(posts.len(), 3, "{posts:?}");
    for post in &posts {
        assert_eq!(post.header("authorization"), Some(format!("Bearer {REAL_KEY}").as_str()));
    }
    let bodies: Vec<String> = posts.iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect();
    assert!(bodies[1].contains("\"call_id\":\"call_task\"") && bodies[1].contains("baseCommit"), "the brief went back");
    assert!(bodies[2].contains("Success. Updated the following files"), "the patch applied");
    assert!(!logs.contains(REAL_KEY), "{logs}");

    // The broker passed exactly the three model requests, with the counted usage.
    let lines = broker_lines(&ended);
    let allowed: Vec<&Value> = lines.iter().filter(|line| line["reason"] == "allowed").collect();
    assert_eq!(allowed.len(), 3, "{lines:?}");
    for line in &allowed {
        assert_eq!(
            (line["method"].as_str(), line["path"].as_str()),
            (Some("POST"), Some("/api.openai.com/v1/responses")),
            "{line}"
        );
        assert_eq!(line["credential"], "CODEX_API_KEY", "{line}");
    }
    let broker = &session["detail"]["broker"];
    assert_eq!((broker["requests"].as_u64(), broker["tokens"]["input"].as_u64()), (Some(3), Some(360)), "{broker:#}");

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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_codex_stops_when_its_token_budget_is_spent() {
    let Some(clis) = crate::real_clis::provider_clis() else { return };
    let Some(engine) = engine_or_skip().await else { return };
    let address: SocketAddr = "127.0.0.205:443".parse().expect("address");
    let api = FakeResponses::start(address, &[MODEL_HOST], script()).await.expect("fake API on 127.0.0.205:443");
    // The first turn alone reports 150 tokens.
    let ended = run_codex(&clis, &api, "  budget: {tokens: 100}\n").await;
    let session = &ended.session;
    assert_eq!(
        (session["phase"].as_str(), session["cause"].as_str()),
        (Some("Failed"), Some("BudgetExceeded")),
        "{session:#}\n{}",
        ended.logs
    );
    let posts = api.recorded().into_iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 1, "the fake API received no request after the one that spent the budget");
    let refused = broker_lines(&ended).into_iter().filter(|line| line["reason"] == "budget_exhausted").count();
    assert!(refused >= 1, "the broker refused the next request");
    let broker = &session["detail"]["broker"];
    assert_eq!(broker["exhausted"], true, "{broker:#}");
    let shown = stdout(&roundtable(ended.root(), &["sessions", "show", session["id"].as_str().expect("id")]));
    assert!(shown.contains("tokens 150 spent of 100, 0 left"), "{shown}");
    nothing_left(&engine, ended.root()).await;
}
