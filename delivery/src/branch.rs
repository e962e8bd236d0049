//! The commit an accept makes: the verified patch applied to its base commit in a scratch index
//! (never the working tree: `HEAD`, the index and the checked-out branch are untouched), a tree
//! written from that index, a commit of it with the agent as author and the operator's git
//! identity as committer, and a new branch created atomically (it must not exist). Also the pushes: the branch's, and the notes' (merged
//! with the remote's first).
//! Everything goes through the git CLI with hooks never involved (`commit-tree` and `update-ref`
//! run none).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why no commit was made.
#[derive(Debug, thiserror::Error)]
pub enum BranchError {
    #[error("the base commit {0} is not in the repository (fetch it, or accept in a clone that has it)")]
    BaseMissing(String),
    #[error("the branch {0} exists already: an accept makes a new branch (name another with --branch)")]
    BranchExists(String),
    #[error("{0:?} is not a valid branch name")]
    BadBranch(String),
    #[error("the patch does not apply to its base commit: {0}")]
    DoesNotApply(String),
    #[error("git {step} failed: {detail}")]
    Git { step: &'static str, detail: String },
    #[error("cannot run git: {0}")]
    Spawn(#[from] std::io::Error),
}

/// An accept builds its tree with [`crate::changes::proposed_tree`] too (one builder for what is judged and what
/// lands), so its errors read as the accept's.
impl From<crate::changes::ObjectsError> for BranchError {
    fn from(error: crate::changes::ObjectsError) -> Self {
        match error {
            crate::changes::ObjectsError::BaseMissing(base) => BranchError::BaseMissing(base),
            crate::changes::ObjectsError::DoesNotApply(detail) => BranchError::DoesNotApply(detail),
            crate::changes::ObjectsError::Git { step, detail } => BranchError::Git { step, detail },
            crate::changes::ObjectsError::Spawn(error)
            | crate::changes::ObjectsError::Read(error)
            | crate::changes::ObjectsError::Scratch(error) => BranchError::Spawn(error),
            crate::changes::ObjectsError::Malformed(detail) => BranchError::Git { step: "cat-file", detail },
        }
    }
}

/// A name and an email, as git takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

/// What one accept commits.
pub struct CommitRequest<'a> {
    pub repo: &'a Path,
    pub base: &'a str,
    pub patch: &'a [u8],
    /// The new branch, without `refs/heads/`.
    pub branch: &'a str,
    /// Where the branch's ref is made: `refs/heads/` in a repository an operator works in;
    /// [`MIRROR_NAMESPACE`] in a git source's mirror, whose `refs/heads/` a fetch prunes.
    pub namespace: &'a str,
    pub author: &'a Identity,
    pub message: &'a str,
}

/// Where an accept in a git source's mirror keeps its branch until the push: outside the
/// `refs/heads/*` the mirror's fetch overwrites and prunes.
pub const MIRROR_NAMESPACE: &str = "refs/roundtable/accepted/";

/// The commit made and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub commit: String,
    pub tree: String,
    /// `<namespace><branch>`.
    pub reference: String,
}

struct Git<'a> {
    repo: &'a Path,
    index: Option<PathBuf>,
}

impl Git<'_> {
    fn command(&self, args: &[&str]) -> Command {
        // The operator's git (identity, credentials for a push), never asking for anything.
        let mut command = roundtable_workspace::git::operator_command(self.repo);
        command.args(args);
        if let Some(index) = &self.index {
            command.env("GIT_INDEX_FILE", index);
        }
        command
    }

    /// Runs git; its trimmed stdout, or its stderr as the error.
    fn run(&self, step: &'static str, args: &[&str]) -> Result<String, BranchError> {
        let output = self.command(args).output()?;
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned());
        }
        Err(BranchError::Git { step, detail: String::from_utf8_lossy(&output.stderr).trim().to_owned() })
    }

    fn succeeds(&self, args: &[&str]) -> Result<bool, BranchError> {
        Ok(self.command(args).stdout(Stdio::null()).stderr(Stdio::null()).status()?.success())
    }
}

