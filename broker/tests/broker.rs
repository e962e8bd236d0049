//! The broker end to end on loopback: a scripted DNS server, a fake provider over TLS with a
//! fresh certificate on a per-test `127.0.0.N:443` address (trusted as the broker's extra root),
//! and a raw HTTP/1.1 client, so every check of the security contract is seen from both ends:
//! what the agent is answered, and what (if anything) reached the provider.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ipnet::IpNet;
use roundtable_broker::{
    Broker, BrokerJournal, BrokerLimits, BrokerReason, BrokerSettings, Budget, Credential, RequestLine, Route, Secret,
    Tokens, serve,
};
use roundtable_gateway::{DirectDialer, DnsResolver, Endpoint, Listener, Settings};
use roundtable_net_fixtures::{Canned, FakeDns, FakeProvider, Recorded, Reply};
use roundtable_specs::broker::placeholder_from;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const OPENAI: &str = "api.openai.com";
const ANTHROPIC: &str = "api.anthropic.com";
const GEMINI: &str = "generativelanguage.googleapis.com";
const CUSTOM: &str = "llm.example.test";
const REAL_KEY: &str = "sk-proj-Zq81vT0nWc4Lr2XbY7uPaE5dMxYA";
const AGENT_KEY: &str = "sk-agent-own-0123456789abcdef";

fn placeholder() -> String {
    placeholder_from(&[0x5a; 32])
}

/// A loopback address of this test's own: 127.0.0.100 upwards.
fn own_address() -> Ipv4Addr {
    static NEXT: AtomicU8 = AtomicU8::new(100);
    Ipv4Addr::new(127, 0, 0, NEXT.fetch_add(1, Ordering::Relaxed))
}

fn net(text: &str) -> IpNet {
    text.parse().expect("a CIDR")
}

#[derive(Default)]
struct MemoryJournal(Mutex<Vec<RequestLine>>);

impl BrokerJournal for MemoryJournal {
    fn request(&self, line: &RequestLine) {
        self.0.lock().expect("journal").push(line.clone());
    }
}

impl MemoryJournal {
    fn lines(&self) -> Vec<RequestLine> {
        self.0.lock().expect("journal").clone()
    }
}

type TestBroker = Broker<DnsResolver, DirectDialer>;

struct Harness {
    address: SocketAddr,
    provider: FakeProvider,
    dns: FakeDns,
    journal: Arc<MemoryJournal>,
    broker: Arc<TestBroker>,
    _cancel: tokio_util::sync::DropGuard,
}

struct Options {
    host: &'static str,
    key: &'static str,
    budget: Budget,
    limits: BrokerLimits,
    dns: Option<Reply>,
    dns_timeout: Option<Duration>,
}

impl Options {
    fn new(host: &'static str) -> Self {
        Self {
            host,
            key: REAL_KEY,
            budget: Budget::default(),
            limits: BrokerLimits::default(),
            dns: None,
            dns_timeout: None,
        }
    }
}

fn credential(host: &str) -> Credential {
    Credential {
        name: "PROVIDER_API_KEY".into(),
        placeholder: placeholder(),
        value: Secret::new(REAL_KEY.into()),
        host: host.into(),
    }
}

async fn start(options: Options, answer: impl Fn(&Recorded) -> Canned + Send + Sync + 'static) -> Harness {
    let upstream_ip = own_address();
    let provider = FakeProvider::start(SocketAddr::new(IpAddr::V4(upstream_ip), 443), &[options.host], answer)
        .await
        .expect("provider");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("addr")).await.expect("dns");
    dns.answer(options.host, vec![options.dns.unwrap_or(Reply::Addresses(vec![IpAddr::V4(upstream_ip)]))]);
    let mut upstream = Settings::new([options.host]).expect("settings");
    upstream.set_allow_cidrs([net("127.0.0.0/8")]).expect("allowCidrs");
    upstream.dial_allow = vec![net("127.0.0.0/8")];
    upstream.self_addresses = vec!["127.0.0.1".parse().expect("ip")];
    if let Some(timeout) = options.dns_timeout {
        upstream.limits.dns_timeout = timeout;
    }
    let settings = BrokerSettings {
        routes: vec![Route::new(options.host)],
        credentials: vec![Credential { value: Secret::new(options.key.into()), ..credential(options.host) }],
        budget: options.budget,
        limits: options.limits,
        upstream,
        extra_roots: vec![provider.identity.certificate.clone()],
    };
    let journal = Arc::new(MemoryJournal::default());
    let resolver = DnsResolver::new(&[dns.address()]).expect("resolver");
    let broker = Arc::new(Broker::new(settings, resolver, DirectDialer, journal.clone()).expect("broker"));
    let listener = Listener::bind(&Endpoint::Tcp("127.0.0.1:0".parse().expect("addr"))).await.expect("bind");
    let Ok(Endpoint::Tcp(address)) = listener.endpoint() else { panic!("a TCP listener") };
    let cancel = CancellationToken::new();
    tokio::spawn(serve(broker.clone(), Arc::new(listener), cancel.clone()));
    Harness { address, provider, dns, journal, broker, _cancel: cancel.drop_guard() }
}

/// One answer as the agent saw it.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.head
            .split("\r\n")
            .filter_map(|line| line.split_once(':'))
            .find_map(|(n, v)| n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned()))
    }

    fn code(&self) -> String {
        let body: serde_json::Value = serde_json::from_str(&self.body).unwrap_or_default();
        body["error"]["code"].as_str().unwrap_or_default().to_owned()
    }
}

fn parse_answer(bytes: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut answer = Answer { status, head: head.to_owned(), body: body.to_owned() };
    if answer.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        answer.body = dechunk(body);
    }
    answer
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    out
}

/// Sends `head` (without its blank line; `Connection: close` is added) and `body`, reads the
/// answer to the end.
async fn send(address: SocketAddr, head: &str, body: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(address).await.expect("connect to the broker");
    let mut request = format!("{head}\r\nConnection: close\r\n");
    if !body.is_empty() && !head.to_ascii_lowercase().contains("transfer-encoding") {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("write the head");
    let _ = stream.write_all(body).await;
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut bytes)).await.expect("an answer");
    parse_answer(&bytes)
}

fn bearer() -> String {
    format!("Authorization: Bearer {}", placeholder())
}

/// Nothing the provider received holds a placeholder, in a header, the path or the query.
fn assert_no_placeholder_upstream(recorded: &[Recorded]) {
    for request in recorded {
        assert!(!request.path.to_ascii_lowercase().contains("rt-placeholder-"), "{}", request.path);
        for (name, value) in &request.headers {
            assert!(!value.to_ascii_lowercase().contains("rt-placeholder-"), "{name}: placeholder sent upstream");
        }
    }
}

/// No journal line holds the key or the placeholder.
fn assert_lines_clean(lines: &[RequestLine]) {
    for line in lines {
        let text = serde_json::to_string(line).expect("a line");
        assert!(!text.contains(REAL_KEY) && !text.contains(&placeholder()) && !text.contains(AGENT_KEY), "{text}");
    }
}

fn sse_turn() -> Vec<serde_json::Value> {
    vec![
        json!({"type": "response.created", "response": {"id": "resp_1"}}),
        json!({"type": "response.output_text.delta", "delta": "hello"}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "usage": {"input_tokens": 11, "output_tokens": 7}}}),
    ]
}

