//! The proposal's patch: `git diff --binary` semantics between the provisioned source and the
//! export (creates, deletes, renames, modes, binary files), built in a scratch git directory with
//! no user configuration, external diff, textconv or in-tree attributes; and the check that the
//! patch applied to the base commit reproduces the export byte for byte.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::git::{self, GitError};

/// The tree git knows without storing it; in-tree `.gitattributes` are read from here instead.
/// Why a patch could not be made or did not verify.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{step} {path}")]
    Io {
        step: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot unpack the base commit into {path}")]
    Unpack {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is a .git entry; refusing to let git read it")]
    GitEntry { path: std::path::PathBuf },
    /// Applying the patch to the base commit does not give back what the agent left.
    #[error("{path}: {what}")]
    Mismatch { path: String, what: &'static str },
}

fn io_error(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PatchError {
    let path = path.to_owned();
    move |source| PatchError::Io { step, path, source }
}

const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// A patch and its statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Patch {
    pub text: Vec<u8>,
    pub sha256: String,
    pub files_changed: u64,
    pub insertions: u64,
    pub deletions: u64,
    /// Every path the patch touches (both sides of a rename).
    pub paths: Vec<String>,
}

impl Patch {
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

/// Runs git on the scratch repository; its standard output as bytes (a patch is bytes: file
/// contents in any encoding pass through unchanged).
fn scratch_git(scratch: &Path, args: &[&str], work_tree: Option<&Path>) -> Result<Vec<u8>, GitError> {
    let git_dir = scratch.join("patch.git");
    let mut full: Vec<String> = vec![format!("--git-dir={}", git_dir.display())];
    if let Some(tree) = work_tree {
        full.push(format!("--work-tree={}", tree.display()));
    }
    full.extend(args.iter().map(|a| (*a).to_owned()));
    let refs: Vec<&str> = full.iter().map(String::as_str).collect();
    let output = git::command(scratch)
        .env("GIT_ATTR_SOURCE", EMPTY_TREE)
        .env("GIT_INDEX_FILE", scratch.join("patch.index"))
        .args(["-c", "core.excludesFile=/dev/null", "-c", "core.filemode=true", "-c", "core.symlinks=true"])
        .args(&refs)
        .output()
        .map_err(|error| GitError { args: args.join(" "), code: None, stderr: error.to_string() })?;
    if !output.status.success() {
        return Err(GitError {
            args: args.join(" "),
            code: output.status.code(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(output.stdout)
}

fn tree_of(scratch: &Path, dir: &Path) -> Result<String, GitError> {
    scratch_git(scratch, &["add", "--all", "--force", "."], Some(dir))?;
    Ok(String::from_utf8_lossy(&scratch_git(scratch, &["write-tree"], None)?).trim().to_owned())
}

/// A `.git` file or folder anywhere below `dir` (the extractor rejects them; this is the
/// second line: git must never be pointed at another repository through the export).
fn find_git_entry(dir: &Path) -> Option<std::path::PathBuf> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).ok()?.flatten() {
            if entry.file_name() == ".git" {
                return Some(entry.path());
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(entry.path());
            }
        }
    }
    None
}

/// The patch that turns `base` into `export`; `scratch` is an empty folder it may use.
pub fn diff(scratch: &Path, base: &Path, export: &Path) -> Result<Patch, PatchError> {
    std::fs::create_dir_all(scratch).map_err(io_error("cannot create", scratch))?;
    for tree in [base, export] {
        if let Some(path) = find_git_entry(tree) {
            return Err(PatchError::GitEntry { path });
        }
    }
    scratch_git(scratch, &["init", "--quiet", "--bare", &scratch.join("patch.git").display().to_string()], None)?;
    let before = tree_of(scratch, base)?;
    let after = tree_of(scratch, export)?;
    let common = ["--no-ext-diff", "--no-textconv", "--no-color", "--find-renames", "--full-index"];
    let mut args = vec!["diff", "--binary"];
    args.extend(common);
    args.extend([before.as_str(), after.as_str()]);
    let text = scratch_git(scratch, &args, None)?;
    let mut args = vec!["diff", "--numstat", "-z"];
    args.extend(common);
    args.extend([before.as_str(), after.as_str()]);
    // Paths are UTF-8 by construction (provisioning withholds and the extractor rejects other
    // names); the counts are ASCII.
    let numstat = String::from_utf8_lossy(&scratch_git(scratch, &args, None)?).into_owned();
    let (mut insertions, mut deletions, mut files_changed, mut paths) = (0, 0, 0, Vec::new());
    // -z numstat: "ADD\tDEL\tPATH\0" or, for renames, "ADD\tDEL\t\0OLD\0NEW\0".
    let mut fields = numstat.split('\0').peekable();
    while let Some(record) = fields.next() {
        let mut parts = record.splitn(3, '\t');
        let (Some(added), Some(removed), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        files_changed += 1;
        insertions += added.parse::<u64>().unwrap_or(0);
        deletions += removed.parse::<u64>().unwrap_or(0);
        if path.is_empty() {
            paths.extend(fields.next().map(str::to_owned));
            paths.extend(fields.next().map(str::to_owned));
        } else {
            paths.push(path.to_owned());
        }
    }
    let sha256 = roundtable_specs::digest::sha256_hex(&text);
    Ok(Patch { text, sha256, files_changed, insertions, deletions, paths })
}

/// Checks that `patch` applies to `commit` of `repo` and that the result matches `export`
/// byte for byte, modes included, within the patch's paths.
pub fn verify(repo: &Path, commit: &str, patch: &Patch, export: &Path, scratch: &Path) -> Result<(), PatchError> {
    let checkout = scratch.join("verify");
    std::fs::create_dir_all(&checkout).map_err(io_error("cannot create", &checkout))?;
    let archive = git::run(repo, &["archive", "--format=tar", commit])?;
    tar::Archive::new(archive.stdout.as_slice())
        .unpack(&checkout)
        .map_err(|source| PatchError::Unpack { path: checkout.clone(), source })?;
    // Its own repository, so `git apply` never resolves paths against an enclosing one.
    git::run(&checkout, &["init", "--quiet"])?;
    let patch_file = scratch.join("proposal.patch");
    std::fs::write(&patch_file, &patch.text).map_err(io_error("cannot write", &patch_file))?;
    let patch_arg = patch_file.display().to_string();
    git::run(&checkout, &["apply", "--check", "--binary", &patch_arg])?;
    git::run(&checkout, &["apply", "--binary", &patch_arg])?;
    use std::os::unix::fs::PermissionsExt as _;
    for path in &patch.paths {
        let applied = checkout.join(path);
        let exported = export.join(path);
        match (std::fs::read(&applied), std::fs::read(&exported)) {
            (Ok(a), Ok(b)) if a == b => {
                let mode =
                    |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false);
                if mode(&applied) != mode(&exported) {
                    let what = "the executable bit differs after applying";
                    return Err(PatchError::Mismatch { path: path.clone(), what });
                }
            }
            (Err(_), Err(_)) => {}
            _ => {
                let what = "applying the patch does not reproduce the export";
                return Err(PatchError::Mismatch { path: path.clone(), what });
            }
        }
    }
    Ok(())
}
