//! Broker benchmark: one fake provider over TLS on loopback (127.0.0.201:443, a fresh certificate),
//! reached directly over TLS from the client and through the broker on its Unix socket (the shape
//! a session uses), side by side: sequential latency (p50, p99), requests per second with several
//! clients at once, and time to the first server-sent event of a stream. Both legs open one TLS
//! connection to the provider per request (the fake closes after each answer), so the difference
//! is the broker's hop and its checks; a third leg is a client that ignores its base URL, its
//! `CONNECT` intercepted by the broker with the session CA (one more TLS handshake per request).
//! Then the time to start a broker (with its session CA) and the resident memory of idle
//! brokers, each on its own socket. Prints figures; asserts nothing. Everything is loopback.
//!
//! Environment (all optional): `BENCH_REQUESTS` (1000 sequential per leg), `BENCH_CLIENTS` (16),
//! `BENCH_BURST` (4000 requests per leg across the clients), `BENCH_BROKERS` (200).

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roundtable_broker::{
    Broker, BrokerJournal, BrokerLimits, BrokerSettings, Budget, Credential, RequestLine, Route, Secret, serve,
};
use roundtable_gateway::{DirectDialer, DnsResolver, Endpoint, Listener, Settings};
use roundtable_net_fixtures::{Canned, FakeDns, FakeProvider, Reply, tls_client};
use roundtable_specs::broker::placeholder_from;
use rustls::pki_types::CertificateDer;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio_util::sync::CancellationToken;

type Result<T, E = Box<dyn Error + Send + Sync>> = std::result::Result<T, E>;

const HOST: &str = "api.openai.com";
const UPSTREAM: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 201)), 443);
const KEY: &str = "sk-bench-0123456789abcdefghijklmnopqrstuvwxyz";

struct NoJournal;

