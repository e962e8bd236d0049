//! The gateway end to end on loopback: a scripted DNS server, TLS and raw upstream servers on
//! per-test `127.0.0.N:443` addresses, real rustls clients and hand-built ClientHellos. Every
//! reason code listed in docs/gateway.md comes out of a test here, with what reached upstream
//! (nothing, for every denial) and how many lookups were made.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ipnet::IpNet;
use roundtable_gateway::craft::{Hello, sni_ext};
use roundtable_gateway::{
    AddressClass, Close, CloseReason, Decision, Dial, DirectDialer, DnsResolver, Endpoint, Gateway, GatewayReason,
    Journal, Listener, Settings, egress, serve,
};
use roundtable_net_fixtures::{FakeDns, Family, RawUpstream, Reply, TlsEcho, client_hello_for, tls_client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// A loopback address of this test's own: 127.0.0.10 upwards.
fn own_address() -> Ipv4Addr {
    static NEXT: AtomicU8 = AtomicU8::new(10);
    Ipv4Addr::new(127, 0, 0, NEXT.fetch_add(1, Ordering::Relaxed))
}

fn net(text: &str) -> IpNet {
    text.parse().expect("a CIDR")
}

#[derive(Default)]
struct MemoryJournal {
    decisions: Mutex<Vec<Decision>>,
    closes: Mutex<Vec<Close>>,
}

impl Journal for MemoryJournal {
    fn decision(&self, decision: &Decision) {
        self.decisions.lock().expect("journal").push(decision.clone());
    }

    fn close(&self, close: &Close) {
        self.closes.lock().expect("journal").push(close.clone());
    }
}

/// Dials directly, recording every target; "public" fixture addresses can be routed to loopback
/// servers and some targets made to hang.
#[derive(Default)]
struct RecordingDialer {
    dialed: Mutex<Vec<SocketAddr>>,
    routes: HashMap<SocketAddr, SocketAddr>,
    hang: Vec<SocketAddr>,
}

impl Dial for RecordingDialer {
    async fn dial(&self, target: SocketAddr) -> io::Result<TcpStream> {
        self.dialed.lock().expect("dialer").push(target);
        if self.hang.contains(&target) {
            std::future::pending::<()>().await;
        }
        DirectDialer.dial(self.routes.get(&target).copied().unwrap_or(target)).await
    }
}

struct Harness {
    address: SocketAddr,
    dns: FakeDns,
    journal: Arc<MemoryJournal>,
    dialer: Arc<RecordingDialer>,
    cancel: CancellationToken,
    served: tokio::task::JoinHandle<()>,
}

async fn start(settings: Settings, dialer: RecordingDialer, dns: FakeDns) -> Harness {
    let journal = Arc::new(MemoryJournal::default());
    let dialer = Arc::new(dialer);
    let resolver = DnsResolver::new(&[dns.address()]).expect("resolver");
    let gateway = Arc::new(Gateway::new(settings, resolver, dialer.clone(), journal.clone()));
    let listener = Listener::bind(&Endpoint::Tcp("127.0.0.1:0".parse().expect("addr"))).await.expect("bind");
    let Ok(Endpoint::Tcp(address)) = listener.endpoint() else { panic!("a TCP listener") };
    let cancel = CancellationToken::new();
    let served = tokio::spawn(serve(gateway, Arc::new(listener), cancel.clone()));
    Harness { address, dns, journal, dialer, cancel, served }
}

async fn fake_dns() -> FakeDns {
    FakeDns::start("127.0.0.1:0".parse().expect("addr")).await.expect("fake DNS")
}

/// Settings for `host`, with loopback admitted and dials kept on loopback (tests never leave the
/// machine).
fn loopback_settings(hosts: &[&str]) -> Settings {
    let mut settings = Settings::new(hosts).expect("settings");
    settings.set_allow_cidrs([net("127.0.0.0/8")]).expect("allowCidrs");
    settings.dial_allow = vec![net("127.0.0.0/8")];
    settings.self_addresses = vec!["127.0.0.1".parse().expect("ip")];
    settings
}

fn connect_request(host: &str) -> Vec<u8> {
    format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n").into_bytes()
}

impl Harness {
    /// Sends `request`, returns the response head (up to the blank line) and the stream.
    async fn request(&self, request: &[u8]) -> (String, TcpStream) {
        let mut stream = TcpStream::connect(self.address).await.expect("connect to the gateway");
        stream.write_all(request).await.expect("write the request");
        (roundtable_net_fixtures::read_head(&mut stream).await, stream)
    }

    /// CONNECTs to `host` and expects `200`.
    async fn tunnel(&self, host: &str) -> TcpStream {
        let (head, stream) = self.request(&connect_request(host)).await;
        assert!(head.starts_with("HTTP/1.1 200 "), "expected 200 for {host}, got {head:?}: {:#?}", self.decisions());
        stream
    }

    fn decisions(&self) -> Vec<Decision> {
        self.journal.decisions.lock().expect("journal").clone()
    }

    fn closes(&self) -> Vec<Close> {
        self.journal.closes.lock().expect("journal").clone()
    }

    fn dialed(&self) -> Vec<SocketAddr> {
        self.dialer.dialed.lock().expect("dialer").clone()
    }

    /// Waits for the `n`th decision line and returns it.
    async fn decision(&self, n: usize) -> Decision {
        for _ in 0..500 {
            if let Some(decision) = self.decisions().get(n - 1) {
                return decision.clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no decision #{n}: {:#?}", self.decisions());
    }

    async fn close(&self, n: usize) -> Close {
        for _ in 0..500 {
            if let Some(close) = self.closes().get(n - 1) {
                return close.clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no close line #{n}: {:#?}", self.closes());
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.served).await.expect("serve stops").expect("no panic");
    }
}

/// Reads until the peer closes (bounded).
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes)).await;
    bytes
}

#[tokio::test]
async fn an_allowed_tunnel_moves_bytes_both_ways_unchanged() {
    let host = "echo.roundtable.test";
    let upstream = TlsEcho::start(SocketAddr::new(own_address().into(), 443), &[host]).await.expect("TLS echo");
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![upstream.address.ip()])]);
    let gateway = start(loopback_settings(&[host]), RecordingDialer::default(), dns).await;

    let stream = gateway.tunnel(host).await;
    let mut tls = tls_client(stream, host, &upstream.identity.certificate, true).await.expect("TLS through the tunnel");
    let payload: Vec<u8> = (0..1_048_576u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let (mut reader, mut writer) = tokio::io::split(&mut tls);
    let send = async {
        writer.write_all(&payload).await.expect("send");
        writer.flush().await.expect("flush");
    };
    let mut echoed = vec![0u8; payload.len()];
    let receive = reader.read_exact(&mut echoed);
    let ((), received) = tokio::join!(send, receive);
    received.expect("echo");
    assert!(echoed == payload, "the echo differs from what was sent");
    tls.shutdown().await.expect("close_notify");
    drop(tls);

    let decision = gateway.decision(1).await;
    assert_eq!((decision.decision, decision.reason), (egress::Decision::Allow, GatewayReason::Allowed));
    assert_eq!(decision.host.as_deref(), Some(host));
    assert_eq!(decision.resolved, [upstream.address.ip()]);
    assert_eq!(decision.dialed, Some(upstream.address));
    assert_eq!(decision.sni.as_deref(), Some(host));
    assert_eq!(decision.allowed_by_cidr, ["127.0.0.0/8"], "the allowCidrs entry is named in the decision");
    assert!(decision.client_hello_bytes.is_some_and(|bytes| bytes > 100), "{decision:?}");
    assert!(decision.dns_ms.is_some() && decision.connect_ms.is_some(), "{decision:?}");
    let close = gateway.close(1).await;
    assert!(close.bytes_out > 1_048_576 && close.bytes_in > 1_048_576, "{close:?}");
    assert_eq!(close.close_reason, CloseReason::Completed);
    assert_eq!(gateway.dns.lookups(host), 1, "exactly one lookup per tunnel");
    gateway.stop().await;
}

