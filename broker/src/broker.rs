//! One session's broker and one request through it, in the order docs/broker.md gives: upgrades
//! refused, the path canonical, the route named by its first segment, the scheme's endpoint list,
//! this session's placeholder where the scheme puts the key, the body cap, the open-request
//! bound and the budget; only then the provider, over the pinned path, with the real key in the
//! placeholder's place. The answer streams back; a non-2xx one is held (bounded) and masked.
//! Every answer goes out on a head of the broker's own: the status and the masked headers.
//!
//! A token budget is checked against settled usage only, and a response's usage is known only at
//! its end, so under a token budget at most one billing request (not a model list or token
//! count) is open at a time: the next waits for the last to settle, up to the response-head
//! timeout, and is answered `429 too_many_requests` (with `Retry-After`) past it. The overrun is
//! then at most one response's usage.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use roundtable_gateway::{Dial, Resolve};
use roundtable_specs::broker::{BrokerReason, Scheme};
use tokio::sync::{Semaphore, watch};

use crate::body::{Outgoing, RequestBody};
use crate::headers::{self, NotPresented, Presented};
use crate::intercept::{self, SessionCa};
use crate::journal::{BrokerCounters, BrokerJournal, Tally};
use crate::keyring::Keyring;
use crate::ledger::Ledger;
use crate::mask::StreamMask;
use crate::metrics;
use crate::record::{Record, Settle, Shared};
use crate::redact;
use crate::route::{self, PathRefusal};
use crate::settings::{BrokerError, BrokerLimits, BrokerSettings, Route};
use crate::upstream::{Refusal, Upstream};
use crate::usage::UsageMeter;

/// One session's credential broker.
pub struct Broker<R, D> {
    routes: Vec<Route>,
    keyring: Keyring,
    limits: BrokerLimits,
    open: Arc<Semaphore>,
    /// Under a token budget: one permit, held by the billing request in flight.
    billing_turn: Option<Arc<Semaphore>>,
    next_id: AtomicU64,
    shared: Arc<Shared>,
    upstream: Upstream<R, D>,
    /// The TLS servers a `CONNECT` to a provider host is answered with.
    ca: SessionCa,
}

/// How a request reached the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `http://127.0.0.1:3129/<host>/…`: the CLI was pointed at the broker.
    BaseUrl,
    /// Inside a `CONNECT host:443` tunnel the broker terminated with the session CA: the CLI
    /// ignored its base URL but honoured `HTTPS_PROXY` and the trust bundle.
    Intercepted,
}

/// A request that passed every check and was answered by the provider.
struct Answered<'k> {
    response: Response<Incoming>,
    presented: Presented<'k>,
    /// The endpoint can be billed (not a model list or token count).
    billing: bool,
}

impl<R: Resolve, D: Dial> Broker<R, D> {
    pub fn new(
        settings: BrokerSettings,
        resolver: R,
        dialer: D,
        journal: Arc<dyn BrokerJournal>,
    ) -> Result<Self, BrokerError> {
        let BrokerSettings { routes, credentials, budget, limits, upstream, extra_roots } = settings;
        if routes.is_empty() {
            return Err(BrokerError::NoRoutes);
        }
        for (index, route) in routes.iter().enumerate() {
            if routes[..index].iter().any(|earlier| earlier.host == route.host) {
                return Err(BrokerError::DuplicateRoute(route.host.clone()));
            }
            if !upstream.allowlist().contains(&route.host) {
                return Err(BrokerError::RouteNotAllowed(route.host.clone()));
            }
        }
        if let Some(stray) =
            credentials.iter().find(|credential| !routes.iter().any(|route| route.host == credential.host))
        {
            return Err(BrokerError::CredentialHost { name: stray.name.clone(), host: stray.host.clone() });
        }
        let keyring = Keyring::new(credentials)?;
        let hosts: Vec<String> = routes.iter().map(|route| route.host.clone()).collect();
        let ca = SessionCa::mint(&hosts)?;
        metrics::register();
        Ok(Self {
            routes,
            keyring,
            limits,
            open: Arc::new(Semaphore::new(limits.max_open_requests)),
            billing_turn: budget.tokens.map(|_| Arc::new(Semaphore::new(1))),
            next_id: AtomicU64::new(0),
            shared: Arc::new(Shared { journal, ledger: Ledger::new(budget), tally: Tally::default() }),
            upstream: Upstream::new(upstream, resolver, dialer, &extra_roots)?,
            ca,
        })
    }

