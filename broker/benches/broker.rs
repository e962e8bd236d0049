//! Broker benchmark: one fake provider over TLS on loopback (127.0.0.201:443, a fresh certificate),
//! reached directly over TLS from the client (the baseline) and through the broker on its Unix
//! socket (the shape a session uses), side by side: sequential latency (p50, p99), requests per
//! second and latency with several clients at once, and time to the first server-sent event of a
//! stream. Both legs open one TLS connection to the provider per request (the fake closes after
//! each answer), each with one TLS client configuration kept for the whole run, as the broker
//! keeps its own (so both may resume sessions alike), and the difference is the broker's hop and
//! its checks; a third leg is a client that ignores its base URL, its `CONNECT` intercepted by
//! the broker with the session CA (one more TLS handshake per request). The legs take turns, a
//! round at a time, so drift on the machine hits them alike. Then the resident memory per open
//! connection: streams held open at once on each leg (the provider holds each after its first
//! event), the direct leg's figure being what the client and the provider's ends cost without the
//! broker; then the time to start a broker (with its session CA) and the resident memory of idle
//! brokers, each on its own socket. Prints figures; asserts nothing. Everything is loopback, in
//! this one process (its RSS is the figure).
//!
//! Environment (all optional): `BENCH_REQUESTS` (1000 sequential per leg), `BENCH_CLIENTS` (16),
//! `BENCH_BURST` (4000 requests per leg across the clients), `BENCH_HELD` (64 streams held open
//! per leg: the most a session may have open at once), `BENCH_BROKERS` (200).
//! `ROUNDTABLE_BENCH_SMOKE=1` makes every size tiny: CI runs it so (benches/smoke.sh), to show
//! the bench still runs to the end; any failed request fails it, in any run.

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roundtable_broker::{
    Broker, BrokerJournal, BrokerLimits, BrokerSettings, Budget, Credential, RequestLine, Route, Secret, serve,
};
use roundtable_gateway::{DirectDialer, DnsResolver, Endpoint, Listener, Settings};
use roundtable_net_fixtures::{Canned, FakeDns, FakeProvider, Reply, tls_connector};
use roundtable_specs::broker::placeholder_from;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::Notify;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

type Result<T, E = Box<dyn Error + Send + Sync>> = std::result::Result<T, E>;

const HOST: &str = "api.openai.com";
/// The provider's address; a child measuring held connections (below) runs its own on the next.
const UPSTREAM: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 201)), 443);
const CHILD_UPSTREAM: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 202)), 443);
const KEY: &str = "sk-bench-0123456789abcdefghijklmnopqrstuvwxyz";

struct NoJournal;

impl BrokerJournal for NoJournal {
    fn request(&self, _line: &RequestLine) {}
}

/// Rounds each figure's requests are split into, the legs taking turns.
const ROUNDS: usize = 5;
/// The path the fake provider holds open after the first event, until released.
const HELD_PATH: &str = "/v1/responses?held";

fn smoke() -> bool {
    std::env::var("ROUNDTABLE_BENCH_SMOKE").is_ok_and(|value| value == "1")
}

/// `name` from the environment, else `full`, or `tiny` in a smoke run.
fn env_number(name: &str, full: usize, tiny: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(if smoke() { tiny } else { full })
}

fn placeholder() -> String {
    placeholder_from(&[0x42; 32])
}

/// The connector of a client trusting `root`, offering ALPN `http/1.1` as the broker's own
/// upstream client does; made once per leg and kept, as a client keeps its configuration.
fn connector(root: &CertificateDer<'static>) -> Result<TlsConnector> {
    Ok(tls_connector(root, &[b"http/1.1"])?)
}

#[derive(Clone)]
enum Leg {
    /// The baseline: straight to the provider over TLS.
    Direct(TlsConnector, SocketAddr),
    Broker(PathBuf),
    /// A client that ignores its base URL: `CONNECT` on the broker's socket, then TLS with the
    /// session CA (trusted by this connector), then origin-form requests.
    Intercepted(PathBuf, TlsConnector),
}

