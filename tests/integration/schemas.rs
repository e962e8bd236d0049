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
