//! Name resolution for tunnels: one lookup per tunnel, as an FQDN, with no hosts file, no search
//! list and no cache, against explicit nameservers (a `--resolver`, or the `nameserver` lines of
//! /etc/resolv.conf and nothing else from it). A lookup asks A and AAAA at once from one fresh UDP
//! socket (a new random source port and two random IDs per lookup), over TCP for a truncated
//! answer, and moves to the next nameserver, for two rounds, when one fails or stays silent. The
//! caller's timeout is the lookup's one deadline: each nameserver's turn gets an equal share of
//! what is left of it, and a lookup still unanswered at the deadline is a [`LookupError::Timeout`].
//! At most [`IN_FLIGHT`] lookups wait for a first answer at once, so a burst of new tunnels does
//! not overflow the nameserver's receive queue and then wait for resends.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::dns_message::{self, Answer, MessageError, QueryName, QueryType, UDP_PAYLOAD};

/// Rounds over the nameservers.
const ATTEMPTS: usize = 2;
/// A query still unanswered after this is sent again (a datagram lost either way, as when many
/// tunnels start at once and a socket buffer overflows); hickory's retry floor.
pub const RESEND_AFTER: Duration = Duration::from_millis(333);
/// Sends of each query per nameserver turn, the first included.
const MAX_SENDS: usize = 3;
/// Once one type has its answer, how long the other is still waited for (one resend falls inside
/// it). A nameserver that answers A and drops AAAA, or the reverse, then costs this much, not the
/// whole lookup: the addresses of the type that answered are the pin.
pub const OTHER_TYPE_GRACE: Duration = Duration::from_millis(2 * 333);
/// Lookups of one resolver sent and not yet answered, until their first resend: 128 datagrams,
/// which a nameserver's default receive queue holds (about 200 small datagrams). Without a bound,
/// a thousand tunnels opened at once overflowed it, and the lost queries waited for their resend.
/// A lookup past its first resend gives its place up, so a silent nameserver slows new lookups by
/// at most [`RESEND_AFTER`] per place, not by a whole turn.
pub const IN_FLIGHT: usize = 64;

/// Why a lookup produced no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("no A or AAAA record")]
    NoRecords,
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("lookup failed: {0}")]
    Failed(String),
}

/// Resolves a name to every address it has, within `timeout` (the whole lookup: every nameserver,
/// resend and TCP retry).
pub trait Resolve: Send + Sync + 'static {
    /// `fqdn` ends with a dot.
    fn lookup(&self, fqdn: &str, timeout: Duration) -> impl Future<Output = Result<Vec<IpAddr>, LookupError>> + Send;
}

#[derive(Debug, thiserror::Error)]
pub enum ResolverError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} names no nameserver; pass --resolver IP:PORT")]
    NoNameserver { path: String },
    #[error("a resolver needs at least one nameserver")]
    NoServers,
}

/// A stub resolver asking exactly these nameservers, recursion desired. Clones share the bound
/// on lookups in flight.
#[derive(Debug, Clone)]
pub struct DnsResolver {
    nameservers: Vec<SocketAddr>,
    in_flight: Arc<Semaphore>,
}

impl DnsResolver {
    /// A resolver asking exactly these nameservers, in this order.
    pub fn new(nameservers: &[SocketAddr]) -> Result<Self, ResolverError> {
        if nameservers.is_empty() {
            return Err(ResolverError::NoServers);
        }
        Ok(Self { nameservers: nameservers.to_vec(), in_flight: Arc::new(Semaphore::new(IN_FLIGHT)) })
    }

    /// The `nameserver` lines of a resolv.conf file (port 53); its `search` and `domain` are
    /// ignored on purpose.
    pub fn from_resolv_conf(path: &Path) -> Result<Self, ResolverError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ResolverError::Read { path: path.display().to_string(), source })?;
        let servers: Vec<SocketAddr> = text
            .lines()
            .filter_map(|line| line.trim().strip_prefix("nameserver"))
            .filter_map(|rest| rest.trim().parse::<IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, 53))
            .collect();
        if servers.is_empty() {
            return Err(ResolverError::NoNameserver { path: path.display().to_string() });
        }
        Self::new(&servers)
    }
}

