//! Why the ClientHello parser is our own: each case is a hand-assembled ClientHello that
//! tls-parser (rusticata, the usual crate for the job) reads without an error while our `inspect`
//! refuses it with a specific reason. Two kinds of case: bytes tls-parser drops without telling
//! its caller (no code on top of it could refuse them), and content it reports faithfully but
//! leaves to its caller to judge (which our parser does as it reads). Cases where tls-parser
//! errors too are not here.

use roundtable_gateway::client_hello::{Limits, Progress, Refusal, inspect};
use tls_parser::{
    SNIType, TlsExtension, TlsMessage, TlsMessageHandshake, parse_tls_client_hello_extensions, parse_tls_plaintext,
};

const HOST: &str = "api.example.com";
const EVIL: &str = "evil.example.com";

// === hand assembly ===

/// A TLS vector: its length in two bytes, then its bytes.
fn vec16(bytes: &[u8]) -> Vec<u8> {
    let mut out = u16::try_from(bytes.len()).expect("a short vector").to_be_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

/// One extension: type, then its data as a vector.
fn extension(kind: u16, data: &[u8]) -> Vec<u8> {
    let mut out = kind.to_be_bytes().to_vec();
    out.extend(vec16(data));
    out
}

/// One `server_name` list entry: name type, then the name as a vector.
fn entry(name_type: u8, name: &[u8]) -> Vec<u8> {
    let mut out = vec![name_type];
    out.extend(vec16(name));
    out
}

/// A `server_name` extension whose list holds these entries.
fn server_name(entries: &[Vec<u8>]) -> Vec<u8> {
    extension(0x0000, &vec16(&entries.concat()))
}

/// `supported_versions` offering TLS 1.3 and 1.2.
fn supported_versions() -> Vec<u8> {
    extension(0x002b, &[4, 0x03, 0x04, 0x03, 0x03])
}

/// A ClientHello in one handshake record: TLS 1.2 legacy version, a fixed random, no session ID,
/// one cipher suite, null compression, `extension_block` as the extensions' vector, and
/// `after_block` after it, still inside the ClientHello (its length counts them).
fn client_hello(extension_block: &[u8], after_block: &[u8]) -> Vec<u8> {
    let mut body = vec![0x03, 0x03];
    body.extend([7u8; 32]);
    body.push(0);
    body.extend(vec16(&[0x13, 0x01]));
    body.extend([1, 0]);
    body.extend(vec16(extension_block));
    body.extend(after_block);
    let length = u32::try_from(body.len()).expect("a short body").to_be_bytes();
    let mut handshake = vec![0x01];
    handshake.extend(&length[1..]);
    handshake.extend(body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend(vec16(&handshake));
    record
}

/// A well-formed extension block naming `HOST`, with `more` extensions after it.
fn block_with(more: &[Vec<u8>]) -> Vec<u8> {
    let mut block = server_name(&[entry(0, HOST.as_bytes())]);
    block.extend(supported_versions());
    block.extend(more.concat());
    block
}

// === both readings ===

/// What tls-parser makes of `bytes`, read the way a gateway would use it: one plaintext record
/// (which must be consumed whole), its one ClientHello, and its extensions. The extension bytes
/// tls-parser did not consume are returned to the caller, so they are counted here. An error from
/// any step is a panic: every case below asserts tls-parser accepts its input.
fn tls_parser_reads(bytes: &[u8]) -> (Vec<TlsExtension<'_>>, usize) {
    let (rest, record) = parse_tls_plaintext(bytes).unwrap_or_else(|e| panic!("tls-parser refused the record: {e:?}"));
    assert!(rest.is_empty(), "tls-parser left {} bytes of the record", rest.len());
    let [TlsMessage::Handshake(TlsMessageHandshake::ClientHello(hello))] = record.msg.as_slice() else {
        panic!("tls-parser read something else than one ClientHello");
    };
    let block = hello.ext.expect("tls-parser found an extension block");
    let (unread, extensions) =
        parse_tls_client_hello_extensions(block).unwrap_or_else(|e| panic!("tls-parser refused the extensions: {e:?}"));
    (extensions, unread.len())
}

/// The server names tls-parser reports, from every `server_name` extension, in order.
fn names<'a>(extensions: &[TlsExtension<'a>]) -> Vec<(u8, &'a [u8])> {
    extensions
        .iter()
        .filter_map(|extension| match extension {
            TlsExtension::SNI(names) => Some(names.iter().map(|(SNIType(kind), name)| (*kind, *name))),
            _ => None,
        })
        .flatten()
        .collect()
}

