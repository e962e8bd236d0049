//! Sessions (one per execution attempt) and pending proposals.

use roundtable_specs::session::{ProposalFlag, ProposalState, Rejected, SessionCause, SessionDetail, SessionPhase};
use sqlx::Row;

use crate::{Error, Result, Store, Touched, now};

/// A session as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: String,
    pub assignment: String,
    /// The uid of the Assignment object it ran for; `None` for a session recorded before objects
    /// had uids whose object was already gone (it is nobody's result).
    pub assignment_uid: Option<String>,
    /// The run-field digest it ran (a later execution generation with the same one, at the same
    /// base commit, reuses its result).
    pub execution_digest: Option<String>,
    pub execution_generation: i64,
    pub attempt: i64,
    pub controller_run: String,
    pub adapter: String,
    pub image: Option<String>,
    pub phase: SessionPhase,
    pub cause: Option<SessionCause>,
    pub exit_code: Option<i64>,
    pub message: String,
    pub base_commit: Option<String>,
    pub exec_dir: Option<String>,
    pub stdout_bytes: Option<i64>,
    pub stderr_bytes: Option<i64>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub external_session_id: Option<String>,
    pub detail: SessionDetail,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

/// A proposal as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProposalRecord {
    pub id: String,
    pub session_id: String,
    pub assignment: String,
    pub assignment_uid: Option<String>,
    pub execution_generation: i64,
    pub base_commit: String,
    pub adapter: String,
    pub patch_path: String,
    pub sha256: String,
    pub files_changed: i64,
    pub insertions: i64,
    pub deletions: i64,
    pub flags: Vec<ProposalFlag>,
    /// What the proposal could not carry, and why.
    pub rejected: Vec<Rejected>,
    pub state: ProposalState,
    pub created_at: String,
    /// The proposal of an earlier execution generation whose result this one reuses.
    pub reused_from: Option<String>,
    /// An operator's accept or reject (docs/delivery.md).
    pub decision: Option<roundtable_specs::delivery::Decision>,
    /// An accepted proposal's signed provenance: a DSSE envelope, JSON.
    pub provenance: Option<String>,
}

/// A stored word read back as its type.
fn word<T: std::str::FromStr<Err = roundtable_specs::words::UnknownWord>>(text: String) -> Result<T> {
    text.parse().map_err(|error: roundtable_specs::words::UnknownWord| Error::Corrupt(error.to_string()))
}

