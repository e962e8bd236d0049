//! Provisioning: resolve the revision to a commit, export exactly the readable paths at that
//! commit (never `.git`, symlinks or submodules), drop sensitive descendants, and record a
//! manifest of every file provided.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::{Deserialize, Serialize};

use crate::git::{self, GitError};

/// Why provisioning failed; every variant fails the execution closed.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("{repo} is not the top of a git work tree{}", .top.as_ref().map(|t| format!(" (the top is {t})")).unwrap_or_default())]
    NotWorkTreeTop { repo: PathBuf, top: Option<String> },
    #[error(
        "source.repo {repo:?}: with a git source (start --source) workspaces come from its mirror, one repository, so source.repo must be \".\""
    )]
    SubfolderOfMirror { repo: String },
    #[error("revision {revision:?} does not resolve to a commit in {repo}: {source}")]
    Revision {
        repo: PathBuf,
        revision: String,
        #[source]
        source: GitError,
    },
    #[error(
        "source.repo {repo} resolves to {resolved}, outside the project root {root} (symbolic links are followed); an agent is only given repositories inside the project"
    )]
    OutsideProjectRoot { repo: PathBuf, resolved: PathBuf, root: PathBuf },
    #[error("readablePaths entry {path:?} matches nothing at commit {commit}")]
    PathNotFound { path: String, commit: String },
    #[error("nothing to provide: every file under readablePaths was excluded; an empty scope fails closed")]
    EmptyScope,
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot write the provisioned source at {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("git printed something unexpected: {0}")]
    Protocol(String),
}

pub use roundtable_specs::session::{ManifestEntry, WithheldFile};

/// What was provided, and what was held back and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provisioned {
    pub commit: String,
    pub files: Vec<ManifestEntry>,
    /// Everything under readablePaths that was not provided, and why.
    pub withheld: Vec<WithheldFile>,
}

/// Names that are never provided, even under an allowed folder (matched case-insensitively
/// against each path component; `*` is a wildcard at either end).
const SENSITIVE_NAMES: [&str; 17] = [
    ".env*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_ed25519*",
    "id_ecdsa*",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    "credentials*",
    "kubeconfig*",
    "*.kdbx",
    "secrets.*",
    ".git",
];
/// Folders whose whole contents are never provided.
const SENSITIVE_FOLDERS: [&str; 3] = [".aws", ".ssh", ".gnupg"];

fn matches(pattern: &str, name: &str) -> bool {
    match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
        (Some(suffix), _) => name.ends_with(suffix),
        (None, Some(prefix)) => name.starts_with(prefix),
        (None, None) => name == pattern,
    }
}

/// Why a repository path is sensitive, if it is.
pub fn sensitive(path: &str) -> Option<String> {
    let lower = path.to_lowercase();
    let components: Vec<&str> = lower.split('/').collect();
    let (file, folders) = components.split_last()?;
    if let Some(folder) = folders.iter().find(|f| SENSITIVE_FOLDERS.contains(f) || **f == ".git") {
        return Some(format!("inside a {folder}/ folder"));
    }
    if lower == ".docker/config.json" || lower.ends_with("/.docker/config.json") {
        return Some("a Docker credentials file".into());
    }
    SENSITIVE_NAMES.iter().find(|pattern| matches(pattern, file)).map(|pattern| format!("matches {pattern}"))
}

/// `source.repo` resolved under `project_root`, refused unless its canonical path (every symbolic
/// link followed) lies inside the canonical project root. `validate` refuses the lexical forms
/// (`..` that climbs out); this catches symbolic links and what changed on disk since.
pub fn confine(project_root: &Path, repo: &str) -> Result<PathBuf, ProvisionError> {
    let root =
        project_root.canonicalize().map_err(|source| ProvisionError::Io { path: project_root.to_owned(), source })?;
    let joined = project_root.join(repo);
    let resolved = joined.canonicalize().map_err(|source| ProvisionError::Io { path: joined.clone(), source })?;
    if !resolved.starts_with(&root) {
        return Err(ProvisionError::OutsideProjectRoot { repo: joined, resolved, root });
    }
    Ok(resolved)
}

