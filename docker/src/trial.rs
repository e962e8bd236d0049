//! What `doctor` proves by doing: each step an execution takes, tried in order on a throw-away
//! labelled container from the empty image with the controller's binary, exactly as a session
//! makes it: the two tmpfs volumes with their size and inode options, the container under the
//! full hardened profile with the binary and a socket directory bind-mounted, the self-check
//! from inside (which proves the kernel the default runtime must show), a connection from inside
//! to a Unix socket bound on the host, pause and unpause, and an archive round trip through the
//! engine. Each step says what it tried and, on failure, the engine's words; the steps after a
//! failure are not tried. Every other runtime class the engine registered gets one line of its
//! own: its container, its self-check and its host sockets. Everything made is removed on every
//! path.

use std::path::Path;

use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use futures::StreamExt as _;
use roundtable_session_runtime::{Expected, ResolvedRuntime, Resources, RuntimeError, TmpEntry};
use roundtable_specs::layout as paths;
use roundtable_specs::output::{FeatureBasis, FeatureCheck};
use tokio::sync::watch;

use crate::container::{self, container_name, create_hardened, create_tmpfs_volumes, image_or_empty};
use crate::engine::Engine;
use crate::exec::run_exec;
use crate::profile::SandboxSpec;

/// A trial container's resources: small, but every limit set as a session sets it.
const TRIAL_RESOURCES: Resources = Resources {
    memory_bytes: 256 << 20,
    nano_cpus: 500_000_000,
    pids: 64,
    workspace_bytes: 8 << 20,
    tmp_bytes: 8 << 20,
};

/// What the archive round trip writes and reads back.
const MARKER: &[u8] = b"roundtable doctor: archive round trip\n";

fn check(name: &str, outcome: Result<String, String>) -> FeatureCheck {
    match outcome {
        Ok(detail) => FeatureCheck { name: name.into(), available: true, detail, basis: FeatureBasis::Tried },
        Err(detail) => FeatureCheck { name: name.into(), available: false, detail, basis: FeatureBasis::Tried },
    }
}

fn words(error: &RuntimeError) -> String {
    roundtable_telemetry::error_chain(error)
}

/// The steps, in order; the first failure ends the trial (later steps are listed as not tried).
pub const STEPS: [&str; 6] = ["tmpfsVolumes", "hardenedContainer", "selfCheck", "hostSockets", "pause", "archive"];

/// How many of [`STEPS`] another runtime class is tried with: up to its host sockets.
const CLASS_STEPS: usize = 4;

/// The prefix of each other runtime class's line (`runtimeClass/runsc`).
pub const RUNTIME_CLASS_PREFIX: &str = "runtimeClass/";

/// The line's name after the prefix when the engine registers no runtime but its default.
pub const OTHERS: &str = "others";

/// Tries every step on `engine` under its default runtime, then each other runtime class it
/// registered; `binary` is the controller's own static binary, `scratch` an empty private
/// directory, where each trial makes an empty source (mounted read-only, as a session's) and a
/// socket directory.
pub async fn run(engine: &Engine, binary: &Path, scratch: &Path) -> Vec<FeatureCheck> {
    let runtimes = engine.runtimes().await.ok();
    let host_kernel = runtimes.as_ref().and_then(|r| r.host_kernel.clone());
    let resolve = |name: &str| name.parse().ok().map(|class| ResolvedRuntime::new(class, host_kernel.clone()));
    let default = runtimes.as_ref().and_then(|r| resolve(&r.default));
    let mut checks = trial(engine, binary, &scratch.join("default"), default.as_ref(), STEPS.len()).await;
    let others = runtimes.iter().flat_map(|r| r.registered.keys()).filter(|name| {
        // The containerd shim names are the default runtime under another name.
        Some(name.as_str()) != runtimes.as_ref().map(|r| r.default.as_str()) && !name.starts_with("io.containerd.")
    });
    let mut others = others.peekable();
    if others.peek().is_none() {
        // Nothing to try: say so, and how an operator adds the usual other one.
        let default = runtimes.as_ref().map_or("its default", |r| r.default.as_str());
        let said = format!(
            "the engine registers no runtime but {default}: to run Adapters under gVisor, install runsc and register it in the engine's daemon.json with runtimeArgs [\"--network=none\", \"--host-uds=open\"] (docs/runtime-classes.md), then set an Adapter's runtimeClass: runsc"
        );
        checks.push(check(&format!("{RUNTIME_CLASS_PREFIX}{OTHERS}"), Err(said)));
    }
    for name in others {
        if let Some(why) = runtimes.as_ref().and_then(|r| r.choice_ignored.as_ref()) {
            let said = format!("not tried: {why}, so a container asking for {name} runs under the default");
            checks.push(check(&format!("{RUNTIME_CLASS_PREFIX}{name}"), Err(said)));
            continue;
        }
        let runtime = resolve(name);
        let tried = trial(engine, binary, &scratch.join(name), runtime.as_ref(), CLASS_STEPS).await;
        checks.push(class_line(name, &tried));
    }
    checks
}

