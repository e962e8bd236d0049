//! Scanning the spec source: reading a spec directory from disk (which files count, size limits), handing
//! the text to the `specs` crate, and deciding which files load cleanly. The directory is a
//! working tree, or the tree of a commit exported by [`tree`] (`--committed`, `--source`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::FileType;
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use roundtable_specs::digest::{execution_digest, object_digest};
use roundtable_specs::parse::{file_error, parse_file};
use roundtable_specs::validate::{Across, sort_findings, validate_across_apart, validate_object};
use roundtable_specs::yaml::MAX_FILE_BYTES;
use roundtable_specs::{Object, ObjectKey, Severity, ValidationError};

use crate::{Project, ProjectError};

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

/// Why nothing of the spec directory `dir` is read: it does not exist, or (`unresolved`) names
/// no project. `None` when it can be read.
fn unreadable(dir: &Path, unresolved: Option<&ProjectError>) -> Option<ValidationError> {
    if !dir.is_dir() {
        return Some(file_error(
            &dir.display().to_string(),
            "spec directory not found (run `roundtable init`, or pass --dir)",
        ));
    }
    unresolved.map(|error| file_error(&dir.display().to_string(), error.to_string()))
}

/// How a spec file is named in findings and as its objects' source: as given for a working tree;
/// in the tree of a followed commit, by its path in the repository (`.roundtable/work.yaml`), not
/// by where the commit was exported. The commit itself is the `Source` row's, so a name stays the
/// same from commit to commit.
fn shown_name(project: &Project, path: &Path) -> String {
    let exported = project.root.join(crate::tree::CURRENT);
    match path.strip_prefix(&exported) {
        Ok(in_repository) if project.spec_dir.starts_with(&exported) => in_repository.display().to_string(),
        _ => path.display().to_string(),
    }
}

fn load_with(project: &Project, cache: &mut ScanCache, changed: Option<&[PathBuf]>) -> LoadedWith {
    let mut out = LoadedWith::default();
    let LoadedWith { loaded, digests, object_findings } = &mut out;
    let (dir, root) = (project.spec_dir.as_path(), project.root.as_path());
    if let Some(error) = unreadable(dir, None) {
        loaded.errors.push(error);
        return out;
    }
    let targeted = changed.and_then(|changed| targeted_files(dir, cache, changed).map(|files| (files, changed)));
    let (files, trusted): (Vec<PathBuf>, Option<&[PathBuf]>) = match targeted {
        Some((files, changed)) => (files, Some(changed)),
        None => (spec_files(dir, &mut loaded.errors), None),
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
                let shown = shown_name(project, &path);
                let mut read_errors = Vec::new();
                let Some(text) = read_file(&path, root, &shown, &mut read_errors) else {
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
                        // Collected into a new vector: one made in place would keep the parsed
                        // objects' whole buffer (552 bytes a slot) to hold 8-byte pointers.
                        let mut objects = Vec::with_capacity(parsed.objects.len());
                        objects.extend(parsed.objects.into_iter().map(Arc::new));
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

/// Reads and parses every spec file of `project`. A missing directory is an error, not an
/// empty project.
pub fn load(project: &Project) -> Loaded {
    load_with(project, &mut ScanCache::default(), None).loaded
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
    /// Objects declared more than once, with every place each is declared: no declaration of
    /// them is accepted, what was recorded keeps its last valid spec and is held (nothing runs
    /// for it) until one declaration is gone. Being declared twice breaks neither file.
    pub contested: BTreeMap<ObjectKey, Vec<String>>,
}

impl Scan {
    /// The objects of files that load cleanly.
    pub fn accepted(&self) -> impl Iterator<Item = &Object> {
        self.accepted_with_digests().map(|(object, _)| object)
    }

    /// Accepted objects with their digests.
    pub fn accepted_with_digests(&self) -> impl Iterator<Item = (&Object, &ObjectDigests)> {
        self.objects.iter().map(Arc::as_ref).zip(self.digests.iter().map(Arc::as_ref)).filter(|(object, _)| {
            !self.broken_files.contains(&*object.origin.file)
                && (self.contested.is_empty() || !self.contested.contains_key(&object.key()))
        })
    }

    /// Why `key` is held, when it is declared more than once: every place it is declared.
    pub fn held(&self, key: &ObjectKey) -> Option<String> {
        self.contested.get(key).map(|places| held_message(key, places))
    }

    pub fn errors(&self) -> impl Iterator<Item = &ValidationError> {
        self.findings.iter().filter(|finding| finding.severity == Severity::Error)
    }
}

/// Loads and validates the project's spec directory.
pub fn scan(project: &Project) -> Scan {
    scan_cached(project, &mut ScanCache::default())
}

/// [`scan`], parsing only the files whose content changed since the cache saw them.
pub fn scan_cached(project: &Project, cache: &mut ScanCache) -> Scan {
    scan_changed(project, cache, None)
}

/// What a scan of the spec directory `dir`, which names no project (`error`), finds: that it
/// does not exist, or why it names no project. Nothing in it is read.
pub fn scan_unresolved(dir: &Path, error: &ProjectError) -> Scan {
    let findings: Vec<ValidationError> = unreadable(dir, Some(error)).into_iter().collect();
    let broken_files = findings.iter().map(|f| f.file.clone()).collect();
    Scan { findings, broken_files, ..Scan::default() }
}

/// [`scan_cached`] that reads only `changed` files (as file-watch events named them) and trusts
/// the cache for the rest; a changed path that is not a plain spec file falls back to a full walk.
pub fn scan_changed(project: &Project, cache: &mut ScanCache, changed: Option<&[PathBuf]>) -> Scan {
    let LoadedWith { loaded, digests, object_findings } = load_with(project, cache, changed);
    let mut findings = loaded.errors;
    findings.extend(object_findings);
    let Across { declared_twice, contested, others } = validate_across_apart(&loaded.objects);
    findings.extend(others);
    let broken_files = findings.iter().filter(|f| f.severity == Severity::Error).map(|f| f.file.clone()).collect();
    findings.extend(declared_twice);
    sort_findings(&mut findings);
    Scan { objects: loaded.objects, digests, findings, files: loaded.files, broken_files, contested }
}

/// What a contested object's `Ready` condition and `status` say: where it is declared, and that
/// nothing runs for it.
pub fn held_message(key: &ObjectKey, places: &[String]) -> String {
    format!(
        "{key} is declared more than once ({}): neither declaration is applied and nothing runs for it until only one is left",
        places.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADAPTER: &str = "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: mock}\nspec: {}\n";

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

        let resolved = Project::resolve(&dir).expect("project");
        let scan = scan(&resolved);
        let found = messages(&scan);
        let names: Vec<String> = scan.accepted().map(|o| o.metadata.name.clone()).collect();
        assert_eq!(names, ["generic", "mock"], "{found:#?}");
        let about =
            |file: &str| found.iter().filter(|m| m.contains(&format!("/{file}: "))).cloned().collect::<Vec<_>>();
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
        let _ = scan_cached(&resolved, &mut cache);
        let changed = [dir.join("pipe.yaml"), dir.join("leak.yaml")];
        let rescanned = scan_changed(&resolved, &mut cache, Some(&changed));
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
