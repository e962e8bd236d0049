//! The proposal's patch: `git diff --binary` semantics between the provisioned source and the
//! export (creates, deletes, renames, modes, binary files), built in a scratch git directory with
//! no user configuration, external diff, textconv or in-tree attributes; and the check that the
//! patch applied to the base commit reproduces the export byte for byte.
//!
//! Only the files that differ reach git: unchanged files are found by comparing bytes
//! ([`crate::changes`]), the two sides of the changed set become two small trees, and the diff
//! between them is the diff between the whole folders (renames pair deleted with added files
//! only, so files left alone take no part in it). The check applies the patch to the base commit
//! in a scratch index and compares tree ids, never unpacking a work tree.

use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::changes::{self, ChangesError};
use crate::git::{self, GitError};

/// Why a patch could not be made or did not verify.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{step} {path}")]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The two folders could not be compared, or one holds a `.git` entry.
    #[error(transparent)]
    Changes(#[from] ChangesError),
    /// Applying the patch to the base commit does not give back what the agent left.
    #[error("{path}: {what}")]
    Mismatch { path: String, what: &'static str },
}

fn io_error(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PatchError {
    let path = path.to_owned();
    move |source| PatchError::Io { step, path, source }
}

/// The tree git knows without storing it; in-tree `.gitattributes` are read from here instead.
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

/// A bare scratch repository: its own objects, optionally reading a source repository's objects
/// too (never writing there).
struct Scratch {
    dir: PathBuf,
    git_dir: PathBuf,
}

impl Scratch {
    /// Creates `dir/name.git`; `borrowed` is an objects folder it may read from.
    fn init(dir: &Path, name: &str, borrowed: Option<&Path>) -> Result<Self, PatchError> {
        std::fs::create_dir_all(dir).map_err(io_error("cannot create", dir))?;
        let git_dir = dir.join(format!("{name}.git"));
        let scratch = Scratch { dir: dir.to_owned(), git_dir };
        let path = scratch.git_dir.display().to_string();
        scratch.output(scratch.command(None, None).args(["init", "--quiet", "--bare", &path]), &["init"])?;
        if let Some(objects) = borrowed {
            let alternates = scratch.git_dir.join("objects/info/alternates");
            let mut line = objects.as_os_str().as_bytes().to_vec();
            line.push(b'\n');
            std::fs::write(&alternates, line).map_err(io_error("cannot write", &alternates))?;
        }
        Ok(scratch)
    }

    /// git on this repository with `index` as its index and `work_tree` as its work tree.
    fn command(&self, index: Option<&str>, work_tree: Option<&Path>) -> Command {
        let mut command = git::command(&self.dir);
        command
            .env("GIT_ATTR_SOURCE", EMPTY_TREE)
            .env("GIT_INDEX_FILE", self.dir.join(index.unwrap_or("unused.index")))
            .args(["-c", "core.excludesFile=/dev/null", "-c", "core.filemode=true", "-c", "core.symlinks=true"])
            .arg(format!("--git-dir={}", self.git_dir.display()));
        if let Some(tree) = work_tree {
            command.arg(format!("--work-tree={}", tree.display()));
        }
        command
    }

    /// Runs `args` with `index` and `work_tree`; standard output as bytes (a patch is bytes:
    /// file contents in any encoding pass through unchanged).
    fn git(&self, args: &[&str], index: Option<&str>, work_tree: Option<&Path>) -> Result<Vec<u8>, GitError> {
        self.output(self.command(index, work_tree).args(args), args)
    }

    fn output(&self, command: &mut Command, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        finish(child.map_err(|error| failed(args, None, error.to_string()))?, args)
    }

    /// Starts `args` reading `input` on its standard input (fed from a thread, so neither side
    /// waits on a full pipe); [`finish`] collects it.
    fn start(&self, args: &[&str], index: &str, work_tree: Option<&Path>, input: Vec<u8>) -> Result<Child, GitError> {
        let mut child = self
            .command(Some(index), work_tree)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| failed(args, None, error.to_string()))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A write error means git exited early; its status and stderr say why.
            std::thread::spawn(move || stdin.write_all(&input));
        }
        Ok(child)
    }

    fn tree(&self, index: &str) -> Result<String, GitError> {
        Ok(String::from_utf8_lossy(&self.git(&["write-tree"], Some(index), None)?).trim().to_owned())
    }
}

