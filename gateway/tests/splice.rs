//! The splice of allowed tunnels on loopback, in the kernel and with copying forced, from a TCP
//! and from a unix-socket client: 64 MiB each way arrive byte for byte with their counts on the
//! close line, half-closes pass through, an idle tunnel still closes. Whether a tunnel is spliced
//! in the kernel is read off this process's open pipes (a pair per direction while it lasts), so
//! the tests of this binary run one at a time and apart from tests/tunnel.rs.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roundtable_gateway::{
    Close, CloseReason, Decision, DirectDialer, DnsResolver, Endpoint, Gateway, Journal, Listener, Settings,
    SplicePath, serve,
};
use roundtable_net_fixtures::{FakeDns, Reply, client_hello_for};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio_util::sync::CancellationToken;

const HOST: &str = "splice.roundtable.test";
const BULK: usize = 64 << 20;
/// Bound on any one step, so a stuck tunnel fails the test instead of hanging it.
const STEP: Duration = Duration::from_secs(60);

/// Pipe counts are per process: one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A loopback address of this binary's own per upstream: 127.0.0.10 upwards.
fn own_address() -> Ipv4Addr {
    static NEXT: AtomicU8 = AtomicU8::new(10);
    Ipv4Addr::new(127, 0, 0, NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Pipes this process holds open.
fn open_pipes() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(Result::ok)
        .filter(|entry| std::fs::read_link(entry.path()).is_ok_and(|to| to.to_string_lossy().starts_with("pipe:")))
        .count()
}

/// Pipes a tunnel holds while it lasts: a pair (two descriptors) per direction in the kernel.
fn pipes_held(path: SplicePath) -> usize {
    match path {
        SplicePath::Kernel => 4,
        SplicePath::Copy => 0,
    }
}

#[derive(Default)]
struct MemoryJournal {
    closes: Mutex<Vec<Close>>,
}

impl Journal for MemoryJournal {
    fn decision(&self, _: &Decision) {}

    fn close(&self, close: &Close) {
        self.closes.lock().expect("journal").push(close.clone());
    }
}

#[derive(Debug, Clone, Copy)]
enum Front {
    Tcp,
    Unix,
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// A gateway for [`HOST`] on `front`, its one upstream listening on a loopback `:443` of its own.
struct Harness {
    endpoint: Endpoint,
    upstream: TcpListener,
    journal: Arc<MemoryJournal>,
    cancel: CancellationToken,
    served: tokio::task::JoinHandle<()>,
    _dns: FakeDns,
    _dir: tempfile::TempDir,
}

async fn start(front: Front, path: SplicePath, idle_timeout: Duration) -> Harness {
    let upstream = TcpListener::bind(SocketAddr::new(own_address().into(), 443)).await.expect("upstream");
    let dns = FakeDns::start("127.0.0.1:0".parse().expect("addr")).await.expect("fake DNS");
    dns.answer(HOST, vec![Reply::Addresses(vec![upstream.local_addr().expect("address").ip()])]);
    let mut settings = Settings::new([HOST]).expect("settings");
    settings.set_allow_cidrs(["127.0.0.0/8".parse().expect("net")]).expect("allowCidrs");
    settings.dial_allow = vec!["127.0.0.0/8".parse().expect("net")];
    settings.limits.idle_timeout = idle_timeout;
    settings.splice_path = path;
    let journal = Arc::new(MemoryJournal::default());
    let resolver = DnsResolver::new(&[dns.address()]).expect("resolver");
    let gateway = Arc::new(Gateway::new(settings, resolver, DirectDialer, journal.clone()));
    let dir = tempfile::tempdir().expect("tempdir");
    let endpoint = match front {
        Front::Tcp => Endpoint::Tcp("127.0.0.1:0".parse().expect("addr")),
        Front::Unix => Endpoint::Unix(dir.path().join("egress.sock")),
    };
    let listener = Listener::bind(&endpoint).await.expect("bind");
    let endpoint = listener.endpoint().expect("endpoint");
    let cancel = CancellationToken::new();
    let served = tokio::spawn(serve(gateway, Arc::new(listener), cancel.clone()));
    Harness { endpoint, upstream, journal, cancel, served, _dns: dns, _dir: dir }
}

impl Harness {
    /// Opens a tunnel and sends its ClientHello; returns the client's stream and the upstream's,
    /// which has received the ClientHello.
    async fn tunnel(&self) -> (Box<dyn Stream>, TcpStream) {
        let mut client: Box<dyn Stream> = match &self.endpoint {
            Endpoint::Tcp(address) => Box::new(TcpStream::connect(address).await.expect("connect")),
            Endpoint::Unix(path) => Box::new(UnixStream::connect(path).await.expect("connect")),
        };
        client.write_all(format!("CONNECT {HOST}:443 HTTP/1.1\r\n\r\n").as_bytes()).await.expect("CONNECT");
        let mut head = [0u8; 39];
        client.read_exact(&mut head).await.expect("200");
        assert_eq!(&head, b"HTTP/1.1 200 Connection Established\r\n\r\n");
        let hello = client_hello_for(HOST);
        client.write_all(&hello).await.expect("ClientHello");
        let (mut upstream, _) =
            tokio::time::timeout(STEP, self.upstream.accept()).await.expect("dialed").expect("accept");
        let mut replayed = vec![0u8; hello.len()];
        upstream.read_exact(&mut replayed).await.expect("replay");
        assert_eq!(replayed, hello, "the replay comes first");
        (client, upstream)
    }

    /// Waits for the `n`th close line.
    async fn close(&self, n: usize) -> Close {
        for _ in 0..1000 {
            if let Some(close) = self.journal.closes.lock().expect("journal").get(n - 1) {
                return close.clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no close line #{n}");
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(STEP, self.served).await.expect("serve stops").expect("no panic");
    }
}

/// A byte sequence without a period, so bytes reordered or repeated by a splice cannot match.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        bytes.extend_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// Writes `bytes` and then half-closes.
async fn send_then_end<W: AsyncWrite + Unpin>(mut to: W, bytes: &[u8]) -> io::Result<()> {
    for chunk in bytes.chunks(256 * 1024) {
        to.write_all(chunk).await?;
    }
    to.shutdown().await
}

/// Reads until the end, checking every byte against `expected` as it comes; the count read.
async fn receive_exactly<R: AsyncRead + Unpin>(mut from: R, expected: &[u8]) -> Result<usize, String> {
    let mut buffer = vec![0u8; 256 * 1024];
    let mut at = 0;
    loop {
        let read = from.read(&mut buffer).await.map_err(|error| format!("after {at} bytes: {error}"))?;
        if read == 0 {
            return if at == expected.len() { Ok(at) } else { Err(format!("ended after {at} bytes")) };
        }
        if at + read > expected.len() || buffer[..read] != expected[at..at + read] {
            return Err(format!("bytes {at}..{} differ from what was sent", at + read));
        }
        at += read;
    }
}

/// Opens a tunnel, checks how many pipes it holds once spliced, moves 64 MiB each way at once
/// and returns its close line.
async fn bulk_both_ways(front: Front, path: SplicePath) -> Close {
    let pipes_before = open_pipes();
    let gateway = start(front, path, Duration::from_secs(600)).await;
    let (mut client, mut upstream) = gateway.tunnel().await;
    // One exchange first: once it is through both ways, the splice has begun both ways.
    client.write_all(b"ping").await.expect("ping");
    let mut ping = [0u8; 4];
    upstream.read_exact(&mut ping).await.expect("ping");
    upstream.write_all(b"pong").await.expect("pong");
    let mut pong = [0u8; 4];
    client.read_exact(&mut pong).await.expect("pong");
    assert_eq!((&ping, &pong), (b"ping", b"pong"));
    assert_eq!(open_pipes(), pipes_before + pipes_held(path), "{front:?} {path:?}: pipes held while spliced");

    let up = pattern(BULK, 0x5eed_0001);
    let down = pattern(BULK, 0x5eed_0002);
    let (client_read, client_write) = tokio::io::split(client);
    let (upstream_read, upstream_write) = upstream.into_split();
    let moved = async {
        tokio::join!(
            send_then_end(client_write, &up),
            receive_exactly(upstream_read, &up),
            send_then_end(upstream_write, &down),
            receive_exactly(client_read, &down),
        )
    };
    let (sent_up, received_up, sent_down, received_down) =
        tokio::time::timeout(STEP, moved).await.expect("64 MiB each way in time");
    sent_up.expect("client → upstream sent");
    sent_down.expect("upstream → client sent");
    assert_eq!(received_up, Ok(BULK), "{front:?} {path:?}: client → upstream");
    assert_eq!(received_down, Ok(BULK), "{front:?} {path:?}: upstream → client");

    let close = gateway.close(1).await;
    gateway.stop().await;
    assert_eq!(open_pipes(), pipes_before, "{front:?} {path:?}: every pipe is closed with its tunnel");
    close
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mib_each_way_are_spliced_in_the_kernel_byte_for_byte() {
    let _one = ONE_AT_A_TIME.lock().await;
    let hello = client_hello_for(HOST).len() as u64;
    for front in [Front::Tcp, Front::Unix] {
        let close = bulk_both_ways(front, SplicePath::Kernel).await;
        assert_eq!(close.close_reason, CloseReason::Completed, "{front:?}");
        assert_eq!(close.bytes_out, hello + 4 + BULK as u64, "{front:?}: replay, ping and the bulk");
        assert_eq!(close.bytes_in, 4 + BULK as u64, "{front:?}: pong and the bulk");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mib_each_way_arrive_byte_for_byte_when_copying_is_forced() {
    let _one = ONE_AT_A_TIME.lock().await;
    let hello = client_hello_for(HOST).len() as u64;
    for front in [Front::Tcp, Front::Unix] {
        let close = bulk_both_ways(front, SplicePath::Copy).await;
        assert_eq!(close.close_reason, CloseReason::Completed, "{front:?}");
        assert_eq!(close.bytes_out, hello + 4 + BULK as u64, "{front:?}: replay, ping and the bulk");
        assert_eq!(close.bytes_in, 4 + BULK as u64, "{front:?}: pong and the bulk");
    }
}

#[tokio::test]
async fn a_tunnel_spliced_in_the_kernel_lives_while_bytes_pass_and_idles_out_when_they_stop() {
    let _one = ONE_AT_A_TIME.lock().await;
    let hello = client_hello_for(HOST).len() as u64;
    let idle = Duration::from_millis(400);
    for front in [Front::Tcp, Front::Unix] {
        let pipes_before = open_pipes();
        let gateway = start(front, SplicePath::Kernel, idle).await;
        let (mut client, mut upstream) = gateway.tunnel().await;
        // Five ticks 150 ms apart: twice the idle timeout in all, never idle for that long.
        for _ in 0..5 {
            client.write_all(b"tick").await.expect("tick");
            let mut tick = [0u8; 4];
            upstream.read_exact(&mut tick).await.expect("tick upstream");
            upstream.write_all(&tick).await.expect("echo");
            client.read_exact(&mut tick).await.expect("echo back");
            assert_eq!(&tick, b"tick", "{front:?}");
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        assert_eq!(open_pipes(), pipes_before + 4, "{front:?}: spliced in the kernel");
        assert!(gateway.journal.closes.lock().expect("journal").is_empty(), "{front:?}: not idle while ticking");

        // Then silence: both ends see the tunnel close.
        let mut rest = Vec::new();
        let ended = tokio::time::timeout(STEP, client.read_to_end(&mut rest)).await.expect("closed in time");
        assert!(ended.is_ok_and(|read| read == 0), "{front:?}: the client sees the close");
        let ended = tokio::time::timeout(STEP, upstream.read_to_end(&mut rest)).await.expect("closed in time");
        assert!(ended.is_ok_and(|read| read == 0), "{front:?}: the upstream sees the close");
        let close = gateway.close(1).await;
        assert_eq!(close.close_reason, CloseReason::IdleTimeout, "{front:?}");
        assert_eq!((close.bytes_out, close.bytes_in), (hello + 20, 20), "{front:?}");
        // The last tick passed after four gaps of 150 ms; the idle timeout counts from there.
        assert!(close.duration_ms >= 4.0 * 150.0 + 400.0, "{front:?}: {close:?}");
        gateway.stop().await;
        assert_eq!(open_pipes(), pipes_before, "{front:?}");
    }
}

#[tokio::test]
async fn an_end_on_either_side_is_passed_on_as_a_half_close() {
    let _one = ONE_AT_A_TIME.lock().await;
    let hello = client_hello_for(HOST).len() as u64;
    for path in [SplicePath::Kernel, SplicePath::Copy] {
        for front in [Front::Tcp, Front::Unix] {
            let case = format!("{front:?} {path:?}");
            let gateway = start(front, path, Duration::from_secs(600)).await;

            // The client ends first; the upstream sees the end and answers after it.
            let (client, upstream) = gateway.tunnel().await;
            let (mut client_read, mut client_write) = tokio::io::split(client);
            let (mut upstream_read, mut upstream_write) = upstream.into_split();
            client_write.write_all(b"request").await.expect("request");
            client_write.shutdown().await.expect("half-close");
            let mut request = Vec::new();
            let ended = tokio::time::timeout(STEP, upstream_read.read_to_end(&mut request)).await;
            assert!(ended.is_ok_and(|read| read.is_ok()), "{case}: the upstream sees the client's end");
            assert_eq!(request, b"request", "{case}");
            upstream_write.write_all(b"answer after your half-close").await.expect("answer");
            upstream_write.shutdown().await.expect("end");
            let mut answer = Vec::new();
            tokio::time::timeout(STEP, client_read.read_to_end(&mut answer)).await.expect("in time").expect("read");
            assert_eq!(answer, b"answer after your half-close", "{case}");
            let close = gateway.close(1).await;
            assert_eq!(close.close_reason, CloseReason::Completed, "{case}");
            assert_eq!((close.bytes_out, close.bytes_in), (hello + 7, 28), "{case}");

            // The upstream ends first; the client sees the end and can still send.
            let (client, upstream) = gateway.tunnel().await;
            let (mut client_read, mut client_write) = tokio::io::split(client);
            let (mut upstream_read, mut upstream_write) = upstream.into_split();
            upstream_write.write_all(b"early answer").await.expect("answer");
            upstream_write.shutdown().await.expect("half-close");
            let mut answer = Vec::new();
            let ended = tokio::time::timeout(STEP, client_read.read_to_end(&mut answer)).await;
            assert!(ended.is_ok_and(|read| read.is_ok()), "{case}: the client sees the upstream's end");
            assert_eq!(answer, b"early answer", "{case}");
            client_write.write_all(b"late request").await.expect("request");
            client_write.shutdown().await.expect("end");
            let mut request = Vec::new();
            tokio::time::timeout(STEP, upstream_read.read_to_end(&mut request)).await.expect("in time").expect("read");
            assert_eq!(request, b"late request", "{case}");
            let close = gateway.close(2).await;
            assert_eq!(close.close_reason, CloseReason::Completed, "{case}");
            assert_eq!((close.bytes_out, close.bytes_in), (hello + 12, 12), "{case}");
            gateway.stop().await;
        }
    }
}
