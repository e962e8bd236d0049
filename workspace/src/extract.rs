//! The rooted extractor: unpacks the workspace archive the engine streams out, inside one folder
//! it cannot leave (cap-std). It rejects absolute paths, `..`, links, devices, FIFOs and names
//! with control characters or invalid UTF-8, strips setuid/setgid/sticky bits, and bounds total
//! bytes and entries. Rejected entries are listed, escaped, never written.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, Permissions};

/// How much one export may unpack.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bytes: u64,
    pub max_entries: u64,
}

pub use roundtable_specs::session::{Extracted, Rejected};

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("the export holds more than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("the export holds more than {limit} entries")]
    TooManyEntries { limit: u64 },
    #[error("cannot extract into {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Escapes a raw name for display: invalid UTF-8 and control characters become escapes.
pub fn escape_name(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || c == '\u{fffd}' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The entry's path below the archive's top folder (the engine names it after the copied folder),
/// or why it is refused.
fn relative_path(raw: &[u8]) -> Result<Option<PathBuf>, &'static str> {
    let text = std::str::from_utf8(raw).map_err(|_| "the name is not valid UTF-8")?;
    if text.chars().any(char::is_control) {
        return Err("the name holds control characters");
    }
    let path = Path::new(text);
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err("absolute path"),
            Component::ParentDir => return Err("'..' in the path"),
        }
    }
    // Drop the top folder (`workspace/` for /roundtable/workspace).
    if parts.len() <= 1 {
        return Ok(None);
    }
    Ok(Some(parts[1..].iter().collect()))
}

