//! The proposal as git objects: its base commit with the patch applied in a scratch index (as an
//! accept makes its commit; never the operator's index or work tree), the blobs that tree adds or
//! changes (`git diff-tree -r -M`), and each blob's bytes streamed from `git cat-file --batch`,
//! at most a bounded prefix of each held in memory. What the review gates judge is read here,
//! from the objects, never from the patch text.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Why the proposal's objects could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    #[error("the base commit {0} is not in the repository (fetch it, or review in a clone that has it)")]
    BaseMissing(String),
    #[error("the patch does not apply to its base commit: {0}")]
    DoesNotApply(String),
    #[error("git {step} failed: {detail}")]
    Git { step: &'static str, detail: String },
    #[error("git cat-file answered {0:?} where a blob header was expected")]
    Malformed(String),
    #[error("cannot run git")]
    Spawn(#[source] std::io::Error),
    #[error("cannot read from git cat-file")]
    Read(#[source] std::io::Error),
    #[error("cannot write the scratch index's files")]
    Scratch(#[source] std::io::Error),
}

/// The object id git writes for "no blob" (a file's side that does not exist).
fn absent(id: &str) -> bool {
    id.bytes().all(|b| b == b'0')
}

/// One path the proposal adds, changes or deletes, as `git diff-tree --raw` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The path in the new tree (the old one for a deletion).
    pub path: String,
    /// The blob it had in the base (for a rename or copy, the source's); none for a new file.
    pub old_blob: Option<String>,
    /// The blob it has now; none for a deletion.
    pub new_blob: Option<String>,
}

/// A git command in `repo`, with the operator's settings and nothing interactive, optionally on a
/// scratch index.
fn git(repo: &Path, index: Option<&Path>, args: &[&str]) -> Command {
    let mut command = roundtable_workspace::git::operator_command(repo);
    command.args(args);
    if let Some(index) = index {
        command.env("GIT_INDEX_FILE", index);
    }
    command
}

/// Runs git; its stdout, or its stderr as the error.
fn run(repo: &Path, index: Option<&Path>, step: &'static str, args: &[&str]) -> Result<Vec<u8>, ObjectsError> {
    let output = git(repo, index, args).output().map_err(ObjectsError::Spawn)?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    Err(ObjectsError::Git { step, detail: String::from_utf8_lossy(&output.stderr).trim().to_owned() })
}

/// The tree of `base` with `patch` applied, written from a scratch index in a temporary folder.
/// The same steps and settings as an accept's commit, so the gates judge the tree that lands.
pub fn proposed_tree(repo: &Path, base: &str, patch: &[u8]) -> Result<String, ObjectsError> {
    let base_commit = format!("{base}^{{commit}}");
    let exists = git(repo, None, &["cat-file", "-e", &base_commit])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(ObjectsError::Spawn)?;
    if !exists.success() {
        return Err(ObjectsError::BaseMissing(base.to_owned()));
    }
    let scratch = tempfile::Builder::new().prefix("roundtable-review-").tempdir().map_err(ObjectsError::Scratch)?;
    let patch_file = scratch.path().join("proposal.patch");
    std::fs::write(&patch_file, patch).map_err(ObjectsError::Scratch)?;
    let index: PathBuf = scratch.path().join("index");
    run(repo, Some(&index), "read-tree", &["read-tree", &base_commit])?;
    let patch_path = patch_file.to_string_lossy().into_owned();
    // The repository's own apply settings (whitespace=error, …) must not change what is applied.
    match run(repo, Some(&index), "apply", &["apply", "--cached", "--whitespace=nowarn", "--", &patch_path]) {
        Err(ObjectsError::Git { detail, .. }) => return Err(ObjectsError::DoesNotApply(detail)),
        Err(other) => return Err(other),
        Ok(_) => {}
    }
    let tree = run(repo, Some(&index), "write-tree", &["write-tree"])?;
    Ok(String::from_utf8_lossy(&tree).trim().to_owned())
}

/// Every path whose blob differs between `base` (a commit) and `tree`, renames followed to their
/// source so a moved file is compared with what it was. Submodule entries carry no blob and are
/// left out.
pub fn changes(repo: &Path, base: &str, tree: &str) -> Result<Vec<Change>, ObjectsError> {
    let base_commit = format!("{base}^{{commit}}");
    let raw =
        run(repo, None, "diff-tree", &["diff-tree", "-r", "-z", "--raw", "-M", "--no-commit-id", &base_commit, tree])?;
    parse_raw(&raw)
}

/// The diff a reviewer reads of `base` (a commit) against `tree`: git's own, renames found (`-M`)
/// and, when asked, changes of whitespace alone left out (`-w`). Run in git's neutral environment
/// (`roundtable_workspace::git`), unlike the steps above: an operator's `diff.noPrefix`, external
/// diff or colour would change the text the console parses, and nothing here is applied.
pub fn shown_diff(repo: &Path, base: &str, tree: &str, ignore_whitespace: bool) -> Result<Vec<u8>, ObjectsError> {
    let base_commit = format!("{base}^{{commit}}");
    let mut args = vec!["diff", "--no-ext-diff", "--no-textconv", "--no-color", "-M"];
    if ignore_whitespace {
        args.push("-w");
    }
    args.extend([base_commit.as_str(), tree]);
    roundtable_workspace::git::run(repo, &args)
        .map(|output| output.stdout)
        .map_err(|error| ObjectsError::Git { step: "diff", detail: error.stderr })
}

/// `git diff-tree -z --raw`: `:oldmode newmode old new STATUS\0path\0` (two paths for a rename
/// or copy).
fn parse_raw(raw: &[u8]) -> Result<Vec<Change>, ObjectsError> {
    let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty()).map(|f| String::from_utf8_lossy(f).into_owned());
    let mut changes = Vec::new();
    while let Some(header) = fields.next() {
        let parts: Vec<&str> = header.trim_start_matches(':').split(' ').collect();
        let [old_mode, new_mode, old, new, status] = parts[..] else {
            return Err(ObjectsError::Malformed(header));
        };
        let two_paths = status.starts_with('R') || status.starts_with('C');
        let first = fields.next().ok_or_else(|| ObjectsError::Malformed(header.clone()))?;
        let path =
            if two_paths { fields.next().ok_or_else(|| ObjectsError::Malformed(header.clone()))? } else { first };
        // A gitlink (mode 160000) names a commit of another repository, not a blob.
        let blob = |mode: &str, id: &str| (mode != "160000" && !absent(id)).then(|| id.to_owned());
        let (old_blob, new_blob) = (blob(old_mode, old), blob(new_mode, new));
        if old_blob.is_some() || new_blob.is_some() {
            changes.push(Change { path, old_blob, new_blob });
        }
    }
    Ok(changes)
}

/// A blob's bytes, at most a prefix of them, and its real size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// The first `limit` bytes (all of them when the blob is smaller).
    pub bytes: Vec<u8>,
    /// The blob's size in bytes, read from the object, whatever was kept.
    pub size: u64,
}

