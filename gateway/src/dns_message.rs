//! The DNS wire format a tunnel's lookup needs, and no more: an A or AAAA query for one name, and
//! a strict reading of its response. A response counts only when its ID, its one question (name,
//! type, class) and its header match the query; its addresses count only when their owner is the
//! queried name or a name the answer's CNAME chain leads to from it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
const TYPE_CNAME: u16 = 5;
const TYPE_OPT: u16 = 41;
const CLASS_IN: u16 = 1;

/// The UDP payload size advertised with EDNS(0): the size recommended to avoid IP fragmentation,
/// and the size of the receive buffer.
pub const UDP_PAYLOAD: usize = 1232;

const HEADER: usize = 12;
const MAX_NAME: usize = 255;
/// CNAME hops followed within one answer; real chains are two or three long.
const MAX_CHAIN: usize = 16;

const RCODE_NOERROR: u8 = 0;
const RCODE_NXDOMAIN: u8 = 3;

/// Why a message cannot be built or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error("{0:?} is not a fully qualified DNS name")]
    BadName(String),
    #[error("malformed DNS response: {0}")]
    Malformed(&'static str),
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
    /// Any other response code (SERVFAIL, REFUSED…).
    ServerError(u8),
}

/// `fqdn` (ending with a dot) in wire form, lowercase: length-prefixed labels and the root.
pub fn encode_name(fqdn: &str) -> Result<Vec<u8>, MessageError> {
    let bad = || MessageError::BadName(fqdn.to_owned());
    let labels = fqdn.strip_suffix('.').ok_or_else(bad)?;
    let mut wire = Vec::with_capacity(labels.len() + 2);
    for label in labels.split('.') {
        let length = u8::try_from(label.len()).map_err(|_| bad())?;
        // Letters, digits and hyphens only: nothing a compression pointer or escape could hide in.
        if length == 0 || length > 63 || !label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(bad());
        }
        wire.push(length);
        wire.extend(label.bytes().map(|b| b.to_ascii_lowercase()));
    }
    wire.push(0);
    if wire.len() > MAX_NAME {
        return Err(bad());
    }
    Ok(wire)
}

/// A recursive query (RD) for `qtype` records of `name` (wire form), with an EDNS(0) OPT record.
pub fn query(id: u16, name: &[u8], qtype: u16) -> Vec<u8> {
    let mut message = Vec::with_capacity(HEADER + name.len() + 4 + 11);
    message.extend_from_slice(&id.to_be_bytes());
    // QR=0, opcode QUERY, RD=1; one question, one additional record (the OPT).
    message.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]);
    message.extend_from_slice(name);
    message.extend_from_slice(&qtype.to_be_bytes());
    message.extend_from_slice(&CLASS_IN.to_be_bytes());
    // OPT: root owner, the payload size as its class, no extended flags, no options.
    message.push(0);
    message.extend_from_slice(&TYPE_OPT.to_be_bytes());
    message.extend_from_slice(&(UDP_PAYLOAD as u16).to_be_bytes());
    message.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    message
}

