//! Agent diagnostics: one probe container in the adapter's image, under the agent's full
//! hardening, with no network and no credentials, runs every check; nothing of it runs on the
//! host. Each check passes only on evidence of what its name claims (a write refused as
//! read-only, a tool list that came back over the real MCP bridge), and every report is kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use roundtable_agents::capability::{Authority, Role};
use roundtable_agents::tools::{ActivitySnapshot, Board};
use roundtable_execution::mcp::{McpSession, McpSidecar, McpSidecarError};
use roundtable_session_runtime::{
    Ownership, ProbeCommand, ProbeMounts, ProbeOutcome, ProbePlan, ProbeRun, Purpose, RuntimeError,
};
use roundtable_specs::adapter::{Capability, ResolvedAdapter};
use roundtable_specs::builtins::IN_CONTAINER_BINARY;
use roundtable_specs::diagnostics::{DiagnosticCheck, DiagnosticReport};
use roundtable_specs::layout::{self, CAPABILITY_ENV};
use roundtable_specs::session::CheckReport;
use roundtable_workspace::sockets::{self, SocketDirError};
use serde_json::{Value, json};

use crate::{Result, Service, ServiceError};
use roundtable_specs::secrets::excerpt::{self as redact, Excerpt};

/// The checks, in the order they run.
pub const IMAGE: &str = "image";
pub const EXECUTABLE_VERSION: &str = "executable_version";
pub const READ_ONLY_BOUNDARY: &str = "read_only_boundary";
pub const MCP_SURFACE: &str = "mcp_surface";

/// Each command's bound: a version, a write and a handshake answer at once or not at all.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes kept per stream per command while it runs; the rest is drained and counted.
pub const OUTPUT_LIMIT: u64 = 64 * 1024;
/// The diagnostic capability outlives every command of the probe, then it is revoked anyway.
const CAPABILITY_TTL: Duration = Duration::from_secs(60);

/// Why a diagnostic could not be set up on the host (the agent is not at fault).
#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    #[error("cannot draw a diagnostic id from the system random source")]
    Random(#[source] getrandom::Error),
    #[error("cannot prepare the empty read-only source folder")]
    SourceDir(#[source] std::io::Error),
    #[error("cannot prepare the diagnostic's socket folder")]
    SocketDir(#[source] SocketDirError),
    #[error("cannot start the diagnostic's MCP endpoint")]
    Mcp(#[source] McpSidecarError),
}

/// `diag-` and 12 random hex characters.
fn new_id() -> Result<String, DiagnoseError> {
    let mut random = [0u8; 6];
    getrandom::fill(&mut random).map_err(DiagnoseError::Random)?;
    Ok(format!("diag-{}", roundtable_specs::digest::hex(&random)))
}

// === planning: which commands, pure ===

/// The version command: the contract's when the adapter has one, else `COMMAND --version`; and
/// where it came from, for the detail.
fn version_command(adapter: &ResolvedAdapter, contracts: &Path) -> (Vec<String>, String) {
    let fallback = vec![adapter.command.clone(), "--version".to_owned()];
    match roundtable_admission::contracts::load(contracts, adapter) {
        Ok(Some(loaded)) => {
            let source = format!("the {} contract's versionCommand", loaded.source_text());
            (loaded.contract.version_command, source)
        }
        Ok(None) => (fallback, "no contract; the command with --version".to_owned()),
        Err(why) => {
            let why = roundtable_telemetry::error_chain(&why);
            (fallback, format!("the contract does not load ({why}); the command with --version"))
        }
    }
}

/// The write probe: Roundtable's own mounted binary, so the image needs no shell.
fn boundary_command() -> ProbeCommand {
    ProbeCommand::new(vec![
        layout::BINARY.to_owned(),
        "sandbox".into(),
        "write-probe".into(),
        layout::SOURCE.into(),
        "/".into(),
    ])
}

/// The MCP client's side of a handshake, one JSON-RPC message a line: initialize, initialized,
/// tools/list. End of input then half-closes the bridge's connection; the endpoint still sends
/// the answers to what it has read before it closes its side (rmcp drains in-flight responses).
fn mcp_handshake() -> Vec<u8> {
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "roundtable-diagnostics", "version": env!("CARGO_PKG_VERSION")},
        }}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ];
    messages.iter().map(|message| format!("{message}\n")).collect::<String>().into_bytes()
}

/// The bridge every agent CLI starts, with the capability in its own environment only.
fn mcp_command(token: &str) -> ProbeCommand {
    ProbeCommand::new(vec![
        layout::BINARY.to_owned(),
        "mcp".into(),
        "stdio".into(),
        "--unix-socket".into(),
        layout::MCP_SOCKET.into(),
    ])
    .with_stdin(mcp_handshake())
    .with_env(format!("{CAPABILITY_ENV}={token}"))
}

// === judging: from what ran to a check, pure ===

fn shown(argv: &[String]) -> String {
    argv.join(" ")
}