fn ours(bytes: &[u8]) -> Progress {
    inspect(bytes, HOST, Limits::default())
}

// === the control ===

/// The helpers build what both parsers take for a valid ClientHello naming `HOST`: a refusal
/// below comes from the case's one change.
#[test]
fn a_valid_hello_is_read_alike_by_both() {
    let bytes = client_hello(&block_with(&[]), &[]);
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!((names(&extensions), unread), (vec![(0, HOST.as_bytes())], 0));
    assert_eq!(ours(&bytes), Progress::Valid { sni: HOST.into(), bytes: bytes.len() });
}

// === bytes tls-parser drops without a word ===

/// A whole `server_name` extension after the extension block, inside the ClientHello's length.
/// tls-parser reads the hello up to the block's end and drops the rest of the handshake message
/// without reporting it (not even as leftover bytes), so nothing built on it could see this
/// second name. A gateway must read every byte it forwards as the server will, or a server that
/// reads differently (or a future extension) meets a name the gateway never checked.
#[test]
fn a_name_after_the_extension_block_is_dropped_by_tls_parser_and_malformed_for_us() {
    let bytes = client_hello(&block_with(&[]), &server_name(&[entry(0, EVIL.as_bytes())]));
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!((names(&extensions), unread), (vec![(0, HOST.as_bytes())], 0));
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::ClientHelloMalformed));
}

/// A second list entry whose length runs past the `server_name` list. tls-parser stops at the
/// entry it cannot complete and drops the list's remaining bytes without reporting them: it
/// reports one name, `HOST`. The bytes hold another name, which a server parsing the list
/// differently (or a lenient one) might pick: a smuggled second server name.
#[test]
fn a_second_name_in_a_cut_list_entry_is_dropped_by_tls_parser_and_malformed_for_us() {
    let mut cut = vec![0, 0x00, 0x40];
    cut.extend_from_slice(EVIL.as_bytes());
    let mut block = server_name(&[entry(0, HOST.as_bytes()), cut]);
    block.extend(supported_versions());
    let bytes = client_hello(&block, &[]);
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!((names(&extensions), unread), (vec![(0, HOST.as_bytes())], 0));
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::ClientHelloMalformed));
}

/// Bytes after the `server_name` list, inside the extension's length. tls-parser drops what
/// follows the list without reporting it. An extension whose length does not match its content
/// is a message two parsers can split differently; the gateway's check is only worth what its
/// reading of the bytes is.
#[test]
fn bytes_after_the_name_list_are_dropped_by_tls_parser_and_malformed_for_us() {
    let mut data = vec16(&entry(0, HOST.as_bytes()));
    data.extend(entry(0, EVIL.as_bytes()));
    let mut block = extension(0x0000, &data);
    block.extend(supported_versions());
    let bytes = client_hello(&block, &[]);
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!((names(&extensions), unread), (vec![(0, HOST.as_bytes())], 0));
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::ClientHelloMalformed));
}

/// An extension block whose length runs past the end of the ClientHello. tls-parser reports no
/// extension block at all (`ext: None`) and no error, though the bytes carry a `server_name`: a
/// gateway on top of it sees a hello without a name, and one that then falls back to the CONNECT
/// host (as proxies without SNI do) forwards a name it never read.
#[test]
fn an_extension_block_longer_than_the_hello_is_no_block_for_tls_parser_and_malformed_for_us() {
    let block = block_with(&[]);
    let mut bytes = client_hello(&block, &[]);
    // The block's length is the two bytes before it, at the end of the record.
    let at = bytes.len() - block.len() - 2;
    bytes[at..at + 2].copy_from_slice(&u16::try_from(block.len() + 5).expect("short").to_be_bytes());
    let Ok((rest, record)) = parse_tls_plaintext(&bytes) else { panic!("tls-parser refused the record") };
    let [TlsMessage::Handshake(TlsMessageHandshake::ClientHello(hello))] = record.msg.as_slice() else {
        panic!("tls-parser read something else than one ClientHello");
    };
    assert_eq!((rest.len(), hello.ext), (0, None));
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::ClientHelloMalformed));
}

