//! The rooted extractor: unpacks the workspace archive the engine streams out, inside one folder
//! it cannot leave (cap-std). It rejects absolute paths, `..`, symbolic links, devices, FIFOs,
//! `.git` entries and names with control characters or invalid UTF-8; strips setuid/setgid/sticky
//! bits; gives an extra hard-link name the content of the file it links to; and bounds total bytes
//! and entries. Rejected entries are listed, escaped, never written; an entry whose path is too
//! long or too deep for the host is rejected, not fatal.

use std::collections::HashMap;
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

/// Escapes a raw name for display: control characters become `\u{…}` and bytes that are not
/// UTF-8 `\x{…}` (what reaches a terminal is escaped again by the renderer).
pub fn escape_name(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            } else {
                out.push(c);
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{{{byte:02x}}}"));
        }
    }
    out
}

/// Why an entry's name is refused, if it is: what the host cannot carry back faithfully.
pub fn name_problem(raw: &[u8]) -> Option<&'static str> {
    let Ok(text) = std::str::from_utf8(raw) else { return Some("the name is not valid UTF-8") };
    if text.chars().any(char::is_control) {
        return Some("the name holds control characters");
    }
    None
}

/// The entry's path below the archive's top folder (the engine names it after the copied
/// folder), or why it is refused. `None`: the top folder itself.
fn relative_path(raw: &[u8]) -> Result<Option<PathBuf>, &'static str> {
    if let Some(problem) = name_problem(raw) {
        return Err(problem);
    }
    let path = Path::new(std::str::from_utf8(raw).map_err(|_| "the name is not valid UTF-8")?);
    let mut parts = Vec::new();
    for (index, component) in path.components().enumerate() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            // Podman names the top folder `/` when it exports a paused container (`/a.txt` where
            // Docker writes `workspace/a.txt`): a leading root stands for the top folder.
            Component::RootDir if index == 0 => parts.push(std::ffi::OsStr::new("")),
            Component::RootDir | Component::Prefix(_) => return Err("absolute path"),
            Component::ParentDir => return Err("'..' in the path"),
        }
    }
    // Drop the top folder (`workspace/` for /roundtable/workspace).
    if parts.len() <= 1 {
        return Ok(None);
    }
    if parts[1..].iter().any(|part| *part == ".git") {
        return Err("a .git entry (never read back: it could point git at another repository)");
    }
    Ok(Some(parts[1..].iter().collect()))
}

/// The name shown for an entry: below the top folder when it has one.
fn shown_name(raw: &[u8]) -> String {
    let below = raw.iter().position(|b| *b == b'/').map_or(raw, |slash| &raw[slash + 1..]);
    escape_name(below)
}

/// Whether a failed write means this one path cannot exist on the host (too long, too deep),
/// rather than the host failing (disk full, permissions).
fn path_cannot_exist(error: &std::io::Error) -> bool {
    // ENAMETOOLONG (36) and ELOOP (40) on Linux.
    error.kind() == std::io::ErrorKind::InvalidFilename || matches!(error.raw_os_error(), Some(36 | 40))
}

/// The longest path the host's calls take (`PATH_MAX` on Linux, the terminating NUL included).
const MAX_HOST_PATH: usize = 4096;