/// What a command printed, stdout then stderr, for a quote.
fn printed(run: &ProbeRun) -> Vec<u8> {
    let mut bytes = run.stdout.bytes.clone();
    if !run.stderr.bytes.is_empty() {
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(&run.stderr.bytes);
    }
    bytes
}

/// The report's excerpt: the version command's output, redacted; truncated when it was cut or
/// when the stream was over its cap while it ran.
fn version_excerpt(run: &ProbeRun) -> Excerpt {
    let mut excerpt = redact::redacted_excerpt(&printed(run));
    excerpt.truncated |= run.stdout.truncated() || run.stderr.truncated();
    excerpt
}

fn version_check(run: &ProbeRun, source: &str) -> DiagnosticCheck {
    let argv = shown(&run.argv);
    let said = redact::quote(&printed(run));
    match run.exit_code {
        Some(0) if said.is_empty() => {
            DiagnosticCheck::passed(EXECUTABLE_VERSION, format!("`{argv}` ({source}) exited 0 and printed nothing"))
        }
        Some(0) => DiagnosticCheck::passed(EXECUTABLE_VERSION, format!("`{argv}` ({source}) exited 0: {said}")),
        None => DiagnosticCheck::failed(
            EXECUTABLE_VERSION,
            format!("`{argv}` ({source}) did not finish within {} s", COMMAND_TIMEOUT.as_secs()),
            "a version command must answer at once, offline and without credentials; run it in the image to see what it waits for",
        ),
        Some(code @ (126 | 127)) => DiagnosticCheck::failed(
            EXECUTABLE_VERSION,
            format!("`{argv}` ({source}) could not run (exit {code}): {said}"),
            "install the CLI in the image, or point spec.command (or the contract's versionCommand) at it",
        ),
        Some(code) => DiagnosticCheck::failed(
            EXECUTABLE_VERSION,
            format!("`{argv}` ({source}) exited {code}: {said}"),
            format!("run `{argv}` in the image, offline and without credentials, to see why it fails"),
        ),
    }
}

/// Passed only when the write probe reported both writes refused as read-only.
fn boundary_check(run: &ProbeRun) -> DiagnosticCheck {
    let remediation = "the probe ran under the agent's hardening; run `roundtable doctor` to see which hardening feature the engine does not apply";
    let report = serde_json::from_slice::<CheckReport>(&run.stdout.bytes).ok();
    let Some(report) = report.filter(|_| run.exit_code.is_some()) else {
        let what = match run.exit_code {
            None => format!("did not finish within {} s", COMMAND_TIMEOUT.as_secs()),
            Some(code) => format!("exited {code} without a report: {}", redact::quote(&printed(run))),
        };
        return DiagnosticCheck::failed(
            READ_ONLY_BOUNDARY,
            format!("the write probe `{}` {what}", shown(&run.argv)),
            "the binary mounted at /roundtable/bin/roundtable must be this build of roundtable (it has `sandbox write-probe`)",
        );
    };
    let item = |path: &str| report.items.iter().find(|item| item.name == path);
    let (source, root) = (item(layout::SOURCE), item("/"));
    let describe = |path: &str, found: Option<&roundtable_specs::session::CheckItem>| match found {
        Some(item) => format!("{path}: {}", item.detail),
        None => format!("{path}: not tried"),
    };
    let detail = format!("{}; {}", describe(layout::SOURCE, source), describe("/", root));
    let refused = |found: Option<&roundtable_specs::session::CheckItem>| found.is_some_and(|item| item.ok);
    if report.ok && refused(source) && refused(root) && run.exit_code == Some(0) {
        DiagnosticCheck::passed(READ_ONLY_BOUNDARY, format!("both writes were refused as read-only: {detail}"))
    } else {
        DiagnosticCheck::failed(
            READ_ONLY_BOUNDARY,
            format!("a write was not refused as read-only: {detail}"),
            remediation,
        )
    }
}

/// What the bridge printed: one JSON-RPC message a line.
fn responses(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout).lines().filter_map(|line| serde_json::from_str(line.trim()).ok()).collect()
}

