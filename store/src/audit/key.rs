//! The audit chain's key: reading and creating the key file, and the one decision of every
//! command that writes the chain: use the key, create the first one, refuse a lost one, or
//! replace a lost one when the operator says so (`--new-audit-key`), recorded in the chain.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use roundtable_specs::audit::KeyReplaced;
use roundtable_specs::digest::hex;

use super::{AuditedEntry, Head};
use crate::Store;

type HmacSha256 = Hmac<Sha256>;

/// Why the key or its head checkpoint could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the audit key {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the audit key {path}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the audit key {path} has mode {mode:04o}; it must be readable by its owner only (chmod 600 {path})")]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("the audit key {path} is not 64 hexadecimal characters")]
    Malformed { path: PathBuf },
    #[error("the system random source failed: {0}")]
    Random(String),
    #[error(
        "the audit key {path} is missing, but the audit chain in the store holds {entries} entries sealed with it; \
         restore the key to {path} from a backup, or run `roundtable start --new-audit-key` to seal what follows \
         with a new key (the entries so far then can no longer be verified)"
    )]
    Lost { path: PathBuf, entries: i64 },
    #[error("--new-audit-key: the audit key {path} exists; a new key replaces only a lost one (move it away first)")]
    NotLost { path: PathBuf },
    #[error("cannot read the audit chain's head")]
    Store(#[from] crate::Error),
}

/// What a writer of the chain asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyChoice {
    /// The existing key; the first one when the chain is empty; refused when lost.
    Existing,
    /// A new key in place of a lost one (`--new-audit-key`), recorded as the first entry under it.
    ReplaceLost,
}

/// The keyed hash of held credentials (HMAC-SHA256), ready to hash many candidate values.
#[derive(Clone)]
pub struct FingerprintKey(Option<HmacSha256>);

impl fmt::Debug for FingerprintKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FingerprintKey(<redacted>)")
    }
}

impl FingerprintKey {
    /// The fingerprint of `value`, hex.
    pub fn digest(&self, value: &[u8]) -> String {
        let Some(mac) = &self.0 else { return String::new() };
        let mut mac = mac.clone();
        mac.update(value);
        hex(&mac.finalize().into_bytes())
    }
}

/// The chain's secret. Never printed.
pub struct AuditKey {
    bytes: Vec<u8>,
    path: PathBuf,
}

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuditKey({}, <redacted>)", self.path.display())
    }
}

pub(super) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

impl AuditKey {
    /// Reads the key at `path`, refusing one that others can read.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        use std::os::unix::fs::PermissionsExt as _;
        let read = |source| KeyError::Read { path: path.to_owned(), source };
        let mode = std::fs::metadata(path).map_err(read)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::TooOpen { path: path.to_owned(), mode });
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        let bytes =
            unhex(text.trim()).filter(|b| b.len() == 32).ok_or(KeyError::Malformed { path: path.to_owned() })?;
        Ok(Self { bytes, path: path.to_owned() })
    }

    /// Creates a new random key at `path` (0600, its folder 0700); refused when a file is there.
    /// Writers go through [`Store::audit_key`], which decides whether a new key may be made.
    ///
    /// The key is written whole to a private file beside `path` and then linked into place, so a
    /// reader never sees a half-written key, and of two controllers creating the key of one empty
    /// shared chain at once exactly one link succeeds (the other gets `AlreadyExists`).
    pub fn create(path: &Path) -> Result<Self, KeyError> {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        let create = |source| KeyError::Create { path: path.to_owned(), source };
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(create)?;
        }
        let mut bytes = vec![0u8; 32];
        getrandom::fill(&mut bytes).map_err(|error| KeyError::Random(error.to_string()))?;
        let staged = private_sibling(path).map_err(create)?;
        let written = (|| {
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&staged)?;
            file.write_all(format!("{}\n", hex(&bytes)).as_bytes())?;
            file.sync_all()?;
            std::fs::hard_link(&staged, path)
        })();
        let _ = std::fs::remove_file(&staged);
        written.map_err(create)?;
        Ok(Self { bytes, path: path.to_owned() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the head checkpoint lives: beside the key.
    pub fn head_path(&self) -> PathBuf {
        let mut name = self.path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".head");
        self.path.with_file_name(name)
    }

    /// `HMAC(key, prev ‖ entry)` in hex; `prev` is the previous MAC in hex.
    pub fn mac(&self, prev: &str, entry: &str) -> String {
        let mut mac = match HmacSha256::new_from_slice(&self.bytes) {
            Ok(mac) => mac,
            // HMAC takes keys of any length; 32 bytes are checked at load.
            Err(_) => return String::new(),
        };
        mac.update(&unhex(prev).unwrap_or_default());
        mac.update(entry.as_bytes());
        hex(&mac.finalize().into_bytes())
    }

    /// The key the review gates hash held credentials with: derived from this one for that
    /// purpose alone, so a fingerprint can never stand for a chain MAC.
    pub fn fingerprint_key(&self) -> FingerprintKey {
        let derived = self.mac("", "roundtable credential fingerprint v1");
        // HMAC takes keys of any length.
        FingerprintKey(HmacSha256::new_from_slice(derived.as_bytes()).ok())
    }

    /// The fingerprints of the held `(name, value)` pairs, as the review gates keep them (values
    /// too short to keep are left out).
    pub fn fingerprints<'a>(
        &self,
        held: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Vec<roundtable_specs::secrets::fingerprint::CredentialFingerprint> {
        let hash = self.fingerprint_key();
        let digest = |bytes: &[u8]| hash.digest(bytes);
        held.into_iter()
            .filter_map(|(name, value)| {
                roundtable_specs::secrets::fingerprint::CredentialFingerprint::of(name, value, &digest)
            })
            .collect()
    }

    /// The head checkpoint, if one was written.
    pub fn read_head(&self) -> Option<Head> {
        serde_json::from_slice(&std::fs::read(self.head_path()).ok()?).ok()
    }

    pub(super) fn write_head(&self, head: &Head) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let path = self.head_path();
        // A temporary of its own per write: appends from several tasks (or a daemon and the CLI)
        // checkpoint at once, and a shared one let one writer rename another's half-written file.
        let temporary = private_sibling(&path)?;
        let written = (|| {
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temporary)?;
            file.write_all(&serde_json::to_vec(head).map_err(std::io::Error::other)?)?;
            std::fs::rename(&temporary, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written
    }
}

/// A name beside `path` that no other writer picks (`<name>.<random>.tmp`), for a file that is
/// written whole and then moved or linked to `path`.
fn private_sibling(path: &Path) -> std::io::Result<PathBuf> {
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).map_err(|error| std::io::Error::other(error.to_string()))?;
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{}.tmp", hex(&nonce)));
    Ok(path.with_file_name(name))
}

