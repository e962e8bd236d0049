//! The container engine connection: Docker's socket or `DOCKER_HOST` (Podman through its
//! Docker-compatible socket), the API version negotiated down to what the engine speaks, and a
//! report of the hardening features the sandbox relies on.

use std::path::Path;

use bollard::Docker;
use bollard::models::{SystemInfo, SystemVersion};
use roundtable_session_runtime::{EngineRuntimes, RuntimeError};
use roundtable_specs::output::{DoctorReport, FeatureBasis, FeatureCheck};

use crate::errors::engine_error;

/// What can go wrong reaching the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "no container engine socket found (looked at DOCKER_HOST, {docker} and {podman}); Roundtable never runs agents on the host"
    )]
    NoSocket { docker: String, podman: String },
    #[error("cannot connect to the container engine at {endpoint}")]
    Connect {
        endpoint: String,
        #[source]
        source: bollard::errors::Error,
    },
    /// A TCP endpoint without TLS would hand the engine, root on its host, to anyone on the path.
    #[error(
        "DOCKER_HOST {endpoint} is TCP without TLS: set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH to a folder with ca.pem, cert.pem and key.pem (Roundtable never speaks to an engine in clear text)"
    )]
    Plaintext { endpoint: String },
    #[error(
        "DOCKER_TLS_VERIFY is set but {dir} has no {missing} (DOCKER_CERT_PATH names the folder with ca.pem, cert.pem and key.pem)"
    )]
    Certificates { dir: String, missing: String },
    #[error("the container engine at {endpoint} did not answer")]
    Unreachable {
        endpoint: String,
        #[source]
        source: bollard::errors::Error,
    },
}

/// A connected engine with a negotiated API version.
#[derive(Debug, Clone)]
pub struct Engine {
    docker: Docker,
    endpoint: String,
}

const DOCKER_SOCKET: &str = "/var/run/docker.sock";
const REQUEST_TIMEOUT_SECS: u64 = 120;

fn podman_socket() -> String {
    match std::env::var("XDG_RUNTIME_DIR") {
        Ok(dir) if !dir.is_empty() => format!("{dir}/podman/podman.sock"),
        _ => "/run/podman/podman.sock".to_owned(),
    }
}

/// Which endpoint [`Engine::connect`] will use: `DOCKER_HOST`, else Docker's socket, else Podman's.
pub fn endpoint() -> Result<String, EngineError> {
    if let Ok(host) = std::env::var("DOCKER_HOST")
        && !host.is_empty()
    {
        return Ok(host);
    }
    let podman = podman_socket();
    for candidate in [DOCKER_SOCKET, podman.as_str()] {
        if Path::new(candidate).exists() {
            return Ok(format!("unix://{candidate}"));
        }
    }
    Err(EngineError::NoSocket { docker: DOCKER_SOCKET.into(), podman })
}

/// Whether `DOCKER_TLS_VERIFY` asks for TLS: set and not empty, as the Docker CLI reads it.
fn tls_verify() -> bool {
    std::env::var("DOCKER_TLS_VERIFY").is_ok_and(|value| !value.is_empty())
}

/// The client certificates' folder: `DOCKER_CERT_PATH`, else `~/.docker`, as the Docker CLI has it.
fn cert_dir() -> std::path::PathBuf {
    match std::env::var_os("DOCKER_CERT_PATH").filter(|dir| !dir.is_empty()) {
        Some(dir) => dir.into(),
        None => std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap_or_default().join(".docker"),
    }
}