#[tokio::test]
async fn buffered_bytes_are_replayed_to_upstream_byte_for_byte() {
    let host = "raw.roundtable.test";
    let upstream = RawUpstream::start(SocketAddr::new(own_address().into(), 443), b"upstream says hi".to_vec())
        .await
        .expect("raw upstream");
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![upstream.address.ip()])]);
    let gateway = start(loopback_settings(&[host]), RecordingDialer::default(), dns).await;

    // The head, a real ClientHello and some early data in one write; more after the 200.
    let hello = client_hello_for(host);
    let early = [0x17, 0x03, 0x03, 0x00, 0x03, 1, 2, 3];
    let mut first = connect_request(host);
    first.extend(&hello);
    first.extend(early);
    let (head, mut stream) = gateway.request(&first).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    stream.write_all(b"later bytes").await.expect("write");
    let mut reply = [0u8; 16];
    stream.read_exact(&mut reply).await.expect("reply");
    assert_eq!(&reply, b"upstream says hi");
    stream.shutdown().await.expect("half-close");
    assert!(read_to_close(&mut stream).await.is_empty());

    let mut expected = hello.clone();
    expected.extend(early);
    expected.extend(b"later bytes");
    let close = gateway.close(1).await;
    assert_eq!(close.bytes_out, expected.len() as u64);
    assert_eq!(close.bytes_in, 16);
    assert_eq!(upstream.received(), [expected], "upstream got exactly what the client sent");
    assert_eq!(gateway.decision(1).await.client_hello_bytes, Some(hello.len()));
    gateway.stop().await;
}

