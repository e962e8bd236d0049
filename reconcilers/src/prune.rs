//! Retention: finished sessions (with their execution folders and logs) and proposals (with their
//! patches) past the retention, and labelled engine resources no spec owns. `--dry-run` and
//! `status` list the same things without removing them.

use std::collections::BTreeSet;
use std::time::Duration;

use roundtable_sandbox::Engine;
use roundtable_sandbox::labels::{ASSIGNMENT, SESSION};
use roundtable_store::{SessionRecord, Store};

use crate::backend::BackendError;

/// One thing retention removes (or would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prunable {
    /// `Session`, `Proposal`, `Container` or `Volume`.
    pub kind: &'static str,
    pub name: String,
    pub why: String,
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
        (Some(_), true, Some(id), Some(record)) if !matches!(record.phase.as_str(), "Queued" | "Running") => {
            Some(format!("left by session {id}, which ended {}", record.phase))
        }
        (Some(_), true, Some(id), None) => Some(format!("left by session {id}, which the state store does not know")),
        _ => None,
    }
}

/// What retention finds: old sessions and proposals, and labelled resources nothing needs.
pub async fn find(
    store: &Store,
    engine: Option<&Engine>,
    project_id: &str,
    declared_assignments: &BTreeSet<String>,
    retention: Duration,
) -> Result<Vec<Prunable>, BackendError> {
    let before = roundtable_store::cutoff(retention);
    let mut found = Vec::new();
    for session in store.finished_sessions_before(&before).await? {
        let why =
            format!("{} session finished {} (past retention)", session.phase, session.finished_at.unwrap_or_default());
        found.push(Prunable { kind: "Session", name: session.id, why });
    }
    for proposal in store.proposals_before(&before).await? {
        let why = format!("created {} (past retention)", proposal.created_at);
        found.push(Prunable { kind: "Proposal", name: proposal.id, why });
    }
    if let Some(engine) = engine {
        let labelled = engine.labelled(project_id).await.map_err(|e| BackendError::Engine(e.to_string()))?;
        for item in labelled {
            let owner = item.labels.get(ASSIGNMENT).map(String::as_str);
            let declared = owner.is_some_and(|name| declared_assignments.contains(name));
            let session_id = item.labels.get(SESSION).map(String::as_str);
            let session = match session_id {
                Some(id) if declared => store.session(id).await?,
                _ => None,
            };
            if let Some(why) = orphan_reason(owner, declared, session_id, session.as_ref()) {
                found.push(Prunable { kind: item.kind, name: item.name, why });
            }
        }
    }
    Ok(found)
}

/// Removes what [`find`] found; returns what could not be removed.
pub async fn remove(store: &Store, engine: Option<&Engine>, found: &[Prunable]) -> Vec<(Prunable, String)> {
    let mut failed = Vec::new();
    for item in found {
        let outcome = match item.kind {
            "Session" => match store.session(&item.name).await {
                Ok(Some(session)) => {
                    if let Some(dir) = &session.exec_dir {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                    store.delete_session(&item.name).await.map_err(|e| e.to_string())
                }
                Ok(None) => Ok(()),
                Err(error) => Err(error.to_string()),
            },
            "Proposal" => match store.proposal(&item.name).await {
                Ok(Some(proposal)) => {
                    let _ = std::fs::remove_file(&proposal.patch_path);
                    store.delete_proposal(&item.name).await.map_err(|e| e.to_string())
                }
                Ok(None) => Ok(()),
                Err(error) => Err(error.to_string()),
            },
            "Container" => match engine {
                Some(engine) => {
                    let options =
                        bollard::query_parameters::RemoveContainerOptionsBuilder::default().force(true).v(true).build();
                    engine.docker().remove_container(&item.name, Some(options)).await.map_err(|e| e.to_string())
                }
                None => Err("no engine".into()),
            },
            "Volume" => match engine {
                Some(engine) => {
                    let options = bollard::query_parameters::RemoveVolumeOptionsBuilder::default().force(true).build();
                    engine.docker().remove_volume(&item.name, Some(options)).await.map_err(|e| e.to_string())
                }
                None => Err("no engine".into()),
            },
            other => Err(format!("unknown kind {other}")),
        };
        if let Err(error) = outcome {
            failed.push((item.clone(), error));
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(phase: &str) -> SessionRecord {
        SessionRecord { id: "s1".into(), phase: phase.into(), ..SessionRecord::default() }
    }

    /// Assignment label, declared, session label, session record, expected reason fragment.
    type Case = (Option<&'static str>, bool, Option<&'static str>, Option<SessionRecord>, Option<&'static str>);

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
