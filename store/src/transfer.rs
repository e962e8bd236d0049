//! Moving a project's state from one store to another (`roundtable state migrate`), typically
//! from its SQLite file to a PostgreSQL database that several controllers will share. Every table
//! that holds the project's history is copied row by row in one transaction on the target, which
//! must be empty; the audit chain's rows keep their sequence numbers and MACs, so it verifies
//! with the same key afterwards. Runtime-only tables (controllers, leases, the desired revision, the source)
//! are not copied: the controllers that start on the target register afresh. The target takes
//! the source's repository key, so the project's persistent homes stay its own.

use sqlx::Row;

use crate::{Dialect, Error, Result, Store};

/// The copied tables, in order; each with its identity column, if it has one.
const TABLES: &[(&str, Option<&str>)] = &[
    ("objects", None),
    ("conditions", None),
    ("events", Some("id")),
    ("file_errors", None),
    ("sessions", None),
    ("proposals", None),
    ("proposal_patches", None),
    ("notes", Some("id")),
    ("claims", None),
    ("heartbeats", None),
    ("probes", None),
    ("canaries", None),
    ("agent_overrides", None),
    ("idempotency_keys", None),
    ("diagnostics", None),
    ("credential_fingerprints", None),
];

/// How a column's values are read and bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    Text,
    Integer,
    Bytes,
}

/// One table's count after the copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub table: &'static str,
    pub rows: usize,
}

impl Store {
    /// The columns of `table` with how to carry their values, from the catalogue of this store.
    async fn columns(&self, table: &str) -> Result<Vec<(String, Value)>> {
        let rows = match self.dialect {
            Dialect::Sqlite => {
                sqlx::query("SELECT name, type FROM pragma_table_info($1) ORDER BY cid")
                    .bind(table)
                    .fetch_all(self.pool())
                    .await?
            }
            Dialect::Postgres => {
                sqlx::query(
                    "SELECT column_name AS name, data_type AS type FROM information_schema.columns \
                     WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
                )
                .bind(table)
                .fetch_all(self.pool())
                .await?
            }
        };
        rows.iter()
            .map(|row| {
                let name: String = row.try_get("name")?;
                let declared: String = row.try_get("type")?;
                let value = match declared.to_ascii_lowercase().as_str() {
                    "text" => Value::Text,
                    "bigint" | "integer" => Value::Integer,
                    "blob" | "bytea" => Value::Bytes,
                    other => return Err(Error::Corrupt(format!("{table}.{name} has an unexpected type {other}"))),
                };
                Ok((name, value))
            })
            .collect()
    }

    /// Copies this store's project state into `target`, which must hold none yet; per table, the
    /// rows copied. Nothing is written when anything fails.
    pub async fn copy_into(&self, target: &Store) -> Result<Vec<Copied>> {
        for (table, _) in TABLES {
            let sql = format!("SELECT COUNT(*) FROM {table}");
            let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_one(target.pool()).await?;
            if count > 0 {
                return Err(Error::Unsupported(format!(
                    "the target store {} is not empty ({count} rows in {table}); migrate into an empty database",
                    target.url
                )));
            }
        }
        let key = self.repository_key().await?;
        let mut tx = target.write_transaction().await?;
        Store::adopt_repository_key(&mut tx, &key).await?;
        let mut copied = Vec::new();
        for (table, identity) in TABLES {
            let columns = self.columns(table).await?;
            let names: Vec<&str> = columns.iter().map(|(name, _)| name.as_str()).collect();
            let select = format!("SELECT {} FROM {table}", names.join(", "));
            let rows = sqlx::query(sqlx::AssertSqlSafe(select)).fetch_all(self.pool()).await?;
            let insert = crate::values_insert(&format!("INSERT INTO {table} ({})", names.join(", ")), names.len(), 1);
            for row in &rows {
                let mut query = sqlx::query(sqlx::AssertSqlSafe(insert.clone()));
                for (name, value) in &columns {
                    query = match value {
                        Value::Text => query.bind(row.try_get::<Option<String>, _>(name.as_str())?),
                        Value::Integer => query.bind(row.try_get::<Option<i64>, _>(name.as_str())?),
                        Value::Bytes => query.bind(row.try_get::<Option<Vec<u8>>, _>(name.as_str())?),
                    };
                }
                query.execute(&mut *tx).await?;
            }
            // Rows kept their ids: the identity continues after the largest.
            if let (Some(column), Dialect::Postgres) = (identity, target.dialect) {
                let sql = format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), (SELECT COALESCE(MAX({column}), 0) + 1 FROM {table}), false)"
                );
                sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
            }
            copied.push(Copied { table, rows: rows.len() });
        }
        tx.commit().await?;
        Ok(copied)
    }
}
