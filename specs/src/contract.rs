//! Admission contracts: how an adapter's CLI is probed (version and help surface) and the golden
//! transcripts its launch plan and output capture are replayed against. Operators keep theirs in
//! `.roundtable/contracts/<slug>.yaml`; every built-in adapter ships one in the binary.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::adapter::Provider;
use crate::finding::{Severity, ValidationError};
use crate::yaml;

/// A contract file, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Contract {
    /// The adapter name this contract is for (its slug names the file).
    pub adapter: String,
    /// Run in the adapter's image to read the installed version (argv, never split).
    pub version_command: Vec<String>,
    /// A regular expression over the version output; its first capture group (or the whole
    /// match) is the version. Absent: the first `N.N[.N]` in the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_pattern: Option<String>,
    /// Run in the adapter's image to read its help surface.
    pub help_command: Vec<String>,
    /// Flags the help surface must advertise, each matched as a whole token (`-m` does not
    /// match `--model`).
    #[serde(default)]
    pub required_flags: Vec<String>,
    /// Subcommands the help surface must advertise, matched as whole tokens.
    #[serde(default)]
    pub required_subcommands: Vec<String>,
    /// Golden transcripts: inline, or file names in the same folder.
    #[serde(default)]
    pub transcripts: Vec<TranscriptEntry>,
}

/// A transcript given inline or as a file name beside the contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TranscriptEntry {
    File(String),
    Inline(Box<Transcript>),
}

/// One golden launch: the plan Roundtable must make for a prompt, and what its output capture
/// must find in what the CLI prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Transcript {
    pub name: String,
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub expect: ExpectedPlan,
    /// What the CLI prints on stdout for this launch (replayed through the output capture).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The provider session id the capture must find in `output`; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The launch plan a transcript expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedPlan {
    /// The arguments after the command (the command itself is the Adapter's).
    pub args: Vec<String>,
    /// `prompt` or `empty`.
    pub stdin: String,
    /// Every environment variable name the agent gets, in any order.
    pub env: Vec<String>,
    /// Paths written under `/tmp/roundtable/`, in any order (checked when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
    /// Paths mounted into the container, in any order (checked when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mounts: Option<Vec<String>>,
}

/// Where a contract came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ContractSource {
    /// Shipped in the binary for a built-in adapter's provider.
    Builtin,
    /// A file under the contracts folder (its name).
    File(String),
}

/// Parses a contract file. `file` names it in messages.
pub fn parse(file: &str, text: &str) -> Result<Contract, ValidationError> {
    if text.len() > yaml::MAX_FILE_BYTES {
        return Err(crate::parse::file_error(
            file,
            format!("contract is {} bytes; the limit is {}", text.len(), yaml::MAX_FILE_BYTES),
        ));
    }
    let contract: Contract = single_document(file, text, "contract")?;
    let at = |path: &str, message: String| ValidationError {
        file: file.into(),
        line: 0,
        column: 0,
        path: path.into(),
        message,
        severity: Severity::Error,
    };
    if contract.version_command.is_empty() {
        return Err(at("versionCommand", "must name a command".into()));
    }
    if contract.help_command.is_empty() {
        return Err(at("helpCommand", "must name a command".into()));
    }
    for (i, entry) in contract.transcripts.iter().enumerate() {
        match entry {
            TranscriptEntry::File(name) if !is_plain_file_name(name) => {
                return Err(at(
                    &format!("transcripts[{i}]"),
                    format!("{name:?} is not a file name in the contracts folder"),
                ));
            }
            TranscriptEntry::Inline(t) if !["prompt", "empty"].contains(&t.expect.stdin.as_str()) => {
                return Err(at(
                    &format!("transcripts[{i}].expect.stdin"),
                    format!("{:?}: expected prompt or empty", t.expect.stdin),
                ));
            }
            _ => {}
        }
    }
    Ok(contract)
}

/// Parses a transcript file named by a contract.
pub fn parse_transcript(file: &str, text: &str) -> Result<Transcript, ValidationError> {
    single_document(file, text, "transcript")
}

/// The one YAML document of a `what` file, typed; errors name the file, line, column and field.
fn single_document<T: serde::de::DeserializeOwned>(file: &str, text: &str, what: &str) -> Result<T, ValidationError> {
    let documents = yaml::split_documents(text);
    let [document] = documents.as_slice() else {
        return Err(crate::parse::file_error(file, format!("a {what} file holds exactly one YAML document")));
    };
    document.deserialize().map_err(|problem| crate::parse::problem_to_error(file, problem, ""))
}

/// A name with no folder part, no `..` and nothing hidden: it can only name a file beside the contract.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\', '\0']) && name.len() <= 255
}

/// The contract built into the binary for a provider (its profile's): its file name and text.
pub fn builtin(provider: Provider) -> (&'static str, &'static str) {
    let contract = provider.profile().contract;
    (contract.file, contract.text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_contract_parses_and_names_its_provider() {
        for provider in Provider::ALL.iter().copied() {
            let (file, text) = builtin(provider);
            let contract = parse(file, text).unwrap_or_else(|e| panic!("{file}: {e:?}"));
            assert_eq!(contract.adapter, provider.as_str(), "{file}");
            assert!(!contract.transcripts.is_empty(), "{file} has a transcript");
        }
    }

    #[test]
    fn a_bad_field_is_named_with_its_line() {
        let error = parse("x.yaml", "adapter: x\nversionCommand: [x]\nhelpCommand: [x]\nrequiredFlag: [-m]\n")
            .expect_err("an unknown field");
        assert_eq!((error.line, error.path.as_str()), (4, "requiredFlag"), "{error:?}");
        let error = parse("x.yaml", "adapter: x\nversionCommand: []\nhelpCommand: [x]\n").expect_err("empty");
        assert_eq!(error.path, "versionCommand");
        let error = parse("x.yaml", "adapter: x\nversionCommand: [x]\nhelpCommand: [x]\ntranscripts: [../t.yaml]\n")
            .expect_err("path");
        assert_eq!(error.path, "transcripts[0]");
    }
}