#[tokio::test]
async fn every_request_refusal_is_answered_before_any_lookup_or_dial() {
    let host = "api.roundtable.test";
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![own_address().into()])]);
    let mut settings = loopback_settings(&[host]);
    settings.limits.header_timeout = Duration::from_millis(300);
    let gateway = start(settings, RecordingDialer::default(), dns).await;
    let pad = format!("CONNECT {host}:443 HTTP/1.1\r\n{}\r\n", "X-Pad: y\r\n".repeat(40));
    let cases: Vec<(&str, String, u16, GatewayReason)> = vec![
        ("not HTTP", "\x16\x03\x01 junk\r\n\r\n".into(), 400, GatewayReason::BadRequestLine),
        ("GET", format!("GET https://{host}/ HTTP/1.1\r\n\r\n"), 405, GatewayReason::MethodNotAllowed),
        ("header lines", pad, 431, GatewayReason::HeadersTooLarge),
        ("no CRLF end", format!("CONNECT {host}:443 HTTP/1.1\r\n"), 408, GatewayReason::HeaderTimeout),
        ("no port", format!("CONNECT {host} HTTP/1.1\r\n\r\n"), 400, GatewayReason::BadAuthority),
        ("port 0443", format!("CONNECT {host}:0443 HTTP/1.1\r\n\r\n"), 400, GatewayReason::BadAuthority),
        ("port 80", format!("CONNECT {host}:80 HTTP/1.1\r\n\r\n"), 403, GatewayReason::PortNotAllowed),
        ("underscore", "CONNECT a_b.roundtable.test:443 HTTP/1.1\r\n\r\n".into(), 400, GatewayReason::HostInvalid),
        ("upper case", "CONNECT API.roundtable.test:443 HTTP/1.1\r\n\r\n".into(), 400, GatewayReason::HostNotCanonical),
        ("trailing dot", format!("CONNECT {host}.:443 HTTP/1.1\r\n\r\n"), 400, GatewayReason::HostNotCanonical),
        ("IP", "CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n".into(), 403, GatewayReason::IpLiteral),
        ("short IP", "CONNECT 127.1:443 HTTP/1.1\r\n\r\n".into(), 403, GatewayReason::IpLiteral),
        (
            "other host",
            "CONNECT evil.roundtable.test:443 HTTP/1.1\r\n\r\n".into(),
            403,
            GatewayReason::HostNotAllowlisted,
        ),
        (
            "suffix trick",
            format!("CONNECT {host}.evil.test:443 HTTP/1.1\r\n\r\n"),
            403,
            GatewayReason::HostNotAllowlisted,
        ),
    ];
    for (n, (what, request, status, reason)) in cases.iter().enumerate() {
        let (head, mut stream) = gateway.request(request.as_bytes()).await;
        if *what == "IP" {
            // What was asked is on record even though no host was accepted.
            assert_eq!(gateway.decision(n + 1).await.requested_host.as_deref(), Some("127.0.0.1:443"));
        }
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{what}: {head:?}");
        assert!(head.contains(&format!("X-Gateway-Deny: {reason}\r\n")), "{what}: {head:?}");
        assert!(read_to_close(&mut stream).await.is_empty(), "{what}: closed after the answer");
        let decision = gateway.decision(n + 1).await;
        assert_eq!((decision.decision, decision.reason), (egress::Decision::Deny, *reason), "{what}");
    }
    assert_eq!(gateway.dns.lookups(host), 0, "no refusal before the allowlist reaches DNS");
    assert!(gateway.dialed().is_empty(), "a denied tunnel never touches upstream");
    gateway.stop().await;
}

#[tokio::test]
async fn dns_failures_are_refused_with_their_status() {
    let dns = fake_dns().await;
    let cases = [
        ("nx.roundtable.test", Reply::NxDomain, 502, GatewayReason::DnsNoRecords),
        ("empty.roundtable.test", Reply::Addresses(vec![]), 502, GatewayReason::DnsNoRecords),
        ("broken.roundtable.test", Reply::ServFail, 502, GatewayReason::DnsError),
        ("silent.roundtable.test", Reply::Silence, 504, GatewayReason::DnsTimeout),
    ];
    for (host, reply, _, _) in &cases {
        dns.answer(host, vec![reply.clone()]);
    }
    let mut settings = Settings::new(cases.iter().map(|case| case.0)).expect("settings");
    settings.limits.dns_timeout = Duration::from_millis(500);
    let gateway = start(settings, RecordingDialer::default(), dns).await;
    for (n, (host, _, status, reason)) in cases.iter().enumerate() {
        let (head, _) = gateway.request(&connect_request(host)).await;
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{host}: {head:?}");
        assert_eq!(gateway.decision(n + 1).await.reason, *reason, "{host}");
    }
    assert!(gateway.dialed().is_empty());
    gateway.stop().await;
}