/// Extracts `archive` into `dest` (created if missing).
pub fn extract(archive: impl Read, dest: &Path, limits: Limits) -> Result<Extracted, ExtractError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ExtractError::Io { path, source }
    };
    std::fs::create_dir_all(dest).map_err(io(dest))?;
    let root = Dir::open_ambient_dir(dest, ambient_authority()).map_err(io(dest))?;
    let mut outcome = Extracted::default();
    // Regular files extracted so far, by their name in the archive (hard links name those).
    let mut extracted: HashMap<Vec<u8>, PathBuf> = HashMap::new();
    let mut entries_seen = 0u64;
    let mut archive = tar::Archive::new(archive);
    for entry in archive.entries().map_err(io(dest))? {
        let mut entry = entry.map_err(io(dest))?;
        entries_seen += 1;
        if entries_seen > limits.max_entries {
            return Err(ExtractError::TooManyEntries { limit: limits.max_entries });
        }
        let raw_name = entry.path_bytes().into_owned();
        let kind = entry.header().entry_type();
        let reject = |outcome: &mut Extracted, reason: &str, exact: bool| {
            outcome.rejected.push(Rejected { path: shown_name(&raw_name), reason: reason.into(), exact });
        };
        let relative = match relative_path(&raw_name) {
            Ok(Some(path)) => path,
            Ok(None) => continue,
            Err(reason) => {
                let exact = name_problem(&raw_name).is_none();
                reject(&mut outcome, reason, exact);
                continue;
            }
        };
        // Everything downstream (the patch, git) works with whole host paths: one longer than the
        // host allows is refused here, before any of its folders is made.
        if dest.as_os_str().len() + 1 + relative.as_os_str().len() >= MAX_HOST_PATH {
            reject(&mut outcome, "the path is too long or too deep for the host", true);
            continue;
        }
        let written = match kind {
            tar::EntryType::Directory => root.create_dir_all(&relative).map(|()| None),
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.header().size().map_err(io(dest))?;
                if outcome.bytes + size > limits.max_bytes {
                    return Err(ExtractError::TooLarge { limit: limits.max_bytes });
                }
                let mode = entry.header().mode().unwrap_or(0o644);
                write_file(&root, &relative, &mut (&mut entry).take(size), mode).map(|n| Some((n, mode)))
            }
            tar::EntryType::Link => {
                let target = entry.link_name_bytes().map(|name| name.into_owned()).unwrap_or_default();
                match extracted.get(&target) {
                    Some(source) => {
                        let size = root.metadata(source).map(|m| m.len()).unwrap_or(0);
                        if outcome.bytes + size > limits.max_bytes {
                            return Err(ExtractError::TooLarge { limit: limits.max_bytes });
                        }
                        let mode = entry.header().mode().unwrap_or(0o644);
                        let copied =
                            root.open(source).and_then(|mut file| write_file(&root, &relative, &mut file, mode));
                        if copied.is_ok() {
                            outcome.hard_links.push(shown_name(&raw_name));
                        }
                        copied.map(|n| Some((n, mode)))
                    }
                    None => {
                        reject(&mut outcome, "a hard link to an entry that was not extracted", true);
                        continue;
                    }
                }
            }
            tar::EntryType::Symlink => {
                reject(&mut outcome, "a symbolic link", true);
                continue;
            }
            tar::EntryType::Char | tar::EntryType::Block => {
                reject(&mut outcome, "a device", true);
                continue;
            }
            tar::EntryType::Fifo => {
                reject(&mut outcome, "a FIFO", true);
                continue;
            }
            _ => {
                reject(&mut outcome, "not a regular file or folder", true);
                continue;
            }
        };
        match written {
            Ok(None) => {}
            Ok(Some((bytes, mode))) => {
                if mode & 0o7000 != 0 {
                    outcome.stripped_bits.push(shown_name(&raw_name));
                }
                outcome.files += 1;
                outcome.bytes += bytes;
                extracted.insert(raw_name.clone(), relative);
            }
            Err(error) if path_cannot_exist(&error) => {
                reject(&mut outcome, "the path is too long or too deep for the host", true);
            }
            Err(source) => return Err(ExtractError::Io { path: dest.join(&relative), source }),
        }
    }
    Ok(outcome)
}

