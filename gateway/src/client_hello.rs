//! The ClientHello validator, run on the bytes a client sends after `200 Connection
//! Established` and before anything reaches upstream: a first-byte gate, bounded reassembly of
//! handshake records, a strict parse of the ClientHello (every length must account for its bytes
//! exactly; tls-parser silently ignores trailing junk, so this parser is our own), exactly one
//! `host_name` SNI equal to the CONNECT host, no duplicate extensions, no ECH.

use roundtable_specs::egress::GatewayReason;

/// Why a ClientHello is refused: the post-200 reason codes (docs/gateway.md lists each with its
/// TLS alert).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    NotTls,
    TlsRecordTooLarge,
    ClientHelloTooLarge,
    NotClientHello,
    ClientHelloMalformed,
    TlsVersionUnsupported,
    SniMissing,
    SniInvalid,
    SniMultiple,
    DuplicateExtension,
    SniMismatch,
    EchPresent,
}

/// The reason code of each refusal.
impl From<Refusal> for GatewayReason {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::NotTls => GatewayReason::NotTls,
            Refusal::TlsRecordTooLarge => GatewayReason::TlsRecordTooLarge,
            Refusal::ClientHelloTooLarge => GatewayReason::ClientHelloTooLarge,
            Refusal::NotClientHello => GatewayReason::NotClientHello,
            Refusal::ClientHelloMalformed => GatewayReason::ClientHelloMalformed,
            Refusal::TlsVersionUnsupported => GatewayReason::TlsVersionUnsupported,
            Refusal::SniMissing => GatewayReason::SniMissing,
            Refusal::SniInvalid => GatewayReason::SniInvalid,
            Refusal::SniMultiple => GatewayReason::SniMultiple,
            Refusal::DuplicateExtension => GatewayReason::DuplicateExtension,
            Refusal::SniMismatch => GatewayReason::SniMismatch,
            Refusal::EchPresent => GatewayReason::EchPresent,
        }
    }
}

/// Where inspection stands after the bytes seen so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Read more (the caller bounds time and bytes).
    NeedMore,
    /// A valid ClientHello for the expected host, carried in the first `bytes` bytes.
    Valid {
        sni: String,
        bytes: usize,
    },
    Refused(Refusal),
}

/// Bounds on what is buffered before upstream is contacted.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_handshake_bytes: usize,
    pub max_records: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_handshake_bytes: 16 * 1024, max_records: 5 }
    }
}

const HANDSHAKE: u8 = 0x16;
const CLIENT_HELLO: u8 = 0x01;
const MAX_RECORD: usize = 16 * 1024;
const EXT_SERVER_NAME: u16 = 0x0000;
const EXT_SUPPORTED_VERSIONS: u16 = 0x002b;
/// Encrypted ClientHello, ECH outer extensions, and the legacy ESNI draft.
const ECH_TYPES: [u16; 3] = [0xfe0d, 0xfd00, 0xffce];

