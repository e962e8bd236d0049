//! Sessions and resume: registering a session a provider CLI ran elsewhere (so it can be resumed),
//! and the resume briefing built from the store: the task, earlier sessions with their resume
//! commands, notes, claims and proposals. The one code path the CLI and a later API share.

use std::collections::BTreeMap;

use roundtable_agents::plan::{self, ResumeRefused};
use roundtable_specs::assignment::AssignmentSpec;
use roundtable_specs::output::{ProposalItem, SessionItem};
use roundtable_specs::resume::ExternalSessionId;
use roundtable_specs::session::{AgentSession, SessionCause, SessionPhase};
use roundtable_specs::{Kind, ObjectKey};
use roundtable_store::{Claim, Note, SessionRecord};
use serde::Serialize;

use crate::{Result, Service, ServiceError, lookup};

/// A session to record that Roundtable did not run.
#[derive(Debug, Clone, Default)]
pub struct RegisterRequest {
    pub assignment: String,
    pub adapter: String,
    pub external_session_id: Option<String>,
    pub model: Option<String>,
    pub working_dir: Option<String>,
    pub metadata: BTreeMap<String, String>,
}

/// Why a registration was refused (before anything is written).
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error(transparent)]
    InvalidId(#[from] roundtable_specs::resume::ResumeError),
    #[error("invalid assignment name {name:?}: {reason}")]
    InvalidAssignment { name: String, reason: String },
    #[error("invalid metadata key {0:?}: 1 to 63 of a-z, A-Z, 0-9, '.', '_', '-', '/'")]
    InvalidMetadataKey(String),
}

/// The briefing that resumes an assignment.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Briefing {
    pub assignment: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<roundtable_specs::assignment::Task>,
    /// Newest first.
    pub sessions: Vec<SessionItem>,
    pub notes: Vec<Note>,
    /// Claims still live after stale ones were released.
    pub claims: Vec<Claim>,
    /// Claims this call released because their session had ended.
    pub released: Vec<Claim>,
    pub proposals: Vec<ProposalItem>,
    /// The briefing as one text: what a resume command gets as its final argument.
    pub text: String,
}

fn metadata_key_ok(key: &str) -> bool {
    (1..=63).contains(&key.len()) && key.chars().all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
}

impl Service {
    /// Records a session run outside Roundtable. With an external id and an adapter that can
    /// resume, the resume command is filled from the adapter's `resumePattern`.
    pub async fn register_session(&self, request: RegisterRequest) -> Result<SessionItem> {
        let invalid = |error: RegisterError| ServiceError::Register(error);
        roundtable_specs::names::check_object_name(&request.assignment).map_err(|error| {
            invalid(RegisterError::InvalidAssignment { name: request.assignment.clone(), reason: error.to_string() })
        })?;
        if let Some(bad) = request.metadata.keys().find(|key| !metadata_key_ok(key)) {
            return Err(invalid(RegisterError::InvalidMetadataKey(bad.clone())));
        }
        let id: Option<ExternalSessionId> = match &request.external_session_id {
            Some(text) => Some(text.parse().map_err(|error| invalid(RegisterError::InvalidId(error)))?),
            None => None,
        };
        let adapter = self.adapter(&request.adapter).await?;
        let (resume_command, note) = match &id {
            Some(id) => match plan::resume_argv(&adapter, id, plan::BRIEFING_PLACEHOLDER) {
                Ok(argv) => (Some(argv), None),
                Err(refused @ (ResumeRefused::NotSupported(_) | ResumeRefused::NoPattern(_))) => {
                    (None, Some(refused.to_string()))
                }
            },
            None => (None, Some("no external session id was given".to_owned())),
        };
        let now = roundtable_store::now();
        let record = SessionRecord {
            id: roundtable_execution::new_session_id(),
            assignment: request.assignment.clone(),
            // Generation 0: never counted as a run of any execution generation.
            execution_generation: 0,
            attempt: 0,
            controller_run: "registered".into(),
            adapter: adapter.name.clone(),
            image: adapter.image.as_ref().map(ToString::to_string),
            phase: SessionPhase::Succeeded,
            cause: Some(SessionCause::Registered),
            message: match &note {
                Some(note) => format!("registered; not resumable: {note}"),
                None => "registered; resumable".into(),
            },
            external_session_id: id.as_ref().map(|id| id.as_str().to_owned()),
            created_at: now.clone(),
            started_at: Some(now.clone()),
            finished_at: Some(now),
            detail: roundtable_specs::session::SessionDetail {
                agent: Some(AgentSession {
                    provider: adapter.provider.to_string(),
                    model: request.model.clone(),
                    working_dir: request
                        .working_dir
                        .clone()
                        .unwrap_or_else(|| roundtable_specs::layout::WORKSPACE.into()),
                    resume_command,
                    capture_note: note,
                    metadata: request.metadata.clone(),
                    ..AgentSession::default()
                }),
                ..Default::default()
            },
            ..SessionRecord::default()
        };
        self.store.save_session(&record).await?;
        Ok(lookup::session_item(record))
    }

    /// The briefing for `assignment` (default: the one with the newest session). Claims whose
    /// session has finished are released first: a finished session holds nothing.
    pub async fn resume(&self, assignment: Option<&str>) -> Result<Briefing> {
        let assignment = match assignment {
            Some(name) => name.to_owned(),
            None => self
                .store
                .sessions(None)
                .await?
                .into_iter()
                .next()
                .map(|s| s.assignment)
                .ok_or_else(|| ServiceError::NotFound { what: "session to resume", id: "(any)".into() })?,
        };
        let records = self.store.sessions(Some(&assignment)).await?;
        let task = self
            .store
            .object(&ObjectKey::new(Kind::Assignment, &assignment))
            .await?
            .and_then(|record| serde_json::from_str::<AssignmentSpec>(&record.spec_json).ok())
            .map(|spec| spec.task);
        if task.is_none() && records.is_empty() {
            return Err(ServiceError::NotFound { what: "assignment", id: assignment });
        }
        let mut released = Vec::new();
        for claim in self.store.claims_of(&assignment).await? {
            let finished =
                records.iter().find(|s| s.id == claim.session_id).is_none_or(|session| session.phase.is_finished());
            if claim.released_at.is_none() && finished {
                self.store.release_claims(&claim.session_id, std::slice::from_ref(&claim.path)).await?;
                released.push(claim);
            }
        }
        let board = roundtable_agents::briefing::Board::read(&self.store, &assignment).await?;
        let text = roundtable_agents::briefing::text(&assignment, task.as_ref(), &records, &board);
        let proposals: Vec<ProposalItem> =
            self.proposals().await?.into_iter().filter(|p| p.assignment == assignment).collect();
        let sessions: Vec<SessionItem> = records.into_iter().map(lookup::session_item).collect();
        let roundtable_agents::briefing::Board { notes, claims, .. } = board;
        Ok(Briefing { assignment, task, sessions, notes, claims, released, proposals, text })
    }
}
