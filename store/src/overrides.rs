//! Operators' runtime overrides of an adapter's `enabled` (the API's enable and disable), and
//! the one transaction that starts a session only while its adapter may run: a disable and a
//! session start never interleave, so a disable either sees the session (and drains) or the
//! start sees the disable (and refuses).

use sqlx::Row;

use crate::executions::{SessionRecord, save_session_with};
use crate::{Error, Result, Store, now};

pub use roundtable_specs::output::AgentState as OverrideState;

fn parse_state(text: &str) -> Result<OverrideState> {
    OverrideState::parse(text).ok_or_else(|| Error::Corrupt(format!("agent override state {text:?}")))
}

/// An adapter's override as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentOverride {
    pub adapter: String,
    pub state: OverrideState,
    pub changed_at: String,
    pub message: String,
}

/// What an enable or disable did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideChange {
    pub before: Option<OverrideState>,
    pub after: AgentOverride,
    /// The adapter's sessions that were queued or running when the change was made.
    pub active_sessions: Vec<String>,
}

/// Why a session was not started.
#[derive(Debug, thiserror::Error)]
pub enum StartRefused {
    #[error("adapter {adapter} is {} by an operator (through the API); no new session starts", state.as_str())]
    Overridden { adapter: String, state: OverrideState },
    #[error(transparent)]
    Fenced(#[from] crate::leases::Fenced),
    #[error(transparent)]
    Store(#[from] Error),
}

fn override_from_row(row: &sqlx::any::AnyRow) -> Result<AgentOverride> {
    Ok(AgentOverride {
        adapter: row.try_get("adapter")?,
        state: parse_state(&row.try_get::<String, _>("state")?)?,
        changed_at: row.try_get("changed_at")?,
        message: row.try_get("message")?,
    })
}

/// `adapter`'s override through `executor` (the pool, or a connection reading several things).
pub(crate) async fn agent_override_with(
    executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
    adapter: &str,
) -> Result<Option<AgentOverride>> {
    let row =
        sqlx::query("SELECT * FROM agent_overrides WHERE adapter = $1").bind(adapter).fetch_optional(executor).await?;
    row.as_ref().map(override_from_row).transpose()
}

const ACTIVE_SESSIONS: &str =
    "SELECT id FROM sessions WHERE adapter = $1 AND phase IN ('Queued', 'Running') ORDER BY created_at";

impl Store {
    pub async fn agent_override(&self, adapter: &str) -> Result<Option<AgentOverride>> {
        agent_override_with(self.pool(), adapter).await
    }

    /// Every override, by adapter name.
    pub async fn agent_overrides(&self) -> Result<Vec<AgentOverride>> {
        let rows = sqlx::query("SELECT * FROM agent_overrides ORDER BY adapter").fetch_all(self.pool()).await?;
        rows.iter().map(override_from_row).collect()
    }

    /// The IDs of `adapter`'s queued and running sessions, oldest first.
    pub async fn active_sessions_of(&self, adapter: &str) -> Result<Vec<String>> {
        let rows = sqlx::query(ACTIVE_SESSIONS).bind(adapter).fetch_all(self.pool()).await?;
        rows.iter().map(|row| Ok(row.try_get("id")?)).collect()
    }

    /// Enables `adapter`, or disables it: `disabled` at once when it has no queued or running
    /// session, else `draining` until the last one ends ([`Store::complete_drain`]). The session
    /// count and the change are one transaction.
    pub async fn set_agent_enabled(&self, adapter: &str, enabled: bool, message: &str) -> Result<OverrideChange> {
        let mut tx = self.write_transaction().await?;
        let before = sqlx::query("SELECT state FROM agent_overrides WHERE adapter = $1")
            .bind(adapter)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get::<String, _>("state"))
            .transpose()?
            .map(|state| parse_state(&state))
            .transpose()?;
        let active: Vec<String> = sqlx::query(ACTIVE_SESSIONS)
            .bind(adapter)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|row| row.try_get("id"))
            .collect::<Result<_, _>>()?;
        let state = match (enabled, active.is_empty()) {
            (true, _) => OverrideState::Enabled,
            (false, true) => OverrideState::Disabled,
            (false, false) => OverrideState::Draining,
        };
        let after =
            AgentOverride { adapter: adapter.to_owned(), state, changed_at: now(), message: message.to_owned() };
        sqlx::query(
            "INSERT INTO agent_overrides (adapter, state, changed_at, message) VALUES ($1, $2, $3, $4)
             ON CONFLICT (adapter) DO UPDATE SET state = excluded.state, changed_at = excluded.changed_at, message = excluded.message",
        )
        .bind(&after.adapter)
        .bind(state.as_str())
        .bind(&after.changed_at)
        .bind(&after.message)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.wrote([crate::Touched::Override(adapter.to_owned())]);
        Ok(OverrideChange { before, after, active_sessions: active })
    }

    /// Turns `adapter`'s `draining` into `disabled` once none of its sessions is queued or
    /// running; the override as it is then (`None` when there is none).
    pub async fn complete_drain(&self, adapter: &str) -> Result<Option<AgentOverride>> {
        let mut tx = self.write_transaction().await?;
        let active = sqlx::query(ACTIVE_SESSIONS).bind(adapter).fetch_all(&mut *tx).await?;
        if active.is_empty() {
            sqlx::query(
                "UPDATE agent_overrides SET state = 'disabled', changed_at = $2 WHERE adapter = $1 AND state = 'draining'",
            )
            .bind(adapter)
            .bind(now())
            .execute(&mut *tx)
            .await?;
        }
        let row = sqlx::query("SELECT * FROM agent_overrides WHERE adapter = $1")
            .bind(adapter)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        self.wrote([crate::Touched::Override(adapter.to_owned())]);
        row.as_ref().map(override_from_row).transpose()
    }

    /// Records a new session unless an operator has disabled (or is draining) its adapter, in
    /// one transaction with that check.
    /// With `lease`, also only while that lease is held with its fence.
    pub async fn start_session(
        &self,
        session: &SessionRecord,
        lease: Option<&crate::leases::Lease>,
    ) -> Result<(), StartRefused> {
        let mut tx = self.write_transaction().await?;
        if let Some(lease) = lease {
            crate::leases::check_fence(&mut tx, lease).await??;
        }
        let state = sqlx::query("SELECT state FROM agent_overrides WHERE adapter = $1")
            .bind(&session.adapter)
            .fetch_optional(&mut *tx)
            .await
            .map_err(Error::from)?
            .map(|row| row.try_get::<String, _>("state"))
            .transpose()
            .map_err(Error::from)?
            .map(|state| parse_state(&state))
            .transpose()?;
        if let Some(state) = state.filter(|s| !s.allows_sessions()) {
            return Err(StartRefused::Overridden { adapter: session.adapter.clone(), state });
        }
        let assignment = save_session_with(&mut *tx, session).await?;
        tx.commit().await.map_err(Error::from)?;
        self.wrote([crate::Touched::Sessions(assignment)]);
        Ok(())
    }
}
