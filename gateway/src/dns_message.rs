//! The DNS messages of a tunnel's lookup: an A or AAAA query for one name, and a strict reading of
//! its response. hickory-proto writes and reads the wire format (labels, compression pointers,
//! record and data lengths); what counts is decided here, over its parsed `Message`. A response
//! counts only when its ID, its header and its one question (name, type, class) match the query;
//! its addresses count only when they are of the queried type and their owner is the queried name
//! or a name the answer's CNAME chain leads to from it. hickory's types stay inside this module.

use std::net::IpAddr;

use hickory_proto::ProtoError;
use hickory_proto::op::{Edns, Header, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, DecodeError};

/// The UDP payload size advertised with EDNS(0): the size recommended to avoid IP fragmentation,
/// and the size of the receive buffer.
const PAYLOAD: u16 = 1232;
pub const UDP_PAYLOAD: usize = PAYLOAD as usize;

/// A name's length on the wire, at most (RFC 1035 §3.1).
const MAX_NAME: usize = 255;
/// CNAME hops followed within one answer; real chains are two or three long.
const MAX_CHAIN: usize = 16;

/// Why a message cannot be built or read.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    #[error("{0:?} is not a fully qualified DNS name")]
    BadName(String),
    #[error("cannot encode the query: {source}")]
    Encode {
        #[source]
        source: ProtoError,
    },
    #[error("malformed DNS response: {source}")]
    Malformed {
        #[source]
        source: DecodeError,
    },
}

/// The record type a query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryType {
    A,
    Aaaa,
}

impl QueryType {
    fn record_type(self) -> RecordType {
        match self {
            QueryType::A => RecordType::A,
            QueryType::Aaaa => RecordType::AAAA,
        }
    }
}

/// A name a lookup asks for: fully qualified, ASCII letters, digits and hyphens only, lowercase.
#[derive(Debug, Clone)]
pub struct QueryName(Name);

impl QueryName {
    /// `fqdn` must end with a dot.
    pub fn parse(fqdn: &str) -> Result<Self, MessageError> {
        let bad = || MessageError::BadName(fqdn.to_owned());
        let labels = fqdn.strip_suffix('.').ok_or_else(bad)?;
        // Letters, digits and hyphens only: nothing an escape (hickory's text form reads `\.` and
        // `\000`) or a binary label could hide in.
        let plain = |label: &str| {
            (1..=63).contains(&label.len()) && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        // On the wire, a plain name is its text and one length byte more (the root's).
        if !labels.split('.').all(plain) || fqdn.len() + 1 > MAX_NAME {
            return Err(bad());
        }
        let name = Name::from_ascii(fqdn).map_err(|_| bad())?;
        Ok(Self(name.to_lowercase()))
    }
}

/// What a matching response says about the queried type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// At least one address, in the answer's order.
    Addresses(Vec<IpAddr>),
    /// NXDOMAIN, or NOERROR without an address of this type.
    NoRecords,
    /// The answer did not fit: ask again over TCP.
    Truncated,
    /// Any other response code (SERVFAIL, REFUSED…), extended by EDNS(0) when the response has it.
    ServerError(u16),
}

/// A recursive query (RD) for `qtype` records of `name`, with an EDNS(0) OPT record advertising
/// [`UDP_PAYLOAD`].
pub fn query(id: u16, name: &QueryName, qtype: QueryType) -> Result<Vec<u8>, MessageError> {
    let mut message = Message::new(id, MessageType::Query, OpCode::Query);
    message.metadata.recursion_desired = true;
    message.add_query(Query::query(name.0.clone(), qtype.record_type()));
    let mut edns = Edns::new();
    edns.set_max_payload(PAYLOAD);
    message.set_edns(edns);
    message.to_vec().map_err(|source| MessageError::Encode { source })
}