impl Resolve for DnsResolver {
    async fn lookup(&self, fqdn: &str, timeout: Duration) -> Result<Vec<IpAddr>, LookupError> {
        let deadline = Instant::now() + timeout;
        // Every wait below ends by the deadline; this bounds the rest (a TCP connect, a place).
        tokio::time::timeout_at(deadline, self.turns(fqdn, deadline))
            .await
            .unwrap_or(Err(LookupError::Timeout(timeout)))
            .map_err(|error| match error {
                LookupError::Failed(_) if Instant::now() >= deadline => LookupError::Timeout(timeout),
                other => other,
            })
    }
}

impl DnsResolver {
    /// Each nameserver in turn, for [`ATTEMPTS`] rounds, until one answers.
    async fn turns(&self, fqdn: &str, deadline: Instant) -> Result<Vec<IpAddr>, LookupError> {
        let name = QueryName::parse(fqdn).map_err(|error| LookupError::Failed(error.to_string()))?;
        let mut failure = String::new();
        let mut turns_left = ATTEMPTS * self.nameservers.len();
        for _ in 0..ATTEMPTS {
            for server in &self.nameservers {
                // The wait for a place is not the nameserver's time: a burst queues here instead
                // of overflowing the nameserver's queue. The semaphore is never closed.
                let Ok(place) = self.in_flight.clone().acquire_owned().await else { break };
                let turn_end = turn_end(Instant::now(), deadline, turns_left);
                turns_left -= 1;
                match tokio::time::timeout_at(turn_end, lookup_at(*server, &name, place, turn_end)).await {
                    Ok(Ok(addresses)) => return Ok(addresses),
                    Ok(Err(ExchangeError::NoRecords)) => return Err(LookupError::NoRecords),
                    Ok(Err(error)) => failure = format!("{server}: {error}"),
                    Err(_) => failure = format!("{server}: {}", ExchangeError::Silent),
                }
            }
        }
        Err(LookupError::Failed(failure))
    }
}

/// When a nameserver's turn ends: an equal share of what is left until the deadline, so a silent
/// server is given up in time for the others, and the last turn ends at the deadline.
fn turn_end(now: Instant, deadline: Instant, turns_left: usize) -> Instant {
    let left = deadline.saturating_duration_since(now);
    let turns = u32::try_from(turns_left.max(1)).unwrap_or(u32::MAX);
    now + left / turns
}

/// Why one nameserver gave no usable answer for a lookup.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    /// A definitive answer: the name has no address (not worth asking another server).
    #[error("no A or AAAA record")]
    NoRecords,
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Message(#[from] MessageError),
    #[error("the server answered {0}")]
    Server(ResponseCode),
    #[error("the answer over TCP was truncated too")]
    TruncatedOverTcp,
    /// On a connection of its own, a response to anything else is a broken server, not a spoof.
    #[error("the answer over TCP is not for the query")]
    NotForQuery,
    /// Nothing that matched the query came back in the nameserver's turn.
    #[error("no answer")]
    Silent,
}

/// The A and AAAA answers of one nameserver, combined as one lookup: the A addresses first, then
/// the AAAA ones. One type failing or staying silent while the other has addresses gives those
/// addresses; both failing gives the A query's outcome.
async fn lookup_at(
    server: SocketAddr,
    name: &QueryName,
    place: OwnedSemaphorePermit,
    turn_end: Instant,
) -> Result<Vec<IpAddr>, ExchangeError> {
    let (v4, v6) = exchange_udp(server, name, place, turn_end).await?;
    let (v4, v6) = (settle(server, name, QueryType::A, v4).await, settle(server, name, QueryType::Aaaa, v6).await);
    match (v4, v6) {
        (Ok(mut v4), Ok(v6)) => {
            v4.extend(v6);
            Ok(v4)
        }
        (Ok(addresses), Err(_)) | (Err(_), Ok(addresses)) => Ok(addresses),
        (Err(error), Err(_)) => Err(error),
    }
}

