//! The mark a state directory keeps of what it follows (a checkout's committed state, or a git
//! source's mirror), which every command reads to find its specs.

use std::path::{Path, PathBuf};

/// Where the bare mirror of a git source lives.
pub fn mirror_dir(state_dir: &Path) -> PathBuf {
    let state_dir = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_owned());
    state_dir.join("source").join("mirror.git")
}

/// Which committed state a state directory is marked as following.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Committed,
    Git,
}

fn mark_file(state_dir: &Path) -> PathBuf {
    state_dir.join("source").join("follows")
}

/// Leaves the mark every command reads (through [`Project::followed`]): the mode and the spec
/// directory's path in the repository. `None` removes it (the working tree again).
pub fn mark(state_dir: &Path, followed: Option<(Mode, &Path)>) -> std::io::Result<()> {
    let file = mark_file(state_dir);
    match followed {
        None => match std::fs::remove_file(&file) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        },
        Some((mode, spec_path)) => {
            std::fs::create_dir_all(state_dir.join("source"))?;
            let word = match mode {
                Mode::Committed => "committed",
                Mode::Git => "git",
            };
            let temporary = file.with_extension(format!("tmp-{}", std::process::id()));
            std::fs::write(&temporary, format!("{word}\n{}\n", spec_path.display()))?;
            std::fs::rename(temporary, file)
        }
    }
}

/// The mark [`mark`] left, if any.
pub fn marked(state_dir: &Path) -> Option<(Mode, PathBuf)> {
    let text = std::fs::read_to_string(mark_file(state_dir)).ok()?;
    let mut lines = text.lines();
    let mode = match lines.next()? {
        "committed" => Mode::Committed,
        "git" => Mode::Git,
        _ => return None,
    };
    Some((mode, PathBuf::from(lines.next().unwrap_or_default())))
}
