//! The exec plumbing every container command goes through: start one attached as the agent's UID
//! in the workspace, feed its stdin, capture its output (capped, counted, drained), bounded by a
//! deadline and a cancel, and read its exit code. The self-check, the agent, the proxy and the
//! probes' commands are all execs started here.

use std::time::Duration;

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures::StreamExt as _;
use roundtable_session_runtime::{Captured, LiveSink, OutputStream, RunEnd, RuntimeError};
use roundtable_specs::layout::{self as paths, AGENT_UID};
use tokio::sync::watch;

use crate::calls::{polled, timed};
use crate::errors::engine_error;

/// What one exec did: its exit code (once it ended on its own), its output, and why it was cut
/// short, if it was.
pub(crate) struct ExecResult {
    pub(crate) exit_code: Option<i64>,
    pub(crate) stdout: Captured,
    pub(crate) stderr: Captured,
    pub(crate) interrupted: Option<RunEnd>,
    /// Where each chunk also goes as it arrives (the agent's live tail).
    live: Option<LiveSink>,
}

impl ExecResult {
    pub(crate) fn empty() -> Self {
        Self {
            exit_code: None,
            stdout: Captured::default(),
            stderr: Captured::default(),
            interrupted: None,
            live: None,
        }
    }

    /// Also hands each chunk to `live` as it arrives.
    pub(crate) fn with_live(mut self, live: Option<LiveSink>) -> Self {
        self.live = live;
        self
    }

    /// Keeps a chunk of stdout (up to `cap`) and hands it on.
    pub(crate) fn stdout(&mut self, chunk: &[u8], cap: u64) {
        self.stdout.push(chunk, cap);
        if let Some(live) = &self.live {
            live(OutputStream::Stdout, chunk);
        }
    }

    /// Keeps a chunk of stderr (up to `cap`) and hands it on.
    pub(crate) fn stderr(&mut self, chunk: &[u8], cap: u64) {
        self.stderr.push(chunk, cap);
        if let Some(live) = &self.live {
            live(OutputStream::Stderr, chunk);
        }
    }

    /// Takes the rest of an exited exec's output until the stream ends, bounded: a child left
    /// behind may hold the pipes open or keep writing. (A 20 ms gap between chunks used to end
    /// the drain; under load that cut the self-check's JSON report.)
    pub(crate) async fn drain_exited(&mut self, output: &mut ExecOutput, cap: u64) {
        let drain_until = tokio::time::Instant::now() + Duration::from_millis(500);
        while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(drain_until, output.next()).await {
            match chunk {
                bollard::container::LogOutput::StdOut { message } => self.stdout(&message, cap),
                bollard::container::LogOutput::StdErr { message } => self.stderr(&message, cap),
                _ => {}
            }
        }
    }
}

/// Runs one exec to its end (or `deadline`, or `cancel`): `stdin`, when given, is fed and then
/// end of file; each output stream is kept up to `cap` bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_exec(
    docker: &Docker,
    container: &str,
    argv: Vec<String>,
    env: Vec<String>,
    stdin: Option<Vec<u8>>,
    cap: u64,
    deadline: Option<Duration>,
    cancel: &mut watch::Receiver<bool>,
) -> Result<ExecResult, RuntimeError> {
    let (exec_id, output, input) = start_attached(docker, container, argv, env, stdin.is_some(), 64 * 1024).await?;
    if let (Some(input), Some(bytes)) = (input, stdin) {
        feed(input, bytes);
    }
    drive(docker, container, &exec_id, output, ExecResult::empty(), cap, deadline, cancel).await
}

/// Captures a started exec's output into `result` until it ends (or `deadline` passes, or
/// `cancel` says so), then reads its exit code.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn drive(
    docker: &Docker,
    container: &str,
    exec_id: &str,
    mut output: ExecOutput,
    mut result: ExecResult,
    cap: u64,
    deadline: Option<Duration>,
    cancel: &mut watch::Receiver<bool>,
) -> Result<ExecResult, RuntimeError> {
    let bounds = Bounds { cap, deadline, exit_poll: Duration::from_millis(100), until_line: false };
    capture(docker, container, exec_id, &mut output, &mut result, bounds, cancel).await;
    // Stop reading: a child left behind may keep the stream open.
    drop(output);
    if result.interrupted.is_none() {
        // The output also ends when the engine goes away and takes the container with it: an
        // exit code that cannot be read is an error, never a silent "unknown".
        result.exit_code = exit_code(docker, container, exec_id).await?;
    }
    Ok(result)
}

/// What ends one [`capture`] besides the exec itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Bytes kept per stream; the rest is drained and counted.
    pub(crate) cap: u64,
    /// How long it may take (`None`: as long as the exec runs).
    pub(crate) deadline: Option<Duration>,
    /// How often the exec is asked whether it has exited.
    pub(crate) exit_poll: Duration,
    /// Stop once stdout holds a whole line (a report read while its process waits).
    pub(crate) until_line: bool,
}

