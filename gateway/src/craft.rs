//! ClientHello bytes built by hand, valid or deliberately malformed: for the validator's tests,
//! the loopback tunnel tests, fuzz seeds and benchmarks. Not used by the gateway itself.

const HANDSHAKE: u8 = 0x16;
const CLIENT_HELLO: u8 = 0x01;

/// A ClientHello: legacy version, extensions in order, and bytes appended after the extensions.
#[derive(Debug, Clone)]
pub struct Hello {
    pub version: u16,
    pub extensions: Vec<(u16, Vec<u8>)>,
    pub trailing_body: Vec<u8>,
}

/// A `server_name` extension body listing `(name_type, name)` entries.
pub fn sni_ext(names: &[(u8, &[u8])]) -> Vec<u8> {
    let mut list = Vec::new();
    for (kind, name) in names {
        list.push(*kind);
        list.extend_from_slice(&u16_len(name.len()));
        list.extend_from_slice(name);
    }
    let mut ext = u16_len(list.len()).to_vec();
    ext.extend(list);
    ext
}

/// A length as the two bytes TLS puts before a vector; lengths past u16 are the caller's
/// deliberate malformation and are cut.
fn u16_len(len: usize) -> [u8; 2] {
    u16::try_from(len).unwrap_or(u16::MAX).to_be_bytes()
}

impl Hello {
    /// A well-formed TLS 1.3 ClientHello naming `host`.
    pub fn for_host(host: &str) -> Self {
        Hello {
            version: 0x0303,
            extensions: vec![(0x0000, sni_ext(&[(0, host.as_bytes())])), (0x002b, vec![4, 0x03, 0x04, 0x03, 0x03])],
            trailing_body: Vec::new(),
        }
    }

    /// The bytes of a ClientHello for `host` after `change`, in one record: the usual way to
    /// build one malformed case.
    pub fn changed(host: &str, change: impl FnOnce(&mut Hello)) -> Vec<u8> {
        let mut hello = Hello::for_host(host);
        change(&mut hello);
        hello.records(16 * 1024)
    }

    /// The ClientHello body (after the 4-byte handshake header).
    pub fn body(&self) -> Vec<u8> {
        let mut body = self.version.to_be_bytes().to_vec();
        body.extend([7u8; 32]);
        body.push(0);
        body.extend([0x00, 0x02, 0x13, 0x01]);
        body.extend([0x01, 0x00]);
        let mut extensions = Vec::new();
        for (kind, data) in &self.extensions {
            extensions.extend(kind.to_be_bytes());
            extensions.extend(u16_len(data.len()));
            extensions.extend(data);
        }
        body.extend(u16_len(extensions.len()));
        body.extend(extensions);
        body.extend(&self.trailing_body);
        body
    }

    /// The handshake message split into records of at most `record_size` bytes.
    pub fn records(&self, record_size: usize) -> Vec<u8> {
        let body = self.body();
        let mut handshake = vec![CLIENT_HELLO];
        handshake.extend(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes()[1..]);
        handshake.extend(body);
        let mut out = Vec::new();
        for chunk in handshake.chunks(record_size.max(1)) {
            out.extend([HANDSHAKE, 0x03, 0x01]);
            out.extend(u16_len(chunk.len()));
            out.extend(chunk);
        }
        out
    }
}
