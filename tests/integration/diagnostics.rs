//! Agent diagnostics on the real engine: the CLI runs in a probe container (never on the host),
//! what it prints comes back redacted, the read-only boundary is tested by real writes, the MCP
//! surface by a real handshake over the bridge, and every report is kept.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roundtable_service::Service;
use roundtable_service::diagnostics::{EXECUTABLE_VERSION, IMAGE, MCP_SURFACE, READ_ONLY_BOUNDARY};
use roundtable_specs::diagnostics::{CheckStatus, DiagnosticReport, DiagnosticStatus};

use crate::support::{API, binary, docker, engine_or_skip, ensure_test_images, nothing_left, write};

const IMAGE_UNDER_TEST: &str = "roundtable-test/agent:latest";
const SLOW_IMAGE: &str = "roundtable-test/diag-slow:latest";
const LEAKY_IMAGE: &str = "roundtable-test/diag-leaky:latest";
/// Names no other process on the host has, so the test can look for them in `/proc`.
const SLOW_CLI: &str = "rt-diag-slow-cli";
const LEAKY_CLI: &str = "rt-diag-leaky-cli";

/// The test image with `script` added as `/usr/local/bin/NAME` (`docker commit`; nothing pulled).
fn image_with_cli(tag: &str, name: &str, script: &str) {
    let scratch = tempfile::tempdir().expect("tempdir");
    let file = scratch.path().join(name);
    std::fs::write(&file, script).expect("write");
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let container = docker(&["create", IMAGE_UNDER_TEST, "true"]);
    docker(&["cp", file.to_str().expect("utf-8"), &format!("{container}:/usr/local/bin/{name}")]);
    docker(&["commit", &container, tag]);
    docker(&["rm", &container]);
}

/// A project declaring the adapters the tests diagnose.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let adapter = |name: &str, spec: &str| format!("{API}\nkind: Adapter\nmetadata: {{name: {name}}}\nspec: {spec}\n");
    let specs = [
        adapter("codex", &format!("{{image: '{IMAGE_UNDER_TEST}'}}")),
        adapter("generic", &format!("{{image: '{IMAGE_UNDER_TEST}'}}")),
        adapter("slow", &format!("{{image: '{SLOW_IMAGE}', command: {SLOW_CLI}}}")),
        adapter("leaky", &format!("{{image: '{LEAKY_IMAGE}', command: {LEAKY_CLI}}}")),
        adapter("absent", "{image: 'roundtable-test/not-built:latest'}"),
    ]
    .join("---\n");
    write(dir.path(), ".roundtable/specs.yaml", &specs);
    dir
}

async fn service(root: &Path) -> Service {
    let runtime: Arc<dyn roundtable_session_runtime::SessionRuntime> =
        Arc::new(roundtable_docker::DockerRuntime::connect().await.expect("engine"));
    let project = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project");
    Service::open(&project, runtime).await.expect("service")
}

fn status(report: &DiagnosticReport, name: &str) -> CheckStatus {
    report.check(name).unwrap_or_else(|| panic!("no {name} check: {report:#?}")).status
}

/// Names of the running probe containers of the project in `root`.
fn probe_containers(root: &Path) -> Vec<String> {
    let project = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let listed = docker(&[
        "ps",
        "--filter",
        "label=roundtable.dev/purpose=probe",
        "--filter",
        &format!("label=roundtable.dev/project={project}"),
        "--format",
        "{{.Names}}",
    ]);
    listed.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
}

/// Every process whose command line names `name`, and whether it shares this test's mount
/// namespace (a process on the host does; one in a container does not).
fn processes_named(name: &str) -> Vec<(String, bool)> {
    let ours = std::fs::read_link("/proc/self/ns/mnt").ok();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let shown = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if !shown.contains(name) {
                return None;
            }
            let namespace = std::fs::read_link(entry.path().join("ns/mnt")).ok();
            Some((shown, namespace.is_some() && namespace == ours))
        })
        .collect()
}

