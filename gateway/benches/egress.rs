//! Egress benchmark: `roundtable gateway serve` side by side with direct loopback and the CONNECT
//! proxies named in `BENCH_PROXIES` (Squid, started by benches/gateway.sh). The gateway runs twice:
//! on a TCP port, the shape Squid is compared in, and on a Unix socket, the shape a session uses
//! (its sandbox relays the agent's connections to the gateway's socket), and once more behind that
//! relay (`roundtable proxy`), the whole path of an agent's connection. Measures the
//! throughput of one large upstream → client transfer, tunnel setup latency over sequential
//! tunnels, and many tunnels held open at once (errors, resident memory per idle tunnel). Prints
//! figures; asserts nothing.
//!
//! Everything is loopback: a scripted DNS server on 127.0.0.1:53 (Squid only asks port 53)
//! answers `bench.roundtable.test` with 127.0.0.77, where a raw upstream reads the ClientHello and
//! then streams or echoes plain bytes, so TLS crypto cost does not hide proxy cost.
//!
//! Environment (all optional):
//! - `ROUNDTABLE_BENCH_SMOKE=1`: every size tiny (16 MiB, 2 repeats, 20 tunnels), the debug build
//!   by default, and any error (a failed transfer or tunnel, a mismatched ClientHello, an
//!   unreadable journal) fails the run: CI runs it so (benches/smoke.sh), to show it still works;
//! - `ROUNDTABLE_BIN`: the binary (default: the workspace's static release build, under
//!   `CARGO_TARGET_DIR` when set);
//! - `BENCH_PROXIES`: space-separated `NAME=IP:PORT@PID` of running CONNECT proxies;
//! - `BENCH_FORWARDERS`: the same for plain TCP forwarders to the upstream (no CONNECT, no
//!   policy: HAProxy splicing, started by benches/gateway.sh), what one extra hop costs a mature
//!   proxy;
//! - `BENCH_BYTES` (1 GiB), `BENCH_REPEATS` (5), `BENCH_SEQUENTIAL` (2000), `BENCH_WARMUP` (100),
//!   `BENCH_CONCURRENT` (1000), `BENCH_DNS` (127.0.0.1:53).

use std::collections::BTreeMap;
use std::error::Error;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use roundtable_gateway::Endpoint;
use roundtable_net_fixtures::{FakeDns, Reply, client_hello_for};
use rustix::process::{Pid, Signal, kill_process};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream, UnixStream};
use tokio::process::{Child, Command};
use tokio::task::JoinSet;
use tokio::time::timeout;

type Result<T, E = Box<dyn Error>> = std::result::Result<T, E>;

const HOST: &str = "bench.roundtable.test";
const UPSTREAM: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 77)), 443);
/// Read and write size of the bench's own client and upstream.
const IO_BUFFER: usize = 256 * 1024;
/// Bound on any one tunnel operation, so a stuck proxy shows as an error, not a hang.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// What the upstream does after the ClientHello: stream `BENCH_BYTES`, or echo.
const STREAM: u8 = 0;
const ECHO: u8 = 1;