/// Reads `message` as the response to the query `id` for `qtype` records of `name` (wire form,
/// lowercase). `Ok(None)`: not a response to that query (another ID, another question, not a
/// response at all), to be ignored. An error: a response to it that breaks the format.
pub fn read_response(message: &[u8], id: u16, name: &[u8], qtype: u16) -> Result<Option<Answer>, MessageError> {
    let Some(header) = message.get(..HEADER) else { return Ok(None) };
    let flags = u16::from_be_bytes([header[2], header[3]]);
    let is_response = flags & 0x8000 != 0;
    let opcode = (flags >> 11) & 0x0f;
    if u16::from_be_bytes([header[0], header[1]]) != id || !is_response || opcode != 0 {
        return Ok(None);
    }
    if count(header, 4) != 1 || !question_matches(message, name, qtype) {
        return Ok(None);
    }
    let truncated = flags & 0x0200 != 0;
    if truncated {
        return Ok(Some(Answer::Truncated));
    }
    let rcode = (flags & 0x000f) as u8;
    match rcode {
        RCODE_NOERROR => {}
        RCODE_NXDOMAIN => return Ok(Some(Answer::NoRecords)),
        other => return Ok(Some(Answer::ServerError(other))),
    }
    let mut offset = HEADER + name.len() + 4;
    let mut aliases: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut addresses: Vec<(Vec<u8>, IpAddr)> = Vec::new();
    for _ in 0..count(header, 6) {
        let (owner, after_name) = read_name(message, offset)?;
        let fixed = message.get(after_name..after_name + 10).ok_or(MessageError::Malformed("record cut short"))?;
        let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
        let class = u16::from_be_bytes([fixed[2], fixed[3]]);
        let length = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
        let data_start = after_name + 10;
        let data =
            message.get(data_start..data_start + length).ok_or(MessageError::Malformed("record data cut short"))?;
        offset = data_start + length;
        if class != CLASS_IN {
            continue;
        }
        match rtype {
            TYPE_CNAME => {
                let (target, end) = read_name(message, data_start)?;
                if end != offset {
                    return Err(MessageError::Malformed("CNAME data length"));
                }
                aliases.push((owner, target));
            }
            TYPE_A if qtype == TYPE_A => {
                let octets: [u8; 4] = data.try_into().map_err(|_| MessageError::Malformed("A data length"))?;
                addresses.push((owner, IpAddr::V4(Ipv4Addr::from(octets))));
            }
            TYPE_AAAA if qtype == TYPE_AAAA => {
                let octets: [u8; 16] = data.try_into().map_err(|_| MessageError::Malformed("AAAA data length"))?;
                addresses.push((owner, IpAddr::V6(Ipv6Addr::from(octets))));
            }
            _ => {}
        }
    }
    let chain = follow_chain(name, &aliases);
    let found: Vec<IpAddr> =
        addresses.into_iter().filter(|(owner, _)| chain.iter().any(|link| link == owner)).map(|(_, ip)| ip).collect();
    Ok(Some(if found.is_empty() { Answer::NoRecords } else { Answer::Addresses(found) }))
}

/// The names the answer's CNAME records lead to from `name`, `name` included, bounded.
fn follow_chain<'a>(name: &'a [u8], aliases: &'a [(Vec<u8>, Vec<u8>)]) -> Vec<&'a [u8]> {
    let mut chain = vec![name];
    let mut current = name;
    while chain.len() <= MAX_CHAIN {
        let Some((_, target)) = aliases.iter().find(|(owner, _)| owner.as_slice() == current) else { break };
        if chain.contains(&target.as_slice()) {
            break;
        }
        chain.push(target);
        current = target;
    }
    chain
}

fn count(header: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([header[at], header[at + 1]])
}

/// Whether the question right after the header is exactly `name` (any case), `qtype`, class IN.
fn question_matches(message: &[u8], name: &[u8], qtype: u16) -> bool {
    let Some(question) = message.get(HEADER..HEADER + name.len() + 4) else { return false };
    let (asked, rest) = question.split_at(name.len());
    asked.eq_ignore_ascii_case(name) && rest[..2] == qtype.to_be_bytes() && rest[2..] == CLASS_IN.to_be_bytes()
}

