//! The HMAC audit chain over the audited rows of the events table:
//! `mac_n = HMAC-SHA256(key, mac_{n-1} ‖ canonical(entry_n))`, `mac_0` = 32 zero bytes. Appends
//! run in one `BEGIN IMMEDIATE` transaction and `seq` is `UNIQUE`, so two writers (the daemon and
//! the CLI) can never fork the chain. The key lives outside the state directory; after each append
//! the head (seq, mac) is written beside it, so truncating the table is detected too.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use sqlx::Row;

use roundtable_specs::digest::hex;

use crate::{Result, Store, now};

type HmacSha256 = Hmac<Sha256>;

/// The MAC before the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Why the key or its head checkpoint could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the audit key {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot create the audit key {path}: {source}")]
    Create { path: PathBuf, source: std::io::Error },
    #[error("the audit key {path} has mode {mode:04o}; it must be readable by its owner only (chmod 600 {path})")]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("the audit key {path} is not 64 hexadecimal characters")]
    Malformed { path: PathBuf },
    #[error("the system random source failed: {0}")]
    Random(String),
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

fn unhex(text: &str) -> Option<Vec<u8>> {
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

    /// Loads the key at `path`, creating it (0600, its folder 0700) when missing. Only the commands
    /// that write the chain create it; a verifier only loads.
    pub fn load_or_create(path: &Path) -> Result<Self, KeyError> {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        if path.exists() {
            return Self::load(path);
        }
        let create = |source| KeyError::Create { path: path.to_owned(), source };
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(create)?;
        }
        let mut bytes = vec![0u8; 32];
        getrandom::fill(&mut bytes).map_err(|error| KeyError::Random(error.to_string()))?;
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(create)?;
        file.write_all(format!("{}\n", hex(&bytes)).as_bytes()).map_err(create)?;
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

    /// The head checkpoint, if one was written.
    pub fn read_head(&self) -> Option<Head> {
        serde_json::from_slice(&std::fs::read(self.head_path()).ok()?).ok()
    }

    fn write_head(&self, head: &Head) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let path = self.head_path();
        let temporary = path.with_extension("head.tmp");
        let mut file =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?;
        file.write_all(&serde_json::to_vec(head).map_err(std::io::Error::other)?)?;
        std::fs::rename(&temporary, &path)
    }
}

/// The newest entry of the chain: its sequence number and MAC.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Head {
    pub seq: i64,
    pub mac: String,
    /// The MAC of entry 1: which chain this head belongs to (a state directory recreated with
    /// the same key starts another chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
}

/// An audited record to append; `record` is any JSON (objects' keys are sorted when hashed).
#[derive(Debug, Clone)]
pub struct AuditedEntry<'a> {
    /// What happened, e.g. `session.ended`, `capability.revoked`, `proposal.submitted`.
    pub kind: &'a str,
    /// `Kind/name` or a session id: what it is about.
    pub subject: &'a str,
    pub record: serde_json::Value,
}

/// How an audited reconcile event reads in `describe` (its own words, not the entry kind).
#[derive(Debug, Clone, Copy)]
struct Shown<'a> {
    severity: &'a str,
    reason: &'a str,
    message: &'a str,
}

/// One chain row as exported (`audit export`) and verified offline.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainRow {
    pub seq: i64,
    pub prev_mac: String,
    pub mac: String,
    /// The canonical entry exactly as hashed.
    pub entry: String,
}

/// Where and why the chain does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    #[error("entry {seq}: its MAC does not match its content (edited, or a wrong key)")]
    BadMac { seq: i64 },
    #[error("entry {seq}: it does not follow entry {previous} (a row was deleted, inserted or reordered)")]
    BadLink { seq: i64, previous: i64 },
    #[error("entry {seq}: missing; the chain stops at {last} but the head checkpoint says {seq_head} (truncated)")]
    Truncated { seq: i64, last: i64, seq_head: i64 },
    #[error("entry {seq}: the head checkpoint's MAC differs from the stored one (the tail was rewritten)")]
    HeadMismatch { seq: i64 },
    #[error(
        "entry 1: the head checkpoint beside the key belongs to another chain (this state was recreated, or replaced, while the key was kept)"
    )]
    OtherChain,
}