    /// The session CA's certificate (PEM) that the agent's trust bundle holds.
    pub fn ca_pem(&self) -> &str {
        self.ca.certificate_pem()
    }

    pub fn counters(&self) -> BrokerCounters {
        let ledger = self.shared.ledger.snapshot();
        BrokerCounters {
            requests: self.shared.tally.passed(),
            refused: self.shared.tally.refused(),
            tokens: ledger.tokens,
            unreadable: ledger.unreadable,
            exhausted: ledger.exhausted,
            restarts: self.shared.tally.restarts(),
        }
    }

    /// Turns true at the first request refused because the budget is spent.
    pub fn budget_refused(&self) -> watch::Receiver<bool> {
        self.shared.ledger.refused()
    }

    pub fn limits(&self) -> &BrokerLimits {
        &self.limits
    }

    /// The provider hosts this broker routes to.
    pub fn hosts(&self) -> Vec<String> {
        self.routes.iter().map(|route| route.host.clone()).collect()
    }

    pub(crate) fn restarted(&self) {
        self.shared.tally.restarted();
    }

    /// Answers one request that came to the base URL.
    pub async fn handle(&self, request: Request<Incoming>) -> Response<Outgoing> {
        self.handle_via(request, Via::BaseUrl).await
    }

    /// Decides a `CONNECT`: the TLS server to answer it with when it names one of this
    /// session's provider hosts on port 443; otherwise the refusal, logged like any other.
    pub(crate) fn tunnel(
        &self,
        request: &Request<Incoming>,
    ) -> Result<(String, tokio_rustls::TlsAcceptor), Box<Response<Outgoing>>> {
        let authority = request.uri().authority().map(|a| a.as_str().to_owned()).unwrap_or_default();
        let host = intercept::connect_host(&authority).unwrap_or_default();
        if let Some(acceptor) = self.ca.acceptor(host) {
            return Ok((host.to_owned(), acceptor));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut record = Record::begin(self.shared.clone(), id, "CONNECT", Instant::now());
        record.line.path = route::truncate(authority, 256);
        record.line.intercepted = true;
        Err(Box::new(refuse(
            record,
            Refusal::new(
                BrokerReason::TunnelRefused,
                "only the session's provider hosts on port 443 can be reached, and only through the broker",
            ),
        )))
    }

    /// Answers one request from inside a tunnel to `host`: judged exactly as if it had come to
    /// `/<host>/…` of the base URL, so the route is the tunnel's host, never the request's.
    pub(crate) async fn handle_intercepted(&self, host: &str, request: Request<Incoming>) -> Response<Outgoing> {
        let (mut parts, body) = request.into_parts();
        let target = match parts.uri.query() {
            Some(query) => format!("/{host}{}?{query}", parts.uri.path()),
            None => format!("/{host}{}", parts.uri.path()),
        };
        // A target that does not parse keeps an empty path, which the canonical check refuses.
        parts.uri = target.parse().unwrap_or_default();
        self.handle_via(Request::from_parts(parts, body), Via::Intercepted).await
    }

    async fn handle_via(&self, request: Request<Incoming>, via: Via) -> Response<Outgoing> {
        let span = tracing::info_span!(
            "broker.request",
            method = %request.method(),
            intercepted = via == Via::Intercepted,
            host = tracing::field::Empty,
            path = tracing::field::Empty,
            decision = tracing::field::Empty,
            reason = tracing::field::Empty,
            status = tracing::field::Empty,
        );
        let response = tracing::Instrument::instrument(self.decide(request, via), span).await;
        agent_head(response)
    }

    async fn decide(&self, request: Request<Incoming>, via: Via) -> Response<Outgoing> {
        let started = Instant::now();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut record = Record::begin(self.shared.clone(), id, request.method().as_str(), started);
        record.line.intercepted = via == Via::Intercepted;
        let forwarded = self.forward(request, &mut record).await;
        let span = tracing::Span::current();
        span.record("host", record.line.host.as_deref().unwrap_or_default());
        span.record("path", record.line.path.as_str());
        match forwarded {
            Ok(answered) => {
                span.record("decision", "allow");
                let response = self.answer(answered, record).await;
                span.record("status", response.status().as_u16());
                response
            }
            Err(refusal) => {
                span.record("decision", "deny");
                span.record("reason", refusal.reason.as_str());
                let response = refuse(record, refusal);
                span.record("status", response.status().as_u16());
                response
            }
        }
    }

    async fn forward<'k>(&'k self, request: Request<Incoming>, record: &mut Record) -> Result<Answered<'k>, Refusal> {
        let (parts, body) = request.into_parts();
        let path = parts.uri.path().to_owned();
        let query = parts.uri.query().map(str::to_owned);
        record.line.path = route::template(None, &path);

