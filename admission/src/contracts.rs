//! Finding an adapter's contract: the file its spec names, else `<slug>.yaml` in the contracts
//! folder, else (for a built-in adapter name only) the contract shipped in the binary. A custom
//! adapter never borrows a built-in's contract: it is admitted on evidence written for it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::builtins::BUILTIN_NAMES;
use roundtable_specs::contract::{self, Contract, ContractSource, Transcript, TranscriptEntry};
use roundtable_specs::digest::sha256_hex;
use roundtable_specs::names::slug;

/// Contract and transcript files larger than this are refused.
const MAX_BYTES: u64 = 1 << 20;

/// A contract with its transcripts read and its content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedContract {
    pub contract: Contract,
    pub source: ContractSource,
    /// SHA-256 over the contract's bytes and every transcript file it names.
    pub hash: String,
    pub transcripts: Vec<Transcript>,
}

impl LoadedContract {
    pub fn source_text(&self) -> String {
        match &self.source {
            ContractSource::Builtin => "builtin".into(),
            ContractSource::File(name) => name.clone(),
        }
    }
}

/// What is wrong with an adapter's contract, or a transcript it names: the file, and where the
/// file parses, the line and field.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ContractError {
    #[error("spec.contract {name:?} is not a file name in the contracts folder")]
    NotAFileName { name: String },
    #[error("spec.contract names {}, which does not exist", path.display())]
    Missing { path: PathBuf },
    #[error("{}", path.display())]
    Unreadable {
        path: PathBuf,
        // Shared: evidence holding this error is cloned.
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("{}: not a regular file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{}: {size} bytes; contracts are limited to {MAX_BYTES}", path.display())]
    TooLarge { path: PathBuf, size: u64 },
    /// It does not parse, or a field is wrong.
    #[error("{}", shown(.0))]
    Invalid(roundtable_specs::ValidationError),
    #[error("{file}: the contract is for adapter {declared:?}, not {adapter:?}")]
    OtherAdapter { file: String, declared: String, adapter: String },
}

fn read_bounded(path: &Path) -> Result<String, ContractError> {
    let unreadable = |source| ContractError::Unreadable { path: path.to_owned(), source: Arc::new(source) };
    let meta = std::fs::symlink_metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(ContractError::NotAFile { path: path.to_owned() });
    }
    if meta.len() > MAX_BYTES {
        return Err(ContractError::TooLarge { path: path.to_owned(), size: meta.len() });
    }
    std::fs::read_to_string(path).map_err(unreadable)
}

fn shown(error: &roundtable_specs::ValidationError) -> String {
    if error.line == 0 {
        format!("{}: {}: {}", error.file, error.path, error.message)
    } else {
        format!("{}:{}:{}: {}: {}", error.file, error.line, error.column, error.path, error.message)
    }
}

/// The contract for `adapter`: `Ok(None)` when there is none; `Err` names what is wrong with
/// the one there is (file, line and field).
pub fn load(folder: &Path, adapter: &ResolvedAdapter) -> Result<Option<LoadedContract>, ContractError> {
    let own = adapter.contract.clone().unwrap_or_else(|| format!("{}.yaml", slug(&adapter.name)));
    if !contract::is_plain_file_name(&own) {
        return Err(ContractError::NotAFileName { name: own });
    }
    let path = folder.join(&own);
    let (text, source, file) = if std::fs::symlink_metadata(&path).is_ok() {
        (read_bounded(&path)?, ContractSource::File(own.clone()), path.display().to_string())
    } else if adapter.contract.is_some() {
        return Err(ContractError::Missing { path });
    } else if BUILTIN_NAMES.contains(&adapter.name.as_str()) && adapter.provider.as_str() == adapter.name {
        let (name, text) = contract::builtin(adapter.provider);
        (text.to_owned(), ContractSource::Builtin, format!("<built-in {name}>"))
    } else {
        return Ok(None);
    };
    let parsed = contract::parse(&file, &text).map_err(ContractError::Invalid)?;
    if parsed.adapter != adapter.name {
        return Err(ContractError::OtherAdapter { file, declared: parsed.adapter, adapter: adapter.name.clone() });
    }
    let mut hashed = text.into_bytes();
    let mut transcripts = Vec::new();
    for entry in &parsed.transcripts {
        match entry {
            TranscriptEntry::Inline(transcript) => transcripts.push((**transcript).clone()),
            TranscriptEntry::File(name) => {
                let path = folder.join(name);
                let text = read_bounded(&path)?;
                let transcript =
                    contract::parse_transcript(&path.display().to_string(), &text).map_err(ContractError::Invalid)?;
                hashed.extend_from_slice(b"\0");
                hashed.extend_from_slice(name.as_bytes());
                hashed.extend_from_slice(b"\0");
                hashed.extend_from_slice(text.as_bytes());
                transcripts.push(transcript);
            }
        }
    }
    Ok(Some(LoadedContract { contract: parsed, source, hash: sha256_hex(&hashed), transcripts }))
}

