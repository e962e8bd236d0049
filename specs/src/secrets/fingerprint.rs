//! A credential the daemon holds, as the review gates may keep it: its `credentialEnv` name, its
//! length and a keyed hash of its value (HMAC-SHA256 under a key derived from the audit key).
//! Never the value: an accept in another process, or on another controller sharing the store,
//! finds a held credential in a proposal's added lines without anyone writing it down in clear.

use serde::{Deserialize, Serialize};

/// One held credential, fingerprinted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialFingerprint {
    /// The `credentialEnv` name the value is held under.
    pub name: String,
    /// The value's length in bytes: which windows of an added line are hashed.
    pub length: usize,
    /// The keyed hash of the value, hex.
    pub digest: String,
}

/// The shortest value fingerprinted: shorter ones would match ordinary words, and a keyed hash of
/// a short value is open to guessing by whoever holds the key.
pub const MIN_LENGTH: usize = 12;

impl CredentialFingerprint {
    /// The fingerprint of `value` held under `name`, hashed by `digest`; none when the value is
    /// too short to keep.
    pub fn of(name: &str, value: &str, digest: &dyn Fn(&[u8]) -> String) -> Option<Self> {
        (value.len() >= MIN_LENGTH).then(|| Self {
            name: name.to_owned(),
            length: value.len(),
            digest: digest(value.as_bytes()),
        })
    }
}
