//! The hardened container on the real engine, in the lifecycle order tmpfs volumes require:
//! create → start PID 1 → upload → exec → pause → download → kill, proving from inside what
//! `docker inspect` only echoes; and, through a whole session, that a failed self-check never
//! lets the agent start.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt as _;
use roundtable_docker::bollard::Docker;
use roundtable_docker::bollard::exec::{CreateExecOptions, StartExecResults};
use roundtable_docker::bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder, EventsOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder, UploadToContainerOptionsBuilder,
};
use roundtable_docker::profile::{SandboxSpec, TmpfsRoot, paths, tmpfs_volume};
use roundtable_docker::{DockerRuntime, Engine};
use roundtable_session_runtime::labels::{Ownership, Purpose};
use roundtable_session_runtime::{
    Expected, ExportLimits, Resources, RunEnd, RunOutcome, SessionPlan, SessionRuntime as _,
};

use crate::support::{binary, engine_or_skip, ensure_test_images};

const IMAGE: &str = "roundtable-test/agent:latest";
const MEMORY: u64 = 96 << 20;
const PIDS: u32 = 64;

struct Exec {
    code: i64,
    stdout: String,
    stderr: String,
}

async fn exec(docker: &Docker, container: &str, cmd: &[&str]) -> Exec {
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                cmd: Some(cmd.iter().map(|s| (*s).to_owned()).collect()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                env: Some(vec!["PATH=/usr/local/bin:/bin".to_owned()]),
                working_dir: Some(paths::WORKSPACE.to_owned()),
                ..CreateExecOptions::default()
            },
        )
        .await
        .expect("create exec");
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let StartExecResults::Attached { mut output, .. } =
        docker.start_exec(&created.id, None).await.expect("start exec")
    {
        while let Some(chunk) = output.next().await {
            match chunk {
                Ok(roundtable_docker::bollard::container::LogOutput::StdOut { message }) => {
                    stdout.push_str(&String::from_utf8_lossy(&message))
                }
                Ok(roundtable_docker::bollard::container::LogOutput::StdErr { message }) => {
                    stderr.push_str(&String::from_utf8_lossy(&message))
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    let code = docker.inspect_exec(&created.id).await.expect("inspect exec").exit_code.unwrap_or(-1);
    Exec { code, stdout, stderr }
}

async fn sh(docker: &Docker, container: &str, script: &str) -> Exec {
    exec(docker, container, &["/bin/sh", "-c", script]).await
}

/// A container, its volumes and folders, removed at the end of the test.
struct Sandbox {
    docker: Docker,
    id: String,
    volumes: [String; 2],
    _source: tempfile::TempDir,
}

impl Sandbox {
    async fn launch(engine: &Engine, memory: u64) -> Sandbox {
        Self::launch_with(engine, memory, |_| {}).await
    }

    /// Launches with the hardened profile changed by `loosen` (tests of the self-check's fail paths).
    async fn launch_with(
        engine: &Engine,
        memory: u64,
        loosen: impl FnOnce(&mut roundtable_docker::bollard::models::ContainerCreateBody),
    ) -> Sandbox {
        ensure_test_images();
        let docker = engine.docker().clone();
        let unique = format!("rt-test-{}-{}", std::process::id(), rand_suffix());
        let labels = Ownership {
            project: "integration-tests".into(),
            assignment: None,
            session: unique.clone(),
            controller_run: "integration-tests".into(),
            purpose: Purpose::Agent,
        }
        .labels();
        let volumes = [format!("{unique}-workspace"), format!("{unique}-tmp")];
        let roots = [TmpfsRoot::Agent, TmpfsRoot::Root];
        for ((name, size), root) in volumes.iter().zip([32u64 << 20, 16 << 20]).zip(roots) {
            docker.create_volume(tmpfs_volume(name, size, root, labels.clone())).await.expect("create volume");
        }
        let source = tempfile::tempdir().expect("tempdir");
        std::fs::write(source.path().join("README.md"), "# source\n").expect("write");
        let spec = SandboxSpec {
            image: IMAGE.into(),
            labels: labels.clone(),
            resources: Resources {
                memory_bytes: memory,
                nano_cpus: 1_000_000_000,
                pids: PIDS,
                workspace_bytes: 32 << 20,
                tmp_bytes: 16 << 20,
            },
            workspace_volume: volumes[0].clone(),
            tmp_volume: volumes[1].clone(),
            binary: binary(),
            source_dir: Some(source.path().to_path_buf()),
            task_file: None,
            socket_dir: None,
            home_volume: None,
            runtime: None,
        };
        let options = CreateContainerOptionsBuilder::default().name(&unique).build();
        let mut body = spec.container_body();
        loosen(&mut body);
        let created = docker.create_container(Some(options), body).await.expect("create container");
        docker.start_container(&created.id, None).await.expect("start PID 1");
        Sandbox { docker, id: created.id, volumes, _source: source }
    }

    async fn remove(self) {
        let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
        self.docker.remove_container(&self.id, Some(options)).await.expect("remove container");
        for volume in &self.volumes {
            let options = RemoveVolumeOptionsBuilder::default().force(true).build();
            self.docker.remove_volume(volume, Some(options)).await.expect("remove volume");
        }
    }
}

fn rand_suffix() -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{nanos:x}")
}

fn status_field<'a>(status: &'a str, field: &str) -> &'a str {
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(str::trim)
        .unwrap_or_else(|| panic!("{field} missing from /proc/self/status:\n{status}"))
}

