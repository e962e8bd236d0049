//! Seeds uploaded through the engine into the running container (tmpfs volumes hold data only
//! while a running container mounts them): the `/tmp` seed, the plan's entries under `/tmp` (the
//! agent CLI's homes and manifests), whose root-owned entries cannot be made by anything inside;
//! and, under gVisor, the workspace from its source, extracted by the engine on the host's side
//! of the volume instead of file by file through the sandbox's file proxy (30 s instead of 0.5 s
//! for 10,000 files under runc).

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::query_parameters::UploadToContainerOptionsBuilder;
use roundtable_session_runtime::seed::{FOLDER_MODE, SeedEntry, SeedError, Seeded, failed, walk};
use roundtable_session_runtime::{RuntimeError, TmpEntry};
use roundtable_specs::layout as paths;
use tokio::sync::mpsc;

use crate::calls::timed;
use crate::errors::{engine_error, engine_gone_in, io_error};

/// The workspace archive is streamed in chunks of this size, a few at a time, so a large source
/// never sits in the daemon's memory whole.
const CHUNK: usize = 256 << 10;
const CHUNKS_IN_FLIGHT: usize = 4;

/// Why an upload seed of the workspace failed: the session's check fails on it (a workspace too
/// small, a source file that cannot be read), unless the engine itself is gone.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkspaceSeedError {
    #[error(transparent)]
    Source(#[from] SeedError),
    #[error("the engine refused the workspace's archive: {0}")]
    Refused(String),
    #[error(transparent)]
    Engine(RuntimeError),
}

/// Uploads the folders and files below `source` (as [`walk`] yields them) into the workspace of
/// the running container `name`, owned by `uid`:`gid`, streamed as it is read.
pub(crate) async fn seed_workspace(
    docker: &Docker,
    name: &str,
    source: &Path,
    owner: (u32, u32),
) -> Result<Seeded, WorkspaceSeedError> {
    let (chunks, received) = mpsc::channel::<io::Result<bytes::Bytes>>(CHUNKS_IN_FLIGHT);
    let source = source.to_path_buf();
    let archive = tokio::task::spawn_blocking(move || {
        let failed_chunks = chunks.clone();
        let archived = workspace_archive(&source, owner, Chunks { sender: chunks, buffer: Vec::with_capacity(CHUNK) });
        if let Err(error) = &archived {
            // The upload must not end as if the archive were whole.
            let _ = failed_chunks.blocking_send(Err(io::Error::other(error.to_string())));
        }
        archived
    });
    let received = futures::stream::unfold(received, |mut received| async move {
        received.recv().await.map(|chunk| (chunk, received))
    });
    let body = bollard::body_try_stream(received);
    let options = UploadToContainerOptionsBuilder::default().path(paths::WORKSPACE).build();
    let uploaded = timed(name, "upload the workspace", docker.upload_to_container(name, Some(options), body)).await;
    let archived = archive.await.map_err(|error| SeedError {
        action: "archive",
        path: PathBuf::from(paths::WORKSPACE),
        source: io::Error::other(error.to_string()),
    })?;
    // The archive's own failure says more than the engine's view of a body cut short.
    let seeded = archived?;
    let Err(error) = uploaded else { return Ok(seeded) };
    let error = engine_error("upload the workspace")(error);
    // An engine that refuses an archive answers and closes the connection while the body is
    // still being sent, which reads like an engine gone: only one that no longer answers is.
    if let RuntimeError::Engine { source, .. } = &error
        && engine_gone_in(source)
        && docker.ping().await.is_err()
    {
        return Err(WorkspaceSeedError::Engine(error));
    }
    Err(WorkspaceSeedError::Refused(roundtable_telemetry::error_chain(&error)))
}

