//! What a session keeps: its record saved (under its lease, retrying a busy store), how it
//! ended, its entries in the audit chain, its proposal, and what the run produced.

use roundtable_agents::{capture, plan};
use roundtable_session_runtime::{Captured, RunOutcome};
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::audit::{AuditRecord, ProposalSubmitted, SessionEnded};
use roundtable_specs::session::{AgentSession, SessionCause, SessionPhase};
use roundtable_store::{ProposalRecord, SessionRecord};
use roundtable_telemetry::error_chain;

use crate::folder::ExecutionFolder;
use crate::manager::{Inner, now};
use crate::outcome::{Ending, Stop};

impl Inner {
    /// Records the session, retrying while the database is busy: an execution's outcome must not
    /// be lost to a transient lock.
    /// Under a lease, a write the fence refuses is dropped: another controller owns the
    /// execution now.
    pub(crate) async fn save(&self, session: &SessionRecord) {
        let lease = self.lease_of(session);
        for attempt in 1..=10u64 {
            let saved = match &lease {
                Some(lease) => self.store.save_session_fenced(session, lease).await.map(|fenced| {
                    if let Err(fenced) = fenced {
                        tracing::warn!(session = %session.id, %fenced, "not recording the session");
                    }
                }),
                None => self.store.save_session(session).await,
            };
            match saved {
                Ok(()) => return,
                Err(error) if attempt < 10 => {
                    tracing::warn!(session = %session.id, attempt, %error, "cannot record the session yet; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await;
                }
                Err(error) => tracing::error!(session = %session.id, %error, "cannot record the session"),
            }
        }
    }

    /// The lease `session`'s execution runs under, if any.
    pub(crate) fn lease_of(&self, session: &SessionRecord) -> Option<roundtable_store::Lease> {
        let active = self.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        active.get(&session.assignment).filter(|run| run.session == session.id).and_then(|run| run.lease.clone())
    }

    /// Why the manager stopped `session`, if it did; taken, since it is read once.
    pub(crate) fn stop_of(&self, session: &str) -> Option<Stop> {
        self.stops.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(session)
    }

    /// Records how the session ended.
    pub(crate) async fn end(&self, mut session: SessionRecord, ending: Ending) -> SessionRecord {
        if ending.phase != SessionPhase::Cancelled {
            tracing::warn!(session = %session.id, assignment = %session.assignment, phase = %ending.phase, cause = %ending.cause, detail = %ending.message, "execution did not succeed");
        }
        session.phase = ending.phase;
        session.cause = Some(ending.cause);
        session.message = ending.message;
        session.finished_at = Some(now());
        self.save(&session).await;
        self.audit_end(&session).await;
        session
    }

    /// The session's end, in the log (one INFO line, whatever the end) and the audit chain.
    pub(crate) async fn audit_end(&self, session: &SessionRecord) {
        let duration_ms = session.started_at.as_deref().zip(session.finished_at.as_deref()).and_then(|(from, to)| {
            let parse = |at: &str| time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok();
            Some(i64::try_from((parse(to)? - parse(from)?).whole_milliseconds()).unwrap_or(i64::MAX))
        });
        let tokens = session.detail.broker.as_ref().map(|b| b.tokens.input + b.tokens.output);
        tracing::info!(
            phase = %session.phase,
            cause = session.cause.map(|c| c.as_str()),
            exit_code = session.exit_code,
            duration_ms,
            tokens,
            detail = %session.message,
            "session ended"
        );
        let record = SessionEnded {
            assignment: &session.assignment,
            execution_generation: session.execution_generation,
            attempt: session.attempt,
            adapter: &session.adapter,
            image: session.image.as_deref(),
            phase: session.phase,
            cause: session.cause,
            exit_code: session.exit_code,
            external_session_id: session.external_session_id.as_deref(),
            message: &session.message,
            duration_ms,
        };
        self.audit(&session.id, &record).await;
    }

    /// Records `proposal` (with its `patch`, kept in a shared store), under the session's lease
    /// when it has one, and audits it; `Ok(false)` when its execution generation already has one,
    /// and the ending to record when it cannot be recorded.
    pub(crate) async fn record_proposal(
        &self,
        session: &SessionRecord,
        proposal: &ProposalRecord,
        patch: &[u8],
    ) -> Result<bool, Ending> {
        let inserted = match self.lease_of(session) {
            Some(lease) => match self.store.insert_proposal_fenced(proposal, patch, &lease).await {
                Ok(Ok(inserted)) => Ok(inserted),
                Ok(Err(fenced)) => {
                    tracing::warn!(session = %session.id, %fenced, "not recording the proposal");
                    return Err(Ending::failed(SessionCause::PatchFailed, fenced.to_string()));
                }
                Err(error) => Err(error),
            },
            None => self.store.insert_proposal(proposal).await,
        };
        let inserted = inserted.map_err(|error| {
            Ending::failed(SessionCause::PatchFailed, format!("cannot record the proposal: {}", error_chain(&error)))
        })?;
        if inserted {
            let record = ProposalSubmitted {
                assignment: &proposal.assignment,
                execution_generation: proposal.execution_generation,
                base_commit: &proposal.base_commit,
                sha256: &proposal.sha256,
                flags: &proposal.flags,
            };
            // Filed under the proposal, as the events table shows it: a bare ID reads as a session's.
            self.audit(&format!("Proposal/{}", proposal.id), &record).await;
            tracing::info!(proposal = %proposal.id, sha256 = %proposal.sha256, flags = proposal.flags.len(), "proposal recorded");
        }
        Ok(inserted)
    }

    /// Appends an audited entry to the chain, when there is a key. The chain is evidence, not a
    /// gate: a failed append is logged, the execution goes on.
    pub(crate) async fn audit(&self, subject: &str, record: &impl AuditRecord) {
        let Some(key) = &self.config.audit_key else { return };
        let kind = record.kind().as_str();
        let appended = match roundtable_store::audit::AuditedEntry::of(subject, record) {
            Ok(entry) => self.store.append_audited(key, &entry).await,
            Err(error) => Err(roundtable_store::Error::Record(error)),
        };
        if let Err(error) = appended {
            tracing::error!(%error, kind, subject, "cannot append to the audit chain");
        }
    }
}

/// Keeps the agent's output (already masked) in the session's folder, and how much there was on
/// the session.
pub(crate) fn record_output(
    session: &mut SessionRecord,
    stdout: &Captured,
    stderr: &Captured,
    folder: &ExecutionFolder,
) {
    let _ = std::fs::write(folder.stdout_log(), &stdout.bytes);
    let _ = std::fs::write(folder.stderr_log(), &stderr.bytes);
    session.stdout_bytes = i64::try_from(stdout.total).ok();
    session.stderr_bytes = i64::try_from(stderr.total).ok();
    session.stdout_truncated = stdout.truncated();
    session.stderr_truncated = stderr.truncated();
}

/// Keeps what the run produced on the session: exit code, captured output (and its logs),
/// external session ID, self-check, export, egress counters, phase timings.
pub(crate) fn record_run(
    session: &mut SessionRecord,
    outcome: &RunOutcome,
    folder: &ExecutionFolder,
    adapter: &ResolvedAdapter,
) {
    record_output(session, &outcome.stdout, &outcome.stderr, folder);
    session.exit_code = outcome.exit_code;
    if adapter.captures_session_id {
        let captured = capture::capture(adapter.provider, &outcome.stdout.bytes, outcome.stdout.truncated());
        let agent = session.detail.agent.get_or_insert_with(AgentSession::default);
        agent.usage = captured.usage;
        match captured.session_id {
            Ok(id) => {
                agent.resume_command = plan::resume_argv(adapter, &id, plan::BRIEFING_PLACEHOLDER).ok();
                session.external_session_id = Some(id.as_str().to_owned());
            }
            Err(reason) => agent.capture_note = Some(reason.to_string()),
        }
    }
    session.cause = Some(SessionCause::from(outcome.end));
    let detail = &mut session.detail;
    detail.self_check = outcome.self_check.clone();
    detail.paused_for_export = Some(outcome.paused_for_export);
    detail.export = outcome.extracted.clone();
    for (phase, millis) in &outcome.timings {
        detail.timings_ms.insert((*phase).to_owned(), *millis);
    }
}
