//! Mechanical checks of the code map's invariants.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::repo_root;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != ".git" {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc_line() {
    let mut files = Vec::new();
    rust_files(&repo_root(), &mut files);
    assert!(files.len() > 10, "found only {} .rs files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("read");
            let first = text.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
            !first.starts_with("//!")
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(missing.is_empty(), "these files do not open with `//!`: {missing:#?}");
}

/// Each package in Cargo.lock and the names of its dependencies.
fn lock_graph() -> BTreeMap<String, Vec<String>> {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).expect("Cargo.lock");
    let mut graph = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let mut name = String::new();
        let mut deps = Vec::new();
        let mut in_deps = false;
        for line in block.lines() {
            let line = line.trim();
            if let Some(value) = line.strip_prefix("name = ") {
                name = value.trim_matches('"').to_owned();
            } else if line.starts_with("dependencies = [") {
                in_deps = true;
            } else if in_deps && line == "]" {
                in_deps = false;
            } else if in_deps {
                // Entries look like "serde", or "serde 1.0.1" when versions are ambiguous.
                let entry = line.trim_matches(|c| c == '"' || c == ',');
                deps.push(entry.split(' ').next().unwrap_or_default().to_owned());
            }
        }
        graph.entry(name).or_insert_with(Vec::new).extend(deps);
    }
    graph
}

#[test]
fn specs_depends_on_no_async_network_or_docker_crate() {
    let graph = lock_graph();
    let mut seen = BTreeSet::new();
    let mut pending = vec!["roundtable-specs".to_owned()];
    while let Some(name) = pending.pop() {
        if seen.insert(name.clone()) {
            pending.extend(graph.get(&name).cloned().unwrap_or_default());
        }
    }
    let forbidden = [
        "tokio",
        "futures",
        "futures-util",
        "bollard",
        "sqlx",
        "hyper",
        "axum",
        "reqwest",
        "notify",
        "hickory-resolver",
        "rustls",
        "mio",
    ];
    let found: Vec<&&str> = forbidden.iter().filter(|name| seen.contains(**name)).collect();
    assert!(found.is_empty(), "specs (transitively) depends on {found:?}");
    assert!(seen.contains("serde-saphyr"), "the walk found the specs crate's real dependencies");
}

#[test]
fn controller_layers_stay_apart() {
    let graph = lock_graph();
    let sandbox = graph.get("roundtable-sandbox").expect("sandbox in lock");
    assert!(!sandbox.iter().any(|dep| dep == "roundtable-store"), "the sandbox does not reach into the state store");
    let store = graph.get("roundtable-store").expect("store in lock");
    assert!(!store.iter().any(|dep| dep == "bollard"), "the store does not talk to the engine");
}
