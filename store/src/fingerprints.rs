//! The held credentials' fingerprints (migration 0014): what the daemon records of each
//! `credentialEnv` value it holds, and what an accept compares a proposal's added lines with.
//! A name held again with another value replaces its fingerprint.

use roundtable_specs::secrets::fingerprint::CredentialFingerprint;
use sqlx::Row as _;

use crate::{Result, Store};

impl Store {
    /// Records `prints`, replacing what was recorded under the same names.
    pub async fn record_fingerprints(&self, prints: &[CredentialFingerprint]) -> Result<()> {
        let at = crate::now();
        for print in prints {
            sqlx::query(
                "INSERT INTO credential_fingerprints (name, length, digest, recorded_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (name) DO UPDATE SET length = excluded.length, digest = excluded.digest, recorded_at = excluded.recorded_at",
            )
            .bind(&print.name)
            .bind(i64::try_from(print.length).unwrap_or(i64::MAX))
            .bind(&print.digest)
            .bind(&at)
            .execute(self.pool())
            .await?;
        }
        Ok(())
    }

    /// Every recorded fingerprint, by name.
    pub async fn credential_fingerprints(&self) -> Result<Vec<CredentialFingerprint>> {
        let rows = sqlx::query("SELECT name, length, digest FROM credential_fingerprints ORDER BY name")
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let length: i64 = row.try_get("length")?;
                Ok(CredentialFingerprint {
                    name: row.try_get("name")?,
                    length: usize::try_from(length).unwrap_or(0),
                    digest: row.try_get("digest")?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use roundtable_specs::secrets::fingerprint::CredentialFingerprint;

    fn print(name: &str, digest: &str) -> CredentialFingerprint {
        CredentialFingerprint { name: name.into(), length: 40, digest: digest.into() }
    }

    #[tokio::test]
    async fn a_name_recorded_again_keeps_only_its_latest_fingerprint() {
        let base = tempfile::tempdir().expect("tempdir");
        let store = crate::Store::open(base.path()).await.expect("open");
        store.record_fingerprints(&[print("B_KEY", "bb"), print("A_KEY", "aa")]).await.expect("record");
        store.record_fingerprints(&[print("A_KEY", "a2")]).await.expect("record again");
        assert_eq!(
            store.credential_fingerprints().await.expect("read"),
            vec![print("A_KEY", "a2"), print("B_KEY", "bb")]
        );
    }
}
