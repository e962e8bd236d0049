//! Objects, their generations, conditions and tombstones.

use std::collections::HashMap;

use roundtable_specs::output::{Condition, ConditionStatus};
use roundtable_specs::{Kind, ObjectKey};
use sqlx::Row;

use crate::{Error, Result, Store, Touched, now};

/// What the store remembers about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecord {
    pub key: ObjectKey,
    /// Given when the object is first recorded; a deleted object declared again gets a new one.
    pub uid: String,
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
    /// The execution generation an operator asked to run afresh (`reconcile --rerun`).
    pub rerun_generation: Option<i64>,
    /// Why nothing runs for the object although it is live: it is declared more than once.
    pub held: Option<String>,
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

/// Which object something belongs to: its name, which people read and a later object may reuse,
/// and its uid, which is that object's alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Identity {
    pub name: String,
    pub uid: String,
}

impl ObjectRecord {
    pub fn identity(&self) -> Identity {
        Identity { name: self.key.name.clone(), uid: self.uid.clone() }
    }
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
    /// Records the latest valid spec of an object: a new object gets a uid and starts at
    /// generation 1, a changed digest bumps it (and the execution generation when the run fields
    /// changed, superseding the proposals of earlier ones), an unchanged one writes nothing. A
    /// tombstoned object that reappears is a new object: a new uid, generation 1, no conditions.
    pub async fn record_spec(&self, spec: &SpecSnapshot<'_>) -> Result<ObjectRecord> {
        self.record_specs(std::slice::from_ref(spec)).await?;
        self.object(spec.key).await?.ok_or_else(|| Error::Corrupt(format!("{} vanished after writing", spec.key)))
    }

