//! An accept as one claimed step (docs/delivery.md). Nothing is made before the proposal is this
//! accept's, nothing made outlives a failure, and no signed note exists before the decision does:
//!
//! 1. `claim`: `pending → accepting` by compare-and-set in the store. A lost claim returns
//!    `NotPending` having made nothing; a stale claim (its holder gone, or older than
//!    [`STALE_AFTER`]) is rolled back first (`recover`).
//! 2. `judge`: the review gates' findings against the policy and the overrides. A refusal is
//!    audited (`proposal.acceptRefused`) and the proposal is pending again.
//! 3. `make`: the commit and its branch (audited `proposal.branchMade`), and the signed provenance
//!    envelope (in memory only).
//! 4. `push`: the branch (audited `proposal.pushed`).
//! 5. `record`: `accepting → accepted` with the decision and the envelope, audited
//!    `proposal.accepted`.
//! 6. `publish`: the envelope as a git note on the commit, and the notes ref pushed (merged with
//!    the remote's first).
//!
//! A failure in 3–5 runs `undo`: the pushed branch is deleted from the remote (best effort, under
//! a lease), the branch deleted; the proposal is pending again and the rollback audited
//! (`proposal.acceptRolledBack`). So a retry, with the same branch name, works. The note is
//! written only in 6, once the decision is recorded: a signed "accepted" statement is true only
//! then, and a note once pushed to a shared notes ref cannot be safely taken back (others' notes
//! build on it), nor from a notes history anyone fetched. A failure in 6 undoes nothing (the
//! decision stands) and says how to write or push the note by hand (`Unpublished`).
//! A reject takes the same compare-and-set (`pending → rejected`): an accept and a reject can
//! never both win. The store and the audit chain are reached through [`Ledger`], so this crate
//! stays below them.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use roundtable_specs::audit::{AcceptStep, EntryKind, ProposalDecided};
use roundtable_specs::delivery::{Decision, Finding, GateOverride, ProposalGates};
use roundtable_specs::session::ProposalState;
use serde::{Deserialize, Serialize};

use crate::branch::{self, BranchError, CommitRequest, Identity};
use crate::gates::{self, Unmet};
use crate::provenance::{self, Envelope, ProvenanceError, SigningKey};

/// Where provenance notes live on accepted commits.
pub const NOTES_REF: &str = "refs/notes/roundtable";

/// An `accepting` claim older than this is taken for a crashed accept and rolled back by the next
/// accept or reject of its proposal. An accept's git work takes seconds; a push to a slow remote,
/// a minute or two.
pub const STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// What a store error looks like from here.
pub type LedgerError = Box<dyn std::error::Error + Send + Sync>;

/// Why an accept or reject did not happen.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    #[error("proposal {id} is {state}, not pending: only a pending proposal can be {verb}")]
    NotPending { id: String, state: ProposalState, verb: &'static str },
    #[error("proposal {0} no longer exists")]
    Gone(String),
    #[error(
        "the claim on proposal {0} was taken for stale and rolled back while this accept ran: nothing of it is kept; accept again"
    )]
    ClaimLost(String),
    #[error("the review gates refuse proposal {id}:\n{}", .unmet.iter().map(|u| format!("  - {u}")).collect::<Vec<_>>().join("\n"))]
    Gates { id: String, unmet: Vec<Unmet> },
    #[error("a reject needs a reason (--reason TEXT)")]
    NoReason,
    #[error(transparent)]
    Branch(#[from] BranchError),
    #[error(transparent)]
    Provenance(#[from] ProvenanceError),
    #[error("the state store or the audit chain failed while {step}")]
    Ledger {
        step: &'static str,
        #[source]
        source: LedgerError,
    },
    #[error(
        "this project follows a git source: an accept commits in its mirror and must push the branch (--push REMOTE, e.g. the source's URL), or commit in a clone (--repo PATH)"
    )]
    MirrorNeedsPush,
    #[error("proposal {0} has no provenance: it was not accepted")]
    NoProvenance(String),
    #[error(
        "proposal {id} is accepted as {commit} (the decision stands), but its provenance note was not {what}: {source}\n  to finish by hand: {retry}"
    )]
    Unpublished {
        id: String,
        commit: String,
        /// `written` or `pushed`.
        what: &'static str,
        /// The commands that finish it.
        retry: String,
        #[source]
        source: Box<BranchError>,
    },
}

pub type Result<T, E = AcceptError> = std::result::Result<T, E>;

fn failed(step: &'static str) -> impl FnOnce(LedgerError) -> AcceptError {
    move |source| AcceptError::Ledger { step, source }
}

/// What an accept claims a proposal with: who holds the claim, and what it will make, so that a
/// claim left by a crash can be undone by whoever finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// `HOST/PID/NONCE`: unique to one accept; the host and pid tell whether it still runs.
    pub holder: String,
    /// The repository the branch is made in.
    pub repo: PathBuf,
    /// The branch's ref there.
    pub reference: String,
    /// Where it is pushed, credentials redacted (`None`: no push).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The branch's ref on the remote.
    pub remote_ref: String,
}

/// A claim found on a proposal, and whether it is past [`STALE_AFTER`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub claim: Claim,
    pub expired: bool,
}

/// How a compare-and-set on a pending proposal went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimed {
    Won,
    /// It was not pending: its state (`None`: no such proposal).
    Lost(Option<ProposalState>),
}

