//! What the latest scan left behind for `status`: file errors, and reconcile requests queued
//! for a running daemon.

use sqlx::Row;

use crate::{Result, Store, now};

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
        // `status` shows a file that stops (or starts again) loading.
        self.wrote([]);
        Ok(())
    }

    pub async fn file_errors(&self) -> Result<Vec<FileError>> {
        let rows = sqlx::query("SELECT * FROM file_errors ORDER BY file, line, col").fetch_all(self.pool()).await?;
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
}
