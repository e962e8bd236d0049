//! Controllers and execution leases: several controllers share one store without running an
//! execution twice. A controller registers and heartbeats; an Assignment's execution is claimed
//! by a compare-and-set on its lease's fence, renewed with the heartbeat, and released when its
//! session is recorded. Every write about the execution carries the fence, so a controller whose
//! lease was taken over (it stalled, or was cut off) cannot record a result.

use std::time::Duration;

use sqlx::Row;

use crate::{Error, Result, Store};

/// A registered controller, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerRecord {
    pub id: String,
    pub host: String,
    pub pid: i64,
    /// The spec directory it serves.
    pub checkout: String,
    pub started_at: String,
    pub heartbeat_at: String,
    pub expires_at: String,
    pub stopped_at: Option<String>,
    /// Its checkout's git commit at its last scan.
    pub revision: Option<String>,
    /// Why it did not write desired state at its last scan (its checkout is behind), if so.
    pub sync_note: Option<String>,
}

impl ControllerRecord {
    /// Registered, not stopped, and heartbeating as of `at`.
    pub fn is_live(&self, at: &str) -> bool {
        self.stopped_at.is_none() && self.expires_at.as_str() > at
    }
}

/// What a controller says about itself when it registers.
#[derive(Debug, Clone, Copy)]
pub struct Registration<'a> {
    pub id: &'a str,
    pub host: &'a str,
    pub pid: u32,
    pub checkout: &'a str,
}

/// An execution lease as stored: who holds an Assignment's execution, with which fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub assignment: String,
    /// The uid of the Assignment object the execution belongs to (leases are per object).
    pub assignment_uid: String,
    pub holder: String,
    pub fence: i64,
    pub acquired_at: String,
    pub expires_at: String,
    pub released_at: Option<String>,
    /// The holder's registration still heartbeats (read with the lease).
    pub holder_live: bool,
    /// When it was read, by [`Store::lease_clock`].
    pub read_at: String,
}

impl LeaseRecord {
    /// Whether the lease keeps every other controller away as of `at`.
    pub fn is_held(&self, at: &str) -> bool {
        self.released_at.is_none() && self.holder_live && self.expires_at.as_str() > at
    }

    /// Whether it was held when it was read, by the clock leases are judged by.
    pub fn held(&self) -> bool {
        self.is_held(&self.read_at)
    }
}

/// A lease this controller holds: the fence every write about the execution carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub assignment: String,
    pub assignment_uid: String,
    pub holder: String,
    pub fence: i64,
}

/// A write about an execution refused because its lease moved on.
#[derive(Debug, thiserror::Error)]
#[error(
    "the lease on {assignment}'s execution moved on (held by {holder} with fence {fence}; this write carried fence {carried})"
)]
pub struct Fenced {
    pub assignment: String,
    pub holder: String,
    pub fence: i64,
    pub carried: i64,
}

fn controller_from_row(row: &sqlx::any::AnyRow) -> Result<ControllerRecord> {
    Ok(ControllerRecord {
        id: row.try_get("id")?,
        host: row.try_get("host")?,
        pid: row.try_get("pid")?,
        checkout: row.try_get("checkout")?,
        started_at: row.try_get("started_at")?,
        heartbeat_at: row.try_get("heartbeat_at")?,
        expires_at: row.try_get("expires_at")?,
        stopped_at: row.try_get("stopped_at")?,
        revision: row.try_get("revision")?,
        sync_note: row.try_get("sync_note")?,
    })
}

/// Leases matching `filter`, each with its holder's registration (whether it still heartbeats).
fn leases_where(filter: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(format!(
        "SELECT l.assignment, l.assignment_uid, l.holder, l.fence, l.acquired_at, l.expires_at, l.released_at, \
         c.stopped_at AS holder_stopped_at, c.expires_at AS holder_expires_at \
         FROM execution_leases l LEFT JOIN controllers c ON c.id = l.holder WHERE {filter} ORDER BY l.assignment"
    ))
}

