//! Settling the agent's exported workspace against what it was given, before the patch is made,
//! so a proposal is exactly what the agent did minus what was refused, and every refusal is
//! listed: a rejected entry (a symbolic link, a FIFO, a name the host cannot carry) never turns a
//! file the agent was given into a deletion, and a write to a path it was not given (a withheld
//! secret, a file outside `readablePaths` that exists at the base) is dropped and listed instead
//! of failing the whole proposal.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use roundtable_specs::session::Rejected;

/// Why the export could not be settled.
#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    #[error("cannot {step} {path}")]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What settling did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// Rejected entries that replaced a file the agent was given: that file is kept unchanged.
    pub kept_unchanged: Vec<Rejected>,
    /// Files at paths the agent was not given that exist at the base commit: not proposed.
    pub not_given: Vec<Rejected>,
}

/// Settles `export` (the extracted workspace) against `base` (what the agent was given):
/// `given` are the paths provided, `at_base` every path of the base commit, `rejected` what the
/// extractor refused.
pub fn settle(
    base: &Path,
    export: &Path,
    given: &BTreeSet<String>,
    at_base: &BTreeSet<String>,
    rejected: &[Rejected],
) -> Result<Settled, SettleError> {
    let io = |step: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| SettleError::Io { step, path, source }
    };
    let mut settled = Settled::default();
    for entry in rejected.iter().filter(|entry| entry.exact && given.contains(&entry.path)) {
        let (from, to) = (base.join(&entry.path), export.join(&entry.path));
        // What the extractor refused never reached the export; a folder the agent put in its
        // place would, so it goes first.
        if to.is_dir() {
            std::fs::remove_dir_all(&to).map_err(io("remove", &to))?;
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(io("create", parent))?;
        }
        std::fs::copy(&from, &to).map_err(io("restore", &to))?;
        settled.kept_unchanged.push(entry.clone());
    }
    for path in files_below(export).map_err(io("list", export))? {
        if at_base.contains(&path) && !given.contains(&path) {
            let full = export.join(&path);
            std::fs::remove_file(&full).map_err(io("remove", &full))?;
            settled.not_given.push(Rejected {
                reason:
                    "the agent was not given this file (withheld or outside readablePaths); its write is not proposed"
                        .into(),
                path,
                exact: true,
            });
        }
    }
    Ok(settled)
}

/// Every regular file below `dir`, as a `/`-separated relative path (the extractor only writes
/// UTF-8 names).
fn files_below(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut files = Vec::new();
    if !dir.exists() {
        return Ok(files);
    }
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file()
                && let Ok(relative) = entry.path().strip_prefix(dir)
                && let Some(text) = relative.to_str()
            {
                files.push(text.to_owned());
            }
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, text).expect("write");
    }

    fn set(paths: &[&str]) -> BTreeSet<String> {
        paths.iter().map(|p| (*p).to_owned()).collect()
    }

    #[test]
    fn a_rejected_replacement_keeps_the_given_file_and_writes_not_given_are_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (base, export) = (dir.path().join("base"), dir.path().join("export"));
        write(&base, "README.md", "# base\n");
        write(&base, "docs/a.md", "a\n");
        // The agent replaced README.md by a symlink (rejected, so absent), edited docs/a.md,
        // wrote the withheld .env and a file outside its scope that exists at the base, and
        // added a new file.
        write(&export, "docs/a.md", "a, edited\n");
        write(&export, ".env", "TOKEN=stolen\n");
        write(&export, "src/main.rs", "fn main() { evil() }\n");
        write(&export, "docs/new.md", "new\n");
        let rejected = vec![
            Rejected { path: "README.md".into(), reason: "a symbolic link".into(), exact: true },
            Rejected { path: "pipe".into(), reason: "a FIFO".into(), exact: true },
        ];
        let given = set(&["README.md", "docs/a.md"]);
        let at_base = set(&["README.md", "docs/a.md", ".env", "src/main.rs"]);
        let settled = settle(&base, &export, &given, &at_base, &rejected).expect("settle");
        assert_eq!(std::fs::read_to_string(export.join("README.md")).expect("kept"), "# base\n");
        assert_eq!(settled.kept_unchanged.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(), ["README.md"]);
        let dropped: Vec<&str> = settled.not_given.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(dropped, [".env", "src/main.rs"]);
        assert!(!export.join(".env").exists() && !export.join("src/main.rs").exists());
        assert_eq!(std::fs::read_to_string(export.join("docs/a.md")).expect("edit"), "a, edited\n");
        assert!(export.join("docs/new.md").exists(), "new files stay (flagged later, not dropped)");
    }
}