    /// [`Store::record_spec`] for many objects in one transaction.
    pub async fn record_specs(&self, specs: &[SpecSnapshot<'_>]) -> Result<Vec<Recorded>> {
        let mut tx = self.write_transaction().await?;
        crate::revision::check_pin(self, &mut tx).await?;
        let now = now();
        // One read for a large batch (a first scan), one per key for a small one (an edit).
        let mut existing: HashMap<(String, String), Existing> = HashMap::new();
        if specs.len() > BULK_THRESHOLD {
            let rows = sqlx::query(EXISTING_COLUMNS).fetch_all(&mut *tx).await?;
            for row in &rows {
                existing.insert((row.try_get("kind")?, row.try_get("name")?), Existing::from_row(row)?);
            }
        } else {
            for spec in specs {
                let row = sqlx::query(EXISTING_ONE)
                    .bind(spec.key.kind.as_str())
                    .bind(&spec.key.name)
                    .fetch_optional(&mut *tx)
                    .await?;
                if let Some(row) = row {
                    existing
                        .insert((spec.key.kind.as_str().to_owned(), spec.key.name.clone()), Existing::from_row(&row)?);
                }
            }
        }
        let mut recorded = Vec::with_capacity(specs.len());
        let mut inserts = Vec::new();
        for spec in specs {
            let previous = existing.get(&(spec.key.kind.as_str().to_owned(), spec.key.name.clone()));
            match previous {
                None => {
                    let execution_generation = spec.execution_digest.map(|_| 1i64);
                    inserts.push((spec, new_uid()?));
                    recorded.push(Recorded { key: spec.key.clone(), generation: 1, execution_generation, moved: true });
                }
                Some(previous) => recorded.push(update_one(&mut tx, previous, spec, &now).await?),
            }
        }
        for chunk in inserts.chunks(INSERT_CHUNK) {
            let sql = crate::values_insert(
                "INSERT INTO objects (kind, name, uid, generation, spec_digest, execution_digest, execution_generation, spec_json, source_file, created_at, updated_at)",
                11,
                chunk.len(),
            );
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (spec, uid) in chunk {
                insert = insert
                    .bind(spec.key.kind.as_str())
                    .bind(spec.key.name.as_str())
                    .bind(uid.as_str())
                    .bind(1i64)
                    .bind(spec.spec_digest)
                    .bind(spec.execution_digest)
                    .bind(spec.execution_digest.map(|_| 1i64))
                    .bind(spec.spec_json)
                    .bind(spec.source_file)
                    .bind(now.as_str())
                    .bind(now.as_str());
            }
            insert.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        // A spec recorded unchanged writes nothing.
        self.wrote(recorded.iter().filter(|r| r.moved).map(|r| Touched::Object(r.key.clone())));
        Ok(recorded)
    }

    pub async fn object(&self, key: &ObjectKey) -> Result<Option<ObjectRecord>> {
        object_with(self.pool(), key).await
    }

    /// What a scan compares against: every object's key, digest, file and tombstone, without
    /// the stored specs.
    pub async fn object_index(&self) -> Result<Vec<IndexEntry>> {
        let query =
            sqlx::query("SELECT kind, name, generation, spec_digest, source_file, deleted_at, held FROM objects");
        crate::fetch_mapped(self.pool(), query, |row| {
            Ok(IndexEntry {
                key: ObjectKey::new(parse_kind(&row.try_get::<String, _>("kind")?)?, row.try_get::<String, _>("name")?),
                generation: row.try_get("generation")?,
                spec_digest: row.try_get("spec_digest")?,
                source_file: row.try_get("source_file")?,
                deleted: row.try_get::<Option<String>, _>("deleted_at")?.is_some(),
                held: row.try_get("held")?,
            })
        })
        .await
    }

    /// The live objects of one kind, ordered by name.
    pub async fn live_objects_of(&self, kind: Kind) -> Result<Vec<ObjectRecord>> {
        let query = sqlx::query("SELECT * FROM objects WHERE kind = $1 AND deleted_at IS NULL ORDER BY name")
            .bind(kind.as_str());
        crate::fetch_mapped(self.pool(), query, object_from_row).await
    }

    /// Every object, live and tombstoned, ordered by kind and name.
    pub async fn objects(&self) -> Result<Vec<ObjectRecord>> {
        crate::fetch_mapped(self.pool(), sqlx::query("SELECT * FROM objects ORDER BY kind, name"), object_from_row)
            .await
    }

    /// `reconcile --rerun`: Assignment `name` moves to a new execution generation with the same
    /// run fields that never reuses an earlier result (as `kubectl rollout restart` makes a new
    /// ReplicaSet); the proposals of earlier generations are superseded in the same write. The
    /// new generation, or `None` when no live Assignment has that name.
    pub async fn request_rerun(&self, name: &str) -> Result<Option<i64>> {
        let mut tx = self.write_transaction().await?;
        let row = sqlx::query(
            "UPDATE objects SET execution_generation = execution_generation + 1, rerun_generation = execution_generation + 1, updated_at = $2 \
             WHERE kind = 'Assignment' AND name = $1 AND deleted_at IS NULL AND execution_generation IS NOT NULL \
             RETURNING uid, execution_generation",
        )
        .bind(name)
        .bind(now())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let (uid, generation): (String, i64) = (row.try_get("uid")?, row.try_get("execution_generation")?);
        crate::executions::supersede_proposals(&mut tx, &uid, generation).await?;
        tx.commit().await?;
        self.wrote([Touched::Object(ObjectKey::new(Kind::Assignment, name))]);
        Ok(Some(generation))
    }

    /// Marks an object whose spec disappeared; its cleanup reconcile will [`Store::forget`] it.
    pub async fn tombstone(&self, key: &ObjectKey) -> Result<bool> {
        let mut tx = self.write_transaction().await?;
        crate::revision::check_pin(self, &mut tx).await?;
        let done =
            sqlx::query("UPDATE objects SET deleted_at = $3 WHERE kind = $1 AND name = $2 AND deleted_at IS NULL")
                .bind(key.kind.as_str())
                .bind(&key.name)
                .bind(now())
                .execute(&mut *tx)
                .await?;
        tx.commit().await?;
        self.wrote([Touched::Object(key.clone())]);
        Ok(done.rows_affected() == 1)
    }

    /// Holds a live object (`why`), or releases it (`None`): see [`ObjectRecord::held`].
    pub async fn set_held(&self, key: &ObjectKey, why: Option<&str>) -> Result<()> {
        let mut tx = self.write_transaction().await?;
        crate::revision::check_pin(self, &mut tx).await?;
        sqlx::query("UPDATE objects SET held = $3 WHERE kind = $1 AND name = $2")
            .bind(key.kind.as_str())
            .bind(&key.name)
            .bind(why)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.wrote([Touched::Object(key.clone())]);
        Ok(())
    }

    /// Removes an object and its conditions once its cleanup is done.
    pub async fn forget(&self, key: &ObjectKey) -> Result<()> {
        let mut tx = self.write_transaction().await?;
        for statement in [
            "DELETE FROM conditions WHERE kind = $1 AND name = $2",
            "DELETE FROM objects WHERE kind = $1 AND name = $2",
        ] {
            sqlx::query(statement).bind(key.kind.as_str()).bind(&key.name).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        self.wrote([Touched::Object(key.clone())]);
        Ok(())
    }

    pub async fn set_status_json(&self, key: &ObjectKey, status: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE objects SET status_json = $3 WHERE kind = $1 AND name = $2")
            .bind(key.kind.as_str())
            .bind(&key.name)
            .bind(status)
            .execute(self.pool())
            .await?;
        self.wrote([Touched::Object(key.clone())]);
        Ok(())
    }

    pub async fn set_observed_generation(&self, key: &ObjectKey, generation: i64) -> Result<()> {
        sqlx::query("UPDATE objects SET observed_generation = $3 WHERE kind = $1 AND name = $2")
            .bind(key.kind.as_str())
            .bind(&key.name)
            .bind(generation)
            .execute(self.pool())
            .await?;
        self.wrote([Touched::Object(key.clone())]);
        Ok(())
    }

    /// Sets one condition. `lastTransitionTime` moves only when the status changes; the
    /// given condition's own `last_transition_time` is ignored.
    pub async fn set_condition(&self, key: &ObjectKey, condition: &Condition) -> Result<Condition> {
        let mut tx = self.write_transaction().await?;
        let previous = sqlx::query(
            "SELECT status, last_transition_time FROM conditions WHERE kind = $1 AND name = $2 AND type = $3",
        )
        .bind(key.kind.as_str())
        .bind(&key.name)
        .bind(&condition.type_)
        .fetch_optional(&mut *tx)
        .await?;
        let status = status_text(condition.status);
        let transition = match previous {
            Some(row) if row.try_get::<String, _>("status")? == status => row.try_get("last_transition_time")?,
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
        self.wrote([Touched::Object(key.clone())]);
        Ok(Condition { last_transition_time: transition, ..condition.clone() })
    }

    pub async fn conditions(&self, key: &ObjectKey) -> Result<Vec<Condition>> {
        conditions_with(self.pool(), key).await
    }

    /// Every object's conditions in one query (what `status` reads), each list by type.
    pub async fn all_conditions(&self) -> Result<std::collections::BTreeMap<ObjectKey, Vec<Condition>>> {
        let mut all: std::collections::BTreeMap<ObjectKey, Vec<Condition>> = std::collections::BTreeMap::new();
        let query = sqlx::query("SELECT * FROM conditions ORDER BY kind, name, type");
        crate::for_each_row(self.pool(), query, |row| {
            let kind: String = row.try_get("kind")?;
            let kind = Kind::parse(&kind).ok_or_else(|| Error::Corrupt(format!("condition kind {kind:?}")))?;
            all.entry(ObjectKey::new(kind, row.try_get::<String, _>("name")?))
                .or_default()
                .push(condition_from_row(row)?);
            Ok(())
        })
        .await?;
        Ok(all)
    }
}

/// One object's record through `executor` (the pool, or a connection reading several things).
pub(crate) async fn object_with(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    key: &ObjectKey,
) -> Result<Option<ObjectRecord>> {
    let row = sqlx::query("SELECT * FROM objects WHERE kind = $1 AND name = $2")
        .bind(key.kind.as_str())
        .bind(&key.name)
        .fetch_optional(executor)
        .await?;
    row.map(|row| object_from_row(&row)).transpose()
}

/// One object's conditions by type, through `executor`.
pub(crate) async fn conditions_with(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    key: &ObjectKey,
) -> Result<Vec<Condition>> {
    let rows = sqlx::query("SELECT * FROM conditions WHERE kind = $1 AND name = $2 ORDER BY type")
        .bind(key.kind.as_str())
        .bind(&key.name)
        .fetch_all(executor)
        .await?;
    rows.iter().map(condition_from_row).collect()
}

fn condition_from_row(row: &sqlx::any::AnyRow) -> Result<Condition> {
    Ok(Condition {
        type_: row.try_get("type")?,
        status: parse_status(&row.try_get::<String, _>("status")?)?,
        reason: row.try_get("reason")?,
        message: row.try_get("message")?,
        last_transition_time: row.try_get("last_transition_time")?,
        observed_generation: row.try_get("observed_generation")?,
    })
}

/// One row of [`Store::object_index`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub key: ObjectKey,
    pub generation: i64,
    pub spec_digest: String,
    pub source_file: String,
    pub deleted: bool,
    pub held: Option<String>,
}

/// What recording one spec did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub key: ObjectKey,
    pub generation: i64,
    pub execution_generation: Option<i64>,
    /// Created, changed or revived.
    pub moved: bool,
}

/// Batches larger than this read every row's state once instead of one row per key.
const BULK_THRESHOLD: usize = 64;
/// Rows per multi-row INSERT (11 binds each, well under SQLite's limit).
const INSERT_CHUNK: usize = 200;
const EXISTING_COLUMNS: &str =
    "SELECT kind, name, uid, generation, spec_digest, execution_generation, execution_digest, deleted_at FROM objects";
const EXISTING_ONE: &str = "SELECT kind, name, uid, generation, spec_digest, execution_generation, execution_digest, deleted_at FROM objects WHERE kind = $1 AND name = $2";

/// A new object's uid: 16 random bytes in hex.
fn new_uid() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| Error::Randomness(error.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The columns that decide how a recorded spec changes.
struct Existing {
    uid: String,
    generation: i64,
    spec_digest: String,
    execution_generation: Option<i64>,
    execution_digest: Option<String>,
    deleted: bool,
}

impl Existing {
    fn from_row(row: &sqlx::any::AnyRow) -> Result<Self> {
        Ok(Self {
            uid: row.try_get("uid")?,
            generation: row.try_get("generation")?,
            spec_digest: row.try_get("spec_digest")?,
            execution_generation: row.try_get("execution_generation")?,
            execution_digest: row.try_get("execution_digest")?,
            deleted: row.try_get::<Option<String>, _>("deleted_at")?.is_some(),
        })
    }
}

async fn update_one(
    tx: &mut sqlx::AnyConnection,
    previous: &Existing,
    spec: &SpecSnapshot<'_>,
    now: &str,
) -> Result<Recorded> {
    if previous.deleted {
        return recreate(tx, spec, now).await;
    }
    if previous.spec_digest == spec.spec_digest {
        return Ok(Recorded {
            key: spec.key.clone(),
            generation: previous.generation,
            execution_generation: previous.execution_generation,
            moved: false,
        });
    }
    let next_execution = if previous.execution_digest.as_deref() == spec.execution_digest {
        previous.execution_generation
    } else {
        spec.execution_digest.map(|_| previous.execution_generation.unwrap_or(0) + 1)
    };
    let next_generation = previous.generation + 1;
    sqlx::query(
        "UPDATE objects SET generation = $3, spec_digest = $4, execution_digest = $5, execution_generation = $6, spec_json = $7, source_file = $8, updated_at = $9 WHERE kind = $1 AND name = $2",
    )
    .bind(spec.key.kind.as_str())
    .bind(&spec.key.name)
    .bind(next_generation)
    .bind(spec.spec_digest)
    .bind(spec.execution_digest)
    .bind(next_execution)
    .bind(spec.spec_json)
    .bind(spec.source_file)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    if let Some(current) = next_execution.filter(|next| Some(*next) != previous.execution_generation) {
        crate::executions::supersede_proposals(tx, &previous.uid, current).await?;
    }
    Ok(Recorded {
        key: spec.key.clone(),
        generation: next_generation,
        execution_generation: next_execution,
        moved: true,
    })
}

/// A tombstoned object declared again: a new object under the old name. Its row is taken over
/// with a new uid, generation 1 and nothing observed; the earlier object's conditions go (its
/// sessions, proposals and events stay, under its own uid).
async fn recreate(tx: &mut sqlx::AnyConnection, spec: &SpecSnapshot<'_>, now: &str) -> Result<Recorded> {
    let execution_generation = spec.execution_digest.map(|_| 1i64);
    sqlx::query("DELETE FROM conditions WHERE kind = $1 AND name = $2")
        .bind(spec.key.kind.as_str())
        .bind(&spec.key.name)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE objects SET uid = $3, generation = 1, spec_digest = $4, execution_digest = $5, execution_generation = $6, spec_json = $7, source_file = $8, observed_generation = NULL, status_json = NULL, created_at = $9, updated_at = $9, deleted_at = NULL WHERE kind = $1 AND name = $2",
    )
    .bind(spec.key.kind.as_str())
    .bind(&spec.key.name)
    .bind(new_uid()?)
    .bind(spec.spec_digest)
    .bind(spec.execution_digest)
    .bind(execution_generation)
    .bind(spec.spec_json)
    .bind(spec.source_file)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(Recorded { key: spec.key.clone(), generation: 1, execution_generation, moved: true })
}

fn object_from_row(row: &sqlx::any::AnyRow) -> Result<ObjectRecord> {
    Ok(ObjectRecord {
        key: ObjectKey::new(parse_kind(&row.try_get::<String, _>("kind")?)?, row.try_get::<String, _>("name")?),
        uid: row.try_get("uid")?,
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
        rerun_generation: row.try_get("rerun_generation")?,
        held: row.try_get("held")?,
    })
}
