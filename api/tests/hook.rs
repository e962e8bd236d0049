//! The signed git webhook through the whole API over loopback, with no operator token: a call
//! whose signature does not verify is refused `401` and asks for no fetch, a signed one is `202`
//! and wakes what a daemon reconciling a git source waits on; both are in the audit chain.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use roundtable_api::hook::{GitHook, HookSecret};
use roundtable_api::{ApiState, Listen};
use roundtable_daemon::DaemonLink;
use roundtable_store::audit::KeyChoice;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const SECRET: &[u8] = b"a forge's shared secret";
const TOKEN: &str = "rt_hooktest";
const PUSH: &str = r#"{"ref":"refs/heads/main","after":"4b825dc642cb6eb9a060e54bf8d69288fbee4904"}"#;

struct Api {
    address: SocketAddr,
    link: DaemonLink,
    state: ApiState,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _refresher: roundtable_api::status_view::Refresher,
    _dir: tempfile::TempDir,
}

impl Api {
    /// The API of a project with no daemon behind it; `hook` the secret it was started with.
    async fn start(hook: Option<&[u8]>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join(".roundtable")).expect("spec dir");
        let project = roundtable_source::Project::resolve(&dir.path().join(".roundtable")).expect("project");
        let runtime = Arc::new(roundtable_session_runtime::Unavailable {
            endpoint: "none".into(),
            reason: "no engine in this test".into(),
        });
        let service = roundtable_service::Service::open(&project, runtime).await.expect("service");
        let key = service.store().audit_key(&dir.path().join("audit.key"), KeyChoice::Existing).await.expect("key");
        let link = DaemonLink::default();
        let (status, refresher) =
            roundtable_api::status_view::StatusView::start(service.clone(), Duration::from_secs(3600));
        let state = ApiState {
            service,
            link: link.clone(),
            workspace: "hooks".into(),
            token: roundtable_api::auth::OperatorToken::from_secret(TOKEN),
            audit_key: Some(Arc::new(key)),
            provenance_key: dir.path().join("audit.provenance.key"),
            binary: "/nonexistent".into(),
            retention: Duration::from_secs(3600),
            hook: hook.map(|secret| Arc::new(GitHook::new(HookSecret::from_bytes(secret)))),
            console: Default::default(),
            status,
        };
        let bound = roundtable_api::listen::bind(&Listen::Tcp("127.0.0.1:0".parse().expect("address")), None)
            .await
            .expect("bind");
        let roundtable_api::Bound::Tcp(listener) = &bound else { panic!("a TCP listener") };
        let address = listener.local_addr().expect("address");
        let stop = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn({
            let (state, stop) = (state.clone(), stop.clone());
            async move { roundtable_api::serve(bound, state, async move { stop.cancelled().await }).await }
        });
        Self { address, link, state, stop, task, _refresher: refresher, _dir: dir }
    }

    /// One request with `Connection: close`: its status and its body.
    async fn call(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(self.address).await.expect("connect");
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.expect("head");
        // A refused body may be left unread and the connection closed under the rest of it.
        let _ = stream.write_all(body).await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await.expect("answered");
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status: {answer:?}"));
        let body = answer.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
        (status, body)
    }

    /// The reasons of the chain's `Hook/git` entries, oldest first.
    async fn hook_entries(&self) -> Vec<(String, serde_json::Value)> {
        let events = self.state.service.store().recent_events(None, 100).await.expect("events");
        let mut entries: Vec<(String, serde_json::Value)> = events
            .into_iter()
            .filter(|e| e.object == "Hook/git")
            .map(|e| {
                let record: serde_json::Value =
                    serde_json::from_str(e.record.as_deref().unwrap_or("null")).expect("a JSON entry");
                (e.reason, record["record"].clone())
            })
            .collect();
        entries.reverse();
        entries
    }

    async fn stop(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.task).await;
    }
}

/// Whether `requests` was woken within a short while.
async fn woken(requests: &tokio::sync::Notify) -> bool {
    tokio::time::timeout(Duration::from_millis(300), requests.notified()).await.is_ok()
}