/// Passed only when the tool list that came back over the bridge is exactly the role's, and the
/// endpoint saw the client initialise and list them (so the answer came from it).
fn mcp_check(run: &ProbeRun, activity: &ActivitySnapshot, role: Role) -> DiagnosticCheck {
    let answered = responses(&run.stdout.bytes);
    let by_id = |id: i64| answered.iter().find(|m| m.get("id").and_then(Value::as_i64) == Some(id));
    let server = by_id(1).and_then(|m| m.pointer("/result/serverInfo")).map(|info| {
        let field = |name: &str| info.get(name).and_then(Value::as_str).unwrap_or("?").to_owned();
        format!("{} {}", field("name"), field("version"))
    });
    let protocol = by_id(1).and_then(|m| m.pointer("/result/protocolVersion")).and_then(Value::as_str);
    let listed: Option<Vec<String>> =
        by_id(2).and_then(|m| m.pointer("/result/tools")).and_then(Value::as_array).map(|tools| {
            tools.iter().filter_map(|tool| tool.get("name").and_then(Value::as_str).map(str::to_owned)).collect()
        });
    let expected: Vec<String> = Board::tools_for(role).iter().map(|tool| tool.name().to_owned()).collect();
    let remediation = "the agent reaches its endpoint as `roundtable mcp stdio` on /run/roundtable/mcp.sock; check that the socket folder can be mounted and entered by UID 1000";
    let (Some(server), Some(listed)) = (server, listed) else {
        let exit = run.exit_code.map_or_else(
            || format!("did not finish within {} s", COMMAND_TIMEOUT.as_secs()),
            |code| format!("exited {code}"),
        );
        return DiagnosticCheck::failed(
            MCP_SURFACE,
            format!(
                "no initialize and tools/list answer came back over the bridge; `{}` {exit}: {}",
                shown(&run.argv),
                redact::quote(&printed(run))
            ),
            remediation,
        );
    };
    let mut sorted_listed = listed.clone();
    sorted_listed.sort();
    let mut sorted_expected = expected.clone();
    sorted_expected.sort();
    let seen = !activity.clients.is_empty() && activity.tool_lists > 0;
    let protocol = protocol.unwrap_or("?");
    if sorted_listed == sorted_expected && seen {
        DiagnosticCheck::passed(
            MCP_SURFACE,
            format!(
                "initialize answered by {server} (protocol {protocol}); tools/list over the bridge for role {}: {}",
                role.as_str(),
                listed.join(", ")
            ),
        )
    } else if !seen {
        DiagnosticCheck::failed(
            MCP_SURFACE,
            format!(
                "an answer came back, but not from the diagnostic's endpoint (it saw no client): {}",
                listed.join(", ")
            ),
            remediation,
        )
    } else {
        DiagnosticCheck::failed(
            MCP_SURFACE,
            format!(
                "tools/list for role {} gave {} instead of {}",
                role.as_str(),
                listed.join(", "),
                expected.join(", ")
            ),
            "the endpoint's tool table does not match the role table; this build of roundtable is inconsistent",
        )
    }
}

/// The `image` check and the rest skipped, when the probe did not run.
fn probe_failed(adapter: &ResolvedAdapter, error: &RuntimeError, mcp: bool) -> Vec<DiagnosticCheck> {
    let image = match error {
        RuntimeError::ImageMissing { image } => DiagnosticCheck::failed(
            IMAGE,
            format!("image {image} is not on the engine (diagnostics never pull it)"),
            format!(
                "build or load {image} on this engine (examples/images/build.sh builds the provider images), or name it by digest and let the daemon pull it (`roundtable status` shows the pull)"
            ),
        ),
        other => DiagnosticCheck::failed(
            IMAGE,
            format!("the probe container could not run: {}", roundtable_telemetry::error_chain(other)),
            "check the container engine with `roundtable doctor`",
        ),
    };
    not_run(image, "the probe container did not run", adapter, mcp)
}

/// A failed `image` check and every other check skipped for `why`.
fn not_run(image: DiagnosticCheck, why: &str, adapter: &ResolvedAdapter, mcp: bool) -> Vec<DiagnosticCheck> {
    vec![
        image,
        DiagnosticCheck::skipped(EXECUTABLE_VERSION, why),
        DiagnosticCheck::skipped(READ_ONLY_BOUNDARY, why),
        DiagnosticCheck::skipped(MCP_SURFACE, if mcp { why.to_owned() } else { no_mcp(adapter) }),
    ]
}

fn no_mcp(adapter: &ResolvedAdapter) -> String {
    format!(
        "adapter {} has no MCP capability (provider {}, supportsMcp {}): its agent is given no endpoint",
        adapter.name, adapter.provider, adapter.supports_mcp
    )
}

fn image_check(adapter: &ResolvedAdapter, image_id: &str) -> DiagnosticCheck {
    match &adapter.image {
        Some(reference) => DiagnosticCheck::passed(IMAGE, format!("{reference} resolves to {image_id}")),
        None => DiagnosticCheck::passed(
            IMAGE,
            format!("the built-in {} runs Roundtable's own binary in the empty image {image_id}", adapter.name),
        ),
    }
}

// === the probe ===

/// What the probe found, before it becomes a report.
struct Findings {
    image_id: Option<String>,
    checks: Vec<DiagnosticCheck>,
    excerpt: Excerpt,
}

