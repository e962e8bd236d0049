//! Whether the engine sees this host's files where this process sees them, proven once per
//! connection: a file with a random marker is written in a new private folder under the
//! temporary folder, a labelled container is created (never started) with that folder
//! bind-mounted where a session's source goes and the controller's binary where a session's
//! binary goes, and the marker is read back through the engine's archive API. An engine on another
//! machine fails the create (no such path there) or reads something else (a path of the same
//! name on its machine); either way sessions, which bind-mount their binary, source and sockets
//! from this host, cannot run there, and admission says so before any is created.

use std::path::Path;

use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use futures::StreamExt as _;
use roundtable_session_runtime::Resources;
use roundtable_specs::layout as paths;
use roundtable_specs::runtime_class::HostPaths;

use crate::container::{self, container_name, create_hardened, create_tmpfs_volumes, image_or_empty};
use crate::engine::Engine;

/// The marker file's name in the folder.
const MARKER_NAME: &str = "roundtable-reach";

/// Small: nothing runs in the container.
const REACH_RESOURCES: Resources = Resources {
    memory_bytes: 64 << 20,
    nano_cpus: 500_000_000,
    pids: 16,
    workspace_bytes: 1 << 20,
    tmp_bytes: 1 << 20,
};

/// Whether `engine` sees `binary` and a folder made under the temporary folder. `Unknown` when
/// the engine could not be asked (the next call tries again).
pub async fn host_paths(engine: &Engine, binary: &Path) -> HostPaths {
    let folder = match tempfile::Builder::new().prefix("roundtable-reach-").tempdir() {
        Ok(folder) => folder,
        Err(error) => return HostPaths::NotSeen(format!("cannot make a folder under the temporary folder: {error}")),
    };
    let mut nonce = [0u8; 16];
    if getrandom::fill(&mut nonce).is_err() {
        return HostPaths::Unknown;
    }
    let marker: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    if let Err(error) = std::fs::write(folder.path().join(MARKER_NAME), &marker) {
        return HostPaths::NotSeen(format!("cannot write {}: {error}", folder.path().display()));
    }
    // The folder is private to this user (0700); the engine reads it as root.
    let id = format!("reach-{}", &marker[..12]);
    let outcome = read_back(engine, binary, folder.path(), &id).await;
    if let Err(error) = container::remove_session(engine.docker(), &id).await {
        tracing::warn!(check = %id, error = %roundtable_telemetry::error_chain(&error), "removing the host-path check's container failed; it carries the ownership labels");
    }
    match outcome {
        Ok(read) if read == marker.as_bytes() => HostPaths::Seen,
        Ok(read) => HostPaths::NotSeen(format!(
            "{} through the engine holds {} bytes that are not the marker written here",
            folder.path().display(),
            read.len()
        )),
        Err(Unseen::Refused(said)) => HostPaths::NotSeen(said),
        Err(Unseen::Unasked(said)) => {
            tracing::warn!(error = %said, "could not learn whether the engine sees this host's files");
            HostPaths::Unknown
        }
    }
}

/// Why the marker was not read back: the engine refused the paths, or could not be asked.
enum Unseen {
    Refused(String),
    Unasked(String),
}

async fn read_back(engine: &Engine, binary: &Path, folder: &Path, id: &str) -> Result<Vec<u8>, Unseen> {
    let docker = engine.docker();
    let image =
        image_or_empty(docker, None).await.map_err(|e| Unseen::Unasked(roundtable_telemetry::error_chain(&e)))?;
    let spec = container::throwaway_spec("host-path-check", id, image, REACH_RESOURCES, binary, folder.to_owned());
    let name = container_name(id);
    create_tmpfs_volumes(docker, &name, &spec)
        .await
        .map_err(|e| Unseen::Unasked(roundtable_telemetry::error_chain(&e)))?;
    // A path the engine's machine does not have fails here ("bind source path does not exist").
    create_hardened(docker, &name, &spec).await.map_err(|e| Unseen::Refused(roundtable_telemetry::error_chain(&e)))?;
    let path = format!("{}/{MARKER_NAME}", paths::SOURCE);
    let options = DownloadFromContainerOptionsBuilder::default().path(&path).build();
    let mut stream = docker.download_from_container(&name, Some(options));
    let mut archive = Vec::new();
    while let Some(chunk) = stream.next().await {
        archive.extend_from_slice(&chunk.map_err(|e| Unseen::Refused(format!("reading {path} back: {e}")))?);
    }
    let mut found = Vec::new();
    let mut reader = tar::Archive::new(archive.as_slice());
    let entries = reader.entries().map_err(|e| Unseen::Refused(format!("the archive of {path}: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| Unseen::Refused(format!("the archive of {path}: {e}")))?;
        std::io::Read::read_to_end(&mut entry, &mut found)
            .map_err(|e| Unseen::Refused(format!("the archive of {path}: {e}")))?;
    }
    Ok(found)
}
