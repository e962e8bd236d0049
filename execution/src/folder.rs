//! The execution folder: one session's files on the host, under the execution root. Its layout
//! is decided here; everything that writes, mounts, reads or cleans it asks this type.

use std::path::{Path, PathBuf};

/// One session's execution folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionFolder {
    path: PathBuf,
}

/// The folders of a session that are only needed while it runs and is turned into a proposal.
const WORKING_TREES: [&str; 3] = ["source", "export", "scratch"];

impl ExecutionFolder {
    /// The folder of session `session` under `execution_root`.
    pub fn of(execution_root: &Path, session: &str) -> Self {
        Self { path: execution_root.join(session) }
    }

    /// The folder at `path`, as a session record names it.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The readable paths exported at the base commit (mounted read-only as the agent's source).
    pub fn source(&self) -> PathBuf {
        self.path.join(WORKING_TREES[0])
    }

    /// The agent's workspace as copied out of the container after the run.
    pub fn export(&self) -> PathBuf {
        self.path.join(WORKING_TREES[1])
    }

    /// Working space for making and verifying the patch.
    pub fn scratch(&self) -> PathBuf {
        self.path.join(WORKING_TREES[2])
    }

    /// The brief, `task.json` (see `roundtable_specs::brief`).
    pub fn brief(&self) -> PathBuf {
        self.path.join("task.json")
    }

    /// The agent's captured standard output, as kept.
    pub fn stdout_log(&self) -> PathBuf {
        self.path.join("stdout.log")
    }

    /// The agent's captured standard error, as kept.
    pub fn stderr_log(&self) -> PathBuf {
        self.path.join("stderr.log")
    }

    /// The egress gateway's decision log.
    pub fn egress_log(&self) -> PathBuf {
        self.path.join("egress.log")
    }

    /// The egress gateway's live report.
    pub fn egress_report(&self) -> PathBuf {
        self.path.join("egress.json")
    }

    /// The credential broker's request log (one line per request).
    pub fn broker_log(&self) -> PathBuf {
        self.path.join("broker.log")
    }

    /// The credential broker's live report.
    pub fn broker_report(&self) -> PathBuf {
        self.path.join("broker.json")
    }

    /// Removes the working trees once the session is recorded; the brief and the logs stay.
    pub fn remove_working_trees(&self) {
        for tree in WORKING_TREES {
            let _ = std::fs::remove_dir_all(self.path.join(tree));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_working_trees_go_and_the_brief_and_logs_stay() {
        let root = tempfile::tempdir().expect("tempdir");
        let folder = ExecutionFolder::of(root.path(), "abc123");
        assert_eq!(folder.path(), root.path().join("abc123"));
        for tree in [folder.source(), folder.export(), folder.scratch()] {
            std::fs::create_dir_all(tree.join("nested")).expect("mkdir");
        }
        for file in [folder.brief(), folder.stdout_log(), folder.stderr_log(), folder.egress_log()] {
            std::fs::write(file, b"kept").expect("write");
        }
        folder.remove_working_trees();
        let mut left: Vec<String> = std::fs::read_dir(folder.path())
            .expect("list")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["egress.log", "stderr.log", "stdout.log", "task.json"]);
    }
}