#[tokio::main]
async fn main() -> Result<()> {
    let options = Options::from_env()?;
    roundtable_gateway::limits::raise_open_file_limit()?;
    let hello = Arc::new(client_hello_for(HOST));

    let dns = FakeDns::start(options.dns).await.map_err(|error| {
        format!("cannot serve DNS on {} ({error}); Squid only asks port 53: run as root", options.dns)
    })?;
    dns.answer(HOST, vec![Reply::Addresses(vec![UPSTREAM.ip()])]);
    let upstream = Upstream::start(hello.clone(), options.bytes).await?;

    let work = tempfile::tempdir()?;
    let journal = work.path().join("gateway.jsonl");
    let (mut gateway, listen) = start_gateway(&options.binary, dns.address(), "127.0.0.1:0", &journal).await?;
    let socket = work.path().join("gateway.sock");
    let unix_journal = work.path().join("gateway-unix.jsonl");
    let unix_listen = format!("unix:{}", socket.display());
    let (mut unix_gateway, _) = start_gateway(&options.binary, dns.address(), &unix_listen, &unix_journal).await?;

    // The relay gets a gateway of its own, so each journal's tunnel ids follow one target's phases.
    let relay_journal = work.path().join("gateway-behind-relay.jsonl");
    let relay_upstream = format!("unix:{}", work.path().join("gateway-behind-relay.sock").display());
    let (mut relay_gateway, _) = start_gateway(&options.binary, dns.address(), &relay_upstream, &relay_journal).await?;
    let (mut relay, relay_listen) = start_relay(&options.binary, &relay_upstream).await?;

    let mut targets = vec![Target { name: "direct".to_owned(), route: Route::Direct, pid: None, helper: None }];
    let listen: SocketAddr = listen.parse().map_err(|_| format!("the gateway listens on {listen:?}, not IP:PORT"))?;
    targets.push(Target { name: "gateway".to_owned(), route: Route::Proxy(listen), pid: gateway.id(), helper: None });
    targets.push(Target {
        name: "gateway (unix)".to_owned(),
        route: Route::Unix(socket),
        pid: unix_gateway.id(),
        helper: None,
    });
    targets.push(Target {
        name: "relay + gateway".to_owned(),
        route: Route::Proxy(relay_listen),
        pid: relay.id(),
        helper: relay_gateway.id(),
    });
    targets.extend(options.proxies.iter().cloned());

    println!(
        "egress bench: {} CPUs; upstream {UPSTREAM} (raw bytes after a {}-byte rustls ClientHello), DNS {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        hello.len(),
        dns.address()
    );
    println!("gateway: {} on {listen} and {unix_listen}", options.binary.display());
    println!(
        "relay + gateway: `roundtable proxy` on {relay_listen} → a gateway on {relay_upstream} (CPU: both; memory: the relay's)"
    );
    for target in &targets[2..] {
        if let Route::Proxy(address) | Route::Forward(address) = target.route {
            println!("{}: {address}, pid {}", target.name, target.pid.map_or("?".to_owned(), |pid| pid.to_string()));
        }
    }

    // === throughput ===
    upstream.set_mode(STREAM);
    let mut transfers: Vec<Vec<Transfer>> = vec![Vec::new(); targets.len()];
    for _ in 0..options.repeats {
        // Interleaved, so drift on the machine hits every target alike.
        for (index, target) in targets.iter().enumerate() {
            transfers[index].push(transfer(target, &hello, options.bytes).await);
        }
    }
    let throughput: Vec<Option<Summary>> = transfers.into_iter().map(summarize_transfers).collect();

    // === tunnel setup latency ===
    upstream.set_mode(ECHO);
    let mut latencies: Vec<Latency> = targets.iter().map(|_| Latency::default()).collect();
    for (target, latency) in targets.iter().zip(&mut latencies) {
        latency.warm_up(target, &hello, options.warmup, &dns).await;
    }
    // In rounds, targets taking turns, so drift on the machine hits every target alike.
    for round in 0..LATENCY_ROUNDS {
        let count = options.sequential / LATENCY_ROUNDS + usize::from(round < options.sequential % LATENCY_ROUNDS);
        for (target, latency) in targets.iter().zip(&mut latencies) {
            latency.measure(target, &hello, count, &dns).await;
        }
    }
    for latency in &mut latencies {
        latency.samples.sort();
    }

    // === tunnels held open at once ===
    let mut held = Vec::new();
    for target in targets.iter().filter(|target| target.pid.is_some()) {
        held.push((target.name.clone(), hold_tunnels(target, &hello, options.concurrent).await));
    }

    stop(&mut relay).await;
    stop(&mut gateway).await;
    stop(&mut unix_gateway).await;
    stop(&mut relay_gateway).await;
    let mismatches = upstream.mismatches.load(Ordering::Relaxed);

    // === report ===
    print_throughput(&targets, &throughput, &options);
    print_latency(&targets, &latencies, &options);
    print_held(&held, &options);
    for (target, latency) in targets.iter().zip(&latencies) {
        if let Some(first) = &latency.errors.first {
            println!("first setup error through {}: {first}", target.name);
        }
    }
    for (name, held) in &held {
        for (what, errors) in [("open", &held.errors), ("echo", &held.echo_errors)] {
            if let Some(first) = &errors.first {
                println!("first {what} error through {name}: {first}");
            }
        }
    }
    println!();
    println!("upstream: {mismatches} connections whose first bytes were not the ClientHello sent");
    let mut unparsable = 0;
    unparsable += print_journal("gateway", &journal, &options);
    unparsable += print_journal("gateway (unix)", &unix_journal, &options);
    unparsable += print_journal("gateway behind the relay", &relay_journal, &options);

    // A full run reports errors as figures (a proxy refusing the thousandth tunnel is one); a
    // smoke run exists to show the bench still works, so any error fails it.
    let errors = throughput.iter().flatten().filter(|summary| summary.median.error.is_some()).count()
        + latencies.iter().map(|latency| latency.errors.count).sum::<usize>()
        + held.iter().map(|(_, held)| held.errors.count + held.echo_errors.count).sum::<usize>()
        + usize::try_from(mismatches).unwrap_or(usize::MAX)
        + unparsable;
    if options.smoke && errors > 0 {
        return Err(format!("smoke run: {errors} errors (above)").into());
    }
    Ok(())
}

// === report ===

