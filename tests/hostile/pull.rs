//! Hostile tests of pulling Adapters' images, each against a real registry on loopback
//! (`tests/integration/registry.rs`): a registry that serves another manifest under a digest (an
//! edited blob on its disk), an engine that holds a digest reference as another image (a proxy
//! in front of the real engine rewrites the digest it is asked for), a registry that never
//! answers, a registry behind a login, and a reference with credentials written into it. What
//! is pulled is checked, what is refused never runs, a stuck pull holds nothing up, and
//! credentials go to the engine and nowhere else.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};

use crate::pull::{events, image_id, project_on, ready};
use crate::registry::{PASSWORD, Pace, PulledImages, Registry, Relay, USER};
use crate::support::{
    ShowLogOnPanic, engine_or_skip, ensure_test_images, json, nothing_left, roundtable, session_phases, start_daemon,
    start_daemon_with_env, stderr, stdout, wait_until_within,
};

/// Waits until `kind/name`'s Ready reason is one of `reasons`; returns the condition.
async fn until_reason(root: &Path, name: &str, reasons: &[&str], limit: Duration) -> (String, String, String) {
    let deadline = Instant::now() + limit;
    loop {
        let seen = ready(root, "Adapter", name);
        if reasons.contains(&seen.1.as_str()) {
            return seen;
        }
        assert!(Instant::now() < deadline, "Adapter/{name} never reached {reasons:?}: {seen:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_serves_another_manifest_under_a_digest_is_refused_and_nothing_runs() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let registry = Registry::start();
    let run = std::process::id();
    let asked = registry.push_unique("rt-pull-test", &format!("asked-{run}"), "hostile-asked", 64 << 10, None);
    let other = registry.push_unique("rt-pull-test", &format!("other-{run}"), "hostile-other", 64 << 10, None);
    // The registry's disk now holds the other image's manifest under the digest asked for.
    std::fs::copy(registry.blob(&other.digest), registry.blob(&asked.digest)).expect("edit the manifest");
    let reference = asked.by_digest(&registry.host());
    let _pulled = PulledImages(vec![reference.clone(), other.by_digest(&registry.host())]);

    let project = project_on(&reference, "");
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &[], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());
    let (status, reason, message) = until_reason(
        root,
        "generic",
        &["ImagePullBackOff", "ImageDigestMismatch", "ImageResolved"],
        Duration::from_secs(60),
    )
    .await;
    // The engine verifies a manifest against the digest it pulls by: it refuses before our check.
    assert_eq!((status.as_str(), reason.as_str()), ("False", "ImagePullBackOff"), "{message}");
    assert!(message.contains("manifest verification failed"), "{message}");
    assert!(events(root, "Adapter/generic").iter().any(|(reason, _)| reason == "ImagePullFailed"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(session_phases(root, "pulled").is_empty(), "nothing runs");
    assert_eq!((image_id(&reference), image_id(&other.by_digest(&registry.host()))), (None, None));
    drop(daemon);
    nothing_left(&engine, root).await;
}

// === an engine that lies ===

/// A Unix socket in front of the real engine that passes everything through both ways, but
/// rewrites every request line naming digest `asked` to name `given` instead: asked to pull or
/// inspect one image, it pulls and shows another, as a compromised or confused engine would.
struct LyingEngine {
    socket: PathBuf,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl LyingEngine {
    fn start(upstream: PathBuf, asked: &str, given: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("engine.sock");
        let listener = UnixListener::bind(&socket).expect("bind the lying engine");
        let (asked, given) = (hex(asked), hex(given));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, upstream.clone(), asked.clone(), given.clone()));
            }
        });
        Self { socket, task, _dir: dir }
    }

    fn docker_host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }
}