/// Writes one regular file below `root` (its folders created), 0755 or 0644 by its execute bit
/// (setuid, setgid and sticky bits dropped); the bytes written.
fn write_file(root: &Dir, relative: &Path, content: &mut impl Read, mode: u32) -> std::io::Result<u64> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(parent) = relative.parent().filter(|p| !p.as_os_str().is_empty()) {
        root.create_dir_all(parent)?;
    }
    let mut file = root.create(relative)?;
    let written = std::io::copy(content, &mut file)?;
    let permissions = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
    root.set_permissions(relative, Permissions::from_std(std::fs::Permissions::from_mode(permissions)))?;
    Ok(written)
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
        assert_eq!(outcome.stripped_bits, ["bin/tool"]);
        let reasons: Vec<(&str, &str, bool)> =
            outcome.rejected.iter().map(|r| (r.path.as_str(), r.reason.as_str(), r.exact)).collect();
        assert_eq!(
            reasons,
            [
                ("passwd", "a symbolic link", true),
                ("pipe", "a FIFO", true),
                ("\\u{1b}[31m\\u{a}.txt", "the name holds control characters", false)
            ]
        );
        assert!(!dest.path().join("passwd").exists());
        // The extra hard-link name keeps the content of the file it links to.
        assert_eq!(std::fs::read(dest.path().join("hard")).expect("hard"), b"hello");
        assert_eq!(outcome.hard_links, ["hard"]);
        assert_eq!(outcome.files, 3);
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
            assert!(!dest.path().join("escape.txt").exists());
            if name.starts_with('/') {
                // A leading root is the top folder (Podman's name for it): below the folder.
                assert_eq!((outcome.files, outcome.rejected.len()), (1, 0), "{name}");
                assert!(dest.path().join("inner/etc/escape.txt").is_file(), "{name}");
            } else {
                assert_eq!((outcome.files, outcome.rejected.len()), (0, 1), "{name}");
            }
        }
    }

    #[test]
    fn git_entries_and_links_to_nothing_are_rejected_and_listed() {
        let data = archive(|b| {
            b.append_data(&mut header(tar::EntryType::Regular, 3, 0o644), "workspace/sub/.git", &b"x\n\n"[..])
                .expect(".git file");
            b.append_data(&mut header(tar::EntryType::Regular, 1, 0o644), "workspace/.git/config", &b"x"[..])
                .expect(".git dir");
            b.append_data(&mut header(tar::EntryType::Regular, 2, 0o644), "workspace/sub/ok.txt", &b"ok"[..])
                .expect("ok");
            let mut hard = header(tar::EntryType::Link, 0, 0o644);
            b.append_link(&mut hard, "workspace/dangling", "workspace/never-there").expect("hard link");
        });
        let dest = tempfile::tempdir().expect("tempdir");
        let outcome = extract(data.as_slice(), dest.path(), LIMITS).expect("extract");
        let rejected: Vec<&str> = outcome.rejected.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(rejected, ["sub/.git", ".git/config", "dangling"]);
        assert!(outcome.rejected[0].reason.contains("another repository"), "{:?}", outcome.rejected[0]);
        assert!(!dest.path().join("sub/.git").exists() && !dest.path().join(".git").exists());
        assert_eq!(std::fs::read(dest.path().join("sub/ok.txt")).expect("ok"), b"ok", "the files beside it stay");
    }

    #[test]
    fn a_top_folder_named_root_as_podman_names_it_is_the_top_folder_and_nothing_above() {
        // tar's builder refuses absolute names; Podman's archive of a paused container has them.
        let raw = |name: &str, kind: tar::EntryType, data: &[u8]| {
            let mut entry = header(kind, data.len() as u64, 0o644);
            entry.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            entry.set_cksum();
            (entry, data.to_vec())
        };
        let data = archive(|b| {
            for (entry, bytes) in [
                raw("/", tar::EntryType::Directory, b""),
                raw("/a.txt", tar::EntryType::Regular, b"hi"),
                raw("/sub/b", tar::EntryType::Regular, b"x"),
                raw("/sub//../../etc/passwd", tar::EntryType::Regular, b"no"),
            ] {
                b.append(&entry, bytes.as_slice()).expect("append");
            }
        });
        let dest = tempfile::tempdir().expect("tempdir");
        let outcome = extract(data.as_slice(), dest.path(), LIMITS).expect("extract");
        assert_eq!(std::fs::read(dest.path().join("a.txt")).expect("a.txt"), b"hi");
        assert_eq!(std::fs::read(dest.path().join("sub/b")).expect("sub/b"), b"x");
        assert_eq!(outcome.files, 2);
        let rejected: Vec<(&str, &str)> =
            outcome.rejected.iter().map(|r| (r.path.as_str(), r.reason.as_str())).collect();
        assert_eq!(rejected, [("sub//../../etc/passwd", "'..' in the path")]);
    }

    #[test]
    fn a_path_too_long_for_the_host_is_rejected_before_any_folder_is_made() {
        let deep = format!("workspace/{}/f", vec!["d".repeat(200); 25].join("/"));
        let data = archive(|b| {
            b.append_data(&mut header(tar::EntryType::Regular, 1, 0o644), &deep, &b"x"[..]).expect("deep");
            b.append_data(&mut header(tar::EntryType::Regular, 2, 0o644), "workspace/ok.txt", &b"ok"[..]).expect("ok");
        });
        let dest = tempfile::tempdir().expect("tempdir");
        let outcome = extract(data.as_slice(), dest.path(), LIMITS).expect("extract");
        assert_eq!(outcome.rejected.len(), 1);
        assert!(outcome.rejected[0].reason.contains("too long"), "{:?}", outcome.rejected);
        assert!(!dest.path().join("d".repeat(200)).exists(), "no folder of it was made");
        assert_eq!(outcome.files, 1);
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