/// The repository an Assignment's `source.repo` names when workspaces come from the mirror of a
/// git source: only the mirror itself (`.`); a checkout's subfolder repository has no
/// counterpart there, and is refused rather than guessed.
pub fn from_mirror(mirror: &Path, repo: &str) -> Result<PathBuf, ProvisionError> {
    match repo.trim_end_matches('/') {
        "" | "." => Ok(mirror.to_owned()),
        other => Err(ProvisionError::SubfolderOfMirror { repo: other.to_owned() }),
    }
}

/// Whether `repo` is itself a bare repository (a git source's mirror), not a folder inside one.
fn is_bare_repository(repo: &Path) -> bool {
    let git_dir = git::text(repo, &["rev-parse", "--absolute-git-dir"]).ok();
    git::text(repo, &["rev-parse", "--is-bare-repository"]).is_ok_and(|bare| bare == "true")
        && git_dir.map(PathBuf::from).and_then(|dir| dir.canonicalize().ok()).is_some_and(|dir| dir == repo)
}

/// Resolves `revision` in `repo` (the top of a work tree, or a bare mirror) to a full commit ID.
pub fn resolve(repo: &Path, revision: &str) -> Result<String, ProvisionError> {
    let canonical = repo.canonicalize().map_err(|source| ProvisionError::Io { path: repo.to_owned(), source })?;
    let top = git::text(&canonical, &["rev-parse", "--show-toplevel"]).ok();
    let is_top = top.as_deref().map(Path::new).and_then(|t| t.canonicalize().ok()).is_some_and(|t| t == canonical);
    if !is_top && !is_bare_repository(&canonical) {
        return Err(ProvisionError::NotWorkTreeTop { repo: repo.to_owned(), top });
    }
    let spec = format!("{revision}^{{commit}}");
    git::text(&canonical, &["rev-parse", "--verify", "--quiet", "--end-of-options", &spec])
        .map_err(|source| ProvisionError::Revision { repo: repo.to_owned(), revision: revision.to_owned(), source })
}

struct TreeEntry {
    mode: String,
    kind: String,
    object: String,
    /// The path as git stores it: bytes, not necessarily UTF-8.
    path: Vec<u8>,
}

fn list_tree(repo: &Path, commit: &str, paths: &[String]) -> Result<Vec<TreeEntry>, ProvisionError> {
    let mut args = vec!["ls-tree", "-r", "-z", "--full-tree", commit, "--"];
    args.extend(paths.iter().map(String::as_str));
    let output = git::run(repo, &args)?;
    let mut entries = Vec::new();
    for record in output.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let protocol = || ProvisionError::Protocol(String::from_utf8_lossy(record).into_owned());
        let tab = record.iter().position(|b| *b == b'\t').ok_or_else(protocol)?;
        let (meta, path) = (std::str::from_utf8(&record[..tab]).map_err(|_| protocol())?, &record[tab + 1..]);
        let mut fields = meta.split(' ');
        let (Some(mode), Some(kind), Some(object)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(protocol());
        };
        entries.push(TreeEntry { mode: mode.into(), kind: kind.into(), object: object.into(), path: path.to_vec() });
    }
    Ok(entries)
}

/// Every path of `commit`'s whole tree that is valid UTF-8: what a proposal may not add as new
/// (a file the agent was not given that exists at the base).
pub fn commit_paths(repo: &Path, commit: &str) -> Result<std::collections::BTreeSet<String>, ProvisionError> {
    let output = git::run(repo, &["ls-tree", "-r", "-z", "--full-tree", "--name-only", commit])?;
    Ok(output
        .stdout
        .split(|b| *b == 0)
        .filter(|r| !r.is_empty())
        .filter_map(|path| std::str::from_utf8(path).ok().map(str::to_owned))
        .collect())
}

/// A tree entry whose path is valid UTF-8 without control characters.
struct Named {
    mode: String,
    kind: String,
    object: String,
    path: String,
}

/// Why `path` (as a tree lists it) is not a plain relative path of named parts, if it is not: an
/// empty part, `.` or `..`, or a leading `/`.
fn not_a_plain_path(path: &[u8]) -> Option<&'static str> {
    if path.first() == Some(&b'/') {
        return Some("an absolute path");
    }
    path.split(|b| *b == b'/').find_map(|part| match part {
        b"" => Some("an empty part in the path"),
        b"." | b".." => Some("'.' or '..' in the path"),
        _ => None,
    })
}