/// One runtime class's line: available when every step passed, saying what its kernel showed.
fn class_line(name: &str, tried: &[FeatureCheck]) -> FeatureCheck {
    let failed = tried.iter().find(|c| !c.available);
    let outcome = match failed {
        Some(failed) => Err(format!("{}: {}", failed.name, failed.detail)),
        None => Ok(match tried.iter().find(|c| c.name == "selfCheck") {
            Some(checked) => format!("{}; its agent reached a host Unix socket", checked.detail),
            None => "every step passed".to_owned(),
        }),
    };
    check(&format!("{RUNTIME_CLASS_PREFIX}{name}"), outcome)
}

/// The first `steps` of [`STEPS`] under `runtime` (the engine's default when `None`), each
/// tried once, on containers and volumes labelled for the trial and removed after.
async fn trial(
    engine: &Engine,
    binary: &Path,
    scratch: &Path,
    runtime: Option<&ResolvedRuntime>,
    steps: usize,
) -> Vec<FeatureCheck> {
    static TRIALS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = TRIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("doctor-{:x}-{n}", std::process::id());
    let mut checks = Vec::new();
    tried_steps(engine, binary, scratch, &id, runtime, steps, &mut checks).await;
    let tried = checks.len();
    if let Some(failed) = checks.iter().find(|c| !c.available).map(|c| c.name.clone()) {
        for step in &STEPS[tried..steps] {
            checks.push(check(step, Err(format!("not tried: {failed} failed"))));
        }
    }
    if let Err(error) = container::remove_session(engine.docker(), &id).await {
        tracing::error!(trial = %id, error = %words(&error), "removing the doctor's container or volumes failed; what is left carries the ownership labels");
    }
    checks
}

/// Runs the first `steps` steps until one fails, each adding its check.
async fn tried_steps(
    engine: &Engine,
    binary: &Path,
    scratch: &Path,
    id: &str,
    runtime: Option<&ResolvedRuntime>,
    steps: usize,
    checks: &mut Vec<FeatureCheck>,
) {
    let docker = engine.docker();
    let (source_dir, socket_dir) = (scratch.join("source"), scratch.join("sockets"));
    let made = std::fs::create_dir_all(scratch)
        .and_then(|()| std::fs::create_dir(&source_dir))
        .and_then(|()| std::fs::create_dir(&socket_dir));
    if let Err(error) = made {
        record(checks, Err(format!("cannot make {}: {error}", scratch.display())));
        return;
    }
    let image = match image_or_empty(docker, None).await {
        Ok(image) => image,
        Err(error) => {
            record(checks, Err(format!("cannot build the empty image: {}", words(&error))));
            return;
        }
    };
    let spec = SandboxSpec {
        socket_dir: Some(socket_dir.clone()),
        runtime: runtime.map(|r| r.class.clone()),
        ..container::throwaway_spec("doctor", id, image, TRIAL_RESOURCES, binary, source_dir)
    };
    let container = container_name(id);

    let made = create_tmpfs_volumes(docker, &container, &spec).await;
    let bytes = TRIAL_RESOURCES.workspace_bytes;
    let made = made.map(|()| {
        format!("made the workspace and /tmp tmpfs volumes bounded to {bytes} bytes (nr_blocks), as sessions do")
    });
    if !record(checks, made.map_err(|e| words(&e))) {
        return;
    }

    let started = async {
        create_hardened(docker, &container, &spec).await?;
        container::start(docker, &container).await
    }
    .await;
    let started = started.map(|()| {
        "started a container under the full profile (read-only root, no network, every capability dropped, the agent's user, limits) with the binary and a socket directory bind-mounted".to_owned()
    });
    if !record(checks, started.map_err(|e| unseen_host_paths(words(&e)))) {
        return;
    }

    let (_keep, mut never) = watch::channel(false);
    let expected = Expected {
        uid: paths::AGENT_UID,
        gid: paths::AGENT_UID,
        memory_bytes: TRIAL_RESOURCES.memory_bytes,
        pids: u64::from(TRIAL_RESOURCES.pids),
        cpu_millis: TRIAL_RESOURCES.cpu_millis(),
        runtime: runtime.cloned(),
    };
    let timeout = Some(std::time::Duration::from_secs(30));
    let argv = crate::checked::check_argv(&expected, false);
    let checked = run_exec(docker, &container, argv, Vec::new(), None, 64 * 1024, timeout, &mut never).await;
    let verdict = match checked {
        Ok(result) => self_check_verdict(&result.stdout.bytes, &result.stderr.bytes, result.exit_code),
        Err(error) => Err(words(&error)),
    };
    if !record(checks, verdict) {
        return;
    }

    if !record(checks, reach_host_socket(docker, &container, &socket_dir).await) || checks.len() == steps {
        return;
    }

    let paused = async {
        docker.pause_container(&container).await?;
        docker.unpause_container(&container).await
    }
    .await;
    let paused = paused.map(|()| "paused and unpaused the container (sessions pause before export)".to_owned());
    if !record(checks, paused.map_err(|e| e.to_string())) {
        return;
    }

    record(checks, round_trip(docker, &container).await);
}