/// The operator's git identity in `repo` (what `git commit` would record as committer).
pub fn operator_identity(repo: &Path) -> Result<String, BranchError> {
    let ident = Git { repo, index: None }.run("var GIT_COMMITTER_IDENT", &["var", "GIT_COMMITTER_IDENT"])?;
    // `Name <email> 1700000000 +0000`: the time is not part of who.
    Ok(ident.rsplitn(3, ' ').nth(2).unwrap_or(&ident).to_owned())
}

/// Makes the commit and the branch.
pub fn commit(request: &CommitRequest<'_>) -> Result<Committed, BranchError> {
    let plain = Git { repo: request.repo, index: None };
    if !plain.succeeds(&["check-ref-format", "--branch", request.branch])? {
        return Err(BranchError::BadBranch(request.branch.to_owned()));
    }
    let reference = format!("{}{}", request.namespace, request.branch);
    // In a mirror, `refs/heads/<branch>` is the source's own branch as last fetched: a new
    // branch must not exist there either.
    for taken in [reference.clone(), format!("refs/heads/{}", request.branch)] {
        if plain.succeeds(&["rev-parse", "--verify", "--quiet", &taken])? {
            return Err(BranchError::BranchExists(request.branch.to_owned()));
        }
    }
    // The same tree the review gates judged: one builder for both.
    let tree = crate::changes::proposed_tree(request.repo, request.base, request.patch)?;
    let scratch = tempfile::Builder::new().prefix("roundtable-accept-").tempdir()?;
    let message_file = scratch.path().join("message");
    std::fs::write(&message_file, request.message)?;
    let message_path = message_file.to_string_lossy().into_owned();
    let mut commit_tree = plain.command(&["commit-tree", &tree, "-p", request.base, "-F", &message_path]);
    commit_tree.env("GIT_AUTHOR_NAME", &request.author.name).env("GIT_AUTHOR_EMAIL", &request.author.email);
    let output = commit_tree.output()?;
    if !output.status.success() {
        let detail = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        return Err(BranchError::Git { step: "commit-tree", detail });
    }
    let commit = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    // The all-zero old value makes the update fail if the branch appeared meanwhile.
    let created = plain.run("update-ref", &["update-ref", &reference, &commit, &"0".repeat(commit.len())]);
    if let Err(BranchError::Git { detail, .. }) = created {
        if plain.succeeds(&["rev-parse", "--verify", "--quiet", &reference])? {
            return Err(BranchError::BranchExists(request.branch.to_owned()));
        }
        return Err(BranchError::Git { step: "update-ref", detail });
    }
    Ok(Committed { commit, tree, reference })
}

/// Pushes `reference` to `remote` (a remote's name or URL) as `remote_ref`, with the git CLI. A
/// ref that exists on the remote is not overwritten (no `+`): a push never rewrites a branch.
pub fn push(repo: &Path, remote: &str, reference: &str, remote_ref: &str) -> Result<(), BranchError> {
    let refspec = format!("{reference}:{remote_ref}");
    Git { repo, index: None }.run("push", &["push", "--quiet", "--", remote, &refspec]).map(|_| ())
}

/// How often [`push_notes`] merges and pushes again when another push landed between its fetch
/// and its push.
const NOTES_PUSH_ATTEMPTS: usize = 3;

/// Pushes `notes_ref` to `remote` as a fast-forward, never forced: the remote's notes ref is
/// shared (other accepts, other clones push to it), so what is there is first merged into ours
/// (`git notes merge -s ours`: a note on the same commit on both sides keeps ours, whole, since a
/// note is one signed envelope and not lines to concatenate). So our notes ref always descends
/// from the remote's, and one diverged push never blocks every later one.
pub fn push_notes(repo: &Path, remote: &str, notes_ref: &str) -> Result<(), BranchError> {
    let git = Git { repo, index: None };
    let mut attempt = 0;
    loop {
        attempt += 1;
        if let Some(theirs) = remote_ref(repo, remote, notes_ref)?
            && !git.succeeds(&["merge-base", "--is-ancestor", &theirs, notes_ref])?
        {
            // Only the objects: neither a ref nor FETCH_HEAD of the operator's repository moves.
            git.run(
                "fetch notes",
                &["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", remote, notes_ref],
            )?;
            git.run("notes merge", &["notes", "--ref", notes_ref, "merge", "--quiet", "-s", "ours", &theirs])?;
        }
        match git.run("push notes", &["push", "--quiet", "--", remote, &format!("{notes_ref}:{notes_ref}")]) {
            // Another push landed since the look: merge that too.
            Err(BranchError::Git { .. }) if attempt < NOTES_PUSH_ATTEMPTS => continue,
            pushed => return pushed.map(|_| ()),
        }
    }
}

