//! One tunnel from accept to close, in the order docs/gateway.md describes: the bounded CONNECT
//! head, the exact allowlist, one DNS lookup, every answer classified, `200`, a bounded and timed
//! ClientHello check, a dial of the pinned address only then, a replay of the buffered bytes and a
//! splice (in the kernel when it can be, by copying otherwise). Every refusal is final and names
//! one reason; a denied tunnel never touches upstream. The lookup, the admission of its answer
//! and the dial are `pinned.rs`, which the credential broker shares.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use roundtable_specs::egress::{CloseReason, GatewayReason};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::client_hello::{self, Progress, Refusal};
use crate::dial::Dial;
use crate::journal::{Close, Counters, Decision, Journal, now};
use crate::metrics;
use crate::pinned::{self, millis};
use crate::request::{Head, check_allowed, parse_head};
use crate::resolve::Resolve;
use crate::settings::{Settings, UPSTREAM_PORT};
use crate::zero_copy::{self, ClientSocket, ClientStream, Pipes, Tally};

/// Bytes asked of the client per read before the splice.
const READ_CHUNK: usize = 4096;

/// The gateway: its policy, how it resolves and dials, where it reports.
pub struct Gateway<R, D> {
    settings: Settings,
    resolver: R,
    dialer: D,
    journal: Arc<dyn Journal>,
    counters: Arc<Counters>,
    next_id: AtomicU64,
}

/// How a refused client is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Before `200`: an HTTP status, then close.
    Status(u16),
    /// After `200`: a fatal TLS alert (its description), then close.
    Alert(u8),
    /// Close without a word (the client left, or is not speaking TLS).
    Close,
}

struct Denial {
    reason: GatewayReason,
    answer: Answer,
}

impl Denial {
    fn new(reason: impl Into<GatewayReason>, answer: Answer) -> Self {
        Self { reason: reason.into(), answer }
    }
}

/// A tunnel whose checks passed: the upstream connection and every byte the client sent after
/// its CONNECT head (the ClientHello and anything after it), to replay verbatim.
struct Opened {
    upstream: TcpStream,
    buffered: Vec<u8>,
}

impl<R: Resolve, D: Dial> Gateway<R, D> {
    pub fn new(settings: Settings, resolver: R, dialer: D, journal: Arc<dyn Journal>) -> Self {
        Self::with_counters(settings, resolver, dialer, journal, Arc::default())
    }

