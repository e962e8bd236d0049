//! `proposals accept|reject|provenance` (docs/delivery.md): the service's side of an operator's
//! explicit act. It gathers what an accept needs (the verified patch, the gates' findings, the
//! commit message, the run's facts for provenance, where to commit) and hands it to
//! `roundtable_delivery::accept`, which claims the proposal, makes the branch, signs and pushes,
//! and undoes all of it on a failure; the store and the audit chain reach it through
//! [`StoreLedger`]. The CLI, the API and the admin MCP tools call these functions.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use roundtable_delivery::accept::{self, Claim, Claimed, Entry, Held, Ledger, LedgerError, Push};
use roundtable_delivery::added;
use roundtable_delivery::branch;
use roundtable_delivery::changes;
use roundtable_delivery::gates;
use roundtable_delivery::held::HeldCredentials;
use roundtable_delivery::provenance::{Envelope, ProvenanceError};
use roundtable_specs::brief::Brief;
use roundtable_specs::delivery::{Decision, Finding, GateAction, GateOverride, ProposalGates};
use roundtable_store::audit::{AuditKey, AuditedEntry};
use roundtable_store::{ClaimOutcome, ProposalRecord, SessionRecord, Store};

use crate::{Result, Service, ServiceError};

/// Why an accept or reject did not happen.
pub use roundtable_delivery::accept::AcceptError as DeliveryError;
/// Where provenance notes live on accepted commits.
pub use roundtable_delivery::accept::NOTES_REF;

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
    let folder = roundtable_execution::ExecutionFolder::at(Path::new(session?.exec_dir.as_deref()?));
    serde_json::from_slice(&std::fs::read(folder.brief()).ok()?).ok()
}

/// The image a run used: its ID where the admission gate saw one, else the reference it named.
fn image_of(session: Option<&SessionRecord>) -> Option<String> {
    let session = session?;
    session.detail.admitted_under.as_ref().map(|a| a.image_id.clone()).or_else(|| session.image.clone())
}

/// The commit message: the task as its subject, then the trailers that tie the commit to its run
/// (the accept adds one per override it uses).
fn message(proposal: &ProposalRecord, session: Option<&SessionRecord>) -> String {
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
    format!(
        "{subject}\n\nRoundtable-Proposal: {}\nRoundtable-Session: {}\nRoundtable-Adapter: {}\nRoundtable-Image: {}\nRoundtable-Receipt: {receipt}\n",
        proposal.id,
        proposal.session_id,
        proposal.adapter,
        image_of(session).unwrap_or_else(|| "none".into()),
    )
}

/// The provenance predicate's facts about the run: what the commit was made from (the accept adds
/// how it was let through).
fn facts(proposal: &ProposalRecord, session: Option<&SessionRecord>) -> serde_json::Value {
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
    })
}

/// The proposal as the accept sees it.
fn plain<'a>(record: &'a ProposalRecord, patch: &'a [u8]) -> accept::Proposal<'a> {
    accept::Proposal {
        id: &record.id,
        assignment: &record.assignment,
        session: &record.session_id,
        adapter: &record.adapter,
        base_commit: &record.base_commit,
        sha256: &record.sha256,
        patch,
    }
}

// === the store and the audit chain, as an accept reaches them ===

/// The store and the audit chain for one decision on one proposal.
struct StoreLedger<'a> {
    store: &'a Store,
    key: &'a AuditKey,
    /// The audit subject: the proposal's Assignment.
    subject: String,
    /// The run's session and proposal: whose entries the provenance's audit span covers.
    session: &'a str,
    proposal: &'a str,
}

impl<'a> StoreLedger<'a> {
    fn of(store: &'a Store, key: &'a AuditKey, record: &'a ProposalRecord) -> Self {
        Self {
            store,
            key,
            subject: format!("Assignment/{}", record.assignment),
            session: &record.session_id,
            proposal: &record.id,
        }
    }
}

fn boxed(error: impl std::error::Error + Send + Sync + 'static) -> LedgerError {
    Box::new(error)
}

fn claimed(outcome: ClaimOutcome) -> Claimed {
    match outcome {
        ClaimOutcome::Won => Claimed::Won,
        ClaimOutcome::Lost(state) => Claimed::Lost(state),
    }
}

