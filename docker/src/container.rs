//! A session's container and volumes by name: how they are named, the one place a container is
//! created (from the hardened profile, for agents and probes alike, and the controller's own
//! throw-away ones), the empty image, and the one bounded removal of a container and its named
//! volumes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder,
};
use futures::StreamExt as _;

use roundtable_session_runtime::{ResourceKind, Resources, RuntimeError};

use crate::calls::timed;
use crate::errors::{already_gone, engine_error};
use crate::profile::SandboxSpec;

/// The image that runs agents that need no files of their own (the built-in `mock`).
pub const EMPTY_IMAGE: &str = "roundtable.dev/empty:v1";

/// How long one removal may take before it is left for garbage collection.
const REMOVE_BOUND: Duration = Duration::from_secs(60);

/// The container's name, and the prefix of its volumes' names.
pub fn container_name(session: &str) -> String {
    format!("roundtable-{session}")
}

/// The name of a persistent provider home's volume.
pub fn home_volume_name(key: &str) -> String {
    format!("roundtable-home-{key}")
}

/// The names of a session's volumes: the workspace and `/tmp`.
pub fn volume_names(session: &str) -> [String; 2] {
    let name = container_name(session);
    [format!("{name}-workspace"), format!("{name}-tmp")]
}

/// A throw-away container of the controller's own (`doctor`'s trial, the host-path check):
/// `image`, labelled as a probe of `project` under `id` (so garbage collection knows it), with
/// `binary` and `source_dir` mounted where a session has them and nothing else.
pub(crate) fn throwaway_spec(
    project: &str,
    id: &str,
    image: String,
    resources: Resources,
    binary: &Path,
    source_dir: PathBuf,
) -> SandboxSpec {
    use roundtable_session_runtime::labels::{Ownership, Purpose};
    let ownership = Ownership {
        project: project.to_owned(),
        assignment: None,
        session: id.to_owned(),
        controller_run: id.to_owned(),
        purpose: Purpose::Probe,
    };
    let [workspace_volume, tmp_volume] = volume_names(id);
    SandboxSpec {
        image,
        labels: ownership.labels(),
        resources,
        workspace_volume,
        tmp_volume,
        binary: binary.to_owned(),
        source_dir: Some(source_dir),
        task_file: None,
        socket_dir: None,
        home_volume: None,
        runtime: None,
    }
}

/// Creates a container named `name` from the hardened profile: the one place containers are
/// created (agents and admission probes alike).
pub(crate) async fn create_hardened(docker: &Docker, name: &str, spec: &SandboxSpec) -> Result<(), RuntimeError> {
    let options = CreateContainerOptionsBuilder::default().name(name).build();
    timed(name, "create container", docker.create_container(Some(options), spec.container_body()))
        .await
        .map_err(engine_error("create the container"))?;
    Ok(())
}

/// Creates `spec`'s workspace and `/tmp` volumes for container `name`, at once: they are
/// independent of each other, and both come before the container that mounts them.
pub(crate) async fn create_tmpfs_volumes(docker: &Docker, name: &str, spec: &SandboxSpec) -> Result<(), RuntimeError> {
    let [workspace, tmp] = spec.tmpfs_volumes();
    futures::try_join!(
        async {
            timed(name, "create volume", docker.create_volume(workspace))
                .await
                .map_err(engine_error("create the workspace volume"))
        },
        async {
            timed(name, "create volume", docker.create_volume(tmp))
                .await
                .map_err(engine_error("create the /tmp volume"))
        },
    )?;
    Ok(())
}

/// Starts the created container `name`: its PID 1, `roundtable sandbox init`.
pub(crate) async fn start(docker: &Docker, name: &str) -> Result<(), RuntimeError> {
    timed(name, "start container", docker.start_container(name, None)).await.map_err(engine_error("start PID 1"))
}

/// Imports the empty image once (no registry is ever pulled from).
pub async fn ensure_empty_image(docker: &Docker) -> Result<(), RuntimeError> {
    if timed(EMPTY_IMAGE, "inspect the empty image", docker.inspect_image(EMPTY_IMAGE)).await.is_ok() {
        return Ok(());
    }
    // The whole reference as `repo`: Podman ignores a separate `tag` and would name it `latest`.
    let options = CreateImageOptionsBuilder::default().from_src("-").repo(EMPTY_IMAGE).build();
    let empty_tar = vec![0u8; 1024];
    let mut stream = docker.create_image(Some(options), Some(bollard::body_full(empty_tar.into())), None);
    while let Some(progress) = stream.next().await {
        progress.map_err(engine_error("import the empty image"))?;
    }
    Ok(())
}

/// The image a plan names, or the empty image (imported if need be) when it names none.
pub(crate) async fn image_or_empty(docker: &Docker, image: Option<&str>) -> Result<String, RuntimeError> {
    match image {
        Some(image) => Ok(image.to_owned()),
        None => {
            ensure_empty_image(docker).await?;
            Ok(EMPTY_IMAGE.to_owned())
        }
    }
}

/// Force-removes session `session`'s container (killed first), then its volumes, at once: each
/// is tried whatever became of the others, and the first failure is returned. Safe when they do
/// not exist. Each removal is bounded, so a wedged engine cannot hold the caller forever; what
/// is left carries the ownership labels for garbage collection.
pub(crate) async fn remove_session(docker: &Docker, session: &str) -> Result<(), RuntimeError> {
    let container = container_name(session);
    let removed = remove(docker, ResourceKind::Container, &container, &container).await;
    // Once the container is gone, its volumes are independent of each other.
    let volumes = volume_names(session);
    let volumes_removed = futures::future::join_all(
        volumes.iter().map(|volume| remove(docker, ResourceKind::Volume, volume, &container)),
    )
    .await;
    volumes_removed.into_iter().fold(removed, Result::and)
}

/// Force-removes one container (with its anonymous volumes) or volume named `name`, within
/// [`REMOVE_BOUND`]; one that is already gone counts as removed. The call is traced under
/// `container`, the session it belongs to.
pub(crate) async fn remove(
    docker: &Docker,
    kind: ResourceKind,
    name: &str,
    container: &str,
) -> Result<(), RuntimeError> {
    let removed = match kind {
        ResourceKind::Container => {
            // gVisor cannot kill a paused sandbox (the engine waits 10 s and may leave it a
            // zombie), so a paused container is thawed first: it was paused for the export,
            // which is over, and is killed at once.
            let _ = tokio::time::timeout(REMOVE_BOUND, docker.unpause_container(name)).await;
            let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
            let removal = timed(container, "remove container", docker.remove_container(name, Some(options)));
            tokio::time::timeout(REMOVE_BOUND, removal).await
        }
        ResourceKind::Volume => {
            let options = RemoveVolumeOptionsBuilder::default().force(true).build();
            let removal = timed(container, "remove volume", docker.remove_volume(name, Some(options)));
            tokio::time::timeout(REMOVE_BOUND, removal).await
        }
    };
    match removed {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) if already_gone(&error) => Ok(()),
        Ok(Err(error)) => Err(engine_error("remove")(error)),
        Err(_) => Err(RuntimeError::Protocol { step: "remove", detail: format!("{name}: timed out") }),
    }
}
