//! Hostile tests of the credential broker, as the agent sees it. A custom provider host that
//! echoes the key it was sent (in its answer's last bytes, JSON-escaped as PHP writes it, inside
//! a gzip body, in its status line's reason phrase, or in a redirect that encodes the request's
//! URL once more) must never hand the key back: the broker runs end to end on loopback through
//! its public API, before a fake TLS provider and a scripted DNS server. And a brokered Adapter
//! one of whose declared keys the daemon lacks fails closed (`BrokerUnavailable`) before any
//! container of it runs.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use roundtable_broker::{
    Broker, BrokerJournal, BrokerLimits, BrokerSettings, Budget, Credential, RequestLine, Route, Secret, serve,
};
use roundtable_gateway::{DirectDialer, DnsResolver, Endpoint, Listener, Settings};
use roundtable_net_fixtures::{Canned, FakeDns, FakeProvider, Recorded, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::support::{
    API, ShowLogOnPanic, commit_all, engine_or_skip, ensure_test_images, json, nothing_left, roundtable, start_daemon,
    wait_until_within, write,
};

/// A host of no known scheme: its 2xx bodies are the ones an echo comes back in.
const HOST: &str = "echo.attacker.test";
/// Base64, as many real keys are: `/`, `+` and `=` are what encoders rewrite.
const KEY: &str = "Rk9vYmFy/QmF6+cXV4LzEyMzQ1Njc4OTA=";
const PLACEHOLDER: &str = "rt-placeholder-4848484848484848484848484848484848484848484848484848484848484848";

/// A loopback address of this file's own, far from the other tests' `127.0.0.x`.
fn own_address() -> Ipv4Addr {
    static NEXT: AtomicU8 = AtomicU8::new(1);
    Ipv4Addr::new(127, 48, 1, NEXT.fetch_add(1, Ordering::Relaxed))
}

struct NoJournal;

impl BrokerJournal for NoJournal {
    fn request(&self, _: &RequestLine) {}
}

/// A broker with one custom route before a fake provider that answers with `answer`.
struct Rig {
    address: SocketAddr,
    _provider: FakeProvider,
    _dns: FakeDns,
    _stop: DropGuard,
}

async fn rig(answer: impl Fn(&Recorded) -> Canned + Send + Sync + 'static) -> Rig {
    rig_with_key(KEY, answer).await
}

/// [`rig`], with `key` as the real value.
async fn rig_with_key(key: &str, answer: impl Fn(&Recorded) -> Canned + Send + Sync + 'static) -> Rig {
    let upstream_ip = IpAddr::V4(own_address());
    let provider = FakeProvider::start(SocketAddr::new(upstream_ip, 443), &[HOST], answer).await.expect("provider");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("address")).await.expect("dns");
    dns.answer(HOST, vec![Reply::Addresses(vec![upstream_ip])]);
    let mut upstream = Settings::new([HOST]).expect("settings");
    upstream.set_allow_cidrs(["127.0.0.0/8".parse().expect("cidr")]).expect("allowCidrs");
    upstream.dial_allow = vec!["127.0.0.0/8".parse().expect("cidr")];
    let settings = BrokerSettings {
        routes: vec![Route::new(HOST)],
        credentials: vec![Credential {
            name: "ECHO_API_KEY".into(),
            placeholder: PLACEHOLDER.into(),
            value: Secret::new(key.into()),
            host: HOST.into(),
        }],
        budget: Budget::default(),
        limits: BrokerLimits::default(),
        upstream,
        extra_roots: vec![provider.identity.certificate.clone()],
    };
    let resolver = DnsResolver::new(&[dns.address()]).expect("resolver");
    let broker = Arc::new(Broker::new(settings, resolver, DirectDialer, Arc::new(NoJournal)).expect("broker"));
    let listener = Listener::bind(&Endpoint::Tcp("127.0.0.1:0".parse().expect("address"))).await.expect("bind");
    let Ok(Endpoint::Tcp(address)) = listener.endpoint() else { panic!("a TCP listener") };
    let stop = CancellationToken::new();
    tokio::spawn(serve(broker, Arc::new(listener), stop.clone()));
    Rig { address, _provider: provider, _dns: dns, _stop: stop.drop_guard() }
}

