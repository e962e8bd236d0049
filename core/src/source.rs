//! The spec source: reading a spec directory from disk (which files count, size limits), handing
//! the text to the `specs` crate, and deciding which files load cleanly.

use std::collections::{BTreeSet, HashMap};
use std::fs::FileType;
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use roundtable_specs::digest::{execution_digest, object_digest};
use roundtable_specs::parse::{file_error, parse_file};
use roundtable_specs::validate::{sort_findings, validate_across, validate_object};
use roundtable_specs::yaml::MAX_FILE_BYTES;
use roundtable_specs::{Object, Severity, ValidationError};

/// Folders directly under the spec directory that never hold specs.
const SKIPPED_FOLDERS: [&str; 3] = ["state", "admission", "contracts"];

/// Everything read from a spec directory. Objects are shared with the scan cache: a rescan
/// hands out the parses of unchanged files without copying them.
#[derive(Debug, Default)]
pub struct Loaded {
    pub objects: Vec<Arc<Object>>,
    pub errors: Vec<ValidationError>,
    pub files: usize,
}

fn is_spec_file(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

/// Whether an entry named like a spec file is read (and judged) as one: anything but a folder, a
/// symbolic link to a folder (folder links are never followed) or a link to nothing (editors'
/// lock files are such links). FIFOs, devices and links leaving the project are taken, so that
/// reading them can refuse them by name.
fn is_candidate(path: &Path, file_type: FileType) -> bool {
    if file_type.is_dir() {
        return false;
    }
    if file_type.is_symlink() {
        return std::fs::metadata(path).is_ok_and(|target| !target.is_dir());
    }
    true
}

/// Every spec file under `dir`, sorted, skipping `state/`, `admission/` and `contracts/` at the top
/// and never following symbolic links to folders.
fn spec_files(dir: &Path, errors: &mut Vec<ValidationError>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(error) => {
                errors.push(file_error(&folder.display().to_string(), format!("cannot read folder: {error}")));
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_dir() {
                let top_level_skip =
                    folder == dir && entry.file_name().to_str().is_some_and(|name| SKIPPED_FOLDERS.contains(&name));
                if !top_level_skip {
                    pending.push(path);
                }
            } else if is_spec_file(&path) && is_candidate(&path, file_type) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// One file's objects with their digests (spec, run fields) and the findings of the rules
/// about each object alone, as parsed from its content.
#[derive(Debug, Clone)]
struct ParsedEntry {
    content_hash: String,
    objects: Vec<Arc<Object>>,
    /// Why the file does not read or parse.
    errors: Vec<ValidationError>,
    /// [`validate_object`] of each object: the cross-object rules are checked on every scan.
    findings: Vec<ValidationError>,
    digests: Vec<Arc<ObjectDigests>>,
}

/// The whole-spec digest and the run-fields digest of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectDigests {
    pub spec: String,
    pub execution: Option<String>,
}

/// Parsed files by path and content hash, so a rescan parses only what changed.
#[derive(Debug, Default)]
pub struct ScanCache {
    files: HashMap<PathBuf, ParsedEntry>,
}

/// `open(2)` flags for reading a spec file: a FIFO must never keep the scan waiting for a writer,
/// and a terminal must never become the controlling one. These are Linux's values on every
/// architecture Roundtable builds for (x86_64, aarch64).
const O_NONBLOCK: i32 = 0o4000;
const O_NOCTTY: i32 = 0o400;

/// What a file that is not a regular file is, for messages.
fn kind_of(file_type: FileType) -> &'static str {
    if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// Why the spec file at `path` is refused before anything of it is read: a symbolic link whose
/// target leaves the project root `root`, or anything but a regular file (a FIFO, a device, a
/// socket). Such a file is named, never read and never printed.
fn refused_before_reading(path: &Path, root: &Path) -> Result<(), String> {
    let link = std::fs::symlink_metadata(path).map_err(|error| format!("cannot read: {error}"))?;
    if link.file_type().is_symlink() {
        let target = path.canonicalize().map_err(|error| format!("cannot follow the symbolic link: {error}"))?;
        if !target.starts_with(root) {
            return Err(format!(
                "a symbolic link to a file outside the project root {}; spec files must stay inside it (not read)",
                root.display()
            ));
        }
    }
    let meta = std::fs::metadata(path).map_err(|error| format!("cannot read: {error}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{}, not a regular file; spec files must be regular files (not read)",
            kind_of(meta.file_type())
        ));
    }
    if meta.len() > MAX_FILE_BYTES as u64 {
        return Err(format!("file is {} bytes; spec files are limited to {MAX_FILE_BYTES} bytes", meta.len()));
    }
    Ok(())
}

/// Opens `path` for reading without waiting on a FIFO, and refuses what turns out, once open, not
/// to be a regular file.
fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK | O_NOCTTY)
        .open(path)
        .map_err(|error| format!("cannot read: {error}"))?;
    let meta = file.metadata().map_err(|error| format!("cannot read: {error}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{}, not a regular file; spec files must be regular files (not read)",
            kind_of(meta.file_type())
        ));
    }
    Ok(file)
}

