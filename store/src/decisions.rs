//! An operator's decisions on a proposal, each a compare-and-set on its state (docs/delivery.md):
//! an accept claims the proposal (`pending → accepting`) before it makes anything, then either
//! finishes (`accepting → accepted`) or releases its claim (`accepting → pending`); a reject is
//! `pending → rejected`. Only one decider can ever win a proposal.

use roundtable_specs::delivery::Decision;
use roundtable_specs::session::ProposalState;
use sqlx::Row;

use crate::{Result, Store, now};

/// An accept's claim on a proposal, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptClaim {
    /// Who holds it: unique to one accept.
    pub holder: String,
    /// When it was taken, in the store's time format.
    pub at: String,
    /// What the accept makes, as its own JSON (the store does not read it).
    pub detail: String,
}

/// How a claim went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The proposal was pending and is now this claim's.
    Won,
    /// It was not pending: its state then (`None` when there is no such proposal).
    Lost(Option<ProposalState>),
}

fn to_json(value: &Decision) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

impl Store {
    /// The state proposal `id` is in, if it exists.
    async fn proposal_state(&self, id: &str) -> Result<Option<ProposalState>> {
        let state: Option<String> = sqlx::query_scalar("SELECT state FROM proposals WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        state
            .map(|text| {
                text.parse().map_err(|e: roundtable_specs::words::UnknownWord| crate::Error::Corrupt(e.to_string()))
            })
            .transpose()
    }

    /// What a compare-and-set out of `pending` on proposal `id` came to: won when it changed the
    /// row, else the state the proposal was in instead (none: it does not exist).
    async fn taken_from_pending(&self, id: &str, rows_affected: u64) -> Result<ClaimOutcome> {
        if rows_affected == 1 {
            self.wrote([]);
            return Ok(ClaimOutcome::Won);
        }
        Ok(ClaimOutcome::Lost(self.proposal_state(id).await?))
    }

    /// Claims pending proposal `id` for an accept by `holder` (`pending → accepting`), recording
    /// `detail` with it; a proposal in any other state is left as it is.
    pub async fn claim_accept(&self, id: &str, holder: &str, detail: &str) -> Result<ClaimOutcome> {
        let done = sqlx::query(
            "UPDATE proposals SET state = $1, claimed_by = $2, claimed_at = $3, claim_json = $4 WHERE id = $5 AND state = $6",
        )
        .bind(ProposalState::Accepting.as_str())
        .bind(holder)
        .bind(now())
        .bind(detail)
        .bind(id)
        .bind(ProposalState::Pending.as_str())
        .execute(self.pool())
        .await?;
        self.taken_from_pending(id, done.rows_affected()).await
    }

    /// The accept claim held on proposal `id`, if it is `accepting`.
    pub async fn accept_claim(&self, id: &str) -> Result<Option<AcceptClaim>> {
        let row = sqlx::query("SELECT claimed_by, claimed_at, claim_json FROM proposals WHERE id = $1 AND state = $2")
            .bind(id)
            .bind(ProposalState::Accepting.as_str())
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(AcceptClaim {
            holder: row.try_get::<Option<String>, _>("claimed_by")?.unwrap_or_default(),
            at: row.try_get::<Option<String>, _>("claimed_at")?.unwrap_or_default(),
            detail: row.try_get::<Option<String>, _>("claim_json")?.unwrap_or_default(),
        }))
    }

    /// Every proposal held by an accept claim, with the claim.
    pub async fn accept_claims(&self) -> Result<Vec<(String, AcceptClaim)>> {
        let rows =
            sqlx::query("SELECT id, claimed_by, claimed_at, claim_json FROM proposals WHERE state = $1 ORDER BY id")
                .bind(ProposalState::Accepting.as_str())
                .fetch_all(self.pool())
                .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("id")?,
                    AcceptClaim {
                        holder: row.try_get::<Option<String>, _>("claimed_by")?.unwrap_or_default(),
                        at: row.try_get::<Option<String>, _>("claimed_at")?.unwrap_or_default(),
                        detail: row.try_get::<Option<String>, _>("claim_json")?.unwrap_or_default(),
                    },
                ))
            })
            .collect()
    }

    /// Ends `holder`'s claim on proposal `id` without a decision: it is pending again, or
    /// superseded when its Assignment moved to another execution generation meanwhile (as a
    /// proposal recorded late is). False when `holder` no longer holds it.
    pub async fn release_accept(&self, id: &str, holder: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE proposals SET \
               state = CASE WHEN EXISTS (SELECT 1 FROM objects WHERE uid = proposals.assignment_uid AND execution_generation <> proposals.execution_generation) THEN $1 ELSE $2 END, \
               claimed_by = NULL, claimed_at = NULL, claim_json = NULL \
             WHERE id = $3 AND state = $4 AND claimed_by = $5",
        )
        .bind(ProposalState::Superseded.as_str())
        .bind(ProposalState::Pending.as_str())
        .bind(id)
        .bind(ProposalState::Accepting.as_str())
        .bind(holder)
        .execute(self.pool())
        .await?;
        self.wrote([]);
        Ok(done.rows_affected() == 1)
    }

    /// Ends `holder`'s claim on proposal `id` as an accept (`accepting → accepted`) with
    /// `decision` and its signed `provenance`; false when `holder` no longer holds it.
    pub async fn finish_accept(&self, id: &str, holder: &str, decision: &Decision, provenance: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE proposals SET state = $1, decision_json = $2, provenance = $3, claimed_by = NULL, claimed_at = NULL, claim_json = NULL \
             WHERE id = $4 AND state = $5 AND claimed_by = $6",
        )
        .bind(ProposalState::Accepted.as_str())
        .bind(to_json(decision))
        .bind(provenance)
        .bind(id)
        .bind(ProposalState::Accepting.as_str())
        .bind(holder)
        .execute(self.pool())
        .await?;
        self.wrote([]);
        Ok(done.rows_affected() == 1)
    }

    /// Rejects pending proposal `id` with `decision` (`pending → rejected`); a proposal in any
    /// other state, an accept's claim included, is left as it is.
    pub async fn reject_pending(&self, id: &str, decision: &Decision) -> Result<ClaimOutcome> {
        let done = sqlx::query("UPDATE proposals SET state = $1, decision_json = $2 WHERE id = $3 AND state = $4")
            .bind(ProposalState::Rejected.as_str())
            .bind(to_json(decision))
            .bind(id)
            .bind(ProposalState::Pending.as_str())
            .execute(self.pool())
            .await?;
        self.taken_from_pending(id, done.rows_affected()).await
    }
}
