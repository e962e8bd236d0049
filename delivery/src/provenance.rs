//! Signed provenance of an accepted proposal (docs/delivery.md): an in-toto Statement v1 whose
//! subjects are the commit and the patch, with Roundtable's predicate, in a DSSE envelope signed
//! with the project's Ed25519 provenance key. Verification is the DSSE rule: the signature over
//! the pre-authentication encoding of the payload type and the payload bytes, by a key whose id
//! the signature names. A key's id is the SHA-256 of its raw bytes, computed here and never taken
//! from the key file, so a key cannot claim another's id; a verifier may pin the id it expects and
//! the commit the statement must be about.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The payload type of an in-toto statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The statement's type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// Roundtable's predicate type.
pub const PREDICATE_TYPE: &str = "https://roundtable.dev/provenance/v1";

#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    #[error("the key file {path} cannot be read: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("the key file {path} cannot be written: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("the key file {path} is readable by others (mode {mode:o}); it must be 0600")]
    Exposed { path: String, mode: u32 },
    #[error("the key file {0} is not an Ed25519 key Roundtable wrote")]
    BadKey(String),
    #[error("the public key is not Roundtable's JSON form (keytype ed25519, keyval.public hex): {0}")]
    BadPublicKey(String),
    #[error(
        "the key file states keyid {stated}, but its public key's SHA-256 is {computed}: the keyid does not match the key"
    )]
    KeyIdMismatch { stated: String, computed: String },
    #[error("the key is {computed}, not the expected keyid {expected}")]
    UnexpectedKey { expected: String, computed: String },
    #[error("{0:?} is not a full commit id (40 or 64 hex digits; `git rev-parse` prints one)")]
    BadCommit(String),
    #[error("the statement is about commit {found}, not {expected}")]
    SubjectMismatch { expected: String, found: String },
    #[error("the statement names {0} commits; Roundtable's name exactly one")]
    CommitCount(usize),
    #[error("the statement's {field} is {found:?}, not {expected}")]
    StatementType { field: &'static str, found: String, expected: &'static str },
    #[error("the envelope is not DSSE JSON: {0}")]
    BadEnvelope(String),
    #[error("no signature in the envelope verifies with key {keyid}")]
    BadSignature { keyid: String },
    #[error("the payload type is {0:?}, not {PAYLOAD_TYPE}")]
    PayloadType(String),
    #[error("the OS random source failed")]
    Random,
}

/// A DSSE signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    pub keyid: String,
    /// Base64.
    pub sig: String,
}

/// A DSSE envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// Base64 of the payload bytes.
    pub payload: String,
    pub payload_type: String,
    pub signatures: Vec<Signature>,
}

/// DSSE's pre-authentication encoding.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut encoded = format!("DSSEv1 {} {payload_type} {} ", payload_type.len(), payload.len()).into_bytes();
    encoded.extend_from_slice(payload);
    encoded
}

/// The public half, as securesystemslib reads an Ed25519 key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicKey {
    pub keytype: String,
    pub scheme: String,
    pub keyval: PublicKeyValue,
    /// SHA-256 of the raw public key, hex: the id signatures name. Only ever checked against the
    /// bytes, never trusted on its own.
    pub keyid: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicKeyValue {
    /// The raw 32-byte key, hex.
    pub public: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok()).collect()
}

impl PublicKey {
    fn of(raw: &[u8]) -> Self {
        Self {
            keytype: "ed25519".into(),
            scheme: "ed25519".into(),
            keyval: PublicKeyValue { public: hex(raw) },
            keyid: hex(&Sha256::digest(raw)),
        }
    }

    /// A key file's key, refused unless it is an Ed25519 key whose stated id is its bytes' id.
    pub fn parse(text: &str) -> Result<Self, ProvenanceError> {
        let key: PublicKey = serde_json::from_str(text).map_err(|e| ProvenanceError::BadPublicKey(e.to_string()))?;
        key.raw()?;
        Ok(key)
    }

    /// The raw key, once the key is checked: Ed25519, 32 bytes, and `keyid` equal to the id its
    /// bytes give (the one place a key's id is decided).
    fn raw(&self) -> Result<Vec<u8>, ProvenanceError> {
        let raw = unhex(&self.keyval.public).filter(|raw| raw.len() == 32);
        let Some(raw) = raw.filter(|_| self.keytype == "ed25519" && self.scheme == "ed25519") else {
            return Err(ProvenanceError::BadPublicKey("not a 32-byte ed25519 key".into()));
        };
        let computed = hex(&Sha256::digest(&raw));
        if self.keyid != computed {
            return Err(ProvenanceError::KeyIdMismatch { stated: self.keyid.clone(), computed });
        }
        Ok(raw)
    }
}