/// Reads one spec file, refusing (by name, without reading) what [`refused_before_reading`]
/// refuses. The file is opened without blocking and checked again once open, so a file swapped
/// for a FIFO in between neither blocks the scan nor gets read.
fn read_file(path: &Path, root: &Path, shown: &str, errors: &mut Vec<ValidationError>) -> Option<String> {
    let read = || -> Result<Vec<u8>, String> {
        refused_before_reading(path, root)?;
        let mut file = open_regular(path)?;
        let mut bytes = Vec::new();
        (&mut file)
            .take(MAX_FILE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| format!("cannot read: {error}"))?;
        if bytes.len() > MAX_FILE_BYTES {
            return Err(format!(
                "file is over {MAX_FILE_BYTES} bytes; spec files are limited to {MAX_FILE_BYTES} bytes"
            ));
        }
        Ok(bytes)
    };
    let bytes = match read() {
        Ok(bytes) => bytes,
        Err(message) => {
            errors.push(file_error(shown, message));
            return None;
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(_) => {
            errors.push(file_error(shown, "not valid UTF-8"));
            None
        }
    }
}

/// Which files a targeted rescan reads: every cached file plus the changed ones that exist; `None`
/// when a changed path is not a plain spec file of `dir` (a folder, anything else), which needs a
/// full walk.
fn targeted_files(dir: &Path, cache: &ScanCache, changed: &[PathBuf]) -> Option<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = cache.files.keys().filter(|p| !changed.contains(p)).cloned().collect();
    for path in changed {
        let relative = path.strip_prefix(dir).ok()?;
        let top = relative.components().next()?.as_os_str().to_str()?;
        if SKIPPED_FOLDERS.contains(&top) && relative.components().count() > 1 {
            continue;
        }
        if !is_spec_file(path) || path.is_dir() {
            return None;
        }
        if let Ok(meta) = path.symlink_metadata()
            && is_candidate(path, meta.file_type())
        {
            files.push(path.clone());
        }
    }
    files.sort();
    Some(files)
}

/// What [`load_with`] reads: the objects and their digests, and the findings of the per-object
/// rules, fresh for changed files and kept for the rest.
#[derive(Debug, Default)]
struct LoadedWith {
    loaded: Loaded,
    digests: Vec<Arc<ObjectDigests>>,
    object_findings: Vec<ValidationError>,
}