fn lease_from_row(row: &sqlx::any::AnyRow, at: &str) -> Result<LeaseRecord> {
    let stopped: Option<String> = row.try_get("holder_stopped_at")?;
    let expires: Option<String> = row.try_get("holder_expires_at")?;
    Ok(LeaseRecord {
        assignment: row.try_get("assignment")?,
        assignment_uid: row.try_get("assignment_uid")?,
        holder: row.try_get("holder")?,
        fence: row.try_get("fence")?,
        acquired_at: row.try_get("acquired_at")?,
        expires_at: row.try_get("expires_at")?,
        released_at: row.try_get("released_at")?,
        holder_live: stopped.is_none() && expires.is_some_and(|e| e.as_str() > at),
        read_at: at.to_owned(),
    })
}

/// Whether `holder` still holds `assignment` with `fence`, inside a write transaction.
pub(crate) async fn check_fence(
    tx: &mut sqlx::AnyConnection,
    lease: &Lease,
) -> Result<std::result::Result<(), Fenced>> {
    let row = sqlx::query("SELECT holder, fence FROM execution_leases WHERE assignment_uid = $1")
        .bind(&lease.assignment_uid)
        .fetch_optional(&mut *tx)
        .await?;
    let (holder, fence) = match row {
        Some(row) => (row.try_get::<String, _>("holder")?, row.try_get::<i64, _>("fence")?),
        None => (String::from("nobody"), 0),
    };
    if holder == lease.holder && fence == lease.fence {
        Ok(Ok(()))
    } else {
        Ok(Err(Fenced { assignment: lease.assignment.clone(), holder, fence, carried: lease.fence }))
    }
}

impl Store {
    /// Now, by the clock every lease is judged by: the database's on PostgreSQL, where
    /// controllers on several hosts share leases and their clocks may disagree; this host's on
    /// SQLite, which one controller holds.
    pub async fn lease_clock(&self) -> Result<String> {
        Ok(crate::at(self.clock().await?))
    }

    /// [`Store::lease_clock`] as a moment, and that moment `ttl` later (an expiry), both in the
    /// store's format.
    async fn lease_clock_until(&self, ttl: Duration) -> Result<(String, String)> {
        let now = self.clock().await?;
        Ok((crate::at(now), crate::at(now + ttl)))
    }

    async fn clock(&self) -> Result<time::OffsetDateTime> {
        if !self.is_shared() {
            return Ok(time::OffsetDateTime::now_utc());
        }
        let mut connection = self.pool().acquire().await?;
        self.clock_with(&mut connection).await
    }