/// Extracts `archive` into `dest` (created if missing).
pub fn extract(archive: impl Read, dest: &Path, limits: Limits) -> Result<Extracted, ExtractError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ExtractError::Io { path, source }
    };
    std::fs::create_dir_all(dest).map_err(io(dest))?;
    let root = Dir::open_ambient_dir(dest, ambient_authority()).map_err(io(dest))?;
    let mut outcome = Extracted::default();
    let mut entries_seen = 0u64;
    let mut archive = tar::Archive::new(archive);
    for entry in archive.entries().map_err(io(dest))? {
        let mut entry = entry.map_err(io(dest))?;
        entries_seen += 1;
        if entries_seen > limits.max_entries {
            return Err(ExtractError::TooManyEntries { limit: limits.max_entries });
        }
        let raw_name = entry.path_bytes().into_owned();
        let shown = escape_name(&raw_name);
        let kind = entry.header().entry_type();
        let reject = |outcome: &mut Extracted, reason: &str| {
            outcome.rejected.push(Rejected { path: shown.clone(), reason: reason.into() });
        };
        let relative = match relative_path(&raw_name) {
            Ok(Some(path)) => path,
            Ok(None) => continue,
            Err(reason) => {
                reject(&mut outcome, reason);
                continue;
            }
        };
        match kind {
            tar::EntryType::Directory => {
                root.create_dir_all(&relative).map_err(io(&dest.join(&relative)))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.header().size().map_err(io(dest))?;
                if outcome.bytes + size > limits.max_bytes {
                    return Err(ExtractError::TooLarge { limit: limits.max_bytes });
                }
                if let Some(parent) = relative.parent().filter(|p| !p.as_os_str().is_empty()) {
                    root.create_dir_all(parent).map_err(io(&dest.join(parent)))?;
                }
                let mode = entry.header().mode().unwrap_or(0o644);
                if mode & 0o7000 != 0 {
                    outcome.stripped_bits.push(shown.clone());
                }
                let mut file = root.create(&relative).map_err(io(&dest.join(&relative)))?;
                let written =
                    std::io::copy(&mut (&mut entry).take(size), &mut file).map_err(io(&dest.join(&relative)))?;
                let permissions = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
                use std::os::unix::fs::PermissionsExt as _;
                root.set_permissions(&relative, Permissions::from_std(std::fs::Permissions::from_mode(permissions)))
                    .map_err(io(&dest.join(&relative)))?;
                outcome.files += 1;
                outcome.bytes += written;
            }
            tar::EntryType::Symlink => reject(&mut outcome, "a symbolic link"),
            tar::EntryType::Link => reject(&mut outcome, "a hard link"),
            tar::EntryType::Char | tar::EntryType::Block => reject(&mut outcome, "a device"),
            tar::EntryType::Fifo => reject(&mut outcome, "a FIFO"),
            _ => reject(&mut outcome, "not a regular file or folder"),
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        build(&mut builder);
        builder.into_inner().expect("tar")
    }

    fn header(kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(size);
        header.set_mode(mode);
        header
    }

    const LIMITS: Limits = Limits { max_bytes: 1 << 20, max_entries: 1000 };

    #[test]
    fn extracts_files_and_rejects_everything_else() {
        let data = archive(|b| {
            b.append_data(&mut header(tar::EntryType::Directory, 0, 0o755), "workspace/", &[][..]).expect("dir");
            b.append_data(&mut header(tar::EntryType::Regular, 5, 0o644), "workspace/a.txt", &b"hello"[..]).expect("a");
            b.append_data(&mut header(tar::EntryType::Regular, 2, 0o4755), "workspace/bin/tool", &b"#!"[..])
                .expect("tool");
            let mut link = header(tar::EntryType::Symlink, 0, 0o777);
            b.append_link(&mut link, "workspace/passwd", "/etc/passwd").expect("symlink");
            let mut hard = header(tar::EntryType::Link, 0, 0o644);
            b.append_link(&mut hard, "workspace/hard", "workspace/a.txt").expect("hard link");
            b.append_data(&mut header(tar::EntryType::Fifo, 0, 0o644), "workspace/pipe", &[][..]).expect("fifo");
        });
        let mut raw = archive(|b| {
            b.append_data(&mut header(tar::EntryType::Regular, 1, 0o644), "workspace/esc-name", &b"x"[..]).expect("x");
        });
        // Put an escape sequence and a newline into the stored name.
        let name = b"workspace/\x1b[31m\n.txt";
        raw[..name.len()].copy_from_slice(name);
        raw[name.len()..100].fill(0);
        let checksum_header = tar::Header::from_byte_slice(&raw[..512]).clone();
        let mut fixed = checksum_header;
        fixed.set_cksum();
        raw[..512].copy_from_slice(fixed.as_bytes());
        let mut combined = data[..data.len() - 1024].to_vec();
        combined.extend_from_slice(&raw);

        let dest = tempfile::tempdir().expect("tempdir");
        let outcome = extract(combined.as_slice(), dest.path(), LIMITS).expect("extract");
        assert_eq!(std::fs::read(dest.path().join("a.txt")).expect("a"), b"hello");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dest.path().join("bin/tool")).expect("tool").permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "setuid stripped");
        assert_eq!(outcome.stripped_bits, ["workspace/bin/tool"]);
        let reasons: Vec<&str> = outcome.rejected.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(reasons, ["a symbolic link", "a hard link", "a FIFO", "the name holds control characters"]);
        assert!(!outcome.rejected[3].path.contains('\x1b') && outcome.rejected[3].path.contains("\\u{1b}"));
        assert!(!dest.path().join("passwd").exists() && !dest.path().join("hard").exists());
        assert_eq!(outcome.files, 2);
    }

    #[test]
    fn traversal_and_absolute_names_never_leave_the_folder() {
        for name in ["workspace/../../escape.txt", "/etc/escape.txt"] {
            let mut raw = archive(|b| {
                b.append_data(&mut header(tar::EntryType::Regular, 1, 0o644), "workspace/placeholder", &b"x"[..])
                    .expect("x");
            });
            raw[..name.len()].copy_from_slice(name.as_bytes());
            raw[name.len()..100].fill(0);
            let mut fixed = tar::Header::from_byte_slice(&raw[..512]).clone();
            fixed.set_cksum();
            raw[..512].copy_from_slice(fixed.as_bytes());
            let dest = tempfile::tempdir().expect("tempdir");
            let outcome = extract(raw.as_slice(), &dest.path().join("inner"), LIMITS).expect("extract");
            assert_eq!(outcome.files, 0, "{name}");
            assert_eq!(outcome.rejected.len(), 1, "{name}");
            assert!(!dest.path().join("escape.txt").exists());
        }
    }

    #[test]
    fn limits_bound_bytes_and_entries() {
        let big = archive(|b| {
            b.append_data(&mut header(tar::EntryType::Regular, 2048, 0o644), "workspace/big", &[0u8; 2048][..])
                .expect("big");
        });
        let dest = tempfile::tempdir().expect("tempdir");
        let small = Limits { max_bytes: 1024, max_entries: 10 };
        assert!(matches!(extract(big.as_slice(), dest.path(), small), Err(ExtractError::TooLarge { .. })));
        let many = archive(|b| {
            for i in 0..20 {
                b.append_data(&mut header(tar::EntryType::Regular, 0, 0o644), format!("workspace/f{i}"), &[][..])
                    .expect("f");
            }
        });
        assert!(matches!(extract(many.as_slice(), dest.path(), small), Err(ExtractError::TooManyEntries { .. })));
    }
}