fn print_throughput(targets: &[Target], throughput: &[Option<Summary>], options: &Options) {
    println!();
    println!(
        "throughput: {} MiB upstream → client through one tunnel, median of {}",
        options.bytes >> 20,
        options.repeats
    );
    println!(
        "{:<18} {:>10} {:>13} {:>9} {:>16} {:>16} {:>11} {:>13}  errors",
        "target", "MB/s", "min-max", "× direct", "proxy CPU s/GiB", "bench CPU s/GiB", "waiting %", "runs/MiB"
    );
    let direct =
        throughput[0].as_ref().filter(|summary| summary.median.error.is_none()).map(|summary| summary.median.rate());
    for (target, summary) in targets.iter().zip(throughput) {
        let Some(Summary { median: transfer, slowest, fastest }) = summary else { continue };
        let ratio = direct.map_or("-".to_owned(), |direct| format!("{:.2}", transfer.rate() / direct));
        let per_gib = |cpu: Option<Duration>| {
            cpu.map_or("-".to_owned(), |cpu| format!("{:.2}", cpu.as_secs_f64() / (options.bytes as f64 / GIB)))
        };
        let share = |scheduled: Option<Scheduled>| {
            scheduled.map_or("-".to_owned(), |scheduled| {
                format!("{:.0}", 100.0 * scheduled.waited.as_secs_f64() / transfer.elapsed.as_secs_f64().max(1e-9))
            })
        };
        let waiting = format!("{} / {}", share(transfer.bench), share(transfer.proxy));
        let per_mib = |scheduled: Option<Scheduled>| {
            scheduled.map_or("-".to_owned(), |scheduled| {
                format!("{:.1}", scheduled.runs as f64 / (transfer.bytes as f64 / MIB))
            })
        };
        let runs = format!("{} / {}", per_mib(transfer.bench), per_mib(transfer.proxy));
        println!(
            "{:<18} {:>10.0} {:>13} {:>9} {:>16} {:>16} {:>11} {:>13}  {}",
            target.name,
            transfer.rate() / 1e6,
            format!("{:.0}-{:.0}", slowest / 1e6, fastest / 1e6),
            ratio,
            per_gib(transfer.proxy.map(|proxy| proxy.cpu)),
            per_gib(transfer.bench.map(|bench| bench.cpu)),
            waiting,
            runs,
            transfer.error.as_deref().unwrap_or("0")
        );
    }
    println!(
        "(bench CPU: this process's client and upstream, and the kernel work charged to them; with the proxy's, the whole transfer's CPU)"
    );
    println!(
        "(waiting %: time the bench's / the proxy's threads were runnable but had no CPU, summed over threads, as a share of the transfer's time)"
    );
    println!(
        "(runs/MiB: times the bench's / the proxy's threads were put on a CPU, about once per wakeup, per MiB carried)"
    );
}

fn print_latency(targets: &[Target], latencies: &[Latency], options: &Options) {
    println!();
    println!(
        "tunnel setup: {} sequential tunnels each ({} rounds, targets taking turns) after {} warm-up; TCP connect → CONNECT → 200 → ClientHello → first upstream byte",
        options.sequential, LATENCY_ROUNDS, options.warmup
    );
    println!(
        "{:<18} {:>8} {:>8} {:>8} {:>8} {:>12} {:>12} {:>7}",
        "target", "p50 ms", "p99 ms", "mean ms", "max ms", "CPU µs/tun", "DNS q/tun", "errors"
    );
    for (target, latency) in targets.iter().zip(latencies) {
        println!(
            "{:<18} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>12} {:>12.2} {:>7}",
            target.name,
            ms(latency.percentile(0.50)),
            ms(latency.percentile(0.99)),
            ms(latency.mean()),
            ms(latency.percentile(1.0)),
            latency
                .proxy_cpu
                .map_or("-".to_owned(), |cpu| format!("{:.0}", micros(cpu) / latency.samples.len() as f64)),
            latency.lookups as f64 / (latency.samples.len() + options.warmup) as f64,
            latency.errors.count,
        );
    }
}

fn print_held(held: &[(String, Held)], options: &Options) {
    println!();
    println!("held open: {} tunnels opened at once, held idle, then each carries an echo", options.concurrent);
    println!(
        "{:<18} {:>6} {:>6} {:>8} {:>9} {:>9} {:>11} {:>11} {:>11} {:>8} {:>9} {:>11}",
        "target",
        "open",
        "errors",
        "all s",
        "p50 ms",
        "max ms",
        "RSS before",
        "RSS held",
        "RSS after",
        "KiB/tun",
        "SYN drops",
        "echo errors"
    );
    for (name, held) in held {
        let per_tunnel = match (held.rss_before, held.rss_held) {
            (Some(before), Some(during)) if held.opened > 0 => {
                format!("{:.1}", (during as f64 - before as f64) / held.opened as f64)
            }
            _ => "-".to_owned(),
        };
        println!(
            "{:<18} {:>6} {:>6} {:>8.2} {:>9.1} {:>9.1} {:>11} {:>11} {:>11} {:>8} {:>9} {:>11}",
            name,
            held.opened,
            held.errors.count,
            held.setup.as_secs_f64(),
            ms(held.median_open),
            ms(held.slowest_open),
            mib(held.rss_before),
            mib(held.rss_held),
            mib(held.rss_after),
            per_tunnel,
            held.listen_drops.map_or("-".to_owned(), |drops| drops.to_string()),
            held.echo_errors.count,
        );
    }
}

