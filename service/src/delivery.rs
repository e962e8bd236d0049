//! `proposals accept|reject|provenance` (docs/delivery.md): an operator's explicit act turning a
//! pending proposal into a commit on a new branch, through the review gates, with signed
//! provenance; or rejecting it with a reason. Both are recorded on the proposal and in the audit
//! chain. The CLI, the API and the admin MCP tools call these functions.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use roundtable_delivery::added;
use roundtable_delivery::branch::{self, BranchError, CommitRequest, Identity};
use roundtable_delivery::gates::{self, Unmet};
use roundtable_delivery::held::HeldCredentials;
use roundtable_delivery::provenance::{self, Envelope, ProvenanceError, SigningKey};
use roundtable_specs::audit::{EntryKind, ProposalDecided};
use roundtable_specs::brief::Brief;
use roundtable_specs::delivery::{Decision, Finding, GateAction, GateOverride, ProposalGates};
use roundtable_specs::session::ProposalState;
use roundtable_store::audit::{AuditKey, AuditedEntry};
use roundtable_store::{ProposalRecord, SessionRecord};

use crate::{Result, Service, ServiceError};

/// Where provenance notes live on accepted commits.
pub const NOTES_REF: &str = "refs/notes/roundtable";

/// Why an accept or reject did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("proposal {id} is {state}, not pending: only a pending proposal can be {verb}")]
    NotPending { id: String, state: ProposalState, verb: &'static str },
    #[error("the review gates refuse proposal {id}:\n{}", .unmet.iter().map(|u| format!("  - {u}")).collect::<Vec<_>>().join("\n"))]
    Gates { id: String, unmet: Vec<Unmet> },
    #[error("a reject needs a reason (--reason TEXT)")]
    NoReason,
    #[error(transparent)]
    Branch(#[from] BranchError),
    #[error(transparent)]
    Provenance(#[from] ProvenanceError),
    #[error("recording the decision in the audit chain failed: {0}")]
    Audit(String),
    #[error(
        "this project follows a git source: an accept commits in its mirror and must push the branch (--push REMOTE, e.g. the source's URL), or commit in a clone (--repo PATH)"
    )]
    MirrorNeedsPush,
    #[error("proposal {0} has no provenance: it was not accepted")]
    NoProvenance(String),
}

/// What an accept is asked to do.
#[derive(Debug, Clone)]
pub struct AcceptOptions {
    /// The repository to commit in (the project's by default).
    pub repo: Option<PathBuf>,
    /// A new branch name; `roundtable/<assignment>/<proposal>` by default.
    pub branch: Option<String>,
    /// A remote (name or URL) to push the branch and the provenance notes to.
    pub push: Option<String>,
    pub overrides: Vec<GateOverride>,
    /// The provenance key (`PROJECT.provenance.key` beside the audit key).
    pub signing_key: PathBuf,
}

/// The repository an accept commits in, and where its branch's ref goes there.
struct Target {
    repo: PathBuf,
    namespace: &'static str,
}

/// The review gates' view of a proposal.
#[derive(Debug, Clone)]
pub struct Review {
    pub findings: Vec<(GateAction, Finding)>,
    pub asked: gates::Asked,
}

/// An accept done.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub proposal: String,
    pub decision: Decision,
    pub envelope: Envelope,
}

/// The default branch of an accepted proposal.
pub fn default_branch(proposal: &ProposalRecord) -> String {
    format!("roundtable/{}/{}", proposal.assignment, proposal.id)
}

/// The brief the session was given, when its folder is still there.
fn brief_of(session: Option<&SessionRecord>) -> Option<Brief> {
    let folder = roundtable_core::execution::ExecutionFolder::at(Path::new(session?.exec_dir.as_deref()?));
    serde_json::from_slice(&std::fs::read(folder.brief()).ok()?).ok()
}

/// The image a run used: its ID where the admission gate saw one, else the reference it named.
fn image_of(session: Option<&SessionRecord>) -> Option<String> {
    let session = session?;
    session.detail.admitted_under.as_ref().map(|a| a.image_id.clone()).or_else(|| session.image.clone())
}

