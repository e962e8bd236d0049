//! The project: which folder a spec directory belongs to, its id, and where its state lives,
//! resolved once.

use std::path::{Path, PathBuf};

use roundtable_store::StoreUrl;

use crate::tree::Trees;

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
    #[error("cannot resolve the state directory {state_dir}, which says committed state is followed")]
    Followed {
        state_dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot resolve the project root {root} (the folder holding the spec directory {dir}); it must exist")]
    Root {
        root: PathBuf,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A project as one resolution names it: its spec directory (as given), its root (the folder
/// holding the spec directory, canonical), its id (derived from the root alone) and where its
/// state lives. The CLI resolves it once from its global options; everything below receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub spec_dir: PathBuf,
    pub root: PathBuf,
    /// The first 12 hex characters of the SHA-256 of the root's canonical path: the name of the
    /// project's audit key, execution root and container labels.
    pub id: String,
    /// The state directory: the lock, the API's socket and token, proposals' patches and, by
    /// default, the store.
    pub state_dir: PathBuf,
    /// Where the state store is.
    pub store: StoreUrl,
    /// Where Assignments' `source.repo` is found for provisioning workspaces.
    pub repos: Repos,
}

/// Where Assignments' `source.repo` is found: under the project root (a working tree), under the
/// checkout whose committed state is followed (its root is then the exported trees), or in a git
/// source's bare mirror.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Repos {
    #[default]
    Root,
    Checkout(PathBuf),
    Mirror(PathBuf),
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
        let state_dir = Self::default_state_dir(dir);
        let store = StoreUrl::in_state_dir(&state_dir);
        Ok(Self { spec_dir: dir.to_owned(), root, id, state_dir, store, repos: Repos::Root })
    }

    /// The project with its state in `state_dir` and its store at `store` (`--state-dir`,
    /// `--store`) instead of the defaults.
    #[must_use]
    pub fn with_state(self, state_dir: PathBuf, store: StoreUrl) -> Self {
        Self { state_dir, store, ..self }
    }

    /// This project as its state directory says it is reconciled (`start --committed`,
    /// `start --source` leave a mark there): its specs read from the exported tree of the commit
    /// followed, its repositories from the checkout or the mirror. A git source has no checkout,
    /// so its id comes from the state directory's canonical path. Unmarked: unchanged.
    pub fn followed(self) -> Result<Self, ProjectError> {
        let Some((mode, spec_path)) = crate::mark::marked(&self.state_dir) else { return Ok(self) };
        let canonical = self
            .state_dir
            .canonicalize()
            .map_err(|source| ProjectError::Followed { state_dir: self.state_dir.clone(), source })?;
        let trees = Trees::in_state_dir(&self.state_dir);
        let (spec_dir, root) = (trees.spec_dir(&spec_path), canonical.join("source").join("tree"));
        Ok(match mode {
            crate::mark::Mode::Committed => Self { spec_dir, repos: Repos::Checkout(self.root.clone()), root, ..self },
            crate::mark::Mode::Git => Self {
                spec_dir,
                root,
                id: roundtable_specs::digest::sha256_hex(canonical.as_os_str().as_encoded_bytes())[..12].to_owned(),
                repos: Repos::Mirror(crate::mark::mirror_dir(&self.state_dir)),
                ..self
            },
        })
    }

    /// The project a scan of `trees`' current tree reads: the spec directory `spec_path` inside
    /// it, the trees' folder as the root (links may not leave it), this project's id and state.
    pub fn in_tree(&self, trees: &Trees, spec_path: &Path) -> std::io::Result<Project> {
        let root = trees.folder().canonicalize()?;
        Ok(Project { spec_dir: trees.spec_dir(spec_path), root, ..self.clone() })
    }

    /// Where the state lives unless told otherwise: `state/` in the spec directory.
    pub fn default_state_dir(spec_dir: &Path) -> PathBuf {
        spec_dir.join("state")
    }

    /// Where the patches of proposals are kept.
    pub fn proposals_dir(&self) -> PathBuf {
        self.state_dir.join("proposals")
    }

    /// The admission contracts, `contracts/` in the spec directory.
    pub fn contracts_dir(&self) -> PathBuf {
        Self::contracts_dir_of(&self.spec_dir)
    }

    /// The admission contracts of the spec directory `spec_dir`, whether or not it names a project.
    pub fn contracts_dir_of(spec_dir: &Path) -> PathBuf {
        spec_dir.join("contracts")
    }
}

fn canonical_root(root: &Path, dir: &Path) -> Result<PathBuf, ProjectError> {
    root.canonicalize().map_err(|source| ProjectError::Root { root: root.to_owned(), dir: dir.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_state_lives_in_the_spec_folder_unless_the_options_move_it() {
        let project = tempfile::tempdir().expect("tempdir");
        let dir = project.path().join(".roundtable");
        let resolved = Project::resolve(&dir).expect("resolves");
        assert_eq!(resolved.state_dir, dir.join("state"));
        assert_eq!(resolved.store, StoreUrl::in_state_dir(&dir.join("state")));
        assert_eq!(resolved.proposals_dir(), dir.join("state/proposals"));
        assert_eq!(resolved.contracts_dir(), dir.join("contracts"));
        let elsewhere = project.path().join("elsewhere");
        let moved = resolved.clone().with_state(elsewhere.clone(), StoreUrl::in_state_dir(&elsewhere));
        assert_eq!(moved.proposals_dir(), elsewhere.join("proposals"));
        assert_eq!((moved.root, moved.id), (resolved.root, resolved.id), "the state never names the project");
    }

    #[test]
    fn a_spec_folder_whose_root_does_not_exist_is_an_error_naming_the_root() {
        let project = tempfile::tempdir().expect("tempdir");
        let missing = project.path().join("gone/.roundtable");
        let error = Project::resolve(&missing).expect_err("no root");
        assert!(error.to_string().contains(&project.path().join("gone").display().to_string()), "{error}");
    }
}