/// The gateway's decision and close lines, counted, and its own DNS and dial times per phase;
/// returns how many lines did not parse (an unreadable journal counts as one).
fn print_journal(name: &str, journal: &Path, options: &Options) -> usize {
    // Tunnel ids follow the order the gateway accepted them in: the phases above, in turn.
    let repeats = options.repeats as u64;
    let latency_start = repeats + options.warmup as u64 + 1;
    let held_start = latency_start + options.sequential as u64;
    let phases = [
        ("throughput", 1..=repeats),
        ("setup latency", latency_start..=held_start - 1),
        ("held open", held_start..=held_start + options.concurrent as u64 - 1),
    ];
    let (lines, unparsable) = summarize_journal(journal, &phases);
    let mut lines = lines.into_iter();
    println!("{name} journal: {}", lines.next().unwrap_or_default());
    for line in lines {
        println!("  {name}'s own times, {line}");
    }
    unparsable
}

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("-".to_owned(), |kib| format!("{:.1} MiB", kib as f64 / 1024.0))
}

// === options ===

struct Options {
    /// `ROUNDTABLE_BENCH_SMOKE=1`: tiny sizes, and any error fails the run.
    smoke: bool,
    binary: PathBuf,
    dns: SocketAddr,
    bytes: u64,
    repeats: usize,
    sequential: usize,
    warmup: usize,
    concurrent: usize,
    proxies: Vec<Target>,
}

impl Options {
    fn from_env() -> Result<Self> {
        let smoke = std::env::var("ROUNDTABLE_BENCH_SMOKE").is_ok_and(|value| value == "1");
        // Full runs measure the release build; a smoke run only shows the bench works, and the
        // debug build is the one CI has.
        let (profile, build) = if smoke { ("debug", "") } else { ("release", " --release") };
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"), PathBuf::from);
        let default_binary = target.join("x86_64-unknown-linux-gnu").join(profile).join("roundtable");
        let binary = std::env::var_os("ROUNDTABLE_BIN").map_or(default_binary, PathBuf::from);
        if !binary.is_file() {
            return Err(format!(
                "{} not found: run `cargo build -p roundtable{build}` or set ROUNDTABLE_BIN",
                binary.display()
            )
            .into());
        }
        let size = |full, tiny| if smoke { tiny } else { full };
        let mut proxies = Vec::new();
        for entry in std::env::var("BENCH_PROXIES").unwrap_or_default().split_whitespace() {
            proxies.push(Target::parse(entry, Route::Proxy)?);
        }
        for entry in std::env::var("BENCH_FORWARDERS").unwrap_or_default().split_whitespace() {
            proxies.push(Target::parse(entry, Route::Forward)?);
        }
        Ok(Self {
            smoke,
            binary,
            dns: env_or("BENCH_DNS", SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 53))?,
            bytes: env_or("BENCH_BYTES", if smoke { 16u64 << 20 } else { 1u64 << 30 })?,
            repeats: env_or("BENCH_REPEATS", size(5usize, 2))?.max(1),
            sequential: env_or("BENCH_SEQUENTIAL", size(2000usize, 20))?.max(1),
            warmup: env_or("BENCH_WARMUP", size(100, 5))?,
            concurrent: env_or("BENCH_CONCURRENT", size(1000, 20))?,
            proxies,
        })
    }
}

fn env_or<T: FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(text) => text.trim().parse().map_err(|_| format!("{name}={text:?} does not parse").into()),
        Err(_) => Ok(default),
    }
}

// === targets and tunnels ===

#[derive(Clone)]
enum Route {
    /// Straight to the upstream, no proxy: the baseline.
    Direct,
    /// Through a CONNECT proxy listening here.
    Proxy(SocketAddr),
    /// Through a CONNECT proxy listening on this Unix socket.
    Unix(PathBuf),
    /// Through a plain TCP forwarder to the upstream listening here: no CONNECT.
    Forward(SocketAddr),
}

#[derive(Clone)]
struct Target {
    name: String,
    route: Route,
    /// The proxy's process, for its CPU time and resident memory.
    pid: Option<u32>,
    /// Another process the tunnels pass through (behind the relay, the gateway), for CPU time.
    helper: Option<u32>,
}

impl Target {
    /// `NAME=IP:PORT@PID`, reached by `route`.
    fn parse(entry: &str, route: fn(SocketAddr) -> Route) -> Result<Self> {
        let bad = || format!("the bench's entry {entry:?} is not NAME=IP:PORT@PID");
        let (name, rest) = entry.split_once('=').ok_or_else(bad)?;
        let (address, pid) = rest.rsplit_once('@').ok_or_else(bad)?;
        Ok(Self {
            name: name.to_owned(),
            route: route(address.parse().map_err(|_| bad())?),
            pid: Some(pid.parse().map_err(|_| bad())?),
            helper: None,
        })
    }

    /// What the scheduler counted for the proxy's processes so far.
    fn scheduled(&self) -> Option<Scheduled> {
        let own = Scheduled::of(self.pid?)?;
        Some(own.plus(self.helper.and_then(Scheduled::of).unwrap_or_default()))
    }
}

