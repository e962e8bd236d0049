//! What the latest scan left behind for `status`: file errors, and reconcile requests queued
//! for a running daemon.

use roundtable_specs::{Kind, ObjectKey};
use sqlx::Row;

use crate::{Error, Result, Store, now};

/// One error that keeps a spec file from loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    pub file: String,
    pub line: i64,
    pub column: i64,
    pub path: String,
    pub message: String,
}

impl Store {
    /// Replaces the recorded file errors with those of the latest scan.
    pub async fn replace_file_errors(&self, errors: &[FileError]) -> Result<()> {
        let mut tx = self.write_transaction().await?;
        sqlx::query("DELETE FROM file_errors").execute(&mut *tx).await?;
        let seen = now();
        for error in errors {
            sqlx::query(
                "INSERT INTO file_errors (file, line, col, path, message, seen_at) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&error.file)
            .bind(error.line)
            .bind(error.column)
            .bind(&error.path)
            .bind(&error.message)
            .bind(&seen)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn file_errors(&self) -> Result<Vec<FileError>> {
        let rows = sqlx::query("SELECT * FROM file_errors ORDER BY file, line, col").fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                Ok(FileError {
                    file: row.try_get("file")?,
                    line: row.try_get("line")?,
                    column: row.try_get("col")?,
                    path: row.try_get("path")?,
                    message: row.try_get("message")?,
                })
            })
            .collect()
    }

    pub async fn request_reconcile(&self, key: &ObjectKey) -> Result<()> {
        sqlx::query("INSERT INTO reconcile_requests (kind, name, requested_at) VALUES ($1, $2, $3)")
            .bind(key.kind.as_str())
            .bind(&key.name)
            .bind(now())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Removes and returns every pending reconcile request, oldest first.
    pub async fn take_reconcile_requests(&self) -> Result<Vec<ObjectKey>> {
        let mut tx = self.write_transaction().await?;
        let rows = sqlx::query("SELECT id, kind, name FROM reconcile_requests ORDER BY id").fetch_all(&mut *tx).await?;
        let mut keys = Vec::with_capacity(rows.len());
        for row in &rows {
            let kind: String = row.try_get("kind")?;
            let kind = Kind::parse(&kind).ok_or_else(|| Error::Corrupt(format!("reconcile request kind {kind:?}")))?;
            keys.push(ObjectKey::new(kind, row.try_get::<String, _>("name")?));
        }
        if let Some(last) = rows.last() {
            let last_id: i64 = last.try_get("id")?;
            sqlx::query("DELETE FROM reconcile_requests WHERE id <= $1").bind(last_id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(keys)
    }
}
