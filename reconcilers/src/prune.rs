//! Retention: finished sessions (with their execution folders and logs) and proposals (with their
//! patches) past the retention, and labelled engine resources no spec owns. `--dry-run` and
//! `status` list the same things without removing them.

use std::collections::BTreeSet;
use std::time::Duration;

use roundtable_sandbox::Engine;
use roundtable_sandbox::labels::ASSIGNMENT;
use roundtable_store::Store;

use crate::backend::BackendError;

/// One thing retention removes (or would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prunable {
    /// `Session`, `Proposal`, `Container` or `Volume`.
    pub kind: &'static str,
    pub name: String,
    pub why: String,
}

/// What retention finds: old sessions and proposals, and labelled resources no Assignment owns.
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
            let owner = item.labels.get(ASSIGNMENT).cloned();
            if owner.as_ref().is_some_and(|name| declared_assignments.contains(name)) {
                continue;
            }
            let why = match owner {
                Some(name) => format!("labelled for Assignment/{name}, which no spec declares"),
                None => "labelled for this project without an Assignment".into(),
            };
            found.push(Prunable { kind: item.kind, name: item.name, why });
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
