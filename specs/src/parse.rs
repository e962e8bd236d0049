//! Turning one spec file's text into objects, each remembering where it came from.

use std::sync::Arc;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::finding::{Severity, ValidationError};
use crate::legacy::{self, LegacyConfig};
use crate::meta::{API_VERSION, Kind, ObjectMeta};
use crate::object::{Object, Origin, Spec};
use crate::resource;
use crate::yaml::{self, Document, FieldPath};

/// What one file yielded: its objects and the problems that kept others out.
#[derive(Debug, Default)]
pub struct ParsedFile {
    pub objects: Vec<Object>,
    pub errors: Vec<ValidationError>,
}

/// The fields read first, to decide how to read the rest.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Header {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    adapters: Option<IgnoredAny>,
}

/// A problem with the file as a whole, before any document is read.
pub fn file_error(file: &str, message: impl Into<String>) -> ValidationError {
    ValidationError {
        file: file.into(),
        line: 0,
        column: 0,
        path: String::new(),
        message: message.into(),
        severity: Severity::Error,
    }
}

/// Parses every document of a spec file. `file` is how the file is named in messages;
/// `relative_path` is its path under the spec directory (it marks the legacy `config.yaml`).
pub fn parse_file(file: &str, relative_path: &str, text: &str) -> ParsedFile {
    let mut parsed = ParsedFile::default();
    if text.len() > yaml::MAX_FILE_BYTES {
        parsed.errors.push(file_error(
            file,
            format!("file is {} bytes; spec files are limited to {} bytes", text.len(), yaml::MAX_FILE_BYTES),
        ));
        return parsed;
    }
    let file: Arc<str> = Arc::from(file);
    let shared_text: Arc<str> = Arc::from(text);
    for document in yaml::split_documents(text) {
        let origin = Origin {
            file: file.clone(),
            text: shared_text.clone(),
            start: document.offset,
            end: document.offset + document.text.len(),
            first_line: document.first_line,
            legacy_name: None,
        };
        read_document(&document, origin, legacy::is_legacy_path(relative_path), &mut parsed);
    }
    parsed
}

pub(crate) fn problem_to_error(file: &str, problem: yaml::YamlProblem, prefix: &str) -> ValidationError {
    ValidationError {
        file: file.into(),
        line: problem.position.line,
        column: problem.position.column,
        path: problem.path.to_string(),
        message: format!("{prefix}{}", problem.message),
        severity: Severity::Error,
    }
}

fn read_document(document: &Document<'_>, origin: Origin, legacy_file: bool, parsed: &mut ParsedFile) {
    let header = match document.deserialize::<Header>() {
        Ok(header) => header,
        Err(problem) => {
            // A document that is not a mapping at all gets told what a resource looks like; a
            // syntax problem (a duplicate key, a tab) is reported as it is.
            let not_a_mapping = problem.message.starts_with("expected ") || problem.message.starts_with("invalid type");
            let prefix = if problem.path.segments().is_empty() && not_a_mapping {
                "a resource is a mapping with apiVersion, kind, metadata and spec: "
            } else {
                ""
            };
            parsed.errors.push(problem_to_error(&origin.file, problem, prefix));
            return;
        }
    };
    if legacy_file && header.kind.is_none() && header.adapters.is_some() {
        read_legacy(document, origin, parsed);
        return;
    }
    let Some(api_version) = header.api_version else {
        parsed.errors.push(origin.error(&FieldPath::root(), format!("missing apiVersion (expected {API_VERSION})")));
        return;
    };
    if api_version != API_VERSION {
        parsed.errors.push(origin.error(
            &FieldPath::root().key("apiVersion"),
            format!("unsupported apiVersion {api_version:?} (expected {API_VERSION})"),
        ));
        return;
    }
    let Some(kind_text) = header.kind else {
        parsed.errors.push(origin.error(&FieldPath::root(), "missing kind (Adapter, Assignment or AdmissionPolicy)"));
        return;
    };
    let Some(kind) = Kind::parse(&kind_text) else {
        parsed.errors.push(origin.error(
            &FieldPath::root().key("kind"),
            format!("unknown kind {kind_text:?} (expected Adapter, Assignment or AdmissionPolicy)"),
        ));
        return;
    };
    let typed = match kind {
        Kind::Adapter => document.deserialize::<resource::Adapter>().map(|r| (r.metadata, Spec::Adapter(r.spec))),
        Kind::Assignment => {
            document.deserialize::<resource::Assignment>().map(|r| (r.metadata, Spec::Assignment(r.spec)))
        }
        Kind::AdmissionPolicy => {
            document.deserialize::<resource::AdmissionPolicy>().map(|r| (r.metadata, Spec::AdmissionPolicy(r.spec)))
        }
    };
    match typed {
        Ok((metadata, spec)) => parsed.objects.push(Object { metadata, spec, origin }),
        Err(problem) => parsed.errors.push(problem_to_error(&origin.file, problem, "")),
    }
}

