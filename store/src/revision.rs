//! The desired revision of a shared store: the git commit its desired state was last written
//! from. A controller advances it (a compare-and-set) only from an ancestor of its own checkout,
//! and writes specs through a handle pinned to it; the pin is checked inside each spec write's
//! transaction, so a checkout that fell behind between the check and the write writes nothing.

use std::sync::Arc;

use sqlx::Row;

use crate::{Error, Result, Store, now};

/// The stored desired revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredRevision {
    pub revision: String,
    /// The controller that advanced it last.
    pub controller: String,
    pub at: String,
}

/// Inside a write transaction: refuses when `store` is pinned to a revision the store has moved
/// past.
pub(crate) async fn check_pin(store: &Store, tx: &mut sqlx::AnyConnection) -> Result<()> {
    let Some(pinned) = &store.revision_pin else { return Ok(()) };
    let held: Option<String> =
        sqlx::query_scalar("SELECT revision FROM desired_revision WHERE id = 1").fetch_optional(&mut *tx).await?;
    match held {
        Some(held) if held != **pinned => Err(Error::Behind { held, pinned: pinned.to_string() }),
        _ => Ok(()),
    }
}

impl Store {
    /// This store, with every spec write (recording specs, tombstones) refused once the desired
    /// revision is no longer `revision`.
    #[must_use]
    pub fn pinned_to_revision(&self, revision: &str) -> Self {
        Self { revision_pin: Some(Arc::from(revision)), ..self.clone() }
    }

    pub async fn desired_revision(&self) -> Result<Option<DesiredRevision>> {
        let row = sqlx::query("SELECT revision, controller, at FROM desired_revision WHERE id = 1")
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| {
            Ok(DesiredRevision {
                revision: row.try_get("revision")?,
                controller: row.try_get("controller")?,
                at: row.try_get("at")?,
            })
        })
        .transpose()
    }

    /// Moves the desired revision from `from` (`None`: there is none yet) to `to`; false when it
    /// had moved meanwhile.
    pub async fn advance_desired_revision(&self, from: Option<&str>, to: &str, controller: &str) -> Result<bool> {
        let done = match from {
            None => {
                sqlx::query(
                    "INSERT INTO desired_revision (id, revision, controller, at) VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING",
                )
                .bind(to)
                .bind(controller)
                .bind(now())
                .execute(self.pool())
                .await?
            }
            Some(from) => {
                sqlx::query("UPDATE desired_revision SET revision = $2, controller = $3, at = $4 WHERE id = 1 AND revision = $1")
                    .bind(from)
                    .bind(to)
                    .bind(controller)
                    .bind(now())
                    .execute(self.pool())
                    .await?
            }
        };
        Ok(done.rows_affected() == 1)
    }

    /// Records a controller's checkout revision and, when it did not write desired state, why.
    pub async fn note_controller_sync(&self, id: &str, revision: Option<&str>, note: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE controllers SET revision = $2, sync_note = $3 WHERE id = $1")
            .bind(id)
            .bind(revision)
            .bind(note)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}