/// What the agent reads back for an honest request with its placeholder: the status, and the
/// head and body as its HTTP client would give them (de-chunked, then un-gzipped).
async fn ask(rig: &Rig) -> (u16, String) {
    ask_for(rig, "/v1/whoami", &format!("Authorization: Bearer {PLACEHOLDER}\r\n")).await
}

/// [`ask`] for `target` (under the route), with `credential` (a header line, or nothing when the
/// placeholder is in the query).
async fn ask_for(rig: &Rig, target: &str, credential: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(rig.address).await.expect("connect to the broker");
    let head = format!("GET /{HOST}{target} HTTP/1.1\r\nHost: x\r\n{credential}Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut bytes))
        .await
        .expect("an answer in time")
        .expect("read");
    let split = bytes.windows(4).position(|w| w == b"\r\n\r\n").map_or(bytes.len(), |at| at + 4);
    let (head, body) = bytes.split_at(split);
    let head = String::from_utf8_lossy(head).into_owned();
    let lower = head.to_lowercase();
    let body = if lower.contains("transfer-encoding: chunked") { dechunk(body) } else { body.to_vec() };
    let body = if lower.contains("content-encoding: gzip") { gunzip_stored(&body) } else { body };
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, format!("{head}{}", String::from_utf8_lossy(&body)))
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..end]).ok().and_then(|s| usize::from_str_radix(s.trim(), 16).ok());
        let rest = &body[end + 2..];
        match size {
            Some(size) if size > 0 && rest.len() >= size => {
                out.extend_from_slice(&rest[..size]);
                body = rest[size..].strip_prefix(b"\r\n").unwrap_or(&rest[size..]);
            }
            _ => break,
        }
    }
    out
}

/// Whether `text` holds any 8-byte window of the key as is, percent-encoded or JSON-escaped.
fn leaks(text: &str) -> Option<String> {
    let forms = |window: &str| {
        let percent: String = window.bytes().map(|b| format!("%{b:02X}")).collect();
        let escaped = window.replace('/', "\\/");
        let unicode: String = window
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_string() } else { format!("\\u{:04x}", u32::from(c)) })
            .collect();
        [window.to_owned(), percent.clone(), percent.to_lowercase(), escaped, unicode.clone(), unicode.to_uppercase()]
    };
    let lower = text.to_lowercase();
    (0..=KEY.len() - 8).map(|at| &KEY[at..at + 8]).find_map(|window| {
        forms(window).into_iter().find(|form| {
            text.contains(form.as_str()) || (form.starts_with('%') && lower.contains(&form.to_lowercase()))
        })
    })
}

/// An answer whose body ends with what the host was sent, written by `encode`, in pieces of
/// `split` bytes.
fn echo_last(request: &Recorded, encode: fn(&str) -> String, split: usize) -> Canned {
    let sent = request.header("authorization").unwrap_or_default();
    let body = format!("{{\"debug\":\"you sent {}", encode(sent)).into_bytes();
    Canned {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        chunks: body.chunks(split).map(<[u8]>::to_vec).collect(),
        chunked: true,
        ..Canned::default()
    }
}

#[tokio::test]
async fn a_custom_host_echoing_the_key_in_its_last_bytes_gets_nothing_back() {
    for split in [1, 3, 16, 4096] {
        let rig = rig(move |request| echo_last(request, str::to_owned, split)).await;
        let (status, answer) = ask(&rig).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(leaks(&answer), None, "pieces of {split}: {answer}");
    }
}

/// PHP's `json_encode` default, and the `\u` escapes other encoders write, mixed.
fn php_json(value: &str) -> String {
    value.replace('/', "\\/").replace('+', "\\u002B").replace('=', "\\u003d")
}

#[tokio::test]
async fn a_custom_host_echoing_the_key_json_escaped_gets_nothing_back() {
    for split in [2, 4096] {
        let rig = rig(move |request| echo_last(request, php_json, split)).await;
        let (status, answer) = ask(&rig).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(leaks(&answer), None, "pieces of {split}: {answer}");
        assert!(answer.contains("you sent Bearer [redacted]"), "{answer}");
    }
}