/// What a verifier expects of an envelope beyond a signature by the key it was given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Expected<'a> {
    /// The key's id (hex; any case), pinned: another key is refused even if its signature holds.
    pub keyid: Option<&'a str>,
    /// The full commit id the statement must be about (the commit whose note it was read from).
    pub commit: Option<&'a str>,
}

/// A verified envelope: the id of the key that signed it (computed from the key's bytes) and the
/// statement it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub keyid: String,
    pub statement: serde_json::Value,
}

impl Verified {
    /// The commits the statement's subjects name.
    pub fn commits(&self) -> Vec<&str> {
        let subjects = self.statement["subject"].as_array().into_iter().flatten();
        subjects.filter_map(|subject| subject["digest"]["gitCommit"].as_str()).collect()
    }
}

/// Where a project's provenance key lives: beside its audit key, `PROJECT.provenance.key`.
pub fn key_path_beside(audit_key: &std::path::Path) -> std::path::PathBuf {
    audit_key.with_extension("provenance.key")
}

/// The project's provenance signing key: PKCS#8 in a 0600 file beside the audit key.
pub struct SigningKey {
    pair: Ed25519KeyPair,
}

impl SigningKey {
    /// Reads the key at `path`, creating it (0600, in a 0700 folder) when there is none.
    ///
    /// A new key is written whole to a private file beside `path` and then linked into place:
    /// controllers sharing one key folder start at once, and of two creating it exactly one link
    /// succeeds while the other reads the key that won, never a half-written one.
    pub fn load_or_create(path: &std::path::Path) -> Result<Self, ProvenanceError> {
        match Self::load(path) {
            Err(ProvenanceError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                match Self::create(path) {
                    Err(ProvenanceError::Write { source, .. })
                        if source.kind() == std::io::ErrorKind::AlreadyExists =>
                    {
                        Self::load(path)
                    }
                    created => created,
                }
            }
            loaded => loaded,
        }
    }

    fn load(path: &std::path::Path) -> Result<Self, ProvenanceError> {
        use std::os::unix::fs::PermissionsExt as _;
        let shown = path.display().to_string();
        let read = |source| ProvenanceError::Read { path: shown.clone(), source };
        let mode = std::fs::metadata(path).map_err(read)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(ProvenanceError::Exposed { path: shown, mode });
        }
        let der = std::fs::read(path).map_err(read)?;
        let pair = Ed25519KeyPair::from_pkcs8(&der).map_err(|_| ProvenanceError::BadKey(shown))?;
        Ok(Self { pair })
    }

    fn create(path: &std::path::Path) -> Result<Self, ProvenanceError> {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        let shown = path.display().to_string();
        let write = |source| ProvenanceError::Write { path: shown.clone(), source };
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(write)?;
        }
        let rng = ring::rand::SystemRandom::new();
        let der = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| ProvenanceError::Random)?;
        let nonce: [u8; 8] = ring::rand::generate(&rng).map_err(|_| ProvenanceError::Random)?.expose();
        let mut staged = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        staged.push(format!(".{}.tmp", hex(&nonce)));
        let staged = path.with_file_name(staged);
        let written = (|| {
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&staged)?;
            std::io::Write::write_all(&mut file, der.as_ref())?;
            file.sync_all()?;
            std::fs::hard_link(&staged, path)
        })();
        let _ = std::fs::remove_file(&staged);
        written.map_err(write)?;
        let pair = Ed25519KeyPair::from_pkcs8(der.as_ref()).map_err(|_| ProvenanceError::BadKey(shown))?;
        Ok(Self { pair })
    }

    pub fn public(&self) -> PublicKey {
        PublicKey::of(self.pair.public_key().as_ref())
    }

    /// `statement` in a DSSE envelope with this key's signature.
    pub fn sign(&self, statement: &serde_json::Value) -> Envelope {
        let payload = serde_json::to_vec(statement).unwrap_or_default();
        let signature = self.pair.sign(&pae(PAYLOAD_TYPE, &payload));
        Envelope {
            payload: STANDARD.encode(&payload),
            payload_type: PAYLOAD_TYPE.into(),
            signatures: vec![Signature { keyid: self.public().keyid, sig: STANDARD.encode(signature.as_ref()) }],
        }
    }
}

