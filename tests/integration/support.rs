//! Helpers shared by the integration tests: running the binary, writing spec trees, finding the
//! engine and the test images.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The repository root (the root package's manifest directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The static `roundtable` binary under test.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_roundtable"))
}

/// Runs `roundtable` with `args` in `cwd`, with a clean logging environment.
pub fn roundtable(cwd: &Path, args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .env_remove("ROUNDTABLE_DIR")
        .env_remove("ROUNDTABLE_STATE_DIR")
        .output()
        .expect("run roundtable")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes `files` (relative path, contents) under a fresh temporary directory.
pub fn spec_tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, text).expect("write");
    }
    dir
}

/// Whether container tests must run (CI) rather than skip when the engine is missing.
pub fn containers_required() -> bool {
    std::env::var("ROUNDTABLE_REQUIRE_CONTAINER_TESTS").is_ok_and(|v| v == "1")
}

/// Builds the test images once per test run (the script is idempotent and fast when current).
pub fn ensure_test_images() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let outcome = BUILT.get_or_init(|| {
        let status = Command::new("bash")
            .arg(repo_root().join("tests/images/build.sh"))
            .current_dir(repo_root())
            .status()
            .map_err(|e| e.to_string())?;
        if status.success() { Ok(()) } else { Err(format!("tests/images/build.sh failed: {status}")) }
    });
    if let Err(error) = outcome {
        panic!("{error}");
    }
}

/// The engine, or `None` (skip) when there is none and the run does not require one.
pub async fn engine_or_skip() -> Option<roundtable_sandbox::Engine> {
    match roundtable_sandbox::Engine::connect().await {
        Ok(engine) => Some(engine),
        Err(error) if containers_required() => panic!("ROUNDTABLE_REQUIRE_CONTAINER_TESTS=1 but no engine: {error}"),
        Err(error) => {
            eprintln!("skipping container test: {error}");
            None
        }
    }
}