/// A client's end of a tunnel: TCP, or a Unix socket to a proxy.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// Opens a tunnel to the upstream and sends the ClientHello, as a client would: through a proxy,
/// CONNECT first and the ClientHello only after the `200`.
async fn open(route: &Route, hello: &[u8]) -> io::Result<Box<dyn Stream>> {
    let connect_tcp = |address| async move {
        let stream = TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        io::Result::Ok(stream)
    };
    let mut stream: Box<dyn Stream> = match route {
        Route::Direct => Box::new(connect_tcp(UPSTREAM).await?),
        Route::Proxy(address) | Route::Forward(address) => Box::new(connect_tcp(*address).await?),
        Route::Unix(path) => Box::new(UnixStream::connect(path).await?),
    };
    if matches!(route, Route::Proxy(_) | Route::Unix(_)) {
        let head = format!("CONNECT {HOST}:443 HTTP/1.1\r\nHost: {HOST}:443\r\n\r\n");
        stream.write_all(head.as_bytes()).await?;
        read_established(&mut stream).await?;
    }
    stream.write_all(hello).await?;
    Ok(stream)
}

/// Reads the proxy's answer to CONNECT up to its blank line; anything but `200` is an error.
async fn read_established(stream: &mut (impl AsyncRead + Unpin + ?Sized)) -> io::Result<()> {
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        if head.len() > 8192 {
            return Err(io::Error::other("the proxy's answer head is over 8 KiB"));
        }
        match stream.read(&mut chunk).await? {
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the proxy closed before answering")),
            read => head.extend_from_slice(&chunk[..read]),
        }
    }
    let status = head.split(|byte| *byte == b'\r').next().unwrap_or_default();
    let status = String::from_utf8_lossy(status);
    match status.split_whitespace().nth(1) {
        Some("200") => Ok(()),
        _ => Err(io::Error::other(format!("the proxy answered {status:?}"))),
    }
}

/// Errors of one kind: how many, and the first one's text.
#[derive(Default)]
struct Errors {
    count: usize,
    first: Option<String>,
}

impl Errors {
    fn add(&mut self, error: impl std::fmt::Display) {
        self.count += 1;
        self.first.get_or_insert_with(|| error.to_string());
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what}: no progress within {STEP_TIMEOUT:?}"))
}

// === throughput ===

#[derive(Clone)]
struct Transfer {
    bytes: u64,
    elapsed: Duration,
    proxy: Option<Scheduled>,
    /// This process's (client and upstream) meanwhile.
    bench: Option<Scheduled>,
    error: Option<String>,
}