/// Writes the tar of `source` into `out`: folders 0755 and files with their seed mode, owned by
/// `owner`, at the epoch.
fn workspace_archive(source: &Path, owner: (u32, u32), out: Chunks) -> Result<Seeded, SeedError> {
    let mut builder = tar::Builder::new(out);
    let mut seeded = Seeded::default();
    let header = |mode: u32, size: u64, kind: tar::EntryType| {
        let mut header = tar::Header::new_gnu();
        header.set_mode(mode);
        header.set_uid(u64::from(owner.0));
        header.set_gid(u64::from(owner.1));
        header.set_mtime(0);
        header.set_entry_type(kind);
        header.set_size(size);
        header
    };
    // The engine guesses an upload's compression from its first bytes, which are the first
    // entry's name: a file named `BZh…` made it read the archive as bzip2. The workspace itself
    // comes first, so they are always `./`.
    let mut top = header(FOLDER_MODE, 0, tar::EntryType::Directory);
    builder.append_data(&mut top, "./", io::empty()).map_err(failed("upload", source))?;
    walk(source, |entry| {
        match entry {
            SeedEntry::Folder(relative) => {
                let mut folder = header(FOLDER_MODE, 0, tar::EntryType::Directory);
                builder.append_data(&mut folder, &relative, io::empty()).map_err(failed("upload", &relative))?;
            }
            SeedEntry::File { relative, mode } => {
                let path = source.join(&relative);
                let file = std::fs::File::open(&path).map_err(failed("open", &path))?;
                let size = file.metadata().map_err(failed("inspect", &path))?.len();
                let mut file_header = header(mode, size, tar::EntryType::Regular);
                let exact = Exact { inner: file.take(size), left: size };
                builder.append_data(&mut file_header, &relative, exact).map_err(failed("read", &path))?;
                seeded.files += 1;
                seeded.bytes += size;
            }
        }
        Ok(())
    })?;
    let mut out = builder.into_inner().map_err(failed("upload", source))?;
    out.flush().map_err(failed("upload", source))?;
    Ok(seeded)
}

/// A file's bytes, exactly as many as its header says: a file that shrank while being read
/// fails instead of leaving the archive misaligned.
struct Exact<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buffer)?;
        if read == 0 && self.left > 0 && !buffer.is_empty() {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file shrank while it was being seeded"));
        }
        self.left -= read as u64;
        Ok(read)
    }
}

/// A writer that sends what it is given to the upload in [`CHUNK`]s, waiting while
/// [`CHUNKS_IN_FLIGHT`] are unsent.
struct Chunks {
    sender: mpsc::Sender<io::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
}

impl Chunks {
    fn send(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK)));
        self.sender.blocking_send(Ok(chunk)).map_err(|_| {
            io::Error::new(io::ErrorKind::BrokenPipe, "the engine stopped reading the workspace's archive")
        })
    }
}

impl Write for Chunks {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= CHUNK {
            self.send()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// The archive the engine extracts into the sandbox's workspace: what the walk yields, owned
    /// by the agent, at the epoch; a link to a host file is not followed, nor carried.
    #[test]
    fn the_uploaded_workspace_holds_the_seed_and_no_link_out() {
        let source = tempfile::tempdir().expect("source");
        std::fs::create_dir_all(source.path().join("src/deep")).expect("folders");
        std::fs::write(source.path().join("src/deep/run.sh"), b"#!/bin/sh\n").expect("script");
        std::fs::set_permissions(source.path().join("src/deep/run.sh"), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        let big: Vec<u8> = (0..(CHUNK as u32 * 3)).map(|i| (i % 251) as u8).collect();
        std::fs::write(source.path().join("big.bin"), &big).expect("big");
        std::os::unix::fs::symlink("/etc/passwd", source.path().join("passwd")).expect("link");
        let (sender, mut received) = mpsc::channel(CHUNKS_IN_FLIGHT);
        let archiving = std::thread::spawn({
            let source = source.path().to_path_buf();
            move || workspace_archive(&source, (1000, 1000), Chunks { sender, buffer: Vec::new() })
        });
        let mut archive = Vec::new();
        while let Some(chunk) = received.blocking_recv() {
            archive.extend_from_slice(&chunk.expect("a chunk"));
        }
        let seeded = archiving.join().expect("thread").expect("archive");
        assert!(archive.starts_with(b"./\0"), "the first bytes are the workspace's own entry, whatever the names");
        assert_eq!(seeded, Seeded { files: 2, bytes: big.len() as u64 + 10 });
        let mut entries = tar::Archive::new(archive.as_slice());
        let mut seen = Vec::new();
        for entry in entries.entries().expect("entries") {
            let mut entry = entry.expect("entry");
            let header = entry.header().clone();
            let path = entry.path().expect("path").display().to_string();
            assert_eq!((header.uid().ok(), header.gid().ok(), header.mtime().ok()), (Some(1000), Some(1000), Some(0)));
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).expect("read");
            if path == "big.bin" {
                assert!(bytes == big, "the big file arrives whole across chunks");
            }
            seen.push((path, header.mode().expect("mode"), header.entry_type()));
        }
        seen.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            seen,
            [
                ("./".to_owned(), 0o755, tar::EntryType::Directory),
                ("big.bin".to_owned(), 0o644, tar::EntryType::Regular),
                ("src".to_owned(), 0o755, tar::EntryType::Directory),
                ("src/deep".to_owned(), 0o755, tar::EntryType::Directory),
                ("src/deep/run.sh".to_owned(), 0o755, tar::EntryType::Regular),
            ]
        );
    }
}
