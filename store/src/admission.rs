//! Admission's cache and attestations: probe results by image ID and contract hash, and canary
//! verdicts by adapter and image ID with their expiry.

use roundtable_specs::admission::CanaryAttestation;
use sqlx::Row;

use crate::{Result, Store, now};

impl Store {
    /// The cached probe runs (JSON) for `image_id` and `contract_hash`.
    pub async fn probe(&self, image_id: &str, contract_hash: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT runs FROM probes WHERE image_id = $1 AND contract_hash = $2")
            .bind(image_id)
            .bind(contract_hash)
            .fetch_optional(self.pool())
            .await?;
        Ok(match row {
            Some(row) => Some(row.try_get("runs")?),
            None => None,
        })
    }

    pub async fn save_probe(&self, image_id: &str, contract_hash: &str, runs: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO probes (image_id, contract_hash, runs, probed_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (image_id, contract_hash) DO UPDATE SET runs = excluded.runs, probed_at = excluded.probed_at",
        )
        .bind(image_id)
        .bind(contract_hash)
        .bind(runs)
        .bind(now())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The canary attestation of `adapter` in `image_id`, expired or not.
    pub async fn canary(&self, adapter: &str, image_id: &str) -> Result<Option<CanaryAttestation>> {
        let row = sqlx::query("SELECT * FROM canaries WHERE adapter = $1 AND image_id = $2")
            .bind(adapter)
            .bind(image_id)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(CanaryAttestation {
            adapter: row.try_get("adapter")?,
            image_id: row.try_get("image_id")?,
            verdict: row.try_get("verdict")?,
            detail: row.try_get("detail")?,
            at: row.try_get("at")?,
            expires_at: row.try_get("expires_at")?,
        }))
    }

    pub async fn record_canary(&self, canary: &CanaryAttestation) -> Result<()> {
        sqlx::query(
            "INSERT INTO canaries (adapter, image_id, verdict, detail, at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (adapter, image_id) DO UPDATE SET verdict = excluded.verdict, detail = excluded.detail,
                 at = excluded.at, expires_at = excluded.expires_at",
        )
        .bind(&canary.adapter)
        .bind(&canary.image_id)
        .bind(&canary.verdict)
        .bind(&canary.detail)
        .bind(&canary.at)
        .bind(&canary.expires_at)
        .execute(self.pool())
        .await?;
        Ok(())
    }
}
