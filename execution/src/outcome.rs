//! The pure decisions of an execution: how a runtime outcome ends a session (phase, cause,
//! message), which flags a proposal carries, which external session ID the agent printed, and
//! what of the outcome is kept once the injected credentials are masked. No IO, so every row of
//! each table is a unit test.

use std::time::Duration;

use roundtable_session_runtime::{Captured, RunEnd, RunOutcome, RuntimeError};
use roundtable_specs::protected::is_protected;
use roundtable_specs::secrets::KnownSecrets;
use roundtable_specs::session::{ProposalFlag, ProposalFlagKind, SessionCause, SessionPhase};

/// File names that run code when a package is installed or built (in any case: `makefile` is
/// read by make, and a case-insensitive checkout opens `PACKAGE.JSON` as `package.json`).
const PACKAGE_SCRIPTS: [&str; 4] = ["package.json", "Makefile", "setup.py", "build.rs"];

/// How a session ended when it did not go on to a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    pub phase: SessionPhase,
    pub cause: SessionCause,
    pub message: String,
}

impl Ending {
    pub fn failed(cause: SessionCause, message: impl Into<String>) -> Self {
        Self { phase: SessionPhase::Failed, cause, message: message.into() }
    }

    pub fn interrupted(cause: SessionCause, message: impl Into<String>) -> Self {
        Self { phase: SessionPhase::Interrupted, cause, message: message.into() }
    }
}

const STOPPED_BEFORE_START: &str =
    "the controller was stopped before this session started; it is re-run on the next start";
const STOPPED_WHILE_RUNNING: &str = "the controller was stopped (SIGTERM/SIGINT) and the grace period ran out: the container was paused, killed and removed; it is re-run on the next start";

/// How a runtime error ends the session: a lost engine interrupts it (re-run, like a controller
/// restart); anything else fails it.
pub fn ending_of_error(error: &RuntimeError) -> Ending {
    let message = roundtable_telemetry::error_chain(error);
    match error {
        RuntimeError::EngineLost { .. } => Ending::interrupted(SessionCause::EngineLost, message),
        RuntimeError::Unavailable { .. } => Ending::failed(SessionCause::EngineUnavailable, message),
        _ => Ending::failed(SessionCause::RuntimeError, message),
    }
}

/// Why the manager stopped a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// `suspend`, or the Assignment was removed.
    Cancelled,
    /// The daemon is shutting down and the grace period ran out: an interruption, re-run on the
    /// next start.
    Shutdown,
    /// A newer execution generation replaces it (the run fields changed).
    Superseded { by: i64 },
    /// The broker refused a model request because the session's budget was spent.
    BudgetExceeded,
    /// The controller could not renew its lease in time (cut off from the store): it stopped the
    /// execution before another controller could take it over. An interruption, re-run by
    /// whichever controller holds the lease next.
    Fenced,
}

impl Stop {
    /// How a session stopped for this reason ends; `started`: whether it had begun running.
    pub fn ending(self, started: bool) -> Ending {
        let cancelled =
            if started { "cancelled: the container was paused and killed" } else { "cancelled before it started" };
        match self {
            Stop::Cancelled => {
                Ending { phase: SessionPhase::Cancelled, cause: SessionCause::Cancelled, message: cancelled.into() }
            }
            Stop::Shutdown => Ending::interrupted(
                SessionCause::ControllerStopped,
                if started { STOPPED_WHILE_RUNNING } else { STOPPED_BEFORE_START },
            ),
            Stop::Fenced => Ending::interrupted(
                SessionCause::ControllerStopped,
                "stopped by its controller, which could not renew the execution's lease in time (cut off from the store)",
            ),
            Stop::BudgetExceeded => Ending::failed(
                SessionCause::BudgetExceeded,
                "the session's budget was spent: the broker refused the next model request and the container was stopped",
            ),
            Stop::Superseded { by } => Ending {
                phase: SessionPhase::Cancelled,
                cause: SessionCause::Superseded,
                message: format!("superseded by execution generation {by} (the run fields changed): {cancelled}"),
            },
        }
    }
}

