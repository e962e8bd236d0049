//! Following committed state: a local checkout's `HEAD` (`start --committed`) or a git source's
//! branch through its mirror (`start --source`). Each refresh reads (or fetches) the commit, and
//! when it moved exports its tree for the scanner; a failure keeps the last good commit and is
//! recorded, and the next good refresh clears it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roundtable_store::SourceSync;

use crate::Project;
use crate::git::{self, GitFailure};
use crate::mark::mirror_dir;
use crate::mirror::{Mirror, Remote};
use crate::tree::Trees;

/// Where committed state is read from.
#[derive(Debug)]
pub enum Origin {
    /// The local repository of the project's checkout: its `HEAD`.
    Checkout { git_dir: PathBuf, top: PathBuf },
    /// A remote, through the bare mirror.
    Remote(Mirror),
}

/// How long one git run may take.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// The last good commit and when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Good {
    pub commit: String,
    pub fetched_at: String,
}

/// What a refresh found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refreshed {
    /// A commit other than the last good one is current now.
    Moved,
    Unchanged,
    /// Nothing could be read; the last good commit (if any) stays.
    Failed(String),
}

/// The desired state as committed.
#[derive(Debug)]
pub struct Follow {
    pub origin: Origin,
    /// The spec directory inside the repository (`--source-path`, or `--dir` relative to the
    /// checkout's top).
    pub spec_path: PathBuf,
    /// How often the commit is read again (a git source: fetched).
    pub poll: Duration,
    trees: Trees,
    good: Option<Good>,
    /// The last failure and when it happened.
    error: Option<(String, String)>,
}

impl Follow {
    /// Following the `HEAD` of the checkout holding `project`'s spec directory.
    pub async fn checkout(project: &Project, poll: Duration) -> Result<Self, GitFailure> {
        let spec_dir = project.spec_dir.canonicalize().map_err(|error| GitFailure {
            args: "rev-parse".into(),
            message: format!("cannot resolve the spec directory {}: {error}", project.spec_dir.display()),
        })?;
        let (top, git_dir) = git::discover(&spec_dir, GIT_TIMEOUT).await.map_err(|failure| GitFailure {
            message: format!("--committed needs a git checkout: {}", failure.message),
            ..failure
        })?;
        let top = PathBuf::from(top);
        let spec_path = spec_dir.strip_prefix(&top).map(Path::to_path_buf).unwrap_or_default();
        let origin = Origin::Checkout { git_dir: PathBuf::from(git_dir), top };
        Ok(Self::new(origin, spec_path, poll, project))
    }

    /// Following `remote` through the mirror in `project`'s state directory.
    pub async fn remote(
        project: &Project,
        remote: Remote,
        spec_path: PathBuf,
        poll: Duration,
    ) -> Result<Self, GitFailure> {
        let mirror = Mirror::open(&mirror_dir(&project.state_dir), remote, GIT_TIMEOUT).await?;
        Ok(Self::new(Origin::Remote(mirror), spec_path, poll, project))
    }

    fn new(origin: Origin, spec_path: PathBuf, poll: Duration, project: &Project) -> Self {
        let trees = Trees::in_state_dir(&project.state_dir);
        // What a previous run exported is reconciled until the first refresh succeeds.
        let good = trees.current().map(|commit| Good { commit, fetched_at: String::new() });
        Self { origin, spec_path, poll, trees, good, error: None }
    }

    /// The repository the commits live in (the mirror, or the checkout's).
    pub fn git_dir(&self) -> &Path {
        match &self.origin {
            Origin::Checkout { git_dir, .. } => git_dir,
            Origin::Remote(mirror) => &mirror.git_dir,
        }
    }

    pub fn good(&self) -> Option<&Good> {
        self.good.as_ref()
    }

    /// The project a scan reads, once a commit has been exported.
    pub fn project(&self, base: &Project) -> Option<Project> {
        self.good.as_ref()?;
        base.in_tree(&self.trees, &self.spec_path).ok()
    }

