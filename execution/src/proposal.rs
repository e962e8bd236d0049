//! Proposal building: the agent's workspace settled against what it was given, the patch made
//! and verified against the base commit, every flag and canary found, and the pending proposal
//! recorded.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use roundtable_reconcilers::ExecutionRequest;
use roundtable_session_runtime::RunOutcome;
use roundtable_specs::audit::{CanaryFound, CredentialCanary};
use roundtable_specs::secrets::KnownSecrets;
use roundtable_specs::session::{Extracted, ProposalFlag, ProposalFlagKind, ProposalState, SessionCause, SessionPhase};
use roundtable_store::{ProposalRecord, SessionRecord};
use roundtable_telemetry::error_chain;
use roundtable_workspace::patch;
use roundtable_workspace::provision::{self, ProvisionError};
use roundtable_workspace::settle::{self, Settled};

use crate::folder::ExecutionFolder;
use crate::manager::{Inner, millis, now};
use crate::outcome::{Ending, proposal_flags};
use crate::provision::Source;

impl Inner {
    /// The patch against the provisioned source, verified against the base commit, stored as a
    /// pending proposal.
    pub(crate) async fn propose(
        &self,
        session: &mut SessionRecord,
        request: &ExecutionRequest,
        source: &Source,
        folder: &ExecutionFolder,
        known: &KnownSecrets,
        printed: Vec<Canary>,
    ) -> Result<(), Ending> {
        let (base, export, scratch) = (folder.source(), folder.export(), folder.scratch());
        let scanned = known.clone();
        let (repo, commit) = (source.repo.clone(), source.provisioned.commit.clone());
        let given: BTreeSet<String> = source.provisioned.files.iter().map(|f| f.path.clone()).collect();
        let extracted = session.detail.export.clone().unwrap_or_default();
        let started = Instant::now();
        let patched = tokio::task::spawn_blocking(move || {
            let at_base = provision::commit_paths(&repo, &commit).map_err(ProposeError::Base)?;
            let settled = settle::settle(&base, &export, &given, &at_base, &extracted.rejected)?;
            let patch = patch::diff(&scratch, &base, &export)?;
            if !patch.is_empty() {
                patch::verify(&repo, &commit, &patch, &export, &scratch.join("check"))?;
            }
            let canaries = credential_canaries(&scanned, &patch.paths, &base, &export);
            Ok::<_, ProposeError>((settled, patch, canaries))
        })
        .await;
        let (settled, patch, mut canaries) = match patched {
            Ok(Ok(done)) => done,
            Ok(Err(error)) => {
                // git quotes the paths it failed on, and a path may hold a value.
                let message = known.mask_text(&error_chain(&error));
                return Err(Ending::failed(SessionCause::PatchFailed, message));
            }
            Err(error) => {
                return Err(Ending::failed(SessionCause::PatchFailed, error_chain(&error)));
            }
        };
        canaries.extend(printed);
        session.detail.not_given = settled.not_given.clone();
        session.detail.timings_ms.insert("patch".into(), millis(started));
        session.phase = SessionPhase::Succeeded;
        session.finished_at = Some(now());
        let extracted = session.detail.export.clone().unwrap_or_default();
        let refused = extracted.rejected.len() + settled.not_given.len();
        if patch.is_empty() {
            session.message = if refused == 0 {
                "the agent changed nothing; no proposal".into()
            } else {
                format!(
                    "no proposal: nothing the agent changed could be carried back ({}; `roundtable sessions show {}` lists them)",
                    if refused == 1 { "1 entry refused".to_owned() } else { format!("{refused} entries refused") },
                    session.id
                )
            };
            return Ok(());
        }
        let proposal_id = format!("{}-{}", &patch.sha256[..12], session.id);
        let patch_path = self.config.project.proposals_dir().join(format!("{proposal_id}.patch"));
        if let Err(error) = write_private(&patch_path, &patch.text) {
            return Err(Ending::failed(SessionCause::PatchFailed, format!("cannot store the patch: {error}")));
        }
        let proposal = ProposalRecord {
            id: proposal_id.clone(),
            session_id: session.id.clone(),
            assignment: request.assignment.clone(),
            assignment_uid: Some(request.assignment_uid.clone()),
            execution_generation: request.execution_generation,
            base_commit: source.provisioned.commit.clone(),
            adapter: request.adapter.name.clone(),
            patch_path: patch_path.display().to_string(),
            sha256: patch.sha256.clone(),
            files_changed: i64::try_from(patch.files_changed).unwrap_or(i64::MAX),
            insertions: i64::try_from(patch.insertions).unwrap_or(i64::MAX),
            deletions: i64::try_from(patch.deletions).unwrap_or(i64::MAX),
            flags: {
                let mut flags = all_flags(&patch.paths, &request.spec.readable_paths, &settled, &extracted);
                flags.extend(self.claimed_elsewhere(&session.id, &patch.paths).await);
                flags.extend(canaries.iter().map(Canary::flag));
                flags
            },
            rejected: extracted.rejected.iter().chain(&settled.not_given).cloned().collect(),
            state: ProposalState::Pending,
            created_at: now(),
            reused_from: None,
            decision: None,
            provenance: None,
        };
        match self.record_proposal(session, &proposal, &patch.text).await {
            Ok(true) => {
                session.message = format!("pending proposal {proposal_id}");
                if !canaries.is_empty() {
                    let paths: Vec<&str> = canaries.iter().map(|c| c.path.as_str()).collect();
                    session
                        .message
                        .push_str(&format!(" (credentialCanary: {}; review before applying)", paths.join(", ")));
                }
                self.report_canaries(&proposal, &canaries).await;
            }
            Ok(false) => {
                session.message = "a proposal for this execution generation already exists; this one was dropped".into()
            }
            Err(ending) => return Err(ending),
        }
        Ok(())
    }