/// JSON with object keys sorted and no whitespace: the one form that is hashed (the same form
/// the spec digests use).
pub fn canonical(value: &serde_json::Value) -> String {
    roundtable_specs::digest::canonical_json(value)
}

/// Checks `rows` (in order) link and MAC correctly, starting from `prev` (the MAC before the
/// first row). The sequence number of the first bad row, if any.
pub fn verify_rows(
    key: &AuditKey,
    rows: &[ChainRow],
    mut prev: String,
    mut previous_seq: Option<i64>,
) -> Result<Option<Head>, ChainBreak> {
    let mut head = None;
    for row in rows {
        if let Some(previous) = previous_seq
            && (row.seq != previous + 1 || row.prev_mac != prev)
        {
            return Err(ChainBreak::BadLink { seq: row.seq, previous });
        }
        if row.prev_mac != prev || key.mac(&row.prev_mac, &row.entry) != row.mac {
            return Err(ChainBreak::BadMac { seq: row.seq });
        }
        // The entry names its own sequence number: a row moved elsewhere no longer fits.
        let named = serde_json::from_str::<serde_json::Value>(&row.entry).ok().and_then(|e| e["seq"].as_i64());
        if named != Some(row.seq) {
            return Err(ChainBreak::BadMac { seq: row.seq });
        }
        prev.clone_from(&row.mac);
        previous_seq = Some(row.seq);
        head = Some(Head { seq: row.seq, mac: row.mac.clone(), chain: None });
    }
    Ok(head)
}

fn chain_row(row: &sqlx::any::AnyRow) -> Result<ChainRow> {
    Ok(ChainRow {
        seq: row.try_get("seq")?,
        prev_mac: row.try_get::<Option<String>, _>("prev_mac")?.unwrap_or_default(),
        mac: row.try_get::<Option<String>, _>("mac")?.unwrap_or_default(),
        entry: row.try_get::<Option<String>, _>("record")?.unwrap_or_default(),
    })
}

impl Store {
    /// Appends `entry` to the chain in one immediate transaction; the new head, also written
    /// beside the key.
    pub async fn append_audited(&self, key: &AuditKey, entry: &AuditedEntry<'_>) -> Result<Head> {
        self.append_chained(key, &[(entry.clone(), None)]).await
    }