/// A stored JSON column read back as its type; `None` (rows from before it existed) is the default.
fn stored_json<T: serde::de::DeserializeOwned + Default>(column: &str, text: Option<String>) -> Result<T> {
    match text {
        None => Ok(T::default()),
        Some(text) => serde_json::from_str(&text).map_err(|error| Error::Corrupt(format!("{column}: {error}"))),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn session_from_row(row: &sqlx::any::AnyRow) -> Result<SessionRecord> {
    Ok(SessionRecord {
        id: row.try_get("id")?,
        assignment: row.try_get("assignment")?,
        assignment_uid: row.try_get("assignment_uid")?,
        execution_digest: row.try_get("execution_digest")?,
        execution_generation: row.try_get("execution_generation")?,
        attempt: row.try_get("attempt")?,
        controller_run: row.try_get("controller_run")?,
        adapter: row.try_get("adapter")?,
        image: row.try_get("image")?,
        phase: word(row.try_get("phase")?)?,
        cause: row.try_get::<Option<String>, _>("cause")?.map(word).transpose()?,
        exit_code: row.try_get("exit_code")?,
        message: row.try_get("message")?,
        base_commit: row.try_get("base_commit")?,
        exec_dir: row.try_get("exec_dir")?,
        stdout_bytes: row.try_get("stdout_bytes")?,
        stderr_bytes: row.try_get("stderr_bytes")?,
        stdout_truncated: row.try_get::<Option<i64>, _>("stdout_truncated")?.unwrap_or(0) != 0,
        stderr_truncated: row.try_get::<Option<i64>, _>("stderr_truncated")?.unwrap_or(0) != 0,
        external_session_id: row.try_get("external_session_id")?,
        detail: stored_json("detail_json", row.try_get("detail_json")?)?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

fn proposal_from_row(row: &sqlx::any::AnyRow) -> Result<ProposalRecord> {
    Ok(ProposalRecord {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        assignment: row.try_get("assignment")?,
        assignment_uid: row.try_get("assignment_uid")?,
        execution_generation: row.try_get("execution_generation")?,
        base_commit: row.try_get("base_commit")?,
        adapter: row.try_get("adapter")?,
        patch_path: row.try_get("patch_path")?,
        sha256: row.try_get("sha256")?,
        files_changed: row.try_get("files_changed")?,
        insertions: row.try_get("insertions")?,
        deletions: row.try_get("deletions")?,
        flags: stored_json("flags_json", row.try_get("flags_json")?)?,
        rejected: stored_json("rejected_json", row.try_get("rejected_json")?)?,
        state: word(row.try_get("state")?)?,
        created_at: row.try_get("created_at")?,
        reused_from: row.try_get("reused_from")?,
        decision: row
            .try_get::<Option<String>, _>("decision_json")?
            .map(|text| serde_json::from_str(&text).map_err(|error| Error::Corrupt(format!("decision_json: {error}"))))
            .transpose()?,
        provenance: row.try_get("provenance")?,
    })
}

impl Store {
    /// Inserts or replaces a session row.
    pub async fn save_session(&self, session: &SessionRecord) -> Result<()> {
        let assignment = save_session_with(self.pool(), session).await?;
        self.wrote([Touched::Sessions(assignment)]);
        Ok(())
    }
}

/// The sessions recorded under Assignment name `assignment` through `executor`, in the order of
/// [`Store::sessions`] without a name (newest first, then by id), so what is read of one name
/// agrees with what is read of all.
pub(crate) async fn sessions_named_with(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    assignment: &str,
) -> Result<Vec<SessionRecord>> {
    let rows = sqlx::query("SELECT * FROM sessions WHERE assignment = $1 ORDER BY created_at DESC, id DESC")
        .bind(assignment)
        .fetch_all(executor)
        .await?;
    rows.iter().map(session_from_row).collect()
}

/// Inserts or replaces a session row through `executor` (the pool, or a transaction that checks
/// something first); the Assignment name the stored row has (a replaced row keeps its own).
pub(crate) async fn save_session_with(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    session: &SessionRecord,
) -> Result<String> {
    let created_at = if session.created_at.is_empty() { now() } else { session.created_at.clone() };
    sqlx::query(
            "INSERT INTO sessions (id, assignment, execution_generation, attempt, controller_run, adapter, image, phase, cause, exit_code, message, base_commit, exec_dir, stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, external_session_id, detail_json, created_at, started_at, finished_at, assignment_uid, execution_digest) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24) \
             ON CONFLICT (id) DO UPDATE SET image = excluded.image, phase = excluded.phase, cause = excluded.cause, exit_code = excluded.exit_code, message = excluded.message, base_commit = excluded.base_commit, exec_dir = excluded.exec_dir, stdout_bytes = excluded.stdout_bytes, stderr_bytes = excluded.stderr_bytes, stdout_truncated = excluded.stdout_truncated, stderr_truncated = excluded.stderr_truncated, external_session_id = excluded.external_session_id, detail_json = excluded.detail_json, started_at = excluded.started_at, finished_at = excluded.finished_at \
             RETURNING assignment",
        )
        .bind(&session.id)
        .bind(&session.assignment)
        .bind(session.execution_generation)
        .bind(session.attempt)
        .bind(&session.controller_run)
        .bind(&session.adapter)
        .bind(&session.image)
        .bind(session.phase.as_str())
        .bind(session.cause.map(SessionCause::as_str))
        .bind(session.exit_code)
        .bind(&session.message)
        .bind(&session.base_commit)
        .bind(&session.exec_dir)
        .bind(session.stdout_bytes)
        .bind(session.stderr_bytes)
        .bind(i64::from(session.stdout_truncated))
        .bind(i64::from(session.stderr_truncated))
        .bind(&session.external_session_id)
        .bind(to_json(&session.detail))
        .bind(&created_at)
        .bind(&session.started_at)
        .bind(&session.finished_at)
        .bind(&session.assignment_uid)
        .bind(&session.execution_digest)
        .fetch_one(executor)
        .await?
        .try_get("assignment")
        .map_err(Error::from)
}

impl Store {
    pub async fn session(&self, id: &str) -> Result<Option<SessionRecord>> {
        let row = sqlx::query("SELECT * FROM sessions WHERE id = $1").bind(id).fetch_optional(self.pool()).await?;
        row.as_ref().map(session_from_row).transpose()
    }

    /// Sessions, newest first; all of them, or every one recorded under an Assignment's name
    /// (the history of every object that had it: [`Store::sessions_of`] is one object's).
    pub async fn sessions(&self, assignment: Option<&str>) -> Result<Vec<SessionRecord>> {
        let query = match assignment {
            Some(name) => {
                sqlx::query("SELECT * FROM sessions WHERE assignment = $1 ORDER BY created_at DESC, attempt DESC")
                    .bind(name)
            }
            None => sqlx::query("SELECT * FROM sessions ORDER BY created_at DESC, id DESC"),
        };
        crate::fetch_mapped(self.pool(), query, session_from_row).await
    }

    /// The sessions of the Assignment object with uid `assignment_uid`, newest first.
    pub async fn sessions_of(&self, assignment_uid: &str) -> Result<Vec<SessionRecord>> {
        sessions_of_with(self.pool(), assignment_uid).await
    }

    /// The newest session of Assignment `assignment_uid` that succeeded running the run fields
    /// with digest `execution_digest` on `base_commit`: a result a later execution generation
    /// with the same fields at the same commit takes instead of running again.
    pub async fn reusable_session(
        &self,
        assignment_uid: &str,
        execution_digest: &str,
        base_commit: &str,
    ) -> Result<Option<SessionRecord>> {
        let row = sqlx::query(
            "SELECT * FROM sessions WHERE assignment_uid = $1 AND execution_digest = $2 AND base_commit = $3 AND phase = $4 \
             ORDER BY finished_at DESC, id DESC LIMIT 1",
        )
        .bind(assignment_uid)
        .bind(execution_digest)
        .bind(base_commit)
        .bind(SessionPhase::Succeeded.as_str())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(session_from_row).transpose()
    }

    /// The proposal session `session_id` made, if it made one.
    pub async fn proposal_of_session(&self, session_id: &str) -> Result<Option<ProposalRecord>> {
        let row = sqlx::query("SELECT * FROM proposals WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(proposal_from_row).transpose()
    }

    /// Records a proposal; false when the execution generation already has one.
    pub async fn insert_proposal(&self, proposal: &ProposalRecord) -> Result<bool> {
        let inserted = insert_proposal_with(self.pool(), proposal).await?;
        self.wrote([]);
        Ok(inserted)
    }

    pub async fn proposals(&self) -> Result<Vec<ProposalRecord>> {
        let rows =
            sqlx::query("SELECT * FROM proposals ORDER BY created_at DESC, id DESC").fetch_all(self.pool()).await?;
        rows.iter().map(proposal_from_row).collect()
    }

    /// The proposal with exactly this ID.
    pub async fn proposal_by_id(&self, id: &str) -> Result<Option<ProposalRecord>> {
        proposal_by_id_with(self.pool(), id).await
    }

    /// Proposals whose ID starts with `prefix` (compared as text, no pattern characters), at
    /// most `limit`, in ID order.
    pub async fn proposals_by_prefix(&self, prefix: &str, limit: i64) -> Result<Vec<ProposalRecord>> {
        let rows = sqlx::query("SELECT * FROM proposals WHERE substr(id, 1, length($1)) = $1 ORDER BY id LIMIT $2")
            .bind(prefix)
            .bind(limit)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(proposal_from_row).collect()
    }

    /// Sessions whose ID starts with `prefix`, at most `limit`, in ID order.
    pub async fn sessions_by_prefix(&self, prefix: &str, limit: i64) -> Result<Vec<SessionRecord>> {
        let rows = sqlx::query("SELECT * FROM sessions WHERE substr(id, 1, length($1)) = $1 ORDER BY id LIMIT $2")
            .bind(prefix)
            .bind(limit)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(session_from_row).collect()
    }

    /// The proposal of execution generation `execution_generation` of Assignment
    /// `assignment_uid`: its own, or, for a generation that reused a result an operator had
    /// already accepted or rejected (and so made none of its own), that decided proposal.
    pub async fn proposal_for(
        &self,
        assignment_uid: &str,
        execution_generation: i64,
    ) -> Result<Option<ProposalRecord>> {
        let mut connection = self.pool().acquire().await?;
        proposal_for_with(&mut connection, assignment_uid, execution_generation, true).await
    }
}

/// The sessions of the Assignment object with uid `assignment_uid`, newest first, through
/// `executor` (the pool, or a connection reading several things).
pub(crate) async fn sessions_of_with(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    assignment_uid: &str,
) -> Result<Vec<SessionRecord>> {
    let rows = sqlx::query("SELECT * FROM sessions WHERE assignment_uid = $1 ORDER BY created_at DESC, attempt DESC")
        .bind(assignment_uid)
        .fetch_all(executor)
        .await?;
    rows.iter().map(session_from_row).collect()
}

async fn proposal_by_id_with(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    id: &str,
) -> Result<Option<ProposalRecord>> {
    let row = sqlx::query("SELECT * FROM proposals WHERE id = $1").bind(id).fetch_optional(executor).await?;
    row.as_ref().map(proposal_from_row).transpose()
}

/// [`Store::proposal_for`] on `connection`. `may_reuse`: whether a session of the generation
/// succeeded, so that it may have reused an earlier result (false skips that look, which would
/// find nothing).
pub(crate) async fn proposal_for_with(
    connection: &mut sqlx::AnyConnection,
    assignment_uid: &str,
    execution_generation: i64,
    may_reuse: bool,
) -> Result<Option<ProposalRecord>> {
    let row = sqlx::query("SELECT * FROM proposals WHERE assignment_uid = $1 AND execution_generation = $2")
        .bind(assignment_uid)
        .bind(execution_generation)
        .fetch_optional(&mut *connection)
        .await?;
    if let Some(row) = row {
        return proposal_from_row(&row).map(Some);
    }
    if !may_reuse {
        return Ok(None);
    }
    let reused: Option<Option<String>> = sqlx::query_scalar(
        "SELECT detail_json FROM sessions WHERE assignment_uid = $1 AND execution_generation = $2 AND phase = $3 \
         ORDER BY finished_at DESC, id DESC LIMIT 1",
    )
    .bind(assignment_uid)
    .bind(execution_generation)
    .bind(SessionPhase::Succeeded.as_str())
    .fetch_optional(&mut *connection)
    .await?;
    let detail: SessionDetail = stored_json("detail_json", reused.flatten())?;
    let Some(id) = detail.reused.and_then(|run| run.proposal) else { return Ok(None) };
    let decided = proposal_by_id_with(&mut *connection, &id).await?;
    Ok(decided.filter(|p| matches!(p.state, ProposalState::Accepted | ProposalState::Rejected)))
}

/// Timestamps are fixed-width RFC 3339 text, so "older than" is a text comparison.
pub fn cutoff(age: std::time::Duration) -> String {
    let then = time::OffsetDateTime::now_utc() - age;
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z");
    then.format(FORMAT).unwrap_or_default()
}

impl Store {
    /// Finished sessions whose `finished_at` is before `before`.
    pub async fn finished_sessions_before(&self, before: &str) -> Result<Vec<SessionRecord>> {
        let rows = sqlx::query(
            "SELECT * FROM sessions WHERE phase NOT IN ($2, $3) AND finished_at IS NOT NULL AND finished_at < $1 ORDER BY finished_at",
        )
        .bind(before)
        .bind(SessionPhase::Queued.as_str())
        .bind(SessionPhase::Running.as_str())
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(session_from_row).collect()
    }

    /// Proposals created before `before`.
    pub async fn proposals_before(&self, before: &str) -> Result<Vec<ProposalRecord>> {
        let rows = sqlx::query("SELECT * FROM proposals WHERE created_at < $1 ORDER BY created_at")
            .bind(before)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(proposal_from_row).collect()
    }

    pub async fn delete_session(&self, id: &str) -> Result<()> {
        let assignment: Option<String> = sqlx::query_scalar("DELETE FROM sessions WHERE id = $1 RETURNING assignment")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        self.wrote(assignment.map(Touched::Sessions));
        Ok(())
    }

    pub async fn delete_proposal(&self, id: &str) -> Result<()> {
        sqlx::query("DELETE FROM proposal_patches WHERE proposal_id = $1").bind(id).execute(self.pool()).await?;
        sqlx::query("DELETE FROM proposals WHERE id = $1").bind(id).execute(self.pool()).await?;
        self.wrote([]);
        Ok(())
    }

    /// The patch of proposal `id` kept in the store (a shared store keeps every patch), if any.
    pub async fn proposal_patch(&self, id: &str) -> Result<Option<Vec<u8>>> {
        Ok(sqlx::query_scalar("SELECT patch FROM proposal_patches WHERE proposal_id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?)
    }
}

/// Inserts a proposal through `executor`; false when its execution generation already has one.
/// A run that finishes after its Assignment moved on to another execution generation (the
/// supersede was written before this row existed) records its proposal superseded.
pub(crate) async fn insert_proposal_with(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    proposal: &ProposalRecord,
) -> Result<bool> {
    let done = sqlx::query(
            "INSERT INTO proposals (id, session_id, assignment, execution_generation, base_commit, adapter, patch_path, sha256, files_changed, insertions, deletions, flags_json, state, created_at, rejected_json, assignment_uid, reused_from, decision_json, provenance) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
                     CASE WHEN $13 = 'pending' AND EXISTS (SELECT 1 FROM objects WHERE uid = $16 AND execution_generation <> $4) THEN $18 ELSE $13 END, \
                     $14, $15, $16, $17, $19, $20) ON CONFLICT (assignment_uid, execution_generation) DO NOTHING",
        )
        .bind(&proposal.id)
        .bind(&proposal.session_id)
        .bind(&proposal.assignment)
        .bind(proposal.execution_generation)
        .bind(&proposal.base_commit)
        .bind(&proposal.adapter)
        .bind(&proposal.patch_path)
        .bind(&proposal.sha256)
        .bind(proposal.files_changed)
        .bind(proposal.insertions)
        .bind(proposal.deletions)
        .bind(to_json(&proposal.flags))
        .bind(proposal.state.as_str())
        .bind(if proposal.created_at.is_empty() { now() } else { proposal.created_at.clone() })
        .bind(to_json(&proposal.rejected))
        .bind(&proposal.assignment_uid)
        .bind(&proposal.reused_from)
        .bind(ProposalState::Superseded.as_str())
        .bind(proposal.decision.as_ref().map(to_json))
        .bind(&proposal.provenance)
        .execute(executor)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Marks the pending proposals of Assignment `assignment_uid` made for any execution generation
/// but `current` superseded, inside the write that moved the generation on: the transition is
/// stored, and nothing later (a deletion, a rollback) turns them pending again.
pub(crate) async fn supersede_proposals(
    tx: &mut sqlx::AnyConnection,
    assignment_uid: &str,
    current: i64,
) -> Result<()> {
    sqlx::query(
        "UPDATE proposals SET state = $3 WHERE assignment_uid = $1 AND execution_generation <> $2 AND state = $4",
    )
    .bind(assignment_uid)
    .bind(current)
    .bind(ProposalState::Superseded.as_str())
    .bind(ProposalState::Pending.as_str())
    .execute(&mut *tx)
    .await?;
    Ok(())
}