/// The MCP endpoint of one diagnostic and its socket folder, removed when dropped.
struct Endpoint {
    sidecar: Option<McpSidecar>,
    dir: PathBuf,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // A sidecar dropped unstopped still revokes the capability and stops serving.
        self.sidecar.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Endpoint {
    /// A fresh authority, a socket folder laid out as a session's, and a real agent endpoint in
    /// it with a short-lived implementer capability.
    fn start(service: &Service, id: &str, adapter: &str) -> Result<(Self, String), DiagnoseError> {
        let dir = sockets::plan(&sockets::default_root_for_this_user(), id).map_err(DiagnoseError::SocketDir)?;
        // Owned from here on: whatever fails next, the folder is removed.
        let mut endpoint = Self { sidecar: None, dir };
        sockets::create(&endpoint.dir).map_err(DiagnoseError::SocketDir)?;
        // Its own authority: the capability is valid on this socket only, whatever else runs.
        let authority = Arc::new(Authority::new());
        let who = McpSession {
            session: id,
            assignment: id,
            role: Role::Implementer,
            brief: json!({"diagnostic": id, "adapter": adapter}),
            ttl: CAPABILITY_TTL,
        };
        let (sidecar, token) =
            McpSidecar::start(&service.store, &authority, &endpoint.dir, who).map_err(DiagnoseError::Mcp)?;
        endpoint.sidecar = Some(sidecar);
        Ok((endpoint, token.reveal().to_owned()))
    }

    /// Revokes the capability, stops serving and removes the folder; what the endpoint saw.
    async fn stop(mut self) -> ActivitySnapshot {
        match self.sidecar.take() {
            Some(sidecar) => sidecar.stop().await,
            None => ActivitySnapshot::default(),
        }
    }
}

impl Service {
    /// Diagnoses adapter `adapter` inside its image (`binary` is the static roundtable mounted
    /// into the probe), keeps the report and returns it. A failed check is a report that says so;
    /// an error means the diagnostic could not be set up or kept.
    pub async fn diagnose(&self, adapter: &str, binary: &Path) -> Result<DiagnosticReport> {
        let resolved = self.adapter(adapter).await?;
        let id = new_id()?;
        let started_at = roundtable_store::now();
        let findings = self.probe_adapter(&id, &resolved, binary).await?;
        let report = DiagnosticReport {
            id,
            agent: resolved.name.clone(),
            image: resolved.image.as_ref().map(ToString::to_string),
            image_id: findings.image_id,
            status: DiagnosticReport::status_of(&findings.checks),
            started_at,
            finished_at: roundtable_store::now(),
            checks: findings.checks.into_iter().map(redacted_check).collect(),
            excerpt: findings.excerpt.text,
            excerpt_truncated: findings.excerpt.truncated,
        };
        self.store.save_diagnostic(&report).await?;
        Ok(report)
    }

    /// One kept report.
    pub async fn diagnostic(&self, id: &str) -> Result<DiagnosticReport> {
        self.store.diagnostic(id).await?.ok_or_else(|| ServiceError::NotFound { what: "diagnostic", id: id.to_owned() })
    }

    /// Every kept report of `adapter`, newest first; an adapter neither declared nor diagnosed
    /// is not found.
    pub async fn diagnostics(&self, adapter: &str) -> Result<Vec<DiagnosticReport>> {
        let reports = self.store.diagnostics_of(adapter).await?;
        if reports.is_empty() {
            // Not found when the adapter is neither declared nor a built-in.
            self.adapter(adapter).await?;
        }
        Ok(reports)
    }