#[tokio::test]
async fn the_provider_sees_the_real_key_only_in_its_auth_header_and_nothing_of_the_agents() {
    let harness = start(Options::new(OPENAI), |_| {
        Canned::sse(&sse_turn())
            .header("set-cookie", "session=abc")
            .header("openai-organization", "org-secret")
            .header("openai-project", "proj_secret")
            .header("x-request-id", "req_42")
            .header("x-echo-key", &format!("you are {REAL_KEY}"))
            .header("x-echo-placeholder", "rt-placeholder-5a5a")
    })
    .await;
    let head = format!(
        "POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: evil.example\r\n{}\r\nx-api-key: {AGENT_KEY}\r\n\
         Proxy-Authorization: Basic {AGENT_KEY}\r\nCookie: c=1\r\nX-Forwarded-For: 10.0.0.1\r\nForwarded: for=x\r\n\
         Via: 1.1 agent\r\nOpenAI-Organization: org-agent\r\nOpenAI-Project: proj-agent\r\nOpenAI-Beta: responses=v1\r\n\
         Content-Type: application/json",
        bearer()
    );
    let answer = send(harness.address, &head, br#"{"model":"gpt-5","input":"hi"}"#).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("response.completed"), "{}", answer.body);
    for stripped in ["set-cookie", "openai-organization", "openai-project", "x-echo-key", "x-echo-placeholder"] {
        assert_eq!(answer.header(stripped), None, "{stripped} passed back");
    }

    let recorded = harness.provider.recorded();
    assert_eq!(recorded.len(), 1);
    let request = &recorded[0];
    assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/v1/responses"));
    assert_eq!(request.header("authorization"), Some(format!("Bearer {REAL_KEY}").as_str()));
    assert_eq!(request.headers.iter().filter(|(n, _)| n == "authorization").count(), 1);
    assert_eq!(request.header("host"), Some(OPENAI));
    assert_eq!(request.header("openai-beta"), Some("responses=v1"), "provider headers pass verbatim");
    for stripped in [
        "x-api-key",
        "proxy-authorization",
        "cookie",
        "x-forwarded-for",
        "forwarded",
        "via",
        "openai-organization",
        "openai-project",
    ] {
        assert_eq!(request.header(stripped), None, "{stripped} reached upstream");
    }
    let real_key_places: Vec<&str> =
        request.headers.iter().filter(|(_, v)| v.contains(REAL_KEY)).map(|(n, _)| n.as_str()).collect();
    assert_eq!(real_key_places, ["authorization"]);
    assert!(!request.headers.iter().any(|(_, v)| v.contains(AGENT_KEY)), "the agent's own key reached upstream");
    assert_no_placeholder_upstream(&recorded);
    assert_eq!(request.body, br#"{"model":"gpt-5","input":"hi"}"#);

    let lines = harness.journal.lines();
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!((line.reason, line.status), (BrokerReason::Allowed, 200));
    assert_eq!(line.host.as_deref(), Some(OPENAI));
    assert_eq!(line.path, format!("/{OPENAI}/v1/responses"));
    assert_eq!(line.credential.as_deref(), Some("PROVIDER_API_KEY"));
    assert_eq!(line.upstream_request_id.as_deref(), Some("req_42"));
    assert_eq!(line.tokens, Some(Tokens { input: 11, output: 7 }));
    assert_eq!(line.bytes_up, 30);
    assert!(line.bytes_down > 0 && line.first_byte_ms.is_some());
    assert_lines_clean(&lines);
    let counters = harness.broker.counters();
    assert_eq!((counters.requests, counters.tokens.total()), (1, 18));
}

#[tokio::test]
async fn anthropic_takes_the_key_from_x_api_key_and_the_agents_own_bearer_never_passes() {
    let harness = start(Options::new(ANTHROPIC), |_| {
        Canned::json(200, &json!({"type": "message", "usage": {"input_tokens": 3, "output_tokens": 4}}))
            .header("anthropic-organization-id", "org-1")
            .header("request-id", "req_a")
    })
    .await;
    let head = format!(
        "POST /{ANTHROPIC}/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {}\r\nAuthorization: Bearer {AGENT_KEY}\r\nanthropic-version: 2023-06-01",
        placeholder()
    );
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.header("anthropic-organization-id"), None);
    let recorded = harness.provider.recorded();
    let request = &recorded[0];
    assert_eq!(request.header("x-api-key"), Some(REAL_KEY));
    assert_eq!(request.header("authorization"), None, "the agent's own Authorization reached upstream");
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_no_placeholder_upstream(&recorded);
    let lines = harness.journal.lines();
    assert_eq!(lines[0].upstream_request_id.as_deref(), Some("req_a"));
    assert_eq!(lines[0].tokens, Some(Tokens { input: 3, output: 4 }));

    // The bearer form works too, injected as a bearer.
    let head = format!("POST /{ANTHROPIC}/v1/messages/count_tokens HTTP/1.1\r\nHost: x\r\n{}", bearer());
    assert_eq!(send(harness.address, &head, b"{}").await.status, 200);
    let recorded = harness.provider.recorded();
    assert_eq!(recorded[1].header("authorization"), Some(format!("Bearer {REAL_KEY}").as_str()));
    assert_eq!(recorded[1].header("x-api-key"), None);
}

#[tokio::test]
async fn gemini_query_key_is_replaced_in_place_and_other_keys_dropped() {
    let harness = start(Options::new(GEMINI), |_| {
        Canned::sse(&[json!({"candidates": [], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2}})])
    })
    .await;
    let head = format!(
        "POST /{GEMINI}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key={}&key={AGENT_KEY} HTTP/1.1\r\nHost: x",
        placeholder()
    );
    assert_eq!(send(harness.address, &head, b"{}").await.status, 200);
    let head = format!(
        "POST /{GEMINI}/v1/models/gemini-2.5-pro:generateContent?key={AGENT_KEY} HTTP/1.1\r\nHost: x\r\nx-goog-api-key: {}",
        placeholder()
    );
    assert_eq!(send(harness.address, &head, b"{}").await.status, 200);
    let recorded = harness.provider.recorded();
    assert_eq!(recorded[0].path, format!("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key={REAL_KEY}"));
    assert_eq!(recorded[0].header("x-goog-api-key"), None);
    assert_eq!(recorded[1].path, "/v1/models/gemini-2.5-pro:generateContent", "the agent's own ?key= passed");
    assert_eq!(recorded[1].header("x-goog-api-key"), Some(REAL_KEY));
    assert_no_placeholder_upstream(&recorded);
    let lines = harness.journal.lines();
    assert_eq!(lines[0].path, format!("/{GEMINI}/v1beta/models/{{model}}:streamGenerateContent"));
    assert_eq!(lines[0].tokens, Some(Tokens { input: 5, output: 2 }));
    assert_lines_clean(&lines);
}