/// Whether `entry` lies under the readable path `scope` (a file, or a folder with or without `/`).
fn within(path: &str, scope: &str) -> bool {
    let scope = scope.trim_end_matches('/').trim_start_matches("./");
    scope.is_empty() || scope == "." || path == scope || path.starts_with(&format!("{scope}/"))
}

/// Exports `readable_paths` of `commit` into `dest` (created; must not exist).
pub fn export(
    repo: &Path,
    commit: &str,
    readable_paths: &[String],
    dest: &Path,
) -> Result<Provisioned, ProvisionError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ProvisionError::Io { path, source }
    };
    let entries = list_tree(repo, commit, readable_paths)?;
    for scope in readable_paths {
        if !entries.iter().any(|entry| within(&String::from_utf8_lossy(&entry.path), scope)) {
            return Err(ProvisionError::PathNotFound { path: scope.clone(), commit: commit.into() });
        }
    }
    let mut withheld = Vec::new();
    let mut wanted = Vec::new();
    for raw in entries {
        // A name the way back cannot carry (not UTF-8, control characters) is withheld, so the
        // agent never sees it under another name and the proposal leaves it unchanged.
        if let Some(problem) = crate::extract::name_problem(&raw.path) {
            let path = crate::extract::escape_name(&raw.path);
            let reason = format!("{problem}: not provided; proposals leave it unchanged");
            withheld.push(WithheldFile { path, reason });
            continue;
        }
        // git stores a tree entry named `..` or `.` when its objects are written by hand, and
        // `ls-tree` lists it as is: joined to the destination, it would write outside it.
        if let Some(problem) = not_a_plain_path(&raw.path) {
            let path = crate::extract::escape_name(&raw.path);
            withheld
                .push(WithheldFile { path, reason: format!("{problem}: not provided; proposals leave it unchanged") });
            continue;
        }
        let entry = Named {
            mode: raw.mode,
            kind: raw.kind,
            object: raw.object,
            path: String::from_utf8_lossy(&raw.path).into_owned(),
        };
        if let Some(why) = sensitive(&entry.path) {
            withheld.push(WithheldFile { path: entry.path, reason: format!("sensitive: {why}") });
        } else if entry.kind != "blob" {
            withheld.push(WithheldFile {
                path: entry.path,
                reason: format!("a {} (submodules are not provided)", entry.kind),
            });
        } else if entry.mode == "120000" {
            withheld.push(WithheldFile { path: entry.path, reason: "a symbolic link (links are not provided)".into() });
        } else {
            wanted.push(entry);
        }
    }
    if wanted.is_empty() {
        return Err(ProvisionError::EmptyScope);
    }
    std::fs::create_dir_all(dest).map_err(io(dest))?;
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755)).map_err(io(dest))?;

    // One `git cat-file --batch` for every blob.
    let mut child = git::command(repo)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io(repo))?;
    let mut stdin = child.stdin.take().ok_or_else(|| ProvisionError::Protocol("no stdin".into()))?;
    let ids: String = wanted.iter().map(|e| format!("{}\n", e.object)).collect();
    let writer = std::thread::spawn(move || stdin.write_all(ids.as_bytes()));
    let mut reader = BufReader::new(child.stdout.take().ok_or_else(|| ProvisionError::Protocol("no stdout".into()))?);
    let mut files = Vec::with_capacity(wanted.len());
    for entry in &wanted {
        let mut header = String::new();
        reader.read_line(&mut header).map_err(io(repo))?;
        let size: u64 = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ProvisionError::Protocol(header.trim().to_owned()))?;
        let mut contents = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        (&mut reader).take(size).read_to_end(&mut contents).map_err(io(repo))?;
        let mut newline = [0u8; 1];
        reader.read_exact(&mut newline).map_err(io(repo))?;
        let target = dest.join(&entry.path);
        if let Some(parent) = target.parent() {
            create_readable_dirs(dest, parent)?;
        }
        std::fs::write(&target, &contents).map_err(io(&target))?;
        let executable = entry.mode == "100755";
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(if executable { 0o755 } else { 0o644 }))
            .map_err(io(&target))?;
        files.push(ManifestEntry {
            path: entry.path.clone(),
            size,
            sha256: roundtable_specs::digest::sha256_hex(&contents),
            executable,
        });
    }
    let _ = writer.join();
    let _ = child.wait();
    Ok(Provisioned { commit: commit.into(), files, withheld })
}