/// How a finished run ends the session, or `None` when it succeeded and goes on to a proposal.
/// `stop`: why the manager stopped it, if it did (a cancel without one reads as a `suspend`).
pub fn ending_of(outcome: &RunOutcome, stop: Option<Stop>, timeout: Duration) -> Option<Ending> {
    let cause = SessionCause::from(outcome.end);
    match outcome.end {
        RunEnd::Exited if outcome.exit_code == Some(0) => outcome.export_failed.as_ref().map(|why| {
            Ending::failed(
                SessionCause::ExportFailed,
                format!("the agent exited 0 but its workspace could not be exported: {why}"),
            )
        }),
        RunEnd::Cancelled => Some(stop.unwrap_or(Stop::Cancelled).ending(true)),
        RunEnd::SelfCheckFailed => {
            let failed: Vec<String> = outcome
                .self_check
                .as_ref()
                .map(|report| report.failures().map(|f| format!("{} ({})", f.name, f.detail)).collect())
                .unwrap_or_default();
            let said = if failed.is_empty() {
                String::from_utf8_lossy(&outcome.stderr.bytes).trim().to_owned()
            } else {
                failed.join("; ")
            };
            Some(Ending::failed(cause, format!("self-check failed before the agent ran: {said}")))
        }
        RunEnd::TimedOut => {
            Some(Ending::failed(cause, format!("timed out after {}s; paused and killed", timeout.as_secs())))
        }
        RunEnd::OutOfMemory => Some(Ending::failed(cause, "killed for exceeding its memory limit")),
        RunEnd::EgressUnavailable => {
            let said = String::from_utf8_lossy(&outcome.stderr.bytes).trim().to_owned();
            Some(Ending::failed(cause, format!("the agent was not started: {said}")))
        }
        RunEnd::Exited => {
            let code = outcome.exit_code.map_or("unknown".into(), |c| c.to_string());
            Some(Ending::failed(cause, format!("the agent exited with code {code}")))
        }
    }
}

/// `outcome` with every value in `known` masked in whatever of it is kept or quoted: both output
/// streams (a stream cut at its limit also loses the start of a value the cut went through), the
/// self-check's details and the export's failure. Done once, as the runtime hands the outcome
/// over, so nothing downstream (logs, the captured session ID and usage, messages) sees a value.
pub fn masked(known: &KnownSecrets, mut outcome: RunOutcome) -> RunOutcome {
    if known.is_empty() {
        return outcome;
    }
    mask_captured(known, &mut outcome.stdout, false);
    mask_captured(known, &mut outcome.stderr, false);
    if let Some(report) = outcome.self_check.as_mut() {
        for item in &mut report.items {
            item.detail = known.mask_text(&item.detail);
        }
    }
    outcome.export_failed = outcome.export_failed.map(|why| known.mask_text(&why));
    outcome
}

/// Masks one captured stream of every value in `known`. `cut_short`: the stream ended where the
/// run was lost, so it may end inside a value, as a truncated one may.
pub fn mask_captured(known: &KnownSecrets, stream: &mut Captured, cut_short: bool) {
    if known.is_empty() {
        return;
    }
    let truncated = stream.truncated();
    stream.bytes = if truncated || cut_short { known.mask_cut(&stream.bytes) } else { known.mask(&stream.bytes) };
    // A marker is not as long as its value: `total` is kept in step so that `truncated` still
    // says exactly whether anything was dropped.
    let kept = stream.bytes.len() as u64;
    stream.total = if truncated { stream.total.max(kept + 1) } else { kept };
}