/// A cursor that refuses to read past its end.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Refusal> {
        if self.bytes.len() < n {
            return Err(Refusal::ClientHelloMalformed);
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, Refusal> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, Refusal> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn vec_u8(&mut self) -> Result<&'a [u8], Refusal> {
        let n = usize::from(self.u8()?);
        self.take(n)
    }

    fn vec_u16(&mut self) -> Result<&'a [u8], Refusal> {
        let n = usize::from(self.u16()?);
        self.take(n)
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Inspects the bytes received so far for a tunnel to `expected_host`.
pub fn inspect(buffer: &[u8], expected_host: &str, limits: Limits) -> Progress {
    // First-byte gate: anything but a TLS handshake record is refused at once (a parser would
    // otherwise wait for kilobytes of `GET / HTTP/1.1`).
    match buffer {
        [] => return Progress::NeedMore,
        [first, ..] if *first != HANDSHAKE => return Progress::Refused(Refusal::NotTls),
        [_, second, ..] if *second != 0x03 => return Progress::Refused(Refusal::NotTls),
        _ => {}
    }
    let mut handshake = Vec::new();
    let mut offset = 0;
    let mut records = 0;
    loop {
        let Some(header) = buffer.get(offset..offset + 5) else { return Progress::NeedMore };
        if header[0] != HANDSHAKE {
            return Progress::Refused(Refusal::ClientHelloMalformed);
        }
        if header[1] != 0x03 {
            return Progress::Refused(Refusal::NotTls);
        }
        let length = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if length > MAX_RECORD {
            return Progress::Refused(Refusal::TlsRecordTooLarge);
        }
        if length == 0 {
            return Progress::Refused(Refusal::ClientHelloMalformed);
        }
        records += 1;
        if records > limits.max_records || handshake.len() + length > limits.max_handshake_bytes + 4 {
            return Progress::Refused(Refusal::ClientHelloTooLarge);
        }
        let Some(body) = buffer.get(offset + 5..offset + 5 + length) else { return Progress::NeedMore };
        handshake.extend_from_slice(body);
        offset += 5 + length;
        if handshake.len() < 4 {
            continue;
        }
        if handshake[0] != CLIENT_HELLO {
            return Progress::Refused(Refusal::NotClientHello);
        }
        let hello_length =
            (usize::from(handshake[1]) << 16) | (usize::from(handshake[2]) << 8) | usize::from(handshake[3]);
        if hello_length > limits.max_handshake_bytes {
            return Progress::Refused(Refusal::ClientHelloTooLarge);
        }
        match (4 + hello_length).cmp(&handshake.len()) {
            std::cmp::Ordering::Greater => continue,
            // Another handshake message after the ClientHello in the same flight.
            std::cmp::Ordering::Less => return Progress::Refused(Refusal::ClientHelloMalformed),
            std::cmp::Ordering::Equal => {}
        }
        return match validate(&handshake[4..], expected_host) {
            Ok(sni) => Progress::Valid { sni, bytes: offset },
            Err(refusal) => Progress::Refused(refusal),
        };
    }
}

/// Validates a ClientHello body (without its 4-byte handshake header).
fn validate(body: &[u8], expected_host: &str) -> Result<String, Refusal> {
    let mut hello = Reader { bytes: body };
    let legacy_version = hello.u16()?;
    hello.take(32)?; // random
    let session_id = hello.vec_u8()?;
    if session_id.len() > 32 {
        return Err(Refusal::ClientHelloMalformed);
    }
    let ciphers = hello.vec_u16()?;
    if ciphers.is_empty() || ciphers.len() % 2 != 0 {
        return Err(Refusal::ClientHelloMalformed);
    }
    if hello.vec_u8()?.is_empty() {
        return Err(Refusal::ClientHelloMalformed);
    }
    if hello.is_empty() {
        // No extensions at all: no SNI.
        return Err(Refusal::SniMissing);
    }
    let mut extensions = Reader { bytes: hello.vec_u16()? };
    if !hello.is_empty() {
        return Err(Refusal::ClientHelloMalformed);
    }
    let mut seen = Vec::new();
    let mut sni = None;
    let mut versions_ok = legacy_version == 0x0303;
    while !extensions.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec_u16()?;
        if seen.contains(&kind) {
            return Err(Refusal::DuplicateExtension);
        }
        seen.push(kind);
        if ECH_TYPES.contains(&kind) {
            return Err(Refusal::EchPresent);
        }
        match kind {
            EXT_SERVER_NAME => sni = Some(server_name(data)?),
            EXT_SUPPORTED_VERSIONS => {
                let mut list = Reader { bytes: data };
                let versions = list.vec_u8()?;
                if !list.is_empty() || versions.len() % 2 != 0 {
                    return Err(Refusal::ClientHelloMalformed);
                }
                versions_ok = versions.chunks(2).any(|v| v == [0x03, 0x04] || v == [0x03, 0x03]);
            }
            _ => {}
        }
    }
    if !versions_ok {
        return Err(Refusal::TlsVersionUnsupported);
    }
    let sni = sni.ok_or(Refusal::SniMissing)?;
    if !sni.eq_ignore_ascii_case(expected_host) {
        return Err(Refusal::SniMismatch);
    }
    Ok(sni.to_ascii_lowercase())
}

