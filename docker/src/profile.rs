//! The hardened container profile: mounts, user, capabilities, seccomp, limits and no network.
//! Nothing here can be loosened by a switch; every limit comes from the plan's [`Resources`], as
//! it carries them (memory, CPU and PIDs to the container, sizes to its tmpfs volumes).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::models::{
    ContainerCreateBody, HostConfig, Mount, MountType, MountVolumeOptions, MountVolumeOptionsDriverConfig,
    ResourcesUlimits, VolumeCreateRequest,
};

use roundtable_session_runtime::Resources;
pub use roundtable_specs::layout as paths;
use roundtable_specs::layout::AGENT_UID;
use roundtable_specs::names::RuntimeClass;
use roundtable_specs::runtime_class::SandboxKernel;

/// The agent's open files limit (soft and hard).
pub const OPEN_FILES: i64 = 16_384;

/// The agent's resource limits that are not cgroups. Each is set rather than left to the engine:
/// Podman asks for 1048576 open files and processes, which fails to start the container at all
/// where the engine may not raise its own hard limits. Open files are bounded ([`OPEN_FILES`]).
/// `nproc` ([`USER_PROCESSES`]) counts a user's processes across the whole host, where every
/// session's agent is UID 1000, so it is no per-container bound (the pids cgroup is): it only has
/// to be one any engine grants and above what concurrent sessions hold together.
fn ulimits() -> Vec<ResourcesUlimits> {
    let limit =
        |name: &str, value: i64| ResourcesUlimits { name: Some(name.into()), soft: Some(value), hard: Some(value) };
    vec![limit("nofile", OPEN_FILES), limit("nproc", USER_PROCESSES)]
}

/// UID 1000's processes across the host, as seen by one agent (`RLIMIT_NPROC`).
pub const USER_PROCESSES: i64 = 8_192;

/// Who owns the root of a tmpfs volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmpfsRoot {
    /// The agent's own folder (the workspace): UID 1000, 0755.
    Agent,
    /// `/tmp`: root's, 0755. What Roundtable writes there (the CLIs' manifests) sits under
    /// folders only root can change, which CLIs check: the Gemini CLI ignores a system settings
    /// file whose parent folders are not root's or are writable by others. The agent writes in
    /// its home and its `TMPDIR` below it.
    Root,
}

/// The tmpfs `nr_blocks` that hold `size_bytes`: tmpfs counts its size in pages. The size is
/// given in blocks, not as `size=`, because Podman (4.3) refuses a volume whose options name a
/// `size` on any file system without project quotas, tmpfs included, while both engines pass
/// `nr_blocks` to the mount as it is.
pub fn tmpfs_blocks(size_bytes: u64) -> u64 {
    let page = u64::try_from(rustix::param::page_size()).unwrap_or(4096).max(1);
    size_bytes.div_ceil(page).max(1)
}

/// A named tmpfs volume: the archive API can copy into and out of it (it cannot see `--tmpfs`
/// mounts), and its data lives only while a running container mounts it.
pub fn tmpfs_volume(
    name: &str,
    size_bytes: u64,
    root: TmpfsRoot,
    labels: HashMap<String, String>,
) -> VolumeCreateRequest {
    let owner = match root {
        TmpfsRoot::Agent => format!("uid={AGENT_UID},gid={AGENT_UID},mode=0755"),
        TmpfsRoot::Root => "uid=0,gid=0,mode=0755".to_owned(),
    };
    VolumeCreateRequest {
        name: Some(name.to_owned()),
        driver: Some("local".into()),
        driver_opts: Some(HashMap::from([
            ("type".to_owned(), "tmpfs".to_owned()),
            ("device".to_owned(), "tmpfs".to_owned()),
            ("o".to_owned(), format!("nr_blocks={},{owner},nosuid,nodev", tmpfs_blocks(size_bytes))),
        ])),
        labels: Some(labels),
        ..VolumeCreateRequest::default()
    }
}

/// A disk-backed named volume for a provider's persistent home (the local driver's default:
/// it keeps its data after the container is gone).
pub fn home_volume(name: &str, labels: HashMap<String, String>) -> VolumeCreateRequest {
    VolumeCreateRequest {
        name: Some(name.to_owned()),
        driver: Some("local".into()),
        labels: Some(labels),
        ..VolumeCreateRequest::default()
    }
}

/// Everything that differs between two hardened containers.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    pub image: String,
    pub labels: HashMap<String, String>,
    pub resources: Resources,
    /// Named tmpfs volumes: see [`SandboxSpec::tmpfs_volumes`].
    pub workspace_volume: String,
    pub tmp_volume: String,
    /// The controller's own static binary, mounted read-only as PID 1 and tool.
    pub binary: PathBuf,
    /// The provisioned source, mounted read-only.
    pub source_dir: Option<PathBuf>,
    /// The brief, mounted read-only at `/roundtable/task.json`.
    pub task_file: Option<PathBuf>,
    /// The session's socket directory, mounted at `/run/roundtable`.
    pub socket_dir: Option<PathBuf>,
    /// A disk-backed named volume (the provider's persistent home) and where it is mounted.
    pub home_volume: Option<(String, String)>,
    /// The OCI runtime, by the engine's name for it; `None`: the engine's default.
    pub runtime: Option<RuntimeClass>,
}