impl Transfer {
    /// Bytes per second.
    fn rate(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// One transfer of `bytes` from the upstream to the client through `target`, timed from the sent
/// ClientHello to the end of the stream.
async fn transfer(target: &Target, hello: &[u8], bytes: u64) -> Transfer {
    let proxy_before = target.scheduled();
    let bench_before = Scheduled::of(std::process::id());
    let mut result = Transfer { bytes: 0, elapsed: Duration::ZERO, proxy: None, bench: None, error: None };
    let outcome = async {
        let mut stream = timeout(STEP_TIMEOUT, open(&target.route, hello)).await.map_err(|_| timed_out("open"))??;
        let started = Instant::now();
        let mut buffer = vec![0u8; IO_BUFFER];
        loop {
            match timeout(STEP_TIMEOUT, stream.read(&mut buffer)).await.map_err(|_| timed_out("read"))?? {
                0 => break,
                read => result.bytes += read as u64,
            }
        }
        result.elapsed = started.elapsed();
        io::Result::Ok(())
    };
    if let Err(error) = outcome.await {
        result.error = Some(error.to_string());
    } else if result.bytes != bytes {
        result.error = Some(format!("{} of {bytes} bytes arrived", result.bytes));
    }
    let spent = |before: Option<Scheduled>, after: Option<Scheduled>| Some(after?.since(before?));
    result.proxy = spent(proxy_before, target.scheduled());
    result.bench = spent(bench_before, Scheduled::of(std::process::id()));
    result
}

/// The repeats of one target's transfer.
struct Summary {
    /// By rate; a failed transfer instead, if any failed.
    median: Transfer,
    /// Bytes per second.
    slowest: f64,
    fastest: f64,
}

fn summarize_transfers(mut transfers: Vec<Transfer>) -> Option<Summary> {
    transfers.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let (slowest, fastest) = (transfers.first()?.rate(), transfers.last()?.rate());
    let failed = transfers.iter().find(|transfer| transfer.error.is_some());
    let median = failed.or(transfers.get(transfers.len() / 2))?.clone();
    Some(Summary { median, slowest, fastest })
}

// === setup latency ===

/// Rounds the sequential tunnels are split into.
const LATENCY_ROUNDS: usize = 10;

#[derive(Default)]
struct Latency {
    /// Sorted once every round is done.
    samples: Vec<Duration>,
    errors: Errors,
    proxy_cpu: Option<Duration>,
    /// DNS lookups of the bench host during the warm-up and the measured tunnels.
    lookups: usize,
}

impl Latency {
    fn percentile(&self, fraction: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((fraction * self.samples.len() as f64).ceil() as usize).clamp(1, self.samples.len());
        self.samples[rank - 1]
    }

    fn mean(&self) -> Duration {
        let total: Duration = self.samples.iter().sum();
        total / u32::try_from(self.samples.len().max(1)).unwrap_or(u32::MAX)
    }

    /// Untimed tunnels first, so caches, pools and allocators are warm.
    async fn warm_up(&mut self, target: &Target, hello: &[u8], count: usize, dns: &FakeDns) {
        let lookups_before = dns.lookups(HOST);
        for _ in 0..count {
            if let Err(error) = one_tunnel(&target.route, hello).await {
                self.errors.add(format!("warm-up: {error}"));
            }
        }
        self.lookups += dns.lookups(HOST) - lookups_before;
    }

    /// `count` tunnels one after the other, each timed from the TCP connect to the first byte the
    /// upstream sends back, then closed both ways before the next starts.
    async fn measure(&mut self, target: &Target, hello: &[u8], count: usize, dns: &FakeDns) {
        let lookups_before = dns.lookups(HOST);
        let cpu_before = target.scheduled().map(|scheduled| scheduled.cpu);
        for _ in 0..count {
            match one_tunnel(&target.route, hello).await {
                Ok(elapsed) => self.samples.push(elapsed),
                Err(error) => self.errors.add(error),
            }
        }
        if let (Some(before), Some(after)) = (cpu_before, target.scheduled().map(|scheduled| scheduled.cpu)) {
            *self.proxy_cpu.get_or_insert_default() += after.saturating_sub(before);
        }
        self.lookups += dns.lookups(HOST) - lookups_before;
    }
}

async fn one_tunnel(route: &Route, hello: &[u8]) -> io::Result<Duration> {
    let started = Instant::now();
    let mut stream = timeout(STEP_TIMEOUT, open(route, hello)).await.map_err(|_| timed_out("open"))??;
    let mut echoed = vec![0u8; hello.len()];
    timeout(STEP_TIMEOUT, stream.read_exact(&mut echoed[..1])).await.map_err(|_| timed_out("first byte"))??;
    let elapsed = started.elapsed();
    // Untimed: the rest of the echo, then a clean close both ways.
    timeout(STEP_TIMEOUT, async {
        stream.read_exact(&mut echoed[1..]).await?;
        if echoed != hello {
            return Err(io::Error::other("the echoed ClientHello differs"));
        }
        stream.shutdown().await?;
        let mut rest = [0u8; 64];
        while stream.read(&mut rest).await? > 0 {}
        Ok(())
    })
    .await
    .map_err(|_| timed_out("close"))??;
    Ok(elapsed)
}

// === tunnels held open ===

struct Held {
    opened: usize,
    errors: Errors,
    /// From the first connect to the last tunnel established.
    setup: Duration,
    /// Of one tunnel, from its connect to the echoed ClientHello.
    median_open: Duration,
    slowest_open: Duration,
    /// SYNs dropped by full accept queues meanwhile (any listener: the proxy's or the upstream's).
    listen_drops: Option<u64>,
    echo_errors: Errors,
    /// VmRSS in KiB.
    rss_before: Option<u64>,
    rss_held: Option<u64>,
    rss_after: Option<u64>,
}

/// Opens `count` tunnels at once, holds them idle, reads the proxy's memory, then checks every one
/// still carries bytes and closes them all.
async fn hold_tunnels(target: &Target, hello: &Arc<Vec<u8>>, count: usize) -> Held {
    let pid = target.pid;
    let drops_before = listen_drops();
    let rss_before = pid.and_then(rss_kib);
    let started = Instant::now();
    let mut opening = JoinSet::new();
    for _ in 0..count {
        let route = target.route.clone();
        let hello = hello.clone();
        opening.spawn(async move {
            let started = Instant::now();
            timeout(STEP_TIMEOUT, async {
                let mut stream = open(&route, &hello).await?;
                let mut echoed = vec![0u8; hello.len()];
                stream.read_exact(&mut echoed).await?;
                io::Result::Ok((stream, started.elapsed()))
            })
            .await
            .map_err(|_| timed_out("open"))?
        });
    }
    let mut streams = Vec::with_capacity(count);
    let mut open_times = Vec::with_capacity(count);
    let mut errors = Errors::default();
    while let Some(joined) = opening.join_next().await {
        match joined {
            Ok(Ok((stream, elapsed))) => {
                streams.push(stream);
                open_times.push(elapsed);
            }
            Ok(Err(error)) => errors.add(error),
            Err(error) => errors.add(error),
        }
    }
    let setup = started.elapsed();
    let listen_drops = listen_drops().zip(drops_before).map(|(after, before)| after.saturating_sub(before));
    open_times.sort();
    let slowest_open = open_times.last().copied().unwrap_or_default();
    let median_open = open_times.get(open_times.len() / 2).copied().unwrap_or_default();
    // Let the proxy settle into its idle state before reading its memory.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_held = pid.and_then(rss_kib);
    let opened = streams.len();

    let mut echoing = JoinSet::new();
    for mut stream in streams {
        echoing.spawn(async move {
            timeout(STEP_TIMEOUT, async {
                stream.write_all(b"ping").await?;
                let mut pong = [0u8; 4];
                stream.read_exact(&mut pong).await?;
                if &pong != b"ping" {
                    return Err(io::Error::other("the echo differs"));
                }
                stream.shutdown().await?;
                let mut rest = [0u8; 64];
                while stream.read(&mut rest).await? > 0 {}
                Ok(())
            })
            .await
            .map_err(|_| timed_out("echo"))?
        });
    }
    let mut echo_errors = Errors::default();
    while let Some(joined) = echoing.join_next().await {
        match joined {
            Ok(Ok(())) => {}
            Ok(Err(error)) => echo_errors.add(error),
            Err(error) => echo_errors.add(error),
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after = pid.and_then(rss_kib);
    Held {
        opened,
        errors,
        setup,
        median_open,
        slowest_open,
        listen_drops,
        echo_errors,
        rss_before,
        rss_held,
        rss_after,
    }
}

// === the upstream ===

struct Upstream {
    mode: Arc<AtomicU8>,
    /// Connections whose first bytes were not the ClientHello the clients sent.
    mismatches: Arc<AtomicU64>,
}

impl Upstream {
    async fn start(hello: Arc<Vec<u8>>, bytes: u64) -> io::Result<Self> {
        // A deep accept queue, so a proxy dialing a thousand tunnels at once is not slowed here.
        let socket = TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind(UPSTREAM)?;
        let listener = socket.listen(4096)?;
        let mode = Arc::new(AtomicU8::new(STREAM));
        let mismatches = Arc::new(AtomicU64::new(0));
        let (task_mode, task_mismatches) = (mode.clone(), mismatches.clone());
        tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let mode = task_mode.load(Ordering::Relaxed);
                let (hello, mismatches) = (hello.clone(), task_mismatches.clone());
                tokio::spawn(async move {
                    let _ = serve_upstream(stream, mode, &hello, bytes, &mismatches).await;
                });
            }
        });
        Ok(Self { mode, mismatches })
    }

    fn set_mode(&self, mode: u8) {
        self.mode.store(mode, Ordering::Relaxed);
    }
}

async fn serve_upstream(
    mut stream: TcpStream,
    mode: u8,
    hello: &[u8],
    bytes: u64,
    mismatches: &AtomicU64,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut received = vec![0u8; hello.len()];
    stream.read_exact(&mut received).await?;
    if received != hello {
        mismatches.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    if mode == STREAM {
        let chunk = vec![0x5a_u8; IO_BUFFER];
        let mut left = bytes;
        while left > 0 {
            let length = usize::try_from(left).unwrap_or(usize::MAX).min(chunk.len());
            stream.write_all(&chunk[..length]).await?;
            left -= length as u64;
        }
        stream.shutdown().await?;
        let mut rest = [0u8; 64];
        while stream.read(&mut rest).await? > 0 {}
    } else {
        stream.write_all(&received).await?;
        let (mut reader, mut writer) = stream.split();
        tokio::io::copy(&mut reader, &mut writer).await?;
        writer.shutdown().await?;
    }
    Ok(())
}

// === the gateway process ===

/// Starts `roundtable gateway serve` listening on `listen` (a loopback port or a Unix socket), its
/// decision lines to `journal`; returns once it says where it listens.
async fn start_gateway(binary: &Path, dns: SocketAddr, listen: &str, journal: &Path) -> Result<(Child, String)> {
    let mut child = Command::new(binary)
        .args(["gateway", "serve", "--listen", listen, "--allow-host", HOST])
        .args(["--resolver", &dns.to_string()])
        .args(["--allow-cidr", "127.0.0.0/8", "--gateway-dial-allow", "127.0.0.0/8"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(journal)?)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stderr = child.stderr.take().ok_or("the gateway's stderr is not piped")?;
    let mut lines = BufReader::new(stderr).lines();
    let listen = timeout(Duration::from_secs(10), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.strip_prefix("roundtable gateway: listening on ") {
                return Ok(rest.split(';').next().unwrap_or_default().to_owned());
            }
            eprintln!("gateway: {line}");
        }
        Err::<String, Box<dyn Error>>("the gateway exited before listening".into())
    })
    .await
    .map_err(|_| "the gateway did not say it listens within 10 s")??;
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("gateway: {line}");
        }
    });
    Ok((child, listen))
}