impl Store {
    /// The key every writer of this store's chain uses (`start`, `init`, operator records,
    /// admission): the key at `path`; a new one when there is none and the chain is empty; a
    /// refusal naming the recovery when there is none and the chain holds entries, unless
    /// `choice` replaces the lost key, which appends [`KEY_REPLACED`](super::KEY_REPLACED)
    /// (recording the old head) as the first entry under the new key.
    pub async fn audit_key(&self, path: &Path, choice: KeyChoice) -> Result<AuditKey, KeyError> {
        let exists = path.try_exists().map_err(|source| KeyError::Read { path: path.to_owned(), source })?;
        let entries = self.chain_length().await?;
        match (exists, choice) {
            (true, KeyChoice::Existing) => AuditKey::load(path),
            (true, KeyChoice::ReplaceLost) => Err(KeyError::NotLost { path: path.to_owned() }),
            (false, _) if entries == 0 => match AuditKey::create(path) {
                // Another controller of a shared store made the first key a moment ago: use it.
                Err(KeyError::Create { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => {
                    AuditKey::load(path)
                }
                created => created,
            },
            (false, KeyChoice::Existing) => Err(KeyError::Lost { path: path.to_owned(), entries }),
            (false, KeyChoice::ReplaceLost) => {
                let key = AuditKey::create(path)?;
                let record = KeyReplaced { key_path: path.display().to_string() };
                let entry = AuditedEntry::of("AuditKey/lost", &record).map_err(crate::Error::Record)?;
                self.append_replacing(&key, &entry).await?;
                Ok(key)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_checkpoints_written_at_once_never_fail_or_tear() {
        let folder = tempfile::tempdir().expect("tempdir");
        let key = AuditKey::create(&folder.path().join("project.key")).expect("key");
        let failures: usize = std::thread::scope(|scope| {
            let writers: Vec<_> = (0..8)
                .map(|writer| {
                    let key = &key;
                    scope.spawn(move || {
                        (0..100)
                            .filter(|n| {
                                let head = Head { seq: writer * 1000 + n, mac: "ab".repeat(32), chain: None };
                                key.write_head(&head).is_err()
                            })
                            .count()
                    })
                })
                .collect();
            writers.into_iter().map(|writer| writer.join().expect("writer")).sum()
        });
        assert_eq!(failures, 0, "every checkpoint was written");
        assert!(key.read_head().is_some(), "the last checkpoint reads whole");
        let names: Vec<_> = std::fs::read_dir(folder.path()).expect("folder").filter_map(Result::ok).collect();
        assert_eq!(names.len(), 2, "only the key and its head are left: {names:?}");
    }
}