        if parts.headers.contains_key(header::UPGRADE) {
            return Err(Refusal::new(BrokerReason::UpgradeRefused, "upgrades (WebSocket) are not brokered; use HTTP"));
        }
        let target_length = path.len() + query.as_ref().map_or(0, |q| q.len() + 1);
        if target_length > route::MAX_TARGET {
            return Err(Refusal::new(BrokerReason::BadRequest, "the request target is over 2 KiB"));
        }
        route::check_canonical(&path).map_err(path_refusal)?;
        let (first, rest) = route::split_route(&path);
        let route = self.routes.iter().find(|route| route.host == first).ok_or_else(|| {
            Refusal::new(BrokerReason::UnknownRoute, "the first path segment names no provider host of this session")
        })?;
        record.scheme = route.scheme;
        record.line.host = Some(route.host.clone());
        record.line.scheme = Some(route.scheme);
        record.line.path = route::template(Some(route.scheme), &path);
        route::check_endpoint(route.scheme, parts.method.as_str(), rest).map_err(path_refusal)?;
        let billing = route::bills(route.scheme, parts.method.as_str(), rest);

        let presented =
            headers::find_placeholder(&self.keyring, route.scheme, &route.host, &parts.headers, query.as_deref())
                .map_err(|missing| {
                    Refusal::new(
                        BrokerReason::NoPlaceholder,
                        match missing {
                            NotPresented::Missing => "no placeholder of this session where the provider takes its key",
                            NotPresented::OtherHost => "the placeholder belongs to another provider host",
                        },
                    )
                })?;
        record.line.credential = Some(presented.entry.name.clone());

        if let Some(length) = parts.headers.get(header::CONTENT_LENGTH)
            && length
                .to_str()
                .ok()
                .and_then(|l| l.trim().parse::<u64>().ok())
                .is_none_or(|l| l > self.limits.max_body_bytes)
        {
            return Err(Refusal::new(
                BrokerReason::BodyTooLarge,
                format!("the body is over {} bytes", self.limits.max_body_bytes),
            ));
        }
        if headers::holds_placeholder(rest.as_bytes()) || headers::holds_placeholder(&headers::percent_decode(rest)) {
            return Err(Refusal::new(BrokerReason::BadRequest, "a placeholder in the path"));
        }
        let secret = presented.entry.value.expose();
        let upstream_headers = headers::upstream_headers(&parts.headers, &route.host, presented.place, secret)
            .map_err(|detail| Refusal::new(BrokerReason::BadRequest, detail))?;
        let upstream_query = headers::upstream_query(query.as_deref(), presented.place, &presented.placeholder, secret)
            .map_err(|detail| Refusal::new(BrokerReason::BadRequest, detail))?;
        let target = match upstream_query {
            Some(query) => format!("{rest}?{query}"),
            None => rest.to_owned(),
        };
        let uri: Uri =
            target.parse().map_err(|_| Refusal::new(BrokerReason::BadRequest, "the request target is not a URI"))?;