/// A valid gzip member holding `data` in stored blocks of 5 bytes: no 8 bytes of it are
/// contiguous in the body, as in a compressed one, yet any gzip decoder gives them back.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let blocks: Vec<&[u8]> = data.chunks(5).collect();
    for (index, block) in blocks.iter().enumerate() {
        let length = u16::try_from(block.len()).expect("a short block");
        out.push(u8::from(index + 1 == blocks.len()));
        out.extend_from_slice(&length.to_le_bytes());
        out.extend_from_slice(&(!length).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&(!crc).to_le_bytes());
    out.extend_from_slice(&u32::try_from(data.len()).expect("short").to_le_bytes());
    out
}

/// What the agent's decoder makes of a body [`gzip_stored`] wrote (anything else as it is).
fn gunzip_stored(body: &[u8]) -> Vec<u8> {
    if !body.starts_with(&[0x1f, 0x8b]) || body.len() < 10 {
        return body.to_vec();
    }
    let (mut at, mut out) = (10, Vec::new());
    while at + 5 <= body.len() {
        let last = body[at] & 1 == 1;
        let length = usize::from(u16::from_le_bytes([body[at + 1], body[at + 2]]));
        out.extend_from_slice(&body[at + 5..(at + 5 + length).min(body.len())]);
        at += 5 + length;
        if last {
            break;
        }
    }
    out
}

#[tokio::test]
async fn a_custom_host_echoing_the_key_in_a_gzip_body_gets_nothing_back_whatever_the_status() {
    for status in [200, 401] {
        let rig = rig(move |request| {
            let sent = request.header("authorization").unwrap_or_default();
            Canned {
                status,
                headers: vec![("content-encoding".into(), "gzip".into())],
                chunks: vec![gzip_stored(format!("{{\"debug\":\"you sent {sent}\"}}").as_bytes())],
                ..Canned::default()
            }
        })
        .await;
        let (answered, answer) = ask(&rig).await;
        assert_eq!(answered, status, "{answer}");
        assert_eq!(leaks(&answer), None, "status {status}: {answer}");
        assert!(!answer.to_lowercase().contains("content-encoding"), "status {status}: {answer}");
    }
}

/// An answer whose status line is `HTTP/1.1 {status} {reason}`, as a server that names the
/// rejected key there writes it. The fake provider writes its own reason (`Canned`), so the
/// head it writes is an interim `100` whose one header line ends it, then the final head: HTTP
/// clients skip a `1xx` and read the answer after it.
fn with_reason(status: u16, reason: &str, headers: &[(&str, &str)]) -> Canned {
    let mut canned = Canned {
        status: 100,
        headers: vec![("x-interim".into(), format!("1\r\n\r\nHTTP/1.1 {status} {reason}"))],
        chunks: vec![b"{}".to_vec()],
        ..Canned::default()
    };
    canned.headers.extend(headers.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())));
    canned
}

#[tokio::test]
async fn the_key_in_the_providers_reason_phrase_never_reaches_the_agent() {
    // A 2xx body streamed and masked, an error body held and masked, a compressed body
    // withheld: each path of an answer rebuilds the provider's head.
    for (status, headers) in [
        (200, &[("content-type", "application/json")][..]),
        (401, &[("content-type", "application/json")]),
        (200, &[("content-encoding", "gzip")]),
        (302, &[("location", "https://sso.example.test/")]),
    ] {
        let rig = rig(move |request| {
            let sent = request.header("authorization").unwrap_or_default().to_owned();
            with_reason(status, &format!("Incorrect API key provided {sent}"), headers)
        })
        .await;
        let (answered, answer) = ask(&rig).await;
        let status_line = answer.lines().next().unwrap_or_default();
        assert_eq!(answered, status, "{answer}");
        assert_eq!(leaks(&answer), None, "status {status}: {status_line}");
        assert!(!status_line.contains("Incorrect"), "the provider's reason phrase passed: {status_line}");
    }
}