/// The name at `offset` in wire form, lowercase, following compression pointers (each must point
/// before itself, so they cannot loop); and the offset after it where it began.
fn read_name(message: &[u8], offset: usize) -> Result<(Vec<u8>, usize), MessageError> {
    let malformed = MessageError::Malformed;
    let mut name = Vec::with_capacity(32);
    let mut position = offset;
    let mut end = None;
    loop {
        let length = *message.get(position).ok_or(malformed("name cut short"))?;
        match length {
            0 => {
                name.push(0);
                return Ok((name, end.unwrap_or(position + 1)));
            }
            1..=63 => {
                let label = message
                    .get(position + 1..position + 1 + usize::from(length))
                    .ok_or(malformed("label cut short"))?;
                name.push(length);
                name.extend(label.iter().map(u8::to_ascii_lowercase));
                if name.len() + 1 > MAX_NAME {
                    return Err(malformed("name too long"));
                }
                position += 1 + usize::from(length);
            }
            0xc0..=0xff => {
                let low = *message.get(position + 1).ok_or(malformed("pointer cut short"))?;
                let target = usize::from(u16::from_be_bytes([length & 0x3f, low]));
                if target >= position {
                    return Err(malformed("compression pointer does not point back"));
                }
                end.get_or_insert(position + 2);
                position = target;
            }
            _ => return Err(malformed("reserved label type")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &str = "api.example.com.";

    fn name() -> Vec<u8> {
        encode_name(NAME).expect("name")
    }

    /// A response to `query(id, NAME, qtype)` with `rcode`, `flags` OR-ed in, and these records.
    fn response(id: u16, qtype: u16, rcode: u8, extra_flags: u16, records: &[Vec<u8>]) -> Vec<u8> {
        let mut message = Vec::new();
        message.extend_from_slice(&id.to_be_bytes());
        message.extend_from_slice(&(0x8180 | extra_flags | u16::from(rcode)).to_be_bytes());
        message.extend_from_slice(&[0, 1]);
        message.extend_from_slice(&u16::try_from(records.len()).expect("count").to_be_bytes());
        message.extend_from_slice(&[0, 0, 0, 0]);
        message.extend_from_slice(&name());
        message.extend_from_slice(&qtype.to_be_bytes());
        message.extend_from_slice(&CLASS_IN.to_be_bytes());
        for record in records {
            message.extend_from_slice(record);
        }
        message
    }

    /// A record owned by `owner` (raw wire bytes: a name or a pointer).
    fn record(owner: &[u8], rtype: u16, data: &[u8]) -> Vec<u8> {
        let mut record = owner.to_vec();
        record.extend_from_slice(&rtype.to_be_bytes());
        record.extend_from_slice(&CLASS_IN.to_be_bytes());
        record.extend_from_slice(&[0, 0, 0, 60]);
        record.extend_from_slice(&u16::try_from(data.len()).expect("length").to_be_bytes());
        record.extend_from_slice(data);
        record
    }

    /// A pointer to the question's name.
    const TO_QUESTION: [u8; 2] = [0xc0, 12];

    #[test]
    fn names_are_encoded_lowercase_and_only_when_fully_qualified_and_plain() {
        assert_eq!(encode_name("A.b.").expect("name"), b"\x01a\x01b\x00");
        for bad in ["a.b", "a..b.", ".", "a b.", "a\\.b.", "a.\u{e9}.", &format!("{}.", "x".repeat(64))] {
            assert!(encode_name(bad).is_err(), "{bad:?}");
        }
        let long = format!("{}.", vec!["y".repeat(63); 4].join("."));
        assert!(encode_name(&long).is_err(), "over 255 bytes");
    }

    #[test]
    fn a_query_asks_one_question_with_edns() {
        let message = query(0xbeef, &name(), TYPE_AAAA);
        assert_eq!(&message[..4], &[0xbe, 0xef, 0x01, 0x00]);
        assert_eq!(&message[4..12], &[0, 1, 0, 0, 0, 0, 0, 1]);
        assert!(question_matches(&message, &name(), TYPE_AAAA));
        assert_eq!(message.len(), HEADER + name().len() + 4 + 11);
    }

    #[test]
    fn addresses_of_the_name_and_its_cname_chain_are_read_in_order() {
        let alias = encode_name("edge.cdn.example.net.").expect("name");
        let records = [
            record(&TO_QUESTION, TYPE_CNAME, &alias),
            // The alias by pointer to where it first appeared (the CNAME data).
            record(&[0xc0, u8::try_from(HEADER + name().len() + 4 + 12).expect("offset")], TYPE_A, &[93, 184, 216, 34]),
            record(&alias, TYPE_A, &[93, 184, 216, 35]),
            // Not of the chain: ignored.
            record(&encode_name("other.example.org.").expect("name"), TYPE_A, &[10, 0, 0, 1]),
            // Of another type than asked: ignored.
            record(&TO_QUESTION, TYPE_AAAA, &[0; 16]),
        ];
        let message = response(7, TYPE_A, 0, 0, &records);
        let answer = read_response(&message, 7, &name(), TYPE_A).expect("valid");
        let expected = vec!["93.184.216.34".parse().expect("ip"), "93.184.216.35".parse().expect("ip")];
        assert_eq!(answer, Some(Answer::Addresses(expected)));
    }

    #[test]
    fn responses_to_other_queries_are_ignored() {
        let records = [record(&TO_QUESTION, TYPE_A, &[1, 2, 3, 4])];
        let message = response(7, TYPE_A, 0, 0, &records);
        assert_eq!(read_response(&message, 8, &name(), TYPE_A), Ok(None), "another ID");
        assert_eq!(read_response(&message, 7, &name(), TYPE_AAAA), Ok(None), "another type");
        let other = encode_name("api.example.org.").expect("name");
        assert_eq!(read_response(&message, 7, &other, TYPE_A), Ok(None), "another name");
        let mut not_a_response = message.clone();
        not_a_response[2] &= 0x7f;
        assert_eq!(read_response(&not_a_response, 7, &name(), TYPE_A), Ok(None), "a query");
        assert_eq!(read_response(&message[..11], 7, &name(), TYPE_A), Ok(None), "no header");
        let mut upper = message.clone();
        upper[HEADER + 1] = b'A';
        assert!(matches!(read_response(&upper, 7, &name(), TYPE_A), Ok(Some(Answer::Addresses(_)))), "any case");
    }

    #[test]
    fn response_codes_and_truncation_are_told_apart() {
        let nx = response(1, TYPE_A, RCODE_NXDOMAIN, 0, &[]);
        assert_eq!(read_response(&nx, 1, &name(), TYPE_A), Ok(Some(Answer::NoRecords)));
        let empty = response(1, TYPE_A, 0, 0, &[]);
        assert_eq!(read_response(&empty, 1, &name(), TYPE_A), Ok(Some(Answer::NoRecords)));
        let servfail = response(1, TYPE_A, 2, 0, &[]);
        assert_eq!(read_response(&servfail, 1, &name(), TYPE_A), Ok(Some(Answer::ServerError(2))));
        let truncated = response(1, TYPE_A, 0, 0x0200, &[]);
        assert_eq!(read_response(&truncated, 1, &name(), TYPE_A), Ok(Some(Answer::Truncated)));
    }

    #[test]
    fn broken_responses_to_the_query_are_errors() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("short A data", response(1, TYPE_A, 0, 0, &[record(&TO_QUESTION, TYPE_A, &[1, 2, 3])])),
            ("forward pointer", response(1, TYPE_A, 0, 0, &[record(&[0xc0, 0xff], TYPE_A, &[1, 2, 3, 4])])),
            ("self pointer", response(1, TYPE_A, 0, 0, &[record(&[0xc0, 33], TYPE_A, &[1, 2, 3, 4])])),
            ("reserved label", response(1, TYPE_A, 0, 0, &[record(&[0x40], TYPE_A, &[1, 2, 3, 4])])),
        ];
        for (what, message) in cases {
            assert!(read_response(&message, 1, &name(), TYPE_A).is_err(), "{what}");
        }
        let mut missing = response(1, TYPE_A, 0, 0, &[]);
        missing[7] = 1;
        assert!(read_response(&missing, 1, &name(), TYPE_A).is_err(), "a counted record that is not there");
        let mut cut = response(1, TYPE_A, 0, 0, &[record(&TO_QUESTION, TYPE_A, &[1, 2, 3, 4])]);
        cut.truncate(cut.len() - 1);
        assert!(read_response(&cut, 1, &name(), TYPE_A).is_err(), "data cut short");
    }

    #[test]
    fn cname_loops_end() {
        let other = encode_name("loop.example.com.").expect("name");
        let records = [
            record(&TO_QUESTION, TYPE_CNAME, &other),
            record(&other, TYPE_CNAME, &name()),
            record(&other, TYPE_A, &[1, 1, 1, 1]),
        ];
        let message = response(3, TYPE_A, 0, 0, &records);
        let answer = read_response(&message, 3, &name(), TYPE_A).expect("valid");
        assert_eq!(answer, Some(Answer::Addresses(vec!["1.1.1.1".parse().expect("ip")])));
    }
}