fn bind(source: &Path, target: &str, read_only: bool) -> Mount {
    // The Mounts form fails on a missing source instead of creating an empty folder.
    Mount {
        typ: Some(MountType::BIND),
        source: Some(source.display().to_string()),
        target: Some(target.to_owned()),
        read_only: Some(read_only),
        ..Mount::default()
    }
}

/// A mount of the named volume `created` describes. The mount carries the volume's own driver
/// options and labels: should the volume be gone when the container is created (removed by a
/// reaper racing a launch that a killed daemon left in flight), the engine creates it again
/// from the mount, as the same labelled, sized tmpfs, never as an unlabelled disk volume
/// without a size limit.
fn volume(created: &VolumeCreateRequest, target: &str) -> Mount {
    Mount {
        typ: Some(MountType::VOLUME),
        source: created.name.clone(),
        target: Some(target.to_owned()),
        read_only: Some(false),
        volume_options: Some(MountVolumeOptions {
            no_copy: Some(true),
            labels: created.labels.clone(),
            driver_config: Some(MountVolumeOptionsDriverConfig {
                name: created.driver.clone(),
                options: created.driver_opts.clone(),
            }),
            ..MountVolumeOptions::default()
        }),
        ..Mount::default()
    }
}

impl SandboxSpec {
    /// The workspace and `/tmp` volumes, sized by the resources and labelled like the container:
    /// created before the container that mounts them.
    pub fn tmpfs_volumes(&self) -> [VolumeCreateRequest; 2] {
        let Resources { workspace_bytes, tmp_bytes, .. } = self.resources;
        [
            tmpfs_volume(&self.workspace_volume, workspace_bytes, TmpfsRoot::Agent, self.labels.clone()),
            tmpfs_volume(&self.tmp_volume, tmp_bytes, TmpfsRoot::Root, self.labels.clone()),
        ]
    }

    /// The create body: PID 1 is `roundtable sandbox init`; the agent runs later as an exec.
    pub fn container_body(&self) -> ContainerCreateBody {
        let [workspace, tmp] = self.tmpfs_volumes();
        let mut mounts = vec![
            volume(&workspace, paths::WORKSPACE),
            volume(&tmp, paths::TMP),
            bind(&self.binary, paths::BINARY, true),
        ];
        if let Some(source) = &self.source_dir {
            mounts.push(bind(source, paths::SOURCE, true));
        }
        if let Some(task) = &self.task_file {
            mounts.push(bind(task, paths::TASK, true));
        }
        if let Some(sockets) = &self.socket_dir {
            mounts.push(bind(sockets, paths::SOCKETS, false));
        }
        if let Some((name, target)) = &self.home_volume {
            // Its labels are the Assignment's, not this container's; it is created first.
            mounts.push(volume(&home_volume(name, HashMap::new()), target));
        }
        let Resources { memory_bytes, nano_cpus, pids, .. } = self.resources;
        let pids = match &self.runtime {
            Some(class) => SandboxKernel::of(class).engine_pids_limit(pids),
            None => pids,
        };
        let memory = i64::try_from(memory_bytes).unwrap_or(i64::MAX);
        ContainerCreateBody {
            image: Some(self.image.clone()),
            user: Some(format!("{AGENT_UID}:{AGENT_UID}")),
            cmd: Some(vec![paths::BINARY.to_owned(), "sandbox".into(), "init".into()]),
            entrypoint: Some(vec![]),
            env: Some(vec![]),
            working_dir: Some(paths::WORKSPACE.to_owned()),
            labels: Some(self.labels.clone()),
            network_disabled: Some(true),
            host_config: Some(HostConfig {
                mounts: Some(mounts),
                readonly_rootfs: Some(true),
                cap_drop: Some(vec!["ALL".into()]),
                security_opt: Some(vec!["no-new-privileges".into()]),
                network_mode: Some("none".into()),
                pids_limit: Some(i64::from(pids)),
                memory: Some(memory),
                // Equal to memory: no swap.
                memory_swap: Some(memory),
                nano_cpus: Some(i64::try_from(nano_cpus).unwrap_or(i64::MAX)),
                privileged: Some(false),
                init: Some(false),
                ipc_mode: Some("private".into()),
                ulimits: Some(ulimits()),
                runtime: self.runtime.as_ref().map(ToString::to_string),
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SandboxSpec {
        SandboxSpec {
            image: "img".into(),
            labels: HashMap::new(),
            resources: Resources {
                memory_bytes: 2 << 30,
                nano_cpus: 2_000_000_000,
                pids: 256,
                workspace_bytes: 1 << 30,
                tmp_bytes: 1 << 20,
            },
            workspace_volume: "ws".into(),
            runtime: None,
            tmp_volume: "tmp".into(),
            binary: PathBuf::from("/usr/bin/roundtable"),
            source_dir: Some(PathBuf::from("/exec/source")),
            task_file: None,
            socket_dir: None,
            home_volume: None,
        }
    }

    #[test]
    fn the_profile_carries_every_hardening_setting() {
        let body = spec().container_body();
        let host = body.host_config.expect("host config");
        assert_eq!(body.user.as_deref(), Some("1000:1000"));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_owned()]));
        assert_eq!(host.security_opt, Some(vec!["no-new-privileges".to_owned()]));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.memory, host.memory_swap, "no swap beyond memory");
        assert_eq!((host.pids_limit, host.nano_cpus), (Some(256), Some(2_000_000_000)));
        assert_eq!(host.privileged, Some(false));
        assert_eq!(body.cmd, Some(vec![paths::BINARY.to_owned(), "sandbox".into(), "init".into()]));
        let mounts = host.mounts.expect("mounts");
        let read_only: Vec<(&str, bool)> =
            mounts.iter().map(|m| (m.target.as_deref().unwrap_or_default(), m.read_only.unwrap_or(false))).collect();
        assert!(read_only.contains(&(paths::SOURCE, true)));
        assert!(read_only.contains(&(paths::BINARY, true)));
        assert!(read_only.contains(&(paths::WORKSPACE, false)));
        assert!(mounts.iter().all(|m| m.source.as_deref() != Some("/var/run/docker.sock")));
    }