impl Blob {
    /// Bytes of the blob that were not kept.
    pub fn unread(&self) -> u64 {
        self.size.saturating_sub(self.bytes.len() as u64)
    }
}

/// A running `git cat-file --batch`: one blob at a time, each cut to `limit` bytes in memory while
/// the rest is read and dropped. Ended when dropped.
pub struct Blobs {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    limit: u64,
}

impl Blobs {
    pub fn open(repo: &Path, limit: u64) -> Result<Self, ObjectsError> {
        let mut child = git(repo, None, &["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(ObjectsError::Spawn)?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ObjectsError::Malformed("no pipes to git cat-file".into()));
        };
        Ok(Self { child, stdin, stdout: BufReader::new(stdout), limit })
    }

    /// The blob `id`: its first `limit` bytes and its size.
    pub fn read(&mut self, id: &str) -> Result<Blob, ObjectsError> {
        // Without --buffer, cat-file answers each request before reading the next.
        writeln!(self.stdin, "{id}").and_then(|()| self.stdin.flush()).map_err(ObjectsError::Read)?;
        let mut header = String::new();
        self.stdout.read_line(&mut header).map_err(ObjectsError::Read)?;
        let header = header.trim_end().to_owned();
        let size = match header.split(' ').collect::<Vec<_>>()[..] {
            [_, "blob", size] => size.parse::<u64>().map_err(|_| ObjectsError::Malformed(header.clone()))?,
            _ => return Err(ObjectsError::Malformed(header)),
        };
        let mut bytes = Vec::with_capacity(size.min(self.limit) as usize);
        (&mut self.stdout).take(size.min(self.limit)).read_to_end(&mut bytes).map_err(ObjectsError::Read)?;
        let rest = size - bytes.len() as u64;
        let dropped =
            std::io::copy(&mut (&mut self.stdout).take(rest), &mut std::io::sink()).map_err(ObjectsError::Read)?;
        let mut newline = [0u8; 1];
        self.stdout.read_exact(&mut newline).map_err(ObjectsError::Read)?;
        if dropped != rest || newline != *b"\n" {
            return Err(ObjectsError::Malformed(format!("{header} (short)")));
        }
        Ok(Blob { bytes, size })
    }
}

impl Drop for Blobs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_entries_name_each_side_s_blob_and_follow_renames() {
        let a = "1".repeat(40);
        let b = "2".repeat(40);
        let zero = "0".repeat(40);
        let raw = format!(
            ":000000 100644 {zero} {a} A\0new.txt\0:100644 100644 {a} {b} R087\0old name\0new name\0:100644 000000 {b} {zero} D\0gone\0:160000 160000 {a} {b} M\0vendor/sub\0"
        );
        let changes = parse_raw(raw.as_bytes()).expect("parses");
        let shown: Vec<(&str, Option<&str>, Option<&str>)> =
            changes.iter().map(|c| (c.path.as_str(), c.old_blob.as_deref(), c.new_blob.as_deref())).collect();
        assert_eq!(
            shown,
            [
                ("new.txt", None, Some(a.as_str())),
                ("new name", Some(a.as_str()), Some(b.as_str())),
                ("gone", Some(b.as_str()), None),
            ]
        );
        assert!(parse_raw(b":100644 bad\0x\0").is_err());
    }