fn failed(args: &[&str], code: Option<i32>, stderr: String) -> GitError {
    GitError { args: args.join(" "), code, stderr }
}

/// Waits for `child`; its standard output, or the failure with its stderr.
fn finish(child: Child, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let output = child.wait_with_output().map_err(|error| failed(args, None, error.to_string()))?;
    if !output.status.success() {
        return Err(failed(args, output.status.code(), String::from_utf8_lossy(&output.stderr).trim().to_owned()));
    }
    Ok(output.stdout)
}

/// `paths` as git's `-z` input: each followed by NUL.
fn nul_terminated<'a>(paths: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut input = Vec::new();
    for path in paths {
        input.extend_from_slice(path);
        input.push(0);
    }
    input
}

/// Stages the NUL-separated paths on standard input from the work tree: a file there is hashed
/// and stored, a missing one removed. Scratch objects live for seconds, so they are stored
/// without compression; the same setting is git's level for the deflated data in `--binary`
/// patches, which is why the diff itself keeps git's default.
const STAGE: [&str; 7] = ["-c", "core.looseCompression=0", "update-index", "--add", "--remove", "-z", "--stdin"];

/// The most path bytes passed as arguments to one of the split diffs; past it, one diff.
const MAX_PATHSPEC_BYTES: usize = 128 * 1024;

/// The changed paths in groups, one `git diff` each, run at once; their outputs, concatenated in
/// order, are the single diff's byte for byte. Only when nothing can pair as a rename (no path
/// only deleted or nothing only added): renames pair across the whole set, and without them each
/// file's section depends on that file alone and sections come in path order, which is this
/// (byte) order.
fn diff_groups(found: &changes::Changes) -> Vec<Vec<&[u8]>> {
    let mut all: Vec<&[u8]> = found.in_before.iter().chain(&found.in_after).map(Vec::as_slice).collect();
    all.sort_unstable();
    all.dedup();
    let deleted = found.in_before.iter().any(|p| found.in_after.binary_search(p).is_err());
    let added = found.in_after.iter().any(|p| found.in_before.binary_search(p).is_err());
    let workers = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, 4);
    let bytes: usize = all.iter().map(|p| p.len() + 1).sum();
    if (deleted && added) || workers == 1 || all.len() < 2 || bytes > MAX_PATHSPEC_BYTES {
        return vec![Vec::new()];
    }
    all.chunks(all.len().div_ceil(workers)).map(<[&[u8]]>::to_vec).collect()
}