    async fn probe_adapter(
        &self,
        id: &str,
        adapter: &ResolvedAdapter,
        binary: &Path,
    ) -> Result<Findings, DiagnoseError> {
        let mcp = adapter.capabilities().contains(&Capability::Mcp);
        if adapter.image.is_none() && adapter.command != IN_CONTAINER_BINARY {
            let image = DiagnosticCheck::failed(
                IMAGE,
                "spec.image is not set",
                "set spec.image to an image built for this adapter",
            );
            let checks = not_run(image, "there is no image to run in", adapter, mcp);
            return Ok(Findings { image_id: None, checks, excerpt: redact::excerpt("", 0) });
        }
        // An empty folder mounted read-only where the agent's source goes; UID 1000 must be able
        // to enter it, so that the write is refused for being read-only and nothing else.
        let source = tempfile::Builder::new().prefix("roundtable-diag-").tempdir().map_err(DiagnoseError::SourceDir)?;
        std::fs::set_permissions(source.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .map_err(DiagnoseError::SourceDir)?;
        let (version_argv, version_source) = version_command(adapter, &self.project.contracts_dir());
        let mut commands = vec![ProbeCommand::new(version_argv), boundary_command()];
        let endpoint = if mcp {
            let (endpoint, token) = Endpoint::start(self, id, &adapter.name)?;
            commands.push(mcp_command(&token));
            Some(endpoint)
        } else {
            None
        };
        let policy = self.declared_policy();
        let plan = ProbePlan {
            id: id.to_owned(),
            ownership: Ownership {
                project: self.project.id.clone(),
                assignment: None,
                session: id.to_owned(),
                // As admission's probes: labelled apart from every controller run's agents.
                controller_run: "probe".into(),
                purpose: Purpose::Probe,
            },
            image: adapter.image.as_ref().map(ToString::to_string),
            binary: binary.to_owned(),
            commands,
            env: roundtable_admission::surface::probe_env(),
            timeout: COMMAND_TIMEOUT,
            output_limit: OUTPUT_LIMIT,
            mounts: ProbeMounts {
                source_dir: Some(source.path().to_owned()),
                socket_dir: endpoint.as_ref().map(|endpoint| endpoint.dir.clone()),
            },
            tmp_entries: Vec::new(),
            // The runtime class gate's decision sets it, in the one launch every container of an
            // Adapter's image goes through: a refused class starts nothing.
            runtime: None,
            broker_relay: false,
        };
        let outcome =
            self.admitter(binary.to_owned(), None).launch(adapter, &policy, plan).await.map_err(RuntimeError::from);
        let activity = match endpoint {
            Some(endpoint) => Some(endpoint.stop().await),
            None => None,
        };
        drop(source);
        Ok(match outcome {
            Ok(outcome) => judged(adapter, &outcome, &version_source, activity.as_ref()),
            Err(error) => {
                Findings { image_id: None, checks: probe_failed(adapter, &error, mcp), excerpt: redact::excerpt("", 0) }
            }
        })
    }
}

/// A check as it is kept and served: its every word redacted, in this one place for every path
/// to a report. What the container printed is quoted in details, and a command line, an engine's
/// error or a bridge's answer can carry a secret as well.
fn redacted_check(check: DiagnosticCheck) -> DiagnosticCheck {
    let redact = |text: &str| roundtable_specs::secrets::redact(text.as_bytes());
    DiagnosticCheck { detail: redact(&check.detail), remediation: check.remediation.as_deref().map(redact), ..check }
}

/// Every check from what the probe's commands did (version, write probe, then the MCP bridge
/// when the adapter has an endpoint).
fn judged(
    adapter: &ResolvedAdapter,
    outcome: &ProbeOutcome,
    version_source: &str,
    activity: Option<&ActivitySnapshot>,
) -> Findings {
    let missing = |argv: &str| ProbeRun { argv: vec![argv.to_owned()], ..ProbeRun::default() };
    let run = |index: usize, what: &str| outcome.runs.get(index).cloned().unwrap_or_else(|| missing(what));
    let version = run(0, "version");
    let mut checks = vec![
        image_check(adapter, &outcome.image_id),
        version_check(&version, version_source),
        boundary_check(&run(1, "write-probe")),
    ];
    checks.push(match activity {
        Some(activity) => mcp_check(&run(2, "mcp stdio"), activity, Role::Implementer),
        None => DiagnosticCheck::skipped(MCP_SURFACE, no_mcp(adapter)),
    });
    Findings { image_id: Some(outcome.image_id.clone()), checks, excerpt: version_excerpt(&version) }
}

#[cfg(test)]
mod tests {
    use roundtable_session_runtime::Captured;
    use roundtable_specs::diagnostics::CheckStatus;

    use super::*;

    fn captured(bytes: &[u8]) -> Captured {
        Captured { bytes: bytes.to_vec(), total: bytes.len() as u64 }
    }

    fn ran(argv: &[&str], exit_code: Option<i64>, stdout: &[u8], stderr: &[u8]) -> ProbeRun {
        ProbeRun {
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            exit_code,
            stdout: captured(stdout),
            stderr: captured(stderr),
        }
    }

    #[test]
    fn the_version_check_passes_on_exit_0_only_and_quotes_redacted_output() {
        let cases: &[(Option<i64>, &[u8], CheckStatus, &str)] = &[
            (Some(0), b"codex-cli 0.171.0\n", CheckStatus::Passed, "exited 0: codex-cli 0.171.0"),
            (Some(0), b"", CheckStatus::Passed, "printed nothing"),
            (Some(0), b"cli 1.0 token=abc123\n", CheckStatus::Passed, "token=[REDACTED]"),
            (Some(127), b"sh: codex: not found\n", CheckStatus::Failed, "could not run (exit 127)"),
            (Some(2), b"error: unknown flag\n", CheckStatus::Failed, "exited 2: error: unknown flag"),
            (None, b"", CheckStatus::Failed, "did not finish within 10 s"),
        ];
        for (exit, out, status, said) in cases {
            let check = version_check(&ran(&["codex", "--version"], *exit, out, b""), "no contract");
            assert_eq!(check.status, *status, "{check:?}");
            assert!(check.detail.contains(said), "{check:?}");
            assert!(!check.detail.contains("abc123"));
            assert_eq!(check.remediation.is_some(), *status == CheckStatus::Failed);
        }
    }