/// The single `host_name` of a server_name extension, strictly parsed.
fn server_name(data: &[u8]) -> Result<String, Refusal> {
    let mut extension = Reader { bytes: data };
    if extension.is_empty() {
        return Err(Refusal::SniMissing);
    }
    let mut list = Reader { bytes: extension.vec_u16()? };
    if !extension.is_empty() {
        return Err(Refusal::ClientHelloMalformed);
    }
    let mut names = Vec::new();
    while !list.is_empty() {
        let name_type = list.u8()?;
        let name = list.vec_u16()?;
        if name_type != 0 {
            return Err(Refusal::SniInvalid);
        }
        names.push(name);
    }
    match names.as_slice() {
        [] => Err(Refusal::SniMissing),
        [name] => valid_host(name).ok_or(Refusal::SniInvalid),
        _ => Err(Refusal::SniMultiple),
    }
}

/// A DNS host name as SNI must carry it: ASCII letters, digits, `-` and `.`, labels of 1–63,
/// at most 253 bytes, no trailing dot, not an IP literal.
fn valid_host(name: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(name).ok()?;
    if text.is_empty() || text.len() > 253 || text.ends_with('.') {
        return None;
    }
    let labels: Vec<&str> = text.split('.').collect();
    for label in &labels {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return None;
        }
    }
    let last = labels.last()?;
    if last.bytes().all(|b| b.is_ascii_digit()) || last.to_ascii_lowercase().starts_with("0x") {
        return None;
    }
    Some(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::craft::{Hello, sni_ext};

    const HOST: &str = "api.example.com";

    fn check(bytes: &[u8]) -> Progress {
        inspect(bytes, HOST, Limits::default())
    }

    #[test]
    fn a_valid_hello_passes_whole_or_split_and_waits_when_short() {
        let hello = Hello::for_host(HOST).records(16 * 1024);
        assert_eq!(check(&hello), Progress::Valid { sni: HOST.into(), bytes: hello.len() });
        let split = Hello::for_host(HOST).records(40);
        assert_eq!(check(&split), Progress::Valid { sni: HOST.into(), bytes: split.len() });
        for cut in [1, 2, 3, 5, 9, split.len() - 1] {
            assert_eq!(check(&split[..cut]), Progress::NeedMore, "prefix of {cut} bytes");
        }
        // Bytes after the hello (0-RTT data) are left to replay, not inspected.
        let mut with_early_data = hello.clone();
        with_early_data.extend([0x17, 0x03, 0x03, 0x00, 0x01, 0xff]);
        assert_eq!(check(&with_early_data), Progress::Valid { sni: HOST.into(), bytes: hello.len() });
        // SNI case does not matter; it is compared case-insensitively.
        let upper = Hello::for_host("API.Example.com").records(4096);
        assert_eq!(check(&upper), Progress::Valid { sni: HOST.into(), bytes: upper.len() });
    }

    #[test]
    fn every_malformed_or_hostile_hello_is_refused_with_its_reason() {
        let with = |change: &dyn Fn(&mut Hello)| Hello::changed(HOST, change);
        let mut oversized_record = Hello::for_host(HOST).records(16 * 1024);
        oversized_record[3..5].copy_from_slice(&0x4801u16.to_be_bytes());
        let mut server_hello = Hello::for_host(HOST).records(16 * 1024);
        server_hello[5] = 0x02;
        let cases: Vec<(&str, Vec<u8>, Refusal)> = vec![
            ("plain HTTP", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), Refusal::NotTls),
            ("SSLv2-ish second byte", vec![0x16, 0x02, 0x00], Refusal::NotTls),
            ("record too large", oversized_record, Refusal::TlsRecordTooLarge),
            ("not a ClientHello", server_hello, Refusal::NotClientHello),
            (
                "two names in the list",
                with(&|h| h.extensions[0].1 = sni_ext(&[(0, HOST.as_bytes()), (0, b"evil.com")])),
                Refusal::SniMultiple,
            ),
            (
                "two server_name extensions",
                with(&|h| h.extensions.push((0x0000, sni_ext(&[(0, b"evil.com")])))),
                Refusal::DuplicateExtension,
            ),
            ("empty list", with(&|h| h.extensions[0].1 = sni_ext(&[])), Refusal::SniMissing),
            ("empty extension", with(&|h| h.extensions[0].1 = Vec::new()), Refusal::SniMissing),
            (
                "no server_name",
                with(&|h| {
                    h.extensions.remove(0);
                }),
                Refusal::SniMissing,
            ),
            ("name type 7", with(&|h| h.extensions[0].1 = sni_ext(&[(7, HOST.as_bytes())])), Refusal::SniInvalid),
            (
                "NUL in the name",
                with(&|h| h.extensions[0].1 = sni_ext(&[(0, b"api.example.com\0.evil")])),
                Refusal::SniInvalid,
            ),
            ("IP literal", with(&|h| h.extensions[0].1 = sni_ext(&[(0, b"127.0.0.1")])), Refusal::SniInvalid),
            ("trailing dot", with(&|h| h.extensions[0].1 = sni_ext(&[(0, b"api.example.com.")])), Refusal::SniInvalid),
            ("junk after the list", with(&|h| h.extensions[0].1.extend([0, 0, 1])), Refusal::ClientHelloMalformed),
            ("bytes after the extensions", with(&|h| h.trailing_body = vec![0, 0]), Refusal::ClientHelloMalformed),
            ("another host", with(&|h| h.extensions[0].1 = sni_ext(&[(0, b"evil.example.com")])), Refusal::SniMismatch),
            ("ECH", with(&|h| h.extensions.push((0xfe0d, vec![0; 8]))), Refusal::EchPresent),
            ("ECH outer extensions", with(&|h| h.extensions.push((0xfd00, vec![0; 2]))), Refusal::EchPresent),
            ("legacy ESNI", with(&|h| h.extensions.push((0xffce, vec![0; 2]))), Refusal::EchPresent),
            (
                "TLS 1.0 only",
                with(&|h| {
                    h.version = 0x0301;
                    h.extensions.remove(1);
                }),
                Refusal::TlsVersionUnsupported,
            ),
            (
                "supported_versions without 1.2 or 1.3",
                with(&|h| h.extensions[1].1 = vec![2, 0x03, 0x02]),
                Refusal::TlsVersionUnsupported,
            ),
            ("huge ClientHello", with(&|h| h.extensions.push((0x0015, vec![0; 17_000]))), Refusal::ClientHelloTooLarge),
        ];
        for (what, bytes, expected) in cases {
            assert_eq!(check(&bytes), Progress::Refused(expected), "{what}");
        }
    }

    #[test]
    fn a_truncated_extension_is_malformed_once_the_records_are_complete() {
        let mut hello = Hello::for_host(HOST);
        hello.extensions.push((0x0010, vec![1, 2, 3]));
        let mut bytes = hello.records(16 * 1024);
        // Claim 5 more bytes in the last extension than it has, keeping every outer length right.
        let len = bytes.len();
        bytes[len - 5] = 0x00;
        bytes[len - 4] = 0x08;
        assert_eq!(check(&bytes), Progress::Refused(Refusal::ClientHelloMalformed));
    }

    #[test]
    fn too_many_records_are_refused() {
        let split = Hello::for_host(HOST).records(8);
        assert_eq!(check(&split), Progress::Refused(Refusal::ClientHelloTooLarge));
    }
}
