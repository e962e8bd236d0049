//! The export: the container paused so surviving children cannot race it, then its workspace
//! streamed out of the engine straight into the rooted extractor (no spool on the host), within
//! the plan's export limits.

use std::path::Path;

use bollard::Docker;
use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use futures::StreamExt as _;
use roundtable_session_runtime::{ExportLimits, RuntimeError};
use roundtable_specs::layout as paths;
use roundtable_specs::session::{Extracted, Rejected, SpecialsReport};
use roundtable_workspace::extract::{self, Limits};

use crate::calls::timed;
use crate::errors::engine_error;

/// Pauses `name`, retrying when the cgroup freezer gave up ("unable to freeze": runc could not
/// freeze every process in time, which happens under load while processes fork or exit). Each
/// try is a fresh attempt at the same pause; nothing else is retried.
pub(super) async fn pause_for_export(docker: &Docker, name: &str) -> Result<(), bollard::errors::Error> {
    const RETRY_AFTER: [u64; 3] = [50, 200, 800];
    let mut delays = RETRY_AFTER.iter();
    loop {
        match timed(name, "pause", docker.pause_container(name)).await {
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 500, message })
                if message.contains("unable to freeze") =>
            {
                let Some(delay) = delays.next() else {
                    return Err(bollard::errors::Error::DockerResponseServerError { status_code: 500, message });
                };
                tracing::warn!(container = name, %message, retry_in_ms = delay, "the engine could not freeze the container; retrying the pause");
                tokio::time::sleep(std::time::Duration::from_millis(*delay)).await;
            }
            other => return other,
        }
    }
}

/// Every FIFO, socket and device in the running container's workspace, listed from inside by
/// `sandbox specials`: under gVisor they exist in the sandbox's kernel only. `Err` says why
/// they could not be listed.
pub(super) async fn specials(docker: &Docker, name: &str) -> Result<SpecialsReport, String> {
    let argv = vec![paths::BINARY.to_owned(), "sandbox".into(), "specials".into(), paths::WORKSPACE.to_owned()];
    let (_keep, mut never) = tokio::sync::watch::channel(false);
    let deadline = Some(std::time::Duration::from_secs(60));
    let listed = crate::exec::run_exec(docker, name, argv, Vec::new(), None, 4 << 20, deadline, &mut never).await;
    let listed = listed
        .map_err(|e| format!("listing the workspace's special files: {}", roundtable_telemetry::error_chain(&e)))?;
    match (listed.exit_code, serde_json::from_slice::<SpecialsReport>(&listed.stdout.bytes)) {
        (Some(0), Ok(report)) if report.truncated == 0 => Ok(report),
        (Some(0), Ok(report)) => Err(format!("the workspace holds more than {} special files", report.entries.len())),
        (code, _) => Err(format!(
            "listing the workspace's special files failed (exit code {}): {}",
            code.map_or_else(|| "unknown".into(), |c| c.to_string()),
            String::from_utf8_lossy(&listed.stderr.bytes).trim()
        )),
    }
}

/// Lists each entry of `found` as refused, as the extractor lists a FIFO or device it meets in
/// the archive, unless the archive already had it.
pub(super) fn add_specials(extracted: &mut Extracted, found: &SpecialsReport) {
    for entry in &found.entries {
        let Some(raw) = unhex(&entry.path_hex) else { continue };
        let path = extract::escape_name(&raw);
        if extracted.rejected.iter().any(|r| r.path == path) {
            continue;
        }
        let exact = extract::name_problem(&raw).is_none();
        extracted.rejected.push(Rejected { path, reason: entry.kind.reason().into(), exact });
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// Streams the workspace out of the paused container `name` straight into the rooted extractor
/// at `export_dir`: reading stops at the byte cap (an archive counts its headers too, so the cap
/// allows some slack; a sparse file that is small in tmpfs is dense in the tar).
pub(super) async fn export(
    docker: &Docker,
    name: &str,
    export_dir: &Path,
    limits: ExportLimits,
) -> Result<Extracted, RuntimeError> {
    let options = DownloadFromContainerOptionsBuilder::default().path(paths::WORKSPACE).build();
    let mut stream = docker.download_from_container(name, Some(options));
    let (chunks, receiver) = std::sync::mpsc::sync_channel::<Vec<u8>>(16);
    let export_dir = export_dir.to_owned();
    let extract_limits = Limits { max_bytes: limits.max_bytes, max_entries: limits.max_entries };
    let extractor = tokio::task::spawn_blocking(move || {
        extract::extract(ChannelReader::new(receiver), &export_dir, extract_limits)
    });
    let cap = limits.max_bytes.saturating_mul(2).saturating_add(1 << 20);
    let mut streamed = 0u64;
    let mut over_cap = false;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(engine_error("download the workspace"))?;
        streamed += chunk.len() as u64;
        if streamed > cap {
            over_cap = true;
            break;
        }
        // The extractor stopped (it refused the archive): its verdict follows.
        if chunks.send(chunk.to_vec()).is_err() {
            break;
        }
    }
    drop(chunks);
    drop(stream);
    let extracted =
        extractor.await.map_err(|error| RuntimeError::Protocol { step: "extract", detail: error.to_string() })?;
    if over_cap {
        let too_large = extract::ExtractError::TooLarge { limit: limits.max_bytes };
        return Err(RuntimeError::Export(Box::new(too_large)));
    }
    extracted.map_err(|error| RuntimeError::Export(Box::new(error)))
}

/// A blocking reader over chunks sent from the async side; the end of the stream is the sender
/// going away.
struct ChannelReader {
    chunks: std::sync::mpsc::Receiver<Vec<u8>>,
    current: std::io::Cursor<Vec<u8>>,
}

impl ChannelReader {
    fn new(chunks: std::sync::mpsc::Receiver<Vec<u8>>) -> Self {
        Self { chunks, current: std::io::Cursor::new(Vec::new()) }
    }
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let read = self.current.read(buf)?;
            if read > 0 || buf.is_empty() {
                return Ok(read);
            }
            match self.chunks.recv() {
                Ok(chunk) => self.current = std::io::Cursor::new(chunk),
                Err(_) => return Ok(0),
            }
        }
    }
}
