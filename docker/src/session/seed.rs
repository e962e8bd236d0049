//! The `/tmp` seed: the plan's entries under `/tmp` (the agent CLI's homes and manifests) as one
//! archive, uploaded through the engine. Its root-owned entries cannot be made by anything
//! inside, and tmpfs volumes hold data only while a running container mounts them.

use bollard::Docker;
use bollard::query_parameters::UploadToContainerOptionsBuilder;
use roundtable_session_runtime::{RuntimeError, TmpEntry};
use roundtable_specs::layout as paths;

use crate::calls::timed;
use crate::errors::{engine_error, io_error};

/// Uploads `entries` under `/tmp` of the running container `name`.
pub(crate) async fn seed_tmp(docker: &Docker, name: &str, entries: &[TmpEntry]) -> Result<(), RuntimeError> {
    let tmp_seed = tmp_archive(entries)?;
    let upload = UploadToContainerOptionsBuilder::default().path(paths::TMP).build();
    let seeded = docker.upload_to_container(name, Some(upload), bollard::body_full(tmp_seed.into()));
    timed(name, "upload /tmp", seeded).await.map_err(engine_error("upload /tmp/roundtable"))?;
    Ok(())
}

/// The plan's entries under `/tmp` (the agent CLI's homes and manifests), each with its owner and
/// mode; `/tmp/roundtable/` itself is always there, root-owned 0755, so the agent cannot add to it.
fn tmp_archive(entries: &[TmpEntry]) -> Result<Vec<u8>, RuntimeError> {
    let io = io_error("seed /tmp");
    let mut builder = tar::Builder::new(Vec::new());
    let root = TmpEntry { path: "roundtable".into(), owner: 0, mode: 0o755, contents: None };
    let entries = std::iter::once(&root).chain(entries.iter().filter(|e| e.path.trim_end_matches('/') != "roundtable"));
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_mode(entry.mode);
        header.set_uid(u64::from(entry.owner));
        header.set_gid(u64::from(entry.owner));
        header.set_mtime(0);
        match &entry.contents {
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                builder.append_data(&mut header, &entry.path, std::io::empty()).map_err(io)?;
            }
            Some(contents) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(contents.len() as u64);
                builder.append_data(&mut header, &entry.path, contents.as_slice()).map_err(io)?;
            }
        }
    }
    builder.into_inner().map_err(io)
}
