//! Objects, their generations, conditions and tombstones.

use roundtable_specs::output::{Condition, ConditionStatus};
use roundtable_specs::{Kind, ObjectKey};
use sqlx::Row;

use crate::{Error, Result, Store, now};

/// What the store remembers about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecord {
    pub key: ObjectKey,
    pub generation: i64,
    pub spec_digest: String,
    pub execution_generation: Option<i64>,
    pub execution_digest: Option<String>,
    pub spec_json: String,
    pub source_file: String,
    pub observed_generation: Option<i64>,
    pub created_at: String,
    pub deleted_at: Option<String>,
    /// Kind-specific observed status, as JSON.
    pub status_json: Option<String>,
}

fn status_text(status: ConditionStatus) -> &'static str {
    match status {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

fn parse_status(text: &str) -> Result<ConditionStatus> {
    match text {
        "True" => Ok(ConditionStatus::True),
        "False" => Ok(ConditionStatus::False),
        "Unknown" => Ok(ConditionStatus::Unknown),
        other => Err(Error::Corrupt(format!("condition status {other:?}"))),
    }
}

fn parse_kind(text: &str) -> Result<Kind> {
    Kind::parse(text).ok_or_else(|| Error::Corrupt(format!("object kind {text:?}")))
}

/// The spec as the store receives it from a scan.
#[derive(Debug, Clone)]
pub struct SpecSnapshot<'a> {
    pub key: &'a ObjectKey,
    pub spec_digest: &'a str,
    pub execution_digest: Option<&'a str>,
    pub spec_json: &'a str,
    pub source_file: &'a str,
}