/// (a) The CLI's `--version` runs in the probe container: the container is there while it runs,
/// every process of the fake is in another mount namespace than the host's, and what it printed
/// comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_command_runs_in_a_probe_container_not_on_the_host() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    image_with_cli(SLOW_IMAGE, SLOW_CLI, &format!("#!/bin/sh\necho '{SLOW_CLI} 1.2.3'\nsleep 3\n"));
    let dir = project();
    let root = dir.path().to_owned();
    let service = service(&root).await;
    let running = tokio::spawn({
        let service = service.clone();
        async move { service.diagnose("slow", &binary()).await }
    });
    let (mut containers, mut fakes) = (Vec::<String>::new(), Vec::<(String, bool)>::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !running.is_finished() {
        assert!(Instant::now() < deadline, "the diagnostic did not finish");
        for name in probe_containers(&root) {
            if !containers.contains(&name) {
                containers.push(name);
            }
        }
        fakes.extend(processes_named(SLOW_CLI));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let report = running.await.expect("joined").expect("diagnose");
    assert_eq!(containers, [format!("roundtable-probe-{}", report.id)], "one probe container, seen while it ran");
    assert!(!fakes.is_empty(), "the fake was seen running");
    assert!(fakes.iter().all(|(_, on_host)| !on_host), "every run of the fake was inside the container: {fakes:?}");
    let version = report.check(EXECUTABLE_VERSION).expect("version check");
    assert_eq!(version.status, CheckStatus::Passed, "{report:#?}");
    assert!(version.detail.contains(&format!("{SLOW_CLI} 1.2.3")), "{version:?}");
    assert_eq!(report.excerpt, format!("{SLOW_CLI} 1.2.3\n"));
    assert_eq!(report.image.as_deref(), Some(SLOW_IMAGE));
    assert!(report.image_id.as_deref().is_some_and(|id| id.starts_with("sha256:")), "{report:#?}");
    nothing_left(&engine, &root).await;
}

/// (b) Secrets the CLI prints never reach the report; the output is capped while it streams and
/// invalid UTF-8 comes back as U+FFFD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_cli_prints_comes_back_redacted_and_capped() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let script = "#!/bin/sh\n\
        echo 'leaky 0.1 token=abc123 sk-ant-xyzxyzxyzxyzxyzxyz AKIAABCDEFGHIJKLMNOP ghp_abcdefghijklmnopqrstuvwxyz0123456789'\n\
        printf 'caf\\303\\n'\n\
        i=0; while [ $i -lt 4000 ]; do echo \"filler line $i of output that is long enough\"; i=$((i+1)); done\n";
    image_with_cli(LEAKY_IMAGE, LEAKY_CLI, script);
    let dir = project();
    let root = dir.path();
    let report = service(root).await.diagnose("leaky", &binary()).await.expect("diagnose");
    assert_eq!(status(&report, EXECUTABLE_VERSION), CheckStatus::Passed, "{report:#?}");
    let json = serde_json::to_string(&report).expect("json");
    for secret in ["abc123", "xyzxyz", "AKIAABCDEFGHIJKLMNOP", "ghp_abcdef", "sk-ant"] {
        assert!(!json.contains(secret), "{secret} leaked: {json}");
    }
    assert!(
        report.excerpt.starts_with("leaky 0.1 token=[REDACTED] [REDACTED] [REDACTED] [REDACTED]\ncaf\u{fffd}\n"),
        "{}",
        report.excerpt
    );
    assert!(report.check(EXECUTABLE_VERSION).is_some_and(|c| c.detail.contains("[REDACTED]")));
    assert!(report.excerpt.len() <= 2000 && report.excerpt_truncated, "{} bytes", report.excerpt.len());
    nothing_left(&engine, root).await;
}