/// One type's answer as addresses, asking again over TCP when it was truncated; `None` is a type
/// that stayed silent.
async fn settle(
    server: SocketAddr,
    name: &QueryName,
    qtype: QueryType,
    answer: Option<Answer>,
) -> Result<Vec<IpAddr>, ExchangeError> {
    let answer = match answer.ok_or(ExchangeError::Silent)? {
        Answer::Truncated => exchange_tcp(server, name, qtype).await?,
        other => other,
    };
    match answer {
        Answer::Addresses(addresses) => Ok(addresses),
        Answer::NoRecords => Err(ExchangeError::NoRecords),
        Answer::ServerError(code) => Err(ExchangeError::Server(ResponseCode(code))),
        Answer::Truncated => Err(ExchangeError::TruncatedOverTcp),
    }
}

/// Sends the A and AAAA queries from one new socket, connected so the kernel drops datagrams from
/// anyone but the server, and waits for the response to each, sending an unanswered one again
/// every [`RESEND_AFTER`]. Anything that does not match a query's ID and question is ignored: a
/// spoofed datagram can only cost time. Once one type has its answer, the other is waited for
/// [`OTHER_TYPE_GRACE`] more and then left unanswered (`None`); with neither by `turn_end`, the
/// server was silent. `place` among the lookups in flight is given up at the answers or at the
/// first resend, whichever comes first.
async fn exchange_udp(
    server: SocketAddr,
    name: &QueryName,
    place: OwnedSemaphorePermit,
    turn_end: Instant,
) -> Result<(Option<Answer>, Option<Answer>), ExchangeError> {
    let mut place = Some(place);
    let local = if server.is_ipv4() { IpAddr::V4(Ipv4Addr::UNSPECIFIED) } else { IpAddr::V6(Ipv6Addr::UNSPECIFIED) };
    // Port 0: the kernel picks a random ephemeral port.
    let socket = UdpSocket::bind(SocketAddr::new(local, 0)).await?;
    socket.connect(server).await?;
    let [v4_id, v6_id] = query_ids()?;
    let v4_query = dns_message::query(v4_id, name, QueryType::A)?;
    let v6_query = dns_message::query(v6_id, name, QueryType::Aaaa)?;
    socket.send(&v4_query).await?;
    socket.send(&v6_query).await?;
    let mut sends = 1;
    let mut resend_at = Instant::now() + RESEND_AFTER;
    let mut give_up_at = turn_end;
    let mut v4 = None;
    let mut v6 = None;
    let mut buffer = vec![0u8; UDP_PAYLOAD];
    loop {
        let wake = resend_at.min(give_up_at);
        let length = match tokio::time::timeout_at(wake, socket.recv(&mut buffer)).await {
            Ok(received) => received?,
            Err(_) if wake == give_up_at => {
                return match (v4, v6) {
                    (None, None) => Err(ExchangeError::Silent),
                    answered => Ok(answered),
                };
            }
            Err(_) => {
                drop(place.take());
                // Same socket, same IDs: an answer to any send of a query counts.
                if sends < MAX_SENDS {
                    if v4.is_none() {
                        socket.send(&v4_query).await?;
                    }
                    if v6.is_none() {
                        socket.send(&v6_query).await?;
                    }
                    sends += 1;
                }
                resend_at += RESEND_AFTER;
                continue;
            }
        };
        let datagram = &buffer[..length];
        let first_answer = v4.is_none() && v6.is_none();
        if v4.is_none() {
            v4 = dns_message::read_response(datagram, v4_id, name, QueryType::A)?;
        }
        if v6.is_none() {
            v6 = dns_message::read_response(datagram, v6_id, name, QueryType::Aaaa)?;
        }
        match (v4.take(), v6.take()) {
            (Some(v4), Some(v6)) => return Ok((Some(v4), Some(v6))),
            (first, second) => {
                if first_answer && (first.is_some() || second.is_some()) {
                    give_up_at = give_up_at.min(Instant::now() + OTHER_TYPE_GRACE);
                }
                (v4, v6) = (first, second);
            }
        }
    }
}