    #[test]
    fn the_excerpt_is_redacted_and_truncated_when_the_stream_was_over_its_cap() {
        let mut run = ran(
            &["x"],
            Some(0),
            b"x 1.0 sk-ant-abcdefghijklmnopqrstuvwxyz\n",
            b"warning: ghp_abcdefghijklmnopqrstuvwxyz0123\n",
        );
        let excerpt = version_excerpt(&run);
        assert_eq!(excerpt.text, "x 1.0 [REDACTED]\nwarning: [REDACTED]\n");
        assert!(!excerpt.truncated);
        run.stdout.total += 1;
        assert!(version_excerpt(&run).truncated, "a stream cut while it ran is a truncated excerpt");
    }

    fn probe_report(items: &[(&str, bool)], ok: bool) -> Vec<u8> {
        let items: Vec<Value> = items
            .iter()
            .map(|(name, ok)| json!({"name": name, "ok": ok, "detail": if *ok { "Read-only file system (os error 30)" } else { "the write succeeded" }}))
            .collect();
        serde_json::to_vec(&json!({"ok": ok, "items": items})).unwrap_or_default()
    }

    #[test]
    fn the_boundary_passes_only_when_both_writes_were_refused_as_read_only() {
        let argv = ["/roundtable/bin/roundtable", "sandbox", "write-probe", "/roundtable/source", "/"];
        let cases: Vec<(Option<i64>, Vec<u8>, CheckStatus)> = vec![
            (Some(0), probe_report(&[("/roundtable/source", true), ("/", true)], true), CheckStatus::Passed),
            (Some(1), probe_report(&[("/roundtable/source", true), ("/", false)], false), CheckStatus::Failed),
            (Some(1), probe_report(&[("/roundtable/source", false), ("/", true)], false), CheckStatus::Failed),
            // A report that claims ok but left one place untried is not a pass.
            (Some(0), probe_report(&[("/roundtable/source", true)], true), CheckStatus::Failed),
            (Some(2), b"error: unrecognized subcommand 'write-probe'".to_vec(), CheckStatus::Failed),
            (None, Vec::new(), CheckStatus::Failed),
        ];
        for (exit, stdout, status) in cases {
            let check = boundary_check(&ran(&argv, exit, &stdout, b""));
            assert_eq!(check.status, status, "{check:?}");
        }
    }

    fn activity(seen: bool) -> ActivitySnapshot {
        let mut snapshot = ActivitySnapshot::default();
        if seen {
            snapshot.clients.push(roundtable_agents::tools::McpClient {
                name: "roundtable-diagnostics".into(),
                version: "0".into(),
                protocol_version: "2025-06-18".into(),
            });
            snapshot.tool_lists = 1;
        }
        snapshot
    }