/// Reads `message` as the response to the query `id` for `qtype` records of `name`. `Ok(None)`:
/// not a response to that query (another ID, another question, not a response at all), to be
/// ignored. An error: a response to it that hickory cannot read whole.
pub fn read_response(
    message: &[u8],
    id: u16,
    name: &QueryName,
    qtype: QueryType,
) -> Result<Option<Answer>, MessageError> {
    // Whether the bytes answer this query is read from the header and the question alone: bytes
    // that do not are ignored however broken they are, so a stray or spoofed datagram that did
    // not guess the ID and the question costs time, never the lookup.
    let mut decoder = BinDecoder::new(message);
    let Ok(header) = Header::read(&mut decoder) else { return Ok(None) };
    let Header { metadata, counts } = header;
    if metadata.id != id
        || metadata.message_type != MessageType::Response
        || metadata.op_code != OpCode::Query
        || counts.queries != 1
    {
        return Ok(None);
    }
    let Ok(question) = Query::read(&mut decoder) else { return Ok(None) };
    // Name equality ignores ASCII case (hickory's `Name` compares that way).
    if *question.name() != name.0
        || question.query_type() != qtype.record_type()
        || question.query_class() != DNSClass::IN
    {
        return Ok(None);
    }
    // A truncated UDP answer may end in the middle of a record: it is not read further but asked
    // again over TCP.
    if metadata.truncation {
        return Ok(Some(Answer::Truncated));
    }
    // Every section must be readable, whatever the response code: a response we cannot read whole
    // is not trusted to say that the name does not exist either.
    let message = Message::from_vec(message).map_err(|source| MessageError::Malformed { source })?;
    // The response code as extended by the OPT record, if any (BADVERS is NOERROR in the header).
    match message.metadata.response_code {
        ResponseCode::NoError => {}
        ResponseCode::NXDomain => return Ok(Some(Answer::NoRecords)),
        other => return Ok(Some(Answer::ServerError(u16::from(other)))),
    }
    let found = chained_addresses(&message.answers, &name.0, qtype);
    Ok(Some(if found.is_empty() { Answer::NoRecords } else { Answer::Addresses(found) }))
}

/// The addresses of `qtype` among `answers` (class IN) whose owner is `name` or a name its CNAME
/// chain leads to, in the answer's order. Records outside the chain, and of any other type or
/// class, are ignored: a nameserver's answer may only speak for the name asked.
fn chained_addresses(answers: &[Record], name: &Name, qtype: QueryType) -> Vec<IpAddr> {
    let in_class = || answers.iter().filter(|record| record.dns_class == DNSClass::IN);
    let aliases: Vec<(&Name, &Name)> = in_class()
        .filter_map(|record| match &record.data {
            RData::CNAME(CNAME(target)) => Some((&record.name, target)),
            _ => None,
        })
        .collect();
    let chain = follow_chain(name, &aliases);
    in_class()
        .filter(|record| chain.contains(&&record.name))
        .filter_map(|record| match (&record.data, qtype) {
            (RData::A(A(v4)), QueryType::A) => Some(IpAddr::V4(*v4)),
            (RData::AAAA(AAAA(v6)), QueryType::Aaaa) => Some(IpAddr::V6(*v6)),
            _ => None,
        })
        .collect()
}