    /// [`Store::lease_clock`] as a moment, read on `connection` (on SQLite, this host's clock).
    async fn clock_with(&self, connection: &mut sqlx::AnyConnection) -> Result<time::OffsetDateTime> {
        if !self.is_shared() {
            return Ok(time::OffsetDateTime::now_utc());
        }
        let row = sqlx::query("SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT) AS micros")
            .fetch_one(&mut *connection)
            .await?;
        let micros: i64 = row.try_get("micros")?;
        time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1000)
            .map_err(|error| Error::Corrupt(format!("the database's clock: {error}")))
    }

    /// Registers (or re-registers) a controller, live for `ttl`.
    pub async fn register_controller(&self, me: &Registration<'_>, ttl: Duration) -> Result<()> {
        let (at, until) = self.lease_clock_until(ttl).await?;
        sqlx::query(
            "INSERT INTO controllers (id, host, pid, checkout, started_at, heartbeat_at, expires_at) VALUES ($1, $2, $3, $4, $5, $5, $6) \
             ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, checkout = excluded.checkout, heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at, stopped_at = NULL",
        )
        .bind(me.id)
        .bind(me.host)
        .bind(i64::from(me.pid))
        .bind(me.checkout)
        .bind(&at)
        .bind(&until)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// One heartbeat: the controller's registration and every lease it holds live for another
    /// `ttl`. The leases it still holds, as (assignment uid, fence): an execution missing from them
    /// was taken over and must stop.
    pub async fn controller_heartbeat(&self, id: &str, ttl: Duration) -> Result<Vec<(String, i64)>> {
        let (at, until) = self.lease_clock_until(ttl).await?;
        sqlx::query("UPDATE controllers SET heartbeat_at = $2, expires_at = $3, stopped_at = NULL WHERE id = $1")
            .bind(id)
            .bind(&at)
            .bind(&until)
            .execute(self.pool())
            .await?;
        sqlx::query("UPDATE execution_leases SET expires_at = $2 WHERE holder = $1 AND released_at IS NULL")
            .bind(id)
            .bind(&until)
            .execute(self.pool())
            .await?;
        let rows =
            sqlx::query("SELECT assignment_uid, fence FROM execution_leases WHERE holder = $1 AND released_at IS NULL")
                .bind(id)
                .fetch_all(self.pool())
                .await?;
        rows.iter().map(|row| Ok((row.try_get("assignment_uid")?, row.try_get("fence")?))).collect()
    }

    /// Marks a controller stopped and releases what it still holds: others take over at once.
    pub async fn deregister_controller(&self, id: &str) -> Result<()> {
        let at = self.lease_clock().await?;
        sqlx::query("UPDATE execution_leases SET fence = fence + 1, released_at = $2, expires_at = $2 WHERE holder = $1 AND released_at IS NULL")
            .bind(id)
            .bind(&at)
            .execute(self.pool())
            .await?;
        sqlx::query("UPDATE controllers SET stopped_at = $2 WHERE id = $1")
            .bind(id)
            .bind(&at)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Marks every other controller stopped: on a store of one controller (SQLite),
    /// the daemon lock proves that an earlier run is gone, so its leases need not expire first.
    pub async fn forget_controllers_except(&self, id: &str) -> Result<()> {
        let at = self.lease_clock().await?;
        sqlx::query("UPDATE controllers SET stopped_at = $2 WHERE id <> $1 AND stopped_at IS NULL")
            .bind(id)
            .bind(&at)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Forgets registrations that stopped, or stopped heartbeating, before `cutoff`; how many.
    pub async fn forget_controllers_before(&self, cutoff: &str) -> Result<u64> {
        let done = sqlx::query(
            "DELETE FROM controllers WHERE (stopped_at IS NOT NULL AND stopped_at < $1) OR (stopped_at IS NULL AND expires_at < $1)",
        )
        .bind(cutoff)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Every registered controller, live ones first, newest first.
    pub async fn controllers(&self) -> Result<Vec<ControllerRecord>> {
        let rows = sqlx::query("SELECT * FROM controllers ORDER BY started_at DESC, id").fetch_all(self.pool()).await?;
        let mut all: Vec<ControllerRecord> = rows.iter().map(controller_from_row).collect::<Result<_>>()?;
        let at = self.lease_clock().await?;
        all.sort_by_key(|c| !c.is_live(&at));
        Ok(all)
    }

    /// The lease on the execution of the Assignment with uid `assignment_uid`, with whether its
    /// holder still heartbeats.
    pub async fn execution_lease(&self, assignment_uid: &str) -> Result<Option<LeaseRecord>> {
        let mut connection = self.pool().acquire().await?;
        self.execution_lease_with(&mut connection, assignment_uid).await
    }

    /// [`Store::execution_lease`] on `connection`, judged by the lease clock read on it too.
    pub(crate) async fn execution_lease_with(
        &self,
        connection: &mut sqlx::AnyConnection,
        assignment_uid: &str,
    ) -> Result<Option<LeaseRecord>> {
        let row = sqlx::query(leases_where("l.assignment_uid = $1"))
            .bind(assignment_uid)
            .fetch_optional(&mut *connection)
            .await?;
        let at = crate::at(self.clock_with(connection).await?);
        row.map(|row| lease_from_row(&row, &at)).transpose()
    }

    /// Every lease not released, by assignment.
    pub async fn execution_leases(&self) -> Result<Vec<LeaseRecord>> {
        let rows = sqlx::query(leases_where("l.released_at IS NULL")).fetch_all(self.pool()).await?;
        let at = self.lease_clock().await?;
        rows.iter().map(|row| lease_from_row(row, &at)).collect()
    }

    /// Claims `assignment`'s execution for `holder` for `ttl`, if the lease is where `seen` (read
    /// before the sessions this decision rests on) left it and nobody else holds it now: one
    /// statement, a compare-and-set on the fence. `None` when another controller got there first.
    pub async fn claim_execution(
        &self,
        assignment: &crate::Identity,
        holder: &str,
        seen: Option<&LeaseRecord>,
        ttl: Duration,
    ) -> Result<Option<Lease>> {
        let (at, until) = self.lease_clock_until(ttl).await?;
        let row = match seen {
            None => {
                sqlx::query(
                    "INSERT INTO execution_leases (assignment_uid, holder, fence, acquired_at, expires_at, assignment) VALUES ($1, $2, 1, $3, $4, $5) \
                     ON CONFLICT (assignment_uid) DO NOTHING RETURNING fence",
                )
                .bind(&assignment.uid)
                .bind(holder)
                .bind(&at)
                .bind(&until)
                .bind(&assignment.name)
                .fetch_optional(self.pool())
                .await?
            }
            Some(seen) => {
                sqlx::query(
                    "UPDATE execution_leases SET holder = $2, fence = fence + 1, acquired_at = $3, expires_at = $4, released_at = NULL \
                     WHERE assignment_uid = $1 AND fence = $5 AND (holder = $2 OR released_at IS NOT NULL OR expires_at <= $3 \
                       OR holder NOT IN (SELECT id FROM controllers WHERE stopped_at IS NULL AND expires_at > $3)) \
                     RETURNING fence",
                )
                .bind(&assignment.uid)
                .bind(holder)
                .bind(&at)
                .bind(&until)
                .bind(seen.fence)
                .fetch_optional(self.pool())
                .await?
            }
        };
        row.map(|row| {
            Ok(Lease {
                assignment: assignment.name.clone(),
                assignment_uid: assignment.uid.clone(),
                holder: holder.to_owned(),
                fence: row.try_get("fence")?,
            })
        })
        .transpose()
    }

    /// Lets go of a lease once its session is recorded (the fence moves on, so the releasing
    /// controller can write nothing more about it). False when it had already moved on.
    pub async fn release_execution(&self, lease: &Lease) -> Result<bool> {
        let at = self.lease_clock().await?;
        let done = sqlx::query(
            "UPDATE execution_leases SET fence = fence + 1, released_at = $4, expires_at = $4 \
             WHERE assignment_uid = $1 AND holder = $2 AND fence = $3",
        )
        .bind(&lease.assignment_uid)
        .bind(&lease.holder)
        .bind(lease.fence)
        .bind(&at)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records a session about an execution `lease` covers, in one transaction with the check
    /// that the lease is still held with its fence.
    pub async fn save_session_fenced(
        &self,
        session: &crate::SessionRecord,
        lease: &Lease,
    ) -> Result<std::result::Result<(), Fenced>> {
        let mut tx = self.write_transaction().await?;
        if let Err(fenced) = check_fence(&mut tx, lease).await? {
            return Ok(Err(fenced));
        }
        let assignment = crate::executions::save_session_with(&mut *tx, session).await?;
        tx.commit().await.map_err(Error::from)?;
        self.wrote([crate::Touched::Sessions(assignment)]);
        Ok(Ok(()))
    }

    /// Records a proposal under `lease`, like [`Store::save_session_fenced`]; `Ok(false)` when
    /// its execution generation already has one. On a shared store its `patch` is kept with it,
    /// so every host can export it.
    pub async fn insert_proposal_fenced(
        &self,
        proposal: &crate::ProposalRecord,
        patch: &[u8],
        lease: &Lease,
    ) -> Result<std::result::Result<bool, Fenced>> {
        let mut tx = self.write_transaction().await?;
        if let Err(fenced) = check_fence(&mut tx, lease).await? {
            return Ok(Err(fenced));
        }
        let inserted = crate::executions::insert_proposal_with(&mut *tx, proposal).await?;
        if inserted && self.is_shared() {
            sqlx::query("INSERT INTO proposal_patches (proposal_id, patch) VALUES ($1, $2)")
                .bind(&proposal.id)
                .bind(patch)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await.map_err(Error::from)?;
        self.wrote([]);
        Ok(Ok(inserted))
    }
}