/// An entry for the audit chain.
#[derive(Debug, Clone)]
pub enum Entry<'a> {
    Decided(ProposalDecided<'a>),
    Step(AcceptStep<'a>),
}

/// What an accept needs of the store and the audit chain.
pub trait Ledger: Sync {
    /// `pending → accepting` for `claim`.
    fn claim(&self, proposal: &str, claim: &Claim) -> impl Future<Output = Result<Claimed, LedgerError>> + Send;
    /// The claim on `proposal` while it is `accepting`.
    fn held(&self, proposal: &str) -> impl Future<Output = Result<Option<Held>, LedgerError>> + Send;
    /// `accepting → pending` if `holder` still holds it; whether it did.
    fn release(&self, proposal: &str, holder: &str) -> impl Future<Output = Result<bool, LedgerError>> + Send;
    /// `accepting → accepted` if `holder` still holds it; whether it did.
    fn finish(
        &self,
        proposal: &str,
        holder: &str,
        decision: &Decision,
        provenance: &str,
    ) -> impl Future<Output = Result<bool, LedgerError>> + Send;
    /// `pending → rejected`.
    fn reject(&self, proposal: &str, decision: &Decision) -> impl Future<Output = Result<Claimed, LedgerError>> + Send;
    /// Where the run stands in the audit chain: the first and last sequence of its entries.
    fn chain_span(&self) -> impl Future<Output = Result<Option<(i64, i64)>, LedgerError>> + Send;
    /// Appends `entry` to the audit chain.
    fn audit(&self, entry: Entry<'_>) -> impl Future<Output = Result<(), LedgerError>> + Send;
}

/// The proposal, as plain values.
#[derive(Debug, Clone, Copy)]
pub struct Proposal<'a> {
    pub id: &'a str,
    pub assignment: &'a str,
    pub session: &'a str,
    pub adapter: &'a str,
    pub base_commit: &'a str,
    pub sha256: &'a str,
    /// The verified patch.
    pub patch: &'a [u8],
}

impl<'a> Proposal<'a> {
    /// The audit record of `decision` on this proposal, of `kind`; an accept adds its
    /// provenance, a refusal what it did not let through.
    fn decided(&self, kind: EntryKind, decision: &'a Decision) -> ProposalDecided<'a> {
        ProposalDecided {
            kind,
            proposal: self.id,
            assignment: self.assignment,
            session: self.session,
            decision,
            provenance: None,
            unmet: Vec::new(),
        }
    }
}

/// A remote to push to.
#[derive(Debug, Clone, Copy)]
pub struct Push<'a> {
    /// A remote's name or URL, as git takes it.
    pub remote: &'a str,
    /// The same with credentials redacted, for what is recorded.
    pub shown: &'a str,
}

/// What one accept is asked to do.
pub struct Request<'a> {
    pub proposal: Proposal<'a>,
    pub repo: &'a Path,
    /// `refs/heads/`, or a mirror's [`branch::MIRROR_NAMESPACE`].
    pub namespace: &'a str,
    /// The new branch, without `refs/heads/`.
    pub branch: &'a str,
    pub push: Option<Push<'a>>,
    /// What the review gates find in the proposal (computed before the claim: reading only).
    pub findings: &'a [Finding],
    pub policy: &'a ProposalGates,
    pub overrides: &'a [GateOverride],
    /// The operator, as git names the committer, and when.
    pub by: &'a str,
    pub at: &'a str,
    /// The commit message without the override trailers (added here, for the overrides used).
    pub message: &'a str,
    /// The provenance predicate's facts about the run; the decision's are added here.
    pub facts: &'a serde_json::Value,
    /// The provenance key's file (created when missing), read once the proposal is claimed.
    pub signing_key: &'a Path,
    /// This accept's claim holder ([`holder`]).
    pub holder: &'a str,
}

/// An accept done.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub decision: Decision,
    pub envelope: Envelope,
}

/// What an accept made so far, for `undo`.
#[derive(Debug, Default)]
struct Made {
    /// The branch's ref and the commit it names.
    branch: Option<(String, String)>,
    /// The remote ref pushed.
    pushed: Option<String>,
}

/// A new claim holder for this process: `HOST/PID/NONCE`.
pub fn holder() -> String {
    let mut nonce = [0u8; 8];
    // A nonce only tells two accepts of one process apart; the time serves if randomness fails.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce).is_err() {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        nonce = (nanos.as_nanos() as u64).to_be_bytes();
    }
    let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}/{}/{nonce}", host_name(), std::process::id())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default()
}

/// Whether a claim is stale: past [`STALE_AFTER`], or held by a process of this host that no
/// longer runs. The one rule by which a claim someone else took may be undone.
pub fn is_stale(held: &Held, this_host: &str, running: impl Fn(u32) -> bool) -> bool {
    if held.expired {
        return true;
    }
    let mut parts = held.claim.holder.splitn(3, '/');
    let (Some(host), Some(pid)) = (parts.next(), parts.next().and_then(|p| p.parse::<u32>().ok())) else {
        // A holder this code did not write: only the age can free it.
        return false;
    };
    host == this_host && !running(pid)
}