/// Verifies `envelope` with `key` and what the verifier `expected`: the key is its bytes' id (and
/// the pinned one), a signature by it holds over the DSSE encoding, the payload is a Roundtable
/// in-toto statement, and it is about the expected commit.
pub fn verify(envelope: &Envelope, key: &PublicKey, expected: Expected<'_>) -> Result<Verified, ProvenanceError> {
    let raw = key.raw()?;
    let keyid = key.keyid.clone();
    if let Some(pinned) = expected.keyid
        && !pinned.eq_ignore_ascii_case(&keyid)
    {
        return Err(ProvenanceError::UnexpectedKey { expected: pinned.to_owned(), computed: keyid });
    }
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(ProvenanceError::PayloadType(envelope.payload_type.clone()));
    }
    let payload = STANDARD.decode(&envelope.payload).map_err(|e| ProvenanceError::BadEnvelope(e.to_string()))?;
    let verifier = UnparsedPublicKey::new(&ED25519, raw);
    let encoded = pae(&envelope.payload_type, &payload);
    let signed = envelope.signatures.iter().any(|signature| {
        signature.keyid == keyid
            && STANDARD.decode(&signature.sig).is_ok_and(|sig| verifier.verify(&encoded, &sig).is_ok())
    });
    if !signed {
        return Err(ProvenanceError::BadSignature { keyid });
    }
    let statement: serde_json::Value =
        serde_json::from_slice(&payload).map_err(|e| ProvenanceError::BadEnvelope(e.to_string()))?;
    for (field, wanted) in [("_type", STATEMENT_TYPE), ("predicateType", PREDICATE_TYPE)] {
        let found = statement[field].as_str().unwrap_or_default();
        if found != wanted {
            return Err(ProvenanceError::StatementType { field, found: found.to_owned(), expected: wanted });
        }
    }
    let verified = Verified { keyid, statement };
    if let Some(commit) = expected.commit {
        expect_commit(&verified, commit)?;
    }
    Ok(verified)
}

/// The statement names exactly one commit, and it is `commit` (a full id: a prefix could be
/// ground out to match another commit).
fn expect_commit(verified: &Verified, commit: &str) -> Result<(), ProvenanceError> {
    let full = matches!(commit.len(), 40 | 64) && commit.bytes().all(|b| b.is_ascii_hexdigit());
    if !full {
        return Err(ProvenanceError::BadCommit(commit.to_owned()));
    }
    match verified.commits()[..] {
        [found] if found.eq_ignore_ascii_case(commit) => Ok(()),
        [found] => Err(ProvenanceError::SubjectMismatch { expected: commit.to_owned(), found: found.to_owned() }),
        ref named => Err(ProvenanceError::CommitCount(named.len())),
    }
}

