//! The agents' board: notes on an assignment, path claims with expiry, session heartbeats. Written
//! by the MCP endpoint, read by `resume` and by the proposal flags.

use sqlx::Row;

use crate::{Result, Store, now};

/// A note an agent left on its assignment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    pub id: i64,
    pub assignment: String,
    pub session_id: String,
    pub text: String,
    pub created_at: String,
}

/// A claim on a path (a file, or a folder ending in `/`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    pub path: String,
    pub session_id: String,
    pub assignment: String,
    pub acquired_at: String,
    pub expires_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released_at: Option<String>,
}

/// Whether two claimed paths cover some file in common: equal, or one is a folder holding the other.
pub fn paths_overlap(a: &str, b: &str) -> bool {
    let inside = |path: &str, folder: &str| folder.ends_with('/') && path.starts_with(folder);
    a == b || inside(a, b) || inside(b, a)
}

fn claim_from_row(row: &sqlx::any::AnyRow) -> Result<Claim> {
    Ok(Claim {
        path: row.try_get("path")?,
        session_id: row.try_get("session_id")?,
        assignment: row.try_get("assignment")?,
        acquired_at: row.try_get("acquired_at")?,
        expires_at: row.try_get("expires_at")?,
        released_at: row.try_get("released_at")?,
    })
}

/// The outcome of a claim request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claimed {
    pub granted: Vec<String>,
    /// Paths refused, each with a live claim of another session that overlaps it.
    pub refused: Vec<(String, Claim)>,
}

impl Store {
    pub async fn append_note(&self, assignment: &str, session: &str, text: &str) -> Result<i64> {
        let row = sqlx::query(
            "INSERT INTO notes (assignment, session_id, text, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(assignment)
        .bind(session)
        .bind(text)
        .bind(now())
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("id")?)
    }

    pub async fn notes(&self, assignment: &str) -> Result<Vec<Note>> {
        let rows = sqlx::query("SELECT * FROM notes WHERE assignment = $1 ORDER BY id")
            .bind(assignment)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Note {
                    id: row.try_get("id")?,
                    assignment: row.try_get("assignment")?,
                    session_id: row.try_get("session_id")?,
                    text: row.try_get("text")?,
                    created_at: row.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// Claims that are neither released nor expired at `at`.
    pub async fn live_claims(&self, at: &str) -> Result<Vec<Claim>> {
        let rows = sqlx::query("SELECT * FROM claims WHERE released_at IS NULL AND expires_at > $1 ORDER BY path")
            .bind(at)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(claim_from_row).collect()
    }

    /// Every claim of `assignment`'s sessions, live or not, oldest first.
    pub async fn claims_of(&self, assignment: &str) -> Result<Vec<Claim>> {
        let rows = sqlx::query("SELECT * FROM claims WHERE assignment = $1 ORDER BY acquired_at, path")
            .bind(assignment)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(claim_from_row).collect()
    }

    /// Claims `paths` for `session` until `expires_at`, except those overlapping another session's
    /// live claim; decided and written in one transaction, so two sessions never both win a path.
    pub async fn acquire_claims(
        &self,
        assignment: &str,
        session: &str,
        paths: &[String],
        expires_at: &str,
    ) -> Result<Claimed> {
        let at = now();
        // Immediate: a read that later writes in a deferred transaction fails outright (not after
        // the busy timeout) when another session wrote in between.
        let mut tx = self.write_transaction().await?;
        let rows =
            sqlx::query("SELECT * FROM claims WHERE released_at IS NULL AND expires_at > $1 AND session_id <> $2")
                .bind(&at)
                .bind(session)
                .fetch_all(&mut *tx)
                .await?;
        let others: Vec<Claim> = rows.iter().map(claim_from_row).collect::<Result<_>>()?;
        let mut claimed = Claimed::default();
        for path in paths {
            if let Some(held) = others.iter().find(|c| paths_overlap(&c.path, path)) {
                claimed.refused.push((path.clone(), held.clone()));
                continue;
            }
            sqlx::query(
                "INSERT INTO claims (path, session_id, assignment, acquired_at, expires_at, released_at) VALUES ($1, $2, $3, $4, $5, NULL) \
                 ON CONFLICT (path, session_id) DO UPDATE SET expires_at = excluded.expires_at, released_at = NULL",
            )
            .bind(path)
            .bind(session)
            .bind(assignment)
            .bind(&at)
            .bind(expires_at)
            .execute(&mut *tx)
            .await?;
            claimed.granted.push(path.clone());
        }
        tx.commit().await?;
        Ok(claimed)
    }

    /// Releases `session`'s claims on `paths`, or all of them when `paths` is empty; how many.
    pub async fn release_claims(&self, session: &str, paths: &[String]) -> Result<u64> {
        let at = now();
        let mut released = 0;
        if paths.is_empty() {
            let done = sqlx::query("UPDATE claims SET released_at = $1 WHERE session_id = $2 AND released_at IS NULL")
                .bind(&at)
                .bind(session)
                .execute(&self.pool)
                .await?;
            return Ok(done.rows_affected());
        }
        for path in paths {
            let done = sqlx::query(
                "UPDATE claims SET released_at = $1 WHERE session_id = $2 AND path = $3 AND released_at IS NULL",
            )
            .bind(&at)
            .bind(session)
            .bind(path)
            .execute(&self.pool)
            .await?;
            released += done.rows_affected();
        }
        Ok(released)
    }

    pub async fn heartbeat(&self, session: &str, status: &str) -> Result<String> {
        let at = now();
        sqlx::query(
            "INSERT INTO heartbeats (session_id, at, status) VALUES ($1, $2, $3) \
             ON CONFLICT (session_id) DO UPDATE SET at = excluded.at, status = excluded.status",
        )
        .bind(session)
        .bind(&at)
        .bind(status)
        .execute(&self.pool)
        .await?;
        Ok(at)
    }

    /// The newest heartbeat of any session of `adapter`.
    pub async fn last_heartbeat_of_adapter(&self, adapter: &str) -> Result<Option<String>> {
        let row = sqlx::query(
            "SELECT MAX(h.at) AS at FROM heartbeats h JOIN sessions s ON s.id = h.session_id WHERE s.adapter = $1",
        )
        .bind(adapter)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("at")?)
    }

    /// The last heartbeat of `session`: when, and what it said.
    pub async fn last_heartbeat(&self, session: &str) -> Result<Option<(String, String)>> {
        let row = sqlx::query("SELECT at, status FROM heartbeats WHERE session_id = $1")
            .bind(session)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| Ok((row.try_get("at")?, row.try_get("status")?))).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_cover_what_is_inside_them() {
        assert!(paths_overlap("docs/", "docs/a.md"));
        assert!(paths_overlap("docs/a.md", "docs/"));
        assert!(paths_overlap("a.md", "a.md"));
        assert!(!paths_overlap("docs", "docs/a.md"), "a file named docs holds nothing");
        assert!(!paths_overlap("docs/", "docsx/a.md"));
    }
}