    fn git_text(repo: &Path, args: &[&str]) -> String {
        let out = roundtable_workspace::git::run(repo, args).expect("git runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A base with two files; a patch (as the proposal's, without rename detection) that moves
    /// one and re-indents a line of the other.
    fn renamed_and_reindented() -> (tempfile::TempDir, String, Vec<u8>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path();
        git_text(repo, &["init", "-q"]);
        let long = (1..=20).map(|n| format!("line {n}\n")).collect::<String>();
        std::fs::write(repo.join("old.txt"), &long).expect("write");
        std::fs::write(repo.join("code.rs"), "fn f() {\n    a();\n}\n").expect("write");
        git_text(repo, &["add", "-A"]);
        git_text(repo, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base"]);
        let base = git_text(repo, &["rev-parse", "HEAD"]).trim().to_owned();
        std::fs::rename(repo.join("old.txt"), repo.join("new.txt")).expect("rename");
        std::fs::write(repo.join("code.rs"), "fn f() {\n\ta();\n}\n").expect("write");
        git_text(repo, &["add", "-A"]);
        let patch = git_text(repo, &["diff", "--cached", "--no-renames"]);
        git_text(repo, &["reset", "-q", "--hard"]);
        (dir, base, patch.into_bytes())
    }

    #[test]
    fn the_shown_diff_finds_renames_and_can_leave_whitespace_out() {
        let (dir, base, patch) = renamed_and_reindented();
        let tree = proposed_tree(dir.path(), &base, &patch).expect("tree");
        let shown = String::from_utf8(shown_diff(dir.path(), &base, &tree, false).expect("diff")).expect("utf-8");
        assert!(shown.contains("rename from old.txt\nrename to new.txt"), "{shown}");
        assert!(shown.contains("-    a();\n+\ta();"), "{shown}");
        let ignoring = String::from_utf8(shown_diff(dir.path(), &base, &tree, true).expect("diff")).expect("utf-8");
        assert!(ignoring.contains("rename from old.txt"), "{ignoring}");
        assert!(!ignoring.contains("a();"), "a change of whitespace alone is left out: {ignoring}");
    }
}
