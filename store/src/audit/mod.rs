//! The HMAC audit chain over the audited rows of the events table:
//! `mac_n = HMAC-SHA256(key, mac_{n-1} ‖ canonical(entry_n))`, `mac_0` = 32 zero bytes. Appends
//! run in one `BEGIN IMMEDIATE` transaction and `seq` is `UNIQUE`, so two writers (the daemon and
//! the CLI) can never fork the chain. The key lives outside the state directory; after each append
//! the head (seq, mac) is written beside it, so truncating the table is detected too.

mod anchor;
mod key;
mod view;

use roundtable_specs::audit::{AuditRecord, EntryKind};
use sqlx::Row;

pub use anchor::{Anchor, PROPOSAL_ENTRY, RECEIPT_ENTRY};
pub use key::{AuditKey, FingerprintKey, KeyChoice, KeyError};
pub use view::{EntryView, RECONCILE_EVENT};

use crate::{Result, Store, now};

/// The MAC before the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The kind of the entry `start --new-audit-key` appends as the first under a new key, in place
/// of a lost one; its record names the old head (`previousHead`: seq and MAC).
pub const KEY_REPLACED: &str = EntryKind::AuditKeyReplaced.as_str();

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
    /// What happened: an [`EntryKind`]'s word, e.g. `session.ended`, `capability.revoked`.
    pub kind: &'a str,
    /// `Kind/name` or a session id: what it is about.
    pub subject: &'a str,
    pub record: serde_json::Value,
}

impl<'a> AuditedEntry<'a> {
    /// The entry that seals `record` under its kind.
    pub fn of(subject: &'a str, record: &impl AuditRecord) -> Result<Self, serde_json::Error> {
        Ok(Self { kind: record.kind().as_str(), subject, record: serde_json::to_value(record)? })
    }
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
    #[error("entry {seq}: its {column} column differs from what the entry's MAC covers (the row was edited)")]
    ColumnEdited { seq: i64, column: &'static str },
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

/// What a verification established.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verified {
    /// The newest entry verified, if any was.
    pub head: Option<Head>,
    /// Entries sealed under a key that was lost and replaced: found in order and linked, but
    /// their MACs could not be checked, so nothing in them is verified.
    pub unverified: Option<Unverified>,
}

/// The entries of a verified range sealed under a lost key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unverified {
    pub first: i64,
    pub last: i64,
    /// The [`KEY_REPLACED`] entry that started the key in use, when it is after `last`.
    pub replaced_at: i64,
}

/// Whether `row` is a [`KEY_REPLACED`] entry (by its canonical entry, which the MAC covers).
fn replaces_key(row: &ChainRow) -> bool {
    serde_json::from_str::<serde_json::Value>(&row.entry).is_ok_and(|entry| entry["kind"] == KEY_REPLACED)
}

/// The newest [`KEY_REPLACED`] entry of `rows`: entries before it were sealed under a lost key.
fn last_replacement(rows: &[ChainRow]) -> Option<i64> {
    rows.iter().rev().find(|row| replaces_key(row)).map(|row| row.seq)
}

/// Checks `rows` (in order) link correctly, starting from `prev` (the MAC before the first row),
/// and MAC correctly from the newest key replacement among them on; the rows before it were
/// sealed under a lost key and are reported as unverified, never as verified.
pub fn verify_rows(
    key: &AuditKey,
    rows: &[ChainRow],
    prev: String,
    previous_seq: Option<i64>,
) -> Result<Verified, ChainBreak> {
    verify_sealed(key, rows, prev, previous_seq, last_replacement(rows).unwrap_or(i64::MIN))
}

