//! Retention: finished sessions (with their execution folders and logs) and proposals (with their
//! patches) past the retention, and labelled engine resources no spec owns. `--dry-run` and
//! `status` list the same things without removing them.

use std::collections::BTreeSet;
use std::time::Duration;

use roundtable_session_runtime::labels::{ASSIGNMENT, CONTROLLER_RUN, PURPOSE, Purpose, REPOSITORY, SESSION};
use roundtable_session_runtime::{OwnedResource, SessionRuntime};
use roundtable_store::{SessionRecord, Store};
use roundtable_workspace::runs::Liveness;

use crate::backend::BackendError;

/// What retention removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrunableKind {
    Session,
    Proposal,
    /// A container or volume the runtime owns.
    Resource(OwnedResource),
}

impl PrunableKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            PrunableKind::Session => "Session",
            PrunableKind::Proposal => "Proposal",
            PrunableKind::Resource(resource) => resource.kind.as_str(),
        }
    }
}

/// One thing retention removes (or would), or leaves alone and says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prunable {
    pub kind: PrunableKind,
    pub name: String,
    pub why: String,
    /// Why it is left alone although nothing this store knows needs it: the controller run that
    /// made it is alive (or not provably dead). `remove` never touches these.
    pub skipped: Option<String>,
}

/// Who may be using a labelled resource: the controller run that labelled it.
pub struct Runs<'a> {
    /// This process's own run, whose resources the store accounts for.
    pub own: Option<&'a str>,
    pub liveness: &'a (dyn Fn(&str) -> Liveness + Send + Sync),
}

/// Why a resource of another controller run must be left alone, if it must: that run is alive,
/// or its container still runs and the run is not provably dead (a daemon using another state
/// directory on the same project is invisible to this store).
pub fn left_alone(resource: &OwnedResource, runs: &Runs<'_>) -> Option<String> {
    let run = resource.label(CONTROLLER_RUN)?;
    if Some(run) == runs.own {
        return None;
    }
    match (runs.liveness)(run) {
        Liveness::Alive => Some(format!("left alone: controller run {run} is alive")),
        Liveness::Unknown if resource.running => {
            Some(format!("left alone: it is running under controller run {run}, which is not provably dead"))
        }
        Liveness::Dead | Liveness::Unknown => None,
    }
}

/// Why a labelled container or volume is an orphan, or `None` while it may still be needed: its
/// Assignment is no longer declared, or the session it was made for has ended (its cleanup did not
/// finish, say the engine was away) or is unknown to the state store.
pub fn orphan_reason(
    assignment: Option<&str>,
    declared: bool,
    session_id: Option<&str>,
    session: Option<&SessionRecord>,
) -> Option<String> {
    match (assignment, declared, session_id, session) {
        (None, _, _, _) => Some("labelled for this project without an Assignment".into()),
        (Some(name), false, _, _) => Some(format!("labelled for Assignment/{name}, which no spec declares")),
        (Some(_), true, Some(id), Some(record)) if record.phase.is_finished() => {
            Some(format!("left by session {id}, which ended {}", record.phase))
        }
        (Some(_), true, Some(id), None) => Some(format!("left by session {id}, which the state store does not know")),
        _ => None,
    }
}

/// Why a persistent home labelled for this project's path is not this repository's, if it is
/// not: it carries another repository's id (one that was checked out at this path before), or
/// none (made before homes were keyed by the repository). Such a home is never mounted here, and
/// `prune` reports it and leaves it alone: it may be the home of the same checkout under another
/// state directory, which this store cannot see.
pub fn foreign_home(resource: &OwnedResource, own: &str) -> Option<(String, String)> {
    if resource.label(PURPOSE) != Some(Purpose::Home.as_str()) {
        return None;
    }
    let why = match resource.label(REPOSITORY) {
        Some(key) if key == own => return None,
        Some(key) => format!(
            "a persistent home of another repository that was at this path ({REPOSITORY}={key}; this one is {own}): never mounted here"
        ),
        None => format!(
            "a persistent home made before homes were keyed by their repository (no {REPOSITORY} label): never mounted again"
        ),
    };
    let skipped = format!(
        "left alone: it may hold another checkout's provider login; remove it with `docker volume rm {}` once nothing uses it",
        resource.name
    );
    Some((why, skipped))
}

/// What retention finds: old sessions and proposals, and labelled resources nothing needs.
pub async fn find(
    store: &Store,
    runtime: Option<&dyn SessionRuntime>,
    project_id: &str,
    declared_assignments: &BTreeSet<String>,
    retention: Duration,
    runs: &Runs<'_>,
) -> Result<Vec<Prunable>, BackendError> {
    let before = roundtable_store::cutoff(retention);
    let mut found = Vec::new();
    for session in store.finished_sessions_before(&before).await? {
        let why =
            format!("{} session finished {} (past retention)", session.phase, session.finished_at.unwrap_or_default());
        found.push(Prunable { kind: PrunableKind::Session, name: session.id, why, skipped: None });
    }
    for proposal in store.proposals_before(&before).await? {
        let why = format!("created {} (past retention)", proposal.created_at);
        found.push(Prunable { kind: PrunableKind::Proposal, name: proposal.id, why, skipped: None });
    }
    if let Some(runtime) = runtime {
        let repository = store.repository_key().await?.key;
        for item in runtime.owned(project_id).await? {
            if let Some((why, skipped)) = foreign_home(&item, &repository) {
                let name = item.name.clone();
                found.push(Prunable { kind: PrunableKind::Resource(item), name, why, skipped: Some(skipped) });
                continue;
            }
            let owner = item.label(ASSIGNMENT);
            let declared = owner.is_some_and(|name| declared_assignments.contains(name));
            let session_id = item.label(SESSION);
            let session = match session_id {
                Some(id) if declared => store.session(id).await?,
                _ => None,
            };
            if let Some(why) = orphan_reason(owner, declared, session_id, session.as_ref()) {
                let (name, skipped) = (item.name.clone(), left_alone(&item, runs));
                found.push(Prunable { kind: PrunableKind::Resource(item), name, why, skipped });
            }
        }
    }
    Ok(found)
}