/// Regression: a nameserver that answered A and dropped AAAA failed the whole lookup (`dns_error`
/// after 4 s). The A records are the pin, within a resend or two.
#[tokio::test]
async fn a_nameserver_that_drops_aaaa_queries_pins_the_a_records() {
    let host = "v4only.roundtable.test";
    let upstream = TlsEcho::start(SocketAddr::new(own_address().into(), 443), &[host]).await.expect("TLS echo");
    let dns = fake_dns().await;
    let answer = Reply::Addresses(vec![upstream.address.ip(), "2001:db8::1".parse().expect("ip")]);
    dns.answer(host, vec![Reply::Drop(Family::V6, Box::new(answer))]);
    let gateway = start(loopback_settings(&[host]), RecordingDialer::default(), dns).await;
    let stream = gateway.tunnel(host).await;
    let _tls = tls_client(stream, host, &upstream.identity.certificate, true).await.expect("TLS");
    let decision = gateway.decision(1).await;
    assert_eq!(decision.resolved, [upstream.address.ip()], "the family that answered is the pin");
    assert_eq!(decision.dialed, Some(upstream.address));
    let dns_ms = decision.dns_ms.expect("timed");
    assert!(dns_ms < 1500.0, "given up on AAAA after a grace, not a whole turn: {dns_ms} ms");
    gateway.stop().await;
}

/// Regression: with one silent nameserver the lookup gave up after 4 s as `dns_error`, so a DNS
/// timeout above that was never reached. The timeout is the lookup's one deadline.
#[tokio::test]
async fn a_silent_nameserver_is_waited_for_until_the_dns_timeout() {
    let host = "quiet.roundtable.test";
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Silence]);
    let mut settings = Settings::new([host]).expect("settings");
    settings.limits.dns_timeout = Duration::from_millis(4500);
    let gateway = start(settings, RecordingDialer::default(), dns).await;
    let (head, _) = gateway.request(&connect_request(host)).await;
    assert!(head.starts_with("HTTP/1.1 504 "), "{head:?}");
    let decision = gateway.decision(1).await;
    assert_eq!(decision.reason, GatewayReason::DnsTimeout, "{decision:?}");
    let dns_ms = decision.dns_ms.expect("timed");
    assert!((4400.0..5500.0).contains(&dns_ms), "ended at the configured timeout: {dns_ms} ms");
    assert!(gateway.dialed().is_empty());
    gateway.stop().await;
}

#[tokio::test]
async fn any_non_public_answer_denies_the_tunnel_and_is_never_dialed() {
    let dns = fake_dns().await;
    let allowed = own_address();
    let cases: Vec<(&str, Vec<IpAddr>, GatewayReason)> = vec![
        (
            "private.roundtable.test",
            vec!["10.0.0.1".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::Private),
        ),
        // A mixed answer: the public-looking part is not dialed either.
        (
            "mixed.roundtable.test",
            vec![allowed.into(), "10.1.2.3".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::Private),
        ),
        (
            "imds.roundtable.test",
            vec!["169.254.169.254".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::Metadata),
        ),
        (
            "cgnat.roundtable.test",
            vec!["100.64.0.1".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::Shared),
        ),
        // Metadata and credential endpoints inside networks an exception below names.
        (
            "alibaba-imds.roundtable.test",
            vec!["100.100.100.200".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::Metadata),
        ),
        (
            "ecs-credentials.roundtable.test",
            vec!["169.254.170.2".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::Metadata),
        ),
        (
            "aws-imds-v6.roundtable.test",
            vec!["fd00:ec2::254".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::Metadata),
        ),
        (
            "teredo.roundtable.test",
            vec!["2001:0:4136:e378:8000:63bf:3fff:fdd2".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::V6IetfProtocol),
        ),
        (
            "mapped.roundtable.test",
            vec!["::ffff:8.8.8.8".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::V6NonGlobal),
        ),
        (
            "nat64.roundtable.test",
            vec!["64:ff9b::a9fe:a9fe".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::V6NonGlobal),
        ),
        (
            "doc.roundtable.test",
            vec!["2001:db8::1".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::V6Documentation),
        ),
        (
            "loop.roundtable.test",
            vec!["127.0.0.2".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::Loopback),
        ),
        (
            "self.roundtable.test",
            vec!["127.0.0.1".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::SelfAddress),
        ),
        (
            "mapped-self.roundtable.test",
            vec!["::ffff:127.0.0.1".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::SelfAddress),
        ),
        // Covered by an exception below, but an embedded IPv4 is never excepted.
        (
            "mapped-loop.roundtable.test",
            vec!["::ffff:127.0.0.2".parse().expect("ip")],
            GatewayReason::AddressDenied(AddressClass::V6NonGlobal),
        ),
    ];
    for (host, addresses, _) in &cases {
        dns.answer(host, vec![Reply::Addresses(addresses.clone())]);
    }
    let mut settings = Settings::new(cases.iter().map(|case| case.0)).expect("settings");
    // This test's own address is a plain exception; 127.0.0.1 is this host's and never allowed.
    // Exceptions that must not open what they cover: metadata, Teredo, NAT64 and IPv4-mapped space.
    let exceptions = [
        IpNet::from(IpAddr::from(allowed)),
        net("127.0.0.1/32"),
        net("169.254.0.0/16"),
        net("100.100.100.200/32"),
        net("fd00::/8"),
        net("2001::/32"),
        net("64:ff9b::/96"),
        net("::ffff:0:0/96"),
    ];
    settings.set_allow_cidrs(exceptions).expect("allowCidrs");
    settings.self_addresses = vec!["127.0.0.1".parse().expect("ip")];
    let gateway = start(settings, RecordingDialer::default(), dns).await;
    for (n, (host, addresses, reason)) in cases.iter().enumerate() {
        let (head, _) = gateway.request(&connect_request(host)).await;
        assert!(head.starts_with("HTTP/1.1 403 "), "{host}: {head:?}");
        // The client learns the class, never the address.
        assert!(head.contains(&format!("X-Gateway-Deny: {reason}\r\n")), "{host}: {head:?}");
        assert!(!head.contains("10.") && !head.contains("169.254"), "{head}");
        let decision = gateway.decision(n + 1).await;
        assert_eq!(decision.reason, *reason, "{host}");
        assert_eq!(&decision.resolved, addresses, "the log names every address");
    }
    assert!(gateway.dialed().is_empty(), "nothing dialed: {:?}", gateway.dialed());
    gateway.stop().await;
}