/// The commit message: the task as its subject, then the trailers that tie the commit to its run.
fn message(proposal: &ProposalRecord, session: Option<&SessionRecord>, overrides: &[GateOverride]) -> String {
    let brief = brief_of(session);
    let subject = match &brief {
        Some(brief) => {
            let title = if brief.task.title.is_empty() {
                brief.task.prompt.lines().next().unwrap_or_default()
            } else {
                brief.task.title.as_str()
            };
            let title: String = title.chars().filter(|c| !c.is_control()).take(72).collect();
            format!("{}: {title}", brief.task.id)
        }
        None => format!("{}: the proposal of Assignment {}", proposal.assignment, proposal.assignment),
    };
    let receipt = session
        .and_then(|s| s.detail.admission.iter().find_map(|d| d.receipt.clone()))
        .unwrap_or_else(|| "none".into());
    let mut text = format!(
        "{subject}\n\nRoundtable-Proposal: {}\nRoundtable-Session: {}\nRoundtable-Adapter: {}\nRoundtable-Image: {}\nRoundtable-Receipt: {receipt}\n",
        proposal.id,
        proposal.session_id,
        proposal.adapter,
        image_of(session).unwrap_or_else(|| "none".into()),
    );
    for o in overrides {
        let reason: String = o.reason.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        text.push_str(&format!("Roundtable-Override: {}: {reason}\n", o.gate));
    }
    text
}

/// The provenance predicate: what the commit was made from, and how it was let through.
fn predicate(
    proposal: &ProposalRecord,
    session: Option<&SessionRecord>,
    decision: &Decision,
    chain_span: Option<(i64, i64)>,
) -> serde_json::Value {
    let brief = brief_of(session);
    serde_json::json!({
        "proposal": proposal.id,
        "baseCommit": proposal.base_commit,
        "assignment": {"name": proposal.assignment, "uid": proposal.assignment_uid, "generation": proposal.execution_generation},
        "task": brief.as_ref().map(|b| b.task.id.clone()),
        "adapter": proposal.adapter,
        "session": proposal.session_id,
        "image": image_of(session),
        "admission": session.map(|s| &s.detail.admission),
        "admittedUnder": session.and_then(|s| s.detail.admitted_under.as_ref()),
        "egress": session.and_then(|s| s.detail.egress.as_ref()),
        "broker": session.and_then(|s| s.detail.broker.as_ref()),
        "tokenUsage": session.and_then(|s| s.detail.agent.as_ref()).and_then(|a| a.usage.as_ref()),
        "patchSha256": proposal.sha256,
        "flags": proposal.flags.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "gates": {"findings": decision.findings, "overrides": decision.overrides},
        "auditSequence": chain_span.map(|(first, last)| serde_json::json!({"first": first, "last": last})),
        "acceptedBy": decision.by,
        "acceptedAt": decision.at,
    })
}

impl Service {
    /// Where an accept commits: the repository given, else the project's; for a git source, its
    /// mirror, which only a push leaves (a branch kept in the state directory helps nobody).
    fn target_of(&self, options: &AcceptOptions) -> Result<Target, DeliveryError> {
        if let Some(repo) = &options.repo {
            return Ok(Target { repo: repo.clone(), namespace: "refs/heads/" });
        }
        match &self.project.repos {
            roundtable_core::source::Repos::Mirror(mirror) => {
                if options.push.is_none() {
                    return Err(DeliveryError::MirrorNeedsPush);
                }
                Ok(Target { repo: mirror.clone(), namespace: branch::MIRROR_NAMESPACE })
            }
            _ => Ok(Target { repo: self.project.root.clone(), namespace: "refs/heads/" }),
        }
    }

    async fn audit_decision(&self, key: &AuditKey, record: &ProposalDecided<'_>) -> Result<(), DeliveryError> {
        let subject = format!("Assignment/{}", record.assignment);
        let entry = AuditedEntry::of(&subject, record).map_err(|e| DeliveryError::Audit(e.to_string()))?;
        self.store.append_audited(key, &entry).await.map_err(|e| DeliveryError::Audit(e.to_string()))?;
        Ok(())
    }

    /// Records the fingerprint of every value `secrets` holds for a `credentialEnv` name some
    /// Adapter of the project declares (built-ins included); how many were recorded.
    pub async fn record_credential_fingerprints(
        &self,
        secrets: &HashMap<String, String>,
        key: &AuditKey,
    ) -> Result<usize> {
        let names: BTreeSet<String> = self
            .declared_catalog()
            .iter()
            .flat_map(|(_, entry)| entry.resolved.credential_env.iter().map(ToString::to_string))
            .collect();
        let held = names.iter().filter_map(|name| Some((name.as_str(), secrets.get(name)?.as_str())));
        let prints = key.fingerprints(held);
        self.store.record_fingerprints(&prints).await?;
        Ok(prints.len())
    }