/// [`verify_rows`] with the first entry under `key` given: `sealed_from`.
fn verify_sealed(
    key: &AuditKey,
    rows: &[ChainRow],
    mut prev: String,
    mut previous_seq: Option<i64>,
    sealed_from: i64,
) -> Result<Verified, ChainBreak> {
    let mut verified = Verified::default();
    for row in rows {
        if let Some(previous) = previous_seq
            && (row.seq != previous + 1 || row.prev_mac != prev)
        {
            return Err(ChainBreak::BadLink { seq: row.seq, previous });
        }
        let sealed = row.seq >= sealed_from;
        if sealed && (row.prev_mac != prev || key.mac(&row.prev_mac, &row.entry) != row.mac) {
            return Err(ChainBreak::BadMac { seq: row.seq });
        }
        if !sealed && row.prev_mac != prev {
            return Err(ChainBreak::BadLink { seq: row.seq, previous: previous_seq.unwrap_or(0) });
        }
        // The entry names its own sequence number: a row moved elsewhere no longer fits.
        let named = serde_json::from_str::<serde_json::Value>(&row.entry).ok().and_then(|e| e["seq"].as_i64());
        if named != Some(row.seq) {
            return Err(ChainBreak::BadMac { seq: row.seq });
        }
        prev.clone_from(&row.mac);
        previous_seq = Some(row.seq);
        if sealed {
            verified.head = Some(Head { seq: row.seq, mac: row.mac.clone(), chain: None });
        } else {
            let first = verified.unverified.map_or(row.seq, |u| u.first);
            verified.unverified = Some(Unverified { first, last: row.seq, replaced_at: sealed_from });
        }
    }
    Ok(verified)
}

/// A chain row with the event columns stored beside it.
struct StoredRow {
    row: ChainRow,
    columns: EntryView,
}

const CHAIN_COLUMNS: &str = "seq, prev_mac, mac, record, at, kind, name, severity, reason, message";

fn chain_row(row: &sqlx::any::AnyRow) -> Result<ChainRow> {
    Ok(ChainRow {
        seq: row.try_get("seq")?,
        prev_mac: row.try_get::<Option<String>, _>("prev_mac")?.unwrap_or_default(),
        mac: row.try_get::<Option<String>, _>("mac")?.unwrap_or_default(),
        entry: row.try_get::<Option<String>, _>("record")?.unwrap_or_default(),
    })
}

fn stored_row(row: &sqlx::any::AnyRow) -> Result<StoredRow> {
    Ok(StoredRow { row: chain_row(row)?, columns: stored_columns(row)? })
}

/// An events row's columns as stored, whatever its entry says.
pub(crate) fn stored_columns(row: &sqlx::any::AnyRow) -> Result<EntryView> {
    Ok(EntryView {
        at: row.try_get("at")?,
        kind: row.try_get("kind")?,
        name: row.try_get("name")?,
        severity: row.try_get("severity")?,
        reason: row.try_get("reason")?,
        message: row.try_get("message")?,
    })
}

impl Store {
    /// Appends `entry` to the chain in one immediate transaction; the new head, also written
    /// beside the key.
    pub async fn append_audited(&self, key: &AuditKey, entry: &AuditedEntry<'_>) -> Result<Head> {
        self.append_chained(key, std::slice::from_ref(entry), false).await
    }

    /// Appends `entry` ([`KEY_REPLACED`]) under a new key, its record naming the head it follows
    /// (read inside the appending transaction, so it is the head the entry links to).
    pub(crate) async fn append_replacing(&self, key: &AuditKey, entry: &AuditedEntry<'_>) -> Result<Head> {
        self.append_chained(key, std::slice::from_ref(entry), true).await
    }

    /// How many entries the chain holds.
    /// The first and last chain sequence numbers of the entries about any of `subjects` (a
    /// session's id and its proposal's): where a run stands in the chain. `None` when none is.
    pub async fn chain_span(&self, subjects: &[&str; 2]) -> Result<Option<(i64, i64)>> {
        let row = sqlx::query(
            "SELECT MIN(seq) AS first, MAX(seq) AS last FROM events WHERE seq IS NOT NULL AND (name = $1 OR name = $2)",
        )
        .bind(subjects[0])
        .bind(subjects[1])
        .fetch_one(self.pool())
        .await?;
        let first: Option<i64> = row.try_get("first")?;
        let last: Option<i64> = row.try_get("last")?;
        Ok(first.zip(last))
    }