// === bytes tls-parser hands back without an error ===

/// An extension block whose last extension claims more bytes than the block holds: the block's
/// length does not account for its bytes. tls-parser returns the extensions before it and hands
/// the rest back as unconsumed input, without an error: a caller that does not check that
/// remainder misses a `server_name` extension (here one naming another host) the server would
/// refuse or read otherwise.
#[test]
fn an_extension_cut_by_the_block_end_is_left_over_for_tls_parser_and_malformed_for_us() {
    let mut cut = 0x0000u16.to_be_bytes().to_vec();
    cut.extend(0x0040u16.to_be_bytes());
    cut.extend(vec16(&entry(0, EVIL.as_bytes())));
    let bytes = client_hello(&block_with(&[cut.clone()]), &[]);
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!((names(&extensions), unread), (vec![(0, HOST.as_bytes())], cut.len()));
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::ClientHelloMalformed));
}

// === content tls-parser reports and leaves to its caller ===

/// Two `server_name` extensions. tls-parser returns both. Which one a server honours is up to its
/// implementation (RFC 8446 forbids duplicates; some take the first, some the last), so a
/// gateway that checks one lets the other through: a smuggled second server name.
#[test]
fn a_duplicate_extension_is_read_by_tls_parser_and_refused_by_us() {
    let bytes = client_hello(&block_with(&[server_name(&[entry(0, EVIL.as_bytes())])]), &[]);
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!((names(&extensions), unread), (vec![(0, HOST.as_bytes()), (0, EVIL.as_bytes())], 0));
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::DuplicateExtension));
}

/// Two `host_name` entries in one list (RFC 6066 allows one per type). tls-parser returns both;
/// the server may route or certify by either.
#[test]
fn two_names_in_one_list_are_read_by_tls_parser_and_refused_by_us() {
    let mut block = server_name(&[entry(0, HOST.as_bytes()), entry(0, EVIL.as_bytes())]);
    block.extend(supported_versions());
    let bytes = client_hello(&block, &[]);
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!((names(&extensions), unread), (vec![(0, HOST.as_bytes()), (0, EVIL.as_bytes())], 0));
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::SniMultiple));
}

/// A name with a NUL byte: `api.example.com\0.evil`. tls-parser returns the raw bytes. A server
/// written in C may stop at the NUL and a virtual-host router may not: the name checked and the
/// name served differ.
#[test]
fn a_name_with_a_nul_byte_is_read_by_tls_parser_and_refused_by_us() {
    let name = b"api.example.com\0.evil";
    let mut block = server_name(&[entry(0, name)]);
    block.extend(supported_versions());
    let bytes = client_hello(&block, &[]);
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!((names(&extensions), unread), (vec![(0, &name[..])], 0));
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::SniInvalid));
}

/// A list entry of name type 7 (only `host_name`, 0, exists). tls-parser returns it as it is; a
/// gateway comparing "the name" must not compare something that is not a host name.
#[test]
fn a_name_of_another_type_is_read_by_tls_parser_and_refused_by_us() {
    let mut block = server_name(&[entry(7, HOST.as_bytes())]);
    block.extend(supported_versions());
    let bytes = client_hello(&block, &[]);
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!((names(&extensions), unread), (vec![(7, HOST.as_bytes())], 0));
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::SniInvalid));
}

/// An `encrypted_client_hello` extension (0xfe0d). tls-parser does not know it and returns it as
/// an unknown extension. With ECH, the server name the server acts on is inside the encrypted
/// inner hello, and the visible one is only the outer, public name: the gateway would check a
/// name that is not the one served.
#[test]
fn ech_is_an_unknown_extension_to_tls_parser_and_refused_by_us() {
    let bytes = client_hello(&block_with(&[extension(0xfe0d, &[0; 8])]), &[]);
    let (extensions, unread) = tls_parser_reads(&bytes);
    assert_eq!(unread, 0);
    let unknown: Vec<u16> = extensions
        .iter()
        .filter_map(|extension| match extension {
            TlsExtension::Unknown(kind, _) => Some(kind.0),
            _ => None,
        })
        .collect();
    assert_eq!(unknown, vec![0xfe0d]);
    assert_eq!(ours(&bytes), Progress::Refused(Refusal::EchPresent));
}