#[tokio::test]
async fn a_rebinding_answer_on_a_later_lookup_never_leads_to_a_private_dial() {
    let host = "rebind.roundtable.test";
    let upstream = RawUpstream::start(SocketAddr::new(own_address().into(), 443), Vec::new()).await.expect("upstream");
    let dns = fake_dns().await;
    let private: IpAddr = "192.168.1.10".parse().expect("ip");
    dns.answer(host, vec![Reply::Addresses(vec![upstream.address.ip()]), Reply::Addresses(vec![private])]);
    let mut settings = Settings::new([host]).expect("settings");
    settings.set_allow_cidrs([IpNet::from(upstream.address.ip())]).expect("allowCidrs");
    let gateway = start(settings, RecordingDialer::default(), dns).await;

    let mut first = gateway.tunnel(host).await;
    first.write_all(&client_hello_for(host)).await.expect("hello");
    assert_eq!(gateway.decision(1).await.dialed, Some(upstream.address));
    drop(first);
    let (head, _) = gateway.request(&connect_request(host)).await;
    assert!(head.contains("X-Gateway-Deny: address_denied:private"), "{head}");
    assert_eq!(gateway.decision(2).await.resolved, [private]);
    assert_eq!(gateway.dns.lookups(host), 2, "one lookup per tunnel, each classified");
    assert_eq!(gateway.dialed(), [upstream.address], "only the validated address was ever dialed");
    gateway.stop().await;
}

#[tokio::test]
async fn a_public_answer_is_dialed_exactly_as_resolved() {
    let host = "public.roundtable.test";
    let upstream = TlsEcho::start(SocketAddr::new(own_address().into(), 443), &[host]).await.expect("TLS echo");
    let public: SocketAddr = "93.184.216.34:443".parse().expect("addr");
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![public.ip()])]);
    // No exception at all: the address is public; the test dialer routes it to loopback.
    let dialer = RecordingDialer { routes: HashMap::from([(public, upstream.address)]), ..Default::default() };
    let gateway = start(Settings::new([host]).expect("settings"), dialer, dns).await;
    let stream = gateway.tunnel(host).await;
    let mut tls = tls_client(stream, host, &upstream.identity.certificate, true).await.expect("TLS");
    tls.write_all(b"ping").await.expect("write");
    let mut pong = [0u8; 4];
    tls.read_exact(&mut pong).await.expect("read");
    assert_eq!(&pong, b"ping");
    let decision = gateway.decision(1).await;
    assert_eq!(decision.dialed, Some(public));
    assert!(decision.allowed_by_cidr.is_empty());
    assert_eq!(gateway.dialed(), [public]);
    gateway.stop().await;
}

#[tokio::test]
async fn dial_allow_only_narrows() {
    let host = "narrow.roundtable.test";
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![own_address().into()])]);
    let mut settings = loopback_settings(&[host]);
    settings.dial_allow = vec![IpNet::from(IpAddr::from(own_address()))];
    let gateway = start(settings, RecordingDialer::default(), dns).await;
    let (head, _) = gateway.request(&connect_request(host)).await;
    assert!(head.contains("X-Gateway-Deny: address_denied:outside_dial_allow"), "{head}");
    assert!(gateway.dialed().is_empty());
    gateway.stop().await;
}

