//! Running git for the desired state (fetching a remote into the mirror, reading a commit): with
//! a timeout, never prompting for anything, and with credentials embedded in URLs redacted from
//! everything it reports.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// A git command that failed, or did not finish in time; its text is already redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("git {args}: {message}")]
pub struct GitFailure {
    pub args: String,
    pub message: String,
}

/// `text` with the user information of every `scheme://user:password@host` URL in it replaced
/// by `***`: a token passed as a user name is as secret as a password.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail.find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'').unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(user_end) => {
                out.push_str("***");
                out.push_str(&authority[user_end..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Runs `git args…` on the repository `git_dir` (bare or not) and returns its stdout, through
/// `roundtable_workspace::git::operator_command`: the operator's own configuration and agents
/// (SSH keys, credential stores) still apply, but nothing may ask. A run past `timeout` is
/// killed and fails.
pub async fn run<S: AsRef<OsStr>>(git_dir: &Path, args: &[S], timeout: Duration) -> Result<Vec<u8>, GitFailure> {
    run_with(git_dir, None, args, timeout).await
}

/// [`run`] with `work_tree` as the work tree and `index` as the index file (reading a commit's
/// tree out of a bare repository).
pub async fn run_in<S: AsRef<OsStr>>(
    git_dir: &Path,
    (work_tree, index): (&Path, &Path),
    args: &[S],
    timeout: Duration,
) -> Result<Vec<u8>, GitFailure> {
    run_with(git_dir, Some((work_tree, index)), args, timeout).await
}

async fn run_with<S: AsRef<OsStr>>(
    git_dir: &Path,
    tree: Option<(&Path, &Path)>,
    args: &[S],
    timeout: Duration,
) -> Result<Vec<u8>, GitFailure> {
    let shown = redact(&args.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>().join(" "));
    let failure = |message: String| GitFailure { args: shown.clone(), message: redact(&message) };
    let mut command = tokio::process::Command::from(roundtable_workspace::git::operator_command(git_dir));
    command.arg("--git-dir").arg(git_dir).args(["-c", "protocol.file.allow=always"]).args(args);
    if let Some((work_tree, index)) = tree {
        command.env("GIT_WORK_TREE", work_tree).env("GIT_INDEX_FILE", index);
    }
    // Its own process group: git's transport helpers (`git-remote-https`, `ssh`) are its
    // children, and a timeout or a shutdown kills them with it.
    command.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).process_group(0);
    let child = command.spawn().map_err(|error| failure(format!("cannot run git: {error}")))?;
    let mut group = Group(child.id());
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => return Err(failure(format!("cannot run git: {error}"))),
        // Dropping the future drops the child; the group goes with it.
        Err(_) => return Err(failure(format!("did not finish within {} s (killed)", timeout.as_secs_f64()))),
    };
    // Finished: its id may be reused from here on, so nothing is killed by it.
    group.0 = None;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr = stderr.trim();
        let code = output.status.code().map_or_else(|| "a signal".into(), |c| format!("exit code {c}"));
        Err(failure(if stderr.is_empty() {
            format!("failed with {code}")
        } else {
            format!("failed with {code}: {stderr}")
        }))
    }
}

/// The process group of a git run, killed when dropped unless it finished.
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        let pid = self.0.and_then(|id| i32::try_from(id).ok()).and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// The top of the work tree holding `dir` and its git directory (absolute), for `--committed`.
pub async fn discover(dir: &Path, timeout: Duration) -> Result<(String, String), GitFailure> {
    let failure = |message: String| GitFailure { args: "rev-parse --show-toplevel".into(), message };
    let mut command = tokio::process::Command::from(roundtable_workspace::git::operator_command(dir));
    command.args(["rev-parse", "--show-toplevel", "--absolute-git-dir"]).kill_on_drop(true);
    let output = command.output();
    let output = match tokio::time::timeout(timeout, output).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => return Err(failure(format!("cannot run git: {error}"))),
        Err(_) => return Err(failure(format!("did not finish within {} s (killed)", timeout.as_secs_f64()))),
    };
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut lines = text.lines();
    match (lines.next(), lines.next(), output.status.success()) {
        (Some(top), Some(git_dir), true) => Ok((top.to_owned(), git_dir.to_owned())),
        _ => Err(failure(format!(
            "{} is not in a git checkout: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))),
    }
}

/// [`run`], returning trimmed stdout as text.
pub async fn text<S: AsRef<OsStr>>(git_dir: &Path, args: &[S], timeout: Duration) -> Result<String, GitFailure> {
    Ok(String::from_utf8_lossy(&run(git_dir, args, timeout).await?).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_are_never_shown() {
        assert_eq!(redact("https://user:s3cret@example.com/r.git"), "https://***@example.com/r.git");
        assert_eq!(
            redact("fatal: unable to access 'https://TOKEN@host/r/': x"),
            "fatal: unable to access 'https://***@host/r/': x"
        );
        assert_eq!(redact("https://example.com/r.git#main"), "https://example.com/r.git#main");
        assert_eq!(redact("/srv/git/r.git and file:///srv/r"), "/srv/git/r.git and file:///srv/r");
        assert_eq!(redact("a ssh://u:p@h:22/x b https://k@h2"), "a ssh://***@h:22/x b https://***@h2");
    }

    #[tokio::test]
    async fn a_git_run_past_its_timeout_is_killed_and_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let init = run(dir.path(), &["init", "--bare", "-q"], Duration::from_secs(10)).await;
        init.expect("git init");
        // A remote that takes the connection and never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("git://{}/r.git", silent.local_addr().expect("address"));
        let started = std::time::Instant::now();
        let hung = run(dir.path(), &["fetch", &url], Duration::from_secs(1)).await;
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        let failure = hung.expect_err("a remote that never answers fails");
        assert!(failure.message.contains("did not finish within 1 s"), "{failure}");
    }
}
