//! Runs keyed by what they run: an execution generation whose run fields already succeeded at
//! the same base commit takes that result instead of running the agent again (as a Deployment
//! rolled back takes its earlier ReplicaSet). An earlier proposal nobody decided is copied under
//! this session as a new pending one, so the one it came from keeps its own state (a superseded
//! proposal stays superseded). An earlier proposal an operator accepted or rejected is not
//! copied: the generation stands as that decision (the store's `proposal_for` finds it through
//! the session's `reused.proposal`), so a spec round-trip never undoes a decision.

use roundtable_specs::session::{ProposalState, ReusedRun, SessionPhase};
use roundtable_store::{ProposalRecord, SessionRecord};

use crate::proposal::write_private;
use roundtable_reconcilers::ExecutionRequest;

use crate::manager::{Inner, now};

/// Why an earlier result was not taken although one matched: the agent runs instead.
#[derive(Debug, thiserror::Error)]
enum NotReusable {
    #[error(transparent)]
    Store(#[from] roundtable_store::Error),
    #[error("the patch of proposal {0} is no longer kept")]
    PatchGone(String),
    #[error("the patch of proposal {id} is not the one recorded (SHA-256 {actual}, recorded {recorded})")]
    PatchChanged { id: String, recorded: String, actual: String },
    #[error("cannot store the copied patch: {0}")]
    Write(#[source] std::io::Error),
    #[error("the copied proposal was not recorded: {0}")]
    NotRecorded(String),
    #[error("proposal {0}, which the earlier run's result stands as, is no longer recorded")]
    ProposalGone(String),
    #[error("an accept of proposal {0} is under way: its outcome is not known yet")]
    BeingAccepted(String),
}

impl Inner {
    /// Ends `session` (`true`) with the result of the newest earlier session of its Assignment
    /// that succeeded on the same run fields at the same base commit, if there is one; `false`
    /// runs the agent (nothing to reuse, `reconcile --rerun`, or an earlier result that cannot be
    /// taken).
    pub(crate) async fn reuse(&self, session: &mut SessionRecord, request: &ExecutionRequest) -> bool {
        self.reused(session, request).await.is_some()
    }

    async fn reused(&self, session: &mut SessionRecord, request: &ExecutionRequest) -> Option<()> {
        let (digest, commit) = (request.execution_digest.as_deref()?, session.base_commit.clone()?);
        if !request.reuse {
            return None;
        }
        let earlier = match self.store.reusable_session(&request.assignment_uid, digest, &commit).await {
            Ok(Some(earlier)) if earlier.id != session.id => earlier,
            Ok(_) => return None,
            Err(error) => {
                tracing::warn!(session = %session.id, %error, "cannot look for a result to reuse; running the agent");
                return None;
            }
        };
        let taken = match self.take(session, request, &earlier).await {
            Ok(taken) => taken,
            Err(error) => {
                tracing::warn!(session = %session.id, earlier = %earlier.id, %error, "not reusing the earlier result; running the agent");
                return None;
            }
        };
        let short = &commit[..commit.len().min(12)];
        let (generation, assignment) = (taken.run.execution_generation, &request.assignment);
        session.message = match &taken.proposal {
            Took::Copied(proposal) => format!(
                "reused the proposal of generation {generation} as pending proposal {proposal}: the same run fields already ran at {short} (`roundtable reconcile --rerun Assignment/{assignment}` runs the agent again)"
            ),
            Took::Decided { id, state } => format!(
                "reused the result of generation {generation}, proposal {id}, which stays {state}: the same run fields already ran at {short} (`roundtable reconcile --rerun Assignment/{assignment}` runs the agent again)"
            ),
            Took::Nothing => format!(
                "reused the result of generation {generation}: the same run fields already ran at {short} and the agent changed nothing (`roundtable reconcile --rerun Assignment/{assignment}` runs the agent again)"
            ),
        };
        session.detail.reused = Some(taken.run);
        session.phase = SessionPhase::Succeeded;
        session.finished_at = Some(now());
        Some(())
    }

    /// Copies `earlier`'s proposal, if it made one, as this session's.
    async fn take(
        &self,
        session: &SessionRecord,
        request: &ExecutionRequest,
        earlier: &SessionRecord,
    ) -> Result<Taken, NotReusable> {
        // A reuse of a reuse names the run that ran the agent.
        let mut run = earlier.detail.reused.clone().unwrap_or_else(|| ReusedRun {
            session: earlier.id.clone(),
            execution_generation: earlier.execution_generation,
            proposal: None,
        });
        let source = match self.store.proposal_of_session(&earlier.id).await? {
            Some(source) => source,
            // The earlier run itself stood as a decided proposal and recorded none of its own.
            None => match run.proposal.clone() {
                Some(id) => self.store.proposal_by_id(&id).await?.ok_or(NotReusable::ProposalGone(id))?,
                None => return Ok(Taken { run, proposal: Took::Nothing }),
            },
        };
        match source.state {
            ProposalState::Accepted | ProposalState::Rejected => {
                // An operator's decision stands: no copy, no new review.
                run.proposal = Some(source.id.clone());
                return Ok(Taken { run, proposal: Took::Decided { id: source.id, state: source.state } });
            }
            ProposalState::Accepting => return Err(NotReusable::BeingAccepted(source.id)),
            ProposalState::Pending | ProposalState::Superseded => {}
        }
        let patch = match std::fs::read(&source.patch_path) {
            Ok(patch) => patch,
            Err(_) => {
                self.store.proposal_patch(&source.id).await?.ok_or_else(|| NotReusable::PatchGone(source.id.clone()))?
            }
        };
        let actual = roundtable_specs::digest::sha256_hex(&patch);
        if actual != source.sha256 {
            return Err(NotReusable::PatchChanged { id: source.id.clone(), recorded: source.sha256.clone(), actual });
        }
        let id = format!("{}-{}", &source.sha256[..source.sha256.len().min(12)], session.id);
        let patch_path = self.config.project.proposals_dir().join(format!("{id}.patch"));
        write_private(&patch_path, &patch).map_err(NotReusable::Write)?;
        let original = source.reused_from.clone().unwrap_or_else(|| source.id.clone());
        run.proposal.get_or_insert(original.clone());
        let proposal = ProposalRecord {
            id: id.clone(),
            session_id: session.id.clone(),
            assignment: request.assignment.clone(),
            assignment_uid: Some(request.assignment_uid.clone()),
            execution_generation: request.execution_generation,
            base_commit: source.base_commit.clone(),
            adapter: request.adapter.name.clone(),
            patch_path: patch_path.display().to_string(),
            state: ProposalState::Pending,
            created_at: now(),
            reused_from: Some(original),
            // The copy is a new pending proposal: nobody has decided it.
            decision: None,
            provenance: None,
            ..source
        };
        match self.record_proposal(session, &proposal, &patch).await {
            Ok(true) => Ok(Taken { run, proposal: Took::Copied(id) }),
            recorded => {
                let _ = std::fs::remove_file(&patch_path);
                Err(NotReusable::NotRecorded(match recorded {
                    Err(ending) => ending.message,
                    _ => "this execution generation already has a proposal".into(),
                }))
            }
        }
    }
}

/// What a session took from an earlier one.
struct Taken {
    run: ReusedRun,
    proposal: Took,
}

/// The proposal a reusing session stands as.
enum Took {
    /// The agent changed nothing.
    Nothing,
    /// A pending copy of the earlier proposal, recorded for this session.
    Copied(String),
    /// The earlier proposal itself, which an operator accepted or rejected.
    Decided { id: String, state: ProposalState },
}
