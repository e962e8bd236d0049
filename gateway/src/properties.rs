//! The properties the gateway's parsers of untrusted bytes hold for every input: the fuzz targets
//! (`fuzz/`) check them on generated inputs, and `tests/fuzz_corpus.rs` checks them on the
//! committed corpus (`fuzz/seeds/`) in every test run. Each panics when its property fails.

use crate::client_hello::{Limits, Progress, inspect};
use crate::dns_message::{Answer, QueryName, QueryType, read_response};
use crate::request::{Head, canonical_host, parse_head};

/// The host the ClientHello and DNS properties ask about.
pub const HOST: &str = "api.example.com";

/// The ClientHello path as the gateway drives it: bytes arrive in chunks (the first byte picks
/// the chunk size) and `inspect` runs on every prefix. Never a panic; a `Valid` answer names the
/// expected host, covers no more bytes than it was given, and is reproduced by exactly those.
pub fn client_hello(data: &[u8]) {
    let Some((&chunk, bytes)) = data.split_first() else { return };
    let chunk = usize::from(chunk).max(1);
    let limits = Limits::default();
    let mut end = 0;
    while end < bytes.len() {
        end = (end + chunk).min(bytes.len());
        match inspect(&bytes[..end], HOST, limits) {
            Progress::NeedMore => continue,
            Progress::Refused(_) => return,
            Progress::Valid { sni, bytes: used } => {
                assert!(sni.eq_ignore_ascii_case(HOST), "valid for another host: {sni}");
                assert!(used <= end, "claims {used} of {end} bytes");
                assert_eq!(inspect(&bytes[..used], HOST, limits), Progress::Valid { sni, bytes: used });
                return;
            }
        }
    }
}

/// The CONNECT head parser: never a panic, and a complete head yields a canonical host that the
/// host rules accept again, with the head ending inside the input.
pub fn connect_head(data: &[u8]) {
    if let Head::Complete { host, end } = parse_head(data) {
        assert!(end <= data.len());
        assert_eq!(canonical_host(&host).as_deref(), Ok(host.as_str()));
    }
}

/// A DNS response read as the answer to a query for [`HOST`] (the first byte's low bit picks A
/// or AAAA; the query ID is the message's own, so the reader gets past it): never a panic; the
/// addresses it accepts are of the queried family and there is at least one; the same bytes read
/// the same way twice (the same answer, or the same error).
pub fn dns_response(data: &[u8]) {
    let Some((&pick, message)) = data.split_first() else { return };
    let qtype = if pick & 1 == 0 { QueryType::A } else { QueryType::Aaaa };
    let id = message.get(..2).map_or(0, |id| u16::from_be_bytes([id[0], id[1]]));
    let Ok(name) = QueryName::parse(&format!("{HOST}.")) else { return };
    let read = read_response(message, id, &name, qtype);
    if let Ok(Some(Answer::Addresses(addresses))) = &read {
        assert!(!addresses.is_empty(), "an answer of no address");
        let family_ok = |a: &std::net::IpAddr| if qtype == QueryType::A { a.is_ipv4() } else { a.is_ipv6() };
        assert!(addresses.iter().all(family_ok), "an address of the other family: {addresses:?}");
    }
    let again = read_response(message, id, &name, qtype);
    let outcome = |read: &Result<Option<Answer>, _>| read.as_ref().map_err(ToString::to_string).cloned();
    assert_eq!(outcome(&read), outcome(&again), "read twice, read differently");
}