/// The flags of a proposal touching `paths`: outside `readablePaths`, protected paths (a new
/// secret-like file, `.env*` or a key, included), package scripts.
pub fn proposal_flags(paths: &[String], readable: &[String]) -> Vec<ProposalFlag> {
    let mut flags = Vec::new();
    let mut flag = |kind, path: &str| flags.push(ProposalFlag { kind, path: path.to_owned() });
    for path in paths {
        let inside = readable.iter().any(|scope| {
            let scope = scope.trim_end_matches('/').trim_start_matches("./");
            scope.is_empty() || scope == "." || path == scope || path.starts_with(&format!("{scope}/"))
        });
        if !inside {
            flag(ProposalFlagKind::OutsideReadablePaths, path);
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        if is_protected(path) || roundtable_workspace::provision::sensitive(path).is_some() {
            flag(ProposalFlagKind::ProtectedPath, path);
        } else if PACKAGE_SCRIPTS.iter().any(|script| script.eq_ignore_ascii_case(file)) {
            flag(ProposalFlagKind::PackageScripts, path);
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_specs::session::{CheckItem, CheckReport};

    #[test]
    fn proposals_are_flagged_outside_scope_and_on_protected_paths() {
        let readable = vec!["docs/".to_owned(), "README.md".to_owned()];
        let paths =
            vec!["docs/a.md".into(), "src/x.rs".into(), ".github/workflows/ci.yml".into(), "docs/package.json".into()];
        let found: Vec<String> = proposal_flags(&paths, &readable).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "outsideReadablePaths: src/x.rs",
                "outsideReadablePaths: .github/workflows/ci.yml",
                "protectedPath: .github/workflows/ci.yml",
                "packageScripts: docs/package.json"
            ]
        );
        assert!(proposal_flags(&["README.md".into()], &readable).is_empty());
    }

    #[test]
    fn protected_paths_are_flagged_in_any_case_and_new_secret_like_files_too() {
        // The matching itself is `roundtable_specs::protected`'s, tested there.
        let paths: Vec<String> =
            [".github/actions/x/action.yml", ".VSCode/tasks.json", "ci/Jenkinsfile", "docs/vscode.md"]
                .map(String::from)
                .into();
        let flags = proposal_flags(&paths, &[".".into()]);
        let protected: Vec<&str> =
            flags.iter().filter(|f| f.kind == ProposalFlagKind::ProtectedPath).map(|f| f.path.as_str()).collect();
        assert_eq!(protected, [".github/actions/x/action.yml", ".VSCode/tasks.json", "ci/Jenkinsfile"]);
        // A new secret-like file the agent created is flagged too.
        let flags = proposal_flags(&["docs/.env.local".into(), "certs/new.pem".into()], &["docs/".into()]);
        let protected: Vec<&str> =
            flags.iter().filter(|f| f.kind == ProposalFlagKind::ProtectedPath).map(|f| f.path.as_str()).collect();
        assert_eq!(protected, ["docs/.env.local", "certs/new.pem"]);
    }

    fn outcome(end: RunEnd, exit_code: Option<i64>) -> RunOutcome {
        RunOutcome { exit_code, ..RunOutcome::ended(end) }
    }

    /// The outcome, why the manager stopped it, and the phase, cause and message words it ends
    /// with (`None`: it goes on to a proposal).
    type Case = (RunOutcome, Option<Stop>, Option<(SessionPhase, SessionCause, &'static str)>);

    #[test]
    fn how_an_outcome_ends_a_session() {
        use SessionCause as C;
        use SessionPhase as P;
        let timeout = Duration::from_secs(90);
        let mut failed_check = outcome(RunEnd::SelfCheckFailed, Some(1));
        failed_check.self_check = Some(CheckReport {
            ok: false,
            items: vec![CheckItem { name: "capabilities".into(), ok: false, detail: "CapEff 0x1".into() }],
        });
        let cases: Vec<Case> = vec![
            (outcome(RunEnd::Exited, Some(0)), None, None),
            (
                RunOutcome {
                    export_failed: Some("the export holds more than 1024 bytes".into()),
                    ..outcome(RunEnd::Exited, Some(0))
                },
                None,
                Some((P::Failed, C::ExportFailed, "could not be exported: the export holds more than 1024 bytes")),
            ),
            (outcome(RunEnd::Exited, Some(3)), None, Some((P::Failed, C::Exited, "exited with code 3"))),
            (outcome(RunEnd::Exited, None), None, Some((P::Failed, C::Exited, "code unknown"))),
            (outcome(RunEnd::TimedOut, None), None, Some((P::Failed, C::TimedOut, "timed out after 90s"))),
            (outcome(RunEnd::OutOfMemory, Some(137)), None, Some((P::Failed, C::OutOfMemory, "memory limit"))),
            (outcome(RunEnd::Cancelled, None), None, Some((P::Cancelled, C::Cancelled, "paused and killed"))),
            (
                outcome(RunEnd::Cancelled, None),
                Some(Stop::Shutdown),
                Some((P::Interrupted, C::ControllerStopped, "re-run on the next start")),
            ),
            (failed_check, None, Some((P::Failed, C::SelfCheckFailed, "capabilities (CapEff 0x1)"))),
            (outcome(RunEnd::EgressUnavailable, None), None, Some((P::Failed, C::EgressUnavailable, "not started"))),
            (
                outcome(RunEnd::Cancelled, None),
                Some(Stop::Superseded { by: 4 }),
                Some((P::Cancelled, C::Superseded, "superseded by execution generation 4")),
            ),
        ];
        for (outcome, stop, expected) in cases {
            let ending = ending_of(&outcome, stop, timeout);
            match (ending, expected) {
                (None, None) => {}
                (Some(ending), Some((phase, cause, words))) => {
                    assert_eq!((ending.phase, ending.cause), (phase, cause), "{outcome:?}");
                    assert!(ending.message.contains(words), "{:?} lacks {words:?}", ending.message);
                }
                (ending, expected) => panic!("{outcome:?}: {ending:?} but expected {expected:?}"),
            }
        }
    }

    #[test]
    fn a_lost_engine_interrupts_and_other_runtime_errors_fail() {
        let lost = RuntimeError::EngineLost {
            endpoint: "unix:///run/docker.sock".into(),
            step: "pause before export",
            source: "connection refused".into(),
        };
        assert_eq!(ending_of_error(&lost).phase, SessionPhase::Interrupted);
        assert_eq!(ending_of_error(&lost).cause, SessionCause::EngineLost);
        let refused = RuntimeError::Engine { step: "create the container", source: "no such image".into() };
        let ending = ending_of_error(&refused);
        assert_eq!((ending.phase, ending.cause), (SessionPhase::Failed, SessionCause::RuntimeError));
        assert!(ending.message.contains("no such image"), "the source is kept: {}", ending.message);
    }

    #[test]
    fn injected_values_are_masked_in_everything_kept_of_an_outcome() {
        let key = "acme-live-0123456789abcdef";
        let known = KnownSecrets::new([("ACME_API_KEY", key)]);
        let mut run = outcome(RunEnd::SelfCheckFailed, Some(1));
        run.stdout.push(format!("key={key}\n").as_bytes(), 1 << 20);
        // Kept up to a limit that cuts the value: its start is masked too.
        run.stderr.push(format!("said {key}").as_bytes(), 15);
        run.self_check = Some(CheckReport {
            ok: false,
            items: vec![CheckItem { name: "env".into(), ok: false, detail: format!("saw {key}") }],
        });
        run.export_failed = Some(format!("cannot export {key}.txt"));
        let kept = masked(&known, run);
        assert_eq!(kept.stdout.bytes, b"key=[redacted:ACME_API_KEY]\n");
        assert!(!kept.stdout.truncated());
        assert_eq!(kept.stderr.bytes, b"said [redacted:ACME_API_KEY]");
        assert!(kept.stderr.truncated());
        let items = kept.self_check.as_ref().map(|r| r.items.clone()).unwrap_or_default();
        assert_eq!(items[0].detail, "saw [redacted:ACME_API_KEY]");
        assert_eq!(kept.export_failed.as_deref(), Some("cannot export [redacted:ACME_API_KEY].txt"));
        let message = ending_of(&kept, None, Duration::from_secs(1)).map(|e| e.message).unwrap_or_default();
        assert!(!message.contains(key) && message.contains("[redacted:ACME_API_KEY]"), "{message}");
    }
}