fn read_legacy(document: &Document<'_>, origin: Origin, parsed: &mut ParsedFile) {
    let config = match document.deserialize::<LegacyConfig>() {
        Ok(config) => config,
        Err(problem) => {
            parsed.errors.push(problem_to_error(&origin.file, problem, "legacy config.yaml: "));
            return;
        }
    };
    for (name, entry) in config.adapters {
        let metadata = ObjectMeta { name: name.clone(), labels: Default::default(), annotations: Default::default() };
        let origin = Origin { legacy_name: Some(name), ..origin.clone() };
        parsed.objects.push(Object { metadata, spec: Spec::Adapter(entry.into()), origin });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADAPTER: &str =
        "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: codex}\nspec:\n  image: busybox\n";

    #[test]
    fn reads_every_document_of_a_file() {
        let text = format!(
            "{ADAPTER}---\napiVersion: roundtable.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {{name: default}}\nspec: {{mode: enforce}}\n"
        );
        let parsed = parse_file("a.yaml", "a.yaml", &text);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let kinds: Vec<Kind> = parsed.objects.iter().map(Object::kind).collect();
        assert_eq!(kinds, [Kind::Adapter, Kind::AdmissionPolicy]);
        assert_eq!(parsed.objects[1].origin.describe(), "a.yaml:9");
    }

    #[test]
    fn header_problems_name_the_field() {
        let cases = [
            ("kind: Adapter\nmetadata: {name: a}\nspec: {}\n", "", "missing apiVersion"),
            ("apiVersion: v1\nkind: Adapter\n", "apiVersion", "unsupported apiVersion"),
            ("apiVersion: roundtable.dev/v1alpha1\nmetadata: {name: a}\n", "", "missing kind"),
            ("apiVersion: roundtable.dev/v1alpha1\nkind: Widget\n", "kind", "unknown kind"),
            ("- a\n- b\n", "", "a resource is a mapping"),
        ];
        for (text, path, message) in cases {
            let parsed = parse_file("f.yaml", "f.yaml", text);
            let error = parsed.errors.first().unwrap_or_else(|| panic!("no error for {text:?}"));
            assert_eq!(error.path, path, "{text:?}");
            assert!(error.message.starts_with(message), "{text:?}: {}", error.message);
        }
    }

    #[test]
    fn yaml_errors_are_worded_for_operators_not_library_options() {
        let head = "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: a}\n";
        let cases = [
            ("apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nkind: Adapter\n", "", "duplicate key `kind`"),
            (&*format!("{head}spec: {{command: a, command: b}}\n"), "spec", "duplicate key `command`"),
            (
                &*format!("{head}spec: {{resources: {{pids: 99999999999}}}}\n"),
                "spec.resources.pids",
                "expected a whole number from 0 to 4294967295",
            ),
            (&*format!("{head}spec: {{enabled: yes}}\n"), "spec.enabled", "expected true or false"),
            (&*format!("{head}spec: {{args: foo}}\n"), "spec.args", "expected a list"),
            (&*format!("{head}spec: {{command: [a]}}\n"), "spec.command", "expected a string"),
            (&*format!("{head}spec: {{args: [*nowhere]}}\n"), "spec.args", "refers to no anchor"),
            (&*format!("{head}spec:\n\tcommand: x\n"), "", "tabs are not allowed for indentation"),
        ];
        for (text, path, wanted) in cases {
            let parsed = parse_file("f.yaml", "f.yaml", text);
            let error = parsed.errors.first().unwrap_or_else(|| panic!("no error for {text:?}"));
            assert_eq!(error.path, path, "{text:?}: {error:?}");
            assert!(error.message.contains(wanted), "{text:?}: {}", error.message);
            for library in ["DuplicateKeyPolicy", "Options", "policy", "strict mode", "u32", "scalar", "sequence start"]
            {
                assert!(!error.message.contains(library), "{text:?}: {}", error.message);
            }
            assert!(!error.message.starts_with("a resource is a mapping"), "{}", error.message);
        }
    }

    #[test]
    fn a_broken_document_does_not_hide_the_others() {
        let text = format!(
            "{ADAPTER}---\napiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {{name: x}}\nspec: {{imgae: busybox}}\n"
        );
        let parsed = parse_file("f.yaml", "f.yaml", &text);
        assert_eq!(parsed.objects.len(), 1);
        assert_eq!(parsed.errors.len(), 1);
        assert_eq!(parsed.errors[0].path, "spec.imgae");
        assert_eq!(parsed.errors[0].line, 10);
    }

    #[test]
    fn legacy_config_yields_adapters_with_written_paths() {
        let text =
            "adapters:\n  qwen:\n    image: busybox\n    command: qwen\n    provider_hosts: [api.qwen.example]\n";
        let parsed = parse_file("config.yaml", "config.yaml", text);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let object = &parsed.objects[0];
        assert_eq!(object.metadata.name, "qwen");
        let finding = object.origin.error(&FieldPath::parse("spec.providerHosts[0]"), "x");
        assert_eq!(finding.path, "adapters.qwen.provider_hosts[0]");
        assert_eq!(finding.line, 5);
    }

    #[test]
    fn legacy_config_rejects_unknown_keys_with_their_path() {
        let text = "adapters:\n  qwen:\n    image: busybox\n    supports_telepathy: true\n";
        let parsed = parse_file("config.yaml", "config.yaml", text);
        assert!(parsed.objects.is_empty());
        assert_eq!(parsed.errors[0].path, "adapters.qwen.supports_telepathy");
        assert_eq!((parsed.errors[0].line, parsed.errors[0].column), (4, 5));
    }

    #[test]
    fn legacy_format_is_only_read_from_config_yaml() {
        let parsed = parse_file("other.yaml", "other.yaml", "adapters:\n  qwen: {image: busybox}\n");
        assert!(parsed.objects.is_empty());
        assert!(parsed.errors[0].message.contains("missing apiVersion"));
    }

    #[test]
    fn oversized_files_are_refused_whole() {
        let text = "#".repeat(yaml::MAX_FILE_BYTES + 1);
        let parsed = parse_file("big.yaml", "big.yaml", &text);
        assert_eq!(parsed.errors.len(), 1);
        assert_eq!(parsed.errors[0].line, 0);
    }
}