/// Creates `folder` and its missing parents below `dest` with mode 0755, whatever the
/// controller's umask: the agent's user reads the tree through the container's source mount
/// (and seeds its workspace from it).
fn create_readable_dirs(dest: &Path, folder: &Path) -> Result<(), ProvisionError> {
    if folder == dest || folder.is_dir() {
        return Ok(());
    }
    if let Some(parent) = folder.parent() {
        create_readable_dirs(dest, parent)?;
    }
    let failed = |source| ProvisionError::Io { path: folder.to_owned(), source };
    std::fs::create_dir(folder).map_err(failed)?;
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755)).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_names_and_folders() {
        for path in [
            ".env",
            "config/.env.local",
            "certs/server.pem",
            "a/b/tls.KEY",
            "keys/id_rsa.pub",
            "home/.ssh/config",
            "x/.aws/credentials",
            ".docker/config.json",
            "deploy/kubeconfig-prod",
            "vault.kdbx",
            "secrets.yaml",
            "credentials.json",
            ".npmrc",
            "sub/.git/config",
        ] {
            assert!(sensitive(path).is_some(), "{path} should be withheld");
        }
        for path in ["README.md", "docs/environment.md", "src/keys.rs", "docker/config.json", "secretsauce.md"] {
            assert_eq!(sensitive(path), None, "{path} should be provided");
        }
    }

    #[test]
    fn scopes_match_files_and_folders() {
        assert!(within("docs/a.md", "docs/"));
        assert!(within("docs/a.md", "docs"));
        assert!(within("README.md", "README.md"));
        assert!(!within("docsx/a.md", "docs"));
        assert!(within("anything", "."));
    }

    #[test]
    fn a_repository_outside_the_project_root_is_refused_after_following_links() {
        let base = tempfile::tempdir().expect("tempdir");
        let project = base.path().join("project");
        let elsewhere = base.path().join("elsewhere");
        std::fs::create_dir_all(project.join("services/api")).expect("mkdir");
        std::fs::create_dir_all(&elsewhere).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, project.join("linked")).expect("symlink");
        std::os::unix::fs::symlink("../..", project.join("services/up")).expect("symlink");

        let inside = confine(&project, "services/api").expect("inside");
        assert!(inside.ends_with("project/services/api"), "{}", inside.display());
        assert!(confine(&project, ".").is_ok(), "the root itself");
        for repo in ["linked", "services/up", "..", "services/../../elsewhere"] {
            let error = confine(&project, repo).expect_err(repo);
            assert!(matches!(error, ProvisionError::OutsideProjectRoot { .. }), "{repo}: {error}");
            assert!(error.to_string().contains("outside the project root"), "{error}");
        }
    }

    #[test]
    fn a_bare_mirror_resolves_and_exports_but_a_folder_inside_it_does_not() {
        let base = tempfile::tempdir().expect("tempdir");
        let work = base.path().join("work");
        std::fs::create_dir_all(&work).expect("mkdir");
        let git_in = |dir: &Path, args: &[&str]| {
            let out =
                git::command(dir).args(["-c", "user.name=t", "-c", "user.email=t@t"]).args(args).output().expect("git");
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        std::fs::write(work.join("README.md"), "# r\n").expect("write");
        git_in(&work, &["init", "-q", "-b", "main"]);
        git_in(&work, &["add", "-A"]);
        git_in(&work, &["commit", "-q", "-m", "base"]);
        git_in(base.path(), &["clone", "-q", "--bare", "work", "mirror.git"]);
        let mirror = base.path().join("mirror.git");
        let commit = resolve(&mirror, "HEAD").expect("a bare mirror resolves");
        assert_eq!(commit.len(), 40);
        let dest = base.path().join("out");
        let provided = export(&mirror, &commit, &["README.md".into()], &dest).expect("exports");
        assert_eq!(provided.files.len(), 1);
        assert_eq!(std::fs::read_to_string(dest.join("README.md")).expect("read"), "# r\n");
        std::fs::create_dir_all(mirror.join("refs/sub")).expect("mkdir");
        assert!(matches!(resolve(&mirror.join("refs"), "HEAD"), Err(ProvisionError::NotWorkTreeTop { .. })));
        assert_eq!(from_mirror(&mirror, ".").expect("the mirror"), mirror);
        let refused = from_mirror(&mirror, "sub/repo").expect_err("a subfolder has no counterpart");
        assert!(refused.to_string().contains("source.repo must be"), "{refused}");
    }
}
