//! The provision phase: the revision resolved in the confined repository (or the git source's
//! mirror), exactly the readable paths exported at that commit, and the brief written.

use std::path::PathBuf;
use std::time::Instant;

use roundtable_reconcilers::ExecutionRequest;
use roundtable_source::Repos;
use roundtable_specs::brief::Brief;
use roundtable_specs::session::SessionCause;
use roundtable_store::SessionRecord;
use roundtable_telemetry::error_chain;
use roundtable_workspace::provision::{self, ProvisionError, Provisioned};

use crate::folder::ExecutionFolder;
use crate::manager::{Inner, millis};
use crate::outcome::Ending;

/// What provisioning produced: the confined repository, the exported source and the brief.
pub(crate) struct Source {
    pub(crate) repo: PathBuf,
    pub(crate) provisioned: Provisioned,
    pub(crate) brief: Brief,
}

impl Inner {
    /// Provisions the session's source and keeps on the session what it was given: the base
    /// commit, the manifest, what was withheld, and how long it took.
    pub(crate) async fn provision(
        &self,
        session: &mut SessionRecord,
        request: &ExecutionRequest,
        folder: &ExecutionFolder,
    ) -> Result<Source, Ending> {
        let started = Instant::now();
        let source = self.export_source(request, folder).await?;
        session.base_commit = Some(source.provisioned.commit.clone());
        session.detail.manifest = source.provisioned.files.clone();
        session.detail.withheld = source.provisioned.withheld.clone();
        session.detail.timings_ms.insert("provision".into(), millis(started));
        Ok(source)
    }

    /// Resolves the revision in the confined repository and exports exactly the readable paths.
    async fn export_source(&self, request: &ExecutionRequest, folder: &ExecutionFolder) -> Result<Source, Ending> {
        let (project_root, repo) = (self.config.project.root.clone(), request.spec.source.repo.clone());
        let (revision, scope, dest) =
            (request.spec.source.revision.clone(), request.spec.readable_paths.clone(), folder.source());
        let repos = self.config.project.repos.clone();
        let provisioned = tokio::task::spawn_blocking(move || {
            let repo = match repos {
                Repos::Root => provision::confine(&project_root, &repo)?,
                Repos::Checkout(top) => provision::confine(&top, &repo)?,
                Repos::Mirror(mirror) => provision::from_mirror(&mirror, &repo)?,
            };
            let commit = provision::resolve(&repo, &revision)?;
            provision::export(&repo, &commit, &scope, &dest).map(|provisioned| (repo, provisioned))
        })
        .await;
        let (repo, provisioned) = match provisioned {
            Ok(Ok(provisioned)) => provisioned,
            Ok(Err(error @ ProvisionError::OutsideProjectRoot { .. })) => {
                return Err(Ending::failed(SessionCause::SourceOutsideProjectRoot, error_chain(&error)));
            }
            Ok(Err(error)) => return Err(Ending::failed(SessionCause::ProvisionFailed, error_chain(&error))),
            Err(error) => return Err(Ending::failed(SessionCause::ProvisionFailed, error_chain(&error))),
        };
        let brief = Brief {
            assignment: request.assignment.clone(),
            role: request.spec.role,
            task: request.spec.task.clone(),
            base_commit: provisioned.commit.clone(),
            readable_paths: request.spec.readable_paths.clone(),
            manifest: provisioned.files.clone(),
        };
        let written = brief
            .to_file_bytes()
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(folder.brief(), bytes));
        if let Err(error) = written {
            return Err(Ending::failed(SessionCause::ProvisionFailed, format!("cannot write the brief: {error}")));
        }
        Ok(Source { repo, provisioned, brief })
    }
}
