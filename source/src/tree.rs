//! The tree of one commit, exported for the scanner: `tree/<commit>/` under the state directory,
//! written under a temporary name and renamed, and `tree/current`, a symbolic link switched
//! atomically to the commit reconciled. The scanner reads `tree/current/<spec path>` with the
//! same rules as a working tree (which files count, size limits, links not leaving the tree);
//! its cache keys stay the same from commit to commit, so unchanged files are not parsed again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::git::{self, GitFailure};

/// The exported trees of a project reconciling committed state.
#[derive(Debug, Clone)]
pub struct Trees {
    dir: PathBuf,
}

/// The link to the tree reconciled, in the trees' folder.
pub(crate) const CURRENT: &str = "current";

/// How many exported trees are kept: the current one and the one before it (a `status` that
/// was reading it when `current` moved finishes reading it).
const KEPT: usize = 2;

impl Trees {
    /// The trees under `state_dir`, made absolute: git runs in the exported folder, where a
    /// relative index or work tree would name something else.
    pub fn in_state_dir(state_dir: &Path) -> Self {
        let state_dir = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_owned());
        Self { dir: state_dir.join("source").join("tree") }
    }

    fn current_link(&self) -> PathBuf {
        self.dir.join(CURRENT)
    }

    /// The commit `current` names, if a tree was exported before (a restart reconciles it until
    /// a fetch succeeds).
    pub fn current(&self) -> Option<String> {
        let target = std::fs::read_link(self.current_link()).ok()?;
        let commit = target.file_name()?.to_str()?.to_owned();
        (self.dir.join(&commit).is_dir() && is_object_id(&commit)).then_some(commit)
    }

    /// Where the spec directory `spec_path` of the current tree is read.
    pub fn spec_dir(&self, spec_path: &Path) -> PathBuf {
        self.current_link().join(spec_path)
    }

    /// The folder every exported tree is in, which links in a tree may not leave.
    pub fn folder(&self) -> &Path {
        &self.dir
    }

    /// Exports `commit`'s whole tree from the repository `git_dir` (when not exported yet) and
    /// makes it current, unless its spec directory `spec_path` is reached through a symbolic link.
    pub async fn show(
        &self,
        git_dir: &Path,
        commit: &str,
        spec_path: &Path,
        timeout: Duration,
    ) -> Result<(), GitFailure> {
        let io = |what: &str, path: &Path, error: std::io::Error| GitFailure {
            args: "checkout-index".into(),
            message: format!("cannot {what} {}: {error}", path.display()),
        };
        if !is_object_id(commit) {
            return Err(GitFailure { args: "rev-parse".into(), message: format!("{commit:?} is not a commit id") });
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| io("create", &self.dir, e))?;
        let target = self.dir.join(commit);
        if !target.is_dir() {
            let temporary = self.dir.join(format!(".export-{commit}-{}", std::process::id()));
            let index = self.dir.join(format!(".index-{commit}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&temporary);
            std::fs::create_dir_all(&temporary).map_err(|e| io("create", &temporary, e))?;
            let exported = async {
                git::run_in(git_dir, (&temporary, &index), &["read-tree", "--end-of-options", commit], timeout).await?;
                git::run_in(git_dir, (&temporary, &index), &["checkout-index", "--all", "--force"], timeout).await
            }
            .await;
            let _ = std::fs::remove_file(&index);
            if let Err(failure) = exported {
                let _ = std::fs::remove_dir_all(&temporary);
                return Err(failure);
            }
            std::fs::rename(&temporary, &target).map_err(|e| io("rename", &temporary, e))?;
        }
        if let Err(message) = refuse_linked_spec_dir(&target, spec_path) {
            return Err(GitFailure { args: "checkout-index".into(), message: format!("commit {commit}: {message}") });
        }
        let link = self.dir.join(format!(".current-{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(commit, &link).map_err(|e| io("link", &link, e))?;
        std::fs::rename(&link, self.current_link()).map_err(|e| io("rename", &link, e))?;
        self.forget_older(commit);
        Ok(())
    }

    /// Removes exported trees but the newest [`KEPT`] (`keep` among them), and what an export
    /// cut short (a daemon stopped mid-fetch) left under a temporary name.
    fn forget_older(&self, keep: &str) {
        let own = format!("-{}", std::process::id());
        for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let temporary = [".export-", ".index-", ".current-"].iter().any(|prefix| name.starts_with(prefix));
            if temporary && !name.ends_with(&own) {
                let path = entry.path();
                let _ = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
            }
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut trees: Vec<(std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .filter(|entry| entry.file_name().to_str().is_some_and(|name| is_object_id(name) && name != keep))
            .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
            .collect();
        trees.sort();
        let excess = trees.len().saturating_sub(KEPT - 1);
        for (_, path) in trees.into_iter().take(excess) {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// Refuses a tree whose spec directory `spec_path` is, or is under, a symbolic link: the commit's
/// links are exported as they are, and the scanner would read the folder a pushed
/// `.roundtable -> /etc` names. A spec path that leaves the tree (`..`, absolute) is refused too.
fn refuse_linked_spec_dir(tree: &Path, spec_path: &Path) -> Result<(), String> {
    let mut at = tree.to_path_buf();
    for component in spec_path.components() {
        match component {
            std::path::Component::Normal(name) => at.push(name),
            std::path::Component::CurDir => continue,
            _ => return Err(format!("the spec path {} leaves the repository", spec_path.display())),
        }
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let shown = at.strip_prefix(tree).unwrap_or(&at).display().to_string();
                return Err(format!(
                    "{shown} is a symbolic link; a spec directory is never read through one (it could name any folder of this host)"
                ));
            }
            Ok(_) => {}
            // Missing: the scan says so, as for a checkout without it.
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// A full SHA-1 or SHA-256 object id in lowercase hex.
fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_directory_reached_through_a_link_is_refused_by_name() {
        let tree = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path(), tree.path().join(".roundtable")).expect("link");
        let refused = refuse_linked_spec_dir(tree.path(), Path::new(".roundtable")).expect_err("refused");
        assert!(refused.contains(".roundtable is a symbolic link"), "{refused}");
        // A link further up the path is refused as well; so is a path that leaves the tree.
        std::fs::create_dir(tree.path().join("deploy")).expect("mkdir");
        std::os::unix::fs::symlink(outside.path(), tree.path().join("deploy/specs")).expect("link");
        assert!(refuse_linked_spec_dir(tree.path(), Path::new("deploy/specs/prod")).is_err());
        assert!(refuse_linked_spec_dir(tree.path(), Path::new("../elsewhere")).is_err());
        // A real folder, or one that is missing, is for the scan to read (or report).
        std::fs::create_dir_all(tree.path().join("specs/prod")).expect("mkdir");
        assert_eq!(refuse_linked_spec_dir(tree.path(), Path::new("./specs/prod")), Ok(()));
        assert_eq!(refuse_linked_spec_dir(tree.path(), Path::new("absent")), Ok(()));
    }
}