/// Starts `roundtable proxy`, the sandbox's relay, on a free loopback port, forwarding to the
/// gateway at `upstream`; returns once it says where it listens.
async fn start_relay(binary: &Path, upstream: &str) -> Result<(Child, SocketAddr)> {
    let mut child = Command::new(binary)
        .args(["proxy", "--listen", "127.0.0.1:0", "--upstream", upstream])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("the relay's stdout is not piped")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = timeout(Duration::from_secs(10), lines.next_line())
        .await
        .map_err(|_| "the relay did not say it listens within 10 s")??
        .ok_or("the relay exited before listening")?;
    // Read with the parser that belongs to the line's writer, so a reworded line cannot leave
    // this bench behind.
    match roundtable_gateway::forward::ready_listeners(&line).as_deref() {
        Some([Endpoint::Tcp(address)]) => Ok((child, *address)),
        _ => Err(format!("unexpected relay line {line:?}").into()),
    }
}

/// Stops the gateway as an operator would (SIGTERM), so its close lines are written.
async fn stop(child: &mut Child) {
    if let Some(pid) = child.id().and_then(|pid| Pid::from_raw(i32::try_from(pid).ok()?)) {
        let _ = kill_process(pid, Signal::TERM);
    }
    if timeout(Duration::from_secs(5), child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// Counts the journal's decisions and closes by outcome, and gives the gateway's own DNS and
/// dial times (`dns_ms`, `connect_ms`) per phase, phases being ranges of tunnel ids; with the
/// count of lines that did not parse.
fn summarize_journal(path: &Path, phases: &[(&str, RangeInclusive<u64>)]) -> (Vec<String>, usize) {
    let Ok(text) = std::fs::read_to_string(path) else { return (vec!["unreadable".to_owned()], 1) };
    let mut unparsable = 0;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut times: Vec<[Vec<f64>; 2]> = vec![[Vec::new(), Vec::new()]; phases.len()];
    for line in text.lines() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            *counts.entry("unparsable line".to_owned()).or_default() += 1;
            unparsable += 1;
            continue;
        };
        let field = |name: &str| value.get(name).and_then(serde_json::Value::as_str).unwrap_or("?").to_owned();
        let number = |name: &str| value.get(name).and_then(serde_json::Value::as_f64);
        let id = value.get("id").and_then(serde_json::Value::as_u64).unwrap_or(0);
        if let Some(phase) = phases.iter().position(|(_, ids)| ids.contains(&id)) {
            times[phase][0].extend(number("dns_ms"));
            times[phase][1].extend(number("connect_ms"));
        }
        let key = match field("event").as_str() {
            "decision" => format!("decision {} {}", field("decision"), field("reason")),
            "close" => format!("close {}", field("close_reason")),
            other => other.to_owned(),
        };
        *counts.entry(key).or_default() += 1;
    }
    let mut lines = vec![counts.iter().map(|(key, count)| format!("{key}: {count}")).collect::<Vec<_>>().join(", ")];
    for ((phase, _), times) in phases.iter().zip(times) {
        if times[0].is_empty() {
            continue;
        }
        let mut line = format!("{phase}:");
        for (name, mut values) in ["dns_ms", "connect_ms"].into_iter().zip(times) {
            values.sort_by(f64::total_cmp);
            if let (Some(median), Some(p99)) = (values.get(values.len() / 2), values.get(values.len() * 99 / 100)) {
                line.push_str(&format!(" {name} p50 {median:.3} p99 {p99:.3} max {:.3};", values[values.len() - 1]));
            }
        }
        lines.push(line);
    }
    (lines, unparsable)
}