/// The patch that turns `base` into `export`; `scratch` is an empty folder it may use.
pub fn diff(scratch: &Path, base: &Path, export: &Path) -> Result<Patch, PatchError> {
    let found = changes::changes(base, export)?;
    let repo = Scratch::init(scratch, "patch", None)?;
    if found.in_before.is_empty() && found.in_after.is_empty() {
        return Ok(Patch {
            text: Vec::new(),
            sha256: roundtable_specs::digest::sha256_hex(b""),
            files_changed: 0,
            insertions: 0,
            deletions: 0,
            paths: Vec::new(),
        });
    }
    // Each side of the changed set as its own tree, hashed and stored by git from its folder;
    // both at once.
    let before = nul_terminated(found.in_before.iter().map(Vec::as_slice));
    let after = nul_terminated(found.in_after.iter().map(Vec::as_slice));
    let staging_before = repo.start(&STAGE, "before.index", Some(base), before)?;
    let staging_after = repo.start(&STAGE, "after.index", Some(export), after)?;
    finish(staging_before, &STAGE)?;
    finish(staging_after, &STAGE)?;
    let (before, after) = (repo.tree("before.index")?, repo.tree("after.index")?);
    let common = ["--no-ext-diff", "--no-textconv", "--no-color", "--find-renames", "--full-index"];
    let mut patch_args = vec!["diff", "--binary"];
    patch_args.extend(common);
    patch_args.extend([before.as_str(), after.as_str()]);
    let mut stat_args = vec!["diff", "--numstat", "-z"];
    stat_args.extend(common);
    stat_args.extend([before.as_str(), after.as_str()]);
    let spawn = |args: &[&str], paths: &[&[u8]]| {
        let mut command = repo.command(None, None);
        command.args(args);
        if !paths.is_empty() {
            // Literal pathspecs (the environment says so): a name is never a pattern.
            command.arg("--").args(paths.iter().map(|p| std::ffi::OsStr::from_bytes(p)));
        }
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| failed(args, None, e.to_string()))
    };
    // The statistics are a second diff of the same trees: run beside the patch, not after it.
    let patching: Vec<Child> =
        diff_groups(&found).iter().map(|group| spawn(&patch_args, group)).collect::<Result<_, _>>()?;
    let counting = spawn(&stat_args, &[])?;
    let mut text = Vec::new();
    for part in patching {
        text.extend(finish(part, &patch_args)?);
    }
    // Paths are UTF-8 by construction (provisioning withholds and the extractor rejects other
    // names); the counts are ASCII.
    let numstat = String::from_utf8_lossy(&finish(counting, &stat_args)?).into_owned();
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

/// Checks that `patch` applies to `commit` of `repo` and that the result is the base commit with
/// exactly the export's files at the patch's paths, byte for byte, modes included, and nothing
/// else changed: the patch applied to the commit in one scratch index, the export's files at
/// those paths staged over the commit in another, and the two tree ids compared.
pub fn verify(repo: &Path, commit: &str, patch: &Patch, export: &Path, scratch: &Path) -> Result<(), PatchError> {
    // The base commit's objects are read where they are (alternates), never copied or unpacked;
    // everything written goes to the scratch repository.
    let objects = git::text(repo, &["rev-parse", "--path-format=absolute", "--git-path", "objects"])?;
    let check = Scratch::init(scratch, "check", Some(Path::new(&objects)))?;
    let tree = format!("{commit}^{{tree}}");
    check.git(&["read-tree", &tree], Some("applied.index"), None)?;
    let (applied_index, expected_index) = (scratch.join("applied.index"), scratch.join("expected.index"));
    std::fs::copy(&applied_index, &expected_index).map_err(io_error("cannot copy", &applied_index))?;
    let patch_file = scratch.join("proposal.patch");
    std::fs::write(&patch_file, &patch.text).map_err(io_error("cannot write", &patch_file))?;
    let patch_arg = patch_file.display().to_string();
    // All or nothing: a hunk that does not apply fails the whole patch and changes no entry.
    // Beside it, the export's files at the patch's paths (present: hashed; absent: removed).
    let apply = ["-c", "core.looseCompression=0", "apply", "--cached", "--binary", &patch_arg];
    let applying = check.start(&apply, "applied.index", None, Vec::new())?;
    let paths = nul_terminated(patch.paths.iter().map(|p| p.as_bytes()));
    let staging = check.start(&STAGE, "expected.index", Some(export), paths)?;
    let applied = finish(applying, &apply);
    finish(staging, &STAGE)?;
    applied?;
    let (applied, expected) = (check.tree("applied.index")?, check.tree("expected.index")?);
    if applied == expected {
        return Ok(());
    }
    let differing = check.git(&["diff-tree", "-r", "-z", "--name-only", &applied, &expected], None, None)?;
    let path = differing.split(|b| *b == 0).find(|p| !p.is_empty()).unwrap_or_default();
    let what = "applying the patch to the base commit does not reproduce the export (content or mode)";
    Err(PatchError::Mismatch { path: String::from_utf8_lossy(path).into_owned(), what })
}