fn load_with(dir: &Path, cache: &mut ScanCache, changed: Option<&[PathBuf]>) -> LoadedWith {
    let mut out = LoadedWith::default();
    let LoadedWith { loaded, digests, object_findings } = &mut out;
    if !dir.is_dir() {
        loaded.errors.push(file_error(
            &dir.display().to_string(),
            "spec directory not found (run `roundtable init`, or pass --dir)",
        ));
        return out;
    }
    let targeted = changed.and_then(|changed| targeted_files(dir, cache, changed).map(|files| (files, changed)));
    let (files, trusted): (Vec<PathBuf>, Option<&[PathBuf]>) = match targeted {
        Some((files, changed)) => (files, Some(changed)),
        None => (spec_files(dir, &mut loaded.errors), None),
    };
    let root = match Project::resolve(dir) {
        Ok(project) => project.root,
        Err(error) => {
            loaded.errors.push(file_error(&dir.display().to_string(), error.to_string()));
            return out;
        }
    };
    let mut next_cache = HashMap::new();
    for path in files {
        loaded.files += 1;
        // Unchanged files of a targeted rescan come from the cache unread.
        let cached = match trusted {
            Some(changed) if !changed.contains(&path) => cache.files.remove(&path),
            _ => None,
        };
        let entry = match cached {
            Some(entry) => entry,
            None => {
                let shown = path.display().to_string();
                let mut read_errors = Vec::new();
                let Some(text) = read_file(&path, &root, &shown, &mut read_errors) else {
                    // Kept in the cache so a targeted rescan still reports the file.
                    loaded.errors.extend(read_errors.iter().cloned());
                    let unreadable = ParsedEntry {
                        content_hash: String::new(),
                        objects: Vec::new(),
                        errors: read_errors,
                        findings: Vec::new(),
                        digests: Vec::new(),
                    };
                    next_cache.insert(path, unreadable);
                    continue;
                };
                let content_hash = roundtable_specs::digest::sha256_hex(text.as_bytes());
                match cache.files.remove(&path) {
                    Some(entry) if entry.content_hash == content_hash => entry,
                    _ => {
                        let relative = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy().into_owned();
                        let parsed = parse_file(&shown, &relative, &text);
                        let digests = parsed
                            .objects
                            .iter()
                            .map(|object| {
                                Arc::new(ObjectDigests {
                                    spec: object_digest(object),
                                    execution: execution_digest(object),
                                })
                            })
                            .collect();
                        let findings = parsed.objects.iter().flat_map(validate_object).collect();
                        let objects = parsed.objects.into_iter().map(Arc::new).collect();
                        ParsedEntry { content_hash, objects, errors: parsed.errors, findings, digests }
                    }
                }
            }
        };
        loaded.objects.extend(entry.objects.iter().cloned());
        loaded.errors.extend(entry.errors.iter().cloned());
        object_findings.extend(entry.findings.iter().cloned());
        digests.extend(entry.digests.iter().cloned());
        next_cache.insert(path, entry);
    }
    cache.files = next_cache;
    out
}

/// Reads and parses every spec file under `dir`. A missing directory is an error, not an
/// empty project.
pub fn load(dir: &Path) -> Loaded {
    load_with(dir, &mut ScanCache::default(), None).loaded
}

/// A scan: the loaded objects, every finding, and which files carry errors.
#[derive(Debug, Default)]
pub struct Scan {
    pub objects: Vec<Arc<Object>>,
    /// The digests of `objects`, index for index.
    pub digests: Vec<Arc<ObjectDigests>>,
    /// Parse errors and validation findings, by file and position.
    pub findings: Vec<ValidationError>,
    pub files: usize,
    /// Files with at least one error: their objects are not accepted, and whatever they
    /// declared before keeps its last valid spec.
    pub broken_files: BTreeSet<String>,
}

impl Scan {
    /// The objects of files that load cleanly.
    pub fn accepted(&self) -> impl Iterator<Item = &Object> {
        self.accepted_with_digests().map(|(object, _)| object)
    }

    /// Accepted objects with their digests.
    pub fn accepted_with_digests(&self) -> impl Iterator<Item = (&Object, &ObjectDigests)> {
        self.objects
            .iter()
            .map(Arc::as_ref)
            .zip(self.digests.iter().map(Arc::as_ref))
            .filter(|(object, _)| !self.broken_files.contains(&*object.origin.file))
    }

    pub fn errors(&self) -> impl Iterator<Item = &ValidationError> {
        self.findings.iter().filter(|finding| finding.severity == Severity::Error)
    }
}

/// Loads and validates the spec directory.
pub fn scan(dir: &Path) -> Scan {
    scan_cached(dir, &mut ScanCache::default())
}

/// [`scan`], parsing only the files whose content changed since the cache saw them.
pub fn scan_cached(dir: &Path, cache: &mut ScanCache) -> Scan {
    scan_changed(dir, cache, None)
}

