//! The real provider CLIs (Codex, OpenCode, Gemini CLI) in images built by
//! `examples/images/build.sh`: admission probes their real help and version surfaces inside the
//! hardened container, and seals them. Needs the CLI files in `ROUNDTABLE_PROVIDER_CLIS`; skips
//! without them unless `ROUNDTABLE_REQUIRE_PROVIDER_CLIS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support::{commit_all, engine_or_skip, json, nothing_left, repo_root, roundtable, stderr, stdout, write};

/// The folder holding the CLI files, or `None` (skip) when the run does not require them.
fn provider_clis() -> Option<PathBuf> {
    let required = std::env::var("ROUNDTABLE_REQUIRE_PROVIDER_CLIS").is_ok_and(|v| v == "1");
    match std::env::var_os("ROUNDTABLE_PROVIDER_CLIS").map(PathBuf::from) {
        Some(dir) if dir.join("SHA256SUMS").is_file() => Some(dir),
        found if required => panic!("ROUNDTABLE_REQUIRE_PROVIDER_CLIS=1 but ROUNDTABLE_PROVIDER_CLIS is {found:?}"),
        _ => {
            eprintln!("skipping: set ROUNDTABLE_PROVIDER_CLIS to the folder holding the real provider CLIs");
            None
        }
    }
}

/// Builds the three images once per test run; the Adapters file pinning them by ID.
fn real_cli_adapters(clis: &Path) -> String {
    static BUILT: OnceLock<Result<String, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let adapters = repo_root().join("target/provider-images/test-adapters.yaml");
        let out = Command::new("bash")
            .arg(repo_root().join("examples/images/build.sh"))
            .arg(&adapters)
            .env("ROUNDTABLE_PROVIDER_CLIS", clis)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("examples/images/build.sh failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        std::fs::read_to_string(&adapters).map_err(|e| e.to_string())
    });
    built.clone().unwrap_or_else(|error| panic!("{error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_clis_are_admitted_on_their_real_surfaces() {
    let Some(clis) = provider_clis() else { return };
    let Some(engine) = engine_or_skip().await else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    write(root, ".roundtable/adapters.yaml", &real_cli_adapters(&clis));
    commit_all(root);

    for (name, version) in [("codex", "0.171.0"), ("opencode", "1.18.33"), ("gemini", "0.61.0")] {
        let out = roundtable(root, &["admission", "check", name, "--seal", "--format", "json"]);
        let item = json(&out)["items"][0].clone();
        assert_eq!(out.status.code(), Some(0), "{name}: {item:#}{}", stderr(&out));
        assert_eq!(item["evidence"]["installedVersion"], version, "{name}");
        assert_eq!(item["evidence"]["conformance"], "ok", "{name}: {item:#}");
        assert!(item["evidence"]["imageId"].as_str().is_some_and(|id| id.starts_with("sha256:")), "{name}");
    }

    // A contract naming a flag the real CLI does not have is refused, the flag named.
    let contract = std::fs::read_to_string(repo_root().join("specs/contracts/codex.yaml")).expect("contract");
    let wrong = contract.replace("requiredFlags: [--json,", "requiredFlags: [--session-id, --json,");
    write(root, ".roundtable/contracts/codex.yaml", &wrong);
    let out = roundtable(root, &["admission", "check", "codex", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let item = json(&out)["items"][0].clone();
    assert_eq!(item["decisions"][0]["reason"], "conformance_fail", "{item:#}");
    assert_eq!(item["decisions"][0]["message"], "the help surface does not advertise --session-id");
    nothing_left(&engine, root).await;
}
