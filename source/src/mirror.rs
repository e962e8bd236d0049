//! A git source (`start --source URL#BRANCH`) and its bare mirror under the state directory:
//! fetched on the poll and on request; the commit of the source's branch is what is reconciled.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::git::{self, GitFailure};

/// A remote and the branch to follow (`None`: the remote's HEAD branch, asked once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// As the git CLI takes it: a path, `file://`, `https://`, `ssh://`, `git://`.
    pub url: String,
    pub branch: Option<String>,
}

/// Why `--source` names no remote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    #[error("--source is empty")]
    Empty,
    #[error("--source {shown}: the branch after `#` is empty")]
    EmptyBranch { shown: String },
    #[error("--source {shown}: {branch:?} is not a branch name git accepts")]
    BadBranch { shown: String, branch: String },
}

impl Remote {
    /// `URL[#BRANCH]`: the branch is what follows the last `#`.
    pub fn parse(text: &str) -> Result<Self, RemoteError> {
        let (url, branch) = match text.rsplit_once('#') {
            Some((url, branch)) => (url, Some(branch)),
            None => (text, None),
        };
        if url.is_empty() {
            return Err(RemoteError::Empty);
        }
        let shown = git::redact(text);
        let branch = match branch {
            None => None,
            Some("") => return Err(RemoteError::EmptyBranch { shown }),
            Some(branch) if !valid_branch(branch) => {
                return Err(RemoteError::BadBranch { shown, branch: branch.to_owned() });
            }
            Some(branch) => Some(branch.to_owned()),
        };
        Ok(Self { url: url.to_owned(), branch })
    }

    /// The URL as it may be printed: credentials redacted.
    pub fn shown(&self) -> String {
        git::redact(&self.url)
    }
}

/// The branch names a refspec can carry safely (`git check-ref-format`'s rules, roughly).
fn valid_branch(branch: &str) -> bool {
    !branch.starts_with(['-', '/'])
        && !branch.ends_with(['/', '.'])
        && !branch.contains("..")
        && !branch.contains("//")
        && !branch.contains("@{")
        && !branch.ends_with(".lock")
        && branch.chars().all(|c| !c.is_control() && !" ~^:?*[\\".contains(c))
}

/// What a good fetch found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub commit: String,
    pub branch: String,
}

/// The bare mirror of a [`Remote`].
#[derive(Debug)]
pub struct Mirror {
    pub git_dir: PathBuf,
    pub remote: Remote,
    /// The branch followed, once known (the remote's HEAD branch when none was given).
    branch: Option<String>,
    timeout: Duration,
}

impl Mirror {
    /// The mirror at `git_dir`, created (empty, bare) when missing. Every git run ends within
    /// `timeout`.
    pub async fn open(git_dir: &Path, remote: Remote, timeout: Duration) -> Result<Self, GitFailure> {
        if !git_dir.join("HEAD").is_file() {
            std::fs::create_dir_all(git_dir).map_err(|error| GitFailure {
                args: "init".into(),
                message: format!("cannot create the mirror {}: {error}", git_dir.display()),
            })?;
            git::run(git_dir, &["init", "--bare", "--quiet"], timeout).await?;
        }
        let branch = remote.branch.clone();
        Ok(Self { git_dir: git_dir.to_owned(), remote, branch, timeout })
    }

    /// The branch followed, when known.
    pub fn branch(&self) -> Option<&str> {
        self.branch.as_deref()
    }

    /// Fetches every branch and tag (pruning what the remote removed: a force-push rewrites, a
    /// deleted branch goes) and returns the followed branch's commit, which the mirror's detached
    /// `HEAD` then names (what an Assignment's `revision: HEAD` provisions).
    pub async fn fetch(&mut self) -> Result<Fetched, GitFailure> {
        let branch = match &self.branch {
            Some(branch) => branch.clone(),
            None => {
                let branch = self.remote_head().await?;
                self.branch = Some(branch.clone());
                branch
            }
        };
        git::run(
            &self.git_dir,
            &[
                "fetch",
                "--prune",
                "--no-tags",
                "--quiet",
                "--no-write-fetch-head",
                "--end-of-options",
                &self.remote.url,
                "+refs/heads/*:refs/heads/*",
                "+refs/tags/*:refs/tags/*",
            ],
            self.timeout,
        )
        .await?;
        let reference = format!("refs/heads/{branch}^{{commit}}");
        let commit = git::text(&self.git_dir, &["rev-parse", "--verify", "--quiet", &reference], self.timeout)
            .await
            .map_err(|_| GitFailure {
                args: "fetch".into(),
                message: format!("branch {branch:?} is not on the remote {}", self.remote.shown()),
            })?;
        git::run(&self.git_dir, &["update-ref", "--no-deref", "HEAD", &commit], self.timeout).await?;
        Ok(Fetched { commit, branch })
    }

    /// The remote's HEAD branch (`ls-remote --symref`).
    async fn remote_head(&self) -> Result<String, GitFailure> {
        let listed = git::text(
            &self.git_dir,
            &["ls-remote", "--symref", "--end-of-options", &self.remote.url, "HEAD"],
            self.timeout,
        )
        .await?;
        listed
            .lines()
            .find_map(|line| line.strip_prefix("ref: refs/heads/")?.strip_suffix("\tHEAD").map(str::to_owned))
            .ok_or_else(|| GitFailure {
                args: "ls-remote --symref HEAD".into(),
                message: format!(
                    "the remote {} names no HEAD branch (an empty repository?); pass --source URL#BRANCH",
                    self.remote.shown()
                ),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_names_its_branch_after_the_last_hash() {
        let remote = Remote::parse("https://u:p@example.com/r.git#release/1").expect("parses");
        assert_eq!(remote.branch.as_deref(), Some("release/1"));
        assert_eq!(remote.shown(), "https://***@example.com/r.git");
        assert_eq!(Remote::parse("/srv/r.git").expect("parses").branch, None);
        assert!(matches!(Remote::parse("/srv/r.git#"), Err(RemoteError::EmptyBranch { .. })));
        let bad = Remote::parse("https://u:p@h/r#a..b").expect_err("refused");
        assert!(!bad.to_string().contains("u:p"), "{bad}");
        assert!(matches!(Remote::parse("#main"), Err(RemoteError::Empty)));
    }
}