/// One query over TCP (two-byte length prefix), for an answer too large for UDP.
async fn exchange_tcp(server: SocketAddr, name: &QueryName, qtype: QueryType) -> Result<Answer, ExchangeError> {
    let [id, _] = query_ids()?;
    let query = dns_message::query(id, name, qtype)?;
    let mut stream = TcpStream::connect(server).await?;
    let length = u16::try_from(query.len()).map_err(io::Error::other)?;
    let mut framed = Vec::with_capacity(query.len() + 2);
    framed.extend_from_slice(&length.to_be_bytes());
    framed.extend_from_slice(&query);
    stream.write_all(&framed).await?;
    let length = usize::from(stream.read_u16().await?);
    let mut response = vec![0u8; length];
    stream.read_exact(&mut response).await?;
    dns_message::read_response(&response, id, name, qtype)?.ok_or(ExchangeError::NotForQuery)
}

/// A response code, shown by its mnemonic (RFC 1035, RFC 2136, RFC 6891) in the decision line's
/// `error`.
#[derive(Debug)]
struct ResponseCode(u16);

impl std::fmt::Display for ResponseCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            1 => f.write_str("FORMERR"),
            2 => f.write_str("SERVFAIL"),
            4 => f.write_str("NOTIMP"),
            5 => f.write_str("REFUSED"),
            16 => f.write_str("BADVERS"),
            other => write!(f, "response code {other}"),
        }
    }
}

