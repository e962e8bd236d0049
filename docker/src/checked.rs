//! The self-check and the agent as one exec: `sandbox check … -- ARGV` prints its report as one
//! line and waits on stdin. The report is read and verified here first; only a passed check gets
//! the go byte and becomes the agent (the same process: what was checked is what runs). A failed,
//! garbled or missing report never does: its stdin is closed and it exits without running it.

use std::time::Duration;

use roundtable_session_runtime::CHECK_GO;
use roundtable_session_runtime::{Captured, RunEnd, RuntimeError};
use roundtable_specs::session::CheckReport;
use tokio::sync::watch;

use crate::exec::{Bounds, ExecInput, ExecOutput, ExecResult, capture, drive, feed, start_attached};

/// How long the check may take to print its report.
const CHECK_DEADLINE: Duration = Duration::from_secs(60);
/// What is kept of the check's output.
const CHECK_CAP: u64 = 1 << 20;
/// How long a refused check may take to exit once its stdin is closed.
const REFUSED_EXIT: Duration = Duration::from_secs(10);

/// The `sandbox check` command line that verifies `expected` from inside; `seed_workspace` has
/// it seed the workspace from the read-only source once every item passed (a session's does).
pub(crate) fn check_argv(expected: &roundtable_session_runtime::Expected, seed_workspace: bool) -> Vec<String> {
    let e = expected;
    let mut argv = vec![
        roundtable_specs::layout::BINARY.to_owned(),
        "sandbox".into(),
        "check".into(),
        format!("--uid={}", e.uid),
        format!("--gid={}", e.gid),
        format!("--memory={}", e.memory_bytes),
        format!("--pids={}", e.pids),
        format!("--cpu-millis={}", e.cpu_millis),
    ];
    if let Some(runtime) = &e.runtime {
        argv.push(format!("--runtime-class={}", runtime.class));
        if let Some(host) = &runtime.host_kernel {
            argv.push(format!("--host-kernel={host}"));
        }
    }
    if seed_workspace {
        argv.push("--seed-workspace".into());
    }
    argv
}

/// A started `sandbox check … -- ARGV`, its report read (or not).
pub(crate) struct Checked {
    exec_id: String,
    output: ExecOutput,
    input: ExecInput,
    /// What it said before it waited: stdout (the report line) and stderr.
    said: ExecResult,
    /// The report, when exactly one whole line of it came and nothing after it.
    pub(crate) report: Option<CheckReport>,
}

