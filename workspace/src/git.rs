//! Running git on the host with no user or system configuration, no prompts and no pager, so
//! nothing in an operator's environment changes what is exported or diffed.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A git command that failed.
#[derive(Debug, thiserror::Error)]
#[error("git {args} failed{}: {stderr}", .code.map(|c| format!(" with exit code {c}")).unwrap_or_default())]
pub struct GitError {
    pub args: String,
    pub code: Option<i32>,
    pub stderr: String,
}

/// `git` with a neutral environment, run in `dir`.
pub fn command(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_LITERAL_PATHSPECS", "1")
        .env("HOME", "/nonexistent")
        .env("LC_ALL", "C")
        // Never discover a repository above `dir` (an execution folder may sit inside one).
        .env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap_or(dir))
        .args(["-c", "core.quotepath=false", "-c", "core.autocrlf=false", "-c", "core.fsmonitor=false"])
        .arg("-c")
        .arg(format!("safe.directory={}", dir.display()))
        .stdin(Stdio::null());
    command
}

/// `git` run in `dir` with the operator's own environment and configuration (SSH agent and keys,
/// credential stores: what fetching a git source needs) that never asks for anything: no
/// terminal prompt, no askpass program, SSH in batch mode unless the operator chose an SSH
/// command, stdin closed.
pub fn operator_command(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .args(["-c", "core.askPass=", "-c", "credential.interactive=never"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GCM_INTERACTIVE", "never")
        .env("SSH_ASKPASS_REQUIRE", "never")
        .env("LC_ALL", "C")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null());
    if std::env::var_os("GIT_SSH_COMMAND").is_none() && std::env::var_os("GIT_SSH").is_none() {
        command.env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes");
    }
    command
}

/// Runs `git args…` in `dir` and returns its output, or the failure with stderr.
pub fn run(dir: &Path, args: &[&str]) -> Result<Output, GitError> {
    let output = command(dir).args(args).output().map_err(|error| GitError {
        args: args.join(" "),
        code: None,
        stderr: format!("cannot run git: {error}"),
    })?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(GitError {
            args: args.join(" "),
            code: output.status.code(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// Like [`run`], returning trimmed stdout.
pub fn text(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    Ok(String::from_utf8_lossy(&run(dir, args)?.stdout).trim().to_owned())
}