impl Drop for LyingEngine {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn hex(digest: &str) -> String {
    digest.strip_prefix("sha256:").expect("a sha256 digest").to_owned()
}

async fn relay(client: UnixStream, upstream: PathBuf, asked: String, given: String) {
    let Ok(server) = UnixStream::connect(&upstream).await else { return };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let answers = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    let _ = requests(&mut client_read, &mut server_write, &asked, &given).await;
    let _ = server_write.shutdown().await;
    let _ = answers.await;
}

/// Passes requests on one by one, rewriting each request line; after a request that upgrades
/// the connection or streams a chunked body, passes the rest through as it is.
async fn requests(from: &mut OwnedReadHalf, to: &mut OwnedWriteHalf, asked: &str, given: &str) -> std::io::Result<()> {
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let end = loop {
            if let Some(at) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let n = from.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            pending.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&pending[..end]).into_owned();
        pending.drain(..end);
        let (line, rest) = head.split_once("\r\n").unwrap_or((&head, ""));
        to.write_all(format!("{}\r\n{rest}", line.replace(asked, given)).as_bytes()).await?;
        let headers = rest.to_ascii_lowercase();
        let header = |name: &str| headers.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()));
        if header("upgrade:").is_some() || header("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
            to.write_all(&pending).await?;
            tokio::io::copy(from, to).await?;
            return Ok(());
        }
        let mut left: usize = header("content-length:").and_then(|v| v.parse().ok()).unwrap_or(0);
        while left > 0 {
            if pending.is_empty() {
                let n = from.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(());
                }
                pending.extend_from_slice(&chunk[..n]);
            }
            let take = left.min(pending.len());
            to.write_all(&pending[..take]).await?;
            pending.drain(..take);
            left -= take;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_holds_a_digest_as_another_image_is_not_believed() {
    let Some(engine) = engine_or_skip().await else { return };
    let Some(upstream) = engine.endpoint().strip_prefix("unix://").map(PathBuf::from) else {
        eprintln!(
            "skipping: the lying engine stands in front of a Unix socket, and the engine is at {}",
            engine.endpoint()
        );
        return;
    };
    ensure_test_images();
    let registry = Registry::start();
    let run = std::process::id();
    let asked = registry.push_unique("rt-pull-test", &format!("named-{run}"), "hostile-named", 64 << 10, None);
    let given = registry.push_unique("rt-pull-test", &format!("given-{run}"), "hostile-given", 64 << 10, None);
    let reference = asked.by_digest(&registry.host());
    let swapped = given.by_digest(&registry.host());
    let _pulled = PulledImages(vec![reference.clone(), swapped.clone()]);
    let liar = LyingEngine::start(upstream, &asked.digest, &given.digest);

    let project = project_on(&reference, "");
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let docker_host = liar.docker_host();
    let daemon = start_daemon_with_env(root, &[], executions.path(), &[("DOCKER_HOST", docker_host.as_str())]);
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    // The engine pulled the other image and calls it by the digest asked for; believed, the
    // Adapter would be Ready on it and the Assignment would run in it.
    let (status, reason, message) =
        until_reason(root, "generic", &["ImageDigestMismatch", "ImageResolved"], Duration::from_secs(60)).await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ImageDigestMismatch"),
        "the engine's image was believed: {message}"
    );
    assert!(message.contains(&given.image_id) && message.contains(&swapped), "{message}");
    assert!(
        message.contains("do not include the digest asked for") && message.contains("the name was removed"),
        "{message}"
    );
    // Removed (this pull created it): nothing of it is left in the engine.
    assert_eq!(image_id(&swapped), None, "the image the pull brought is removed");
    let failed = events(root, "Adapter/generic");
    assert!(
        failed.iter().any(|(reason, m)| reason == "ImagePullFailed" && m.contains("is not what its digest names")),
        "{failed:?}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(session_phases(root, "pulled").is_empty(), "nothing runs in it");
    assert_ne!(ready(root, "Adapter", "generic").0, "True");

    drop(daemon);
    drop(liar);
    nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_registry_is_abandoned_at_the_timeout_and_holds_no_reconcile_up() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    // It accepts connections and never answers.
    let stuck = Relay::start("127.0.0.1:9".parse().expect("address"), Pace::Stuck);
    let reference = format!("{}/rt-pull-test@sha256:{}", stuck.host(), "5".repeat(64));
    let mock = format!(
        "---\n{}\nkind: Assignment\nmetadata: {{name: quick}}\nspec:\n  adapter: mock\n  task: {{id: M, prompt: hello}}\n  readablePaths: [README.md]\n",
        crate::support::API
    );
    let project = project_on(&reference, &mock);
    let root = project.path();
    let executions = tempfile::tempdir().expect("tempdir");
    let daemon = start_daemon(root, &["--image-pull-timeout", "20s"], executions.path());
    let _show_log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_path_buf());

    // Another Assignment runs to its end while the pull hangs.
    wait_until_within("the mock Assignment to finish", Duration::from_secs(60), || {
        session_phases(root, "quick").first().is_some_and(|phase| phase == "Succeeded")
    })
    .await;
    let (status, reason, message) = ready(root, "Adapter", "generic");
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "ImagePulling"), "still stuck: {message}");
    let (status, reason, message) = until_reason(root, "generic", &["ImagePullBackOff"], Duration::from_secs(60)).await;
    assert_eq!(status, "False");
    assert!(
        message.contains("the pull did not end within 20 s") && message.contains("abandoned"),
        "{reason}: {message}"
    );
    assert!(session_phases(root, "pulled").is_empty());
    drop(daemon);
    nothing_left(&engine, root).await;
}

