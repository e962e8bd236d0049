//! The repository's own random id, recorded once in the store (migration 0010): what keys the
//! resources that outlive a session, instead of the project's path, which another repository can
//! reuse.

use sqlx::Row as _;

use crate::{Error, Result, Store};

/// The repository's id and when it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryKey {
    /// 32 lowercase hex digits; safe in resource names and labels.
    pub key: String,
    /// In the store's timestamp format. Provider sessions recorded before it ran in homes named
    /// by the project's path.
    pub keyed_at: String,
}

impl Store {
    /// This store's repository id.
    pub async fn repository_key(&self) -> Result<RepositoryKey> {
        let row = sqlx::query("SELECT key, keyed_at FROM repository WHERE id = 1")
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| Error::Corrupt("the repository table has no row (migration 0010 made one)".into()))?;
        let key: String = row.try_get("key")?;
        if key.len() != 32 || !key.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(Error::Corrupt(format!("the repository key {key:?} is not 32 lowercase hex digits")));
        }
        Ok(RepositoryKey { key, keyed_at: row.try_get("keyed_at")? })
    }

    /// Gives this store `key` (a migration's target takes its source's: the homes are the
    /// project's, wherever its state lives).
    pub(crate) async fn adopt_repository_key(
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        key: &RepositoryKey,
    ) -> Result<()> {
        sqlx::query("UPDATE repository SET key = $1, keyed_at = $2 WHERE id = 1")
            .bind(&key.key)
            .bind(&key.keyed_at)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn every_store_gets_its_own_random_key_once() {
        let base = tempfile::tempdir().expect("tempdir");
        let first = crate::Store::open(&base.path().join("a")).await.expect("open a");
        let key = first.repository_key().await.expect("key");
        assert_eq!(key.key.len(), 32, "{key:?}");
        assert!(key.keyed_at <= crate::now(), "{key:?}");
        first.close().await;
        let again = crate::Store::open(&base.path().join("a")).await.expect("reopen a");
        assert_eq!(again.repository_key().await.expect("key"), key, "made once, then kept");
        let other = crate::Store::open(&base.path().join("b")).await.expect("open b");
        assert_ne!(other.repository_key().await.expect("key").key, key.key, "not derived from anything shared");
    }
}