#[tokio::test]
async fn every_refusal_is_answered_with_its_reason_and_nothing_reaches_upstream() {
    let limits = BrokerLimits { max_body_bytes: 1024, ..BrokerLimits::default() };
    let harness = start(Options { limits, ..Options::new(OPENAI) }, |_| Canned::json(200, &json!({}))).await;
    let ph = placeholder();
    let auth = bearer();
    let cases: Vec<(String, Vec<u8>, u16, &str)> = vec![
        (
            format!("POST /api.anthropic.com/v1/messages HTTP/1.1\r\nHost: {OPENAI}\r\n{auth}"),
            vec![],
            404,
            "unknown_route",
        ),
        (format!("POST /v1/responses HTTP/1.1\r\nHost: {OPENAI}\r\n{auth}"), vec![], 404, "unknown_route"),
        (format!("POST /{OPENAI}.evil.test/v1/responses HTTP/1.1\r\nHost: x\r\n{auth}"), vec![], 404, "unknown_route"),
        (format!("POST /{OPENAI}/v1/../v1/responses HTTP/1.1\r\nHost: x\r\n{auth}"), vec![], 400, "bad_request"),
        (format!("POST /{OPENAI}/v1%2Fresponses HTTP/1.1\r\nHost: x\r\n{auth}"), vec![], 400, "bad_request"),
        (format!("POST /{OPENAI}//v1/responses HTTP/1.1\r\nHost: x\r\n{auth}"), vec![], 400, "bad_request"),
        (format!("POST /{OPENAI}/v1/./responses HTTP/1.1\r\nHost: x\r\n{auth}"), vec![], 400, "bad_request"),
        (
            format!("GET /{OPENAI}/v1/models/{} HTTP/1.1\r\nHost: x\r\n{auth}", "a".repeat(2100)),
            vec![],
            400,
            "bad_request",
        ),
        (format!("POST /{OPENAI}/v1/files HTTP/1.1\r\nHost: x\r\n{auth}"), vec![], 403, "path_not_allowed"),
        (format!("GET /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{auth}"), vec![], 403, "path_not_allowed"),
        (format!("DELETE /{OPENAI}/v1/models/gpt-5 HTTP/1.1\r\nHost: x\r\n{auth}"), vec![], 405, "method_not_allowed"),
        (format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x"), vec![], 401, "no_placeholder"),
        (
            format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {AGENT_KEY}"),
            vec![],
            401,
            "no_placeholder",
        ),
        (
            format!(
                "POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}",
                placeholder_from(&[1; 32])
            ),
            vec![],
            401,
            "no_placeholder",
        ),
        // OpenAI takes its key as a bearer only.
        (format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\nx-api-key: {ph}"), vec![], 401, "no_placeholder"),
        (format!("POST /{OPENAI}/v1/responses?key={ph} HTTP/1.1\r\nHost: x"), vec![], 401, "no_placeholder"),
        (format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{auth}"), vec![b'x'; 2048], 413, "body_too_large"),
        (
            format!(
                "GET /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{auth}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13"
            ),
            vec![],
            426,
            "upgrade_refused",
        ),
        (
            format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{auth}\r\nx-leak: {ph}"),
            vec![],
            400,
            "bad_request",
        ),
        (format!("POST /{OPENAI}/v1/responses?note={ph} HTTP/1.1\r\nHost: x\r\n{auth}"), vec![], 400, "bad_request"),
    ];
    for (head, body, status, code) in &cases {
        let answer = send(harness.address, head, body).await;
        let summary = head.lines().next().unwrap_or_default().chars().take(90).collect::<String>();
        assert_eq!((answer.status, answer.code().as_str()), (*status, *code), "{summary}: {answer:?}");
        assert!(
            answer.body.contains(&format!("roundtable broker refused this request: {code}: ")),
            "{summary}: {}",
            answer.body
        );
        assert!(!answer.body.contains(&ph) && !answer.body.contains(REAL_KEY));
    }
    assert!(harness.provider.recorded().is_empty(), "a refused request reached upstream");
    assert_eq!(harness.dns.lookups(OPENAI), 0, "a refused request was resolved");
    let lines = harness.journal.lines();
    assert_eq!(lines.len(), cases.len());
    assert_lines_clean(&lines);
    assert!(lines.iter().all(|line| line.path.len() <= 256));
    let counters = harness.broker.counters();
    assert_eq!(counters.requests, 0);
    assert_eq!(counters.refused.get(&BrokerReason::NoPlaceholder), Some(&5));
    assert_eq!(counters.refused.get(&BrokerReason::UpgradeRefused), Some(&1));
}

#[tokio::test]
async fn a_chunked_body_is_cut_when_it_passes_the_cap() {
    let limits = BrokerLimits { max_body_bytes: 1024, ..BrokerLimits::default() };
    let harness = start(Options { limits, ..Options::new(OPENAI) }, |_| Canned::json(200, &json!({}))).await;
    let chunk = format!("{:x}\r\n{}\r\n", 600, "y".repeat(600));
    let body = format!("{chunk}{chunk}{chunk}0\r\n\r\n");
    let head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}\r\nTransfer-Encoding: chunked", bearer());
    let answer = send(harness.address, &head, body.as_bytes()).await;
    assert_eq!((answer.status, answer.code().as_str()), (413, "body_too_large"), "{answer:?}");
    assert!(harness.provider.recorded().iter().all(|r| r.body.len() < 1800), "the whole body reached upstream");
    // Under the cap, a chunked body streams through whole.
    let small = format!("{chunk}0\r\n\r\n");
    let answer = send(harness.address, &head, small.as_bytes()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(harness.provider.recorded().iter().any(|r| r.body.len() == 600));
}

#[tokio::test]
async fn the_budget_refuses_the_request_after_it_is_spent() {
    let budget = Budget { tokens: None, requests: Some(1) };
    let harness = start(Options { budget, ..Options::new(OPENAI) }, |_| Canned::sse(&sse_turn())).await;
    let mut refused = harness.broker.budget_refused();
    let head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    assert_eq!(send(harness.address, &head, b"{}").await.status, 200);
    assert!(!*refused.borrow_and_update());
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!((answer.status, answer.code().as_str()), (429, "budget_exhausted"), "{answer:?}");
    assert_eq!(harness.provider.recorded().len(), 1, "a request past the budget reached upstream");
    assert!(*refused.borrow_and_update(), "the watch did not turn");
    let counters = harness.broker.counters();
    assert!(counters.exhausted);
    assert_eq!(counters.refused.get(&BrokerReason::BudgetExhausted), Some(&1));
}

#[tokio::test]
async fn an_error_body_echoing_the_key_is_masked() {
    let echoed = format!(
        "Incorrect API key provided: sk-proj-****\u{2026}MxYA. You sent {REAL_KEY} (also rt-placeholder-{}).",
        "5a".repeat(32)
    );
    let body = json!({"error": {"message": echoed, "type": "invalid_request_error"}});
    let harness = start(Options::new(OPENAI), move |_| Canned::json(401, &body)).await;
    let head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(!answer.body.contains(REAL_KEY), "{}", answer.body);
    assert!(!answer.body.contains("MxYA"), "{}", answer.body);
    assert!(!answer.body.contains(&placeholder()), "{}", answer.body);
    assert!(answer.body.contains("Incorrect API key provided: [redacted]."), "{}", answer.body);
    assert_eq!(answer.header("content-length"), Some(answer.body.len().to_string()));
    let lines = harness.journal.lines();
    assert_eq!((lines[0].status, lines[0].reason), (401, BrokerReason::Allowed));
    let counters = harness.broker.counters();
    assert_eq!((counters.unreadable, counters.tokens), (0, Tokens::default()), "a non-2xx settles nothing");
}

#[tokio::test]
async fn server_sent_events_reach_the_agent_event_by_event() {
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    let harness =
        start(Options::new(OPENAI), move |_| Canned { gate: Some(held.clone()), ..Canned::sse(&sse_turn()) }).await;
    let mut stream = TcpStream::connect(harness.address).await.expect("connect");
    let head =
        format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}\r\nContent-Length: 2\r\n\r\n{{}}", bearer());
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    // The provider holds everything after its first event until the gate opens.
    tokio::time::timeout(Duration::from_secs(5), async {
        while !String::from_utf8_lossy(&seen).contains("response.created") {
            let n = stream.read(&mut buffer).await.expect("read");
            assert!(n > 0, "closed before the first event");
            seen.extend_from_slice(&buffer[..n]);
        }
    })
    .await
    .expect("the first event arrived only after the provider finished");
    assert!(!String::from_utf8_lossy(&seen).contains("response.completed"));
    gate.notify_one();
    tokio::time::timeout(Duration::from_secs(5), async {
        while !String::from_utf8_lossy(&seen).contains("response.completed") {
            let n = stream.read(&mut buffer).await.expect("read");
            assert!(n > 0, "closed before the last event");
            seen.extend_from_slice(&buffer[..n]);
        }
    })
    .await
    .expect("the rest of the stream");
    drop(stream);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lines = harness.journal.lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].tokens, Some(Tokens { input: 11, output: 7 }));
}