    fn bridge_output(tools: &[&str]) -> Vec<u8> {
        let tools: Vec<Value> = tools.iter().map(|name| json!({"name": name, "inputSchema": {}})).collect();
        let init = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "serverInfo": {"name": "roundtable", "version": "0.1.0"}, "capabilities": {}}});
        let list = json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": tools}});
        format!("{init}\n{list}\n").into_bytes()
    }

    #[test]
    fn the_mcp_surface_passes_only_on_the_role_s_exact_tool_list_from_our_endpoint() {
        let role_tools: Vec<&str> = Board::tools_for(Role::Implementer).iter().map(|t| t.name()).collect();
        let mut with_supervisor = role_tools.clone();
        with_supervisor.push("proposal.create");
        let cases: Vec<(Vec<u8>, bool, CheckStatus)> = vec![
            (bridge_output(&role_tools), true, CheckStatus::Passed),
            (bridge_output(&role_tools), false, CheckStatus::Failed),
            (bridge_output(&with_supervisor), true, CheckStatus::Failed),
            (bridge_output(&role_tools[..2]), true, CheckStatus::Failed),
            (b"roundtable mcp stdio: the endpoint refused the capability".to_vec(), true, CheckStatus::Failed),
        ];
        for (stdout, seen, status) in cases {
            let check = mcp_check(
                &ran(&["roundtable", "mcp", "stdio"], Some(0), &stdout, b""),
                &activity(seen),
                Role::Implementer,
            );
            assert_eq!(check.status, status, "{check:?}");
            if status == CheckStatus::Passed {
                assert!(check.detail.contains("task.get") && check.detail.contains("session.heartbeat"), "{check:?}");
            }
        }
    }

    #[test]
    fn the_handshake_is_three_json_rpc_lines() {
        let lines: Vec<Value> = String::from_utf8(mcp_handshake())
            .expect("utf-8")
            .lines()
            .map(|line| serde_json::from_str(line).expect("json"))
            .collect();
        let methods: Vec<&str> = lines.iter().filter_map(|m| m["method"].as_str()).collect();
        assert_eq!(methods, ["initialize", "notifications/initialized", "tools/list"]);
    }

    #[test]
    fn the_capability_is_in_the_bridge_s_own_environment_only() {
        let command = mcp_command("rtcap_x");
        assert_eq!(command.env, [format!("{CAPABILITY_ENV}=rtcap_x")]);
        assert!(!command.argv.iter().any(|arg| arg.contains("rtcap_x")));
        assert!(boundary_command().env.is_empty());
    }

    #[test]
    fn ids_are_diag_and_twelve_hex_characters() {
        let id = new_id().expect("id");
        assert_eq!(id.len(), "diag-".len() + 12);
        assert!(id.strip_prefix("diag-").is_some_and(|hex| hex.chars().all(|c| c.is_ascii_hexdigit())), "{id}");
        assert_ne!(new_id().expect("id"), id);
    }

    /// A runtime that records the plan it was given and answers with canned runs.
    struct Recorded {
        plans: std::sync::Mutex<Vec<ProbePlan>>,
        missing: bool,
    }

    impl roundtable_session_runtime::SessionRuntime for Recorded {
        fn endpoint(&self) -> &str {
            "fake"
        }
        fn run(
            &self,
            _plan: roundtable_session_runtime::SessionPlan,
            _stop: tokio::sync::watch::Receiver<bool>,
        ) -> futures_like::Boxed<'_, roundtable_session_runtime::RunOutcome> {
            Box::pin(async { Err(RuntimeError::Unavailable { reason: "fake".into() }) })
        }
        fn owned(&self, _project: &str) -> futures_like::Boxed<'_, Vec<roundtable_session_runtime::OwnedResource>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn remove(&self, _resource: &roundtable_session_runtime::OwnedResource) -> futures_like::Boxed<'_, ()> {
            Box::pin(async { Ok(()) })
        }
        fn remove_session(&self, _project: &str, _session: &str) -> futures_like::Boxed<'_, ()> {
            Box::pin(async { Ok(()) })
        }
        fn inspect_image(
            &self,
            _reference: &str,
        ) -> futures_like::Boxed<'_, Option<roundtable_session_runtime::ImageDetails>> {
            Box::pin(async { Ok(None) })
        }
        fn health(&self) -> futures_like::Boxed<'_, roundtable_session_runtime::Health> {
            Box::pin(async { Err(RuntimeError::Unavailable { reason: "fake".into() }) })
        }
        fn probe(&self, plan: ProbePlan) -> futures_like::Boxed<'_, ProbeOutcome> {
            let image = plan.image.clone().unwrap_or_default();
            let source_is_empty = plan
                .mounts
                .source_dir
                .as_ref()
                .is_some_and(|dir| std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none()));
            self.plans.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(plan);
            let missing = self.missing;
            Box::pin(async move {
                if missing {
                    return Err(RuntimeError::ImageMissing { image });
                }
                assert!(source_is_empty, "the source mount is an empty folder");
                let report = probe_report(&[("/roundtable/source", true), ("/", true)], true);
                Ok(ProbeOutcome {
                    image_id: "sha256:feed".into(),
                    runs: vec![
                        ran(&["sh", "-c", "…"], Some(0), b"sh v1.36.1 password=hunter2\n", b""),
                        ran(&["roundtable", "sandbox", "write-probe"], Some(0), &report, b""),
                    ],
                })
            })
        }
    }

    /// The boxed future the runtime trait returns.
    mod futures_like {
        pub type Boxed<'a, T> = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T, roundtable_session_runtime::RuntimeError>> + Send + 'a>,
        >;
    }

    async fn service(missing: bool) -> (tempfile::TempDir, Service, Arc<Recorded>) {
        let project = tempfile::tempdir().expect("tempdir");
        let dir = project.path().join(".roundtable");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join("generic.yaml"),
            "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: generic}\nspec: {image: 'agent:latest'}\n",
        )
        .expect("write");
        let runtime = Arc::new(Recorded { plans: std::sync::Mutex::new(Vec::new()), missing });
        let resolved = roundtable_source::Project::resolve(&dir).expect("project");
        let service = Service::open(&resolved, runtime.clone()).await.expect("service");
        (project, service, runtime)
    }

    #[tokio::test]
    async fn a_diagnostic_runs_as_one_labelled_probe_and_is_kept() {
        let (_project, service, runtime) = service(false).await;
        let report = service.diagnose("generic", Path::new("/usr/bin/roundtable")).await.expect("diagnose");
        let statuses: Vec<(&str, CheckStatus)> = report.checks.iter().map(|c| (c.name.as_str(), c.status)).collect();
        assert_eq!(
            statuses,
            [
                (IMAGE, CheckStatus::Passed),
                (EXECUTABLE_VERSION, CheckStatus::Passed),
                (READ_ONLY_BOUNDARY, CheckStatus::Passed),
                (MCP_SURFACE, CheckStatus::Skipped),
            ]
        );
        assert_eq!(report.status, roundtable_specs::diagnostics::DiagnosticStatus::Passed);
        assert_eq!(report.image_id.as_deref(), Some("sha256:feed"));
        assert_eq!(report.excerpt, "sh v1.36.1 password=[REDACTED]\n");
        let plans = std::mem::take(&mut *runtime.plans.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let plan = plans.first().expect("one probe");
        assert_eq!(plans.len(), 1);
        assert_eq!(plan.ownership.purpose, Purpose::Probe);
        assert_eq!(plan.timeout, COMMAND_TIMEOUT);
        assert_eq!(plan.output_limit, OUTPUT_LIMIT);
        assert_eq!(plan.mounts.socket_dir, None, "generic has no MCP endpoint");
        assert_eq!(plan.commands[1].argv[..3], ["/roundtable/bin/roundtable", "sandbox", "write-probe"]);
        assert!(plan.commands.iter().all(|c| c.env.is_empty()), "no capability without an endpoint");
        assert!(!plan.mounts.source_dir.as_ref().is_some_and(|dir| dir.exists()), "the source folder is removed after");
        let kept = service.diagnostic(&report.id).await.expect("kept");
        assert_eq!(serde_json::to_string(&kept).ok(), serde_json::to_string(&report).ok());
        assert_eq!(service.diagnostics("generic").await.expect("list").len(), 1);
    }

    #[tokio::test]
    async fn a_missing_image_fails_the_image_check_with_a_remediation() {
        let (_project, service, _runtime) = service(true).await;
        let report = service.diagnose("generic", Path::new("/usr/bin/roundtable")).await.expect("diagnose");
        let image = report.check(IMAGE).expect("image check");
        assert_eq!(image.status, CheckStatus::Failed);
        assert!(image.remediation.as_deref().is_some_and(|r| r.contains("build or load agent:latest")), "{image:?}");
        assert!(report.checks[1..].iter().all(|c| c.status == CheckStatus::Skipped), "{:?}", report.checks);
        assert_eq!(report.status, roundtable_specs::diagnostics::DiagnosticStatus::Failed);
    }

    #[tokio::test]
    async fn unknown_adapters_and_diagnostics_are_not_found() {
        let (_project, service, _runtime) = service(false).await;
        let bin = Path::new("/usr/bin/roundtable");
        assert!(matches!(service.diagnose("nope", bin).await, Err(ServiceError::NotFound { what: "adapter", .. })));
        assert!(matches!(service.diagnostics("nope").await, Err(ServiceError::NotFound { what: "adapter", .. })));
        assert!(matches!(
            service.diagnostic("diag-000000000000").await,
            Err(ServiceError::NotFound { what: "diagnostic", .. })
        ));
        assert!(service.diagnostics("generic").await.expect("none yet").is_empty());
    }

    /// Issue 48, item 8: the six formats, as a CLI that colours its output prints them, in the
    /// excerpt and in the checks' details (its command line included): none comes out.
    #[test]
    fn none_of_the_six_formats_comes_out_of_a_report() {
        let six: &[(&str, &str)] = &[
            (
                "\x1b[1mCookie:\x1b[0m session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcGVyYXRvciJ9.c2lnbmF0dXJlMTIz",
                "eyJzdWIiOiJvcGVyYXRvciJ9",
            ),
            ("\x1b[31msk_live_51Hq8Zr2LwX9vN4mT7pK1sB6dH3\x1b[0m", "51Hq8Zr2LwX9vN4mT7pK1sB6dH3"),
            ("{\x1b[34;1m\"auth\"\x1b[0m: \x1b[32m\"b3BlcmF0b3I6aHVudGVyMg==\"\x1b[0m}", "b3BlcmF0b3I6aHVudGVyMg"),
            (
                "-----BEGIN PGP \x1b[1mPRIVATE\x1b[0m KEY BLOCK-----\n\nlQOYBGQ8Zr2LwX9v\n-----END PGP PRIVATE KEY BLOCK-----",
                "lQOYBGQ8Zr2LwX9v",
            ),
            ("remote: \x1b[33mglpat-q8Zr2LwX9vN4mT7pK1sB\x1b[0m", "q8Zr2LwX9vN4mT7pK1sB"),
            ("\x1b[2m--password\x1b[0m Hunter2Hunter2", "Hunter2Hunter2"),
        ];
        let printed: String = six.iter().map(|(line, _)| format!("{line}\n")).collect();
        let argv = ["cli", "--password", "Hunter2Hunter2", "--version"];
        for exit in [Some(0), Some(3)] {
            let run = ran(&argv, exit, printed.as_bytes(), printed.as_bytes());
            let check = redacted_check(version_check(&run, "no contract"));
            let excerpt = version_excerpt(&run).text;
            let shown = format!("{excerpt}\n{}\n{:?}", check.detail, check.remediation);
            let leaked: Vec<&str> = six.iter().map(|(_, secret)| *secret).filter(|s| shown.contains(s)).collect();
            assert!(leaked.is_empty(), "leaked {leaked:?} in {shown}");
        }
        let boundary = redacted_check(boundary_check(&ran(&argv, Some(2), printed.as_bytes(), b"")));
        assert!(!boundary.detail.contains("Hunter2Hunter2"), "{boundary:?}");
    }
}
