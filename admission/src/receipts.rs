//! The receipt folder (`.roundtable/admission/`): one current receipt per adapter, named by the
//! adapter's slug, replaced atomically by sealing (write beside, sync, rename) and read back
//! without following links. A receipt's id is checked by the gate, so an edited body is caught
//! without any key.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use roundtable_specs::admission::{ReceiptBody, SealedReceipt};
use roundtable_specs::names::slug;

use crate::gate::Stored;

/// Receipts larger than this are not read.
const MAX_BYTES: u64 = 1 << 20;

/// Why a receipt could not be sealed.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error("adapter name {0:?} has no filesystem-safe slug")]
    NoSlug(String),
    #[error("{path} is not a plain folder (a link or a file); refusing to write receipts through it")]
    NotAFolder { path: PathBuf },
    #[error("{step} {path}")]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The folder receipts live in.
#[derive(Debug, Clone)]
pub struct ReceiptFolder {
    dir: PathBuf,
}

impl ReceiptFolder {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `adapter`'s receipt lives (`Qwen CLI` → `qwen-cli.json`).
    pub fn path(&self, adapter: &str) -> Result<PathBuf, ReceiptError> {
        let slug = slug(adapter);
        if slug.is_empty() {
            return Err(ReceiptError::NoSlug(adapter.into()));
        }
        Ok(self.dir.join(format!("{slug}.json")))
    }

    /// The current receipt of `adapter`, as stored.
    pub fn load(&self, adapter: &str) -> Stored {
        let Ok(path) = self.path(adapter) else { return Stored::Missing };
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Stored::Missing,
            Err(error) => return Stored::Unreadable(format!("{}: {error}", path.display())),
        };
        if !meta.is_file() {
            return Stored::Unreadable(format!("{} is not a regular file", path.display()));
        }
        if meta.len() > MAX_BYTES {
            return Stored::Unreadable(format!(
                "{} is {} bytes; receipts are limited to {MAX_BYTES}",
                path.display(),
                meta.len()
            ));
        }
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) => return Stored::Unreadable(format!("{}: {error}", path.display())),
        };
        match serde_json::from_slice::<SealedReceipt>(&bytes) {
            Ok(sealed) => Stored::Found(Box::new(sealed)),
            Err(error) => Stored::Unreadable(format!("{} is not a receipt: {error}", path.display())),
        }
    }

    /// Seals `body` as the current receipt of its adapter, replacing any earlier one atomically.
    pub fn seal(&self, body: ReceiptBody) -> Result<(SealedReceipt, PathBuf), ReceiptError> {
        let path = self.path(&body.adapter)?;
        let io = |step: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source| ReceiptError::Io { step, path, source }
        };
        match std::fs::symlink_metadata(&self.dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(ReceiptError::NotAFolder { path: self.dir.clone() }),
            Err(_) => std::fs::create_dir_all(&self.dir).map_err(io("create", &self.dir))?,
        }
        let sealed = SealedReceipt::seal(body);
        let mut text = serde_json::to_string_pretty(&sealed).unwrap_or_default();
        text.push('\n');
        let tmp = path.with_extension("json.tmp");
        // A leftover (or planted link) is removed, never written through.
        match std::fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(io("remove", &tmp)(error)),
        }
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp).map_err(io("create", &tmp))?;
        file.write_all(text.as_bytes()).map_err(io("write", &tmp))?;
        file.sync_all().map_err(io("sync", &tmp))?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(io("rename into place", &path))?;
        Ok((sealed, path))
    }
}