#[tokio::test]
async fn upstream_failures_are_502_or_504_with_the_detail_only_in_the_line() {
    // The provider host resolves to a private address no allowCidrs entry admits.
    let options =
        Options { dns: Some(Reply::Addresses(vec!["10.1.2.3".parse().expect("ip")])), ..Options::new(CUSTOM) };
    let harness = start(options, |_| Canned::json(200, &json!({}))).await;
    let head = format!("POST /{CUSTOM}/v1/chat/completions HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!((answer.status, answer.code().as_str()), (502, "upstream_failed"), "{answer:?}");
    let lines = harness.journal.lines();
    assert!(lines[0].detail.as_deref().is_some_and(|d| d.contains("address_denied:private")), "{lines:?}");
    assert!(!answer.body.contains("10.1.2.3") && !answer.body.contains("address_denied"), "{}", answer.body);
    assert!(harness.provider.recorded().is_empty());

    // Nothing listens where it resolves.
    let options = Options { dns: Some(Reply::Addresses(vec![IpAddr::V4(own_address())])), ..Options::new(CUSTOM) };
    let harness = start(options, |_| Canned::json(200, &json!({}))).await;
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!((answer.status, answer.code().as_str()), (502, "upstream_failed"), "{answer:?}");
    assert!(harness.journal.lines()[0].detail.as_deref().is_some_and(|d| d.contains(":443")));
    assert!(!answer.body.contains(":443") && !answer.body.contains("127.0.0."), "{}", answer.body);

    // The nameserver stays silent.
    let options =
        Options { dns: Some(Reply::Silence), dns_timeout: Some(Duration::from_millis(300)), ..Options::new(CUSTOM) };
    let harness = start(options, |_| Canned::json(200, &json!({}))).await;
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!((answer.status, answer.code().as_str()), (504, "upstream_timeout"), "{answer:?}");
    assert!(answer.body.contains("did not answer in time"), "{}", answer.body);
    // A failed request was admitted, and settles nothing.
    assert_eq!(harness.broker.counters().unreadable, 0);
}

#[tokio::test]
async fn a_custom_host_takes_any_get_or_post_and_the_key_from_any_place() {
    let harness = start(Options::new(CUSTOM), |_| Canned::json(200, &json!({"ok": true}))).await;
    let ph = placeholder();
    for (place, header) in [
        (format!("x-goog-api-key: {ph}"), "x-goog-api-key"),
        (format!("x-api-key: {ph}"), "x-api-key"),
        (bearer(), "authorization"),
    ] {
        let head = format!("GET /{CUSTOM}/anything/v9/list HTTP/1.1\r\nHost: x\r\n{place}");
        assert_eq!(send(harness.address, &head, b"").await.status, 200);
        let recorded = harness.provider.recorded();
        let last = recorded.last().expect("a request");
        let carrying: Vec<&str> =
            last.headers.iter().filter(|(_, v)| v.contains(REAL_KEY)).map(|(n, _)| n.as_str()).collect();
        assert_eq!(carrying, [header]);
    }
    assert_eq!(
        send(harness.address, &format!("PUT /{CUSTOM}/x HTTP/1.1\r\nHost: x\r\n{}", bearer()), b"").await.status,
        405
    );
    assert_no_placeholder_upstream(&harness.provider.recorded());
}

#[tokio::test]
async fn a_keep_alive_connection_on_the_unix_socket_carries_several_requests() {
    let upstream_ip = own_address();
    let provider = FakeProvider::start(SocketAddr::new(IpAddr::V4(upstream_ip), 443), &[OPENAI], |_| {
        Canned::json(200, &json!({"data": []}))
    })
    .await
    .expect("provider");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("addr")).await.expect("dns");
    dns.answer(OPENAI, vec![Reply::Addresses(vec![IpAddr::V4(upstream_ip)])]);
    let mut upstream = Settings::new([OPENAI]).expect("settings");
    upstream.set_allow_cidrs([net("127.0.0.0/8")]).expect("allowCidrs");
    upstream.dial_allow = vec![net("127.0.0.0/8")];
    let settings = BrokerSettings {
        routes: vec![Route::new(OPENAI)],
        credentials: vec![credential(OPENAI)],
        budget: Budget::default(),
        limits: BrokerLimits::default(),
        upstream,
        extra_roots: vec![provider.identity.certificate.clone()],
    };
    let journal = Arc::new(MemoryJournal::default());
    let resolver = DnsResolver::new(&[dns.address()]).expect("resolver");
    let broker = Arc::new(Broker::new(settings, resolver, DirectDialer, journal.clone()).expect("broker"));
    let dir = tempfile_dir();
    let path = dir.join("broker.sock");
    let listener = Listener::bind(&Endpoint::Unix(path.clone())).await.expect("bind");
    let cancel = CancellationToken::new();
    let served = tokio::spawn(serve(broker, Arc::new(listener), cancel.clone()));

    let mut stream = UnixStream::connect(&path).await.expect("connect");
    let request = format!("GET /{OPENAI}/v1/models HTTP/1.1\r\nHost: x\r\n{}\r\n\r\n", bearer());
    for _ in 0..2 {
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).ends_with(r#"{"data":[]}"#) {
            let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
                .await
                .expect("answer")
                .expect("read");
            assert!(n > 0, "the connection was closed: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buffer[..n]);
        }
        assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    }
    assert_eq!(provider.recorded().len(), 2);
    assert_eq!(journal.lines().len(), 2);
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(15), served).await.expect("the broker stops").expect("joined");
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    static NEXT: AtomicU8 = AtomicU8::new(0);
    let dir = std::env::temp_dir().join(format!(
        "roundtable-broker-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn a_broker_is_not_built_for_a_host_its_upstream_cannot_reach() {
    let settings = BrokerSettings {
        routes: vec![Route::new(ANTHROPIC)],
        credentials: vec![credential(ANTHROPIC)],
        budget: Budget::default(),
        limits: BrokerLimits::default(),
        upstream: Settings::new([OPENAI]).expect("settings"),
        extra_roots: vec![],
    };
    let resolver = DnsResolver::new(&["127.0.0.1:53".parse().expect("addr")]).expect("resolver");
    let error =
        Broker::new(settings, resolver, DirectDialer, Arc::new(MemoryJournal::default())).err().expect("refused");
    assert!(error.to_string().contains(ANTHROPIC));
    assert!(!format!("{error:?}").contains(REAL_KEY));
}

#[tokio::test]
async fn a_placeholder_in_the_path_of_a_custom_host_is_refused() {
    let harness = start(Options::new(CUSTOM), |_| Canned::json(200, &json!({}))).await;
    let head = format!("GET /{CUSTOM}/v1/echo/{} HTTP/1.1\r\nHost: x\r\n{}", placeholder(), bearer());
    let answer = send(harness.address, &head, b"").await;
    assert_eq!((answer.status, answer.code().as_str()), (400, "bad_request"), "{answer:?}");
    assert!(harness.provider.recorded().is_empty());
    let lines = harness.journal.lines();
    assert_eq!(lines[0].path, format!("/{CUSTOM}/v1/echo/{{placeholder}}"));
    assert_lines_clean(&lines);
}

#[tokio::test]
async fn requests_past_the_open_request_bound_are_refused_until_one_ends() {
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    let limits = BrokerLimits { max_open_requests: 1, ..BrokerLimits::default() };
    let harness = start(Options { limits, ..Options::new(OPENAI) }, move |_| Canned {
        gate: Some(held.clone()),
        ..Canned::sse(&sse_turn())
    })
    .await;
    let mut open = TcpStream::connect(harness.address).await.expect("connect");
    let head = format!(
        "POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}",
        bearer()
    );
    open.write_all(head.as_bytes()).await.expect("write");
    let mut buffer = [0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), open.read(&mut buffer)).await.expect("head").expect("read");
    assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 200"));

    let second = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let answer = send(harness.address, &second, b"{}").await;
    assert_eq!((answer.status, answer.code().as_str()), (429, "too_many_requests"), "{answer:?}");
    assert_eq!(answer.header("retry-after").as_deref(), Some("1"));
    assert_eq!(harness.provider.recorded().len(), 1);

    gate.notify_one();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), open.read_to_end(&mut rest)).await;
    drop(open);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let gate_again = gate.clone();
    let waiter = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        gate_again.notify_one();
    });
    assert_eq!(send(harness.address, &second, b"{}").await.status, 200, "the place was not given back");
    waiter.await.expect("waiter");
}