/// An in-toto Statement v1 about `commit` and the patch (by its SHA-256), with `predicate`.
pub fn statement(commit: &str, patch_sha256: &str, predicate: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": "commit", "digest": {"gitCommit": commit}},
            {"name": "proposal.patch", "digest": {"sha256": patch_sha256}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> (tempfile::TempDir, SigningKey) {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = SigningKey::load_or_create(&dir.path().join("keys/p.provenance.key")).expect("key");
        (dir, key)
    }

    #[test]
    fn the_pae_is_dsse_v1s() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
    }

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
    const OTHER_COMMIT: &str = "89abcdef0123456789abcdef0123456789abcdef";

    fn verify_any(envelope: &Envelope, key: &PublicKey) -> Result<serde_json::Value, ProvenanceError> {
        verify(envelope, key, Expected::default()).map(|verified| verified.statement)
    }

    #[test]
    fn an_envelope_verifies_and_a_flipped_byte_or_another_key_does_not() {
        let (dir, signer) = key();
        let statement = statement(COMMIT, "ab", serde_json::json!({"assignment": "fix"}));
        let envelope = signer.sign(&statement);
        assert_eq!(verify_any(&envelope, &signer.public()).expect("verifies"), statement);

        let mut payload = STANDARD.decode(&envelope.payload).expect("b64");
        payload[10] ^= 1;
        let flipped = Envelope { payload: STANDARD.encode(&payload), ..envelope.clone() };
        assert!(matches!(verify_any(&flipped, &signer.public()), Err(ProvenanceError::BadSignature { .. })));

        let other = SigningKey::load_or_create(&dir.path().join("keys/other.key")).expect("key");
        assert!(verify_any(&envelope, &other.public()).is_err(), "another key");
        let public = serde_json::to_string(&signer.public()).expect("json");
        assert_eq!(PublicKey::parse(&public).expect("parses"), signer.public());
    }

    #[test]
    fn a_key_claiming_another_keys_id_is_refused_naming_both() {
        let (dir, project) = key();
        let attacker = SigningKey::load_or_create(&dir.path().join("keys/attacker.key")).expect("key");
        let forged = attacker.sign(&statement(COMMIT, "ab", serde_json::json!({})));
        // The attacker's key, stating the project's id; the envelope's signature names it too.
        let claiming = PublicKey { keyid: project.public().keyid, ..attacker.public() };
        let forged = Envelope {
            signatures: vec![Signature { keyid: claiming.keyid.clone(), ..forged.signatures[0].clone() }],
            ..forged
        };
        let text = serde_json::to_string(&claiming).expect("json");
        let refused = PublicKey::parse(&text).expect_err("a keyid its bytes do not give");
        let message = refused.to_string();
        assert!(matches!(refused, ProvenanceError::KeyIdMismatch { .. }), "{message}");
        assert!(message.contains(&project.public().keyid) && message.contains(&attacker.public().keyid), "{message}");
        // A key built in code is held to the same rule.
        assert!(matches!(verify_any(&forged, &claiming), Err(ProvenanceError::KeyIdMismatch { .. })));
        assert!(matches!(
            PublicKey::parse(
                &serde_json::to_string(&PublicKey { scheme: "rsa".into(), ..project.public() }).expect("json")
            ),
            Err(ProvenanceError::BadPublicKey(_))
        ));
    }

    #[test]
    fn a_pinned_keyid_is_compared_with_the_id_the_bytes_give() {
        let (dir, signer) = key();
        let envelope = signer.sign(&statement(COMMIT, "ab", serde_json::json!({})));
        let keyid = signer.public().keyid;
        let pinned = |keyid: &str| verify(&envelope, &signer.public(), Expected { keyid: Some(keyid), commit: None });
        assert_eq!(pinned(&keyid).expect("the same id").keyid, keyid);
        assert!(pinned(&keyid.to_ascii_uppercase()).is_ok(), "hex in any case");
        let other = SigningKey::load_or_create(&dir.path().join("keys/other.key")).expect("key").public().keyid;
        let refused = pinned(&other).expect_err("another key is not the pinned one");
        assert!(refused.to_string().contains(&other) && refused.to_string().contains(&keyid), "{refused}");
    }

    #[test]
    fn the_statement_must_be_about_the_expected_commit() {
        let (_dir, signer) = key();
        let envelope = signer.sign(&statement(COMMIT, "ab", serde_json::json!({})));
        let about = |commit: &str| verify(&envelope, &signer.public(), Expected { keyid: None, commit: Some(commit) });
        assert!(about(COMMIT).is_ok());
        assert!(about(&COMMIT.to_ascii_uppercase()).is_ok());
        let refused = about(OTHER_COMMIT).expect_err("another commit");
        assert!(matches!(refused, ProvenanceError::SubjectMismatch { .. }), "{refused}");
        assert!(refused.to_string().contains(COMMIT) && refused.to_string().contains(OTHER_COMMIT), "{refused}");
        for short in ["0123456", "", &format!("{COMMIT}x")[1..]] {
            assert!(matches!(about(short), Err(ProvenanceError::BadCommit(_))), "{short:?}");
        }
        // A statement naming two commits, or none, is not Roundtable's.
        let mut two = statement(COMMIT, "ab", serde_json::json!({}));
        two["subject"][1]["digest"] = serde_json::json!({"gitCommit": OTHER_COMMIT});
        let two = signer.sign(&two);
        let refused = verify(&two, &signer.public(), Expected { keyid: None, commit: Some(COMMIT) });
        assert!(matches!(refused, Err(ProvenanceError::CommitCount(2))), "{refused:?}");
    }

    #[test]
    fn a_signed_payload_that_is_not_roundtables_statement_is_refused() {
        let (_dir, signer) = key();
        let mut other = statement(COMMIT, "ab", serde_json::json!({}));
        other["predicateType"] = "https://slsa.dev/provenance/v1".into();
        let refused = verify_any(&signer.sign(&other), &signer.public());
        assert!(matches!(refused, Err(ProvenanceError::StatementType { field: "predicateType", .. })), "{refused:?}");
    }

    #[test]
    fn the_key_is_kept_0600_and_read_back_the_same_and_an_exposed_one_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let (dir, first) = key();
        let path = dir.path().join("keys/p.provenance.key");
        assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        assert_eq!(SigningKey::load_or_create(&path).expect("again").public(), first.public());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(matches!(SigningKey::load_or_create(&path), Err(ProvenanceError::Exposed { .. })));
    }

    #[test]
    fn controllers_creating_the_key_at_once_all_get_the_one_that_won() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("keys/p.provenance.key");
        let barrier = std::sync::Barrier::new(8);
        let keys: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        SigningKey::load_or_create(&path).map(|key| key.public())
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().expect("thread")).collect()
        });
        let first = keys[0].as_ref().expect("created or read").clone();
        for key in &keys {
            assert_eq!(key.as_ref().expect("created or read"), &first);
        }
        let left: Vec<_> = std::fs::read_dir(dir.path().join("keys")).expect("dir").flatten().collect();
        assert_eq!(left.len(), 1, "no staged file left behind: {left:?}");
    }
}