impl Leg {
    fn name(&self) -> &'static str {
        match self {
            Leg::Direct(..) => "direct TLS",
            Leg::Broker(_) => "broker (unix)",
            Leg::Intercepted(..) => "intercepted",
        }
    }

    /// One request; returns (time to the first body byte, total).
    async fn request(&self, path: &str) -> Result<(Duration, Duration)> {
        let started = Instant::now();
        let mut stream = self.send(path).await?;
        exchange(&mut stream, started).await
    }

    /// Opens a connection the leg's way and sends one request for `path` on it.
    async fn send(&self, path: &str) -> Result<Box<dyn Stream>> {
        // The model list is a GET, a turn a POST, as the broker's endpoint list has them.
        let method = if path.starts_with("/v1/models") { "GET" } else { "POST" };
        let name = || ServerName::try_from(HOST).map_err(|error| format!("{HOST}: {error}"));
        let (mut stream, head): (Box<dyn Stream>, String) = match self {
            Leg::Direct(connector, provider) => {
                let tcp = TcpStream::connect(provider).await?;
                tcp.set_nodelay(true)?;
                let tls = connector.connect(name()?, tcp).await?;
                (Box::new(tls), format!("{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {KEY}\r\n"))
            }
            Leg::Broker(socket) => {
                let stream = UnixStream::connect(socket).await?;
                let head = format!(
                    "{method} /{HOST}{path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n",
                    placeholder()
                );
                (Box::new(stream), head)
            }
            Leg::Intercepted(socket, connector) => {
                let mut stream = UnixStream::connect(socket).await?;
                stream.write_all(format!("CONNECT {HOST}:443 HTTP/1.1\r\nHost: {HOST}:443\r\n\r\n").as_bytes()).await?;
                let answer = roundtable_net_fixtures::read_head(&mut stream).await;
                if !answer.starts_with("HTTP/1.1 200") {
                    return Err(format!("CONNECT answered {answer:?}").into());
                }
                let tls = connector.connect(name()?, stream).await?;
                let head =
                    format!("{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {}\r\n", placeholder());
                (Box::new(tls), head)
            }
        };
        let body: &[u8] = if method == "GET" { b"" } else { br#"{"model":"gpt-5","input":"hi","stream":true}"# };
        let request = format!(
            "{head}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        stream.write_all(body).await?;
        Ok(stream)
    }
}

/// A client's end of a connection: TCP with TLS, or a Unix socket, with or without TLS.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// Reads the answer to the request sent to its end: (time to the first body byte, total).
async fn exchange(stream: &mut (impl AsyncRead + Unpin + ?Sized), started: Instant) -> Result<(Duration, Duration)> {
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

/// One leg's figures over the rounds: time to the first body byte and to the end of each
/// request, and the time spent in all of them.
#[derive(Default)]
struct Samples {
    firsts: Vec<Duration>,
    totals: Vec<Duration>,
    elapsed: Duration,
}

impl Samples {
    fn sorted(mut self) -> Self {
        self.firsts.sort();
        self.totals.sort();
        self
    }

    fn per_second(&self) -> f64 {
        self.totals.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// `count` requests for `path` on each leg, one after the other, the legs taking turns a round
/// at a time.
async fn sequential(legs: &[Leg], path: &str, count: usize) -> Result<Vec<Samples>> {
    let mut samples: Vec<Samples> = legs.iter().map(|_| Samples::default()).collect();
    for round in 0..ROUNDS {
        let share = count / ROUNDS + usize::from(round < count % ROUNDS);
        for (leg, samples) in legs.iter().zip(&mut samples) {
            let started = Instant::now();
            for _ in 0..share {
                let (first, total) = leg.request(path).await?;
                samples.firsts.push(first);
                samples.totals.push(total);
            }
            samples.elapsed += started.elapsed();
        }
    }
    Ok(samples.into_iter().map(Samples::sorted).collect())
}

/// `total` requests on each leg from `clients` at once, the legs taking turns a round at a time.
async fn burst(legs: &[Leg], clients: usize, total: usize) -> Result<Vec<Samples>> {
    let mut samples: Vec<Samples> = legs.iter().map(|_| Samples::default()).collect();
    for round in 0..ROUNDS {
        let count = total / ROUNDS + usize::from(round < total % ROUNDS);
        for (leg, samples) in legs.iter().zip(&mut samples) {
            let started = Instant::now();
            let mut tasks = tokio::task::JoinSet::new();
            for client in 0..clients {
                let leg = leg.clone();
                let share = count / clients + usize::from(client < count % clients);
                tasks.spawn(async move {
                    let mut totals = Vec::with_capacity(share);
                    for _ in 0..share {
                        totals.push(leg.request("/v1/models").await?.1);
                    }
                    Ok::<_, Box<dyn Error + Send + Sync>>(totals)
                });
            }
            while let Some(joined) = tasks.join_next().await {
                samples.totals.extend(joined??);
            }
            samples.elapsed += started.elapsed();
        }
    }
    Ok(samples.into_iter().map(Samples::sorted).collect())
}

/// Opens `count` streams on `leg` at once and reads each to its first event; the provider holds
/// them there until `release`. Returns the open streams.
async fn hold(leg: &Leg, count: usize) -> Result<Vec<Box<dyn Stream>>> {
    let mut opening = tokio::task::JoinSet::new();
    for _ in 0..count {
        let leg = leg.clone();
        opening.spawn(async move {
            let mut stream = leg.send(HELD_PATH).await?;
            let mut seen = Vec::new();
            let mut buffer = [0u8; 4096];
            while !seen.windows(5).any(|window| window == b"data:") {
                let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buffer)).await??;
                if n == 0 {
                    let said = String::from_utf8_lossy(&seen[..seen.len().min(200)]).into_owned();
                    return Err(format!("closed before the first event: {said:?}").into());
                }
                seen.extend_from_slice(&buffer[..n]);
            }
            Ok::<_, Box<dyn Error + Send + Sync>>(stream)
        });
    }
    let mut streams = Vec::with_capacity(count);
    while let Some(joined) = opening.join_next().await {
        streams.push(joined??);
    }
    Ok(streams)
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

/// A provider, its DNS, one broker and the three legs to the provider.
struct Setup {
    provider: FakeProvider,
    dns: FakeDns,
    legs: [Leg; 3],
    /// Lets every stream the provider holds (`HELD_PATH`) go on.
    release: Arc<Notify>,
    dir: tempfile::TempDir,
    cancel: CancellationToken,
}

impl Setup {
    async fn start(upstream: SocketAddr) -> Result<Self> {
        let events: Vec<serde_json::Value> =
            (0..4).map(|n| json!({"type": "response.output_text.delta", "delta": n})).collect();
        let release = Arc::new(Notify::new());
        let gate = release.clone();
        let provider = FakeProvider::start(upstream, &[HOST], move |request| {
            if request.path.starts_with(HELD_PATH) {
                // Held after the first event until released: a stream the model is still writing.
                Canned { gate: Some(gate.clone()), ..Canned::sse(&events) }
            } else if request.path.starts_with("/v1/responses") {
                // The first event at once, the rest 5 ms apart: a stream still being generated.
                Canned { pause: Duration::from_millis(5), ..Canned::sse(&events) }
            } else {
                Canned::json(200, &json!({"object": "list", "data": [{"id": "gpt-5"}]}))
            }
        })
        .await?;
        let dns = FakeDns::start("127.0.0.1:0".parse()?).await?;
        dns.answer(HOST, vec![Reply::Addresses(vec![upstream.ip()])]);
        let dir = tempfile::tempdir()?;
        let cancel = CancellationToken::new();
        let socket = dir.path().join("broker.sock");
        let ca = start_broker(dns.address(), &provider.identity.certificate, socket.clone(), &cancel).await?;
        let legs = [
            Leg::Direct(connector(&provider.identity.certificate)?, upstream),
            Leg::Broker(socket.clone()),
            Leg::Intercepted(socket, connector(&ca)?),
        ];
        Ok(Self { provider, dns, legs, release, dir, cancel })
    }
}

/// The figures a held-connections child prints on its last line: RSS before and while held, in
/// bytes.
const HELD_LINE: &str = "held:";

/// In a child process of its own, so what the other legs and phases allocated and freed (which
/// the allocator keeps resident and hands out again) is not in the figure: holds `count` streams
/// open on leg `index` after a few warm-up requests, and prints the RSS before and while held.
async fn held_child(index: usize, count: usize) -> Result<()> {
    let setup = Setup::start(CHILD_UPSTREAM).await?;
    let leg = setup.legs.get(index).ok_or_else(|| format!("no leg {index}"))?;
    sequential(std::slice::from_ref(leg), "/v1/responses", ROUNDS).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = resident_bytes();
    let open = hold(leg, count).await?;
    // Let every end settle into its idle state before reading the memory.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = resident_bytes();
    setup.release.notify_waiters();
    drop(open);
    setup.cancel.cancel();
    println!("{HELD_LINE} {before} {during}");
    Ok(())
}

/// Runs [`held_child`] for leg `index` in a child process: RSS (before, held) in bytes.
fn held_in_child(index: usize, count: usize) -> Result<(u64, u64)> {
    let output = std::process::Command::new(std::env::current_exe()?)
        .args(["--held-child", &index.to_string(), &count.to_string()])
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let figures = stdout.lines().rev().find_map(|line| line.strip_prefix(HELD_LINE)).and_then(|rest| {
        let mut numbers = rest.split_whitespace().map(str::parse::<u64>);
        Some((numbers.next()?.ok()?, numbers.next()?.ok()?))
    });
    match figures {
        Some(figures) if output.status.success() => Ok(figures),
        _ => Err(format!(
            "the held-connections child for leg {index} failed ({}): {}{}",
            output.status,
            stdout,
            String::from_utf8_lossy(&output.stderr)
        )
        .into()),
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    roundtable_gateway::limits::raise_open_file_limit()?;
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|arg| arg == "--held-child") {
        let number = |offset: usize| args.get(at + offset).and_then(|arg| arg.parse().ok());
        let (Some(index), Some(count)) = (number(1), number(2)) else {
            return Err("--held-child takes a leg index and a count".into());
        };
        return held_child(index, count).await;
    }
    let requests = env_number("BENCH_REQUESTS", 1000, 20).max(ROUNDS);
    let clients = env_number("BENCH_CLIENTS", 16, 4).max(1);
    let burst_total = env_number("BENCH_BURST", 4000, 40).max(ROUNDS);
    let held = env_number("BENCH_HELD", 64, 8);
    let brokers = env_number("BENCH_BROKERS", 200, 5).max(1);

    let setup = Setup::start(UPSTREAM).await?;
    let legs = &setup.legs;
    // Untimed first requests, so caches, pools and allocators are warm.
    sequential(legs, "/v1/models", 50.min(requests)).await?;

    println!(
        "sequential requests ({requests} per leg in {ROUNDS} rounds, legs taking turns; one TLS connection to the provider each)"
    );
    println!("{:<16} {:>10} {:>10} {:>12}", "leg", "p50 ms", "p99 ms", "req/s (seq)");
    for (leg, samples) in legs.iter().zip(sequential(legs, "/v1/models", requests).await?) {
        println!(
            "{:<16} {:>10.3} {:>10.3} {:>12.0}",
            leg.name(),
            ms(percentile(&samples.totals, 0.5)),
            ms(percentile(&samples.totals, 0.99)),
            samples.per_second()
        );
    }

    println!("\n{clients} clients at once, {burst_total} requests per leg in {ROUNDS} rounds, legs taking turns");
    println!("{:<16} {:>10} {:>10} {:>12}", "leg", "p50 ms", "p99 ms", "req/s");
    for (leg, samples) in legs.iter().zip(burst(legs, clients, burst_total).await?) {
        println!(
            "{:<16} {:>10.3} {:>10.3} {:>12.0}",
            leg.name(),
            ms(percentile(&samples.totals, 0.5)),
            ms(percentile(&samples.totals, 0.99)),
            samples.per_second()
        );
    }

    let streams = (requests / 4).max(ROUNDS);
    println!("\nserver-sent events ({streams} streams per leg in {ROUNDS} rounds, 4 events 5 ms apart)");
    println!("{:<16} {:>18} {:>18} {:>14}", "leg", "first event p50", "first event p99", "whole p50");
    for (leg, samples) in legs.iter().zip(sequential(legs, "/v1/responses", streams).await?) {
        println!(
            "{:<16} {:>15.3} ms {:>15.3} ms {:>11.3} ms",
            leg.name(),
            ms(percentile(&samples.firsts, 0.5)),
            ms(percentile(&samples.firsts, 0.99)),
            ms(percentile(&samples.totals, 0.5))
        );
    }

    if held > 0 {
        println!(
            "\nopen connections: {held} streams per leg held open at once after their first event, each leg in a process of its own (its RSS: the client's, the broker's and the provider's ends)"
        );
        println!("{:<16} {:>12} {:>12} {:>14}", "leg", "RSS before", "RSS held", "KiB/connection");
        let mut per_connection = Vec::new();
        for (index, leg) in legs.iter().enumerate() {
            let (before, during) = held_in_child(index, held)?;
            let each = during.saturating_sub(before) as f64 / 1024.0 / held as f64;
            per_connection.push(each);
            println!(
                "{:<16} {:>8.1} MiB {:>8.1} MiB {:>14.1}",
                leg.name(),
                before as f64 / 1048576.0,
                during as f64 / 1048576.0,
                each
            );
        }
        println!(
            "the broker's own per open connection (broker (unix) − direct TLS): {:.1} KiB",
            per_connection[1] - per_connection[0]
        );
    }

    let before = resident_bytes();
    let building = Instant::now();
    for index in 0..brokers {
        let socket = setup.dir.path().join(format!("idle-{index}.sock"));
        start_broker(setup.dns.address(), &setup.provider.identity.certificate, socket, &setup.cancel).await?;
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
    setup.cancel.cancel();
    Ok(())
}