    #[test]
    fn a_volume_recreated_from_its_mount_is_the_same_labelled_sized_tmpfs() {
        let mut spec = spec();
        spec.labels = HashMap::from([("roundtable.dev/session".to_owned(), "s1".to_owned())]);
        let body = spec.container_body();
        let mounts = body.host_config.and_then(|h| h.mounts).expect("mounts");
        for (created, target) in spec.tmpfs_volumes().iter().zip([paths::WORKSPACE, paths::TMP]) {
            let mount = mounts.iter().find(|m| m.target.as_deref() == Some(target)).expect("mounted");
            let options = mount.volume_options.as_ref().expect("volume options");
            let driver = options.driver_config.as_ref().expect("driver config");
            assert_eq!(mount.source, created.name);
            assert_eq!((&driver.name, &driver.options), (&created.driver, &created.driver_opts), "{target}");
            assert_eq!(options.labels, created.labels, "{target}");
        }
    }

    #[test]
    fn the_volumes_are_sized_and_labelled_as_the_spec_says() {
        let mut spec = spec();
        spec.labels = HashMap::from([("roundtable.dev/session".to_owned(), "s1".to_owned())]);
        let [workspace, tmp] = spec.tmpfs_volumes();
        let sized = |volume: &VolumeCreateRequest| {
            let options = volume.driver_opts.as_ref().and_then(|o| o.get("o")).cloned().unwrap_or_default();
            (volume.name.clone().unwrap_or_default(), options, volume.labels.clone().unwrap_or_default())
        };
        let (name, options, labels) = sized(&workspace);
        assert_eq!(name, "ws");
        assert!(options.starts_with(&format!("nr_blocks={},uid=1000,", tmpfs_blocks(1 << 30))), "{options}");
        assert_eq!(labels, spec.labels);
        let (name, options, labels) = sized(&tmp);
        assert_eq!(name, "tmp");
        assert!(options.starts_with(&format!("nr_blocks={},uid=0,", tmpfs_blocks(1 << 20))), "{options}");
        assert_eq!(labels, spec.labels);
    }

    #[test]
    fn tmpfs_volumes_belong_to_the_agent() {
        let volume = tmpfs_volume("ws", 1 << 30, TmpfsRoot::Agent, HashMap::new());
        let options = volume.driver_opts.expect("options");
        assert_eq!(options.get("type").map(String::as_str), Some("tmpfs"));
        let mount_options = options.get("o").expect("o");
        let blocks = format!("nr_blocks={}", tmpfs_blocks(1 << 30));
        assert!(mount_options.contains(&blocks) && mount_options.contains("uid=1000"), "{mount_options}");
        let tmp = tmpfs_volume("tmp", 1 << 20, TmpfsRoot::Root, HashMap::new());
        let tmp_options = tmp.driver_opts.expect("options");
        assert!(tmp_options.get("o").is_some_and(|o| o.contains("uid=0,gid=0,mode=0755")), "{tmp_options:?}");
    }
}