/// Sends `bytes` after a 200 and returns what came back before the close.
async fn after_connect(gateway: &Harness, host: &str, bytes: &[u8]) -> Vec<u8> {
    let mut stream = gateway.tunnel(host).await;
    stream.write_all(bytes).await.expect("write");
    read_to_close(&mut stream).await
}

#[tokio::test]
async fn every_client_hello_refusal_closes_without_touching_upstream() {
    let host = "hello.roundtable.test";
    let upstream = RawUpstream::start(SocketAddr::new(own_address().into(), 443), Vec::new()).await.expect("upstream");
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![upstream.address.ip()])]);
    let gateway = start(loopback_settings(&[host]), RecordingDialer::default(), dns).await;
    let with = |change: &dyn Fn(&mut Hello)| Hello::changed(host, change);
    let mut oversized = Hello::for_host(host).records(16 * 1024);
    oversized[3..5].copy_from_slice(&0x4801u16.to_be_bytes());
    let mut not_hello = Hello::for_host(host).records(16 * 1024);
    not_hello[5] = 0x02;
    const UNRECOGNIZED_NAME: &[u8] = &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 112];
    const ACCESS_DENIED: &[u8] = &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49];
    let cases: Vec<(&str, Vec<u8>, GatewayReason, &[u8])> = vec![
        ("plain HTTP", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), GatewayReason::NotTls, b""),
        ("record too large", oversized, GatewayReason::TlsRecordTooLarge, ACCESS_DENIED),
        (
            "huge hello",
            with(&|h| h.extensions.push((0x0015, vec![0; 17_000]))),
            GatewayReason::ClientHelloTooLarge,
            ACCESS_DENIED,
        ),
        ("server hello", not_hello, GatewayReason::NotClientHello, ACCESS_DENIED),
        (
            "junk after the SNI list",
            with(&|h| h.extensions[0].1.extend([0, 0, 1])),
            GatewayReason::ClientHelloMalformed,
            ACCESS_DENIED,
        ),
        (
            "TLS 1.0",
            with(&|h| {
                h.version = 0x0301;
                h.extensions.remove(1);
            }),
            GatewayReason::TlsVersionUnsupported,
            ACCESS_DENIED,
        ),
        ("no SNI", with(&|h| _ = h.extensions.remove(0)), GatewayReason::SniMissing, UNRECOGNIZED_NAME),
        (
            "NUL in SNI",
            with(&|h| h.extensions[0].1 = sni_ext(&[(0, b"hello\0.test")])),
            GatewayReason::SniInvalid,
            UNRECOGNIZED_NAME,
        ),
        (
            "two names",
            with(&|h| h.extensions[0].1 = sni_ext(&[(0, host.as_bytes()), (0, b"evil.test")])),
            GatewayReason::SniMultiple,
            UNRECOGNIZED_NAME,
        ),
        (
            "two SNI extensions",
            with(&|h| h.extensions.push((0, sni_ext(&[(0, b"evil.test")])))),
            GatewayReason::DuplicateExtension,
            ACCESS_DENIED,
        ),
        ("fronting", client_hello_for("evil.roundtable.test"), GatewayReason::SniMismatch, UNRECOGNIZED_NAME),
        ("ECH", with(&|h| h.extensions.push((0xfe0d, vec![0; 8]))), GatewayReason::EchPresent, ACCESS_DENIED),
    ];
    for (n, (what, bytes, reason, answer)) in cases.iter().enumerate() {
        let reply = after_connect(&gateway, host, bytes).await;
        assert_eq!(reply, *answer, "{what}: the alert (or silence) before the close");
        let decision = gateway.decision(n + 1).await;
        assert_eq!((decision.decision, decision.reason), (egress::Decision::Deny, *reason), "{what}");
    }
    // A real rustls client without SNI.
    let stream = gateway.tunnel(host).await;
    let identity = roundtable_net_fixtures::TlsIdentity::self_signed(&[host]);
    assert!(tls_client(stream, host, &identity.certificate, false).await.is_err());
    assert_eq!(gateway.decision(cases.len() + 1).await.reason, GatewayReason::SniMissing);
    assert!(gateway.dialed().is_empty(), "nothing dialed: {:?}", gateway.dialed());
    assert!(upstream.received().is_empty());
    gateway.stop().await;
}

#[tokio::test]
async fn a_slow_or_vanishing_client_is_cut_off() {
    let host = "slow.roundtable.test";
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![own_address().into()])]);
    let mut settings = loopback_settings(&[host]);
    settings.limits.client_hello_timeout = Duration::from_millis(300);
    let gateway = start(settings, RecordingDialer::default(), dns).await;
    let hello = client_hello_for(host);

    let mut stream = gateway.tunnel(host).await;
    stream.write_all(&hello[..20]).await.expect("partial hello");
    read_to_close(&mut stream).await;
    assert_eq!(gateway.decision(1).await.reason, GatewayReason::ClientHelloTimeout);

    let mut stream = gateway.tunnel(host).await;
    stream.write_all(&hello[..20]).await.expect("partial hello");
    stream.shutdown().await.expect("leave");
    read_to_close(&mut stream).await;
    assert_eq!(gateway.decision(2).await.reason, GatewayReason::ClientEof);
    assert!(gateway.dialed().is_empty());
    gateway.stop().await;
}