fn error_code(body: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    value["error"]["code"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_bad_signature_is_refused_and_fetches_nothing_a_good_one_asks_for_a_fetch() {
    let api = Api::start(Some(SECRET)).await;
    let fetches = api.link.fetch_requests();
    let secret = HookSecret::from_bytes(SECRET);
    let good = secret.signature(PUSH.as_bytes());

    let wrong_secret = HookSecret::from_bytes(b"another secret").signature(PUSH.as_bytes());
    let other_body = secret.signature(b"{}");
    let refused: [(&[(&str, &str)], &str); 5] = [
        (&[], "missingSignature"),
        (&[("X-Hub-Signature-256", &wrong_secret)], "badSignature"),
        (&[("X-Hub-Signature-256", &other_body)], "badSignature"),
        (&[("X-Hub-Signature-256", good.trim_start_matches("sha256="))], "malformedSignature"),
        (&[("X-Gitlab-Token", "not the secret")], "badSignature"),
    ];
    for (headers, reason) in refused {
        let (status, body) = api.call("/v1/hooks/git", headers, PUSH.as_bytes()).await;
        assert_eq!((status, error_code(&body).as_str()), (401, "bad_signature"), "{headers:?}: {body}");
        assert!(body.contains(reason), "{body}");
    }
    // A request to fetch is kept until it is waited for: one look sees any of the five.
    assert!(!woken(&fetches).await, "a refused call asked for a fetch");
    // Refusals are recorded at most once a second: the first is, the next four are counted.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _) = api.call("/v1/hooks/git", &[], PUSH.as_bytes()).await;
    assert_eq!(status, 401);

    let (status, body) = api.call("/v1/hooks/git", &[("X-Hub-Signature-256", &good)], PUSH.as_bytes()).await;
    assert_eq!(status, 202, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer, serde_json::json!({"hook": "git", "fetch": "requested"}));
    assert!(woken(&fetches).await, "a signed call asks the daemon to fetch");

    // Signed calls are recorded at most once a second too.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, body) =
        api.call("/v1/hooks/git", &[("X-Gitlab-Token", "a forge's shared secret")], PUSH.as_bytes()).await;
    assert_eq!(status, 202, "GitLab's token: {body}");
    assert!(woken(&fetches).await);

    let entries = api.hook_entries().await;
    let kinds: Vec<&str> = entries.iter().map(|(reason, _)| reason.as_str()).collect();
    assert_eq!(kinds, ["hook.refused", "hook.refused", "hook.accepted", "hook.accepted"], "{entries:?}");
    assert_eq!(entries[0].1["reason"], "missingSignature");
    assert_eq!(entries[1].1["unrecordedSinceLast"], 4, "{entries:?}");
    assert_eq!(entries[2].1["fetchRequested"], true);
    assert_eq!((&entries[3].1["unrecordedSinceLast"], &entries[3].1["duplicate"]), (&0.into(), &false.into()));
    api.stop().await;
}

#[tokio::test]
async fn a_replayed_delivery_is_answered_as_a_duplicate_and_replays_cost_the_chain_one_entry_a_second() {
    let api = Api::start(Some(SECRET)).await;
    let fetches = api.link.fetch_requests();
    let signature = HookSecret::from_bytes(SECRET).signature(PUSH.as_bytes());
    let captured =
        [("X-Hub-Signature-256", signature.as_str()), ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")];
    let (status, body) = api.call("/v1/hooks/git", &captured, PUSH.as_bytes()).await;
    assert_eq!(status, 202, "{body}");
    assert!(woken(&fetches).await);
    for _ in 0..50 {
        let (status, body) = api.call("/v1/hooks/git", &captured, PUSH.as_bytes()).await;
        let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(status, 200, "{body}");
        assert_eq!(answer, serde_json::json!({"hook": "git", "fetch": "duplicate", "delivery": captured[1].1}));
    }
    assert!(!woken(&fetches).await, "a duplicate asked for a fetch");
    // GitLab's id is its event UUID; a call without any id is still acted on.
    let gitlab = [("X-Gitlab-Token", "a forge's shared secret"), ("X-Gitlab-Event-UUID", "0a1b")];
    for expected in [202, 200] {
        let (status, body) = api.call("/v1/hooks/git", &gitlab, PUSH.as_bytes()).await;
        assert_eq!(status, expected, "{body}");
    }
    let (status, _) = api.call("/v1/hooks/git", &captured[..1], PUSH.as_bytes()).await;
    assert_eq!(status, 202, "no delivery id: acted on");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _) = api.call("/v1/hooks/git", &captured, PUSH.as_bytes()).await;
    assert_eq!(status, 200);
    let entries = api.hook_entries().await;
    // 55 signed calls in about a second: an entry or two, and the last counts the rest.
    let counted: u64 = entries.iter().filter_map(|(_, record)| record["unrecordedSinceLast"].as_u64()).sum();
    assert!(entries.len() <= 3 && entries.len() as u64 + counted == 55, "{entries:?}");
    assert_eq!(entries[0].1["delivery"], captured[1].1);
    assert_eq!((&entries[0].1["duplicate"], &entries[0].1["fetchRequested"]), (&false.into(), &true.into()));
    let last = &entries[entries.len() - 1].1;
    assert_eq!((&last["duplicate"], &last["fetchRequested"]), (&true.into(), &false.into()), "{entries:?}");
    api.stop().await;
}

#[tokio::test]
async fn the_hook_opens_no_other_route_and_bounds_its_body() {
    let api = Api::start(Some(SECRET)).await;
    let fetches = api.link.fetch_requests();
    let secret = HookSecret::from_bytes(SECRET);
    let body = b"{}";
    let signature = secret.signature(body);
    // A valid signature is no operator token anywhere else.
    for path in ["/v1/reconcile/Adapter/x", "/v1/hooks/git/", "/v1/hooks/gitx", "/v1/sessions"] {
        let (status, answer) = api.call(path, &[("X-Hub-Signature-256", &signature)], body).await;
        assert!(status == 401 || status == 404, "{path}: {status} {answer}");
        assert!(!woken(&fetches).await, "{path}");
    }
    let (status, answer) = api.call("/v1/reconcile/Adapter/x", &[("X-Hub-Signature-256", &signature)], body).await;
    assert_eq!((status, error_code(&answer).as_str()), (401, "unauthorized"));

    let large = vec![b' '; (1 << 20) + 1];
    let (status, answer) =
        api.call("/v1/hooks/git", &[("X-Hub-Signature-256", &secret.signature(&large))], &large).await;
    assert_eq!((status, error_code(&answer).as_str()), (413, "body_too_large"));
    assert!(!woken(&fetches).await);
    // The largest body forges are asked to fit in is read whole and verified.
    let largest = vec![b' '; 1 << 20];
    let (status, _) =
        api.call("/v1/hooks/git", &[("X-Hub-Signature-256", &secret.signature(&largest))], &largest).await;
    assert_eq!(status, 202);
    api.stop().await;
}

#[tokio::test]
async fn without_a_secret_the_hook_is_not_there_and_without_a_source_nothing_is_fetched() {
    let api = Api::start(None).await;
    let signature = HookSecret::from_bytes(SECRET).signature(PUSH.as_bytes());
    let (status, body) = api.call("/v1/hooks/git", &[("X-Hub-Signature-256", &signature)], PUSH.as_bytes()).await;
    assert_eq!((status, error_code(&body).as_str()), (404, "hook_not_configured"), "{body}");
    assert!(api.hook_entries().await.is_empty(), "nothing recorded");
    api.stop().await;

    // A daemon that reconciles no git source never called `fetch_requests`.
    let api = Api::start(Some(SECRET)).await;
    let (status, body) = api.call("/v1/hooks/git", &[("X-Hub-Signature-256", &signature)], PUSH.as_bytes()).await;
    assert_eq!((status, error_code(&body).as_str()), (409, "no_git_source"), "{body}");
    let entries = api.hook_entries().await;
    assert_eq!(entries.len(), 1);
    assert_eq!((entries[0].0.as_str(), &entries[0].1["fetchRequested"]), ("hook.accepted", &serde_json::json!(false)));
    api.stop().await;
}

/// Webhook bodies are the only ones read without the token: a few at once per listener, so
/// callers that trickle them hold little. Beyond that the call is answered `503 busy` unread, and
/// operators are served meanwhile.
#[tokio::test]
async fn callers_that_trickle_webhook_bodies_hold_only_a_few_slots() {
    let api = Api::start(Some(SECRET)).await;
    let mut trickling = Vec::new();
    for _ in 0..4 {
        let mut stream = tokio::net::TcpStream::connect(api.address).await.expect("connect");
        let head = "POST /v1/hooks/git HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"ref\":";
        stream.write_all(head.as_bytes()).await.expect("head");
        trickling.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let signature = HookSecret::from_bytes(SECRET).signature(PUSH.as_bytes());
    let started = std::time::Instant::now();
    let (status, body) = api.call("/v1/hooks/git", &[("X-Hub-Signature-256", &signature)], PUSH.as_bytes()).await;
    assert_eq!((status, error_code(&body).as_str()), (503, "busy"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(2), "answered at once, not after the body deadline");
    let token = format!("Bearer {TOKEN}");
    let (status, body) = api.call("/v1/reconcile/Adapter/none", &[("Authorization", &token)], b"").await;
    assert_eq!((status, error_code(&body).as_str()), (404, "object_not_found"), "the operator is served: {body}");

    drop(trickling);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = api.call("/v1/hooks/git", &[("X-Hub-Signature-256", &signature)], PUSH.as_bytes()).await;
    assert_eq!(status, 409, "slots come back when their callers go (no git source here)");
    api.stop().await;
}
