//! Records the commit the binary is built from as `ROUNDTABLE_COMMIT` (for `roundtable_build_info`
//! and `--version`): the environment's `ROUNDTABLE_COMMIT` when a packager sets it, else
//! `git rev-parse` of the checkout, else `unknown` (a source tarball).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok().filter(|out| out.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned()).filter(|text| !text.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=ROUNDTABLE_COMMIT");
    let commit = std::env::var("ROUNDTABLE_COMMIT")
        .ok()
        .filter(|commit| !commit.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=ROUNDTABLE_COMMIT={commit}");
    // Built again when HEAD moves: a commit, a checkout, a fetch into the branch.
    // Only files that exist: cargo runs a build script every time for one that does not.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        let watched = ["HEAD".to_owned(), "packed-refs".to_owned()].into_iter().chain(branch);
        for file in watched.map(|name| format!("{git_dir}/{name}")) {
            if std::path::Path::new(&file).exists() {
                println!("cargo:rerun-if-changed={file}");
            }
        }
    }
}