impl BrokerJournal for NoJournal {
    fn request(&self, _line: &RequestLine) {}
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn placeholder() -> String {
    placeholder_from(&[0x42; 32])
}

#[derive(Clone)]
enum Leg {
    Direct(CertificateDer<'static>),
    Broker(PathBuf),
    /// A client that ignores its base URL: `CONNECT` on the broker's socket, then TLS with the
    /// session CA (its certificate here), then origin-form requests.
    Intercepted(PathBuf, CertificateDer<'static>),
}

impl Leg {
    fn name(&self) -> &'static str {
        match self {
            Leg::Direct(_) => "direct TLS",
            Leg::Broker(_) => "broker (unix)",
            Leg::Intercepted(..) => "intercepted",
        }
    }

    /// One request; returns (time to the first body byte that says `data:` or `{`, total).
    async fn request(&self, path: &str) -> Result<(Duration, Duration)> {
        let started = Instant::now();
        // The model list is a GET, a turn a POST, as the broker's endpoint list has them.
        let method = if path.starts_with("/v1/models") { "GET" } else { "POST" };
        match self {
            Leg::Direct(certificate) => {
                let tcp = TcpStream::connect(UPSTREAM).await?;
                tcp.set_nodelay(true)?;
                let tls = tls_client(tcp, HOST, certificate, true).await?;
                let head = format!("{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {KEY}\r\n");
                exchange(tls, &head, started).await
            }
            Leg::Broker(socket) => {
                let stream = UnixStream::connect(socket).await?;
                let head = format!(
                    "{method} /{HOST}{path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n",
                    placeholder()
                );
                exchange(stream, &head, started).await
            }
            Leg::Intercepted(socket, ca) => {
                let mut stream = UnixStream::connect(socket).await?;
                stream.write_all(format!("CONNECT {HOST}:443 HTTP/1.1\r\nHost: {HOST}:443\r\n\r\n").as_bytes()).await?;
                let answer = roundtable_net_fixtures::read_head(&mut stream).await;
                if !answer.starts_with("HTTP/1.1 200") {
                    return Err(format!("CONNECT answered {answer:?}").into());
                }
                let tls = tls_client(stream, HOST, ca, true).await?;
                let head =
                    format!("{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {}\r\n", placeholder());
                exchange(tls, &head, started).await
            }
        }
    }
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    head: &str,
    started: Instant,
) -> Result<(Duration, Duration)> {
    let body: &[u8] = if head.starts_with("GET") { b"" } else { br#"{"model":"gpt-5","input":"hi","stream":true}"# };
    let request =
        format!("{head}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    stream.write_all(request.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut seen = Vec::with_capacity(4096);
    let mut buffer = [0u8; 8192];
    let mut first = None;
    loop {
        let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buffer)).await??;
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buffer[..n]);
        if first.is_none()
            && let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n")
            && seen.len() > at + 4
        {
            first = Some(started.elapsed());
        }
    }
    if !seen.starts_with(b"HTTP/1.1 200") {
        return Err(format!("answered {:?}", String::from_utf8_lossy(&seen[..seen.len().min(200)])).into());
    }
    let total = started.elapsed();
    Ok((first.unwrap_or(total), total))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

async fn sequential(leg: &Leg, path: &str, count: usize) -> Result<(Vec<Duration>, Vec<Duration>)> {
    let mut firsts = Vec::with_capacity(count);
    let mut totals = Vec::with_capacity(count);
    for _ in 0..count {
        let (first, total) = leg.request(path).await?;
        firsts.push(first);
        totals.push(total);
    }
    firsts.sort();
    totals.sort();
    Ok((firsts, totals))
}

async fn burst(leg: &Leg, clients: usize, total: usize) -> Result<f64> {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..clients {
        let leg = leg.clone();
        let share = total / clients + usize::from(client < total % clients);
        tasks.spawn(async move {
            for _ in 0..share {
                leg.request("/v1/models").await?;
            }
            Ok::<(), Box<dyn Error + Send + Sync>>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}

async fn start_broker(
    dns: SocketAddr,
    certificate: &CertificateDer<'static>,
    socket: PathBuf,
    cancel: &CancellationToken,
) -> Result<CertificateDer<'static>> {
    let mut upstream = Settings::new([HOST])?;
    upstream.set_allow_cidrs(["127.0.0.0/8".parse()?])?;
    upstream.dial_allow = vec!["127.0.0.0/8".parse()?];
    let settings = BrokerSettings {
        routes: vec![Route::new(HOST)],
        credentials: vec![Credential {
            name: "OPENAI_API_KEY".into(),
            placeholder: placeholder(),
            value: Secret::new(KEY.into()),
            host: HOST.into(),
        }],
        budget: Budget::default(),
        limits: BrokerLimits::default(),
        upstream,
        extra_roots: vec![certificate.clone()],
    };
    let broker = Arc::new(Broker::new(settings, DnsResolver::new(&[dns])?, DirectDialer, Arc::new(NoJournal))?);
    let ca = {
        use rustls::pki_types::pem::PemObject as _;
        CertificateDer::from_pem_slice(broker.ca_pem().as_bytes())?
    };
    let listener = Listener::bind(&Endpoint::Unix(socket)).await?;
    tokio::spawn(serve(broker, Arc::new(listener), cancel.clone()));
    Ok(ca)
}

#[tokio::main]
async fn main() -> Result<()> {
    let requests = env_number("BENCH_REQUESTS", 1000);
    let clients = env_number("BENCH_CLIENTS", 16);
    let burst_total = env_number("BENCH_BURST", 4000);
    let brokers = env_number("BENCH_BROKERS", 200);

    let events: Vec<serde_json::Value> =
        (0..4).map(|n| json!({"type": "response.output_text.delta", "delta": n})).collect();
    let provider = FakeProvider::start(UPSTREAM, &[HOST], move |request| {
        if request.path.starts_with("/v1/responses") {
            // The first event at once, the rest 5 ms apart: a stream still being generated.
            Canned { pause: Duration::from_millis(5), ..Canned::sse(&events) }
        } else {
            Canned::json(200, &json!({"object": "list", "data": [{"id": "gpt-5"}]}))
        }
    })
    .await?;
    let dns = FakeDns::start("127.0.0.1:0".parse()?).await?;
    dns.answer(HOST, vec![Reply::Addresses(vec![UPSTREAM.ip()])]);
    let dir = std::env::temp_dir().join(format!("roundtable-broker-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let cancel = CancellationToken::new();
    let socket = dir.join("broker.sock");
    let ca = start_broker(dns.address(), &provider.identity.certificate, socket.clone(), &cancel).await?;

    let legs =
        [Leg::Direct(provider.identity.certificate.clone()), Leg::Broker(socket.clone()), Leg::Intercepted(socket, ca)];
    for leg in &legs {
        sequential(leg, "/v1/models", 50).await?;
    }
    println!("sequential requests ({requests} per leg, one TLS connection to the provider each)");
    println!("{:<16} {:>10} {:>10} {:>12} {:>12}", "leg", "p50 ms", "p99 ms", "req/s (seq)", "");
    for leg in &legs {
        let started = Instant::now();
        let (_, totals) = sequential(leg, "/v1/models", requests).await?;
        let rate = requests as f64 / started.elapsed().as_secs_f64();
        println!(
            "{:<16} {:>10.3} {:>10.3} {:>12.0}",
            leg.name(),
            ms(percentile(&totals, 0.5)),
            ms(percentile(&totals, 0.99)),
            rate
        );
    }
    println!("\nrequests per second, {clients} clients at once, {burst_total} requests per leg");
    for leg in &legs {
        println!("{:<16} {:>10.0} req/s", leg.name(), burst(leg, clients, burst_total).await?);
    }
    let streams = (requests / 4).max(20);
    println!("\nserver-sent events ({streams} streams per leg, 4 events 5 ms apart)");
    println!("{:<16} {:>18} {:>18} {:>14}", "leg", "first event p50", "first event p99", "whole p50");
    for leg in &legs {
        let (firsts, totals) = sequential(leg, "/v1/responses", streams).await?;
        println!(
            "{:<16} {:>15.3} ms {:>15.3} ms {:>11.3} ms",
            leg.name(),
            ms(percentile(&firsts, 0.5)),
            ms(percentile(&firsts, 0.99)),
            ms(percentile(&totals, 0.5))
        );
    }

    let before = resident_bytes();
    let building = Instant::now();
    for index in 0..brokers {
        start_broker(dns.address(), &provider.identity.certificate, dir.join(format!("idle-{index}.sock")), &cancel)
            .await?;
    }
    let built = building.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = resident_bytes();
    println!(
        "\nstarting a broker (its session CA and one leaf minted, bound, serving): {:.2} ms each",
        ms(built) / brokers as f64
    );
    println!(
        "\nidle brokers: {brokers} on their own sockets, resident memory +{:.1} MiB, {:.1} KiB each",
        (after.saturating_sub(before)) as f64 / 1048576.0,
        (after.saturating_sub(before)) as f64 / 1024.0 / brokers as f64
    );
    cancel.cancel();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