fn process_runs(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The commit message: `message`, then one `Roundtable-Override: GATE: REASON` per override used.
pub fn with_overrides(message: &str, overrides: &[GateOverride]) -> String {
    let mut text = message.to_owned();
    for o in overrides {
        let reason: String = o.reason.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        text.push_str(&format!("Roundtable-Override: {}: {reason}\n", o.gate));
    }
    text
}

/// The provenance predicate: the run's facts, and how the accept let the proposal through.
fn predicate(facts: &serde_json::Value, decision: &Decision, span: Option<(i64, i64)>) -> serde_json::Value {
    let mut predicate = facts.clone();
    if let Some(fields) = predicate.as_object_mut() {
        fields.insert(
            "gates".into(),
            serde_json::json!({"findings": decision.findings, "overrides": decision.overrides}),
        );
        fields.insert(
            "auditSequence".into(),
            span.map(|(first, last)| serde_json::json!({"first": first, "last": last})).unwrap_or_default(),
        );
        fields.insert("acceptedBy".into(), decision.by.clone().into());
        fields.insert("acceptedAt".into(), decision.at.clone().into());
    }
    predicate
}

/// Accepts `request.proposal`: claim, gates, branch, note, push, decision; see the module doc.
pub async fn accept(ledger: &impl Ledger, request: &Request<'_>) -> Result<Accepted> {
    let proposal = request.proposal;
    let claim = Claim {
        holder: request.holder.to_owned(),
        repo: request.repo.to_owned(),
        reference: format!("{}{}", request.namespace, request.branch),
        remote: request.push.map(|p| p.shown.to_owned()),
        remote_ref: format!("refs/heads/{}", request.branch),
    };
    claim_pending(ledger, proposal, &claim).await?;
    let mut decision = Decision {
        at: request.at.to_owned(),
        by: request.by.to_owned(),
        findings: request.findings.to_vec(),
        overrides: request.overrides.to_vec(),
        ..Decision::default()
    };
    if let Err(refused) = judge(ledger, request, &mut decision).await {
        ledger.release(proposal.id, request.holder).await.map_err(failed("releasing a refused claim"))?;
        return Err(refused);
    }
    let mut made = Made::default();
    match carry_out(ledger, request, &claim, &mut decision, &mut made).await {
        // Decided is decided: from here a failure is reported, and undoes nothing.
        Ok(recorded) => conclude(ledger, request, decision, recorded).await,
        Err(error) => {
            let undone = undo(request.repo, request.push.map(|p| p.remote), &claim.remote_ref, &made);
            let released = ledger.release(proposal.id, request.holder).await;
            let reason = match &undone {
                Ok(()) => error.to_string(),
                Err(left) => format!("{error}; not undone: {left}"),
            };
            let (reference, commit) =
                made.branch.as_ref().map_or((claim.reference.as_str(), None), |(r, c)| (r.as_str(), Some(c.as_str())));
            let step = AcceptStep {
                kind: EntryKind::ProposalAcceptRolledBack,
                proposal: proposal.id,
                assignment: proposal.assignment,
                holder: request.holder,
                reference,
                commit,
                remote: made.pushed.as_ref().and(claim.remote.as_deref()),
                reason: &reason,
            };
            // The rollback is recorded when the chain takes it; the accept's own error is what
            // the operator needs to hear either way.
            let _ = ledger.audit(Entry::Step(step)).await;
            released.map_err(failed("releasing the claim after a failed accept"))?;
            Err(error)
        }
    }
}

/// Phase 1: the proposal becomes this accept's, or the accept ends having made nothing.
async fn claim_pending(ledger: &impl Ledger, proposal: Proposal<'_>, claim: &Claim) -> Result<()> {
    take_pending(ledger, proposal, "accepted", "claiming the proposal", || ledger.claim(proposal.id, claim)).await
}

/// Takes `proposal` out of `pending` by `attempt` (a compare-and-set, an accept's claim or a
/// reject); a stale accept claim in the way is rolled back once, then tried again. One rule for
/// accept and reject, so neither can win where the other would not.
async fn take_pending<Attempt>(
    ledger: &impl Ledger,
    proposal: Proposal<'_>,
    verb: &'static str,
    step: &'static str,
    // A closure making a future, not an `AsyncFn`: an async closure's future is not known to be
    // `Send` for every lifetime, which the API's handlers need of an accept.
    attempt: impl Fn() -> Attempt,
) -> Result<()>
where
    Attempt: Future<Output = std::result::Result<Claimed, LedgerError>> + Send,
{
    let mut recovered = false;
    loop {
        match attempt().await.map_err(failed(step))? {
            Claimed::Won => return Ok(()),
            Claimed::Lost(Some(ProposalState::Accepting)) if !recovered => {
                recovered = true;
                if !recover(ledger, proposal.id, proposal.assignment).await? {
                    return Err(not_pending(proposal.id, ProposalState::Accepting, verb));
                }
            }
            Claimed::Lost(Some(state)) => return Err(not_pending(proposal.id, state, verb)),
            Claimed::Lost(None) => return Err(AcceptError::Gone(proposal.id.to_owned())),
        }
    }
}

fn not_pending(id: &str, state: ProposalState, verb: &'static str) -> AcceptError {
    AcceptError::NotPending { id: id.to_owned(), state, verb }
}

/// Phase 2: the gates' decision; a refusal is audited.
async fn judge(ledger: &impl Ledger, request: &Request<'_>, decision: &mut Decision) -> Result<()> {
    let unmet = gates::unmet(request.findings, request.policy, request.overrides);
    if !unmet.is_empty() {
        let proposal = request.proposal;
        let refused = ProposalDecided {
            unmet: unmet.iter().map(ToString::to_string).collect(),
            ..proposal.decided(EntryKind::ProposalAcceptRefused, &*decision)
        };
        ledger.audit(Entry::Decided(refused)).await.map_err(failed("auditing the refusal"))?;
        return Err(AcceptError::Gates { id: proposal.id.to_owned(), unmet });
    }
    // Only the overrides that let a finding through are recorded as such.
    decision.overrides.retain(|o| request.findings.iter().any(|f| f.gate == o.gate));
    Ok(())
}

/// What an accept signed, once its decision is recorded.
struct Recorded {
    commit: String,
    envelope: Envelope,
    envelope_json: String,
    keyid: String,
    statement_sha: String,
}

/// Phases 3–5, each recording in `made` what `undo` must take back. `Ok` once the decision is
/// recorded: nothing after that is undone.
async fn carry_out(
    ledger: &impl Ledger,
    request: &Request<'_>,
    claim: &Claim,
    decision: &mut Decision,
    made: &mut Made,
) -> Result<Recorded> {
    let proposal = request.proposal;
    let committed = make_branch(ledger, request, decision, made).await?;
    // The branch by its name where it lands (in a mirror, on the remote it is pushed to).
    decision.branch = Some(claim.remote_ref.clone());
    decision.commit = Some(committed.commit.clone());
    let span = ledger.chain_span().await.map_err(failed("reading the audit chain"))?;
    let statement = provenance::statement(&committed.commit, proposal.sha256, predicate(request.facts, decision, span));
    let signer = SigningKey::load_or_create(request.signing_key)?;
    let envelope = signer.sign(&statement);
    let envelope_json = serde_json::to_string_pretty(&envelope).unwrap_or_default();
    if let Some(push) = request.push {
        push_branch(ledger, request, push, claim, &committed, made).await?;
        decision.pushed_to = Some(push.shown.to_owned());
    }
    let finished = ledger
        .finish(proposal.id, request.holder, decision, &envelope_json)
        .await
        .map_err(failed("recording the decision"))?;
    if !finished {
        // The claim was taken for stale and rolled back meanwhile: this accept did not happen.
        return Err(AcceptError::ClaimLost(proposal.id.to_owned()));
    }
    Ok(Recorded {
        commit: committed.commit,
        envelope,
        envelope_json,
        keyid: signer.public().keyid,
        statement_sha: roundtable_specs::digest::sha256_hex(&serde_json::to_vec(&statement).unwrap_or_default()),
    })
}

/// The audit, then phase 6, after the decision: each is tried whatever the other did, and a
/// failure is reported without undoing anything (the proposal is accepted). The audit comes first
/// so that a crash during a slow notes push still leaves the decision in the chain.
async fn conclude(
    ledger: &impl Ledger,
    request: &Request<'_>,
    decision: Decision,
    recorded: Recorded,
) -> Result<Accepted> {
    let proposal = request.proposal;
    let accepted = ProposalDecided {
        provenance: Some((recorded.keyid, recorded.statement_sha)),
        ..proposal.decided(EntryKind::ProposalAccepted, &decision)
    };
    let audited = ledger.audit(Entry::Decided(accepted)).await.map_err(failed("auditing the accept"));
    let published = publish(request, &recorded.commit, &recorded.envelope_json);
    audited?;
    published?;
    Ok(Accepted { decision, envelope: recorded.envelope })
}

/// Phase 6, once the decision is recorded: the envelope as the commit's note, and the notes ref
/// pushed where the branch went. A failure names the commands that finish it by hand (the
/// envelope is also stored on the proposal: `roundtable proposals provenance ID`).
fn publish(request: &Request<'_>, commit: &str, envelope_json: &str) -> Result<()> {
    let id = request.proposal.id;
    let push_by_hand = |shown: &str| {
        format!(
            "git fetch {shown} {NOTES_REF} && git notes --ref {NOTES_REF} merge -s ours FETCH_HEAD (when the remote has notes), then git push {shown} {NOTES_REF}"
        )
    };
    let unpublished = |what, retry, source| AcceptError::Unpublished {
        id: id.to_owned(),
        commit: commit.to_owned(),
        what,
        retry,
        source: Box::new(source),
    };
    if let Err(error) = branch::add_note(request.repo, NOTES_REF, commit, envelope_json) {
        let mut retry = format!(
            "roundtable proposals provenance {id} > envelope.json && git notes --ref {NOTES_REF} add -f -F envelope.json {commit}"
        );
        if let Some(push) = request.push {
            retry.push_str(&format!("; then {}", push_by_hand(push.shown)));
        }
        return Err(unpublished("written", retry, error));
    }
    if let Some(push) = request.push
        && let Err(error) = branch::push_notes(request.repo, push.remote, NOTES_REF)
    {
        return Err(unpublished("pushed", push_by_hand(push.shown), error));
    }
    Ok(())
}

/// Phase 3: the commit and its branch, audited.
async fn make_branch(
    ledger: &impl Ledger,
    request: &Request<'_>,
    decision: &Decision,
    made: &mut Made,
) -> Result<branch::Committed> {
    let proposal = request.proposal;
    let author =
        Identity { name: proposal.adapter.to_owned(), email: format!("roundtable+{}@localhost", proposal.adapter) };
    let message = with_overrides(request.message, &decision.overrides);
    let committed = branch::commit(&CommitRequest {
        repo: request.repo,
        base: proposal.base_commit,
        patch: proposal.patch,
        branch: request.branch,
        namespace: request.namespace,
        author: &author,
        message: &message,
    })?;
    made.branch = Some((committed.reference.clone(), committed.commit.clone()));
    let step = AcceptStep {
        kind: EntryKind::ProposalBranchMade,
        proposal: proposal.id,
        assignment: proposal.assignment,
        holder: request.holder,
        reference: &committed.reference,
        commit: Some(&committed.commit),
        remote: None,
        reason: "",
    };
    ledger.audit(Entry::Step(step)).await.map_err(failed("auditing the branch"))?;
    Ok(committed)
}

/// Phase 4: the branch to the remote; audited. The notes follow only the decision (`publish`).
async fn push_branch(
    ledger: &impl Ledger,
    request: &Request<'_>,
    push: Push<'_>,
    claim: &Claim,
    committed: &branch::Committed,
    made: &mut Made,
) -> Result<()> {
    branch::push(request.repo, push.remote, &committed.reference, &claim.remote_ref)?;
    made.pushed = Some(claim.remote_ref.clone());
    let step = AcceptStep {
        kind: EntryKind::ProposalPushed,
        proposal: request.proposal.id,
        assignment: request.proposal.assignment,
        holder: request.holder,
        reference: &claim.remote_ref,
        commit: Some(&committed.commit),
        remote: Some(push.shown),
        reason: "",
    };
    ledger.audit(Entry::Step(step)).await.map_err(failed("auditing the push"))?;
    Ok(())
}

/// Takes back what an accept made, newest first; every step is tried, and what could not be
/// undone is said.
fn undo(repo: &Path, remote: Option<&str>, remote_ref: &str, made: &Made) -> Result<(), String> {
    let mut left = Vec::new();
    if let (Some(remote), Some(pushed), Some((_, commit))) = (remote, &made.pushed, &made.branch)
        && let Err(error) = branch::delete_pushed(repo, remote, pushed, commit)
    {
        left.push(format!("the pushed {remote_ref}: {error}"));
    }
    if let Some((reference, commit)) = &made.branch
        && let Err(error) = branch::delete_ref(repo, reference, commit)
    {
        left.push(format!("{reference}: {error}"));
    }
    if left.is_empty() { Ok(()) } else { Err(left.join("; ")) }
}

/// Rolls back a stale claim on `proposal` (see [`is_stale`]): the proposal is released first (so
/// of two finding it, one undoes), then the branch its claim names is deleted if it holds a
/// commit made for this proposal, with, best effort, its pushed branch. A claim never has a note
/// to take back, here or on the remote: notes are written only once the decision is recorded
/// (`publish`), and a decided proposal is no longer `accepting`; any note on that commit (left by
/// an older version) is removed locally all the same.
/// Whether the proposal is no longer held (the claim was stale and is gone, or had ended).
pub async fn recover(ledger: &impl Ledger, proposal: &str, assignment: &str) -> Result<bool> {
    let Some(held) = ledger.held(proposal).await.map_err(failed("reading the claim"))? else {
        // Released meanwhile: the caller's next claim decides.
        return Ok(true);
    };
    if !is_stale(&held, &host_name(), process_runs) {
        return Ok(false);
    }
    let claim = &held.claim;
    if !ledger.release(proposal, &claim.holder).await.map_err(failed("releasing a stale claim"))? {
        return Ok(true);
    }
    let mut reason = format!(
        "the claim of {} was stale ({})",
        claim.holder,
        if held.expired { "older than the bound" } else { "its process is gone" }
    );
    let leftover = branch::resolve(&claim.repo, &claim.reference).ok().flatten();
    let commit = leftover.filter(|commit| branch::made_for(&claim.repo, commit, proposal).unwrap_or(false));
    if let Some(commit) = &commit {
        let mut left = Vec::new();
        if let Some(remote) = &claim.remote {
            // Best effort: the remote may need credentials the record does not keep.
            let _ = branch::delete_pushed(&claim.repo, remote, &claim.remote_ref, commit);
        }
        if let Err(error) = branch::remove_note(&claim.repo, NOTES_REF, commit) {
            left.push(format!("the note: {error}"));
        }
        if let Err(error) = branch::delete_ref(&claim.repo, &claim.reference, commit) {
            left.push(format!("{}: {error}", claim.reference));
        }
        if !left.is_empty() {
            reason.push_str(&format!("; not undone: {}", left.join("; ")));
        }
    }
    let step = AcceptStep {
        kind: EntryKind::ProposalAcceptRolledBack,
        proposal,
        assignment,
        holder: &claim.holder,
        reference: &claim.reference,
        commit: commit.as_deref(),
        remote: claim.remote.as_deref(),
        reason: &reason,
    };
    ledger.audit(Entry::Step(step)).await.map_err(failed("auditing a stale claim's rollback"))?;
    Ok(true)
}

/// Rejects pending `proposal` with `decision` (which carries the reason), by the same
/// compare-and-set an accept's claim takes; a stale accept claim is rolled back first.
pub async fn reject(ledger: &impl Ledger, proposal: Proposal<'_>, decision: &Decision) -> Result<()> {
    if decision.reason.trim().is_empty() {
        return Err(AcceptError::NoReason);
    }
    take_pending(ledger, proposal, "rejected", "rejecting the proposal", || ledger.reject(proposal.id, decision))
        .await?;
    let rejected = proposal.decided(EntryKind::ProposalRejected, decision);
    ledger.audit(Entry::Decided(rejected)).await.map_err(failed("auditing the reject"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::task::{Context, Poll, Waker};

    use roundtable_specs::delivery::ProposalGate;

    use super::*;

    /// The fake ledger's futures are ready at once.
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut context = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(value) = future.as_mut().poll(&mut context) {
                return value;
            }
        }
    }

    /// One proposal's row and the audit chain, in memory, with the store's compare-and-sets.
    #[derive(Default)]
    struct Row {
        state: ProposalState,
        claim: Option<Claim>,
        expired: bool,
        /// Another accept takes this claim for stale just before the decision is recorded.
        stolen: bool,
        audit: Vec<String>,
    }

    #[derive(Default)]
    struct FakeLedger(Mutex<Row>);

    impl FakeLedger {
        fn row(&self) -> std::sync::MutexGuard<'_, Row> {
            self.0.lock().expect("the row")
        }
        fn audited(&self) -> Vec<String> {
            self.row().audit.clone()
        }
    }

    impl Ledger for FakeLedger {
        async fn claim(&self, _: &str, claim: &Claim) -> Result<Claimed, LedgerError> {
            let mut row = self.row();
            if row.state != ProposalState::Pending {
                return Ok(Claimed::Lost(Some(row.state)));
            }
            (row.state, row.claim) = (ProposalState::Accepting, Some(claim.clone()));
            Ok(Claimed::Won)
        }
        async fn held(&self, _: &str) -> Result<Option<Held>, LedgerError> {
            let row = self.row();
            let claim = row.claim.clone().filter(|_| row.state == ProposalState::Accepting);
            Ok(claim.map(|claim| Held { claim, expired: row.expired }))
        }
        async fn release(&self, _: &str, holder: &str) -> Result<bool, LedgerError> {
            let mut row = self.row();
            let held = row.state == ProposalState::Accepting && row.claim.as_ref().is_some_and(|c| c.holder == holder);
            if held {
                (row.state, row.claim) = (ProposalState::Pending, None);
            }
            Ok(held)
        }
        async fn finish(&self, _: &str, holder: &str, _: &Decision, _: &str) -> Result<bool, LedgerError> {
            let mut row = self.row();
            if row.stolen {
                (row.state, row.claim) = (ProposalState::Pending, None);
            }
            let held = row.state == ProposalState::Accepting && row.claim.as_ref().is_some_and(|c| c.holder == holder);
            if held {
                (row.state, row.claim) = (ProposalState::Accepted, None);
            }
            Ok(held)
        }
        async fn reject(&self, _: &str, _: &Decision) -> Result<Claimed, LedgerError> {
            let mut row = self.row();
            if row.state != ProposalState::Pending {
                return Ok(Claimed::Lost(Some(row.state)));
            }
            row.state = ProposalState::Rejected;
            Ok(Claimed::Won)
        }
        async fn chain_span(&self) -> Result<Option<(i64, i64)>, LedgerError> {
            Ok(Some((1, 2)))
        }
        async fn audit(&self, entry: Entry<'_>) -> Result<(), LedgerError> {
            let kind = match entry {
                Entry::Decided(record) => record.kind,
                Entry::Step(record) => record.kind,
            };
            self.row().audit.push(kind.as_str().to_owned());
            Ok(())
        }
    }

    fn git(repo: &Path, args: &[&str]) -> String {
        let out = roundtable_workspace::git::operator_command(repo)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// A repository with one commit, the operator's identity, and a patch adding a line.
    struct Fixture {
        dir: tempfile::TempDir,
        base: String,
        patch: Vec<u8>,
        key: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        git(&repo, &["init", "-q"]);
        git(&repo, &["config", "user.name", "Olive Operator"]);
        git(&repo, &["config", "user.email", "olive@example.test"]);
        std::fs::write(repo.join("README.md"), "# Project\n").expect("write");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "base"]);
        let base = git(&repo, &["rev-parse", "HEAD"]);
        std::fs::write(repo.join("README.md"), "# Project\nhello\n").expect("write");
        let patch = git(&repo, &["diff"]) + "\n";
        git(&repo, &["checkout", "-q", "--", "README.md"]);
        let key = dir.path().join("provenance.key");
        Fixture { dir, base, patch: patch.into_bytes(), key }
    }

    impl Fixture {
        fn repo(&self) -> PathBuf {
            self.dir.path().join("repo")
        }
        fn branches(&self) -> String {
            git(&self.repo(), &["for-each-ref", "--format=%(refname)", "refs/heads/roundtable/"])
        }
        fn notes(&self) -> String {
            let notes = roundtable_workspace::git::operator_command(&self.repo())
                .args(["notes", "--ref", NOTES_REF, "list"])
                .output()
                .expect("git runs");
            String::from_utf8_lossy(&notes.stdout).trim().to_owned()
        }
    }

    const FACTS: serde_json::Value = serde_json::Value::Null;

    fn run(
        ledger: &FakeLedger,
        fixture: &Fixture,
        push: Option<&str>,
        findings: &[Finding],
        holder: &str,
    ) -> Result<Accepted> {
        run_as(ledger, fixture, "p1", push, findings, holder)
    }

    /// [`run`] for proposal `id`, on the branch `roundtable/a/ID`.
    fn run_as(
        ledger: &FakeLedger,
        fixture: &Fixture,
        id: &str,
        push: Option<&str>,
        findings: &[Finding],
        holder: &str,
    ) -> Result<Accepted> {
        let repo = fixture.repo();
        let branch = format!("roundtable/a/{id}");
        let message = format!("T-1: hello\n\nRoundtable-Proposal: {id}\n");
        let proposal = Proposal {
            id,
            assignment: "a",
            session: "s1",
            adapter: "generic",
            base_commit: &fixture.base,
            sha256: "00",
            patch: &fixture.patch,
        };
        let request = Request {
            proposal,
            repo: &repo,
            namespace: "refs/heads/",
            branch: &branch,
            push: push.map(|remote| Push { remote, shown: remote }),
            findings,
            policy: &ProposalGates::default(),
            overrides: &[],
            by: "Olive Operator <olive@example.test>",
            at: "2026-12-07T00:00:00Z",
            message: &message,
            facts: &FACTS,
            signing_key: &fixture.key,
            holder,
        };
        block_on(accept(ledger, &request))
    }

    #[test]
    fn a_lost_claim_makes_nothing() {
        let fixture = fixture();
        for state in [ProposalState::Rejected, ProposalState::Accepted, ProposalState::Accepting] {
            let ledger = FakeLedger::default();
            ledger.row().state = state;
            // A live holder's claim (this very process) is not stale.
            ledger.row().claim = Some(Claim {
                holder: format!("{}/{}/other", host_name(), std::process::id()),
                repo: fixture.repo(),
                reference: "refs/heads/roundtable/a/p1".into(),
                remote: None,
                remote_ref: "refs/heads/roundtable/a/p1".into(),
            });
            let error = run(&ledger, &fixture, None, &[], &holder()).expect_err("lost");
            assert!(matches!(error, AcceptError::NotPending { state: s, .. } if s == state), "{error}");
            assert_eq!((fixture.branches(), fixture.notes()), (String::new(), String::new()));
            assert!(ledger.audited().is_empty(), "{:?}", ledger.audited());
            assert_eq!(ledger.row().state, state);
        }
    }

    #[test]
    fn a_failed_push_undoes_the_branch_and_the_note_and_a_retry_with_the_same_name_works() {
        let fixture = fixture();
        let ledger = FakeLedger::default();
        let nowhere = fixture.dir.path().join("no-such-remote.git");
        let error = run(&ledger, &fixture, nowhere.to_str(), &[], &holder()).expect_err("the push fails");
        assert!(matches!(error, AcceptError::Branch(BranchError::Git { step: "push", .. })), "{error}");
        assert_eq!((fixture.branches(), fixture.notes()), (String::new(), String::new()));
        assert!(branch::resolve(&fixture.repo(), NOTES_REF).expect("git").is_none(), "not even in the notes' history");
        assert_eq!(ledger.row().state, ProposalState::Pending);
        assert_eq!(ledger.audited(), ["proposal.branchMade", "proposal.acceptRolledBack"]);

        let remote = fixture.dir.path().join("remote.git");
        git(fixture.dir.path(), &["init", "-q", "--bare", remote.to_str().expect("utf-8")]);
        let accepted = run(&ledger, &fixture, remote.to_str(), &[], &holder()).expect("the retry");
        assert_eq!(accepted.decision.branch.as_deref(), Some("refs/heads/roundtable/a/p1"));
        assert_eq!(fixture.branches(), "refs/heads/roundtable/a/p1");
        assert_eq!(git(&remote, &["rev-parse", "refs/heads/roundtable/a/p1"]), accepted.decision.commit.expect("c"));
        assert_eq!(ledger.row().state, ProposalState::Accepted);
        assert_eq!(
            ledger.audited()[2..],
            ["proposal.branchMade", "proposal.pushed", "proposal.accepted"].map(String::from)
        );
    }

    #[test]
    fn a_claim_lost_before_the_decision_keeps_nothing_of_the_accept() {
        let fixture = fixture();
        let ledger = FakeLedger::default();
        ledger.row().stolen = true;
        let error = run(&ledger, &fixture, None, &[], &holder()).expect_err("the claim is gone");
        assert!(matches!(error, AcceptError::ClaimLost(_)), "{error}");
        assert_eq!((fixture.branches(), fixture.notes()), (String::new(), String::new()));
        assert_eq!(ledger.audited(), ["proposal.branchMade", "proposal.acceptRolledBack"]);
    }

    impl Fixture {
        /// A bare repository to push to.
        fn remote(&self) -> PathBuf {
            let remote = self.dir.path().join("remote.git");
            git(self.dir.path(), &["init", "-q", "--bare", remote.to_str().expect("utf-8")]);
            remote
        }
    }

    /// The notes under [`NOTES_REF`] in `repo`: `NOTE-BLOB COMMIT` lines ("" when there are none).
    fn notes_in(repo: &Path) -> String {
        match branch::resolve(repo, NOTES_REF).expect("git") {
            Some(_) => git(repo, &["notes", "--ref", NOTES_REF, "list"]),
            None => String::new(),
        }
    }

    #[test]
    fn a_claim_lost_after_the_push_leaves_no_note_on_the_remote_and_the_next_push_works() {
        let fixture = fixture();
        let remote = fixture.remote();
        let ledger = FakeLedger::default();
        ledger.row().stolen = true;
        let error = run(&ledger, &fixture, remote.to_str(), &[], &holder()).expect_err("the claim is gone");
        assert!(matches!(error, AcceptError::ClaimLost(_)), "{error}");
        assert_eq!(ledger.audited(), ["proposal.branchMade", "proposal.pushed", "proposal.acceptRolledBack"]);
        assert_eq!(git(&remote, &["for-each-ref", "--format=%(refname)"]), "", "nothing of it on the remote");
        assert_eq!((fixture.branches(), fixture.notes()), (String::new(), String::new()));
        assert!(branch::resolve(&fixture.repo(), NOTES_REF).expect("git").is_none(), "no signed envelope, anywhere");

        // The next healthy accept --push (of another proposal: another commit, another note) lands,
        // and the remote's only note is its own.
        ledger.row().stolen = false;
        let accepted = run_as(&ledger, &fixture, "p2", remote.to_str(), &[], &holder()).expect("the next accept");
        let commit = accepted.decision.commit.expect("the commit");
        assert_eq!(ledger.row().state, ProposalState::Accepted);
        assert_eq!(notes_in(&remote).split_whitespace().nth(1), Some(commit.as_str()));
        assert_eq!(notes_in(&remote).lines().count(), 1, "{}", notes_in(&remote));
        let pushed: Envelope =
            serde_json::from_str(&git(&remote, &["notes", "--ref", NOTES_REF, "show", &commit])).expect("an envelope");
        assert_eq!(serde_json::to_value(pushed).ok(), serde_json::to_value(accepted.envelope).ok());
    }

    #[test]
    fn notes_another_clone_pushed_are_merged_not_refused_or_overwritten() {
        let fixture = fixture();
        let remote = fixture.remote();
        let first = run_as(&FakeLedger::default(), &fixture, "p1", remote.to_str(), &[], &holder()).expect("p1");
        // Another clone notes the base commit on top of the remote's notes, and pushes.
        let other = fixture.dir.path().join("other");
        git(fixture.dir.path(), &["clone", "-q", remote.to_str().expect("utf-8"), other.to_str().expect("utf-8")]);
        git(&other, &["config", "user.name", "Oscar Other"]);
        git(&other, &["config", "user.email", "oscar@example.test"]);
        git(&other, &["fetch", "-q", "origin", &format!("{NOTES_REF}:{NOTES_REF}")]);
        git(&other, &["fetch", "-q", &fixture.repo().to_string_lossy(), &fixture.base]);
        git(&other, &["notes", "--ref", NOTES_REF, "add", "-m", "theirs", &fixture.base]);
        git(&other, &["push", "-q", "origin", NOTES_REF]);

        let second = run_as(&FakeLedger::default(), &fixture, "p2", remote.to_str(), &[], &holder()).expect("p2");
        let mut noted: Vec<String> =
            notes_in(&remote).lines().filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned)).collect();
        noted.sort();
        let mut expected =
            [first.decision.commit, second.decision.commit, Some(fixture.base.clone())].map(Option::unwrap_or_default);
        expected.sort();
        assert_eq!(noted, expected, "every note kept");
        assert_eq!(git(&remote, &["notes", "--ref", NOTES_REF, "show", &fixture.base]), "theirs");
        assert_eq!(
            branch::resolve(&fixture.repo(), NOTES_REF).expect("git"),
            branch::resolve(&remote, NOTES_REF).expect("git")
        );
    }

    #[test]
    fn a_notes_push_refused_after_the_decision_keeps_the_decision_and_says_how_to_finish() {
        let fixture = fixture();
        let remote = fixture.remote();
        // The remote takes the branch and refuses the notes.
        let hook = remote.join("hooks/pre-receive");
        std::fs::write(
            &hook,
            "#!/bin/sh\nwhile read old new ref; do case \"$ref\" in refs/notes/*) exit 1;; esac; done\n",
        )
        .expect("hook");
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let ledger = FakeLedger::default();
        let error = run(&ledger, &fixture, remote.to_str(), &[], &holder()).expect_err("the notes are refused");
        let AcceptError::Unpublished { what: "pushed", commit, retry, .. } = &error else { panic!("{error}") };
        assert!(error.to_string().contains("is accepted as"), "{error}");
        assert!(retry.contains(&format!("git push {} {NOTES_REF}", remote.display())), "{retry}");
        assert_eq!(ledger.row().state, ProposalState::Accepted, "the decision stands");
        assert_eq!(ledger.audited(), ["proposal.branchMade", "proposal.pushed", "proposal.accepted"]);
        assert_eq!(git(&remote, &["rev-parse", "refs/heads/roundtable/a/p1"]), *commit, "the branch stays");
        assert_eq!(fixture.notes().split_whitespace().nth(1), Some(commit.as_str()), "the note is written");
        assert_eq!(notes_in(&remote), "");

        std::fs::remove_file(&hook).expect("the remote takes notes again");
        branch::push_notes(&fixture.repo(), &remote.to_string_lossy(), NOTES_REF).expect("pushed by hand");
        assert_eq!(notes_in(&remote), fixture.notes());
    }

    #[test]
    fn a_gate_refusal_releases_the_claim_and_is_audited() {
        let fixture = fixture();
        let ledger = FakeLedger::default();
        let secret = Finding {
            gate: ProposalGate::Secrets,
            rule: "aws-access-key".into(),
            path: "README.md".into(),
            line: Some(2),
        };
        let error = run(&ledger, &fixture, None, &[secret], &holder()).expect_err("refused");
        assert!(matches!(error, AcceptError::Gates { .. }), "{error}");
        assert_eq!(ledger.row().state, ProposalState::Pending);
        assert_eq!(ledger.audited(), ["proposal.acceptRefused"]);
        assert_eq!(fixture.branches(), "");
    }

    #[test]
    fn a_claim_whose_process_is_gone_is_rolled_back_with_what_it_made() {
        let fixture = fixture();
        let ledger = FakeLedger::default();
        // A crashed accept: its claim, its branch and its note are left.
        let crashed = format!("{}/{}/crashed", host_name(), u32::MAX);
        let left = Claim {
            holder: crashed.clone(),
            repo: fixture.repo(),
            reference: "refs/heads/roundtable/a/p1".into(),
            remote: None,
            remote_ref: "refs/heads/roundtable/a/p1".into(),
        };
        ledger.row().state = ProposalState::Pending;
        block_on(ledger.claim("p1", &left)).expect("claimed");
        let made = branch::commit(&CommitRequest {
            repo: &fixture.repo(),
            base: &fixture.base,
            patch: &fixture.patch,
            branch: "roundtable/a/p1",
            namespace: "refs/heads/",
            author: &Identity { name: "generic".into(), email: "g@localhost".into() },
            message: "T-1\n\nRoundtable-Proposal: p1\n",
        })
        .expect("the crashed accept's commit");
        branch::add_note(&fixture.repo(), NOTES_REF, &made.commit, "{}").expect("its note");

        let accepted = run(&ledger, &fixture, None, &[], &holder()).expect("recovered, then accepted");
        assert_ne!(accepted.decision.commit.as_deref(), Some(made.commit.as_str()));
        assert_eq!(fixture.notes().lines().count(), 1, "only the new commit's note: {}", fixture.notes());
        assert_eq!(
            ledger.audited(),
            ["proposal.acceptRolledBack", "proposal.branchMade", "proposal.accepted"].map(String::from)
        );
    }

    #[test]
    fn a_reject_and_an_accept_never_both_win() {
        let fixture = fixture();
        let ledger = FakeLedger::default();
        let decision = Decision { reason: "no".into(), ..Decision::default() };
        let proposal = Proposal {
            id: "p1",
            assignment: "a",
            session: "s1",
            adapter: "generic",
            base_commit: &fixture.base,
            sha256: "00",
            patch: &[],
        };
        block_on(reject(&ledger, proposal, &decision)).expect("rejected");
        let error = run(&ledger, &fixture, None, &[], &holder()).expect_err("not pending");
        assert!(matches!(error, AcceptError::NotPending { state: ProposalState::Rejected, .. }), "{error}");
        assert_eq!(fixture.branches(), "");
        let blank = Decision { reason: " ".into(), ..Decision::default() };
        assert!(matches!(block_on(reject(&ledger, proposal, &blank)), Err(AcceptError::NoReason)));
    }

    #[test]
    fn staleness_is_age_or_a_gone_process_of_this_host() {
        let held = |holder: &str, expired| Held {
            claim: Claim {
                holder: holder.into(),
                repo: PathBuf::new(),
                reference: String::new(),
                remote: None,
                remote_ref: String::new(),
            },
            expired,
        };
        let running = |pid| pid == 7;
        let cases = [
            (held("here/7/n", false), false, "a live holder here"),
            (held("here/8/n", false), true, "a gone holder here"),
            (held("there/8/n", false), false, "another host's holder: only age frees it"),
            (held("there/8/n", true), true, "past the bound"),
            (held("here/7/n", true), true, "past the bound, however alive"),
            (held("garbage", false), false, "a holder this code did not write"),
        ];
        for (held, stale, why) in cases {
            assert_eq!(is_stale(&held, "here", running), stale, "{why}");
        }
    }

    #[test]
    fn override_trailers_follow_the_message_without_control_characters() {
        let overrides = [GateOverride { gate: ProposalGate::Secrets, reason: "test\nkeys".into() }];
        assert_eq!(with_overrides("T: x\n\n", &overrides), "T: x\n\nRoundtable-Override: secrets: test keys\n");
    }
}
