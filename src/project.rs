//! Reading a spec directory from disk: which files count, size limits, and handing their text to
//! the `specs` crate.

use std::path::{Path, PathBuf};

use roundtable_specs::parse::{file_error, parse_file};
use roundtable_specs::yaml::MAX_FILE_BYTES;
use roundtable_specs::{Object, ValidationError};

/// Folders directly under the spec directory that never hold specs.
const SKIPPED_FOLDERS: [&str; 3] = ["state", "admission", "contracts"];

/// Everything read from a spec directory.
#[derive(Debug, Default)]
pub struct Loaded {
    pub objects: Vec<Object>,
    pub errors: Vec<ValidationError>,
    pub files: usize,
}

fn is_spec_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
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
                errors.push(file_error(
                    &folder.display().to_string(),
                    format!("cannot read folder: {error}"),
                ));
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_dir() {
                let top_level_skip = folder == dir
                    && entry
                        .file_name()
                        .to_str()
                        .is_some_and(|name| SKIPPED_FOLDERS.contains(&name));
                if !top_level_skip {
                    pending.push(path);
                }
            } else if is_spec_file(&path) && (file_type.is_file() || path.is_file()) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Reads and parses every spec file under `dir`. A missing directory is an error, not an
/// empty project.
pub fn load(dir: &Path) -> Loaded {
    let mut loaded = Loaded::default();
    if !dir.is_dir() {
        loaded.errors.push(file_error(
            &dir.display().to_string(),
            "spec directory not found (run `roundtable init`, or pass --dir)",
        ));
        return loaded;
    }
    for path in spec_files(dir, &mut loaded.errors) {
        loaded.files += 1;
        let shown = path.display().to_string();
        let relative = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        match std::fs::metadata(&path) {
            Ok(meta) if meta.len() > MAX_FILE_BYTES as u64 => {
                loaded.errors.push(file_error(
                    &shown,
                    format!(
                        "file is {} bytes; spec files are limited to {MAX_FILE_BYTES} bytes",
                        meta.len()
                    ),
                ));
                continue;
            }
            Ok(_) => {}
            Err(error) => {
                loaded
                    .errors
                    .push(file_error(&shown, format!("cannot read: {error}")));
                continue;
            }
        }
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) => {
                loaded
                    .errors
                    .push(file_error(&shown, format!("cannot read: {error}")));
                continue;
            }
        };
        let Ok(text) = String::from_utf8(bytes) else {
            loaded.errors.push(file_error(&shown, "not valid UTF-8"));
            continue;
        };
        let parsed = parse_file(&shown, &relative, &text);
        loaded.objects.extend(parsed.objects);
        loaded.errors.extend(parsed.errors);
    }
    loaded
}