#[tokio::test]
async fn a_provider_slow_to_answer_is_504_and_a_stalled_stream_is_cut() {
    let limits = BrokerLimits {
        response_head_timeout: Duration::from_millis(300),
        body_idle_timeout: Duration::from_millis(300),
        ..BrokerLimits::default()
    };
    let never = Arc::new(Notify::new());
    let harness = start(Options { limits, ..Options::new(OPENAI) }, move |request| {
        if request.method == "GET" {
            Canned { head_delay: Duration::from_secs(3), ..Canned::json(200, &json!({})) }
        } else {
            Canned { gate: Some(never.clone()), ..Canned::sse(&sse_turn()) }
        }
    })
    .await;
    let head = format!("GET /{OPENAI}/v1/models HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let answer = send(harness.address, &head, b"").await;
    assert_eq!((answer.status, answer.code().as_str()), (504, "upstream_timeout"), "{answer:?}");

    let head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let started = std::time::Instant::now();
    let answer = send(harness.address, &head, b"{}").await;
    assert!(started.elapsed() < Duration::from_secs(5), "the stalled stream was not cut");
    assert_eq!(answer.status, 200);
    assert!(answer.body.contains("response.created") && !answer.body.contains("response.completed"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let lines = harness.journal.lines();
    assert!(lines[1].detail.as_deref().is_some_and(|d| d.contains("no byte from the provider")), "{lines:?}");
    // A cut stream's usage could not be read; the timed-out model list bills nothing.
    assert_eq!(lines[1].tokens, None);
    assert_eq!(harness.broker.counters().unreadable, 1);
}

const KEY_A: &str = "sk-proj-OPENAIrealKEYaaaaaaaaaaaaaaaaaaaa";
const KEY_B: &str = "custom-realKEYbbbbbbbbbbbbbbbbbbbbbbbbb";

/// Two routes (OpenAI and a custom host) behind one fake provider, each with its own credential
/// bound to its host.
async fn start_two(answer: impl Fn(&Recorded) -> Canned + Send + Sync + 'static) -> (Harness, String, String) {
    let upstream_ip = own_address();
    let provider = FakeProvider::start(SocketAddr::new(IpAddr::V4(upstream_ip), 443), &[OPENAI, CUSTOM], answer)
        .await
        .expect("provider");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("addr")).await.expect("dns");
    dns.answer(OPENAI, vec![Reply::Addresses(vec![IpAddr::V4(upstream_ip)])]);
    dns.answer(CUSTOM, vec![Reply::Addresses(vec![IpAddr::V4(upstream_ip)])]);
    let mut upstream = Settings::new([OPENAI, CUSTOM]).expect("settings");
    upstream.set_allow_cidrs([net("127.0.0.0/8")]).expect("allowCidrs");
    upstream.dial_allow = vec![net("127.0.0.0/8")];
    upstream.self_addresses = vec!["127.0.0.1".parse().expect("ip")];
    let (ph_a, ph_b) = (placeholder_from(&[0xaa; 32]), placeholder_from(&[0xbb; 32]));
    let settings = BrokerSettings {
        routes: vec![Route::new(OPENAI), Route::new(CUSTOM)],
        credentials: vec![
            Credential {
                name: "OPENAI_API_KEY".into(),
                placeholder: ph_a.clone(),
                value: Secret::new(KEY_A.into()),
                host: OPENAI.into(),
            },
            Credential {
                name: "CUSTOM_KEY".into(),
                placeholder: ph_b.clone(),
                value: Secret::new(KEY_B.into()),
                host: CUSTOM.into(),
            },
        ],
        budget: Budget::default(),
        limits: BrokerLimits::default(),
        upstream,
        extra_roots: vec![provider.identity.certificate.clone()],
    };
    let journal = Arc::new(MemoryJournal::default());
    let resolver = DnsResolver::new(&[dns.address()]).expect("resolver");
    let broker = Arc::new(Broker::new(settings, resolver, DirectDialer, journal.clone()).expect("broker"));
    let listener = Listener::bind(&Endpoint::Tcp("127.0.0.1:0".parse().expect("addr"))).await.expect("bind");
    let Ok(Endpoint::Tcp(address)) = listener.endpoint() else { panic!("a TCP listener") };
    let cancel = CancellationToken::new();
    tokio::spawn(serve(broker.clone(), Arc::new(listener), cancel.clone()));
    (Harness { address, provider, dns, journal, broker, _cancel: cancel.drop_guard() }, ph_a, ph_b)
}

/// A host that reflects the request headers in a 2xx body (httpbin-style `/anything`), the
/// body written in pieces of `split` bytes so an echo of the key straddles them.
fn echo_headers(request: &Recorded, split: usize) -> Canned {
    let headers: Vec<String> = request.headers.iter().map(|(n, v)| format!("{n}: {v}")).collect();
    let body = json!({"echo": headers}).to_string().into_bytes();
    Canned {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        chunks: body.chunks(split).map(<[u8]>::to_vec).collect(),
        chunked: true,
        ..Canned::default()
    }
}

#[tokio::test]
async fn a_placeholder_is_refused_on_another_providers_route_and_nothing_goes_upstream() {
    let (harness, ph_a, _ph_b) = start_two(|request| echo_headers(request, 4096)).await;
    let head = format!("GET /{CUSTOM}/anything HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph_a}");
    let answer = send(harness.address, &head, b"").await;
    assert_eq!((answer.status, answer.code().as_str()), (401, "no_placeholder"), "{answer:?}");
    assert!(answer.body.contains("the placeholder belongs to another provider host"), "{}", answer.body);
    assert!(!answer.body.contains(KEY_A), "{}", answer.body);
    assert!(harness.provider.recorded().is_empty(), "the OpenAI key went to the custom host");
    assert_lines_clean(&harness.journal.lines());
}

#[tokio::test]
async fn a_custom_hosts_2xx_echo_of_its_key_is_masked_even_split_across_frames() {
    let (harness, _ph_a, ph_b) = start_two(|request| echo_headers(request, 7)).await;
    let head = format!("GET /{CUSTOM}/anything HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph_b}");
    let answer = send(harness.address, &head, b"").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let recorded = harness.provider.recorded();
    assert_eq!(recorded[0].header("authorization"), Some(format!("Bearer {KEY_B}").as_str()));
    assert!(!answer.body.contains(KEY_B), "{}", answer.body);
    assert!(answer.body.contains("Bearer [redacted]"), "{}", answer.body);
    assert!(answer.body.ends_with("\"]}"), "the held tail was not flushed: {}", answer.body);
}

/// A provider that answers only after 1.5 s, with more usage than the budget.
fn slow_costly(_: &Recorded) -> Canned {
    Canned {
        head_delay: Duration::from_millis(1500),
        ..Canned::json(200, &json!({"usage": {"input_tokens": 5000, "output_tokens": 5000}}))
    }
}

#[tokio::test]
async fn an_agent_that_leaves_before_the_head_does_not_settle_as_zero_tokens() {
    let budget = Budget { tokens: Some(10), requests: None };
    let harness = start(Options { budget, ..Options::new(OPENAI) }, slow_costly).await;
    let mut stream = TcpStream::connect(harness.address).await.expect("connect");
    let head =
        format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}\r\nContent-Length: 2\r\n\r\n{{}}", bearer());
    stream.write_all(head.as_bytes()).await.expect("write");
    for _ in 0..50 {
        if !harness.provider.recorded().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(stream);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(harness.provider.recorded().len(), 1, "the provider got the request");
    let counters = harness.broker.counters();
    assert!(counters.unreadable == 1 || counters.tokens.total() > 0, "{counters:?}");
    assert!(counters.exhausted, "{counters:?}");
    let head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!((answer.status, answer.code().as_str()), (429, "budget_exhausted"), "{answer:?}");
}

#[tokio::test]
async fn a_response_head_timeout_does_not_settle_as_zero_tokens() {
    let budget = Budget { tokens: Some(10), requests: None };
    let limits = BrokerLimits { response_head_timeout: Duration::from_millis(300), ..BrokerLimits::default() };
    let harness = start(Options { budget, limits, ..Options::new(OPENAI) }, slow_costly).await;
    let head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    assert_eq!(send(harness.address, &head, b"{}").await.status, 504);
    let counters = harness.broker.counters();
    assert_eq!((counters.unreadable, counters.exhausted), (1, true), "{counters:?}");
    assert_eq!(send(harness.address, &head, b"{}").await.status, 429);
    assert_eq!(harness.provider.recorded().len(), 1);
}

/// An Anthropic stream whose usage comes at its end, held after its first event until `gate`.
fn anthropic_stream(gate: Arc<Notify>) -> Canned {
    let events = vec![
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "lots of output ..."}}),
        json!({"type": "message_delta", "usage": {"output_tokens": 8000}}),
        json!({"type": "message_stop"}),
    ];
    Canned { gate: Some(gate), ..Canned::sse(&events) }
}

#[tokio::test]
async fn an_agent_that_cuts_a_stream_early_is_billed_what_the_provider_reports_at_its_end() {
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    let budget = Budget { tokens: Some(100_000), requests: None };
    let harness = start(Options { budget, ..Options::new(ANTHROPIC) }, move |_| anthropic_stream(held.clone())).await;
    let mut stream = TcpStream::connect(harness.address).await.expect("connect");
    let head = format!(
        "POST /{ANTHROPIC}/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {}\r\nContent-Length: 2\r\n\r\n{{}}",
        placeholder()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("message_start") {
        let n = stream.read(&mut buffer).await.expect("read");
        assert!(n > 0, "the stream ended early");
        seen.extend_from_slice(&buffer[..n]);
    }
    drop(stream);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(harness.journal.lines().is_empty(), "settled before the provider's answer ended");
    gate.notify_waiters();
    for _ in 0..100 {
        if !harness.journal.lines().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lines = harness.journal.lines();
    assert_eq!(lines[0].tokens, Some(Tokens { input: 10, output: 8000 }), "{lines:?}");
    assert_eq!(harness.broker.counters().tokens.total(), 8010);
}

#[tokio::test]
async fn a_stream_that_stalls_before_its_last_event_is_unreadable() {
    let budget = Budget { tokens: Some(100_000), requests: None };
    let limits = BrokerLimits { body_idle_timeout: Duration::from_millis(300), ..BrokerLimits::default() };
    // message_start, then nothing: the gate is never opened.
    let never = Arc::new(Notify::new());
    let harness =
        start(Options { budget, limits, ..Options::new(ANTHROPIC) }, move |_| anthropic_stream(never.clone())).await;
    let head = format!("POST /{ANTHROPIC}/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {}", placeholder());
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!(answer.status, 200);
    assert!(answer.body.contains("message_start") && !answer.body.contains("message_stop"), "{}", answer.body);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let counters = harness.broker.counters();
    assert_eq!((counters.unreadable, counters.tokens.total(), counters.exhausted), (1, 0, true), "{counters:?}");
}

#[tokio::test]
async fn a_model_list_and_a_token_count_do_not_spend_a_budget() {
    let budget = Budget { tokens: Some(1_000_000), requests: None };
    let harness = start(Options { budget, ..Options::new(ANTHROPIC) }, |request| {
        if request.method == "GET" || request.path.ends_with("count_tokens") {
            // No usage object: a billing endpoint answering so would be unreadable.
            Canned::json(200, &json!({"data": [], "input_tokens": 12}))
        } else {
            Canned::json(200, &json!({"type": "message", "usage": {"input_tokens": 3, "output_tokens": 4}}))
        }
    })
    .await;
    let key = format!("x-api-key: {}", placeholder());
    let get = format!("GET /{ANTHROPIC}/v1/models HTTP/1.1\r\nHost: x\r\n{key}");
    assert_eq!(send(harness.address, &get, b"").await.status, 200);
    let count = format!("POST /{ANTHROPIC}/v1/messages/count_tokens HTTP/1.1\r\nHost: x\r\n{key}");
    assert_eq!(send(harness.address, &count, b"{}").await.status, 200);
    let counters = harness.broker.counters();
    assert_eq!((counters.unreadable, counters.exhausted), (0, false), "{counters:?}");
    let post = format!("POST /{ANTHROPIC}/v1/messages HTTP/1.1\r\nHost: x\r\n{key}");
    let answer = send(harness.address, &post, b"{}").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(harness.broker.counters().tokens.total(), 7);
}

/// Writes `head` as far as the broker reads it, then reads its answer.
async fn send_raw(address: SocketAddr, head: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(address).await.expect("connect to the broker");
    // The broker may answer and close before the whole head is written.
    let _ = stream.write_all(head).await;
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes)).await;
    parse_answer(&bytes)
}