// === /proc ===

/// Resident memory in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `TcpExt: ListenDrops` of this network namespace: SYNs dropped because an accept queue was full.
fn listen_drops() -> Option<u64> {
    let netstat = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut lines = netstat.lines().filter(|line| line.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let index = names.split_whitespace().position(|name| name == "ListenDrops")?;
    values.split_whitespace().nth(index)?.parse().ok()
}

/// What the scheduler counted for the threads of a process (`/proc/PID/task/TID/schedstat`).
#[derive(Clone, Copy, Default)]
struct Scheduled {
    /// Time on a CPU.
    cpu: Duration,
    /// Time runnable but waiting for a CPU: what a thread loses when the machine has too few.
    waited: Duration,
    /// Times a thread was put on a CPU: about once per wakeup.
    runs: u64,
}

impl Scheduled {
    fn of(pid: u32) -> Option<Self> {
        let mut total = Self::default();
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
            // A thread that ended meanwhile took its counts with it.
            let Ok(schedstat) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
            let mut fields = schedstat.split_whitespace().map(|field| field.parse::<u64>().unwrap_or(0));
            total.cpu += Duration::from_nanos(fields.next().unwrap_or_default());
            total.waited += Duration::from_nanos(fields.next().unwrap_or_default());
            total.runs += fields.next().unwrap_or_default();
        }
        Some(total)
    }

    fn plus(self, other: Self) -> Self {
        Self { cpu: self.cpu + other.cpu, waited: self.waited + other.waited, runs: self.runs + other.runs }
    }

    fn since(self, before: Self) -> Self {
        Self {
            cpu: self.cpu.saturating_sub(before.cpu),
            waited: self.waited.saturating_sub(before.waited),
            runs: self.runs.saturating_sub(before.runs),
        }
    }
}