/// What `reference` names on `remote` (`None`: it has no such ref).
fn remote_ref(repo: &Path, remote: &str, reference: &str) -> Result<Option<String>, BranchError> {
    let output = Git { repo, index: None }.command(&["ls-remote", "--exit-code", "--", remote, reference]).output()?;
    match output.status.code() {
        // `--exit-code`: 2 says the remote answered and has no such ref.
        Some(2) => Ok(None),
        Some(0) => {
            let listed = String::from_utf8_lossy(&output.stdout);
            let exact = listed.lines().find_map(|line| {
                let (oid, name) = line.split_once('\t')?;
                (name == reference).then(|| oid.to_owned())
            });
            Ok(exact)
        }
        _ => Err(BranchError::Git {
            step: "ls-remote",
            detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        }),
    }
}

/// Adds `note` to `commit` under `notes_ref`.
pub fn add_note(repo: &Path, notes_ref: &str, commit: &str, note: &str) -> Result<(), BranchError> {
    let scratch = tempfile::Builder::new().prefix("roundtable-note-").tempdir()?;
    let file = scratch.path().join("note");
    std::fs::write(&file, note)?;
    let file = file.to_string_lossy().into_owned();
    Git { repo, index: None }
        .run("notes add", &["notes", "--ref", notes_ref, "add", "-f", "-F", &file, commit])
        .map(|_| ())
}

// === undoing an accept ===

/// The object `reference` names in `repo`, if it exists.
pub fn resolve(repo: &Path, reference: &str) -> Result<Option<String>, BranchError> {
    let git = Git { repo, index: None };
    let output = git.command(&["rev-parse", "--verify", "--quiet", reference]).stderr(Stdio::null()).output()?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    Ok((output.status.success() && !text.is_empty()).then_some(text))
}

/// Deletes `reference` in `repo` if it still names `commit` (what this accept made; anything
/// else is someone else's and stays).
pub fn delete_ref(repo: &Path, reference: &str, commit: &str) -> Result<(), BranchError> {
    Git { repo, index: None }.run("update-ref -d", &["update-ref", "-d", reference, commit]).map(|_| ())
}

/// Whether `commit`'s message carries the trailer naming `proposal`: a commit an accept of it made.
pub fn made_for(repo: &Path, commit: &str, proposal: &str) -> Result<bool, BranchError> {
    let body = Git { repo, index: None }.run("cat-file", &["cat-file", "commit", commit])?;
    let trailer = format!("Roundtable-Proposal: {proposal}");
    Ok(body.lines().any(|line| line == trailer))
}

/// Removes `commit`'s note under `notes_ref`, if it has one.
pub fn remove_note(repo: &Path, notes_ref: &str, commit: &str) -> Result<(), BranchError> {
    Git { repo, index: None }
        .run("notes remove", &["notes", "--ref", notes_ref, "remove", "--ignore-missing", commit])
        .map(|_| ())
}

/// Deletes `remote_ref` on `remote` if it still names `commit` there (a lease: a branch someone
/// else pushed meanwhile is left alone). Best effort: a remote that refused the push may refuse
/// this too.
pub fn delete_pushed(repo: &Path, remote: &str, remote_ref: &str, commit: &str) -> Result<(), BranchError> {
    let lease = format!("--force-with-lease={remote_ref}:{commit}");
    let refspec = format!(":{remote_ref}");
    Git { repo, index: None }.run("push --delete", &["push", "--quiet", &lease, "--", remote, &refspec]).map(|_| ())
}