/// (c) The boundary and the MCP surface are tested for real: both writes refused as read-only
/// (also in the empty image, which has no shell), the role's tools listed over the bridge for an
/// MCP-capable adapter, skipped for `generic`; a missing image fails with a remediation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boundary_and_the_mcp_surface_are_really_tested() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project();
    let root = dir.path();
    let service = service(root).await;

    let started = Instant::now();
    let codex = service.diagnose("codex", &binary()).await.expect("diagnose codex");
    eprintln!("diagnose codex on {IMAGE_UNDER_TEST}: {} ms", started.elapsed().as_millis());
    assert_eq!(codex.status, DiagnosticStatus::Passed, "{codex:#?}");
    assert_eq!(status(&codex, IMAGE), CheckStatus::Passed);
    assert!(codex.excerpt.contains("0.171.0"), "{codex:#?}");
    let boundary = codex.check(READ_ONLY_BOUNDARY).expect("boundary");
    assert_eq!(boundary.status, CheckStatus::Passed, "{boundary:?}");
    assert!(boundary.detail.contains("/roundtable/source") && boundary.detail.contains("Read-only"), "{boundary:?}");
    let mcp = codex.check(MCP_SURFACE).expect("mcp");
    assert_eq!(mcp.status, CheckStatus::Passed, "{mcp:?}");
    for tool in ["task.get", "workspace.manifest", "notes.append", "claims.acquire", "session.heartbeat"] {
        assert!(mcp.detail.contains(tool), "{tool} listed: {mcp:?}");
    }
    assert!(!mcp.detail.contains("proposal.create"), "{mcp:?}");
    // The socket folder went with the endpoint.
    let sockets = roundtable_workspace::sockets::default_root_for_this_user().join(&codex.id);
    assert!(!sockets.exists(), "{} is left behind", sockets.display());

    let generic = service.diagnose("generic", &binary()).await.expect("diagnose generic");
    assert_eq!(status(&generic, READ_ONLY_BOUNDARY), CheckStatus::Passed, "{generic:#?}");
    let skipped = generic.check(MCP_SURFACE).expect("mcp");
    assert_eq!(skipped.status, CheckStatus::Skipped);
    assert!(skipped.detail.contains("no MCP capability"), "{skipped:?}");
    assert_eq!(generic.status, DiagnosticStatus::Passed, "{generic:#?}");

    // The built-in mock: the empty image (no shell at all) and Roundtable's own binary.
    let mock = service.diagnose("mock", &binary()).await.expect("diagnose mock");
    assert_eq!(mock.image, None);
    assert!(mock.image_id.is_some(), "{mock:#?}");
    assert_eq!(status(&mock, EXECUTABLE_VERSION), CheckStatus::Passed, "{mock:#?}");
    assert_eq!(status(&mock, READ_ONLY_BOUNDARY), CheckStatus::Passed, "{mock:#?}");

    let absent = service.diagnose("absent", &binary()).await.expect("diagnose absent");
    let image = absent.check(IMAGE).expect("image");
    assert_eq!((image.status, absent.status), (CheckStatus::Failed, DiagnosticStatus::Failed));
    assert!(image.remediation.as_deref().is_some_and(|r| r.contains("build or load")), "{image:?}");
    nothing_left(&engine, root).await;
}

/// (d) Every report is kept: read back by id (byte-identical JSON, from a fresh handle on the
/// store) and listed by adapter, newest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_report_is_kept_and_read_back_byte_identical() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project();
    let root = dir.path();
    let first = service(root).await.diagnose("generic", &binary()).await.expect("diagnose");
    let second = service(root).await.diagnose("generic", &binary()).await.expect("diagnose");
    let reopened = service(root).await;
    let kept = reopened.diagnostic(&first.id).await.expect("kept");
    assert_eq!(serde_json::to_string(&kept).expect("json"), serde_json::to_string(&first).expect("json"));
    let listed: Vec<String> = reopened.diagnostics("generic").await.expect("list").into_iter().map(|r| r.id).collect();
    assert_eq!(listed, [second.id.clone(), first.id.clone()]);
    assert!(matches!(
        reopened.diagnostic("diag-000000000000").await,
        Err(roundtable_service::ServiceError::NotFound { what: "diagnostic", .. })
    ));
    assert!(first.id.starts_with("diag-") && first.id.len() == 17, "{}", first.id);
    nothing_left(&engine, root).await;
}
