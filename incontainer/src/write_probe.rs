//! `roundtable sandbox write-probe DIR…`: tries to create a file in each folder and reports
//! whether the kernel refused it *as a read-only file system*. Any other outcome fails the item:
//! a write that succeeds, and also a refusal for another reason (no permission, no such folder),
//! which would say nothing about the mount. Agent diagnostics run it inside the adapter's image,
//! so the check needs no shell there.

use std::io::ErrorKind;
use std::path::Path;

pub use roundtable_specs::session::{CheckItem, CheckReport};

/// One attempted write into `dir`: ok only when it failed with EROFS.
pub fn attempt(dir: &Path) -> CheckItem {
    let name = dir.display().to_string();
    let probe = dir.join(format!(".roundtable-write-probe-{}", std::process::id()));
    // `create_new`: never truncates or follows something already there.
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            CheckItem { name, ok: false, detail: "the write succeeded: the folder is writable".into() }
        }
        Err(error) if error.kind() == ErrorKind::ReadOnlyFilesystem => {
            CheckItem { name, ok: true, detail: format!("the write failed: {error}") }
        }
        Err(error) => CheckItem {
            name,
            ok: false,
            detail: format!("the write failed, but not because the file system is read-only: {error}"),
        },
    }
}

/// Every folder of `dirs`, in order; ok when each write was refused as read-only.
pub fn run<P: AsRef<Path>>(dirs: &[P]) -> CheckReport {
    let items: Vec<CheckItem> = dirs.iter().map(|dir| attempt(dir.as_ref())).collect();
    let ok = !items.is_empty() && items.iter().all(|item| item.ok);
    CheckReport { ok, items }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_folder_fails_and_is_left_clean() {
        let dir = tempfile::tempdir().expect("tempdir");
        let report = run(&[dir.path()]);
        assert!(!report.ok);
        assert!(report.items[0].detail.contains("writable"), "{:?}", report.items);
        assert_eq!(std::fs::read_dir(dir.path()).expect("read").count(), 0, "the probe file is removed");
    }

    #[test]
    fn a_refusal_that_is_not_read_only_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing");
        let report = run(&[missing]);
        assert!(!report.ok);
        assert!(report.items[0].detail.contains("not because the file system is read-only"), "{:?}", report.items);
    }

    #[test]
    fn nothing_to_probe_is_not_a_pass() {
        assert!(!run::<&Path>(&[]).ok);
    }
}
