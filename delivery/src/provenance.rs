//! Signed provenance of an accepted proposal (docs/delivery.md): an in-toto Statement v1 whose
//! subjects are the commit and the patch, with Roundtable's predicate, in a DSSE envelope signed
//! with the project's Ed25519 provenance key. Verification is the DSSE rule: the signature over
//! the pre-authentication encoding of the payload type and the payload bytes, by a key whose id
//! the signature names.

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
    /// SHA-256 of the raw public key, hex: the id signatures name.
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

    pub fn parse(text: &str) -> Result<Self, ProvenanceError> {
        let key: PublicKey = serde_json::from_str(text).map_err(|e| ProvenanceError::BadPublicKey(e.to_string()))?;
        let raw = unhex(&key.keyval.public).filter(|raw| raw.len() == 32);
        if key.keytype != "ed25519" || raw.is_none() {
            return Err(ProvenanceError::BadPublicKey("not a 32-byte ed25519 key".into()));
        }
        Ok(key)
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

/// Verifies `envelope` with `key`; the statement it carries.
pub fn verify(envelope: &Envelope, key: &PublicKey) -> Result<serde_json::Value, ProvenanceError> {
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(ProvenanceError::PayloadType(envelope.payload_type.clone()));
    }
    let payload = STANDARD.decode(&envelope.payload).map_err(|e| ProvenanceError::BadEnvelope(e.to_string()))?;
    let raw = unhex(&key.keyval.public).unwrap_or_default();
    let verifier = UnparsedPublicKey::new(&ED25519, raw);
    let encoded = pae(&envelope.payload_type, &payload);
    let verified = envelope.signatures.iter().any(|signature| {
        signature.keyid == key.keyid
            && STANDARD.decode(&signature.sig).is_ok_and(|sig| verifier.verify(&encoded, &sig).is_ok())
    });
    if !verified {
        return Err(ProvenanceError::BadSignature { keyid: key.keyid.clone() });
    }
    serde_json::from_slice(&payload).map_err(|e| ProvenanceError::BadEnvelope(e.to_string()))
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

    #[test]
    fn an_envelope_verifies_and_a_flipped_byte_or_another_key_does_not() {
        let (dir, signer) = key();
        let statement = statement("0123", "ab", serde_json::json!({"assignment": "fix"}));
        let envelope = signer.sign(&statement);
        assert_eq!(verify(&envelope, &signer.public()).expect("verifies"), statement);

        let mut payload = STANDARD.decode(&envelope.payload).expect("b64");
        payload[10] ^= 1;
        let flipped = Envelope { payload: STANDARD.encode(&payload), ..envelope.clone() };
        assert!(matches!(verify(&flipped, &signer.public()), Err(ProvenanceError::BadSignature { .. })));

        let other = SigningKey::load_or_create(&dir.path().join("keys/other.key")).expect("key");
        assert!(verify(&envelope, &other.public()).is_err(), "another key");
        let public = serde_json::to_string(&signer.public()).expect("json");
        assert_eq!(PublicKey::parse(&public).expect("parses"), signer.public());
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