impl Ledger for StoreLedger<'_> {
    async fn claim(&self, proposal: &str, claim: &Claim) -> Result<Claimed, LedgerError> {
        let detail = serde_json::to_string(claim).map_err(boxed)?;
        Ok(claimed(self.store.claim_accept(proposal, &claim.holder, &detail).await.map_err(boxed)?))
    }

    async fn held(&self, proposal: &str) -> Result<Option<Held>, LedgerError> {
        let Some(stored) = self.store.accept_claim(proposal).await.map_err(boxed)? else { return Ok(None) };
        // A claim whose detail cannot be read still names its holder: it can be released, and
        // nothing of it undone in git.
        let claim = serde_json::from_str(&stored.detail).unwrap_or_else(|_| Claim {
            holder: stored.holder.clone(),
            repo: PathBuf::new(),
            reference: String::new(),
            remote: None,
            remote_ref: String::new(),
        });
        let expired = stored.at < roundtable_store::cutoff(accept::STALE_AFTER);
        Ok(Some(Held { claim: Claim { holder: stored.holder, ..claim }, expired }))
    }

    async fn release(&self, proposal: &str, holder: &str) -> Result<bool, LedgerError> {
        self.store.release_accept(proposal, holder).await.map_err(boxed)
    }

    async fn finish(
        &self,
        proposal: &str,
        holder: &str,
        decision: &Decision,
        provenance: &str,
    ) -> Result<bool, LedgerError> {
        self.store.finish_accept(proposal, holder, decision, provenance).await.map_err(boxed)
    }

    async fn reject(&self, proposal: &str, decision: &Decision) -> Result<Claimed, LedgerError> {
        Ok(claimed(self.store.reject_pending(proposal, decision).await.map_err(boxed)?))
    }

    async fn chain_span(&self) -> Result<Option<(i64, i64)>, LedgerError> {
        self.store.chain_span(&[self.session, self.proposal]).await.map_err(boxed)
    }

    async fn audit(&self, entry: Entry<'_>) -> Result<(), LedgerError> {
        let entry = match &entry {
            Entry::Decided(record) => AuditedEntry::of(&self.subject, record),
            Entry::Step(record) => AuditedEntry::of(&self.subject, record),
        }
        .map_err(boxed)?;
        self.store.append_audited(self.key, &entry).await.map_err(boxed)?;
        Ok(())
    }
}