    /// Appends reconcile events to the chain in one transaction: `describe` shows each with its
    /// own severity, reason and message; the chain carries them in the entry's record. `None`
    /// when there were none.
    pub async fn append_audited_events(&self, key: &AuditKey, events: &[crate::NewEvent<'_>]) -> Result<Option<Head>> {
        if events.is_empty() {
            return Ok(None);
        }
        let subjects: Vec<String> = events.iter().map(|e| format!("{}/{}", e.object.kind, e.object.name)).collect();
        let entries: Vec<(AuditedEntry<'_>, Option<Shown<'_>>)> = events
            .iter()
            .zip(&subjects)
            .map(|(event, subject)| {
                let record = serde_json::json!({
                    "severity": event.severity.as_str(),
                    "reason": event.reason,
                    "message": event.message,
                });
                let entry = AuditedEntry { kind: "reconcile.event", subject, record };
                (entry, Some(Shown { severity: event.severity.as_str(), reason: event.reason, message: event.message }))
            })
            .collect();
        self.append_chained(key, &entries).await.map(Some)
    }

    async fn append_chained(&self, key: &AuditKey, entries: &[(AuditedEntry<'_>, Option<Shown<'_>>)]) -> Result<Head> {
        let mut tx = self.write_transaction().await?;
        let last = sqlx::query("SELECT seq, mac FROM events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1")
            .fetch_optional(&mut *tx)
            .await?;
        let first = sqlx::query("SELECT mac FROM events WHERE seq = 1").fetch_optional(&mut *tx).await?;
        let first: Option<String> = match first {
            Some(row) => row.try_get("mac")?,
            None => None,
        };
        let (mut seq, mut prev) = match last {
            Some(row) => (row.try_get::<i64, _>("seq")?, row.try_get::<Option<String>, _>("mac")?.unwrap_or_default()),
            None => (0, GENESIS.to_owned()),
        };
        let mut first = first;
        for (entry, shown) in entries {
            seq += 1;
            let at = now();
            let text = canonical(&serde_json::json!({
                "seq": seq,
                "at": at,
                "kind": entry.kind,
                "subject": entry.subject,
                "record": entry.record,
            }));
            let mac = key.mac(&prev, &text);
            let (kind, name) = entry.subject.split_once('/').unwrap_or(("Session", entry.subject));
            let audited = format!("audited {}", entry.kind);
            let shown = shown.unwrap_or(Shown { severity: "Normal", reason: entry.kind, message: &audited });
            sqlx::query(
                "INSERT INTO events (at, kind, name, severity, reason, message, record, audited, seq, prev_mac, mac) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10)",
            )
            .bind(&at)
            .bind(kind)
            .bind(name)
            .bind(shown.severity)
            .bind(shown.reason)
            .bind(shown.message)
            .bind(&text)
            .bind(seq)
            .bind(&prev)
            .bind(&mac)
            .execute(&mut *tx)
            .await?;
            if seq == 1 {
                first = Some(mac.clone());
            }
            prev = mac;
        }
        tx.commit().await?;
        let head = Head { seq, mac: prev, chain: first };
        if let Err(error) = key.write_head(&head) {
            tracing::warn!(path = %key.head_path().display(), %error, "cannot write the audit head checkpoint");
        }
        Ok(head)
    }

    /// The chain rows with `from <= seq <= to`, in order.
    pub async fn chain(&self, from: i64, to: i64) -> Result<Vec<ChainRow>> {
        let rows = sqlx::query(
            "SELECT seq, prev_mac, mac, record FROM events WHERE seq IS NOT NULL AND seq >= $1 AND seq <= $2 ORDER BY seq",
        )
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(chain_row).collect()
    }

    /// Verifies entries `from..=to` (the whole chain by default) with `key`, and the head
    /// checkpoint when the range reaches the end. The verified head.
    pub async fn verify_chain(
        &self,
        key: &AuditKey,
        from: Option<i64>,
        to: Option<i64>,
    ) -> Result<std::result::Result<Option<Head>, ChainBreak>> {
        let from = from.unwrap_or(1).max(1);
        let rows = self.chain(from, to.unwrap_or(i64::MAX)).await?;
        // The link into the range: the MAC of the entry before it.
        let (prev, previous_seq) = if from == 1 {
            (GENESIS.to_owned(), None)
        } else {
            match self.chain(from - 1, from - 1).await?.pop() {
                Some(row) => (row.mac, Some(row.seq)),
                None => return Ok(Err(ChainBreak::BadLink { seq: from, previous: from - 1 })),
            }
        };
        if let Some(first) = rows.first()
            && first.seq != from
        {
            return Ok(Err(ChainBreak::BadLink { seq: from, previous: from - 1 }));
        }
        let head = match verify_rows(key, &rows, prev, previous_seq) {
            Ok(head) => head,
            Err(broken) => return Ok(Err(broken)),
        };
        if to.is_none()
            && let Some(checkpoint) = key.read_head()
        {
            if let Some(chain) = &checkpoint.chain {
                let first = if from == 1 { rows.first().cloned() } else { self.chain(1, 1).await?.pop() };
                if first.is_some_and(|row| &row.mac != chain) {
                    return Ok(Err(ChainBreak::OtherChain));
                }
            }
            let last = head.as_ref().map_or(from - 1, |h| h.seq);
            if checkpoint.seq > last {
                return Ok(Err(ChainBreak::Truncated { seq: last + 1, last, seq_head: checkpoint.seq }));
            }
            let stored = rows.iter().find(|r| r.seq == checkpoint.seq);
            if stored.is_some_and(|row| row.mac != checkpoint.mac) {
                return Ok(Err(ChainBreak::HeadMismatch { seq: checkpoint.seq }));
            }
        }
        Ok(Ok(head))
    }
}