    pub async fn chain_length(&self) -> Result<i64> {
        let row =
            sqlx::query("SELECT COUNT(*) AS entries FROM events WHERE seq IS NOT NULL").fetch_one(self.pool()).await?;
        Ok(row.try_get("entries")?)
    }

    pub(crate) async fn append_chained(
        &self,
        key: &AuditKey,
        entries: &[AuditedEntry<'_>],
        replacing: bool,
    ) -> Result<Head> {
        let mut tx = self.write_transaction().await?;
        let last = sqlx::query("SELECT seq, mac FROM events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1")
            .fetch_optional(&mut *tx)
            .await?;
        let first = sqlx::query("SELECT mac FROM events WHERE seq = 1").fetch_optional(&mut *tx).await?;
        let mut first: Option<String> = match first {
            Some(row) => row.try_get("mac")?,
            None => None,
        };
        let (mut seq, mut prev) = match last {
            Some(row) => (row.try_get::<i64, _>("seq")?, row.try_get::<Option<String>, _>("mac")?.unwrap_or_default()),
            None => (0, GENESIS.to_owned()),
        };
        for entry in entries {
            let mut record = entry.record.clone();
            if replacing && let Some(map) = record.as_object_mut() {
                map.insert("previousHead".into(), serde_json::json!({"seq": seq, "mac": prev}));
            }
            seq += 1;
            let text = canonical(&serde_json::json!({
                "seq": seq,
                "at": now(),
                "kind": entry.kind,
                "subject": entry.subject,
                "record": record,
            }));
            let mac = key.mac(&prev, &text);
            // The columns are drawn from the entry alone (`EntryView::columns_of`), so verify
            // can hold every one of them to what the MAC covers.
            let view = EntryView::columns_of(&text)
                .ok_or_else(|| crate::Error::Corrupt(format!("audited entry {seq} does not read back")))?;
            sqlx::query(
                "INSERT INTO events (at, kind, name, severity, reason, message, record, audited, seq, prev_mac, mac, uid) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10, (SELECT uid FROM objects WHERE kind = $2 AND name = $3))",
            )
            .bind(&view.at)
            .bind(&view.kind)
            .bind(&view.name)
            .bind(&view.severity)
            .bind(&view.reason)
            .bind(&view.message)
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
        Ok(self.stored_chain(from, to).await?.into_iter().map(|stored| stored.row).collect())
    }

    async fn stored_chain(&self, from: i64, to: i64) -> Result<Vec<StoredRow>> {
        let sql = format!(
            "SELECT {CHAIN_COLUMNS} FROM events WHERE seq IS NOT NULL AND seq >= $1 AND seq <= $2 ORDER BY seq"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(from).bind(to).fetch_all(self.pool()).await?;
        rows.iter().map(stored_row).collect()
    }

    /// Verifies entries `from..=to` (the whole chain by default) with `key`: their links, their
    /// MACs from the newest key replacement on (what came before is reported unverified), that
    /// every stored column reads as its entry does, and the head checkpoint when the range
    /// reaches the end.
    pub async fn verify_chain(
        &self,
        key: &AuditKey,
        from: Option<i64>,
        to: Option<i64>,
    ) -> Result<std::result::Result<Verified, ChainBreak>> {
        let from = from.unwrap_or(1).max(1);
        // The whole chain is read: which key sealed an entry depends on replacements after it.
        let all = self.stored_chain(1, i64::MAX).await?;
        let chain: Vec<ChainRow> = all.iter().map(|stored| stored.row.clone()).collect();
        let sealed_from = last_replacement(&chain).unwrap_or(1);
        let upto = to.unwrap_or(i64::MAX);
        let in_range = |row: &&ChainRow| row.seq >= from && row.seq <= upto;
        let rows: Vec<ChainRow> = chain.iter().filter(in_range).cloned().collect();
        // The link into the range: the MAC of the entry before it.
        let (prev, previous_seq) = if from == 1 {
            (GENESIS.to_owned(), None)
        } else {
            match chain.iter().find(|row| row.seq == from - 1) {
                Some(row) => (row.mac.clone(), Some(row.seq)),
                None => return Ok(Err(ChainBreak::BadLink { seq: from, previous: from - 1 })),
            }
        };
        if let Some(first) = rows.first()
            && first.seq != from
        {
            return Ok(Err(ChainBreak::BadLink { seq: from, previous: from - 1 }));
        }
        let verified = match verify_sealed(key, &rows, prev, previous_seq, sealed_from) {
            Ok(verified) => verified,
            Err(broken) => return Ok(Err(broken)),
        };
        for stored in all.iter().filter(|stored| in_range(&&stored.row)) {
            let edited =
                EntryView::columns_of(&stored.row.entry).map(|sealed| sealed.first_difference(&stored.columns));
            match edited {
                None => return Ok(Err(ChainBreak::BadMac { seq: stored.row.seq })),
                Some(Some(column)) => return Ok(Err(ChainBreak::ColumnEdited { seq: stored.row.seq, column })),
                Some(None) => {}
            }
        }
        if to.is_none()
            && let Some(checkpoint) = key.read_head()
            && let Err(broken) = check_checkpoint(&checkpoint, &chain, &verified, from)
        {
            return Ok(Err(broken));
        }
        Ok(Ok(verified))
    }
}

/// The head checkpoint beside the key against the stored chain (read whole) and what was verified.
fn check_checkpoint(checkpoint: &Head, chain: &[ChainRow], verified: &Verified, from: i64) -> Result<(), ChainBreak> {
    if let Some(first) = &checkpoint.chain
        && chain.first().is_some_and(|row| row.seq == 1 && &row.mac != first)
    {
        return Err(ChainBreak::OtherChain);
    }
    let last = verified.head.as_ref().map(|h| h.seq).or(verified.unverified.map(|u| u.last)).unwrap_or(from - 1);
    if checkpoint.seq > last {
        return Err(ChainBreak::Truncated { seq: last + 1, last, seq_head: checkpoint.seq });
    }
    let stored = chain.iter().find(|row| row.seq == checkpoint.seq);
    if stored.is_some_and(|row| row.mac != checkpoint.mac) {
        return Err(ChainBreak::HeadMismatch { seq: checkpoint.seq });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `sql` on the store's database, as anyone who can write it would.
    async fn tamper(store: &Store, sql: &'static str) {
        sqlx::query(sql).execute(store.pool()).await.expect(sql);
    }

    /// Hostile: `audit verify` once accepted the columns of an older view beside the current one,
    /// so an edit of the database turned a failed session's `Warning` into `Normal` unseen; and a
    /// summary whose wording changed broke every chain sealed before. The columns are now drawn
    /// from the entry's kind alone, compared strictly, while readers summarise the record.
    #[tokio::test]
    async fn every_column_of_an_audited_entry_is_held_to_the_entry_and_readers_summarise_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("state")).await.expect("open");
        let key = AuditKey::create(&dir.path().join("keys/audit.key")).expect("key");
        let verify = || async { store.verify_chain(&key, None, None).await.expect("read") };
        let record = serde_json::json!({"phase": "Failed", "exitCode": 3, "durationMs": 4210, "message": "m"});
        let entry = AuditedEntry { kind: "session.ended", subject: "s1", record };
        store.append_audited(&key, &entry).await.expect("append");
        assert!(verify().await.is_ok());
        let shown = store.events_after(0, 10).await.expect("events");
        assert_eq!(
            (shown[0].severity.as_str(), shown[0].message.as_str()),
            ("Warning", "Failed after 4.2s, exit code 3: m"),
            "readers summarise the MAC'd record"
        );
        tamper(&store, "UPDATE events SET severity = 'Warning' WHERE seq = 1").await;
        assert_eq!(verify().await, Err(ChainBreak::ColumnEdited { seq: 1, column: "severity" }));
        tamper(&store, "UPDATE events SET severity = 'Normal', message = 'Succeeded' WHERE seq = 1").await;
        assert_eq!(verify().await, Err(ChainBreak::ColumnEdited { seq: 1, column: "message" }));
        tamper(&store, "UPDATE events SET message = 'audited session.ended' WHERE seq = 1").await;
        assert!(verify().await.is_ok(), "restored");
        store.close().await;
    }
}