    /// A gateway counting into `counters` (shared with a journal that counts what it drops).
    pub fn with_counters(
        settings: Settings,
        resolver: R,
        dialer: D,
        journal: Arc<dyn Journal>,
        counters: Arc<Counters>,
    ) -> Self {
        metrics::register();
        Self { settings, resolver, dialer, journal, counters, next_id: AtomicU64::new(0) }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    fn start_decision(&self) -> Decision {
        Decision::begin(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn report(&self, decision: &mut Decision, reason: GatewayReason) {
        decision.conclude(reason);
        let span = tracing::Span::current();
        span.record("host", decision.host.as_deref().or(decision.requested_host.as_deref()).unwrap_or_default());
        span.record("decision", decision.decision.as_str());
        span.record("reason", reason.as_str());
        self.counters.record(decision);
        metrics::decision(reason);
        self.journal.decision(decision);
    }

    /// Runs one tunnel to its end. `cancel` closes a spliced tunnel when the gateway stops.
    pub async fn handle<S: ClientStream>(&self, client: S, cancel: &CancellationToken) {
        let span = tracing::info_span!(
            "egress.tunnel",
            host = tracing::field::Empty,
            decision = tracing::field::Empty,
            reason = tracing::field::Empty
        );
        tracing::Instrument::instrument(self.tunnel(client, cancel), span).await;
    }

    async fn tunnel<S: ClientStream>(&self, mut client: S, cancel: &CancellationToken) {
        let started = Instant::now();
        let mut decision = self.start_decision();
        let opened = tokio::select! {
            opened = self.open(&mut client, &mut decision) => opened,
            () = cancel.cancelled() => Err(Denial::new(GatewayReason::GatewayShutdown, Answer::Close)),
        };
        match opened {
            Err(denial) => {
                self.report(&mut decision, denial.reason);
                answer(&mut client, denial.reason, denial.answer).await;
            }
            Ok(opened) => {
                self.report(&mut decision, GatewayReason::Allowed);
                self.splice(client, opened, &decision, started, cancel).await;
            }
        }
    }

    /// Answers a connection over the tunnel limit without reading it.
    pub async fn refuse_over_limit<S: AsyncWrite + Unpin>(&self, mut client: S) {
        let span = tracing::info_span!(
            "egress.tunnel",
            host = tracing::field::Empty,
            decision = tracing::field::Empty,
            reason = tracing::field::Empty
        );
        let _entered = span.enter();
        let mut decision = self.start_decision();
        self.report(&mut decision, GatewayReason::TunnelLimit);
        drop(_entered);
        tracing::Instrument::instrument(answer(&mut client, GatewayReason::TunnelLimit, Answer::Status(429)), span)
            .await;
    }

    async fn open<S>(&self, client: &mut S, decision: &mut Decision) -> Result<Opened, Denial>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let limits = self.settings.limits;
        let mut buffer = Vec::with_capacity(READ_CHUNK);
        let head = tokio::time::timeout(limits.header_timeout, read_head(client, &mut buffer)).await;
        decision.requested_host = requested_authority(&buffer);
        let (host, head_end) = head.map_err(|_| Denial::new(GatewayReason::HeaderTimeout, Answer::Status(408)))??;
        buffer.drain(..head_end);
        decision.host = Some(host.clone());
        decision.port = Some(UPSTREAM_PORT);
        check_allowed(&host, self.settings.allowlist())
            .map_err(|refusal| Denial::new(refusal, Answer::Status(refusal.status())))?;

        let addresses = self.resolve(&host, decision).await?;
        self.admit_addresses(&addresses, decision)?;

        client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .map_err(|_| Denial::new(GatewayReason::ClientEof, Answer::Close))?;

        let (sni, hello_bytes) = tokio::time::timeout(
            limits.client_hello_timeout,
            read_client_hello(client, &mut buffer, &host, limits.client_hello),
        )
        .await
        .map_err(|_| Denial::new(GatewayReason::ClientHelloTimeout, Answer::Alert(ALERT_ACCESS_DENIED)))??;
        decision.sni = Some(sni);
        decision.client_hello_bytes = Some(hello_bytes);
        metrics::client_hello(hello_bytes);

        let upstream = self.dial_pinned(&addresses, decision).await?;
        Ok(Opened { upstream, buffered: buffer })
    }

    /// One lookup, bounded in time; the answer is the pin for this tunnel.
    async fn resolve(&self, host: &str, decision: &mut Decision) -> Result<Vec<IpAddr>, Denial> {
        let lookup = pinned::resolve(&self.resolver, host, self.settings.limits.dns_timeout).await;
        decision.dns_ms = Some(millis(lookup.elapsed));
        metrics::dns_lookup(lookup.elapsed);
        match lookup.result {
            Ok(addresses) => {
                decision.resolved = addresses.clone();
                Ok(addresses)
            }
            Err(error) => {
                decision.error = error.detail;
                let status = if error.reason == GatewayReason::DnsTimeout { 504 } else { 502 };
                Err(Denial::new(error.reason, Answer::Status(status)))
            }
        }
    }

    /// Every address must pass the address policy, or the tunnel is denied (`pinned::admit`).
    fn admit_addresses(&self, addresses: &[IpAddr], decision: &mut Decision) -> Result<(), Denial> {
        let allowed = pinned::admit(addresses, &self.settings.address_policy())
            .map_err(|error| Denial::new(error.reason, Answer::Status(403)))?;
        decision.allowed_by_cidr = allowed.iter().map(ToString::to_string).collect();
        Ok(())
    }

    /// Dials the validated addresses (`pinned::dial`); nothing else is ever dialed.
    async fn dial_pinned(&self, addresses: &[IpAddr], decision: &mut Decision) -> Result<TcpStream, Denial> {
        let dialed = pinned::dial(&self.dialer, addresses, UPSTREAM_PORT, self.settings.limits.connect_timeout).await;
        for attempt in &dialed.attempts {
            metrics::dial(attempt.elapsed);
        }
        decision.connect_ms = Some(millis(dialed.elapsed));
        match dialed.result {
            Ok(connected) => {
                decision.dialed = Some(connected.dialed);
                Ok(connected.stream)
            }
            Err(error) => {
                decision.error = error.detail;
                Err(Denial::new(error.reason, Answer::Alert(ALERT_INTERNAL_ERROR)))
            }
        }
    }

    /// Replays the buffered bytes, then carries bytes both ways until either side is done, the
    /// tunnel idles out or the gateway stops; then reports the close.
    async fn splice<S: ClientStream>(
        &self,
        mut client: S,
        opened: Opened,
        decision: &Decision,
        started: Instant,
        cancel: &CancellationToken,
    ) {
        let Opened { mut upstream, buffered } = opened;
        self.counters.tunnel_opened();
        let meter = Arc::new(Meter::new(started));
        let idle = self.settings.limits.idle_timeout;
        let outcome = async {
            // Replay first and let the buffer go: it would otherwise live as long as the tunnel.
            upstream.write_all(&buffered).await?;
            meter.add(&meter.read, buffered.len());
            drop(buffered);
            self.carry(&mut client, &mut upstream, &meter).await
        };
        let close_reason = tokio::select! {
            result = outcome => match result {
                Ok(()) => CloseReason::Completed,
                Err(error) => CloseReason::Error(error.to_string()),
            },
            () = meter.idle_for(idle) => CloseReason::IdleTimeout,
            () = cancel.cancelled() => CloseReason::GatewayShutdown,
        };
        let elapsed = started.elapsed();
        let close = Close {
            event: "close",
            time: now(),
            id: decision.id,
            host: decision.host.clone().unwrap_or_default(),
            bytes_in: meter.written.load(Ordering::Relaxed),
            bytes_out: meter.read.load(Ordering::Relaxed),
            duration_ms: millis(elapsed),
            close_reason,
        };
        self.counters.tunnel_closed(&close);
        metrics::tunnel_closed(&close, elapsed);
        self.journal.close(&close);
    }

    /// Carries bytes both ways: in the kernel when the settings, the client stream and the pipes
    /// allow it, otherwise by copying.
    async fn carry<S: ClientStream>(
        &self,
        client: &mut S,
        upstream: &mut TcpStream,
        meter: &Arc<Meter>,
    ) -> io::Result<()> {
        if let Some(socket) = client.socket()
            && let Some(pipes) = Pipes::when(self.settings.splice_path)
        {
            let tally = meter.as_ref();
            return match socket {
                ClientSocket::Tcp(client) => zero_copy::splice(client, upstream, pipes, tally).await,
                ClientSocket::Unix(client) => zero_copy::splice(client, upstream, pipes, tally).await,
            };
        }
        let mut client = Metered { inner: client, meter: meter.clone() };
        crate::splice::splice(&mut client, upstream).await
    }
}

/// The authority of the request line as the client wrote it, made printable and bounded.
fn requested_authority(buffer: &[u8]) -> Option<String> {
    let line = buffer.split(|b| *b == b'\n').next()?;
    let authority = line.split(|b| *b == b' ').nth(1)?;
    let printable: String =
        authority.iter().take(255).map(|b| if b.is_ascii_graphic() { char::from(*b) } else { '?' }).collect();
    (!printable.is_empty()).then_some(printable)
}

/// Reads until the CONNECT head is complete; returns the host and where the head ends.
async fn read_head<S: AsyncRead + Unpin>(client: &mut S, buffer: &mut Vec<u8>) -> Result<(String, usize), Denial> {
    loop {
        match parse_head(buffer) {
            Head::Complete { host, end } => return Ok((host, end)),
            Head::Refused(refusal) => return Err(Denial::new(refusal, Answer::Status(refusal.status()))),
            Head::NeedMore => read_more(client, buffer).await?,
        }
    }
}

/// Reads until the buffered bytes hold a whole, valid ClientHello for `host`.
async fn read_client_hello<S: AsyncRead + Unpin>(
    client: &mut S,
    buffer: &mut Vec<u8>,
    host: &str,
    limits: client_hello::Limits,
) -> Result<(String, usize), Denial> {
    loop {
        match client_hello::inspect(buffer, host, limits) {
            Progress::Valid { sni, bytes } => return Ok((sni, bytes)),
            Progress::Refused(refusal) => return Err(Denial::new(refusal, alert_for(refusal))),
            Progress::NeedMore => read_more(client, buffer).await?,
        }
    }
}

async fn read_more<S: AsyncRead + Unpin>(client: &mut S, buffer: &mut Vec<u8>) -> Result<(), Denial> {
    buffer.reserve(READ_CHUNK);
    match client.read_buf(buffer).await {
        Ok(0) | Err(_) => Err(Denial::new(GatewayReason::ClientEof, Answer::Close)),
        Ok(_) => Ok(()),
    }
}

const ALERT_ACCESS_DENIED: u8 = 49;
const ALERT_INTERNAL_ERROR: u8 = 80;
const ALERT_UNRECOGNIZED_NAME: u8 = 112;

fn alert_for(refusal: Refusal) -> Answer {
    match refusal {
        // Not TLS: a TLS alert would mean nothing to it.
        Refusal::NotTls => Answer::Close,
        Refusal::SniMissing | Refusal::SniInvalid | Refusal::SniMultiple | Refusal::SniMismatch => {
            Answer::Alert(ALERT_UNRECOGNIZED_NAME)
        }
        _ => Answer::Alert(ALERT_ACCESS_DENIED),
    }
}

/// Tells a refused client why, as far as its phase allows, then closes.
async fn answer<S: AsyncWrite + Unpin>(client: &mut S, reason: GatewayReason, answer: Answer) {
    let bytes = match answer {
        Answer::Status(status) => {
            // Only the reason code: a denied address's class is named, the address never is.
            let retry = if status == 429 { "Retry-After: 1\r\n" } else { "" };
            format!(
                "HTTP/1.1 {status} {}\r\nX-Gateway-Deny: {reason}\r\n{retry}Content-Length: 0\r\nConnection: close\r\n\r\n",
                status_text(status)
            )
            .into_bytes()
        }
        Answer::Alert(description) => vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, description],
        Answer::Close => Vec::new(),
    };
    // The client may already be gone; nothing more is owed to it.
    let _ = client.write_all(&bytes).await;
    let _ = client.shutdown().await;
}

fn status_text(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

/// Bytes each way through a spliced tunnel and when the last one passed.
struct Meter {
    started: Instant,
    /// From the client (to upstream).
    read: AtomicU64,
    /// To the client (from upstream).
    written: AtomicU64,
    /// Milliseconds after `started` of the last byte either way.
    last_activity: AtomicU64,
}

impl Meter {
    fn new(started: Instant) -> Self {
        let meter =
            Self { started, read: AtomicU64::new(0), written: AtomicU64::new(0), last_activity: AtomicU64::new(0) };
        meter.last_activity.store(meter.elapsed_ms(), Ordering::Relaxed);
        meter
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn add(&self, counter: &AtomicU64, bytes: usize) {
        if bytes > 0 {
            counter.fetch_add(bytes as u64, Ordering::Relaxed);
            self.last_activity.store(self.elapsed_ms(), Ordering::Relaxed);
        }
    }

    /// Resolves once no byte has passed either way for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = self.started + Duration::from_millis(self.last_activity.load(Ordering::Relaxed));
            let deadline = last + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}

impl Tally for Meter {
    fn read(&self, bytes: usize) {
        self.add(&self.read, bytes);
    }

    fn written(&self, bytes: usize) {
        self.add(&self.written, bytes);
    }
}

/// The client side of a copied splice, reporting to its [`Meter`].
struct Metered<S> {
    inner: S,
    meter: Arc<Meter>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            this.meter.add(&this.meter.read, buf.filled().len() - before);
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = poll {
            this.meter.add(&this.meter.written, written);
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