#[tokio::test]
async fn an_upstream_that_refuses_or_hangs_ends_the_tunnel_with_its_reason() {
    let refused = "refused.roundtable.test";
    let hanging = "hanging.roundtable.test";
    let closed_port = SocketAddr::new(own_address().into(), 443);
    let black_hole = SocketAddr::new(own_address().into(), 443);
    let dns = fake_dns().await;
    dns.answer(refused, vec![Reply::Addresses(vec![closed_port.ip()])]);
    dns.answer(hanging, vec![Reply::Addresses(vec![black_hole.ip()])]);
    let mut settings = loopback_settings(&[refused, hanging]);
    settings.limits.connect_timeout = Duration::from_millis(300);
    let dialer = RecordingDialer { hang: vec![black_hole], ..Default::default() };
    let gateway = start(settings, dialer, dns).await;

    let reply = after_connect(&gateway, refused, &client_hello_for(refused)).await;
    assert_eq!(reply, [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 80]);
    let decision = gateway.decision(1).await;
    assert_eq!(decision.reason, GatewayReason::UpstreamConnectFailed);
    assert!(decision.error.as_deref().is_some_and(|e| e.contains(&closed_port.to_string())), "{decision:?}");
    after_connect(&gateway, hanging, &client_hello_for(hanging)).await;
    assert_eq!(gateway.decision(2).await.reason, GatewayReason::UpstreamConnectTimeout);
    assert_eq!(gateway.dialed(), [closed_port, black_hole], "each pinned address, once");
    gateway.stop().await;
}

#[tokio::test]
async fn tunnels_past_the_limit_get_429_and_a_retry_hint() {
    let host = "busy.roundtable.test";
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![own_address().into()])]);
    let mut settings = loopback_settings(&[host]);
    settings.limits.max_tunnels = 1;
    let gateway = start(settings, RecordingDialer::default(), dns).await;
    // The one slot is held by a tunnel still sending its head.
    let mut holder = TcpStream::connect(gateway.address).await.expect("connect");
    holder.write_all(b"CONNECT busy").await.expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (head, _) = gateway.request(&connect_request(host)).await;
    assert!(head.starts_with("HTTP/1.1 429 "), "{head}");
    assert!(head.contains("X-Gateway-Deny: tunnel_limit\r\n") && head.contains("Retry-After: 1\r\n"), "{head}");
    assert_eq!(gateway.decision(1).await.reason, GatewayReason::TunnelLimit);
    drop(holder);
    gateway.stop().await;
}

#[tokio::test]
async fn an_idle_tunnel_is_closed_and_stopping_the_gateway_closes_the_rest() {
    let host = "idle.roundtable.test";
    let upstream = RawUpstream::start(SocketAddr::new(own_address().into(), 443), Vec::new()).await.expect("upstream");
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![upstream.address.ip()])]);
    let mut settings = loopback_settings(&[host]);
    settings.limits.idle_timeout = Duration::from_millis(300);
    let gateway = start(settings, RecordingDialer::default(), dns).await;
    let mut idle = gateway.tunnel(host).await;
    idle.write_all(&client_hello_for(host)).await.expect("hello");
    read_to_close(&mut idle).await;
    assert_eq!(gateway.close(1).await.close_reason, CloseReason::IdleTimeout);

    let mut settings = loopback_settings(&[host]);
    settings.limits.idle_timeout = Duration::from_secs(600);
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![upstream.address.ip()])]);
    let gateway = start(settings, RecordingDialer::default(), dns).await;
    let mut open = gateway.tunnel(host).await;
    open.write_all(&client_hello_for(host)).await.expect("hello");
    gateway.decision(1).await;
    let journal = gateway.journal.clone();
    gateway.stop().await;
    assert!(read_to_close(&mut open).await.is_empty());
    let closes = journal.closes.lock().expect("journal").clone();
    assert_eq!(closes.len(), 1, "the stop waits for every close line");
    assert_eq!(closes[0].close_reason, CloseReason::GatewayShutdown);
}