impl Store {
    /// Records the latest valid spec of an object: a new object starts at generation 1, a
    /// changed digest bumps it (and the execution generation when the run fields changed), an
    /// unchanged one writes nothing. A tombstoned object that reappears is revived.
    pub async fn record_spec(&self, spec: &SpecSnapshot<'_>) -> Result<ObjectRecord> {
        let mut tx = self.write_transaction().await?;
        let now = now();
        let existing = sqlx::query(
            "SELECT generation, spec_digest, execution_generation, execution_digest, deleted_at FROM objects WHERE kind = $1 AND name = $2",
        )
        .bind(spec.key.kind.as_str())
        .bind(&spec.key.name)
        .fetch_optional(&mut *tx)
        .await?;
        match existing {
            None => {
                sqlx::query(
                    "INSERT INTO objects (kind, name, generation, spec_digest, execution_digest, execution_generation, spec_json, source_file, created_at, updated_at) VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $8, $8)",
                )
                .bind(spec.key.kind.as_str())
                .bind(&spec.key.name)
                .bind(spec.spec_digest)
                .bind(spec.execution_digest)
                .bind(spec.execution_digest.map(|_| 1i64))
                .bind(spec.spec_json)
                .bind(spec.source_file)
                .bind(&now)
                .execute(&mut *tx)
                .await?;
            }
            Some(row) => {
                let generation: i64 = row.try_get("generation")?;
                let digest: String = row.try_get("spec_digest")?;
                let execution_generation: Option<i64> = row.try_get("execution_generation")?;
                let execution_digest: Option<String> = row.try_get("execution_digest")?;
                let deleted_at: Option<String> = row.try_get("deleted_at")?;
                if digest != spec.spec_digest || deleted_at.is_some() {
                    let next_execution = if execution_digest.as_deref() == spec.execution_digest {
                        execution_generation
                    } else {
                        spec.execution_digest
                            .map(|_| execution_generation.unwrap_or(0) + 1)
                    };
                    let next_generation = if digest == spec.spec_digest {
                        generation
                    } else {
                        generation + 1
                    };
                    sqlx::query(
                        "UPDATE objects SET generation = $3, spec_digest = $4, execution_digest = $5, execution_generation = $6, spec_json = $7, source_file = $8, updated_at = $9, deleted_at = NULL WHERE kind = $1 AND name = $2",
                    )
                    .bind(spec.key.kind.as_str())
                    .bind(&spec.key.name)
                    .bind(next_generation)
                    .bind(spec.spec_digest)
                    .bind(spec.execution_digest)
                    .bind(next_execution)
                    .bind(spec.spec_json)
                    .bind(spec.source_file)
                    .bind(&now)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await?;
        self.object(spec.key)
            .await?
            .ok_or_else(|| Error::Corrupt(format!("{} vanished after writing", spec.key)))
    }

    pub async fn object(&self, key: &ObjectKey) -> Result<Option<ObjectRecord>> {
        let row = sqlx::query("SELECT * FROM objects WHERE kind = $1 AND name = $2")
            .bind(key.kind.as_str())
            .bind(&key.name)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| object_from_row(&row)).transpose()
    }

    /// Every object, live and tombstoned, ordered by kind and name.
    pub async fn objects(&self) -> Result<Vec<ObjectRecord>> {
        let rows = sqlx::query("SELECT * FROM objects ORDER BY kind, name")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(object_from_row).collect()
    }

    /// Marks an object whose spec disappeared; its cleanup reconcile will [`Store::forget`] it.
    pub async fn tombstone(&self, key: &ObjectKey) -> Result<bool> {
        let done = sqlx::query("UPDATE objects SET deleted_at = $3 WHERE kind = $1 AND name = $2 AND deleted_at IS NULL")
            .bind(key.kind.as_str())
            .bind(&key.name)
            .bind(now())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes an object and its conditions once its cleanup is done.
    pub async fn forget(&self, key: &ObjectKey) -> Result<()> {
        let mut tx = self.write_transaction().await?;
        for statement in [
            "DELETE FROM conditions WHERE kind = $1 AND name = $2",
            "DELETE FROM objects WHERE kind = $1 AND name = $2",
        ] {
            sqlx::query(statement)
                .bind(key.kind.as_str())
                .bind(&key.name)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn set_status_json(&self, key: &ObjectKey, status: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE objects SET status_json = $3 WHERE kind = $1 AND name = $2")
            .bind(key.kind.as_str())
            .bind(&key.name)
            .bind(status)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn set_observed_generation(&self, key: &ObjectKey, generation: i64) -> Result<()> {
        sqlx::query("UPDATE objects SET observed_generation = $3 WHERE kind = $1 AND name = $2")
            .bind(key.kind.as_str())
            .bind(&key.name)
            .bind(generation)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Sets one condition. `lastTransitionTime` moves only when the status changes; the
    /// given condition's own `last_transition_time` is ignored.
    pub async fn set_condition(&self, key: &ObjectKey, condition: &Condition) -> Result<Condition> {
        let mut tx = self.write_transaction().await?;
        let previous = sqlx::query("SELECT status, last_transition_time FROM conditions WHERE kind = $1 AND name = $2 AND type = $3")
            .bind(key.kind.as_str())
            .bind(&key.name)
            .bind(&condition.type_)
            .fetch_optional(&mut *tx)
            .await?;
        let status = status_text(condition.status);
        let transition = match previous {
            Some(row) if row.try_get::<String, _>("status")? == status => {
                row.try_get("last_transition_time")?
            }
            _ => now(),
        };
        sqlx::query(
            "INSERT INTO conditions (kind, name, type, status, reason, message, last_transition_time, observed_generation) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (kind, name, type) DO UPDATE SET status = excluded.status, reason = excluded.reason, message = excluded.message, last_transition_time = excluded.last_transition_time, observed_generation = excluded.observed_generation",
        )
        .bind(key.kind.as_str())
        .bind(&key.name)
        .bind(&condition.type_)
        .bind(status)
        .bind(&condition.reason)
        .bind(&condition.message)
        .bind(&transition)
        .bind(condition.observed_generation)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Condition {
            last_transition_time: transition,
            ..condition.clone()
        })
    }

    pub async fn conditions(&self, key: &ObjectKey) -> Result<Vec<Condition>> {
        let rows =
            sqlx::query("SELECT * FROM conditions WHERE kind = $1 AND name = $2 ORDER BY type")
                .bind(key.kind.as_str())
                .bind(&key.name)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|row| {
                Ok(Condition {
                    type_: row.try_get("type")?,
                    status: parse_status(&row.try_get::<String, _>("status")?)?,
                    reason: row.try_get("reason")?,
                    message: row.try_get("message")?,
                    last_transition_time: row.try_get("last_transition_time")?,
                    observed_generation: row.try_get("observed_generation")?,
                })
            })
            .collect()
    }
}

fn object_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<ObjectRecord> {
    Ok(ObjectRecord {
        key: ObjectKey::new(
            parse_kind(&row.try_get::<String, _>("kind")?)?,
            row.try_get::<String, _>("name")?,
        ),
        generation: row.try_get("generation")?,
        spec_digest: row.try_get("spec_digest")?,
        execution_generation: row.try_get("execution_generation")?,
        execution_digest: row.try_get("execution_digest")?,
        spec_json: row.try_get("spec_json")?,
        source_file: row.try_get("source_file")?,
        observed_generation: row.try_get("observed_generation")?,
        created_at: row.try_get("created_at")?,
        deleted_at: row.try_get("deleted_at")?,
        status_json: row.try_get("status_json")?,
    })
}