/// Captures a started exec's output into `result` until the stream ends, the exec has exited
/// (what is left of its output drained), `bounds` end it, or `cancel` says so; a deadline or a
/// cancel is recorded in `result.interrupted`.
pub(crate) async fn capture(
    docker: &Docker,
    container: &str,
    exec_id: &str,
    output: &mut ExecOutput,
    result: &mut ExecResult,
    bounds: Bounds,
    cancel: &mut watch::Receiver<bool>,
) {
    let cap = bounds.cap;
    let sleep = tokio::time::sleep(bounds.deadline.unwrap_or(Duration::from_secs(365 * 24 * 3600)));
    tokio::pin!(sleep);
    // The process may exit while a child it left behind still holds its output pipes, or the
    // engine may lose an exec's output: watch the exec itself, so the wait ends (and the
    // container is paused) the moment the process is done.
    let mut exit_poll = tokio::time::interval(bounds.exit_poll);
    exit_poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first look after a period, not at once: a process that just started is running.
    exit_poll.reset();
    loop {
        tokio::select! {
            chunk = output.next() => match chunk {
                Some(Ok(bollard::container::LogOutput::StdOut { message })) => {
                    result.stdout(&message, cap);
                    if bounds.until_line && result.stdout.bytes.contains(&b'\n') {
                        break;
                    }
                }
                Some(Ok(bollard::container::LogOutput::StdErr { message })) => result.stderr(&message, cap),
                Some(Ok(_)) => {}
                // Said, because the engine then ends the exec itself (126, "exec attach failed"):
                // seen once under CI load, cause not yet known.
                Some(Err(error)) => {
                    tracing::warn!(container, %error, "the exec's output stream failed");
                    break;
                }
                None => break,
            },
            _ = exit_poll.tick() => {
                if polled(container, "inspect exec (running?)", docker.inspect_exec(exec_id)).await.is_ok_and(|e| e.running == Some(false)) {
                    result.drain_exited(output, cap).await;
                    break;
                }
            }
            () = &mut sleep => {
                result.interrupted = Some(RunEnd::TimedOut);
                break;
            }
            changed = cancel.changed() => {
                if changed.is_ok() && *cancel.borrow() {
                    result.interrupted = Some(RunEnd::Cancelled);
                    break;
                }
            }
        }
    }
}

/// An exec's merged output stream.
pub(crate) type ExecOutput = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<bollard::container::LogOutput, bollard::errors::Error>> + Send>,
>;

/// An exec's stdin.
pub(crate) type ExecInput = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// Writes `bytes` to an exec's stdin, then half-closes the attach stream (the process reads end
/// of file). On its own task: a CLI that prints before it reads must not stall us.
pub(crate) fn feed(mut input: ExecInput, bytes: Vec<u8>) {
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt as _;
        let _ = input.write_all(&bytes).await;
        let _ = input.shutdown().await;
    });
}

/// Creates and starts an exec as the agent's UID in the workspace, attached to its stdout and
/// stderr (and, with `attach_stdin`, its stdin); its id, output and input.
pub(crate) async fn start_attached(
    docker: &Docker,
    container: &str,
    argv: Vec<String>,
    env: Vec<String>,
    attach_stdin: bool,
    output_capacity: usize,
) -> Result<(String, ExecOutput, Option<ExecInput>), RuntimeError> {
    let options = CreateExecOptions {
        cmd: Some(argv),
        env: Some(env),
        attach_stdin: Some(attach_stdin),
        user: Some(format!("{AGENT_UID}:{AGENT_UID}")),
        working_dir: Some(paths::WORKSPACE.to_owned()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..CreateExecOptions::default()
    };
    let created = timed(container, "create exec", docker.create_exec(container, options))
        .await
        .map_err(engine_error("create the exec"))?;
    let start = StartExecOptions { output_capacity: Some(output_capacity), ..StartExecOptions::default() };
    match timed(container, "start exec", docker.start_exec(&created.id, Some(start)))
        .await
        .map_err(engine_error("start the exec"))?
    {
        StartExecResults::Attached { output, input } => Ok((created.id, output, attach_stdin.then_some(input))),
        StartExecResults::Detached => Err(RuntimeError::Protocol {
            step: "start the exec",
            detail: "the engine did not attach its output".into(),
        }),
    }
}

/// The exit code of an exec whose output has ended. The engine may close the output a moment
/// before it records the exit (seen under load: an agent that exited 0 read as "unknown"), so
/// this waits, bounded, until the exec is no longer running: asked again after 2 ms, then twice
/// as long each time up to 50 ms, since the exit is usually recorded within a millisecond or
/// two and every session waits for it twice (the agent, the inventory). Only the first answer
/// is one of the run's steps; the others are polls.
async fn exit_code(docker: &Docker, container: &str, exec: &str) -> Result<Option<i64>, RuntimeError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut delay = Duration::from_millis(2);
    let mut inspected = timed(container, "inspect exec (exit code)", docker.inspect_exec(exec))
        .await
        .map_err(engine_error("wait for the exec to finish"))?;
    loop {
        let finished = inspected.running != Some(true) && inspected.exit_code.is_some();
        if finished || tokio::time::Instant::now() >= deadline {
            return Ok(inspected.exit_code);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(50));
        inspected = polled(container, "inspect exec (exit code, again)", docker.inspect_exec(exec))
            .await
            .map_err(engine_error("wait for the exec to finish"))?;
    }
}