#[tokio::test]
async fn a_request_head_over_64_kib_or_64_fields_is_refused_unread() {
    let harness = start(Options::new(OPENAI), |_| Canned::json(200, &json!({}))).await;
    let mut head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}\r\n", bearer());
    let filler = format!("X-Pad: {}\r\n", "a".repeat(30_000));
    while head.len() < 300 * 1024 {
        head.push_str(&filler);
    }
    head.push_str("Content-Length: 2\r\n\r\n{}");
    let answer = send_raw(harness.address, head.as_bytes()).await;
    assert_eq!(answer.status, 431, "a 300 KiB head: {}", answer.head);

    let mut head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}\r\n", bearer());
    for n in 0..80 {
        head.push_str(&format!("X-Pad-{n}: a\r\n"));
    }
    head.push_str("Content-Length: 2\r\n\r\n{}");
    let answer = send_raw(harness.address, head.as_bytes()).await;
    assert_eq!(answer.status, 431, "83 header fields: {}", answer.head);
    assert!(harness.provider.recorded().is_empty());
}

#[tokio::test]
async fn under_a_token_budget_one_model_request_runs_at_a_time_so_open_ones_cannot_overrun_it() {
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    let budget = Budget { tokens: Some(10), requests: None };
    let harness = start(Options { budget, ..Options::new(OPENAI) }, move |_| {
        let events = vec![
            json!({"type": "response.created", "response": {"id": "r"}}),
            json!({"type": "response.completed", "response": {"usage": {"input_tokens": 1000, "output_tokens": 1000}}}),
        ];
        Canned { gate: Some(held.clone()), ..Canned::sse(&events) }
    })
    .await;
    let head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let (address, head) = (harness.address, head.clone());
        tasks.push(tokio::spawn(async move { send(address, &head, b"{}").await }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(harness.provider.recorded().len(), 1, "more than one model request open under a token budget");
    for _ in 0..20 {
        gate.notify_waiters();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut statuses = Vec::new();
    for task in tasks {
        let answer = task.await.expect("task");
        statuses.push((answer.status, answer.code()));
    }
    statuses.sort();
    assert_eq!(statuses[0], (200, String::new()), "{statuses:?}");
    assert!(statuses[1..].iter().all(|(status, code)| *status == 429 && code == "budget_exhausted"), "{statuses:?}");
    assert_eq!(harness.provider.recorded().len(), 1);
    assert_eq!(harness.broker.counters().tokens.total(), 2000);
}

#[tokio::test]
async fn under_a_token_budget_a_model_request_that_waits_too_long_for_its_turn_is_429_with_retry_after() {
    let never = Arc::new(Notify::new());
    let budget = Budget { tokens: Some(100_000), requests: None };
    let limits = BrokerLimits { response_head_timeout: Duration::from_millis(300), ..BrokerLimits::default() };
    let harness = start(Options { budget, limits, ..Options::new(OPENAI) }, move |request| {
        if request.method == "GET" {
            Canned::json(200, &json!({"data": []}))
        } else {
            Canned { gate: Some(never.clone()), ..Canned::sse(&sse_turn()) }
        }
    })
    .await;
    let post = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let mut first = TcpStream::connect(harness.address).await.expect("connect");
    first.write_all(format!("{post}\r\nContent-Length: 2\r\n\r\n{{}}").as_bytes()).await.expect("write");
    let mut buffer = [0u8; 1024];
    assert!(first.read(&mut buffer).await.expect("the first stream's head") > 0);
    let answer = send(harness.address, &post, b"{}").await;
    assert_eq!((answer.status, answer.code().as_str()), (429, "too_many_requests"), "{answer:?}");
    assert_eq!(answer.header("retry-after").as_deref(), Some("1"));
    // A model list does not bill, so it does not wait.
    let get = format!("GET /{OPENAI}/v1/models HTTP/1.1\r\nHost: x\r\n{}", bearer());
    assert_eq!(send(harness.address, &get, b"").await.status, 200);
    assert_eq!(harness.provider.recorded().len(), 2);
    drop(first);
}

#[tokio::test]
async fn a_percent_encoded_echo_of_a_query_key_is_masked() {
    // A custom host takes the key in the query here, so its 404 echoes the target, encoded.
    let upstream_ip = own_address();
    let provider = FakeProvider::start(SocketAddr::new(IpAddr::V4(upstream_ip), 443), &[CUSTOM], |request| {
        Canned::json(404, &json!({"error": format!("no route for {}", request.path)}))
    })
    .await
    .expect("provider");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("addr")).await.expect("dns");
    dns.answer(CUSTOM, vec![Reply::Addresses(vec![IpAddr::V4(upstream_ip)])]);
    let mut upstream = Settings::new([CUSTOM]).expect("settings");
    upstream.set_allow_cidrs([net("127.0.0.0/8")]).expect("allowCidrs");
    upstream.dial_allow = vec![net("127.0.0.0/8")];
    let key = "abc+def/ghi=jkl+mno/pqr==";
    let settings = BrokerSettings {
        routes: vec![Route::new(CUSTOM)],
        credentials: vec![Credential {
            name: "K".into(),
            placeholder: placeholder(),
            value: Secret::new(key.into()),
            host: CUSTOM.into(),
        }],
        budget: Budget::default(),
        limits: BrokerLimits::default(),
        upstream,
        extra_roots: vec![provider.identity.certificate.clone()],
    };
    let resolver = DnsResolver::new(&[dns.address()]).expect("resolver");
    let journal = Arc::new(MemoryJournal::default());
    let broker = Arc::new(Broker::new(settings, resolver, DirectDialer, journal).expect("broker"));
    let listener = Listener::bind(&Endpoint::Tcp("127.0.0.1:0".parse().expect("addr"))).await.expect("bind");
    let Ok(Endpoint::Tcp(address)) = listener.endpoint() else { panic!("a TCP listener") };
    let cancel = CancellationToken::new();
    tokio::spawn(serve(broker, Arc::new(listener), cancel.clone()));
    let head = format!("GET /{CUSTOM}/v1/nothing?key={} HTTP/1.1\r\nHost: x", placeholder());
    let answer = send(address, &head, b"").await;
    assert_eq!(answer.status, 404, "{answer:?}");
    assert!(provider.recorded()[0].path.contains("abc%2Bdef%2Fghi"), "the key did not go upstream encoded");
    assert!(!answer.body.contains("abc%2Bdef%2Fghi%3Djkl"), "{}", answer.body);
    assert!(answer.body.contains("key=[redacted]"), "{}", answer.body);
    cancel.cancel();
}

#[tokio::test]
async fn the_query_is_judged_percent_decoded() {
    let harness = start(Options::new(GEMINI), |_| {
        Canned::json(200, &json!({"usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}}))
    })
    .await;
    let ph = placeholder();
    let call = format!("/{GEMINI}/v1beta/models/m:generateContent");
    let encoded_ph = format!("%72{}", &ph[1..]);
    let head = format!("POST {call}?note={encoded_ph} HTTP/1.1\r\nHost: x\r\nx-goog-api-key: {ph}");
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!((answer.status, answer.code().as_str()), (400, "bad_request"), "{answer:?}");
    assert!(harness.provider.recorded().is_empty(), "an encoded placeholder went upstream");

    let head = format!(
        "POST {call}?alt=sse&k%65y={AGENT_KEY}&access_token=ya29.agent HTTP/1.1\r\nHost: x\r\nx-goog-api-key: {ph}"
    );
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let path = harness.provider.recorded()[0].path.clone();
    assert!(!path.contains(AGENT_KEY) && !path.contains("ya29"), "{path}");
    assert!(path.ends_with("?alt=sse"), "{path}");

    let head = format!("POST {call}?%4B%45%59={} HTTP/1.1\r\nHost: x", ph.replace('-', "%2D"));
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!(answer.status, 200, "an encoded key parameter holding the placeholder: {answer:?}");
    let path = harness.provider.recorded()[1].path.clone();
    assert!(path.ends_with(&format!("?key={REAL_KEY}")), "{path}");
    assert_no_placeholder_upstream(&harness.provider.recorded());
}

#[tokio::test]
async fn an_error_body_cut_at_its_bound_never_ends_inside_the_key() {
    let harness = start(Options::new(OPENAI), |_| {
        let mut body = "x".repeat(64 * 1024 - 20).into_bytes();
        body.extend_from_slice(REAL_KEY.as_bytes());
        body.extend_from_slice(b" and more after it");
        Canned {
            status: 400,
            headers: vec![("content-type".into(), "text/plain".into())],
            chunks: vec![body],
            ..Canned::default()
        }
    })
    .await;
    let head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!(answer.status, 400);
    assert!(answer.body.len() <= 64 * 1024, "{}", answer.body.len());
    assert!(!answer.body.contains(&REAL_KEY[..8]), "the key's head passed the cut");
    assert!(answer.body.contains("x[redacted]"), "{:?}", &answer.body[answer.body.len() - 24..]);
}

#[test]
fn a_broker_is_not_built_with_a_credential_bound_to_no_route_of_it() {
    let settings = BrokerSettings {
        routes: vec![Route::new(OPENAI)],
        credentials: vec![credential(ANTHROPIC)],
        budget: Budget::default(),
        limits: BrokerLimits::default(),
        upstream: Settings::new([OPENAI]).expect("settings"),
        extra_roots: vec![],
    };
    let resolver = DnsResolver::new(&["127.0.0.1:53".parse().expect("addr")]).expect("resolver");
    let error =
        Broker::new(settings, resolver, DirectDialer, Arc::new(MemoryJournal::default())).err().expect("refused");
    let printed = format!("{error} {error:?}");
    assert!(printed.contains("PROVIDER_API_KEY") && printed.contains(ANTHROPIC), "{printed}");
    assert!(!printed.contains(REAL_KEY) && !printed.contains(&placeholder()), "{printed}");
}

// === TLS interception: a CONNECT to a provider host, terminated with the session CA ===

/// A TLS client that trusts only `ca_pem` and offers `alpn`.
fn session_client(ca_pem: &str, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("the session CA");
    roundtable_net_fixtures::tls_connector(&ca, alpn).expect("a connector")
}

/// Sends `CONNECT target`; the proxy's answer head and the stream, for the tunnel.
async fn connect(address: SocketAddr, target: &str) -> (String, TcpStream) {
    let mut stream = TcpStream::connect(address).await.expect("connect to the broker");
    stream.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes()).await.expect("write");
    (roundtable_net_fixtures::read_head(&mut stream).await, stream)
}

/// Through a tunnel to `host` (SNI `sni`): sends `head` and `body`, reads the answer to the end.
async fn send_tunnelled(harness: &Harness, host: &str, sni: &str, head: &str, body: &[u8]) -> Result<Answer, String> {
    let (answer, stream) = connect(harness.address, &format!("{host}:443")).await;
    if !answer.starts_with("HTTP/1.1 200") {
        return Err(answer);
    }
    let name = rustls::pki_types::ServerName::try_from(sni.to_owned()).expect("a name");
    let mut tls = session_client(harness.broker.ca_pem(), &[b"http/1.1"])
        .connect(name, stream)
        .await
        .map_err(|error| format!("handshake: {error}"))?;
    let request = format!("{head}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n", body.len());
    tls.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    tls.write_all(body).await.map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), tls.read_to_end(&mut bytes)).await;
    if bytes.is_empty() {
        return Err("the tunnel closed without an answer".into());
    }
    Ok(parse_answer(&bytes))
}

#[tokio::test]
async fn a_client_that_ignores_its_base_url_is_intercepted_and_judged_like_any_other_request() {
    let harness = start(Options::new(OPENAI), |_| Canned::sse(&sse_turn())).await;
    let head = format!(
        "POST /v1/responses HTTP/1.1\r\nHost: {OPENAI}\r\n{}\r\nx-api-key: {AGENT_KEY}\r\nContent-Type: application/json",
        bearer()
    );
    let answer =
        send_tunnelled(&harness, OPENAI, OPENAI, &head, br#"{"model":"gpt-5","input":"hi"}"#).await.expect("answered");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("response.completed"), "{}", answer.body);

    let recorded = harness.provider.recorded();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].path, "/v1/responses");
    assert_eq!(recorded[0].header("authorization"), Some(format!("Bearer {REAL_KEY}").as_str()));
    assert_eq!(recorded[0].header("x-api-key"), None, "the agent's own credential header is stripped");
    assert_no_placeholder_upstream(&recorded);

    let lines = harness.journal.lines();
    assert_eq!(lines.len(), 1, "one line per request inside the tunnel, none for the CONNECT itself");
    assert!(lines[0].intercepted, "{:?}", lines[0]);
    assert_eq!((lines[0].reason, lines[0].path.as_str()), (BrokerReason::Allowed, "/api.openai.com/v1/responses"));
    assert_eq!(lines[0].tokens, Some(Tokens { input: 11, output: 7 }));
    assert_lines_clean(&lines);
}

#[tokio::test]
async fn inside_a_tunnel_the_agents_own_key_an_off_list_path_and_an_upgrade_are_refused() {
    let harness = start(Options::new(OPENAI), |_| Canned::sse(&sse_turn())).await;
    let cases = [
        (format!("POST /v1/responses HTTP/1.1\r\nHost: {OPENAI}\r\nAuthorization: Bearer {AGENT_KEY}"), 401),
        (format!("POST /v1/files HTTP/1.1\r\nHost: {OPENAI}\r\n{}", bearer()), 403),
        (
            format!(
                "GET /v1/responses HTTP/1.1\r\nHost: {OPENAI}\r\n{}\r\nConnection: Upgrade\r\nUpgrade: websocket",
                bearer()
            ),
            426,
        ),
        // The Host header names another server: the route is still the tunnel's host.
        (format!("POST /v1/files HTTP/1.1\r\nHost: evil.example\r\n{}", bearer()), 403),
    ];
    for (head, status) in cases {
        let answer = send_tunnelled(&harness, OPENAI, OPENAI, &head, b"{}").await.expect("answered");
        assert_eq!(answer.status, status, "{head}: {answer:?}");
    }
    assert!(harness.provider.recorded().is_empty(), "nothing reached the provider");
    assert!(harness.journal.lines().iter().all(|line| line.intercepted));
}

#[tokio::test]
async fn a_connect_to_anything_but_a_provider_host_on_443_is_refused_and_logged() {
    let harness = start(Options::new(OPENAI), |_| Canned::sse(&sse_turn())).await;
    for target in ["evil.example:443", "api.openai.com:80", "127.0.0.1:443", "api.openai.com"] {
        let (answer, _) = connect(harness.address, target).await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{target}: {answer}");
        assert!(!answer.starts_with("HTTP/1.1 200"), "{target}");
    }
    let reasons: Vec<BrokerReason> = harness.journal.lines().iter().map(|line| line.reason).collect();
    assert_eq!(reasons, [BrokerReason::TunnelRefused; 4]);
    assert!(harness.provider.recorded().is_empty());
}

#[tokio::test]
async fn a_tunnel_speaks_only_http_1_1_and_only_as_its_own_host() {
    let harness = start(Options::new(OPENAI), |_| Canned::sse(&sse_turn())).await;
    // SNI naming another server: the handshake fails (the leaf names only the host) or the
    // broker closes the tunnel; either way nothing is answered.
    let head = format!("POST /v1/responses HTTP/1.1\r\nHost: {OPENAI}\r\n{}", bearer());
    let other = send_tunnelled(&harness, OPENAI, "evil.example", &head, b"{}").await;
    assert!(other.is_err(), "{other:?}");
    // A client that offers only h2 cannot complete the handshake.
    let (answer, stream) = connect(harness.address, "api.openai.com:443").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let name = rustls::pki_types::ServerName::try_from(OPENAI).expect("name");
    let h2 = session_client(harness.broker.ca_pem(), &[b"h2"]).connect(name, stream).await;
    assert!(h2.is_err(), "an h2-only client was served");
    assert!(harness.provider.recorded().is_empty());
}

// === the admission canary's rehearsal broker ===

#[tokio::test]
async fn a_rehearsal_broker_answers_from_its_script_and_logs_who_brought_the_placeholder() {
    let listener = Listener::bind(&Endpoint::Tcp("127.0.0.1:0".parse().expect("addr"))).await.expect("bind");
    let Ok(Endpoint::Tcp(address)) = listener.endpoint() else { panic!("a TCP listener") };
    let rehearsal = roundtable_broker::Rehearsal::start(
        &[OPENAI.to_owned()],
        &[("CODEX_API_KEY".to_owned(), OPENAI.to_owned())],
        listener,
    )
    .await
    .expect("a rehearsal");
    let placeholder = rehearsal.placeholders().get("CODEX_API_KEY").expect("a placeholder").to_owned();
    let head =
        format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {placeholder}");
    let answer = send(address, &head, b"{}").await;
    assert_eq!(answer.status, roundtable_broker::SCRIPTED_STATUS, "{answer:?}");
    assert!(answer.body.contains("roundtable_admission_canary"), "{}", answer.body);
    let refused = send(address, &format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x"), b"{}").await;
    assert_eq!(refused.status, 401);
    let lines = rehearsal.stop().await;
    let seen: Vec<(BrokerReason, Option<&str>)> =
        lines.iter().map(|line| (line.reason, line.credential.as_deref())).collect();
    assert_eq!(seen, [(BrokerReason::Allowed, Some("CODEX_API_KEY")), (BrokerReason::NoPlaceholder, None)]);
}

/// A base64-style key: `/`, `+` and `=` are what percent-encoding and JSON escape.
const BASE64_KEY: &str = "Zq81vT0n/Wc4+Lr2XbY7uPaE5dMx/YA+kQ==";

/// A custom host that writes what it was sent in its answer's last bytes, in `pieces` of the
/// given size, after `encode` has written it as the host's serializer would.
fn echo_at_the_end(request: &Recorded, encode: fn(&str) -> String, split: usize) -> Canned {
    let sent = request.header("authorization").unwrap_or_default().to_owned();
    let body = format!("{{\"ok\":true,\"you_sent\":\"{}", encode(&sent)).into_bytes();
    Canned {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        chunks: body.chunks(split).map(<[u8]>::to_vec).collect(),
        chunked: true,
        ..Canned::default()
    }
}

/// PHP's `json_encode` by default: `/` as `\/`; the other escapes as `\uXXXX`, mixed cases.
fn php_json(value: &str) -> String {
    value.replace('/', "\\/").replace('+', "\\u002B").replace('=', "\\u003d")
}

#[tokio::test]
async fn a_base64_key_echoed_in_the_last_bytes_of_a_custom_2xx_body_is_masked() {
    for split in [1, 7, 4096] {
        let options = Options { key: BASE64_KEY, ..Options::new(CUSTOM) };
        let harness = start(options, move |request| echo_at_the_end(request, str::to_owned, split)).await;
        let head = format!("GET /{CUSTOM}/anything HTTP/1.1\r\nHost: x\r\n{}", bearer());
        let answer = send(harness.address, &head, b"").await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert!(!answer.body.contains(BASE64_KEY), "split {split}: {}", answer.body);
        assert!(answer.body.ends_with("\"you_sent\":\"Bearer [redacted]"), "split {split}: {}", answer.body);
    }
}

#[tokio::test]
async fn a_json_escaped_echo_of_the_key_is_masked_in_a_custom_2xx_body_and_an_error_body() {
    let options = Options { key: BASE64_KEY, ..Options::new(CUSTOM) };
    let harness = start(options, |request| echo_at_the_end(request, php_json, 5)).await;
    let head = format!("GET /{CUSTOM}/anything HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let answer = send(harness.address, &head, b"").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(!answer.body.contains(&php_json(BASE64_KEY)), "{}", answer.body);
    assert!(answer.body.ends_with("Bearer [redacted]"), "{}", answer.body);

    let options = Options { key: BASE64_KEY, ..Options::new(OPENAI) };
    let harness = start(options, |request| Canned { status: 401, ..echo_at_the_end(request, php_json, 4096) }).await;
    let head = format!("POST /{OPENAI}/v1/responses HTTP/1.1\r\nHost: x\r\n{}", bearer());
    let answer = send(harness.address, &head, b"{}").await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(answer.body.ends_with("Bearer [redacted]"), "{}", answer.body);
}

/// CRC-32 (IEEE), for a gzip member's trailer.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// A valid gzip member holding `data` in stored blocks of 5 bytes: no 8 bytes of it are
/// contiguous in the body, as in a compressed one, yet a decoder gives them back.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let blocks: Vec<&[u8]> = data.chunks(5).collect();
    for (index, block) in blocks.iter().enumerate() {
        let length = u16::try_from(block.len()).expect("a short block");
        out.push(u8::from(index + 1 == blocks.len()));
        out.extend_from_slice(&length.to_le_bytes());
        out.extend_from_slice(&(!length).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&u32::try_from(data.len()).expect("short").to_le_bytes());
    out
}

#[tokio::test]
async fn a_compressed_body_from_a_custom_host_is_withheld_whatever_its_status() {
    for status in [200, 201, 400, 500] {
        let options = Options { key: BASE64_KEY, ..Options::new(CUSTOM) };
        let harness = start(options, move |request| {
            let sent = request.header("authorization").unwrap_or_default().to_owned();
            Canned {
                status,
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("content-encoding".into(), "gzip".into()),
                ],
                chunks: vec![gzip_stored(json!({"you_sent": sent}).to_string().as_bytes())],
                ..Canned::default()
            }
        })
        .await;
        let head = format!("GET /{CUSTOM}/anything HTTP/1.1\r\nHost: x\r\n{}", bearer());
        let answer = send(harness.address, &head, b"").await;
        assert_eq!(answer.status, status, "{answer:?}");
        assert!(!answer.body.contains(BASE64_KEY), "status {status}: {}", answer.body);
        assert!(answer.body.starts_with("[the provider's body was compressed"), "status {status}: {}", answer.body);
        assert_eq!(answer.header("content-encoding"), None, "status {status}");
        let recorded = harness.provider.recorded();
        assert_eq!(recorded[0].header("accept-encoding"), Some("identity"), "the broker asks for no compression");
    }
}

// === The status line: only the status passes, never the provider's reason phrase ===

/// An answer whose status line is `HTTP/1.1 {status} {reason}`, as a server that names the
/// rejected key there writes it. The fake provider writes its own reason (`Canned`), so the
/// head it writes is an interim `100` whose one header line ends it, then the final head: HTTP
/// clients skip a `1xx` and read the answer after it.
fn with_reason(status: u16, reason: &str) -> Canned {
    Canned {
        status: 100,
        headers: vec![
            ("x-interim".into(), format!("1\r\n\r\nHTTP/1.1 {status} {reason}")),
            ("content-type".into(), "application/json".into()),
        ],
        chunks: vec![b"{}".to_vec()],
        ..Canned::default()
    }
}

#[tokio::test]
async fn the_key_in_the_providers_reason_phrase_never_reaches_the_agent_by_the_base_url_or_a_tunnel() {
    for host in [OPENAI, CUSTOM] {
        for (status, canonical) in [(200, "HTTP/1.1 200 OK"), (401, "HTTP/1.1 401 Unauthorized")] {
            let harness = start(Options::new(host), move |request| {
                let sent = request.header("authorization").unwrap_or_default().to_owned();
                with_reason(status, &format!("Incorrect API key provided {sent}"))
            })
            .await;
            let path = if host == OPENAI { "/v1/models" } else { "/v1/anything" };
            let base =
                send(harness.address, &format!("GET /{host}{path} HTTP/1.1\r\nHost: x\r\n{}", bearer()), b"").await;
            let head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{}", bearer());
            let tunnelled = send_tunnelled(&harness, host, host, &head, b"").await.expect("answered in the tunnel");
            for (via, answer) in [("the base URL", base), ("a tunnel", tunnelled)] {
                let status_line = answer.head.lines().next().unwrap_or_default();
                assert_eq!(status_line, canonical, "{host} {status} by {via}");
                assert!(!answer.head.contains(REAL_KEY), "{host} {status} by {via}: {}", answer.head);
            }
            assert_eq!(harness.provider.recorded().len(), 2, "{host} {status}: both went upstream");
        }
    }
}

#[tokio::test]
async fn the_providers_trailers_never_reach_the_agent() {
    // A chunked answer that declares a trailer and sends the key in it, to an agent that asked
    // for trailers (`TE: trailers`): the head after the body is never passed.
    let harness = start(Options::new(CUSTOM), |request| {
        let sent = request.header("authorization").unwrap_or_default().to_owned();
        Canned {
            status: 100,
            headers: vec![(
                "x-interim".into(),
                format!(
                    "1\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-echo\r\n\r\n\
                     2\r\n{{}}\r\n0\r\nx-echo: {sent}\r\n\r\n"
                ),
            )],
            ..Canned::default()
        }
    })
    .await;
    let mut stream = TcpStream::connect(harness.address).await.expect("connect to the broker");
    let head = format!(
        "GET /{CUSTOM}/v1/anything HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n{}\r\nConnection: close\r\n\r\n",
        bearer()
    );
    stream.write_all(head.as_bytes()).await.expect("write the head");
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut bytes)).await.expect("an answer");
    // Read raw: a client's de-chunking would drop the trailers this looks for.
    let raw = String::from_utf8_lossy(&bytes);
    assert!(raw.starts_with("HTTP/1.1 200 OK\r\n"), "{raw}");
    assert!(raw.contains("\r\n\r\n2\r\n{}\r\n"), "the body passed: {raw}");
    assert!(!raw.contains(REAL_KEY) && raw.ends_with("\r\n0\r\n\r\n"), "the trailers passed: {raw}");
}