/// The engine's words, and what they mean when it cannot see a path of this host: an engine on
/// another machine, which sessions cannot use (they bind-mount the controller's binary, their
/// source and their socket folder from this host).
fn unseen_host_paths(said: String) -> String {
    if said.contains("bind source path does not exist") {
        format!(
            "{said}; the engine does not see this host's files (a remote engine): sessions bind-mount the controller's binary, source and sockets from this host, so they cannot run there"
        )
    } else {
        said
    }
}

/// Adds the next step's check; whether it passed.
fn record(checks: &mut Vec<FeatureCheck>, outcome: Result<String, String>) -> bool {
    let step = STEPS[checks.len()];
    let passed = outcome.is_ok();
    checks.push(check(step, outcome));
    passed
}

/// What the host answers on the trial's socket.
const SOCKET_ANSWER: &str = "roundtable doctor: host socket reached";

/// Binds a Unix socket in the bind-mounted `socket_dir`, as a session's gateway, broker and MCP
/// sockets are, and has the agent's user connect to it from inside and read its answer.
async fn reach_host_socket(docker: &bollard::Docker, container: &str, socket_dir: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = socket_dir.join("doctor.sock");
    let listener = tokio::net::UnixListener::bind(&path).map_err(|e| format!("bind {}: {e}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).map_err(|e| e.to_string())?;
    let answer = tokio::spawn(async move {
        if let Ok((mut stream, _)) = listener.accept().await {
            let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, format!("{SOCKET_ANSWER}\n").as_bytes()).await;
        }
    });
    let (_keep, mut never) = watch::channel(false);
    let argv =
        vec![paths::BINARY.to_owned(), "sandbox".into(), "reach".into(), format!("{}/doctor.sock", paths::SOCKETS)];
    let timeout = Some(std::time::Duration::from_secs(20));
    let reached = run_exec(docker, container, argv, Vec::new(), None, 4096, timeout, &mut never).await;
    answer.abort();
    let result = reached.map_err(|e| words(&e))?;
    let said = String::from_utf8_lossy(&result.stdout.bytes);
    if result.exit_code == Some(0) && said.trim() == SOCKET_ANSWER {
        Ok("connected from inside to a Unix socket bound on the host (the sessions' egress, broker and MCP path)"
            .into())
    } else {
        Err(format!(
            "the agent's user could not use a host Unix socket from inside (exit code {}): {}",
            result.exit_code.map_or_else(|| "unknown".into(), |c| c.to_string()),
            String::from_utf8_lossy(&result.stderr.bytes).trim()
        ))
    }
}

/// The self-check's verdict, decided as a session's is (`checked::passed`): what it confirmed, or
/// its failing items, or what it printed when it printed no report.
fn self_check_verdict(stdout: &[u8], stderr: &[u8], exit_code: Option<i64>) -> Result<String, String> {
    match serde_json::from_slice::<roundtable_specs::session::CheckReport>(stdout) {
        Ok(report) if exit_code == Some(0) && crate::checked::passed(&report) => {
            let kernel = report.items.iter().find(|i| i.name == "kernel").map(|i| format!("; {}", i.detail));
            Ok(format!(
                "the self-check inside confirmed the profile (user, no network, read-only root, limits){}",
                kernel.unwrap_or_default()
            ))
        }
        Ok(report) => {
            let failed: Vec<String> = report.failures().map(|i| format!("{}: {}", i.name, i.detail)).collect();
            Err(format!("the self-check inside refused: {}", failed.join("; ")))
        }
        Err(_) => Err(format!(
            "the self-check printed no report (exit code {}): {}",
            exit_code.map_or_else(|| "unknown".into(), |c| c.to_string()),
            String::from_utf8_lossy(stderr).trim()
        )),
    }
}

/// Uploads a file under `/tmp` through the engine's archive API and reads it back.
async fn round_trip(docker: &bollard::Docker, container: &str) -> Result<String, String> {
    let entry = TmpEntry { path: "roundtable-doctor".into(), owner: 0, mode: 0o644, contents: Some(MARKER.to_vec()) };
    crate::session::seed_tmp(docker, container, &[entry]).await.map_err(|e| words(&e))?;
    let options = DownloadFromContainerOptionsBuilder::default().path("/tmp/roundtable-doctor").build();
    let mut stream = docker.download_from_container(container, Some(options));
    let mut archive = Vec::new();
    while let Some(chunk) = stream.next().await {
        archive.extend_from_slice(&chunk.map_err(|e| format!("download: {e}"))?);
    }
    let mut reader = tar::Archive::new(archive.as_slice());
    let mut found = Vec::new();
    for entry in reader.entries().map_err(|e| format!("the archive: {e}"))? {
        let mut entry = entry.map_err(|e| format!("the archive: {e}"))?;
        std::io::Read::read_to_end(&mut entry, &mut found).map_err(|e| format!("the archive: {e}"))?;
    }
    if found == MARKER {
        Ok("uploaded a file through the archive API and read it back unchanged (the export path)".into())
    } else {
        Err(format!("the file read back differs ({} bytes, {} expected)", found.len(), MARKER.len()))
    }
}