/// Two distinct random query IDs.
fn query_ids() -> io::Result<[u16; 2]> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|error| io::Error::other(error.to_string()))?;
    let first = u16::from_be_bytes([bytes[0], bytes[1]]);
    let mut second = u16::from_be_bytes([bytes[2], bytes[3]]);
    if second == first {
        second = first.wrapping_add(1);
    }
    Ok([first, second])
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;

    const NAME: &str = "api.example.com.";
    /// The gateway's default DNS timeout.
    const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
    /// The record types on the wire, for the servers these tests play.
    const TYPE_A: u16 = 1;
    const TYPE_AAAA: u16 = 28;

    /// The response to `query` (as a server got it): its header and question, `extra_flags` set,
    /// and one answer record per address of the asked type.
    fn answer_to(query: &[u8], extra_flags: u16, addresses: &[IpAddr]) -> Vec<u8> {
        let mut end = 12;
        while query[end] != 0 {
            end += 1 + usize::from(query[end]);
        }
        let question_end = end + 5;
        let qtype = u16::from_be_bytes([query[end + 1], query[end + 2]]);
        let records: Vec<Vec<u8>> = addresses
            .iter()
            .filter_map(|ip| match (ip, qtype) {
                (IpAddr::V4(v4), TYPE_A) => Some(v4.octets().to_vec()),
                (IpAddr::V6(v6), TYPE_AAAA) => Some(v6.octets().to_vec()),
                _ => None,
            })
            .collect();
        let mut response = query[..question_end].to_vec();
        response[2..4].copy_from_slice(&(0x8180 | extra_flags).to_be_bytes());
        response[6..8].copy_from_slice(&u16::try_from(records.len()).expect("count").to_be_bytes());
        response[8..12].copy_from_slice(&[0, 0, 0, 0]);
        for data in records {
            response.extend_from_slice(&[0xc0, 12]);
            response.extend_from_slice(&qtype.to_be_bytes());
            response.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
            response.extend_from_slice(&u16::try_from(data.len()).expect("length").to_be_bytes());
            response.extend_from_slice(&data);
        }
        response
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|ip| ip.parse().expect("ip")).collect()
    }

    #[test]
    fn each_turn_gets_an_equal_share_of_what_is_left_and_the_last_ends_at_the_deadline() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(5);
        let cases = [(4, now + Duration::from_millis(1250)), (2, now + Duration::from_millis(2500)), (1, deadline)];
        for (turns_left, end) in cases {
            assert_eq!(turn_end(now, deadline, turns_left), end, "{turns_left} turns left");
        }
        assert_eq!(turn_end(deadline + Duration::from_secs(1), deadline, 2), deadline + Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_truncated_answer_is_asked_again_over_tcp_and_stray_datagrams_are_ignored() {
        let udp = UdpSocket::bind("127.0.0.1:0").await.expect("udp");
        let server = udp.local_addr().expect("address");
        let tcp = TcpListener::bind(server).await.expect("tcp on the same port");
        let addresses = ips(&["93.184.216.34", "2001:db8::1"]);
        let served = addresses.clone();
        tokio::spawn(async move {
            let mut buffer = [0u8; 512];
            for _ in 0..2 {
                let (length, peer) = udp.recv_from(&mut buffer).await.expect("query");
                let query = &buffer[..length];
                // A spoof with another ID first: it must not count.
                let mut stray = answer_to(query, 0, &ips(&["10.0.0.1", "fd00::1"]));
                stray[1] ^= 1;
                udp.send_to(&stray, peer).await.expect("stray");
                let is_a = query[length - 15] == 0 && query[length - 14] == 1;
                let flags = if is_a { 0x0200 } else { 0 };
                udp.send_to(&answer_to(query, flags, &served), peer).await.expect("answer");
            }
            let (mut stream, _) = tcp.accept().await.expect("tcp query");
            let length = usize::from(stream.read_u16().await.expect("length"));
            let mut query = vec![0u8; length];
            stream.read_exact(&mut query).await.expect("query");
            let response = answer_to(&query, 0, &served);
            let length = u16::try_from(response.len()).expect("length");
            stream.write_all(&length.to_be_bytes()).await.expect("length");
            stream.write_all(&response).await.expect("response");
        });
        let resolver = DnsResolver::new(&[server]).expect("resolver");
        assert_eq!(resolver.lookup(NAME, LOOKUP_TIMEOUT).await, Ok(addresses));
    }

    #[tokio::test]
    async fn a_lost_query_is_sent_again_on_the_same_socket() {
        let udp = UdpSocket::bind("127.0.0.1:0").await.expect("udp");
        let server = udp.local_addr().expect("address");
        let addresses = ips(&["93.184.216.34", "2001:db8::1"]);
        let served = addresses.clone();
        tokio::spawn(async move {
            let mut buffer = [0u8; 512];
            // The first datagram (the A query) is lost.
            udp.recv_from(&mut buffer).await.expect("lost query");
            loop {
                let (length, peer) = udp.recv_from(&mut buffer).await.expect("query");
                udp.send_to(&answer_to(&buffer[..length], 0, &served), peer).await.expect("answer");
            }
        });
        let resolver = DnsResolver::new(&[server]).expect("resolver");
        let started = std::time::Instant::now();
        assert_eq!(resolver.lookup(NAME, LOOKUP_TIMEOUT).await, Ok(addresses));
        assert!(started.elapsed() < 2 * RESEND_AFTER, "resent after the resend interval, not after a turn");
    }

    #[tokio::test]
    async fn a_burst_of_lookups_sends_no_more_than_the_bound_before_answers_come() {
        let udp = UdpSocket::bind("127.0.0.1:0").await.expect("udp");
        let server = udp.local_addr().expect("address");
        let addresses = ips(&["93.184.216.34", "2001:db8::1"]);
        let served = addresses.clone();
        let lookups = IN_FLIGHT + 40;
        let (counted, first_window) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut buffer = [0u8; 512];
            let mut held = Vec::new();
            // A slow nameserver: it answers nothing for 150 ms (well before any resend).
            let quiet_until = tokio::time::Instant::now() + Duration::from_millis(150);
            while let Ok(received) = tokio::time::timeout_at(quiet_until, udp.recv_from(&mut buffer)).await {
                let (length, peer) = received.expect("query");
                held.push((buffer[..length].to_vec(), peer));
            }
            let _ = counted.send(held.len());
            for (query, peer) in held {
                udp.send_to(&answer_to(&query, 0, &served), peer).await.expect("answer");
            }
            loop {
                let (length, peer) = udp.recv_from(&mut buffer).await.expect("query");
                udp.send_to(&answer_to(&buffer[..length], 0, &served), peer).await.expect("answer");
            }
        });
        let resolver = DnsResolver::new(&[server]).expect("resolver");
        let mut burst = tokio::task::JoinSet::new();
        for _ in 0..lookups {
            let resolver = resolver.clone();
            burst.spawn(async move { resolver.lookup(NAME, LOOKUP_TIMEOUT).await });
        }
        assert_eq!(first_window.await.expect("count"), 2 * IN_FLIGHT, "A and AAAA of the first places only");
        let mut resolved = 0;
        while let Some(lookup) = burst.join_next().await {
            assert_eq!(lookup.expect("joined"), Ok(addresses.clone()));
            resolved += 1;
        }
        assert_eq!(resolved, lookups, "the queued lookups ran once places were free");
    }

    #[tokio::test]
    async fn a_failing_nameserver_is_passed_over_and_a_missing_name_is_final() {
        let failing = UdpSocket::bind("127.0.0.1:0").await.expect("udp");
        let working = UdpSocket::bind("127.0.0.1:0").await.expect("udp");
        let servers = [failing.local_addr().expect("address"), working.local_addr().expect("address")];
        tokio::spawn(async move {
            let mut buffer = [0u8; 512];
            loop {
                let (length, peer) = failing.recv_from(&mut buffer).await.expect("query");
                let mut response = answer_to(&buffer[..length], 0, &[]);
                response[3] |= 2;
                failing.send_to(&response, peer).await.expect("SERVFAIL");
            }
        });
        tokio::spawn(async move {
            let mut buffer = [0u8; 512];
            loop {
                let (length, peer) = working.recv_from(&mut buffer).await.expect("query");
                let query = &buffer[..length];
                let name_is_known = query[13..16] == *b"api";
                let response = if name_is_known {
                    answer_to(query, 0, &ips(&["93.184.216.34"]))
                } else {
                    let mut response = answer_to(query, 0, &[]);
                    response[3] |= 3;
                    response
                };
                working.send_to(&response, peer).await.expect("answer");
            }
        });
        let resolver = DnsResolver::new(&servers).expect("resolver");
        assert_eq!(resolver.lookup(NAME, LOOKUP_TIMEOUT).await, Ok(ips(&["93.184.216.34"])));
        assert_eq!(resolver.lookup("gone.example.com.", LOOKUP_TIMEOUT).await, Err(LookupError::NoRecords));
        let only_failing = DnsResolver::new(&servers[..1]).expect("resolver");
        let Err(LookupError::Failed(message)) = only_failing.lookup(NAME, LOOKUP_TIMEOUT).await else {
            panic!("no failure")
        };
        assert!(message.contains("SERVFAIL") && message.contains(&servers[0].to_string()), "{message}");
        assert!(DnsResolver::new(&[]).is_err());
        assert!(matches!(resolver.lookup("not-qualified", LOOKUP_TIMEOUT).await, Err(LookupError::Failed(_))));
    }
}
