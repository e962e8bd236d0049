//! The project the global options name, resolved once at the CLI boundary, and the host-side
//! paths derived from it (the audit key, the execution root). Every command below `main` asks
//! [`Global`] here instead of deriving anything from `--dir` itself.

use std::path::PathBuf;

use anyhow::Context as _;
use roundtable_source::{Project, ProjectError};
use roundtable_store::StoreUrl;

use crate::cli::Global;

impl Global {
    /// `--state-dir`, or the project's default (needs no resolvable project: `init` creates it).
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(|| Project::default_state_dir(&self.dir))
    }

    /// `--store`, or the database file in the state directory.
    pub fn store_url(&self) -> StoreUrl {
        self.store.clone().unwrap_or_else(|| StoreUrl::in_state_dir(&self.state_dir()))
    }

    /// The project `--dir`, `--state-dir` and `--store` name, reading committed state's exported
    /// tree when the state directory is marked so (`Project::followed`): resolved on first use,
    /// the same value after (a failed resolution is not kept; the command usually ends with it).
    pub fn project(&self) -> Result<&Project, ProjectError> {
        if let Some(project) = self.project.get() {
            return Ok(project);
        }
        let resolved = self.working_tree()?.followed()?;
        Ok(self.project.get_or_init(|| resolved))
    }

    /// The project as its working tree names it, whatever committed state its state directory
    /// follows: what `validate` checks (the files about to be committed).
    pub fn working_tree(&self) -> Result<Project, ProjectError> {
        Ok(Project::resolve(&self.dir)?.with_state(self.state_dir(), self.store_url()))
    }

    /// `--audit-key`, or the project's key under the host state root (never in the state
    /// directory, which travels with the project).
    pub fn audit_key_path(&self) -> anyhow::Result<PathBuf> {
        match &self.audit_key {
            Some(path) => Ok(path.clone()),
            None => {
                let project = self.project()?;
                Ok(host_state_root().context("pass --audit-key")?.join("keys").join(format!("{}.key", project.id)))
            }
        }
    }

    /// `start --execution-root`, or the project's folder under the host state root.
    pub fn execution_root(&self, given: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
        match given {
            Some(root) => Ok(root.clone()),
            None => {
                let project = self.project()?;
                Ok(host_state_root().context("pass --execution-root")?.join("executions").join(&project.id))
            }
        }
    }
}

/// Roundtable's per-host state: `/var/lib/roundtable` as root, else `$XDG_STATE_HOME/roundtable`.
fn host_state_root() -> anyhow::Result<PathBuf> {
    if roundtable_workspace::sockets::running_as_root() {
        return Ok(PathBuf::from("/var/lib/roundtable"));
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/state")))
        .context("neither XDG_STATE_HOME nor HOME is set")?;
    Ok(state.join("roundtable"))
}