impl Service {
    /// Where an accept commits: the repository given, else the project's; for a git source, its
    /// mirror, which only a push leaves (a branch kept in the state directory helps nobody).
    fn target_of(&self, options: &AcceptOptions) -> Result<Target, DeliveryError> {
        if let Some(repo) = &options.repo {
            return Ok(Target { repo: repo.clone(), namespace: "refs/heads/" });
        }
        match &self.project.repos {
            roundtable_source::Repos::Mirror(mirror) => {
                if options.push.is_none() {
                    return Err(DeliveryError::MirrorNeedsPush);
                }
                Ok(Target { repo: mirror.clone(), namespace: branch::MIRROR_NAMESPACE })
            }
            _ => Ok(Target { repo: self.project.root.clone(), namespace: "refs/heads/" }),
        }
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

    /// The repository whose objects hold a proposal's base when no accept names one: the git
    /// source's mirror, else the project's own.
    fn review_repo(&self) -> PathBuf {
        match &self.project.repos {
            roundtable_source::Repos::Mirror(mirror) => mirror.clone(),
            _ => self.project.root.clone(),
        }
    }

    /// What the gates find in `patch` of `record` under `policy`, read from the objects of the
    /// tree it makes on its base in `repo` (never from the patch text, which an agent can dress),
    /// comparing what it adds with the held credentials' fingerprints when `key` can hash them.
    async fn findings_of(
        &self,
        repo: &Path,
        record: &ProposalRecord,
        patch: &[u8],
        policy: &ProposalGates,
        key: Option<&AuditKey>,
    ) -> Result<Vec<Finding>> {
        let (repo, base, owned_patch) = (repo.to_owned(), record.base_commit.clone(), patch.to_vec());
        // git runs here: off the runtime's workers.
        let added = tokio::task::spawn_blocking(move || added::from_objects(&repo, &base, &owned_patch))
            .await?
            .map_err(|error| delivery(DeliveryError::Branch(error.into())))?;
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
        let findings = self.findings_of(&self.review_repo(), &record, &patch, &policy, key).await?;
        let asked = gates::asked(&findings, &policy);
        let findings = findings.into_iter().map(|f| (policy.action(f.gate), f)).collect();
        Ok(Review { findings, asked })
    }

    /// A proposal's diff as git shows it from the objects, for reading rather than applying: its
    /// base against the tree the verified patch makes there (the tree the gates judge), renames
    /// found and, when `ignore_whitespace`, changes of whitespace alone left out.
    pub async fn proposal_diff(&self, id_or_prefix: &str, ignore_whitespace: bool) -> Result<Vec<u8>> {
        let record = self.proposal_record(id_or_prefix).await?;
        let patch = self.verified_patch(&record).await?;
        let (repo, base) = (self.review_repo(), record.base_commit.clone());
        // git runs here: off the runtime's workers.
        let shown = tokio::task::spawn_blocking(move || {
            let tree = changes::proposed_tree(&repo, &base, &patch)?;
            changes::shown_diff(&repo, &base, &tree, ignore_whitespace)
        })
        .await?;
        shown.map_err(|error| delivery(DeliveryError::Branch(error.into())))
    }

    /// What the review gates find in a proposal now, under the declared policy; `key` (the audit
    /// key) lets them compare its added lines with the credentials the daemon holds.
    pub async fn proposal_findings(&self, id_or_prefix: &str, key: Option<&AuditKey>) -> Result<Vec<Finding>> {
        let record = self.proposal_record(id_or_prefix).await?;
        let patch = self.verified_patch(&record).await?;
        let policy = self.declared_policy().proposals;
        self.findings_of(&self.review_repo(), &record, &patch, &policy, key).await
    }

    /// Accepts a pending proposal as one claimed step (`roundtable_delivery::accept`): the claim,
    /// the gates, the commit and branch, provenance (a git note and the store), the optional push,
    /// the decision recorded and audited; any failure after the claim undoes what was made.
    pub async fn accept_proposal(
        &self,
        id_or_prefix: &str,
        options: &AcceptOptions,
        key: &AuditKey,
    ) -> Result<Accepted> {
        let record = self.proposal_record(id_or_prefix).await?;
        let patch = self.verified_patch(&record).await?;
        self.check_sealed(&record, key).await?;
        let target = self.target_of(options).map_err(delivery)?;
        let session = self.store.session(&record.session_id).await?;
        let policy = self.declared_policy().proposals;
        // Reading only: the decision on these findings is made under the claim.
        let findings = self.findings_of(&target.repo, &record, &patch, &policy, Some(key)).await?;
        let by = branch::operator_identity(&target.repo).map_err(|e| delivery(e.into()))?;
        let branch_name = options.branch.clone().unwrap_or_else(|| default_branch(&record));
        let shown = options.push.as_deref().map(roundtable_source::git::redact);
        let push = options.push.as_deref().zip(shown.as_deref()).map(|(remote, shown)| Push { remote, shown });
        let (message, facts, holder) =
            (message(&record, session.as_ref()), facts(&record, session.as_ref()), accept::holder());
        let request = accept::Request {
            proposal: plain(&record, &patch),
            repo: &target.repo,
            namespace: target.namespace,
            branch: &branch_name,
            push,
            findings: &findings,
            policy: &policy,
            overrides: &options.overrides,
            by: &by,
            at: &roundtable_store::now(),
            message: &message,
            facts: &facts,
            signing_key: &options.signing_key,
            holder: &holder,
        };
        let ledger = StoreLedger::of(&self.store, key, &record);
        let accepted = accept::accept(&ledger, &request).await.map_err(delivery)?;
        Ok(Accepted { proposal: record.id.clone(), decision: accepted.decision, envelope: accepted.envelope })
    }

    /// Rejects a pending proposal with `reason`, by the compare-and-set an accept's claim takes.
    pub async fn reject_proposal(
        &self,
        id_or_prefix: &str,
        reason: &str,
        by: &str,
        key: &AuditKey,
    ) -> Result<Rejected> {
        if reason.trim().is_empty() {
            return Err(delivery(DeliveryError::NoReason));
        }
        let record = self.proposal_record(id_or_prefix).await?;
        let decision = Decision {
            at: roundtable_store::now(),
            by: by.to_owned(),
            reason: reason.trim().to_owned(),
            ..Decision::default()
        };
        let ledger = StoreLedger::of(&self.store, key, &record);
        accept::reject(&ledger, plain(&record, &[]), &decision).await.map_err(delivery)?;
        Ok(Rejected { proposal: record.id, decision })
    }

    /// Rolls back every stale accept claim (`roundtable_delivery::accept::is_stale`: older than
    /// the bound, or its process gone), with what it made; the proposals no longer held. For the
    /// daemon's start: a claim a crash left is not kept until someone accepts that proposal again.
    pub async fn roll_back_stale_accepts(&self, key: &AuditKey) -> Result<Vec<String>> {
        let mut released = Vec::new();
        for (id, _) in self.store.accept_claims().await? {
            let Some(record) = self.store.proposal_by_id(&id).await? else { continue };
            let ledger = StoreLedger::of(&self.store, key, &record);
            if accept::recover(&ledger, &record.id, &record.assignment).await.map_err(delivery)? {
                released.push(id);
            }
        }
        Ok(released)
    }

    /// The provenance envelope of an accepted proposal.
    pub async fn proposal_provenance(&self, id_or_prefix: &str) -> Result<Envelope> {
        let record = self.proposal_record(id_or_prefix).await?;
        let text = record.provenance.ok_or_else(|| delivery(DeliveryError::NoProvenance(record.id.clone())))?;
        serde_json::from_str(&text).map_err(|e| delivery(ProvenanceError::BadEnvelope(e.to_string()).into()))
    }
}

/// A rejection: the proposal's whole ID (the caller may have named it by a prefix) and the
/// decision recorded.
#[derive(Debug)]
pub struct Rejected {
    pub proposal: String,
    pub decision: Decision,
}

fn delivery(error: DeliveryError) -> ServiceError {
    ServiceError::Delivery(Box::new(error))
}
