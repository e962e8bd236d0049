//! Stored responses of mutating API requests by `Idempotency-Key`, kept 24 hours: a retry of the
//! same request replays the response without acting; the same key with another request is
//! refused; a retry while the first is still being served is refused rather than run twice.

use std::time::Duration;

use sqlx::Row;

use crate::{Result, Store, cutoff, now};

/// How long a stored response is kept.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);
/// A request still `pending` after this long died with its process; its key may be used again.
const ABANDONED_AFTER: Duration = Duration::from_secs(15 * 60);

/// A response as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

/// What the store says about a key at the start of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// Never seen (or expired): the request acts; [`Store::finish_idempotent`] stores its response.
    New,
    /// Served before with the same request: this is its response.
    Replay(StoredResponse),
    /// Used before with another request (its method, path or body differ).
    Reused,
    /// The same request is being served right now.
    InFlight,
}

impl Store {
    /// Claims `key` for a request whose method, path and body hash to `request_hash`.
    pub async fn claim_idempotency_key(&self, key: &str, request_hash: &str) -> Result<Claimed> {
        let mut tx = self.write_transaction().await?;
        sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
            .bind(cutoff(IDEMPOTENCY_TTL))
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM idempotency_keys WHERE key = $1 AND state = 'pending' AND created_at < $2")
            .bind(key)
            .bind(cutoff(ABANDONED_AFTER))
            .execute(&mut *tx)
            .await?;
        let row =
            sqlx::query("SELECT * FROM idempotency_keys WHERE key = $1").bind(key).fetch_optional(&mut *tx).await?;
        let claimed = match row {
            None => {
                sqlx::query(
                    "INSERT INTO idempotency_keys (key, request_hash, state, created_at) VALUES ($1, $2, 'pending', $3)",
                )
                .bind(key)
                .bind(request_hash)
                .bind(now())
                .execute(&mut *tx)
                .await?;
                Claimed::New
            }
            Some(row) if row.try_get::<String, _>("request_hash")? != request_hash => Claimed::Reused,
            Some(row) if row.try_get::<String, _>("state")? == "pending" => Claimed::InFlight,
            Some(row) => Claimed::Replay(StoredResponse {
                status: u16::try_from(row.try_get::<i64, _>("status")?).unwrap_or(500),
                content_type: row.try_get::<Option<String>, _>("content_type")?.unwrap_or_default(),
                body: row.try_get::<Option<Vec<u8>>, _>("body")?.unwrap_or_default(),
            }),
        };
        tx.commit().await?;
        Ok(claimed)
    }

    /// Stores the response of the request that claimed `key`.
    pub async fn finish_idempotent(&self, key: &str, response: &StoredResponse) -> Result<()> {
        sqlx::query(
            "UPDATE idempotency_keys SET state = 'done', status = $2, content_type = $3, body = $4 WHERE key = $1",
        )
        .bind(key)
        .bind(i64::from(response.status))
        .bind(&response.content_type)
        .bind(&response.body)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Forgets a claim whose request failed before acting (a retry acts then).
    pub async fn release_idempotency_key(&self, key: &str) -> Result<()> {
        sqlx::query("DELETE FROM idempotency_keys WHERE key = $1 AND state = 'pending'")
            .bind(key)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}
