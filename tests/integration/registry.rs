//! A private image registry for the pull tests: Debian's `docker-registry` (the CNCF
//! distribution registry) run as a child process on 127.0.0.1 and a free port, with its config,
//! storage and log in a folder of its own, removed with it; images of the tests' own pushed to
//! it; and a loopback relay in front of it that can slow its answers down or never give one.
//! Everything here is on loopback (the engine allows `127.0.0.0/8` as an insecure registry by
//! default): no test names another host.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::docker;

/// Where Debian installs the registry.
const BINARY: &str = "/usr/bin/docker-registry";

/// A user and password the registry asks for when started with [`Registry::start_with_login`];
/// `PASSWORD_BCRYPT` is its htpasswd line's hash (bcrypt, cost 4: a test's, not a real one).
pub const USER: &str = "rt-pull-user";
pub const PASSWORD: &str = "rt-pull-secret-7c41e9";
const PASSWORD_BCRYPT: &str = "$2b$04$aJbdcf45tgM5PdCW54dRVe3sBpGcMEBPDDO/9lW2RegQMy37p4tOy";

/// A free port on 127.0.0.1 (free when asked; the registry binds it moments later).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("address").port()
}

/// A running registry, stopped and its folder removed when dropped.
pub struct Registry {
    child: Child,
    pub address: SocketAddr,
    dir: tempfile::TempDir,
}

impl Registry {
    /// A registry anyone may pull from and push to.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// A registry that asks for [`USER`] and [`PASSWORD`] (HTTP basic authentication).
    pub fn start_with_login() -> Self {
        Self::start_with(true)
    }

