//! `roundtable sandbox inventory DIR`: every entry below DIR as seen from inside the container,
//! with its kind and when it last changed. The controller checks the engine's export against it
//! (`docker/src/session/export.rs`).

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use roundtable_specs::session::{EntryKind, Inventory, InventoryEntry};

/// At most this many entries are reported (an export holds at most 100,000); the rest are
/// counted as `truncated`.
pub const MAX_ENTRIES: usize = 200_000;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn kind_of(kind: std::fs::FileType) -> EntryKind {
    if kind.is_dir() {
        EntryKind::Folder
    } else if kind.is_symlink() {
        EntryKind::Link
    } else if kind.is_fifo() {
        EntryKind::Fifo
    } else if kind.is_socket() {
        EntryKind::Socket
    } else if kind.is_char_device() || kind.is_block_device() {
        EntryKind::Device
    } else {
        EntryKind::File
    }
}

/// Walks `dir` without following links.
pub fn run(dir: &Path) -> Inventory {
    let mut found = Inventory::default();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else { continue };
            let kind = kind_of(meta.file_type());
            if kind == EntryKind::Folder {
                pending.push(entry.path());
            }
            if found.entries.len() == MAX_ENTRIES {
                found.truncated += 1;
                continue;
            }
            let path = entry.path();
            let below = path.strip_prefix(dir).unwrap_or(&path);
            let changed_ns = i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec());
            found.entries.push(InventoryEntry { path_hex: hex(below.as_os_str().as_bytes()), kind, changed_ns });
        }
    }
    found
}