impl Checked {
    /// Starts the check with the agent's `argv` after `--` and the agent's environment, calls
    /// `started` once it runs, and reads its report.
    pub(crate) async fn start(
        docker: &bollard::Docker,
        container: &str,
        check_argv: &[String],
        agent_argv: &[String],
        env: Vec<String>,
        started: impl FnOnce(),
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<Self, RuntimeError> {
        let mut argv = check_argv.to_vec();
        argv.push("--".into());
        argv.extend(agent_argv.iter().cloned());
        let (exec_id, mut output, input) = start_attached(docker, container, argv, env, true, 64 * 1024).await?;
        started();
        let Some(input) = input else {
            return Err(RuntimeError::Protocol { step: "start the self-check", detail: "no stdin attached".into() });
        };
        let said = read_report(docker, container, &exec_id, &mut output, cancel).await;
        let report = report_of(&said.stdout);
        Ok(Self { exec_id, output, input, said, report })
    }

    /// Whether cancel came while the report was awaited.
    pub(crate) fn cancelled(&self) -> bool {
        self.said.interrupted == Some(RunEnd::Cancelled)
    }

    /// Whether the report was read whole and says the sandbox is as asked.
    pub(crate) fn passed(&self) -> bool {
        self.report.as_ref().is_some_and(passed)
    }

    /// Lets the checked process become the agent: the go byte, then `stdin` and end of file.
    /// Returns what [`drive`] needs to capture the agent.
    pub(crate) fn go(self, stdin: Option<Vec<u8>>) -> (String, ExecOutput) {
        debug_assert!(self.passed(), "only a passed check gets the go byte");
        let mut bytes = vec![CHECK_GO];
        bytes.extend(stdin.unwrap_or_default());
        feed(self.input, bytes);
        (self.exec_id, self.output)
    }

    /// Refuses the go: closes the checked process's stdin, so it exits without running the
    /// agent, and collects what else it said and its exit code.
    pub(crate) async fn refuse(
        mut self,
        docker: &bollard::Docker,
        container: &str,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<ExecResult, RuntimeError> {
        use tokio::io::AsyncWriteExt as _;
        // End of file, not the go byte. (Dropping the input alone would not close it.)
        let _ = tokio::time::timeout(REFUSED_EXIT, self.input.shutdown()).await;
        drop(self.input);
        drive(docker, container, &self.exec_id, self.output, self.said, CHECK_CAP, Some(REFUSED_EXIT), cancel).await
    }
}

/// Whether `report` says the sandbox is as asked: `ok`, some items, and every one of them ok.
/// Checked here, not taken from the container's word alone.
pub(crate) fn passed(report: &CheckReport) -> bool {
    report.ok && !report.items.is_empty() && report.items.iter().all(|item| item.ok)
}

/// The report, if `stdout` is exactly one JSON line.
fn report_of(stdout: &Captured) -> Option<CheckReport> {
    let line = stdout.bytes.strip_suffix(b"\n")?;
    if stdout.truncated() || line.contains(&b'\n') {
        return None;
    }
    serde_json::from_slice(line).ok()
}

/// Reads the check's output up to the report's newline, bounded by [`CHECK_DEADLINE`] and
/// `cancel`; or to its end, when the check exits instead (failed, or crashed).
async fn read_report(
    docker: &bollard::Docker,
    container: &str,
    exec_id: &str,
    output: &mut ExecOutput,
    cancel: &mut watch::Receiver<bool>,
) -> ExecResult {
    let mut said = ExecResult::empty();
    // A check whose output the engine lost would otherwise be waited for until the deadline.
    let bounds = Bounds {
        cap: CHECK_CAP,
        deadline: Some(CHECK_DEADLINE),
        exit_poll: Duration::from_millis(250),
        until_line: true,
    };
    capture(docker, container, exec_id, output, &mut said, bounds, cancel).await;
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(bytes: &[u8]) -> Captured {
        let mut captured = Captured::default();
        captured.push(bytes, CHECK_CAP);
        captured
    }

    #[test]
    fn only_one_whole_line_of_report_counts() {
        let passing = br#"{"ok":true,"items":[{"name":"uid","ok":true,"detail":"Uid 1000"}]}"#;
        let line = [passing.as_slice(), b"\n"].concat();
        assert!(report_of(&captured(&line)).is_some_and(|r| passed(&r)));
        // Cut short, followed by more, or not JSON: no report, which fails closed.
        assert!(report_of(&captured(passing)).is_none());
        assert!(report_of(&captured(&[line.as_slice(), b"more\n"].concat())).is_none());
        assert!(report_of(&captured(b"garbled\n")).is_none());
        let mut truncated = Captured::default();
        truncated.push(&line, 10);
        assert!(report_of(&truncated).is_none());
    }

    #[test]
    fn a_report_passes_only_when_every_item_passed() {
        let report = |ok: bool, items: &[bool]| CheckReport {
            ok,
            items: items
                .iter()
                .map(|ok| roundtable_specs::session::CheckItem { name: "x".into(), ok: *ok, detail: String::new() })
                .collect(),
        };
        assert!(passed(&report(true, &[true, true])));
        assert!(!passed(&report(true, &[true, false])));
        assert!(!passed(&report(false, &[true, true])));
        assert!(!passed(&report(true, &[])));
    }
}