        record.permit = Some(self.open.clone().try_acquire_owned().map_err(|_| {
            Refusal::new(
                BrokerReason::TooManyRequests,
                format!("{} requests of this session are open already", self.limits.max_open_requests),
            )
        })?);
        if let Some(turn) = self.billing_turn.as_ref().filter(|_| billing) {
            let waited = tokio::time::timeout(self.limits.response_head_timeout, turn.clone().acquire_owned()).await;
            let Ok(Ok(turn)) = waited else {
                return Err(Refusal::new(
                    BrokerReason::TooManyRequests,
                    "under a token budget one model request runs at a time, and the one open did not end in time",
                ));
            };
            record.turn = Some(turn);
        }
        self.shared.ledger.admit().map_err(|spent| Refusal::new(BrokerReason::BudgetExhausted, spent.to_string()))?;
        record.settle = Settle::Zero;

        let mut opened = self.upstream.open(&route.host).await?;
        record.connection = Some(opened.connection);
        let over_cap = Arc::new(AtomicBool::new(false));
        let body = RequestBody::new(body, self.limits.max_body_bytes, record.bytes_up.clone(), over_cap.clone());
        let mut upstream_request = Request::new(body);
        *upstream_request.method_mut() = parts.method;
        *upstream_request.uri_mut() = uri;
        *upstream_request.version_mut() = Version::HTTP_11;
        *upstream_request.headers_mut() = upstream_headers;
        let dialed = opened.dialed;
        // From here the provider may be billing: an exchange that ends without an answer read
        // cost an unknown amount, never zero.
        record.settle = if billing { Settle::Unreadable } else { Settle::Zero };
        let sent =
            tokio::time::timeout(self.limits.response_head_timeout, opened.sender.send_request(upstream_request));
        let response = match sent.await {
            Err(_) => {
                return Err(Refusal::new(
                    BrokerReason::UpstreamTimeout,
                    format!("no response head from {dialed} within {:?}", self.limits.response_head_timeout),
                ));
            }
            Ok(Err(_)) if over_cap.load(Ordering::Relaxed) => {
                // The provider saw a cut body, which it cannot have billed.
                record.settle = Settle::Zero;
                return Err(Refusal::new(
                    BrokerReason::BodyTooLarge,
                    format!("the body passed {} bytes", self.limits.max_body_bytes),
                ));
            }
            Ok(Err(error)) => {
                return Err(Refusal::new(
                    BrokerReason::UpstreamFailed,
                    roundtable_telemetry::error_chain(&error).replace(secret, "[redacted]"),
                ));
            }
            Ok(Ok(response)) => response,
        };
        Ok(Answered { response, presented, billing })
    }

    /// Passes the provider's answer back: streamed when 2xx, held and masked otherwise; a body
    /// the broker masks and cannot read is withheld.
    async fn answer(&self, answered: Answered<'_>, mut record: Record) -> Response<Outgoing> {
        let Answered { response, presented, billing } = answered;
        let (mut parts, body) = response.into_parts();
        record.line.status = parts.status.as_u16();
        record.line.upstream_request_id = headers::request_id(&parts.headers);
        let secret = presented.entry.value.expose();
        headers::downstream_headers(&mut parts.headers, &redact::echoes(secret, &presented.placeholder));
        let success = parts.status.is_success();
        record.settle = if success && billing {
            let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
            Settle::Usage(UsageMeter::new(record.scheme, content_type))
        } else {
            // A provider that answered an error read the request and did not bill it.
            Settle::Zero
        };
        // A custom host's 2xx body may echo the request; the known schemes' do not, and their
        // streams must not wait on a held tail. Every error body is masked.
        let masked = !success || record.scheme == Scheme::Custom;
        if masked && coded(&parts.headers) {
            return withhold(parts, record);
        }
        if success {
            parts.headers.remove(header::TRANSFER_ENCODING);
            record.head_passed();
            let mask = masked.then(|| StreamMask::new(redact::echoes(secret, &presented.placeholder)));
            if mask.is_some() {
                parts.headers.remove(header::CONTENT_LENGTH);
            }
            return Response::from_parts(parts, Outgoing::stream(body, self.limits.body_idle_timeout, mask, record));
        }
        // Held past the bound by the longest echo, then cut after masking, so the cut never
        // falls inside an echo; the tail of a body that goes on past what was held is dropped
        // when it may be an echo's start.
        let echoes = redact::echoes(secret, &presented.placeholder);
        let bound = self.limits.error_body_bytes;
        let (held, cut) = self.hold(body, bound + echoes.longest(), &mut record).await;
        let mut mask = StreamMask::new(echoes);
        let mut masked = mask.push(&held).to_vec();
        if !cut {
            masked.extend_from_slice(&mask.flush().unwrap_or_default());
        }
        let mut masked = redact::without_placeholders(&masked);
        masked.truncate(bound);
        let masked = Bytes::from(masked);
        for name in [header::CONTENT_LENGTH, header::TRANSFER_ENCODING, header::CONTENT_ENCODING] {
            parts.headers.remove(name);
        }
        parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(masked.len()));
        record.head_passed();
        Response::from_parts(parts, Outgoing::whole(masked, record))
    }

    /// Reads up to `bound` bytes of a non-2xx body, each frame within the idle timeout; true
    /// when the body went on past them.
    async fn hold(&self, mut body: Incoming, bound: usize, record: &mut Record) -> (Vec<u8>, bool) {
        let mut held = Vec::new();
        loop {
            let frame = tokio::time::timeout(self.limits.body_idle_timeout, body.frame()).await;
            let Ok(Some(Ok(frame))) = frame else { break };
            if let Some(data) = frame.data_ref() {
                let room = bound.saturating_sub(held.len());
                held.extend_from_slice(&data[..data.len().min(room)]);
                if data.len() > room {
                    record.cut(format!("the error body was cut at {} bytes", self.limits.error_body_bytes));
                    return (held, true);
                }
            }
        }
        (held, false)
    }
}

