//! `roundtable sandbox specials DIR`: every FIFO, socket and device below DIR, found from inside
//! the container. Under gVisor they live in the sandbox's kernel only, so the host-side export
//! cannot see them; the controller lists them as refused from this report instead.

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;

use roundtable_specs::session::{SpecialEntry, SpecialKind, SpecialsReport};

/// At most this many entries are reported; the rest are counted as `truncated`.
pub const MAX_ENTRIES: usize = 10_000;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Walks `dir` without following links.
pub fn run(dir: &Path) -> SpecialsReport {
    let mut found = SpecialsReport::default();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            let special = if kind.is_fifo() {
                SpecialKind::Fifo
            } else if kind.is_socket() {
                SpecialKind::Socket
            } else if kind.is_char_device() || kind.is_block_device() {
                SpecialKind::Device
            } else {
                if kind.is_dir() {
                    pending.push(entry.path());
                }
                continue;
            };
            if found.entries.len() == MAX_ENTRIES {
                found.truncated += 1;
                continue;
            }
            let path = entry.path();
            let below = path.strip_prefix(dir).unwrap_or(&path);
            found.entries.push(SpecialEntry { path_hex: hex(below.as_os_str().as_bytes()), kind: special });
        }
    }
    found
}