#[tokio::test]
async fn a_unix_socket_gateway_serves_the_same_tunnels() {
    let host = "unix.roundtable.test";
    let upstream = TlsEcho::start(SocketAddr::new(own_address().into(), 443), &[host]).await.expect("TLS echo");
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![upstream.address.ip()])]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("egress.sock");
    let journal = Arc::new(MemoryJournal::default());
    let resolver = DnsResolver::new(&[dns.address()]).expect("resolver");
    let gateway = Arc::new(Gateway::new(loopback_settings(&[host]), resolver, DirectDialer, journal.clone()));
    let listener = Listener::bind(&Endpoint::Unix(path.clone())).await.expect("bind");
    let cancel = CancellationToken::new();
    let served = tokio::spawn(serve(gateway, Arc::new(listener), cancel.clone()));

    let mut stream = tokio::net::UnixStream::connect(&path).await.expect("connect");
    stream.write_all(&connect_request(host)).await.expect("CONNECT");
    let mut head = [0u8; 39];
    stream.read_exact(&mut head).await.expect("200");
    assert_eq!(&head, b"HTTP/1.1 200 Connection Established\r\n\r\n");
    let mut tls = tls_client(stream, host, &upstream.identity.certificate, true).await.expect("TLS");
    tls.write_all(b"over unix").await.expect("write");
    let mut echoed = [0u8; 9];
    tls.read_exact(&mut echoed).await.expect("read");
    assert_eq!(&echoed, b"over unix");
    cancel.cancel();
    served.await.expect("serve ends");
    assert_eq!(journal.decisions.lock().expect("journal")[0].reason, GatewayReason::Allowed);
}

#[tokio::test]
async fn a_long_answer_is_dialed_in_order_and_only_its_first_four() {
    let host = "many.roundtable.test";
    // Six loopback addresses where nothing listens: each dial is refused at once.
    let addresses: Vec<IpAddr> = (0..6).map(|_| IpAddr::from(own_address())).collect();
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(addresses.clone())]);
    let gateway = start(loopback_settings(&[host]), RecordingDialer::default(), dns).await;
    after_connect(&gateway, host, &client_hello_for(host)).await;
    assert_eq!(gateway.decision(1).await.reason, GatewayReason::UpstreamConnectFailed);
    let expected: Vec<SocketAddr> = addresses[..4].iter().map(|ip| SocketAddr::new(*ip, 443)).collect();
    assert_eq!(gateway.dialed(), expected);
    gateway.stop().await;
}

/// The value of one series in the process-wide registry's rendering; zero while it is absent.
fn scraped(series: &str) -> f64 {
    roundtable_telemetry::global().sample(series).unwrap_or(0.0)
}

/// Other tests record into the same registry at the same time, so every series is compared as
/// "grew by at least" this test's own tunnels.
#[tokio::test]
async fn decisions_and_finished_tunnels_reach_the_process_metrics() {
    use roundtable_gateway::metrics::{
        CLIENT_HELLO_BYTES, CONNECT_SECONDS, DECISIONS_TOTAL, DNS_LOOKUP_SECONDS, TUNNEL_BYTES, TUNNEL_DURATION_SECONDS,
    };
    let host = "metrics.roundtable.test";
    let upstream =
        RawUpstream::start(SocketAddr::new(own_address().into(), 443), b"metered".to_vec()).await.expect("upstream");
    let dns = fake_dns().await;
    dns.answer(host, vec![Reply::Addresses(vec![upstream.address.ip()])]);
    let gateway = start(loopback_settings(&[host]), RecordingDialer::default(), dns).await;
    let series = [
        format!("{DECISIONS_TOTAL}{{reason=\"allowed\"}}"),
        format!("{DECISIONS_TOTAL}{{reason=\"host_not_allowlisted\"}}"),
        format!("{DNS_LOOKUP_SECONDS}_count"),
        format!("{CONNECT_SECONDS}_count"),
        format!("{CLIENT_HELLO_BYTES}_count"),
        format!("{TUNNEL_BYTES}_count{{direction=\"upstream\"}}"),
        format!("{TUNNEL_BYTES}_count{{direction=\"downstream\"}}"),
        format!("{TUNNEL_DURATION_SECONDS}_count"),
    ];
    let before: Vec<f64> = series.iter().map(|series| scraped(series)).collect();

    let (head, mut refused) = gateway.request(&connect_request("elsewhere.roundtable.test")).await;
    assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
    read_to_close(&mut refused).await;
    let mut allowed = gateway.tunnel(host).await;
    allowed.write_all(&client_hello_for(host)).await.expect("hello");
    let mut reply = [0u8; 7];
    allowed.read_exact(&mut reply).await.expect("reply");
    allowed.shutdown().await.expect("half-close");
    read_to_close(&mut allowed).await;
    gateway.close(1).await;

    for (series, before) in series.iter().zip(before) {
        let after = scraped(series);
        assert!(after >= before + 1.0, "{series}: {before} before, {after} after");
    }
    let text = roundtable_telemetry::global().render();
    assert!(text.contains(&format!("# TYPE {DECISIONS_TOTAL} counter\n")), "{text}");
    assert!(text.contains(&format!("# TYPE {TUNNEL_DURATION_SECONDS} histogram\n")), "{text}");
    assert!(scraped(&format!("{TUNNEL_DURATION_SECONDS}_count")) > 0.0);
    gateway.stop().await;
}