    /// Reads (fetches) the commit and exports its tree when it moved.
    pub async fn refresh(&mut self) -> Refreshed {
        let read = match &mut self.origin {
            Origin::Checkout { git_dir, .. } => {
                git::text(git_dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], GIT_TIMEOUT).await.map_err(
                    |failure| GitFailure { message: format!("HEAD names no commit: {}", failure.message), ..failure },
                )
            }
            Origin::Remote(mirror) => mirror.fetch().await.map(|fetched| fetched.commit),
        };
        let at = roundtable_store::now();
        let shown = match read {
            Ok(commit) => match self.trees.show(self.git_dir(), &commit, &self.spec_path, GIT_TIMEOUT).await {
                Ok(()) => {
                    let moved = self.good.as_ref().is_none_or(|good| good.commit != commit);
                    self.good = Some(Good { commit, fetched_at: at });
                    self.error = None;
                    return if moved { Refreshed::Moved } else { Refreshed::Unchanged };
                }
                Err(failure) => failure,
            },
            Err(failure) => failure,
        };
        let message = shown.to_string();
        self.error = Some((message.clone(), at));
        Refreshed::Failed(message)
    }

    /// What `status` shows of it.
    pub fn record(&self, controller: &str) -> SourceSync {
        let (mode, url, branch) = match &self.origin {
            Origin::Checkout { top, .. } => ("committed".to_owned(), top.display().to_string(), "HEAD".to_owned()),
            Origin::Remote(mirror) => (
                "git".to_owned(),
                mirror.remote.shown(),
                mirror.branch().map_or_else(|| "(the remote's HEAD branch)".into(), str::to_owned),
            ),
        };
        SourceSync {
            mode,
            url,
            branch,
            spec_path: self.spec_path.display().to_string(),
            commit: self.good.as_ref().map(|good| good.commit.clone()),
            fetched_at: self.good.as_ref().map(|good| good.fetched_at.clone()).filter(|at| !at.is_empty()),
            error: self.error.as_ref().map(|(message, _)| message.clone()),
            error_at: self.error.as_ref().map(|(_, at)| at.clone()),
            controller: controller.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let output = roundtable_workspace::git::command(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .expect("git");
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    fn commit(work: &Path, file: &str, text: &str) -> String {
        std::fs::create_dir_all(work.join(".roundtable")).expect("mkdir");
        std::fs::write(work.join(".roundtable").join(file), text).expect("write");
        git(work, &["add", "-A"]);
        git(work, &["commit", "-q", "-m", file]);
        git(work, &["push", "-q", "-f", "origin", "HEAD:main"]);
        git(work, &["rev-parse", "HEAD"])
    }

    #[tokio::test]
    async fn a_source_is_fetched_exported_and_kept_at_the_last_good_commit_when_it_fails() {
        let base = tempfile::tempdir().expect("tempdir");
        git(base.path(), &["init", "-q", "--bare", "-b", "main", "remote.git"]);
        git(base.path(), &["clone", "-q", "remote.git", "work"]);
        let work = base.path().join("work");
        let first = commit(&work, "a.yaml", "first\n");
        let state = base.path().join("state");
        std::fs::create_dir_all(&state).expect("mkdir");
        let project = Project::resolve(&base.path().join(".roundtable"))
            .expect("project")
            .with_state(state.clone(), roundtable_store::StoreUrl::in_state_dir(&state));
        let url = format!("file://{}", base.path().join("remote.git").display());
        let remote = Remote::parse(&url).expect("remote");
        let mut follow =
            Follow::remote(&project, remote, ".roundtable".into(), Duration::from_secs(1)).await.expect("mirror");
        assert!(follow.project(&project).is_none(), "nothing is read before the first fetch");

        assert_eq!(follow.refresh().await, Refreshed::Moved);
        assert_eq!(follow.good().map(|g| g.commit.clone()), Some(first.clone()));
        let scanned = follow.project(&project).expect("a tree");
        assert_eq!(std::fs::read_to_string(scanned.spec_dir.join("a.yaml")).expect("exported"), "first\n");
        assert_eq!(follow.refresh().await, Refreshed::Unchanged);
        assert_eq!(follow.record("c").branch, "main", "the remote's HEAD branch");

        let second = commit(&work, "b.yaml", "second\n");
        assert_eq!(follow.refresh().await, Refreshed::Moved);
        assert!(scanned.spec_dir.join("b.yaml").is_file(), "the same path shows the new commit");
        assert_eq!(follow.good().map(|g| g.commit.clone()), Some(second.clone()));

        std::fs::rename(base.path().join("remote.git"), base.path().join("gone.git")).expect("move away");
        assert!(matches!(follow.refresh().await, Refreshed::Failed(_)));
        let record = follow.record("c");
        assert_eq!(record.commit.as_deref(), Some(second.as_str()), "the last good commit stays");
        assert!(record.error.is_some_and(|e| e.contains("fetch")));
        assert!(scanned.spec_dir.join("b.yaml").is_file());

        std::fs::rename(base.path().join("gone.git"), base.path().join("remote.git")).expect("back");
        assert_eq!(follow.refresh().await, Refreshed::Unchanged);
        assert_eq!(follow.record("c").error, None, "a good fetch clears the error");
        // Only the current and the previous tree are kept.
        let trees = std::fs::read_dir(state.join("source/tree")).expect("trees").count();
        assert_eq!(trees, 3, "current, {second} and {first}");
    }
}