/// Every answer to a request, on its way to the agent (by the base URL or inside a tunnel,
/// passed, masked, withheld or refused), is given a fresh head holding only its status and its
/// headers, which were masked; nothing else of the provider's head is carried over. hyper's
/// client keeps a reason phrase that is not the status's canonical one (`HTTP/1.1 401 <any
/// text>`) as an extension of the response, and its server writes that extension back out as
/// is, so the provider's extensions would carry its bytes past every mask: the agent gets the
/// canonical reason. The version is the broker's own, HTTP/1.1. What is left of the status
/// line is a number.
fn agent_head(response: Response<Outgoing>) -> Response<Outgoing> {
    let (parts, body) = response.into_parts();
    let mut fresh = Response::new(body);
    *fresh.status_mut() = parts.status;
    *fresh.headers_mut() = parts.headers;
    fresh
}

/// Whether a body is in a coding the broker cannot search for echoes: any content coding, or a
/// transfer coding besides `chunked` (which the HTTP client removes), however the headers spell
/// it. The broker asks every upstream for `identity`, so only a host that ignored it lands here.
fn coded(headers: &http::HeaderMap) -> bool {
    let codings = |name| {
        headers
            .get_all(name)
            .iter()
            .flat_map(|value| value.as_bytes().split(|&byte| byte == b','))
            .map(|coding| coding.trim_ascii().to_ascii_lowercase())
            .filter(|coding| !coding.is_empty())
            .collect::<Vec<_>>()
    };
    codings(header::CONTENT_ENCODING).iter().any(|coding| coding != b"identity")
        || codings(header::TRANSFER_ENCODING).iter().any(|coding| coding != b"identity" && coding != b"chunked")
}

