//! The checked-in `schemas/` are exactly what `roundtable schema --out` generates.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{repo_root, roundtable, stderr};

fn read_tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(root).expect("prefix").to_string_lossy().into_owned();
                files.insert(relative, std::fs::read(&path).expect("read"));
            }
        }
    }
    files
}

#[test]
fn checked_in_schemas_are_current() {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().to_str().expect("utf-8");
    let result = roundtable(&repo_root(), &["schema", "--out", dir]);
    assert!(result.status.success(), "{}", stderr(&result));
    let generated = read_tree(out.path());
    let checked_in = read_tree(&repo_root().join("schemas"));
    let names = |tree: &BTreeMap<String, Vec<u8>>| tree.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&checked_in), names(&generated), "schemas/ has other files than the generator writes");
    for (name, bytes) in &generated {
        assert!(
            checked_in.get(name) == Some(bytes),
            "schemas/{name} is stale: run `cargo run -- schema --out schemas` and commit"
        );
    }
}

#[test]
fn combined_schema_accepts_every_kind() {
    let text = std::fs::read_to_string(repo_root().join("schemas/roundtable.json")).expect("read");
    for kind in ["\"Adapter\"", "\"Assignment\"", "\"AdmissionPolicy\""] {
        assert!(text.contains(kind), "{kind} missing from the combined schema");
    }
}

/// `check-jsonschema` (PyPI) over files, with the combined schema: the files it refuses. `None`
/// (skip) when it is not installed and the run does not require it.
fn refused_by_check_jsonschema(files: &[std::path::PathBuf]) -> Option<std::collections::BTreeSet<String>> {
    let schema = repo_root().join("schemas/roundtable.json");
    let ran = std::process::Command::new("check-jsonschema")
        .args(["-o", "json", "--schemafile"])
        .arg(&schema)
        .args(files)
        .output();
    let Ok(out) = ran else {
        let require = "ROUNDTABLE_REQUIRE_PYTHON_CLIENTS";
        crate::support::present_or_skip(false, require, "check-jsonschema", "pip install check-jsonschema");
        return None;
    };
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("check-jsonschema printed no JSON ({e}): {}", stderr(&out)));
    let listed = ["errors", "parse_errors"].iter().flat_map(|key| report[key].as_array().cloned().unwrap_or_default());
    Some(listed.filter_map(|e| e["filename"].as_str().map(str::to_owned)).collect())
}

/// Whether `roundtable validate` accepts `document` as the only file of a project.
fn validate_accepts(document: &str) -> bool {
    let project = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(project.path().join(".roundtable")).expect("mkdir");
    std::fs::write(project.path().join(".roundtable/case.yaml"), document).expect("write");
    roundtable(project.path(), &["validate"]).status.success()
}

/// The schemas say what `validate` checks of a field alone, so an editor flags it as it is typed:
/// over the corpus in `tests/schema-corpus/` (each file's first line says what both must say:
/// `valid`, `invalid`, or `validate-only: WHY` for what a schema cannot express) and over every
/// document of every example, split one per file as check-jsonschema reads them.
#[test]
fn check_jsonschema_and_validate_agree_on_the_corpus_and_every_example() {
    let split = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    let mut expected = Vec::new();
    let corpus = repo_root().join("tests/schema-corpus");
    let mut entries: Vec<_> = std::fs::read_dir(&corpus).expect("corpus").flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("read");
        let expect = text.lines().next().and_then(|l| l.strip_prefix("# expect: ")).expect("an expect line").to_owned();
        expected.push((path.clone(), text, expect));
        files.push(path);
    }
    let examples = repo_root().join("examples/quickstart/.roundtable");
    let whole = roundtable(&repo_root(), &["validate", "--dir", examples.to_str().expect("utf-8")]);
    assert!(whole.status.success(), "the quickstart's specs validate: {}", stderr(&whole));
    for entry in std::fs::read_dir(&examples).expect("examples").flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        for (n, document) in text.split("\n---\n").enumerate().filter(|(_, d)| d.contains("kind:")) {
            let name = path.file_stem().expect("name").to_string_lossy();
            let file = split.path().join(format!("{name}-{n}.yaml"));
            std::fs::write(&file, document).expect("write");
            files.push(file);
        }
    }
    let Some(refused) = refused_by_check_jsonschema(&files) else { return };
    let schema_refuses = |path: &Path| refused.contains(path.to_str().expect("utf-8"));
    for file in &files[expected.len()..] {
        assert!(!schema_refuses(file), "the schema refuses an example: {}", file.display());
    }
    let mut disagreements = Vec::new();
    for (path, text, expect) in &expected {
        let (validated, checked) = (validate_accepts(text), !schema_refuses(path));
        let agreed = match expect.as_str() {
            "valid" => validated && checked,
            "invalid" => !validated && !checked,
            why if why.starts_with("validate-only: ") => !validated && checked,
            other => panic!("{}: unknown expectation {other:?}", path.display()),
        };
        if !agreed {
            disagreements.push(format!(
                "{}: expected {expect}; validate accepts: {validated}, the schema accepts: {checked}",
                path.display()
            ));
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}