/// A client for `endpoint`: a Unix socket as it is; TCP only with TLS, verified against the CA in
/// the certificates' folder and presenting the client certificate there (mutual TLS, what a
/// `dockerd --tlsverify` asks for).
fn open(endpoint: &str) -> Result<Docker, EngineError> {
    let connect_error = |source| EngineError::Connect { endpoint: endpoint.to_owned(), source };
    let tcp = ["tcp://", "http://", "https://"].iter().any(|scheme| endpoint.starts_with(scheme));
    if !tcp {
        return Docker::connect_with_host(endpoint).map_err(connect_error);
    }
    if !tls_verify() {
        return Err(EngineError::Plaintext { endpoint: endpoint.to_owned() });
    }
    let dir = cert_dir();
    let [ca, cert, key] = ["ca.pem", "cert.pem", "key.pem"].map(|name| dir.join(name));
    let missing: Vec<String> = [&ca, &cert, &key]
        .iter()
        .filter(|path| !path.is_file())
        .filter_map(|path| path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    if !missing.is_empty() {
        return Err(EngineError::Certificates { dir: dir.display().to_string(), missing: missing.join(", ") });
    }
    Docker::connect_with_ssl(endpoint, &key, &cert, &ca, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
        .map_err(connect_error)
}

impl Engine {
    /// Connects and negotiates the API version (the engine may be far older than the client).
    pub async fn connect() -> Result<Self, EngineError> {
        Self::connect_to(endpoint()?).await
    }

    /// Connects to `endpoint` (like `unix:///run/docker.sock`) whatever `DOCKER_HOST` says: for
    /// tools and tests that talk to more than one engine.
    pub async fn connect_to(endpoint: String) -> Result<Self, EngineError> {
        let docker = open(&endpoint)?.with_timeout(std::time::Duration::from_secs(REQUEST_TIMEOUT_SECS));
        let docker = docker
            .negotiate_version()
            .await
            .map_err(|source| EngineError::Unreachable { endpoint: endpoint.clone(), source })?;
        Ok(Self { docker, endpoint })
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The negotiated API version, like `1.41`.
    pub fn api_version(&self) -> String {
        let version = self.docker.client_version();
        format!("{}.{}", version.major_version, version.minor_version)
    }

    /// Version, cgroup version, storage driver and each hardening feature.
    pub async fn report(&self) -> DoctorReport {
        let mut report = DoctorReport {
            endpoint: self.endpoint.clone(),
            reachable: true,
            error: None,
            engine_version: None,
            api_version: Some(self.api_version()),
            cgroup_version: None,
            storage_driver: None,
            features: Vec::new(),
        };
        match self.docker.version().await {
            Ok(version) => report.engine_version = version.version,
            Err(error) => report.error = Some(format!("version: {error}")),
        }
        match self.docker.info().await {
            Ok(info) => {
                report.cgroup_version = info.cgroup_version.as_ref().map(ToString::to_string).filter(|v| !v.is_empty());
                report.storage_driver = info.driver.clone();
                report.features = hardening_features(&info);
            }
            Err(error) => {
                report.reachable = false;
                report.error = Some(format!("info: {error}"));
            }
        }
        report
    }
}

impl Engine {
    /// The OCI runtimes the engine has registered, its default and the host's kernel release,
    /// and whether it honours a container's choice among them.
    pub async fn runtimes(&self) -> Result<EngineRuntimes, RuntimeError> {
        // Two questions that do not depend on each other, asked at once.
        let (info, version) = futures::join!(self.docker.info(), self.docker.version());
        let info = info.map_err(engine_error("ask the engine its runtimes"))?;
        let version = version.map_err(engine_error("ask the engine its version"))?;
        let mut runtimes = runtimes_of(&info);
        runtimes.choice_ignored = podman_ignoring_the_runtime(&version);
        Ok(runtimes)
    }
}

/// Why a Podman engine runs its default runtime whatever a container names: its
/// Docker-compatible API dropped `HostConfig.Runtime` before 6.0 (containers/podman#28429), so a
/// runtime class other than the default would silently run on the default's kernel. `None` for
/// Docker and later Podman.
fn podman_ignoring_the_runtime(version: &SystemVersion) -> Option<String> {
    let podman = version.components.iter().flatten().find(|c| c.name == "Podman Engine")?;
    let major = podman.version.split('.').next().and_then(|m| m.parse::<u32>().ok()).unwrap_or(0);
    (major < 6).then(|| {
        format!(
            "Podman {}'s Docker-compatible API ignores HostConfig.Runtime (containers/podman#28429)",
            podman.version
        )
    })
}

/// What `info` says of the engine's runtimes. An engine that names no default runs `runc`.
pub fn runtimes_of(info: &SystemInfo) -> EngineRuntimes {
    let registered = info
        .runtimes
        .iter()
        .flatten()
        .map(|(name, runtime)| (name.clone(), runtime.runtime_args.clone().unwrap_or_default()))
        .collect();
    EngineRuntimes {
        default: info.default_runtime.clone().filter(|d| !d.is_empty()).unwrap_or_else(|| "runc".into()),
        registered,
        host_kernel: info.kernel_version.clone().filter(|k| !k.is_empty()),
        ..EngineRuntimes::default()
    }
}

/// A report for when the engine cannot be reached at all.
pub fn unreachable_report(error: &EngineError) -> DoctorReport {
    let message = roundtable_telemetry::error_chain(error);
    DoctorReport {
        endpoint: endpoint().unwrap_or_else(|_| "none".into()),
        reachable: false,
        error: Some(message),
        engine_version: None,
        api_version: None,
        cgroup_version: None,
        storage_driver: None,
        features: Vec::new(),
    }
}

fn feature(name: &str, available: bool, detail: impl Into<String>) -> FeatureCheck {
    FeatureCheck { name: name.into(), available, detail: detail.into(), basis: FeatureBasis::EngineReported }
}

/// The features the hardened profile needs, as the engine reports them.
pub fn hardening_features(info: &SystemInfo) -> Vec<FeatureCheck> {
    let security = info.security_options.clone().unwrap_or_default();
    let has_security =
        |name: &str| security.iter().any(|option| option == name || option.starts_with(&format!("name={name}")));
    let flag = |value: Option<bool>| value.unwrap_or(false);
    let volume_plugins = info.plugins.as_ref().and_then(|p| p.volume.clone()).unwrap_or_default();
    let cgroup = info.cgroup_version.as_ref().map(ToString::to_string).unwrap_or_default();
    vec![
        feature("seccomp", has_security("seccomp"), "default seccomp profile applied to every container"),
        feature("memoryLimit", flag(info.memory_limit), "memory cgroup limits"),
        feature("swapLimit", flag(info.swap_limit), "memory+swap limits, so no swap beyond memory"),
        feature("pidsLimit", flag(info.pids_limit), "pids cgroup limit (fork bombs)"),
        feature("cpuQuota", flag(info.cpu_cfs_quota), "CPU quota (NanoCpus)"),
        feature(
            "tmpfsVolumes",
            volume_plugins.iter().any(|plugin| plugin == "local"),
            "local volume driver with type=tmpfs for workspace and /tmp",
        ),
        feature(
            "pause",
            !cgroup.is_empty(),
            format!(
                "cgroup freezer for pausing before export (cgroup v{})",
                if cgroup.is_empty() { "?" } else { &cgroup }
            ),
        ),
        feature("rootless", has_security("rootless"), "engine runs rootless (informational)"),
        feature("userns", has_security("userns"), "user namespace remapping (informational)"),
    ]
}

/// A container or volume carrying Roundtable's ownership labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    /// A running container.
    pub running: bool,
    pub kind: roundtable_session_runtime::ResourceKind,
    pub name: String,
    pub labels: std::collections::HashMap<String, String>,
}

impl Engine {
    /// Every container and volume labelled as managed by Roundtable for `project`.
    pub async fn labelled(&self, project: &str) -> Result<Vec<Labelled>, bollard::errors::Error> {
        use bollard::query_parameters::{ListContainersOptionsBuilder, ListVolumesOptionsBuilder};
        use roundtable_session_runtime::labels::{MANAGED_BY, PROJECT};
        let managed = format!("{MANAGED_BY}=roundtable");
        let owned = format!("{PROJECT}={project}");
        let filters = std::collections::HashMap::from([("label", vec![managed.as_str(), owned.as_str()])]);
        let mut found = Vec::new();
        let containers = self
            .docker
            .list_containers(Some(ListContainersOptionsBuilder::default().all(true).filters(&filters).build()))
            .await?;
        for container in containers {
            let name = container.names.and_then(|n| n.into_iter().next()).unwrap_or_default();
            found.push(Labelled {
                running: container.state == Some(bollard::models::ContainerSummaryStateEnum::RUNNING),
                kind: roundtable_session_runtime::ResourceKind::Container,
                name: name.trim_start_matches('/').to_owned(),
                labels: container.labels.unwrap_or_default(),
            });
        }
        let volumes =
            self.docker.list_volumes(Some(ListVolumesOptionsBuilder::default().filters(&filters).build())).await?;
        for volume in volumes.volumes.unwrap_or_default() {
            found.push(Labelled {
                running: false,
                kind: roundtable_session_runtime::ResourceKind::Volume,
                name: volume.name,
                labels: volume.labels,
            });
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use bollard::models::SystemVersionComponents;

    use super::*;

    fn version(component: &str, number: &str) -> SystemVersion {
        SystemVersion {
            components: Some(vec![SystemVersionComponents {
                name: component.into(),
                version: number.into(),
                details: None,
            }]),
            ..SystemVersion::default()
        }
    }

    #[test]
    fn podman_before_6_ignores_the_runtime_a_container_names_and_docker_does_not() {
        let said = podman_ignoring_the_runtime(&version("Podman Engine", "4.3.1")).expect("ignored");
        assert!(said.starts_with("Podman 4.3.1's Docker-compatible API ignores HostConfig.Runtime"), "{said}");
        assert_eq!(podman_ignoring_the_runtime(&version("Podman Engine", "6.0.0")), None);
        assert_eq!(podman_ignoring_the_runtime(&version("Engine", "20.10.24+dfsg1")), None);
        assert_eq!(podman_ignoring_the_runtime(&SystemVersion::default()), None);
    }
}