/// A tar archive holding one file owned by UID 1000.
fn one_file_tar(name: &str, contents: &[u8]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(contents.len() as u64);
    header.set_mode(0o644);
    header.set_uid(1000);
    header.set_gid(1000);
    header.set_mtime(0);
    builder.append_data(&mut header, name, contents).expect("append");
    builder.into_inner().expect("finish tar")
}

async fn download_file(docker: &Docker, container: &str, path: &str) -> Vec<u8> {
    let options = DownloadFromContainerOptionsBuilder::default().path(path).build();
    let mut stream = docker.download_from_container(container, Some(options));
    let mut archive = Vec::new();
    while let Some(chunk) = stream.next().await {
        archive.extend_from_slice(&chunk.expect("download chunk"));
    }
    let mut reader = tar::Archive::new(archive.as_slice());
    let mut entry = reader.entries().expect("entries").next().expect("one entry").expect("entry");
    let mut contents = Vec::new();
    std::io::Read::read_to_end(&mut entry, &mut contents).expect("read entry");
    contents
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardened_lifecycle_is_proven_from_inside() {
    let Some(engine) = engine_or_skip().await else {
        return;
    };
    let report = engine.report().await;
    for feature in report.features.iter().filter(|f| !matches!(f.name.as_str(), "rootless" | "userns")) {
        assert!(feature.available, "the engine lacks {}: {}", feature.name, feature.detail);
    }
    let sandbox = Sandbox::launch(&engine, MEMORY).await;
    let (docker, id) = (&sandbox.docker, sandbox.id.as_str());

    // PID 1 is our own binary, mounted read-only.
    let pid1 = sh(docker, id, "tr '\\0' ' ' < /proc/1/cmdline").await;
    assert_eq!(pid1.stdout.trim(), "/roundtable/bin/roundtable sandbox init", "{}", pid1.stderr);

    // Upload into both tmpfs volumes through the archive API (it cannot see --tmpfs mounts).
    for target in [paths::WORKSPACE, paths::TMP] {
        let options = UploadToContainerOptionsBuilder::default().path(target).build();
        let archive = one_file_tar("seed.txt", format!("seeded into {target}\n").as_bytes());
        docker
            .upload_to_container(id, Some(options), roundtable_docker::bollard::body_full(archive.into()))
            .await
            .expect("upload");
    }

    let status = sh(docker, id, "cat /proc/self/status").await.stdout;
    assert_eq!(status_field(&status, "Uid").split_whitespace().next(), Some("1000"));
    assert_eq!(status_field(&status, "Gid").split_whitespace().next(), Some("1000"));
    assert_eq!(status_field(&status, "CapEff"), "0000000000000000");
    assert_eq!(status_field(&status, "CapBnd"), "0000000000000000");
    assert_eq!(status_field(&status, "NoNewPrivs"), "1");
    assert_eq!(status_field(&status, "Seccomp"), "2");

    let interfaces = sh(docker, id, "ls /sys/class/net").await.stdout;
    assert_eq!(interfaces.split_whitespace().collect::<Vec<_>>(), ["lo"], "only loopback");

    // The limits as the kernel sees them, cgroup v1 or v2.
    let memory =
        sh(docker, id, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
            .await;
    assert_eq!(memory.stdout.trim(), MEMORY.to_string(), "{}", memory.stderr);
    let pids = sh(docker, id, "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max").await;
    assert_eq!(pids.stdout.trim(), PIDS.to_string(), "{}", pids.stderr);
    let swap = sh(
        docker,
        id,
        "cat /sys/fs/cgroup/memory.swap.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes",
    )
    .await;
    assert!(
        swap.stdout.trim() == "0" || swap.stdout.trim() == MEMORY.to_string(),
        "no swap beyond memory: {}",
        swap.stdout
    );

    // The mount table: the root and the source read-only, the volumes tmpfs owned by 1000.
    let mounts = sh(docker, id, "cat /proc/self/mountinfo").await.stdout;
    let mount_options = |target: &str| -> String {
        mounts
            .lines()
            .find(|line| line.split_whitespace().nth(4) == Some(target))
            .unwrap_or_else(|| panic!("{target} is not mounted:\n{mounts}"))
            .to_owned()
    };
    assert!(mount_options("/").split_whitespace().nth(5).is_some_and(|o| o.split(',').any(|x| x == "ro")));
    assert!(mount_options(paths::SOURCE).split_whitespace().nth(5).is_some_and(|o| o.split(',').any(|x| x == "ro")));
    assert!(mount_options(paths::BINARY).split_whitespace().nth(5).is_some_and(|o| o.split(',').any(|x| x == "ro")));
    // The workspace is the agent's; /tmp is root's and 0755 (the agent writes below it).
    let workspace = mount_options(paths::WORKSPACE);
    assert!(workspace.contains(" - tmpfs ") && workspace.contains("uid=1000"), "{workspace}");
    let tmp = mount_options(paths::TMP);
    assert!(tmp.contains(" - tmpfs ") && !tmp.contains("uid=") && tmp.contains("mode=755"), "{tmp}");
    assert!(!mounts.contains("docker.sock"), "the engine socket is never mounted");

    let denied = sh(docker, id, "touch /x; touch /roundtable/source/x; touch /roundtable/bin/x; echo done").await;
    assert_eq!(denied.stderr.matches("Read-only file system").count(), 3, "{}", denied.stderr);
    let allowed =
        sh(docker, id, "echo agent > /roundtable/workspace/out.txt && stat -c %u /roundtable/workspace/seed.txt").await;
    assert_eq!((allowed.code, allowed.stdout.trim()), (0, "1000"), "{}", allowed.stderr);
    // /tmp is root's: the agent writes in its home and TMPDIR below it, not beside the manifests.
    let tmp_denied = sh(docker, id, "echo tmp > /tmp/out.txt").await;
    assert!(tmp_denied.code != 0 && tmp_denied.stderr.contains("Permission denied"), "{}", tmp_denied.stderr);
    let source = sh(docker, id, "cat /roundtable/source/README.md").await;
    assert_eq!(source.stdout, "# source\n");

    // The agent double edits its working directory.
    let agent = exec(docker, id, &["fake-agent", "hello from the test"]).await;
    assert_eq!(agent.code, 0, "{}", agent.stderr);

    // Pause (as before export), prove it, resume.
    docker.pause_container(id).await.expect("pause");
    let state = docker.inspect_container(id, None).await.expect("inspect").state.expect("state");
    assert_eq!(state.paused, Some(true));
    // The archive API still reads a paused container's volumes.
    assert_eq!(download_file(docker, id, "/roundtable/workspace/fake-agent.txt").await, b"hello from the test\n");
    docker.unpause_container(id).await.expect("unpause");

    for (path, expected) in [
        ("/roundtable/workspace/seed.txt", "seeded into /roundtable/workspace\n"),
        ("/tmp/seed.txt", "seeded into /tmp\n"),
        ("/roundtable/workspace/out.txt", "agent\n"),
    ] {
        assert_eq!(String::from_utf8(download_file(docker, id, path).await).expect("utf-8"), expected, "{path}");
    }

    docker
        .kill_container(id, None::<roundtable_docker::bollard::query_parameters::KillContainerOptions>)
        .await
        .expect("kill");
    sandbox.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oom_kills_are_observed_through_engine_events() {
    let Some(engine) = engine_or_skip().await else {
        return;
    };
    let sandbox = Sandbox::launch(&engine, 48 << 20).await;
    let (docker, id) = (sandbox.docker.clone(), sandbox.id.clone());
    let filters = HashMap::from([("container", vec![id.as_str()]), ("event", vec!["oom"])]);
    let options = EventsOptionsBuilder::default().filters(&filters).build();
    let mut events = docker.events(Some(options));
    let hog = tokio::spawn({
        let (docker, id) = (docker.clone(), id.clone());
        async move { exec(&docker, &id, &["memory-hog"]).await }
    });
    let event = tokio::time::timeout(Duration::from_secs(60), events.next())
        .await
        .expect("an oom event within 60 s")
        .expect("event stream open")
        .expect("event");
    assert_eq!(event.action.as_deref(), Some("oom"));
    let hog = tokio::time::timeout(Duration::from_secs(30), hog).await.expect("hog ends").expect("join");
    assert_eq!(hog.code, 137, "killed by SIGKILL: {}", hog.stderr);
    sandbox.remove().await;
}

async fn self_check(sandbox: &Sandbox, memory: u64) -> (i64, String, String) {
    let (memory, pids) = (memory.to_string(), PIDS.to_string());
    let check = exec(
        &sandbox.docker,
        &sandbox.id,
        &[
            "/roundtable/bin/roundtable",
            "sandbox",
            "check",
            "--memory",
            &memory,
            "--pids",
            &pids,
            "--cpu-millis",
            "1000",
        ],
    )
    .await;
    (check.code, check.stdout, check.stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_check_passes_in_the_hardened_profile() {
    let Some(engine) = engine_or_skip().await else { return };
    let sandbox = Sandbox::launch(&engine, MEMORY).await;
    let (code, report, stderr) = self_check(&sandbox, MEMORY).await;
    sandbox.remove().await;
    assert_eq!(code, 0, "{report}{stderr}");
    let report: serde_json::Value = serde_json::from_str(&report).expect("json report");
    assert_eq!(report["ok"], true);
    assert!(report["items"].as_array().is_some_and(|items| items.len() >= 20), "{report:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_check_names_each_missing_setting() {
    let Some(engine) = engine_or_skip().await else { return };
    type Loosen = fn(&mut roundtable_docker::bollard::models::ContainerCreateBody);
    let cases: [(&str, Loosen, &[&str]); 5] = [
        ("capabilities kept", |b| host(b).cap_drop = None, &["capbnd"]),
        ("no-new-privileges missing", |b| host(b).security_opt = None, &["noNewPrivs"]),
        ("writable root", |b| host(b).readonly_rootfs = Some(false), &["rootReadOnly"]),
        (
            "a network",
            |b| {
                host(b).network_mode = None;
                b.network_disabled = None;
            },
            &["network"],
        ),
        (
            "another memory limit",
            |b| {
                host(b).memory = Some(128 << 20);
                host(b).memory_swap = Some(128 << 20);
            },
            &["memoryLimit", "noSwap"],
        ),
    ];
    for (what, loosen, expected_failures) in cases {
        let sandbox = Sandbox::launch_with(&engine, MEMORY, loosen).await;
        let (code, report, stderr) = self_check(&sandbox, MEMORY).await;
        sandbox.remove().await;
        assert_eq!(code, 1, "{what}: the check must fail: {report}");
        let report: serde_json::Value = serde_json::from_str(&report).expect("json report");
        let failed: Vec<&str> = report["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|item| item["ok"] == false)
            .filter_map(|item| item["name"].as_str())
            .collect();
        assert_eq!(failed, expected_failures, "{what}: {report:#}");
        for name in expected_failures {
            assert!(stderr.contains(&format!("sandbox check failed: {name}:")), "{what}: {stderr}");
        }
    }
}

fn host(
    body: &mut roundtable_docker::bollard::models::ContainerCreateBody,
) -> &mut roundtable_docker::bollard::models::HostConfig {
    body.host_config.get_or_insert_with(Default::default)
}

/// One whole session through `SessionRuntime::run`, its self-check expecting `expected_memory`,
/// its source holding a README and `extra_bytes` more in one file; the agent copies its stdin into
/// the socket directory (a bind mount it may write), so whether it ran, and what it read, shows on
/// the host after the container is gone.
async fn session_leaving_a_mark(
    engine: &Engine,
    expected_memory: u64,
    extra_bytes: usize,
) -> (RunOutcome, Option<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = plan_leaving_a_mark(dir.path(), expected_memory, extra_bytes);
    let (_keep, stop) = tokio::sync::watch::channel(false);
    let runtime = DockerRuntime::new(engine.clone());
    let outcome = runtime.run(plan, stop).await.expect("run the session");
    // The removal comes after the outcome; a test that ends first would cut it short.
    runtime.settled().await;
    let mark = std::fs::read_to_string(dir.path().join("sockets/agent-ran")).ok();
    (outcome, mark)
}

/// The plan [`session_leaving_a_mark`] runs, its files under `dir`.
fn plan_leaving_a_mark(dir: &std::path::Path, expected_memory: u64, extra_bytes: usize) -> SessionPlan {
    use std::os::unix::fs::PermissionsExt as _;
    ensure_test_images();
    let (source, sockets) = (dir.join("source"), dir.join("sockets"));
    std::fs::create_dir_all(&source).expect("source");
    std::fs::write(source.join("README.md"), "# source\n").expect("write");
    if extra_bytes > 0 {
        std::fs::write(source.join("extra.bin"), vec![7u8; extra_bytes]).expect("extra");
    }
    std::fs::write(dir.join("task.json"), "{}").expect("task");
    std::fs::create_dir_all(&sockets).expect("sockets");
    std::fs::set_permissions(&sockets, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let session = format!("rt-test-{}-{}", std::process::id(), rand_suffix());
    SessionPlan {
        session: session.clone(),
        ownership: Ownership {
            project: "integration-tests".into(),
            assignment: None,
            session,
            controller_run: "integration-tests".into(),
            purpose: Purpose::Agent,
        },
        image: Some(IMAGE.into()),
        resources: Resources {
            memory_bytes: MEMORY,
            nano_cpus: 1_000_000_000,
            pids: PIDS,
            workspace_bytes: 16 << 20,
            tmp_bytes: 16 << 20,
        },
        binary: binary(),
        source_dir: source,
        task_file: dir.join("task.json"),
        socket_dir: Some(sockets.clone()),
        egress_proxy: false,
        broker_relay: false,
        argv: vec!["/bin/sh".into(), "-c".into(), format!("cat > {}/agent-ran", paths::SOCKETS)],
        env: vec!["PATH=/usr/local/bin:/bin".into()],
        stdin: Some(b"the prompt\n".to_vec()),
        tmp_entries: Vec::new(),
        persistent_home: None,
        output_limit: 1 << 20,
        timeout: Duration::from_secs(60),
        expected: Expected {
            uid: 1000,
            gid: 1000,
            memory_bytes: expected_memory,
            pids: u64::from(PIDS),
            cpu_millis: 1000,
            runtime: None,
        },
        export_dir: dir.join("export"),
        scratch_dir: dir.join("scratch"),
        export_limits: ExportLimits { max_bytes: 16 << 20, max_entries: 1000 },
        live: None,
    }
}

/// A cancel that lands while the container is being created or started (found by a forced
/// disable in the API tests) leaves nothing behind: a create dropped mid-call still completes on
/// the engine, and the container it made (with the named volumes it brings into being) outlived
/// the cleanup that had already run. The cancel is swept across the launch in small steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_during_the_launch_leaves_nothing_behind() {
    let Some(engine) = engine_or_skip().await else { return };
    let docker = engine.docker();
    for delay_ms in (0..=120).step_by(5) {
        let dir = tempfile::tempdir().expect("tempdir");
        let plan = plan_leaving_a_mark(dir.path(), MEMORY, 0);
        let session = plan.session.clone();
        let (cancel, stop) = tokio::sync::watch::channel(false);
        let runtime = DockerRuntime::new(engine.clone());
        let run = runtime.run(plan, stop);
        let canceller = async {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            cancel.send_replace(true);
        };
        let (outcome, ()) = tokio::join!(run, canceller);
        let outcome = outcome.expect("run the session");
        // A cancel after the agent finished is no cancel; the run must have ended either way.
        assert!(matches!(outcome.end, RunEnd::Cancelled | RunEnd::Exited), "{delay_ms} ms: {:?}", outcome.end);
        // The removal the run left under way has ended (a daemon waits so before it exits), and
        // whatever the engine was still doing when the run returned has had time to land.
        runtime.settled().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let container = roundtable_docker::container::container_name(&session);
        let left = docker.inspect_container(&container, None).await.ok().and_then(|left| left.state);
        assert!(left.is_none(), "cancelled {delay_ms} ms in, the container {container} was left: {left:?}");
        for volume in roundtable_docker::container::volume_names(&session) {
            let left = docker.inspect_volume(&volume).await.is_ok();
            assert!(!left, "cancelled {delay_ms} ms in, the volume {volume} was left");
        }
    }
}

/// What a plain session (runc, no egress, no home) asks the engine before its outcome comes
/// back, as a count, not a time: the launch (the two volumes, the container, PID 1), the `/tmp`
/// upload and the checked exec that becomes the agent (created, started), the agent's exit code,
/// the OOM events, pause, download, unpause, and the inventory's exec (created, started, its
/// exit code). The removal is not among them: it follows the outcome, and `settled` waits for
/// it, after which nothing of the session is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_asks_the_engine_fifteen_things_and_removes_itself_after_its_outcome() {
    let Some(engine) = engine_or_skip().await else { return };
    let docker = engine.docker();
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = plan_leaving_a_mark(dir.path(), MEMORY, 0);
    let session = plan.session.clone();
    let (_keep, stop) = tokio::sync::watch::channel(false);
    let runtime = DockerRuntime::new(engine.clone());
    let outcome = runtime.run(plan, stop).await.expect("run the session");
    assert_eq!(outcome.end, RunEnd::Exited, "{:?}", String::from_utf8_lossy(&outcome.stderr.bytes));
    assert!(outcome.extracted.is_some(), "exported: {:?}", outcome.export_failed);
    assert_eq!(outcome.engine_calls, 15, "the engine calls of one session");
    assert!(!outcome.timings.contains_key("cleanup"), "the removal is not the session's: {:?}", outcome.timings);
    runtime.settled().await;
    let container = roundtable_docker::container::container_name(&session);
    assert!(docker.inspect_container(&container, None).await.is_err(), "the container {container} was left");
    for volume in roundtable_docker::container::volume_names(&session) {
        assert!(docker.inspect_volume(&volume).await.is_err(), "the volume {volume} was left");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_self_check_never_runs_the_agent() {
    let Some(engine) = engine_or_skip().await else { return };
    // The control: the check passes, and the process it becomes reads exactly the prompt (the
    // go byte before it is not the agent's).
    let (passed, mark) = session_leaving_a_mark(&engine, MEMORY, 0).await;
    assert_eq!(passed.end, RunEnd::Exited, "{:?}", String::from_utf8_lossy(&passed.stderr.bytes));
    assert_eq!(passed.exit_code, Some(0));
    assert!(passed.self_check.as_ref().is_some_and(|report| report.ok), "{:?}", passed.self_check);
    assert_eq!(mark.as_deref(), Some("the prompt\n"));

    // The check finds another memory limit than it was told to expect: the run fails closed and
    // the agent never starts.
    let (failed, mark) = session_leaving_a_mark(&engine, MEMORY + (1 << 20), 0).await;
    assert_eq!(failed.end, RunEnd::SelfCheckFailed);
    assert_eq!(failed.exit_code, None);
    let report = failed.self_check.expect("the report is kept");
    let failures: Vec<&str> = report.failures().map(|item| item.name.as_str()).collect();
    assert!(failures.contains(&"memoryLimit"), "{report:?}");
    assert!(String::from_utf8_lossy(&failed.stderr.bytes).contains("sandbox check failed: memoryLimit"));
    assert_eq!(mark, None, "the agent ran after a failed self-check");
    let seeded = report.items.iter().any(|item| item.name == "workspaceSeed");
    assert!(!seeded, "a container that failed its check is not seeded: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_seeds_the_workspace_and_a_seed_that_does_not_fit_never_runs_the_agent() {
    let Some(engine) = engine_or_skip().await else { return };
    // Seeded inside by the check: the export holds the source's files, as the agent's user.
    let (seeded, mark) = session_leaving_a_mark(&engine, MEMORY, 1 << 20).await;
    assert_eq!(seeded.end, RunEnd::Exited, "{:?}", String::from_utf8_lossy(&seeded.stderr.bytes));
    assert_eq!(mark.as_deref(), Some("the prompt\n"));
    let report = seeded.self_check.expect("the report is kept");
    let item = report.items.iter().find(|item| item.name == "workspaceSeed").expect("a seed item");
    assert!(item.ok && item.detail.starts_with("2 files, 1048585 bytes"), "{item:?}");
    let extracted = seeded.extracted.expect("exported");
    assert_eq!(extracted.files, 2, "{extracted:?}");
    assert!(extracted.bytes >= 1 << 20, "{extracted:?}");

    // 20 MiB into a 16 MiB workspace: the check fails on the seed, naming it, and the agent never
    // starts on a partial tree.
    let (full, mark) = session_leaving_a_mark(&engine, MEMORY, 20 << 20).await;
    assert_eq!(full.end, RunEnd::SelfCheckFailed);
    assert_eq!(mark, None, "the agent ran on a partial seed");
    let report = full.self_check.expect("the report is kept");
    let failures: Vec<&str> = report.failures().map(|item| item.name.as_str()).collect();
    assert_eq!(failures, ["workspaceSeed"], "{report:?}");
    let stderr = String::from_utf8_lossy(&full.stderr.bytes);
    assert!(
        stderr.contains("sandbox check failed: workspaceSeed: cannot write /roundtable/workspace/extra.bin"),
        "{stderr}"
    );
}