/// Every file under `dir`, recursively, as bytes.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => folders.push(path),
                Ok(kind) if kind.is_file() => {
                    if let Ok(bytes) = std::fs::read(&path) {
                        found.push((path, bytes));
                    }
                }
                _ => {}
            }
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_credentials_go_to_the_engine_and_nowhere_else() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let registry = Registry::start_with_login();
    // The Docker config the engine's client uses: `auths`, base64 of user:password.
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    let docker_config = tempfile::tempdir().expect("tempdir");
    let config = format!(r#"{{"auths": {{"{}": {{"auth": "{encoded}"}}}}}}"#, registry.host());
    std::fs::write(docker_config.path().join("config.json"), config).expect("config");
    let pushed = registry.push_unique(
        "rt-pull-test",
        &format!("login-{}", std::process::id()),
        "hostile-login",
        64 << 10,
        Some(docker_config.path()),
    );
    let reference = pushed.by_digest(&registry.host());
    let _pulled = PulledImages(vec![reference.clone()]);
    let project = project_on(&reference, "");
    let root = project.path();

    // Without them, the registry refuses, and the condition says so.
    let no_config = tempfile::tempdir().expect("tempdir");
    let first = tempfile::tempdir().expect("tempdir");
    let no_config_dir = no_config.path().to_str().expect("utf-8");
    let daemon = start_daemon_with_env(root, &[], first.path(), &[("DOCKER_CONFIG", no_config_dir)]);
    let (_, _, message) = until_reason(root, "generic", &["ImagePullBackOff"], Duration::from_secs(60)).await;
    assert!(message.contains("no basic auth credentials"), "{message}");
    drop(daemon);

    // With them, it is pulled.
    let second = tempfile::tempdir().expect("tempdir");
    let config_dir = docker_config.path().to_str().expect("utf-8");
    // The chain the first daemon began goes on under its key.
    let key = first.path().join("audit.key");
    let env = [("DOCKER_CONFIG", config_dir), ("ROUNDTABLE_AUDIT_KEY", key.to_str().expect("utf-8"))];
    let daemon = start_daemon_with_env(root, &[], second.path(), &env);
    let _show_log = ShowLogOnPanic(second.path().join("daemon.log"), root.to_path_buf());
    let (status, _, message) = until_reason(root, "generic", &["ImageResolved"], Duration::from_secs(60)).await;
    assert_eq!(status, "True", "{message}");
    assert_eq!(image_id(&reference).as_deref(), Some(pushed.image_id.as_str()));

    // Neither the password nor its encoding is anywhere Roundtable writes or shows.
    let shown = [
        roundtable(root, &["status", "--format", "json"]),
        roundtable(root, &["describe", "Adapter/generic", "--format", "json"]),
        roundtable(root, &["events", "--format", "json"]),
    ];
    drop(daemon);
    for output in &shown {
        let text = format!("{}{}", stdout(output), stderr(output));
        assert!(!text.contains(PASSWORD) && !text.contains(&encoded), "{text}");
    }
    let mut searched = 0;
    for dir in [root, first.path(), second.path()] {
        for (path, bytes) in files_under(dir) {
            searched += 1;
            assert!(
                !contains(&bytes, PASSWORD) && !contains(&bytes, &encoded),
                "{} holds the credential",
                path.display()
            );
        }
    }
    assert!(searched > 3, "the store, the logs and the audit key were searched");
    nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_with_credentials_in_it_is_refused_and_never_repeated() {
    let Some(engine) = engine_or_skip().await else { return };
    let registry = Registry::start();
    let secret = "rt-pull-in-reference-3d9a";
    let reference = format!("{USER}:{secret}@{}/rt-pull-test@sha256:{}", registry.host(), "7".repeat(64));
    let project = project_on(&reference, "");
    let root = project.path();

    let validated = roundtable(root, &["validate", "--format", "json"]);
    assert_eq!(validated.status.code(), Some(1));
    let said = format!("{}{}", stdout(&validated), stderr(&validated));
    assert!(said.contains("credentials never go in a reference"), "{said}");
    assert!(!said.contains(secret), "{said}");

    let executions = tempfile::tempdir().expect("tempdir");
    let mark = registry.log().len();
    let daemon = start_daemon(root, &[], executions.path());
    wait_until_within("the refusal in status", Duration::from_secs(30), || {
        json(&roundtable(root, &["status", "--format", "json"]))
            .to_string()
            .contains("credentials never go in a reference")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = json(&roundtable(root, &["status", "--format", "json"])).to_string();
    drop(daemon);
    assert!(!status.contains(secret), "{status}");
    let log = std::fs::read_to_string(executions.path().join("daemon.log")).unwrap_or_default();
    assert!(!log.contains(secret), "{log}");
    let asked = registry.requests_since(mark);
    assert!(asked.is_empty(), "nothing is asked of the registry: {asked:#?}");
    nothing_left(&engine, root).await;
}