    /// Each added credential as a Warning event on the Assignment and an audited entry: a
    /// reviewer must not apply the proposal as it is.
    async fn report_canaries(&self, proposal: &ProposalRecord, canaries: &[Canary]) {
        if canaries.is_empty() {
            return;
        }
        let key = roundtable_specs::ObjectKey::new(roundtable_specs::Kind::Assignment, &proposal.assignment);
        for canary in canaries {
            let message = format!(
                "proposal {} adds the value of {} to {}: applying it would commit a live credential (the logs show it as {})",
                proposal.id,
                canary.names.join(", "),
                canary.path,
                canary
                    .names
                    .iter()
                    .map(|name| roundtable_specs::secrets::known::marker(name))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            let event = roundtable_store::NewEvent {
                object: &key,
                severity: roundtable_store::Severity::Warning,
                reason: roundtable_specs::events::EventReason::CredentialCanary.into(),
                message: &message,
                record: None,
            };
            if let Err(error) = self.store.append_event(&event).await {
                tracing::error!(proposal = %proposal.id, %error, "cannot record the credential canary's event");
            }
            tracing::warn!(proposal = %proposal.id, path = %canary.path, variables = ?canary.names, "the proposal adds an injected credential");
        }
        let record = CredentialCanary {
            assignment: &proposal.assignment,
            session: &proposal.session_id,
            found: canaries.iter().map(|c| CanaryFound { path: &c.path, variables: &c.names }).collect(),
        };
        self.audit(&proposal.id, &record).await;
    }

    /// A flag for each changed path another live session has claimed. A store that cannot be
    /// read flags nothing, but says so.
    async fn claimed_elsewhere(&self, session: &str, paths: &[String]) -> Vec<ProposalFlag> {
        let claims = match self.store.live_claims(&now()).await {
            Ok(claims) => claims,
            Err(error) => {
                tracing::warn!(session, %error, "cannot read claims; the proposal is not checked against them");
                return Vec::new();
            }
        };
        paths
            .iter()
            .filter(|path| {
                claims.iter().any(|c| c.session_id != session && roundtable_store::paths_overlap(&c.path, path))
            })
            .map(|path| ProposalFlag { kind: ProposalFlagKind::ClaimedElsewhere, path: path.clone() })
            .collect()
    }
}

/// A changed file that adds the value of one or more injected credentials.
pub(crate) struct Canary {
    /// Masked itself: an agent may put a value into a file's name.
    path: String,
    names: Vec<String>,
}

impl Canary {
    fn flag(&self) -> ProposalFlag {
        ProposalFlag { kind: ProposalFlagKind::CredentialCanary, path: self.path.clone() }
    }
}

/// The agent's streams that show a credential or placeholder it was given, as canaries named
/// `<stdout>` and `<stderr>`: printing one is how an agent carries it out through the logs.
pub(crate) fn printed_canaries(known: &KnownSecrets, outcome: &RunOutcome) -> Vec<Canary> {
    [("<stdout>", &outcome.stdout), ("<stderr>", &outcome.stderr)]
        .into_iter()
        .filter_map(|(stream, captured)| {
            let names = known.added(b"", &captured.bytes);
            (!names.is_empty())
                .then(|| Canary { path: stream.to_owned(), names: names.into_iter().map(str::to_owned).collect() })
        })
        .collect()
}

/// The changed files that hold more copies of an injected value than at the base: what applying
/// the proposal would add. The files are compared rather than the patch's `+` lines, so a value
/// in a binary file (base85 in the patch) is found too. A file missing on one side is empty there.
fn credential_canaries(known: &KnownSecrets, paths: &[String], base: &Path, export: &Path) -> Vec<Canary> {
    if known.is_empty() {
        return Vec::new();
    }
    let read = |root: &Path, path: &str| -> Vec<u8> {
        let file = root.join(path);
        match std::fs::symlink_metadata(&file) {
            Ok(meta) if meta.is_file() => std::fs::read(&file).unwrap_or_default(),
            _ => Vec::new(),
        }
    };
    paths
        .iter()
        .filter_map(|path| {
            let added = known.added(&read(base, path), &read(export, path));
            (!added.is_empty())
                .then(|| Canary { path: known.mask_text(path), names: added.into_iter().map(str::to_owned).collect() })
        })
        .collect()
}

/// Why the agent's workspace could not become a proposal.
#[derive(Debug, thiserror::Error)]
enum ProposeError {
    #[error("cannot list the base commit")]
    Base(#[source] ProvisionError),
    #[error(transparent)]
    Settle(#[from] settle::SettleError),
    #[error(transparent)]
    Patch(#[from] patch::PatchError),
}

/// Every flag of a proposal: scope, protected paths and package scripts of what it touches, and
/// each refusal that shaped it (a rejected entry that left a given file unchanged, a write to a
/// file the agent was not given, a hard link).
fn all_flags(paths: &[String], readable: &[String], settled: &Settled, extracted: &Extracted) -> Vec<ProposalFlag> {
    let mut flags = proposal_flags(paths, readable);
    let flag = |kind, path: &String| ProposalFlag { kind, path: path.clone() };
    flags.extend(settled.kept_unchanged.iter().map(|r| flag(ProposalFlagKind::RejectedEntry, &r.path)));
    flags.extend(settled.not_given.iter().map(|r| flag(ProposalFlagKind::NotGiven, &r.path)));
    flags.extend(extracted.hard_links.iter().map(|path| flag(ProposalFlagKind::HardLink, path)));
    flags
}

/// Writes a patch only its owner can read, never over an existing file.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(bytes)
}