/// The names the answer's CNAME records lead to from `name`, `name` included, at most
/// [`MAX_CHAIN`] hops; a loop ends the chain.
fn follow_chain<'a>(name: &'a Name, aliases: &[(&'a Name, &'a Name)]) -> Vec<&'a Name> {
    let mut chain = vec![name];
    let mut current = name;
    while chain.len() <= MAX_CHAIN {
        let Some(&(_, target)) = aliases.iter().find(|(owner, _)| *owner == current) else { break };
        if chain.contains(&target) {
            break;
        }
        chain.push(target);
        current = target;
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &str = "api.example.com.";
    const HEADER: usize = 12;
    const TYPE_A: u16 = 1;
    const TYPE_CNAME: u16 = 5;
    const TYPE_AAAA: u16 = 28;
    const TYPE_OPT: u16 = 41;
    const CLASS_IN: u16 = 1;
    const RCODE_NXDOMAIN: u8 = 3;
    /// A pointer to the question's name.
    const TO_QUESTION: [u8; 2] = [0xc0, 12];

    /// `fqdn` in wire form, written here rather than by the code under test.
    fn wire(fqdn: &str) -> Vec<u8> {
        let mut wire = Vec::new();
        for label in fqdn.trim_end_matches('.').split('.') {
            wire.push(u8::try_from(label.len()).expect("label"));
            wire.extend_from_slice(label.as_bytes());
        }
        wire.push(0);
        wire
    }

    fn name() -> QueryName {
        QueryName::parse(NAME).expect("name")
    }

    fn read(message: &[u8], id: u16, qtype: QueryType) -> Result<Option<Answer>, MessageError> {
        read_response(message, id, &name(), qtype)
    }

    /// A response to a `qtype` query for NAME with `rcode` and `extra_flags` OR-ed into the flags,
    /// and these sections.
    fn message(id: u16, qtype: u16, rcode: u8, extra_flags: u16, sections: [&[Vec<u8>]; 3]) -> Vec<u8> {
        let mut message = Vec::new();
        message.extend_from_slice(&id.to_be_bytes());
        message.extend_from_slice(&(0x8180 | extra_flags | u16::from(rcode)).to_be_bytes());
        message.extend_from_slice(&[0, 1]);
        for section in sections {
            message.extend_from_slice(&u16::try_from(section.len()).expect("count").to_be_bytes());
        }
        message.extend_from_slice(&wire(NAME));
        message.extend_from_slice(&qtype.to_be_bytes());
        message.extend_from_slice(&CLASS_IN.to_be_bytes());
        for record in sections.concat() {
            message.extend_from_slice(&record);
        }
        message
    }

    /// A response with these answers only.
    fn response(id: u16, qtype: u16, rcode: u8, extra_flags: u16, answers: &[Vec<u8>]) -> Vec<u8> {
        message(id, qtype, rcode, extra_flags, [answers, &[], &[]])
    }

    /// A record of `class` owned by `owner` (raw wire bytes: a name or a pointer).
    fn record_of(owner: &[u8], rtype: u16, class: u16, data: &[u8]) -> Vec<u8> {
        let mut record = owner.to_vec();
        record.extend_from_slice(&rtype.to_be_bytes());
        record.extend_from_slice(&class.to_be_bytes());
        record.extend_from_slice(&[0, 0, 0, 60]);
        record.extend_from_slice(&u16::try_from(data.len()).expect("length").to_be_bytes());
        record.extend_from_slice(data);
        record
    }

    fn record(owner: &[u8], rtype: u16, data: &[u8]) -> Vec<u8> {
        record_of(owner, rtype, CLASS_IN, data)
    }

    /// An EDNS(0) OPT record whose extended response code bits are `rcode_high`.
    fn opt(rcode_high: u8) -> Vec<u8> {
        let mut record = vec![0];
        record.extend_from_slice(&TYPE_OPT.to_be_bytes());
        record.extend_from_slice(&PAYLOAD.to_be_bytes());
        record.extend_from_slice(&[rcode_high, 0, 0, 0, 0, 0]);
        record
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|ip| ip.parse().expect("ip")).collect()
    }

    #[test]
    fn names_are_lowercase_and_only_fully_qualified_and_plain() {
        let query = query(0, &QueryName::parse("A.b.").expect("name"), QueryType::A).expect("query");
        assert_eq!(&query[HEADER..HEADER + 5], b"\x01a\x01b\x00");
        for bad in ["a.b", "a..b.", ".", "a b.", "a\\.b.", "a\\000.b.", "a.\u{e9}.", &format!("{}.", "x".repeat(64))] {
            assert!(matches!(QueryName::parse(bad), Err(MessageError::BadName(_))), "{bad:?}");
        }
        let longest = format!("{}.{}.", vec!["y".repeat(63); 3].join("."), "z".repeat(61));
        assert!(QueryName::parse(&longest).is_ok(), "255 bytes on the wire");
        let long = format!("{}.", vec!["y".repeat(63); 4].join("."));
        assert!(QueryName::parse(&long).is_err(), "over 255 bytes");
    }

    #[test]
    fn a_query_is_one_recursive_question_with_edns_byte_for_byte() {
        let mut expected = vec![0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
        expected.extend_from_slice(&wire(NAME));
        expected.extend_from_slice(&[0, 28, 0, 1]);
        // OPT: root owner, the payload size as its class, no extended flags, no options.
        expected.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(query(0xbeef, &name(), QueryType::Aaaa).expect("query"), expected);
    }

    #[test]
    fn addresses_of_the_name_and_its_cname_chain_are_read_in_order() {
        let alias = wire("edge.cdn.example.net.");
        let records = [
            record(&TO_QUESTION, TYPE_CNAME, &alias),
            // The alias by pointer to where it first appeared (the CNAME data).
            record(
                &[0xc0, u8::try_from(HEADER + wire(NAME).len() + 4 + 12).expect("offset")],
                TYPE_A,
                &[93, 184, 216, 34],
            ),
            record(&alias, TYPE_A, &[93, 184, 216, 35]),
            // Not of the chain: ignored.
            record(&wire("other.example.org."), TYPE_A, &[10, 0, 0, 1]),
            // Of another type than asked: ignored.
            record(&TO_QUESTION, TYPE_AAAA, &[0; 16]),
            // Of another class: ignored.
            record_of(&TO_QUESTION, TYPE_A, 3, &[10, 0, 0, 2]),
        ];
        let message = response(7, TYPE_A, 0, 0, &records);
        let answer = read(&message, 7, QueryType::A).expect("valid");
        assert_eq!(answer, Some(Answer::Addresses(ips(&["93.184.216.34", "93.184.216.35"]))));
        let v6 = response(
            7,
            TYPE_AAAA,
            0,
            0,
            &[
                record(&TO_QUESTION, TYPE_AAAA, &[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
                record(&TO_QUESTION, TYPE_A, &[1, 2, 3, 4]),
            ],
        );
        assert_eq!(read(&v6, 7, QueryType::Aaaa).expect("valid"), Some(Answer::Addresses(ips(&["2001:db8::1"]))));
    }

    #[test]
    fn responses_to_other_queries_are_ignored_however_broken() {
        let records = [record(&TO_QUESTION, TYPE_A, &[1, 2, 3, 4])];
        let message = response(7, TYPE_A, 0, 0, &records);
        assert!(matches!(read(&message, 8, QueryType::A), Ok(None)), "another ID");
        assert!(matches!(read(&message, 7, QueryType::Aaaa), Ok(None)), "another type");
        let other = QueryName::parse("api.example.org.").expect("name");
        assert!(matches!(read_response(&message, 7, &other, QueryType::A), Ok(None)), "another name");
        let mut chaos = message.clone();
        chaos[HEADER + wire(NAME).len() + 3] = 3;
        assert!(matches!(read(&chaos, 7, QueryType::A), Ok(None)), "another class");
        let mut two_questions = message.clone();
        two_questions[5] = 2;
        assert!(matches!(read(&two_questions, 7, QueryType::A), Ok(None)), "two questions");
        let mut not_a_response = message.clone();
        not_a_response[2] &= 0x7f;
        assert!(matches!(read(&not_a_response, 7, QueryType::A), Ok(None)), "a query");
        let mut notify = message.clone();
        notify[2] |= 4 << 3;
        assert!(matches!(read(&notify, 7, QueryType::A), Ok(None)), "another opcode");
        assert!(matches!(read(&message[..11], 7, QueryType::A), Ok(None)), "no header");
        assert!(matches!(read(&message[..HEADER + 5], 7, QueryType::A), Ok(None)), "question cut short");
        // Broken after a question that is not ours: ignored, not an error.
        let mut spoof = response(8, TYPE_A, 0, 0, &[record(&[0xc0, 0xff], TYPE_A, &[1, 2, 3])]);
        assert!(matches!(read(&spoof, 7, QueryType::A), Ok(None)), "a broken datagram with another ID");
        spoof[0..2].copy_from_slice(&7u16.to_be_bytes());
        assert!(read(&spoof, 7, QueryType::A).is_err(), "the same with the query's ID");
        let mut upper = message.clone();
        upper[HEADER + 1] = b'A';
        assert!(matches!(read(&upper, 7, QueryType::A), Ok(Some(Answer::Addresses(_)))), "any case");
    }

    #[test]
    fn response_codes_and_truncation_are_told_apart() {
        let nx = response(1, TYPE_A, RCODE_NXDOMAIN, 0, &[]);
        assert_eq!(read(&nx, 1, QueryType::A).expect("valid"), Some(Answer::NoRecords));
        let empty = response(1, TYPE_A, 0, 0, &[]);
        assert_eq!(read(&empty, 1, QueryType::A).expect("valid"), Some(Answer::NoRecords));
        let servfail = response(1, TYPE_A, 2, 0, &[]);
        assert_eq!(read(&servfail, 1, QueryType::A).expect("valid"), Some(Answer::ServerError(2)));
        let truncated = response(1, TYPE_A, 0, 0x0200, &[]);
        assert_eq!(read(&truncated, 1, QueryType::A).expect("valid"), Some(Answer::Truncated));
        // A truncated UDP answer may stop in the middle of a record: still just truncated.
        let mut cut = response(1, TYPE_A, 0, 0x0200, &[record(&TO_QUESTION, TYPE_A, &[1, 2, 3, 4])]);
        cut.truncate(cut.len() - 3);
        assert_eq!(read(&cut, 1, QueryType::A).expect("valid"), Some(Answer::Truncated));
        // BADVERS (16): NOERROR in the header, 1 in the OPT record's extended bits. Not "no
        // records", which would end the lookup without asking another nameserver.
        let badvers = message(1, TYPE_A, 0, 0, [&[], &[], &[opt(1)]]);
        assert_eq!(read(&badvers, 1, QueryType::A).expect("valid"), Some(Answer::ServerError(16)));
        let with_opt = message(1, TYPE_A, 0, 0, [&[record(&TO_QUESTION, TYPE_A, &[1, 2, 3, 4])], &[], &[opt(0)]]);
        assert_eq!(read(&with_opt, 1, QueryType::A).expect("valid"), Some(Answer::Addresses(ips(&["1.2.3.4"]))));
    }

    #[test]
    fn broken_responses_to_the_query_are_malformed() {
        let a = |owner: &[u8]| record(owner, TYPE_A, &[1, 2, 3, 4]);
        // Owner "x" at this offset in the first answer record, then a pointer back to it.
        let first_record = u8::try_from(HEADER + wire(NAME).len() + 4).expect("offset");
        let broken_soa = record(&TO_QUESTION, 6, &[0xc0]);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("short A data", response(1, TYPE_A, 0, 0, &[record(&TO_QUESTION, TYPE_A, &[1, 2, 3])])),
            ("long A data", response(1, TYPE_A, 0, 0, &[record(&TO_QUESTION, TYPE_A, &[1, 2, 3, 4, 5])])),
            ("empty A data", response(1, TYPE_A, 0, 0, &[record(&TO_QUESTION, TYPE_A, &[])])),
            (
                "CNAME data longer than its name",
                response(1, TYPE_A, 0, 0, &[record(&TO_QUESTION, TYPE_CNAME, &[0, 0])]),
            ),
            ("forward pointer", response(1, TYPE_A, 0, 0, &[a(&[0xc0, 0xff])])),
            ("self pointer", response(1, TYPE_A, 0, 0, &[a(&[0xc0, first_record])])),
            ("pointer into its own name", response(1, TYPE_A, 0, 0, &[a(&[1, b'x', 0xc0, first_record])])),
            ("reserved label type", response(1, TYPE_A, 0, 0, &[a(&[0x40])])),
            ("OPT in the answer section", response(1, TYPE_A, 0, 0, &[opt(0)])),
            ("two OPT records", message(1, TYPE_A, 0, 0, [&[], &[], &[opt(0), opt(0)]])),
            (
                "a broken authority record",
                message(1, TYPE_A, 0, 0, [&[a(&TO_QUESTION)], std::slice::from_ref(&broken_soa), &[]]),
            ),
            (
                "NXDOMAIN with a broken authority record",
                message(1, TYPE_A, RCODE_NXDOMAIN, 0, [&[], &[broken_soa], &[]]),
            ),
        ];
        for (what, message) in cases {
            assert!(matches!(read(&message, 1, QueryType::A), Err(MessageError::Malformed { .. })), "{what}");
        }
        let mut missing = response(1, TYPE_A, 0, 0, &[]);
        missing[7] = 1;
        assert!(read(&missing, 1, QueryType::A).is_err(), "a counted record that is not there");
        let mut cut = response(1, TYPE_A, 0, 0, &[a(&TO_QUESTION)]);
        cut.truncate(cut.len() - 1);
        assert!(read(&cut, 1, QueryType::A).is_err(), "data cut short");
    }

    #[test]
    fn cname_loops_end() {
        let other = wire("loop.example.com.");
        let records = [
            record(&TO_QUESTION, TYPE_CNAME, &other),
            record(&other, TYPE_CNAME, &wire(NAME)),
            record(&other, TYPE_A, &[1, 1, 1, 1]),
        ];
        let message = response(3, TYPE_A, 0, 0, &records);
        assert_eq!(read(&message, 3, QueryType::A).expect("valid"), Some(Answer::Addresses(ips(&["1.1.1.1"]))));
    }

    #[test]
    fn a_cname_chain_is_followed_for_sixteen_hops_only() {
        let hop = |n: usize| wire(&format!("hop{n}.example.com."));
        let mut records = vec![record(&TO_QUESTION, TYPE_CNAME, &hop(1))];
        records.extend((1..20).map(|n| record(&hop(n), TYPE_CNAME, &hop(n + 1))));
        records.push(record(&hop(MAX_CHAIN), TYPE_A, &[10, 0, 0, 16]));
        records.push(record(&hop(MAX_CHAIN + 1), TYPE_A, &[10, 0, 0, 17]));
        let message = response(4, TYPE_A, 0, 0, &records);
        assert_eq!(read(&message, 4, QueryType::A).expect("valid"), Some(Answer::Addresses(ips(&["10.0.0.16"]))));
    }
}