/// The byte-wise percent-encoding a URL's parameter value gets: all but the unreserved bytes.
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `text` percent-decoded once (a `%` not followed by two hex digits is kept).
fn url_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let digits = bytes.get(at + 1..at + 3).and_then(|d| std::str::from_utf8(d).ok());
        match (bytes[at], digits.and_then(|d| u8::from_str_radix(d, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_query_key_a_redirect_encodes_again_never_reaches_the_agent() {
    // Base64, sent in `?key=`, so the broker percent-encodes it upstream (`%2B`, `%2F`, `%3D`).
    const QUERY_KEY: &str = "Zq81vT0n+Wc4Lr2X/bY7uPaE5dMxYA+k9Q2w=";
    // An SSO proxy before the custom host sends the agent to its login page with the target it
    // was asked for in `rd=`, encoded again (`%252B`, `%252F`, `%253D`): in `Location` and the
    // page of a 302, in the page of a 200, and encoded a third time in a 401's page (the login
    // page's own `next=`).
    for (status, depth) in [(302, 1), (200, 1), (401, 2)] {
        let rig = rig_with_key(QUERY_KEY, move |request| {
            let mut target = request.path.clone();
            for _ in 0..depth {
                target = url_encode(&target);
            }
            let login = format!("https://sso.example.test/oauth2/start?rd={target}");
            Canned::json(status, &serde_json::json!({ "login": login })).header("location", &login)
        })
        .await;
        let (answered, answer) = ask_for(&rig, &format!("/v1/anything?key={PLACEHOLDER}"), "").await;
        assert_eq!(answered, status, "{answer}");
        let mut decoded = answer.clone();
        for _ in 0..3 {
            decoded = url_decode(&decoded);
            let window = (0..=QUERY_KEY.len() - 8).map(|at| &QUERY_KEY[at..at + 8]).find(|w| decoded.contains(*w));
            assert_eq!(window, None, "status {status}: the key passed, encoded again: {answer}");
        }
        assert!(answer.contains("[redacted]"), "status {status}: {answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brokered_adapter_missing_one_of_its_keys_fails_closed_before_any_container() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let root = tempfile::tempdir().expect("tempdir");
    write(root.path(), "README.md", "# Project\n");
    write(
        root.path(),
        ".roundtable/specs.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec:\n  image: roundtable-test/agent:latest\n  credentialEnv: [ACME_API_KEY, ACME_SECOND_KEY]\n  providerHosts: [api.acme.test]\n---\n{API}\nkind: Assignment\nmetadata: {{name: halfkeyed}}\nspec:\n  adapter: generic\n  task: {{id: T, prompt: 'echo ran > ran.txt'}}\n  readablePaths: [README.md]\n  timeout: 60s\n"
        ),
    );
    commit_all(root.path());
    let executions = tempfile::tempdir().expect("tempdir");
    let secrets = executions.path().join("secrets.env");
    std::fs::write(&secrets, format!("ACME_API_KEY={KEY}\n")).expect("secrets");
    std::fs::set_permissions(&secrets, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.path().to_path_buf());
    let project = roundtable_source::Project::resolve(&root.path().join(".roundtable")).expect("project").id;
    let daemon = start_daemon(root.path(), &["--secrets-file", secrets.to_str().expect("utf-8")], executions.path());

    let sessions = || json(&roundtable(root.path(), &["sessions", "list", "--format", "json"]))["items"].clone();
    let containers_seen = std::cell::RefCell::new(Vec::new());
    wait_until_within("the session to end", Duration::from_secs(120), || {
        // Watched while it runs, so an agent container that came and went is caught too (an
        // admission probe of the image is not the agent's, and not this item's).
        let listed = std::process::Command::new("docker")
            .args(["ps", "-aq", "--filter", &format!("label=roundtable.dev/project={project}")])
            .args(["--filter", "label=roundtable.dev/purpose=agent"])
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default();
        if !listed.is_empty() {
            containers_seen.borrow_mut().push(listed);
        }
        sessions()
            .as_array()
            .is_some_and(|items| items.iter().any(|s| s["phase"] == "Failed" || s["phase"] == "Succeeded"))
    })
    .await;
    drop(daemon);
    let session = sessions()[0].clone();
    assert_eq!(
        (session["phase"].as_str(), session["cause"].as_str()),
        (Some("Failed"), Some("BrokerUnavailable")),
        "{session:#}"
    );
    let message = session["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ACME_SECOND_KEY") && !message.contains("ACME_API_KEY"),
        "names only the missing key: {message}"
    );
    let containers_seen = containers_seen.into_inner();
    assert!(containers_seen.is_empty(), "a container of the Adapter ran: {containers_seen:?}");
    nothing_left(&engine, root.path()).await;
}
