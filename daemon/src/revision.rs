//! Which controller may write desired state to a shared store. The store keeps the git commit its
//! desired state was last written from; a controller writes only when the commit it reconciles
//! (its checkout's `HEAD`, or the commit it fetched from a git source) is that commit or a
//! descendant of it (moving the stored one forward first), through a store handle pinned to it.
//! A controller that is behind, or has diverged, or that does not know the store's commit (not
//! fetched yet), writes nothing and says so in `controllers`. A git source's branch may be
//! force-pushed: there a commit fetched after the stored one was written also moves it, as the
//! remote said so later. On a store of its own (SQLite) every scan writes, as before: an operator
//! who checks out an older commit there means it.

use std::path::Path;

use roundtable_store::Store;
use roundtable_workspace::git;

use roundtable_reconcilers::backend::BackendError;

/// What a scan may do with the store.
#[derive(Debug, Clone)]
pub enum Gate {
    /// Write through this handle (pinned on a shared store).
    Write { store: Store, revision: Option<String> },
    /// Write nothing: the store's desired state is newer than (or unrelated to) this checkout.
    Behind { revision: Option<String>, note: String },
}

/// The commit a scan reconciles, and where its history is read.
#[derive(Debug, Clone, Copy)]
pub struct Synced<'a> {
    /// The commit (`None`: not a git checkout).
    pub commit: Option<&'a str>,
    /// The repository holding it (a checkout, or a mirror).
    pub repo: &'a Path,
    /// When it was fetched from a git source; `None` for a checkout.
    pub fetched_at: Option<&'a str>,
}

/// Decides for the commit `synced`, advancing the stored revision when it is an ancestor of it.
pub async fn gate(store: &Store, synced: Synced<'_>, controller: &str) -> Result<Gate, BackendError> {
    if !store.is_shared() {
        return Ok(Gate::Write { store: store.clone(), revision: None });
    }
    let held = store.desired_revision().await?;
    let Some(mine) = synced.commit.map(str::to_owned) else {
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
            let (root, older, newer) = (synced.repo.to_owned(), held.revision.clone(), mine.clone());
            let ancestor = tokio::task::spawn_blocking(move || is_ancestor(&root, &older, &newer)).await?;
            let fetched_later = synced.fetched_at.is_some_and(|at| !at.is_empty() && at > held.at.as_str());
            if ancestor || fetched_later {
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
pub fn checkout_head(project_root: &Path) -> Option<String> {
    git::text(project_root, &["rev-parse", "--verify", "-q", "HEAD"]).ok().filter(|t| !t.is_empty())
}

/// Whether `older` is an ancestor of `newer` in the repository (false when `older` is unknown to
/// it). A bare mirror is read as it is.
fn is_ancestor(repo: &Path, older: &str, newer: &str) -> bool {
    git::run(repo, &["merge-base", "--is-ancestor", older, newer]).is_ok()
}