/// The answer to a body the broker would mask but cannot read: the provider's status with a
/// notice in place of the body, whatever the status.
fn withhold(mut parts: http::response::Parts, mut record: Record) -> Response<Outgoing> {
    record.cut("a compressed body from a host whose bodies are masked was withheld".to_owned());
    let notice = Bytes::from_static(
        b"[the provider's body was compressed, so the roundtable broker cannot check it for the key, and withholds it]",
    );
    for name in [header::CONTENT_LENGTH, header::TRANSFER_ENCODING, header::CONTENT_ENCODING, header::CONTENT_TYPE] {
        parts.headers.remove(name);
    }
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(notice.len()));
    record.head_passed();
    Response::from_parts(parts, Outgoing::whole(notice, record))
}

fn path_refusal(refusal: PathRefusal) -> Refusal {
    match refusal {
        PathRefusal::BadPath(detail) => Refusal::new(BrokerReason::BadRequest, detail),
        PathRefusal::Method => {
            Refusal::new(BrokerReason::MethodNotAllowed, "the provider's endpoints take GET and POST")
        }
        PathRefusal::NotAllowed => Refusal::new(BrokerReason::PathNotAllowed, "not a model endpoint of this provider"),
    }
}

/// The refusal body: JSON a CLI prints, naming the reason and its detail.
pub(crate) fn refusal_body(reason: BrokerReason, detail: &str) -> Bytes {
    let body = serde_json::json!({
        "error": {
            "type": "roundtable_broker",
            "code": reason.as_str(),
            "message": format!("roundtable broker refused this request: {reason}: {detail}"),
        }
    });
    Bytes::from(body.to_string())
}

fn refuse(mut record: Record, refusal: Refusal) -> Response<Outgoing> {
    let status = refusal.reason.status().unwrap_or(500);
    // How the upstream leg failed (resolver answers, dialed addresses, TLS errors) is the
    // operator's to read in the log line; the agent is told only that it failed.
    let shown = match refusal.reason {
        BrokerReason::UpstreamFailed => "the provider could not be reached; the broker's log line says why",
        BrokerReason::UpstreamTimeout => "the provider did not answer in time; the broker's log line says why",
        _ => refusal.detail.as_str(),
    };
    let body = refusal_body(refusal.reason, shown);
    record.refused(refusal.reason, status, refusal.detail);
    record.head_passed();
    if record.line.scheme.is_none() {
        record.scheme = Scheme::Custom;
    }
    let mut response = Response::new(Outgoing::whole(body, record));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if refusal.reason == BrokerReason::TooManyRequests {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if matches!(refusal.reason, BrokerReason::BodyTooLarge | BrokerReason::UpgradeRefused) {
        // The unread body (or the upgrade's stream) must not be taken for a next request.
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_agent_gets_a_fresh_head_with_only_the_status_and_headers() {
        let mut response = Response::new(Outgoing::empty());
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        *response.version_mut() = Version::HTTP_10;
        let phrase = hyper::ext::ReasonPhrase::try_from(&b"Incorrect API key provided sk-live-key"[..]);
        response.extensions_mut().insert(phrase.expect("a valid reason phrase"));
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let fresh = agent_head(response);
        assert_eq!((fresh.status(), fresh.version()), (StatusCode::UNAUTHORIZED, Version::HTTP_11));
        assert!(fresh.extensions().is_empty(), "the provider's extensions passed");
        assert_eq!(fresh.headers().get(header::CONTENT_TYPE), Some(&HeaderValue::from_static("application/json")));
    }

    #[test]
    fn a_body_in_any_coding_but_identity_is_coded() {
        for coded_headers in [
            &[("content-encoding", "gzip")][..],
            &[("content-encoding", "GZIP")],
            &[("content-encoding", "x-gzip")],
            &[("content-encoding", "br")],
            &[("content-encoding", "identity, gzip")],
            &[("content-encoding", "identity"), ("content-encoding", "deflate")],
            &[("transfer-encoding", "gzip, chunked")],
        ] {
            assert!(coded(&headers(coded_headers)), "{coded_headers:?}");
        }
        for plain in [
            &[][..],
            &[("content-encoding", "identity")],
            &[("content-encoding", " Identity ,")],
            &[("transfer-encoding", "chunked")],
        ] {
            assert!(!coded(&headers(plain)), "{plain:?}");
        }
    }
}
