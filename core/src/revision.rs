//! Which checkout may write desired state to a shared store. The store keeps the git commit its
//! desired state was last written from; a controller writes only when its checkout's `HEAD` is
//! that commit or a descendant of it (moving the stored one forward first), through a store
//! handle pinned to it. A checkout that is behind, or that has diverged, or whose `HEAD` the
//! store's commit is unknown to (not fetched yet), writes nothing and says so in `controllers`.
//! On a store of its own (SQLite) every scan writes, as before: an operator who checks out an
//! older commit there means it.

use std::path::Path;

use roundtable_store::Store;
use roundtable_workspace::git;

use crate::backend::BackendError;

/// What a scan may do with the store.
#[derive(Debug, Clone)]
pub enum Gate {
    /// Write through this handle (pinned on a shared store).
    Write { store: Store, revision: Option<String> },
    /// Write nothing: the store's desired state is newer than (or unrelated to) this checkout.
    Behind { revision: Option<String>, note: String },
}

/// Decides for the checkout at `project_root`, advancing the stored revision when it is an
/// ancestor of the checkout's.
pub async fn gate(store: &Store, project_root: &Path, controller: &str) -> Result<Gate, BackendError> {
    if !store.is_shared() {
        return Ok(Gate::Write { store: store.clone(), revision: None });
    }
    let root = project_root.to_owned();
    let mine = tokio::task::spawn_blocking(move || head(&root)).await?;
    let held = store.desired_revision().await?;
    let Some(mine) = mine else {
        return Ok(match held {
            None => Gate::Write { store: store.clone(), revision: None },
            Some(held) => Gate::Behind {
                revision: None,
                note: format!(
                    "not a git checkout: the store's desired state comes from revision {} (written by {})",
                    short(&held.revision),
                    held.controller
                ),
            },
        });
    };
    let write = |store: &Store| Gate::Write { store: store.pinned_to_revision(&mine), revision: Some(mine.clone()) };
    match held {
        None => {
            store.advance_desired_revision(None, &mine, controller).await?;
            // Whoever won, the pin decides: a loser whose revision is not the stored one writes nothing.
            Ok(write(store))
        }
        Some(held) if held.revision == mine => Ok(write(store)),
        Some(held) => {
            let (root, older, newer) = (project_root.to_owned(), held.revision.clone(), mine.clone());
            let ancestor = tokio::task::spawn_blocking(move || is_ancestor(&root, &older, &newer)).await?;
            if ancestor {
                store.advance_desired_revision(Some(&held.revision), &mine, controller).await?;
                Ok(write(store))
            } else {
                Ok(Gate::Behind {
                    note: format!(
                        "checkout at {} is behind (or diverged from) the store's desired revision {} written by {} at {}: its specs are not written; pull it",
                        short(&mine),
                        short(&held.revision),
                        held.controller,
                        held.at
                    ),
                    revision: Some(mine),
                })
            }
        }
    }
}

fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

/// The checkout's `HEAD` commit, if it is a git checkout with one.
fn head(project_root: &Path) -> Option<String> {
    git::text(project_root, &["rev-parse", "--verify", "-q", "HEAD"]).ok().filter(|t| !t.is_empty())
}

/// Whether `older` is an ancestor of `newer` in the checkout (false when `older` is unknown to it).
fn is_ancestor(project_root: &Path, older: &str, newer: &str) -> bool {
    git::run(project_root, &["merge-base", "--is-ancestor", older, newer]).is_ok()
}
