//! The export: the container paused so surviving children cannot race it, then its workspace
//! streamed out of the engine straight into the rooted extractor (no spool on the host), within
//! the plan's export limits.

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use bollard::Docker;
use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use futures::StreamExt as _;
use roundtable_session_runtime::{ExportLimits, RuntimeError};
use roundtable_specs::layout as paths;
use roundtable_specs::session::{Extracted, Inventory, Rejected};
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

/// The workspace's inventory, taken from inside the running container by `sandbox inventory`.
/// `Err` says why there is none.
pub(super) async fn inventory(docker: &Docker, name: &str) -> Result<Inventory, String> {
    let argv = vec![paths::BINARY.to_owned(), "sandbox".into(), "inventory".into(), paths::WORKSPACE.to_owned()];
    let (_keep, mut never) = tokio::sync::watch::channel(false);
    let deadline = Some(std::time::Duration::from_secs(120));
    let listed = crate::exec::run_exec(docker, name, argv, Vec::new(), None, INVENTORY_CAP, deadline, &mut never).await;
    let listed =
        listed.map_err(|e| format!("taking the workspace's inventory: {}", roundtable_telemetry::error_chain(&e)))?;
    match (listed.exit_code, serde_json::from_slice::<Inventory>(&listed.stdout.bytes)) {
        (Some(0), Ok(found)) if found.truncated == 0 => Ok(found),
        (Some(0), Ok(found)) => Err(format!("the workspace holds more than {} entries", found.entries.len())),
        (code, _) => Err(format!(
            "taking the workspace's inventory failed (exit code {}, {} bytes): {}",
            code.map_or_else(|| "unknown".into(), |c| c.to_string()),
            listed.stdout.total,
            String::from_utf8_lossy(&listed.stderr.bytes).trim()
        )),
    }
}

/// What the inventory's output may hold (paths in hex, up to 200,000 entries).
const INVENTORY_CAP: u64 = 256 << 20;

/// Checks the export (`extracted`, unpacked at `export_dir`) against `inventory`, taken from
/// inside after it. Nothing changes while the container is paused, so each entry that last
/// changed before it was thawed (`thawed_at_ns`) was there when the export was taken: each such
/// file and folder must be in the export, or refused by the extractor, or below a refused folder: an archive that silently
/// stops short (Podman's, of a paused container, at a path too long for it) fails here instead
/// of leaving files out, which would propose them as deleted. FIFOs, sockets and devices the
/// archive did not carry (gVisor keeps them in its own kernel) are refused as the extractor
/// refuses them. Entries that changed after the thaw are the lingering processes': not the
/// export's.
pub(super) fn account(
    extracted: &mut Extracted,
    export_dir: &Path,
    inventory: &Inventory,
    thawed_at_ns: i128,
) -> Result<(), String> {
    let mut missing = Vec::new();
    for entry in inventory.entries.iter().filter(|e| e.changed_ns < thawed_at_ns) {
        let Some(raw) = unhex(&entry.path_hex) else { continue };
        let shown = extract::escape_name(&raw);
        let refused = extracted.rejected.iter().any(|r| shown == r.path || shown.starts_with(&format!("{}/", r.path)));
        if refused {
            continue;
        }
        match entry.kind.refusal() {
            Some(reason) => {
                let exact = extract::name_problem(&raw).is_none();
                extracted.rejected.push(Rejected { path: shown, reason: reason.into(), exact });
            }
            None => {
                // Only a definite "not there" counts: a path too long to look up whole was
                // carried by the extractor's relative walk.
                let at = export_dir.join(std::ffi::OsStr::from_bytes(&raw));
                if at.symlink_metadata().is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
                    missing.push(shown);
                }
            }
        }
    }
    match missing.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "the engine's export left out {} of the workspace's entries (the first: {first}); nothing is proposed rather than taking them for deleted",
            missing.len()
        )),
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

#[cfg(test)]
mod tests {
    use roundtable_specs::session::{EntryKind, InventoryEntry};

    use super::*;

    fn entry(path: &str, kind: EntryKind, changed_ns: i128) -> InventoryEntry {
        let path_hex = path.bytes().map(|b| format!("{b:02x}")).collect();
        InventoryEntry { path_hex, kind, changed_ns }
    }

    const THAWED: i128 = 1_000;

    #[test]
    fn what_the_export_left_out_fails_it_and_what_changed_after_the_thaw_does_not() {
        let export = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(export.path().join("docs")).expect("docs");
        std::fs::write(export.path().join("docs/guide.md"), "g").expect("guide");
        let mut extracted = Extracted {
            rejected: vec![Rejected { path: "deep".into(), reason: "too long".into(), exact: true }],
            ..Extracted::default()
        };
        let whole = Inventory {
            entries: vec![
                entry("docs", EntryKind::Folder, 10),
                entry("docs/guide.md", EntryKind::File, 10),
                // Below a refused folder: accounted for.
                entry("deep/deeper/f", EntryKind::File, 10),
                // Written by a lingering process after the thaw: not the export's.
                entry("late.txt", EntryKind::File, THAWED + 1),
            ],
            truncated: 0,
        };
        assert_eq!(account(&mut extracted, export.path(), &whole, THAWED), Ok(()));
        let short = Inventory { entries: vec![entry("README.md", EntryKind::File, 10)], truncated: 0 };
        let failed = account(&mut extracted, export.path(), &short, THAWED).expect_err("left out");
        assert!(failed.contains("left out 1") && failed.contains("README.md"), "{failed}");
    }

    #[test]
    fn a_fifo_the_archive_never_carried_is_refused_as_the_extractor_refuses_one() {
        let export = tempfile::tempdir().expect("tempdir");
        let mut extracted = Extracted::default();
        let inventory = Inventory { entries: vec![entry("docs/guide.md", EntryKind::Fifo, 10)], truncated: 0 };
        assert_eq!(account(&mut extracted, export.path(), &inventory, THAWED), Ok(()));
        assert_eq!(
            extracted.rejected,
            [Rejected { path: "docs/guide.md".into(), reason: "a FIFO".into(), exact: true }]
        );
    }
}