/// [`scan_cached`] that reads only `changed` files (as file-watch events named them) and trusts
/// the cache for the rest; a changed path that is not a plain spec file falls back to a full walk.
pub fn scan_changed(dir: &Path, cache: &mut ScanCache, changed: Option<&[PathBuf]>) -> Scan {
    let LoadedWith { loaded, digests, object_findings } = load_with(dir, cache, changed);
    let mut findings = loaded.errors;
    findings.extend(object_findings);
    findings.extend(validate_across(&loaded.objects));
    sort_findings(&mut findings);
    let broken_files = findings.iter().filter(|f| f.severity == Severity::Error).map(|f| f.file.clone()).collect();
    Scan { objects: loaded.objects, digests, findings, files: loaded.files, broken_files }
}

/// Why a spec directory names no project.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error("cannot resolve the spec directory {dir} against the current directory")]
    CurrentDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the spec directory {dir} has no parent folder to be the project root (pass --dir PROJECT/.roundtable)")]
    NoParent { dir: PathBuf },
    #[error("cannot resolve the project root {root} (the folder holding the spec directory {dir}); it must exist")]
    Root {
        root: PathBuf,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A project as one resolution names it: its spec directory (as given), its root (the folder
/// holding the spec directory, canonical) and its id (derived from the root alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub spec_dir: PathBuf,
    pub root: PathBuf,
    /// The first 12 hex characters of the SHA-256 of the root's canonical path: the name of the
    /// project's audit key, execution root and container labels.
    pub id: String,
}

impl Project {
    /// Resolves the project of the spec directory `dir`, which need not exist yet (`init` names
    /// the key before it creates the folder): only the root is canonicalised, and it must exist.
    /// A spec directory named by `..` (or `/`) is canonicalised itself, and so must exist.
    pub fn resolve(dir: &Path) -> Result<Self, ProjectError> {
        use std::path::Component;
        let absolute =
            std::path::absolute(dir).map_err(|source| ProjectError::CurrentDir { dir: dir.to_owned(), source })?;
        let root = match absolute.components().next_back() {
            Some(Component::Normal(_)) => {
                let parent = absolute.parent().ok_or_else(|| ProjectError::NoParent { dir: dir.to_owned() })?;
                canonical_root(parent, dir)?
            }
            _ => {
                let canonical = canonical_root(&absolute, dir)?;
                canonical
                    .parent()
                    .map(Path::to_path_buf)
                    .ok_or_else(|| ProjectError::NoParent { dir: dir.to_owned() })?
            }
        };
        let id = roundtable_specs::digest::sha256_hex(root.as_os_str().as_encoded_bytes())[..12].to_owned();
        Ok(Self { spec_dir: dir.to_owned(), root, id })
    }
}

fn canonical_root(root: &Path, dir: &Path) -> Result<PathBuf, ProjectError> {
    root.canonicalize().map_err(|source| ProjectError::Root { root: root.to_owned(), dir: dir.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADAPTER: &str = "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: mock}\nspec: {}\n";

    #[test]
    fn a_project_is_named_by_its_root_whether_or_not_its_spec_folder_exists_yet() {
        let project = tempfile::tempdir().expect("tempdir");
        let root = project.path().canonicalize().expect("canonical");
        let dir = project.path().join(".roundtable");
        let before = Project::resolve(&dir).expect("resolves before the folder exists");
        std::fs::create_dir(&dir).expect("mkdir");
        let after = Project::resolve(&dir).expect("resolves after");
        assert_eq!(before, after);
        assert_eq!(after.root, root);
        assert_ne!(after.id, "e3b0c44298fc", "the SHA-256 of an empty root");
        // The spec folder named through `..` is its canonical self.
        std::fs::create_dir(dir.join("sub")).expect("mkdir");
        assert_eq!(Project::resolve(&dir.join("sub/..")).expect("resolves").id, after.id);
        let other = tempfile::tempdir().expect("tempdir");
        assert_ne!(Project::resolve(&other.path().join(".roundtable")).expect("resolves").id, after.id);
    }

    #[test]
    fn a_spec_folder_whose_root_does_not_exist_is_an_error_naming_the_root() {
        let project = tempfile::tempdir().expect("tempdir");
        let missing = project.path().join("gone/.roundtable");
        let error = Project::resolve(&missing).expect_err("no root");
        assert!(error.to_string().contains(&project.path().join("gone").display().to_string()), "{error}");
    }

    fn messages(scan: &Scan) -> Vec<String> {
        scan.errors().map(ToString::to_string).collect()
    }

    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo");
        assert!(status.success(), "mkfifo {}", path.display());
    }

    #[test]
    fn spec_files_that_leave_the_project_or_are_not_regular_are_named_and_never_read() {
        let project = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let dir = project.path().join(".roundtable");
        std::fs::create_dir_all(dir.join("nested")).expect("mkdir");
        std::fs::write(dir.join("ok.yaml"), ADAPTER).expect("write");
        // Inside the project root: a link is fine.
        std::fs::create_dir_all(project.path().join("common")).expect("mkdir");
        std::fs::write(project.path().join("common/policy.yaml"), ADAPTER.replace("mock", "generic")).expect("write");
        std::os::unix::fs::symlink("../common/policy.yaml", dir.join("linked.yaml")).expect("symlink");
        // Outside it: refused, its content never shown.
        std::fs::write(outside.path().join("secret.yaml"), "token: SECRET-CONTENT\n").expect("write");
        std::os::unix::fs::symlink(outside.path().join("secret.yaml"), dir.join("leak.yaml")).expect("symlink");
        std::os::unix::fs::symlink("/dev/zero", dir.join("nested/zero.yml")).expect("symlink");
        // Not a regular file: refused without blocking.
        mkfifo(&dir.join("pipe.yaml"));
        std::os::unix::fs::symlink("pipe.yaml", dir.join("pipe-link.yaml")).expect("symlink");
        // Links to nothing (editors' lock files) and to folders are skipped, as before.
        std::os::unix::fs::symlink("nowhere", dir.join(".#ok.yaml")).expect("symlink");
        std::os::unix::fs::symlink(outside.path(), dir.join("folder.yaml")).expect("symlink");

        let scan = scan(&dir);
        let found = messages(&scan);
        let names: Vec<String> = scan.accepted().map(|o| o.metadata.name.clone()).collect();
        assert_eq!(names, ["generic", "mock"], "{found:#?}");
        let about =
            |file: &str| found.iter().filter(|m| m.contains(&format!("/{file}:0:0: "))).cloned().collect::<Vec<_>>();
        for file in ["leak.yaml", "nested/zero.yml"] {
            let message = about(file);
            assert_eq!(message.len(), 1, "{file}: {found:#?}");
            assert!(message[0].contains("outside the project root"), "{message:?}");
        }
        for file in ["pipe.yaml", "pipe-link.yaml"] {
            let message = about(file);
            assert_eq!(message.len(), 1, "{file}: {found:#?}");
            assert!(message[0].contains("a FIFO, not a regular file"), "{message:?}");
        }
        assert_eq!(found.len(), 4, "{found:#?}");
        assert!(!found.iter().any(|m| m.contains("SECRET")), "{found:#?}");

        // A targeted rescan of the same paths says the same.
        let mut cache = ScanCache::default();
        let _ = scan_cached(&dir, &mut cache);
        let changed = [dir.join("pipe.yaml"), dir.join("leak.yaml")];
        let rescanned = scan_changed(&dir, &mut cache, Some(&changed));
        assert_eq!(messages(&rescanned), found);
    }

    #[test]
    fn opening_a_fifo_never_blocks_and_is_refused() {
        // What a file swapped for a FIFO after the first check meets: the open does not wait for
        // a writer, and the check once open refuses it.
        let project = tempfile::tempdir().expect("tempdir");
        let fifo = project.path().join("pipe.yaml");
        mkfifo(&fifo);
        let started = std::time::Instant::now();
        let refused = open_regular(&fifo).map(|_| ()).expect_err("a FIFO is not a regular file");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert!(refused.contains("a FIFO"), "{refused}");
    }
}
