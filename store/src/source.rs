//! Where the desired state comes from, for `status` (migration 0012): a local checkout's HEAD or
//! a remote's branch, the commit reconciled, when it was fetched, and the last fetch's failure.

use sqlx::Row as _;

use crate::{Result, Store, now};

/// The source a controller last reconciled from (one row per store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSync {
    /// `committed` (a local checkout's HEAD) or `git` (a remote through a bare mirror).
    pub mode: String,
    /// The URL with any credentials redacted (a local checkout: its path).
    pub url: String,
    pub branch: String,
    /// The spec directory's path inside the repository.
    pub spec_path: String,
    /// The commit whose tree is reconciled: the last good one.
    pub commit: Option<String>,
    /// When `commit` was fetched (or read, for a local checkout).
    pub fetched_at: Option<String>,
    /// The last fetch's failure, cleared by the next good one.
    pub error: Option<String>,
    pub error_at: Option<String>,
    /// The controller that wrote the row last.
    pub controller: String,
}

impl Store {
    /// Records `sync` as the store's source.
    pub async fn note_source(&self, sync: &SourceSync) -> Result<()> {
        sqlx::query(
            "INSERT INTO source_sync (id, mode, url, branch, spec_path, commit_id, fetched_at, error, error_at, controller, updated_at) \
             VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (id) DO UPDATE SET mode = $1, url = $2, branch = $3, spec_path = $4, commit_id = $5, \
             fetched_at = $6, error = $7, error_at = $8, controller = $9, updated_at = $10",
        )
        .bind(&sync.mode)
        .bind(&sync.url)
        .bind(&sync.branch)
        .bind(&sync.spec_path)
        .bind(&sync.commit)
        .bind(&sync.fetched_at)
        .bind(&sync.error)
        .bind(&sync.error_at)
        .bind(&sync.controller)
        .bind(now())
        .execute(self.pool())
        .await?;
        self.wrote([crate::Touched::Source]);
        Ok(())
    }

    /// Forgets the source: the desired state comes from a working tree again.
    pub async fn forget_source(&self) -> Result<()> {
        sqlx::query("DELETE FROM source_sync WHERE id = 1").execute(self.pool()).await?;
        self.wrote([crate::Touched::Source]);
        Ok(())
    }

    /// The store's source, if a controller reconciling committed state recorded one.
    pub async fn source(&self) -> Result<Option<SourceSync>> {
        source_with(self.pool()).await
    }
}

/// [`Store::source`] through `executor` (the pool, or a connection reading several things).
pub(crate) async fn source_with(executor: impl sqlx::Executor<'_, Database = sqlx::Any>) -> Result<Option<SourceSync>> {
    let row = sqlx::query(
        "SELECT mode, url, branch, spec_path, commit_id, fetched_at, error, error_at, controller FROM source_sync WHERE id = 1",
    )
    .fetch_optional(executor)
    .await?;
    row.map(|row| {
        Ok(SourceSync {
            mode: row.try_get("mode")?,
            url: row.try_get("url")?,
            branch: row.try_get("branch")?,
            spec_path: row.try_get("spec_path")?,
            commit: row.try_get("commit_id")?,
            fetched_at: row.try_get("fetched_at")?,
            error: row.try_get("error")?,
            error_at: row.try_get("error_at")?,
            controller: row.try_get("controller")?,
        })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_source_row_is_replaced_and_forgotten() {
        let base = tempfile::tempdir().expect("tempdir");
        let store = Store::open(base.path()).await.expect("open");
        assert_eq!(store.source().await.expect("read"), None);
        let mut sync = SourceSync {
            mode: "git".into(),
            url: "https://example.invalid/r.git".into(),
            branch: "main".into(),
            spec_path: ".roundtable".into(),
            commit: Some("abc".into()),
            fetched_at: Some(now()),
            error: None,
            error_at: None,
            controller: "c1".into(),
        };
        store.note_source(&sync).await.expect("note");
        sync.error = Some("unreachable".into());
        store.note_source(&sync).await.expect("note again");
        assert_eq!(store.source().await.expect("read"), Some(sync));
        store.forget_source().await.expect("forget");
        assert_eq!(store.source().await.expect("read"), None);
    }
}