/// Removes what [`find`] found; returns what could not be removed, and why.
pub async fn remove(
    store: &Store,
    runtime: Option<&dyn SessionRuntime>,
    found: &[Prunable],
) -> Vec<(Prunable, BackendError)> {
    let mut failed = Vec::new();
    for item in found.iter().filter(|item| item.skipped.is_none()) {
        let outcome: Result<(), BackendError> = match &item.kind {
            PrunableKind::Session => remove_session(store, &item.name).await,
            PrunableKind::Proposal => remove_proposal(store, &item.name).await,
            PrunableKind::Resource(resource) => match runtime {
                Some(runtime) => runtime.remove(resource).await.map_err(BackendError::from),
                None => Err(BackendError::Runtime(roundtable_session_runtime::RuntimeError::Unavailable {
                    reason: "no container engine to remove it from".into(),
                })),
            },
        };
        if let Err(error) = outcome {
            failed.push((item.clone(), error));
        }
    }
    failed
}

/// A finished session's row and its execution folder.
async fn remove_session(store: &Store, id: &str) -> Result<(), BackendError> {
    if let Some(session) = store.session(id).await? {
        if let Some(dir) = &session.exec_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        store.delete_session(id).await?;
    }
    Ok(())
}

/// A proposal's row and its patch.
async fn remove_proposal(store: &Store, id: &str) -> Result<(), BackendError> {
    if let Some(proposal) = store.proposal_by_id(id).await? {
        let _ = std::fs::remove_file(&proposal.patch_path);
        store.delete_proposal(id).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(phase: &str) -> SessionRecord {
        SessionRecord { id: "s1".into(), phase: phase.parse().expect("a phase"), ..SessionRecord::default() }
    }

    /// Assignment label, declared, session label, session record, expected reason fragment.
    type Case = (Option<&'static str>, bool, Option<&'static str>, Option<SessionRecord>, Option<&'static str>);

    #[test]
    fn only_a_home_with_this_repositorys_key_is_its_own() {
        let volume = |labels: &[(&str, &str)]| OwnedResource {
            kind: roundtable_session_runtime::ResourceKind::Volume,
            name: "roundtable-home-x".into(),
            labels: labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            running: false,
        };
        let home = Purpose::Home.as_str();
        // Labels, then a fragment of why it is not this repository's (`None`: it is, or not a home).
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
        let cases: [Case<'_>; 4] = [
            (&[(PURPOSE, home), (REPOSITORY, "mine")], None),
            (&[(PURPOSE, home), (REPOSITORY, "theirs")], Some("another repository that was at this path")),
            (&[(PURPOSE, home)], Some("made before homes were keyed")),
            (&[(PURPOSE, Purpose::Agent.as_str())], None),
        ];
        for (labels, expected) in cases {
            let found = foreign_home(&volume(labels), "mine");
            assert_eq!(
                found.as_ref().map(|(why, _)| why.contains(expected.unwrap_or(""))),
                expected.map(|_| true),
                "{labels:?}: {found:?}"
            );
            if let Some((_, skipped)) = found {
                assert!(skipped.contains("docker volume rm roundtable-home-x"), "{skipped}");
            }
        }
    }

    #[test]
    fn a_live_or_running_controller_run_keeps_its_resources() {
        let resource = |run: &str, running: bool| OwnedResource {
            kind: roundtable_session_runtime::ResourceKind::Container,
            name: "c".into(),
            labels: [(CONTROLLER_RUN.to_owned(), run.to_owned())].into(),
            running,
        };
        let liveness = |run: &str| match run {
            "alive" => Liveness::Alive,
            "dead" => Liveness::Dead,
            _ => Liveness::Unknown,
        };
        let runs = Runs { own: Some("mine"), liveness: &liveness };
        assert!(left_alone(&resource("alive", false), &runs).is_some_and(|why| why.contains("alive")));
        assert!(left_alone(&resource("unknown", true), &runs).is_some_and(|why| why.contains("not provably dead")));
        assert_eq!(left_alone(&resource("unknown", false), &runs), None);
        assert_eq!(left_alone(&resource("dead", true), &runs), None);
        assert_eq!(left_alone(&resource("mine", true), &runs), None, "the store accounts for its own run");
    }

    #[test]
    fn a_resource_is_an_orphan_once_nothing_can_need_it() {
        let cases: [Case; 8] = [
            (None, false, Some("s1"), None, Some("without an Assignment")),
            (Some("gone"), false, Some("s1"), Some(session("Running")), Some("no spec declares")),
            (Some("a"), true, Some("s1"), Some(session("Running")), None),
            (Some("a"), true, Some("s1"), Some(session("Queued")), None),
            (Some("a"), true, Some("s1"), Some(session("Succeeded")), Some("ended Succeeded")),
            (Some("a"), true, Some("s1"), Some(session("Interrupted")), Some("ended Interrupted")),
            (Some("a"), true, Some("s1"), None, Some("does not know")),
            (Some("a"), true, None, None, None),
        ];
        for (assignment, declared, id, record, expected) in cases {
            let reason = orphan_reason(assignment, declared, id, record.as_ref());
            match expected {
                None => assert_eq!(reason, None, "{assignment:?} {declared} {record:?}"),
                Some(part) => assert!(reason.as_deref().is_some_and(|r| r.contains(part)), "{reason:?} vs {part}"),
            }
        }
    }
}