    /// What the gates find in `patch` of `record` under `policy`, comparing its added lines with
    /// the held credentials' fingerprints when `key` can hash them.
    async fn findings_of(
        &self,
        record: &ProposalRecord,
        patch: &[u8],
        policy: &ProposalGates,
        key: Option<&AuditKey>,
    ) -> Result<Vec<Finding>> {
        let added = added::read(patch);
        let Some(key) = key else {
            return Ok(gates::findings(&added, &record.flags, policy, None));
        };
        let prints = self.store.credential_fingerprints().await?;
        let hash = key.fingerprint_key();
        let digest = |bytes: &[u8]| hash.digest(bytes);
        let held = HeldCredentials::new(&prints, &digest);
        Ok(gates::findings(&added, &record.flags, policy, Some(&held)))
    }

    /// What the review gates find in a proposal now, each with its gate's action, and what they
    /// ask of an operator before an accept (the console's review form).
    pub async fn proposal_review(&self, id_or_prefix: &str, key: Option<&AuditKey>) -> Result<Review> {
        let record = self.proposal_record(id_or_prefix).await?;
        let patch = self.verified_patch(&record).await?;
        let policy = self.declared_policy().proposals;
        let findings = self.findings_of(&record, &patch, &policy, key).await?;
        let asked = gates::asked(&findings, &policy);
        let findings = findings.into_iter().map(|f| (policy.action(f.gate), f)).collect();
        Ok(Review { findings, asked })
    }

    /// What the review gates find in a proposal now, under the declared policy; `key` (the audit
    /// key) lets them compare its added lines with the credentials the daemon holds.
    pub async fn proposal_findings(&self, id_or_prefix: &str, key: Option<&AuditKey>) -> Result<Vec<Finding>> {
        let record = self.proposal_record(id_or_prefix).await?;
        let patch = self.verified_patch(&record).await?;
        let policy = self.declared_policy().proposals;
        self.findings_of(&record, &patch, &policy, key).await
    }