    fn start_with(login: bool) -> Self {
        // The tests that need it must not skip without it: CI installs it (`.ci/run`).
        assert!(
            Path::new(BINARY).is_file(),
            "{BINARY} is missing: install Debian's docker-registry (`apt-get install docker-registry`; .ci/run does)"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("address");
        assert!(address.ip().is_loopback(), "the tests' registry listens on loopback only");
        let storage = dir.path().join("storage");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}\n",
            storage.display()
        );
        if login {
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{USER}:{PASSWORD_BCRYPT}\n")).expect("htpasswd");
            config.push_str(&format!("auth:\n  htpasswd:\n    realm: rt-pull\n    path: {}\n", htpasswd.display()));
        }
        let config_file = dir.path().join("config.yml");
        std::fs::write(&config_file, config).expect("config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log");
        let child = Command::new(BINARY)
            .arg("serve")
            .arg(&config_file)
            // The registry reads REGISTRY_* variables as config overrides: none from the test's.
            .env_clear()
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let registry = Self { child, address, dir };
        registry.wait_until_it_answers();
        registry
    }

    fn wait_until_it_answers(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut stream) = TcpStream::connect(self.address) {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let request = format!("GET /v2/ HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.address);
                let mut answer = String::new();
                if stream.write_all(request.as_bytes()).is_ok() && stream.read_to_string(&mut answer).is_ok() {
                    // 200, or 401 when it asks for a login: either way, it serves.
                    if answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.1 401") {
                        return;
                    }
                }
            }
            assert!(Instant::now() < deadline, "the registry did not answer: {}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `127.0.0.1:PORT`, as references name it.
    pub fn host(&self) -> String {
        self.address.to_string()
    }

    /// Its access and error log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The requests it logged after `mark` (an earlier `log().len()`): what the test's own
    /// readiness checks and pushes asked before is not counted.
    pub fn requests_since(&self, mark: usize) -> Vec<String> {
        let log = self.log();
        log.get(mark..)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"GET ") || l.contains("\"HEAD "))
            .map(str::to_owned)
            .collect()
    }

    /// The file a blob (a manifest, a config, a layer) of digest `sha256:HEX` is kept in.
    pub fn blob(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir.path().join("storage/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }

    /// Pushes an image no other has (the test image, a `payload_bytes` file of random bytes and a
    /// label saying `label`) as `host/repository:tag` with the Docker CLI (`docker_config`: the
    /// folder of the CLI's config, for a registry that asks for a login), and removes it from the
    /// engine again, so that only the registry has it.
    pub fn push_unique(
        &self,
        repository: &str,
        tag: &str,
        label: &str,
        payload_bytes: usize,
        docker_config: Option<&Path>,
    ) -> Pushed {
        let tagged = format!("{}/{repository}:{tag}", self.host());
        let container = docker(&["create", "roundtable-test/agent:latest", "true"]);
        let payload = self.dir.path().join(format!("payload-{tag}"));
        let mut random = vec![0u8; payload_bytes];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut urandom| urandom.read_exact(&mut random))
            .expect("random bytes");
        std::fs::write(&payload, random).expect("payload");
        docker(&["cp", payload.to_str().expect("utf-8"), &format!("{container}:/rt-pull-payload")]);
        let change = format!("LABEL dev.roundtable.test={label}");
        docker(&["commit", "--change", &change, &container, &tagged]);
        docker(&["rm", &container]);
        let mut push = Command::new("docker");
        if let Some(config) = docker_config {
            push.arg("--config").arg(config);
        }
        let pushed = push.args(["push", &tagged]).output().expect("docker push");
        assert!(pushed.status.success(), "docker push {tagged}: {}", String::from_utf8_lossy(&pushed.stderr));
        let image_id = docker(&["image", "inspect", "--format", "{{.Id}}", &tagged]);
        let digests = docker(&["image", "inspect", "--format", "{{range .RepoDigests}}{{println .}}{{end}}", &tagged]);
        let prefix = format!("{}/{repository}@", self.host());
        let reference = digests
            .lines()
            .find(|line| line.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no repo digest of {prefix} in {digests}"))
            .to_owned();
        let digest = reference[prefix.len()..].to_owned();
        // Untags both names; nothing else names the image, so it goes.
        docker(&["rmi", &tagged]);
        Pushed { repository: repository.to_owned(), tag: tag.to_owned(), digest, image_id }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // Only this child, by its own handle; its folder goes with the tempdir.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An image pushed to a test registry and no longer in the engine.
#[derive(Debug, Clone)]
pub struct Pushed {
    pub repository: String,
    pub tag: String,
    /// Its manifest's digest, `sha256:…`.
    pub digest: String,
    /// Its image ID when it was pushed (what a pull of it must give back).
    pub image_id: String,
}

impl Pushed {
    /// `host/repository@digest`, for the registry (or relay) at `host`.
    pub fn by_digest(&self, host: &str) -> String {
        assert!(host.starts_with("127."), "test references name loopback registries only: {host}");
        format!("{host}/{}@{}", self.repository, self.digest)
    }

    /// `host/repository:tag`.
    pub fn by_tag(&self, host: &str) -> String {
        assert!(host.starts_with("127."), "test references name loopback registries only: {host}");
        format!("{host}/{}:{}", self.repository, self.tag)
    }
}

/// Removes `references` from the engine when dropped (what a test's daemon pulled), whether the
/// test passed or not; a name that is not there is fine.
pub struct PulledImages(pub Vec<String>);

impl Drop for PulledImages {
    fn drop(&mut self) {
        for reference in &self.0 {
            let _ = Command::new("docker").args(["rmi", reference]).output();
        }
    }
}

/// How a [`Relay`] passes the registry's answers on.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// At most this many bytes a second.
    Throttled(u64),
    /// Accepts and never answers, nor forwards anything: a stuck registry.
    Stuck,
}

/// A TCP relay on 127.0.0.1 and a free port in front of a registry, on threads of its own that
/// end with the test process (each connection's end closes its threads).
pub struct Relay {
    pub address: SocketAddr,
}

impl Relay {
    pub fn start(upstream: SocketAddr, pace: Pace) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let address = listener.local_addr().expect("address");
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for client in listener.incoming().map_while(Result::ok) {
                match pace {
                    Pace::Stuck => held.push(client),
                    Pace::Throttled(rate) => {
                        let Ok(server) = TcpStream::connect(upstream) else { continue };
                        let (client_reader, server_writer) = (client.try_clone(), server.try_clone());
                        let (Ok(client_reader), Ok(server_writer)) = (client_reader, server_writer) else { continue };
                        std::thread::spawn(move || pipe(client_reader, server_writer, None));
                        std::thread::spawn(move || pipe(server, client, Some(rate)));
                    }
                }
            }
        });
        Self { address }
    }

    pub fn host(&self) -> String {
        self.address.to_string()
    }
}

/// Copies `from` to `to` (at most `rate` bytes a second), then shuts both down.
fn pipe(mut from: TcpStream, mut to: TcpStream, rate: Option<u64>) {
    let mut buffer = vec![0u8; 16 * 1024];
    let started = Instant::now();
    let mut sent: u64 = 0;
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
        sent += n as u64;
        if let Some(rate) = rate {
            let due = Duration::from_secs_f64(sent as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}
