//! The agents' board: notes on an assignment, path claims with expiry, session heartbeats. Written
//! by the MCP endpoint, read by `resume` and by the proposal flags.

use roundtable_specs::session::SessionPhase;
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

/// How much one session may leave on the board as notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoteQuota {
    pub notes: usize,
    /// The sum of the notes' lengths in bytes.
    pub bytes: usize,
}

/// Why a note was not stored: its session has used its quota.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteRefused {
    #[error("this session has already left {limit} notes, the most one session may leave")]
    Count { limit: usize },
    #[error(
        "this note ({note} bytes) would bring this session's notes to {total} bytes, over the {limit} bytes one session may leave"
    )]
    Bytes { note: usize, total: usize, limit: usize },
}

/// The phases in which a session's claims hold: those of a session that has not ended. A session
/// that ended holds nothing, even when the release at its end was missed.
const HOLDING_PHASES: [SessionPhase; 2] = [SessionPhase::Queued, SessionPhase::Running];

/// Claims that hold at `at`: neither released nor expired, and their session is recorded and has
/// not ended. Read through `executor`, so a transaction can decide on what it read.
async fn live_claims_on<'e>(executor: impl sqlx::Executor<'e, Database = sqlx::Any>, at: &str) -> Result<Vec<Claim>> {
    let [first, second] = HOLDING_PHASES;
    let rows = sqlx::query(
        "SELECT c.* FROM claims c JOIN sessions s ON s.id = c.session_id \
         WHERE c.released_at IS NULL AND c.expires_at > $1 AND s.phase IN ($2, $3) ORDER BY c.path",
    )
    .bind(at)
    .bind(first.as_str())
    .bind(second.as_str())
    .fetch_all(executor)
    .await?;
    rows.iter().map(claim_from_row).collect()
}

impl Store {
    /// Stores a note of `session` on `assignment` unless it would take the session past `quota`;
    /// counted and written in one transaction, so parallel calls cannot overshoot it.
    pub async fn append_note(
        &self,
        assignment: &str,
        session: &str,
        text: &str,
        quota: NoteQuota,
    ) -> Result<Result<i64, NoteRefused>> {
        let mut tx = self.write_transaction().await?;
        let earlier: Vec<String> = sqlx::query_scalar("SELECT text FROM notes WHERE session_id = $1")
            .bind(session)
            .fetch_all(&mut *tx)
            .await?;
        if earlier.len() >= quota.notes {
            return Ok(Err(NoteRefused::Count { limit: quota.notes }));
        }
        let total = earlier.iter().map(String::len).sum::<usize>() + text.len();
        if total > quota.bytes {
            return Ok(Err(NoteRefused::Bytes { note: text.len(), total, limit: quota.bytes }));
        }
        let row = sqlx::query(
            "INSERT INTO notes (assignment, session_id, text, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(assignment)
        .bind(session)
        .bind(text)
        .bind(now())
        .fetch_one(&mut *tx)
        .await?;
        let id = row.try_get("id")?;
        tx.commit().await?;
        Ok(Ok(id))
    }

    pub async fn notes(&self, assignment: &str) -> Result<Vec<Note>> {
        let rows = sqlx::query("SELECT * FROM notes WHERE assignment = $1 ORDER BY id")
            .bind(assignment)
            .fetch_all(self.pool())
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

    /// Claims that hold at `at`: neither released nor expired, of a session that has not ended.
    pub async fn live_claims(&self, at: &str) -> Result<Vec<Claim>> {
        live_claims_on(self.pool(), at).await
    }

    /// Every claim of `assignment`'s sessions, live or not, oldest first.
    pub async fn claims_of(&self, assignment: &str) -> Result<Vec<Claim>> {
        let rows = sqlx::query("SELECT * FROM claims WHERE assignment = $1 ORDER BY acquired_at, path")
            .bind(assignment)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(claim_from_row).collect()
    }

    /// Claims `paths` for `session` until `expires_at`, except those overlapping another session's
    /// live claim (see [`Store::live_claims`]); decided and written in one transaction, so two sessions never both win a path.
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
        let others: Vec<Claim> =
            live_claims_on(&mut *tx, &at).await?.into_iter().filter(|claim| claim.session_id != session).collect();
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
                .execute(self.pool())
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
            .execute(self.pool())
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
        .execute(self.pool())
        .await?;
        Ok(at)
    }

    /// The newest heartbeat of any session of `adapter`.
    pub async fn last_heartbeat_of_adapter(&self, adapter: &str) -> Result<Option<String>> {
        let row = sqlx::query(
            "SELECT MAX(h.at) AS at FROM heartbeats h JOIN sessions s ON s.id = h.session_id WHERE s.adapter = $1",
        )
        .bind(adapter)
        .fetch_one(self.pool())
        .await?;
        Ok(row.try_get("at")?)
    }

    /// The last heartbeat of `session`: when, and what it said.
    pub async fn last_heartbeat(&self, session: &str) -> Result<Option<(String, String)>> {
        let row = sqlx::query("SELECT at, status FROM heartbeats WHERE session_id = $1")
            .bind(session)
            .fetch_optional(self.pool())
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

    #[test]
    fn claims_hold_exactly_while_their_session_has_not_ended() {
        let holding: Vec<SessionPhase> = SessionPhase::ALL.iter().copied().filter(|p| !p.is_finished()).collect();
        assert_eq!(holding, HOLDING_PHASES);
    }
}