    /// Accepts a pending proposal: gates, commit, branch, provenance (a git note and the store),
    /// the optional push, the decision recorded and audited.
    pub async fn accept_proposal(
        &self,
        id_or_prefix: &str,
        options: &AcceptOptions,
        key: &AuditKey,
    ) -> Result<Accepted> {
        let record = self.proposal_record(id_or_prefix).await?;
        let patch = self.verified_patch(&record).await?;
        if record.state != ProposalState::Pending {
            return Err(delivery(DeliveryError::NotPending { id: record.id, state: record.state, verb: "accepted" }));
        }
        let session = self.store.session(&record.session_id).await?;
        let policy = self.declared_policy().proposals;
        let findings = self.findings_of(&record, &patch, &policy, Some(key)).await?;
        let unmet = gates::unmet(&findings, &policy, &options.overrides);
        let target = self.target_of(options).map_err(delivery)?;
        let repo = target.repo;
        let by = branch::operator_identity(&repo).map_err(|e| delivery(e.into()))?;
        let mut decision = Decision {
            at: roundtable_store::now(),
            by,
            findings: findings.clone(),
            overrides: options.overrides.clone(),
            ..Decision::default()
        };
        if !unmet.is_empty() {
            let refused = ProposalDecided {
                kind: EntryKind::ProposalAcceptRefused,
                proposal: &record.id,
                assignment: &record.assignment,
                session: &record.session_id,
                decision: &decision,
                provenance: None,
                unmet: unmet.iter().map(ToString::to_string).collect(),
            };
            self.audit_decision(key, &refused).await.map_err(delivery)?;
            return Err(delivery(DeliveryError::Gates { id: record.id, unmet }));
        }
        // Only the overrides that let a finding through are recorded as such.
        decision.overrides.retain(|o| findings.iter().any(|f| f.gate == o.gate));
        let signer = SigningKey::load_or_create(&options.signing_key).map_err(|e| delivery(e.into()))?;
        let branch_name = options.branch.clone().unwrap_or_else(|| default_branch(&record));
        let author =
            Identity { name: record.adapter.clone(), email: format!("roundtable+{}@localhost", record.adapter) };
        let text = message(&record, session.as_ref(), &decision.overrides);
        let committed = branch::commit(&CommitRequest {
            repo: &repo,
            base: &record.base_commit,
            patch: &patch,
            branch: &branch_name,
            namespace: target.namespace,
            author: &author,
            message: &text,
        })
        .map_err(|e| delivery(e.into()))?;
        // The branch by its name where it lands (in a mirror, on the remote it is pushed to).
        decision.branch = Some(format!("refs/heads/{branch_name}"));
        decision.commit = Some(committed.commit.clone());
        // Where the run stands in the audit chain: its session's and its proposal's entries.
        let span = self.store.chain_span(&[record.session_id.as_str(), record.id.as_str()]).await?;
        let predicate = predicate(&record, session.as_ref(), &decision, span);
        let statement = provenance::statement(&committed.commit, &record.sha256, predicate);
        let envelope = signer.sign(&statement);
        let envelope_json = serde_json::to_string_pretty(&envelope).unwrap_or_default();
        branch::add_note(&repo, NOTES_REF, &committed.commit, &envelope_json).map_err(|e| delivery(e.into()))?;
        if let Some(remote) = &options.push {
            let branch_ref = format!("refs/heads/{branch_name}");
            branch::push(&repo, remote, &committed.reference, &branch_ref).map_err(|e| delivery(e.into()))?;
            branch::push(&repo, remote, NOTES_REF, NOTES_REF).map_err(|e| delivery(e.into()))?;
            decision.pushed_to = Some(roundtable_core::source::git::redact(remote));
        }
        if !self.store.decide_proposal(&record.id, ProposalState::Accepted, &decision, Some(&envelope_json)).await? {
            return Err(delivery(DeliveryError::NotPending {
                id: record.id,
                state: ProposalState::Accepted,
                verb: "accepted",
            }));
        }
        let statement_sha = roundtable_specs::digest::sha256_hex(&serde_json::to_vec(&statement).unwrap_or_default());
        let accepted = ProposalDecided {
            kind: EntryKind::ProposalAccepted,
            proposal: &record.id,
            assignment: &record.assignment,
            session: &record.session_id,
            decision: &decision,
            provenance: Some((signer.public().keyid, statement_sha)),
            unmet: Vec::new(),
        };
        self.audit_decision(key, &accepted).await.map_err(delivery)?;
        Ok(Accepted { proposal: record.id, decision, envelope })
    }

    /// Rejects a pending proposal with `reason`.
    pub async fn reject_proposal(
        &self,
        id_or_prefix: &str,
        reason: &str,
        by: &str,
        key: &AuditKey,
    ) -> Result<Decision> {
        if reason.trim().is_empty() {
            return Err(delivery(DeliveryError::NoReason));
        }
        let record = self.proposal_record(id_or_prefix).await?;
        if record.state != ProposalState::Pending {
            return Err(delivery(DeliveryError::NotPending { id: record.id, state: record.state, verb: "rejected" }));
        }
        let decision = Decision {
            at: roundtable_store::now(),
            by: by.to_owned(),
            reason: reason.trim().to_owned(),
            ..Decision::default()
        };
        if !self.store.decide_proposal(&record.id, ProposalState::Rejected, &decision, None).await? {
            return Err(delivery(DeliveryError::NotPending {
                id: record.id,
                state: ProposalState::Rejected,
                verb: "rejected",
            }));
        }
        let rejected = ProposalDecided {
            kind: EntryKind::ProposalRejected,
            proposal: &record.id,
            assignment: &record.assignment,
            session: &record.session_id,
            decision: &decision,
            provenance: None,
            unmet: Vec::new(),
        };
        self.audit_decision(key, &rejected).await.map_err(delivery)?;
        Ok(decision)
    }

    /// The provenance envelope of an accepted proposal.
    pub async fn proposal_provenance(&self, id_or_prefix: &str) -> Result<Envelope> {
        let record = self.proposal_record(id_or_prefix).await?;
        let text = record.provenance.ok_or_else(|| delivery(DeliveryError::NoProvenance(record.id.clone())))?;
        serde_json::from_str(&text).map_err(|e| delivery(ProvenanceError::BadEnvelope(e.to_string()).into()))
    }
}

fn delivery(error: DeliveryError) -> ServiceError {
    ServiceError::Delivery(Box::new(error))
}
