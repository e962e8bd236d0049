//! The events table: `kubectl get events`-style records, some of them audited.

use roundtable_specs::ObjectKey;
use sqlx::Row;

use roundtable_specs::audit::ReconcileEvent;
use roundtable_specs::events::{EventReason, Reason};

use crate::audit::{AuditKey, AuditedEntry, EntryView, Head, stored_columns};
use crate::{Result, Store, now};

/// The reason shown for an audited event whose sealed entry does not read.
const UNREADABLE: EventReason = EventReason::AuditEntryUnreadable;

/// `Normal` or `Warning`, as in Kubernetes events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Normal,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Normal => "Normal",
            Severity::Warning => "Warning",
        }
    }
}

/// Rows per multi-row INSERT (7 binds each).
const EVENT_CHUNK: usize = 300;

/// An event to append.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub object: &'a ObjectKey,
    pub severity: Severity,
    /// One of the typed event reasons, or a `Ready` condition's reason (`ImageMissing`).
    pub reason: Reason,
    pub message: &'a str,
    /// Canonical JSON of a structured record, for audited entries.
    pub record: Option<&'a str>,
}

/// An event as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub id: i64,
    pub at: String,
    pub object: String,
    pub severity: String,
    pub reason: String,
    pub message: String,
    pub record: Option<String>,
    pub seq: Option<i64>,
}

impl Store {
    /// Appends reconcile events to the chain in one transaction: each entry's record carries
    /// the event's severity, reason and message, which is what `describe` shows of it. `None`
    /// when there were none.
    pub async fn append_audited_events(&self, key: &AuditKey, events: &[NewEvent<'_>]) -> Result<Option<Head>> {
        if events.is_empty() {
            return Ok(None);
        }
        let subjects: Vec<String> = events.iter().map(|e| format!("{}/{}", e.object.kind, e.object.name)).collect();
        let entries: Vec<AuditedEntry<'_>> = events
            .iter()
            .zip(&subjects)
            .map(|(event, subject)| {
                let record = ReconcileEvent {
                    severity: event.severity.as_str(),
                    reason: event.reason.as_str(),
                    message: event.message,
                };
                AuditedEntry::of(subject, &record)
            })
            .collect::<Result<_, _>>()
            .map_err(crate::Error::Record)?;
        self.append_chained(key, &entries, false).await.map(Some)
    }

    /// Appends a plain (unaudited) event and returns its id.
    pub async fn append_event(&self, event: &NewEvent<'_>) -> Result<i64> {
        let row = sqlx::query(
            "INSERT INTO events (at, kind, name, severity, reason, message, record, uid) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, (SELECT uid FROM objects WHERE kind = $2 AND name = $3)) RETURNING id",
        )
        .bind(now())
        .bind(event.object.kind.as_str())
        .bind(&event.object.name)
        .bind(event.severity.as_str())
        .bind(event.reason.as_str())
        .bind(event.message)
        .bind(event.record)
        .fetch_one(self.pool())
        .await?;
        self.wrote([]);
        Ok(row.try_get("id")?)
    }

    /// Appends many plain events in one transaction.
    pub async fn append_events(&self, events: &[NewEvent<'_>]) -> Result<()> {
        let mut tx = self.write_transaction().await?;
        let at = now();
        let before: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM events").fetch_one(&mut *tx).await?;
        for chunk in events.chunks(EVENT_CHUNK) {
            let sql = crate::values_insert(
                "INSERT INTO events (at, kind, name, severity, reason, message, record)",
                7,
                chunk.len(),
            );
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
            for event in chunk {
                insert = insert
                    .bind(at.as_str())
                    .bind(event.object.kind.as_str())
                    .bind(event.object.name.as_str())
                    .bind(event.severity.as_str())
                    .bind(event.reason.as_str())
                    .bind(event.message)
                    .bind(event.record);
            }
            insert.execute(&mut *tx).await?;
        }
        tag_with_uids(&mut tx, before).await?;
        tx.commit().await?;
        self.wrote([]);
        Ok(())
    }

    /// Events of every object, newest first, older than event `before` when given.
    pub async fn recent_events(&self, before: Option<i64>, limit: i64) -> Result<Vec<EventRecord>> {
        let rows = sqlx::query("SELECT * FROM events WHERE id < $1 ORDER BY id DESC LIMIT $2")
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// Events of every object after event `after`, oldest first (a watch resuming from it).
    pub async fn events_after(&self, after: i64, limit: i64) -> Result<Vec<EventRecord>> {
        let rows = sqlx::query("SELECT * FROM events WHERE id > $1 ORDER BY id LIMIT $2")
            .bind(after)
            .bind(limit)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// The id of the newest event; 0 when there is none.
    pub async fn last_event_id(&self) -> Result<i64> {
        Ok(sqlx::query_scalar::<_, Option<i64>>("SELECT MAX(id) FROM events")
            .fetch_one(self.pool())
            .await?
            .unwrap_or(0))
    }

    /// The most recent `limit` events of the object with uid `uid` (an earlier object of the
    /// same name had other events), oldest first.
    pub async fn events(&self, object: &ObjectKey, uid: &str, limit: i64) -> Result<Vec<EventRecord>> {
        let rows = sqlx::query(
            "SELECT * FROM (SELECT * FROM events WHERE kind = $1 AND name = $2 AND uid = $4 ORDER BY id DESC LIMIT $3) AS recent ORDER BY id",
        )
        .bind(object.kind.as_str())
        .bind(&object.name)
        .bind(limit)
        .bind(uid)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// The newest `limit` events of every object that had `object`'s kind and name, newest first:
    /// what is left of an object removed and forgotten (events outlive it).
    pub async fn events_by_name(&self, object: &ObjectKey, limit: i64) -> Result<Vec<EventRecord>> {
        let rows = sqlx::query("SELECT * FROM events WHERE kind = $1 AND name = $2 ORDER BY id DESC LIMIT $3")
            .bind(object.kind.as_str())
            .bind(&object.name)
            .bind(limit)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(event_from_row).collect()
    }
}

/// An event as read: an audited row shows its entry's view (what the MAC covers), never its
/// columns, which an edit of the database could change without touching the chain.
fn event_from_row(row: &sqlx::any::AnyRow) -> Result<EventRecord> {
    let seq: Option<i64> = row.try_get("seq")?;
    let record: Option<String> = row.try_get("record")?;
    let sealed = match (seq, &record) {
        (Some(_), Some(entry)) => EntryView::of(entry),
        _ => None,
    };
    let view = match sealed {
        Some(view) => view,
        None if seq.is_some() => EntryView {
            severity: "Warning".into(),
            reason: UNREADABLE.as_str().into(),
            message: "this audited event's sealed entry does not read; run `roundtable audit verify`".into(),
            ..stored_columns(row)?
        },
        None => stored_columns(row)?,
    };
    Ok(EventRecord {
        id: row.try_get("id")?,
        at: view.at,
        object: format!("{}/{}", view.kind, view.name),
        severity: view.severity,
        reason: view.reason,
        message: view.message,
        record,
        seq,
    })
}

/// Gives the events appended after event `after` the uid of the object each is about, as it is
/// now (inside the transaction that appended them).
pub(crate) async fn tag_with_uids(tx: &mut sqlx::AnyConnection, after: i64) -> Result<()> {
    sqlx::query(
        "UPDATE events SET uid = (SELECT o.uid FROM objects o WHERE o.kind = events.kind AND o.name = events.name) \
         WHERE id > $1 AND uid IS NULL",
    )
    .bind(after)
    .execute(&mut *tx)
    .await?;
    Ok(())
}