/// Every problem with the contract files in `folder` (for `validate`): a file that is neither a
/// contract nor a transcript a contract names, and transcripts that are missing or do not parse.
pub fn check_folder(folder: &Path) -> Vec<roundtable_specs::ValidationError> {
    let Ok(entries) = std::fs::read_dir(folder) else { return Vec::new() };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let mut contracts = Vec::new();
    let mut failed = Vec::new();
    let mut problems = Vec::new();
    for path in &files {
        let shown = path.display().to_string();
        let text = match read_bounded(path) {
            Ok(text) => text,
            Err(why) => {
                problems.push(roundtable_specs::parse::file_error(&shown, roundtable_telemetry::error_chain(&why)));
                continue;
            }
        };
        match contract::parse(&shown, &text) {
            Ok(parsed) => contracts.push(parsed),
            Err(error) => failed.push((path.clone(), text, error)),
        }
    }
    let named: Vec<&String> = contracts
        .iter()
        .flat_map(|c| &c.transcripts)
        .filter_map(|t| match t {
            TranscriptEntry::File(name) => Some(name),
            TranscriptEntry::Inline(_) => None,
        })
        .collect();
    for name in &named {
        if !folder.join(name).is_file() {
            let shown = folder.join(name).display().to_string();
            problems.push(roundtable_specs::parse::file_error(
                &shown,
                "a contract names this transcript, but there is no such file",
            ));
        }
    }
    for (path, text, error) in failed {
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if named.iter().any(|n| **n == file_name) {
            if let Err(error) = contract::parse_transcript(&path.display().to_string(), &text) {
                problems.push(error);
            }
        } else {
            problems.push(error);
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use roundtable_telemetry::error_chain;

    use super::*;

    fn codex(contract: Option<&str>) -> ResolvedAdapter {
        let mut adapter = roundtable_specs::builtins::template("codex").expect("built-in").resolve("codex");
        adapter.contract = contract.map(str::to_owned);
        adapter
    }

    fn refusal(folder: &Path, adapter: &ResolvedAdapter) -> String {
        error_chain(&load(folder, adapter).expect_err("a refusal"))
    }

    #[test]
    fn each_refusal_names_the_file_and_what_is_wrong() {
        let folder = tempfile::tempdir().expect("tempdir");
        let shown = folder.path().display();
        assert_eq!(
            refusal(folder.path(), &codex(Some("../x.yaml"))),
            r#"spec.contract "../x.yaml" is not a file name in the contracts folder"#
        );
        assert_eq!(
            refusal(folder.path(), &codex(Some("gone.yaml"))),
            format!("spec.contract names {shown}/gone.yaml, which does not exist")
        );
        std::fs::create_dir(folder.path().join("codex.yaml")).expect("a folder in its place");
        assert_eq!(refusal(folder.path(), &codex(None)), format!("{shown}/codex.yaml: not a regular file"));
        std::fs::write(folder.path().join("big.yaml"), vec![b'#'; MAX_BYTES as usize + 1]).expect("write");
        assert_eq!(
            refusal(folder.path(), &codex(Some("big.yaml"))),
            format!("{shown}/big.yaml: {} bytes; contracts are limited to {MAX_BYTES}", MAX_BYTES + 1)
        );
        let (_, text) = contract::builtin(roundtable_specs::adapter::Provider::Claude);
        std::fs::write(folder.path().join("claude.yaml"), text).expect("write");
        assert_eq!(
            refusal(folder.path(), &codex(Some("claude.yaml"))),
            format!(r#"{shown}/claude.yaml: the contract is for adapter "claude", not "codex""#)
        );
        let missing = folder.path().join("nothing.yaml");
        let unreadable = read_bounded(&missing).expect_err("unreadable");
        assert!(
            error_chain(&unreadable).starts_with(&format!("{shown}/nothing.yaml: No such file or directory")),
            "{}",
            error_chain(&unreadable)
        );
    }
}
