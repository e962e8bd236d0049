//! Runtime classes: which OCI runtime a session's container runs under, what the engine has
//! registered, and how the self-check proves from inside which kernel it got. Pure: the engine's
//! answer and what the container's `/proc` shows are handed in.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::RuntimeClass;
use crate::words::words;

words! {
    /// Which kernel serves a container's system calls.
    SandboxKernel {
        /// The host's own kernel, shared (runc, crun).
        Host = "host",
        /// gVisor's user-space kernel, the Sentry (runsc).
        Gvisor = "gvisor",
        /// A kernel of its own in a virtual machine (Kata, Firecracker).
        Own = "own",
    }
}

impl SandboxKernel {
    /// What a runtime registered as `class` must show from inside: the runc family shares the
    /// host's kernel, `runsc` (under any suffix, as `runsc-kvm`) is gVisor, and any other runtime
    /// is taken to bring a kernel of its own, which the self-check then has to see.
    pub fn of(class: &RuntimeClass) -> Self {
        let name = class.as_str();
        if matches!(name, "runc" | "crun" | "youki" | "io.containerd.runc.v2" | "io.containerd.runtime.v1.linux") {
            SandboxKernel::Host
        } else if name.starts_with("runsc") {
            SandboxKernel::Gvisor
        } else {
            SandboxKernel::Own
        }
    }

    /// The pids limit the engine puts on a container so that its agent may run `pids` processes.
    /// Under gVisor the host's cgroup counts the sandbox's own tasks, not the agent's processes:
    /// each agent process costs about 7.6 host tasks on its ptrace platform, over some 56 of its
    /// own (measured with runsc 20221219: 512 host tasks hold 60 processes, 1024 hold 127), and
    /// a sandbox that reaches the limit dies whole. A fork bomb is bounded either way.
    pub fn engine_pids_limit(self, pids: u32) -> u32 {
        match self {
            SandboxKernel::Gvisor => pids.saturating_mul(GVISOR_TASKS_PER_PROCESS).saturating_add(GVISOR_OWN_TASKS),
            SandboxKernel::Host | SandboxKernel::Own => pids,
        }
    }

    /// How it reads in a sentence.
    pub fn described(self) -> &'static str {
        match self {
            SandboxKernel::Host => "the host's kernel",
            SandboxKernel::Gvisor => "gVisor's user-space kernel",
            SandboxKernel::Own => "a kernel of its own",
        }
    }
}

/// Host tasks a gVisor sandbox spends per agent process (see [`SandboxKernel::engine_pids_limit`]).
pub const GVISOR_TASKS_PER_PROCESS: u32 = 8;
/// Host tasks a gVisor sandbox spends on its own.
pub const GVISOR_OWN_TASKS: u32 = 64;

/// What the engine says about its runtimes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EngineRuntimes {
    /// The runtime a container gets when none is named.
    pub default: String,
    /// Every registered runtime by name, with the arguments the engine passes it.
    pub registered: BTreeMap<String, Vec<String>>,
    /// The host kernel's release (`uname -r` on the engine's machine), when the engine says.
    pub host_kernel: Option<String>,
    /// Why the engine runs its default runtime whatever a container names, when it does (the
    /// Docker-compatible API of Podman before 6.0 drops the choice: containers/podman#28429).
    pub choice_ignored: Option<String>,
    /// Whether the engine sees this host's files.
    pub host_paths: HostPaths,
}

/// Whether the engine sees this host's files where this process sees them: sessions bind-mount
/// the controller's binary, their source and their socket folder from this host, so an engine on
/// another machine cannot run them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HostPaths {
    /// A file made here for the purpose was read back through the engine.
    Seen,
    /// The engine could not see it: its words.
    NotSeen(String),
    /// Not established (the engine could not be asked); a session's launch or self-check fails
    /// closed if it cannot.
    #[default]
    Unknown,
}

/// Why a session cannot run under a runtime class on this engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeUnfit {
    #[error("the engine has no runtime {class:?} (it has {}); register it in the engine's daemon.json (docs/runtime-classes.md)", registered.join(", "))]
    NotRegistered { class: String, registered: Vec<String> },
    #[error(
        "runtime {class:?} is gVisor without --host-uds=open in its runtimeArgs, so the agent cannot reach the session's Unix sockets (egress, broker, MCP); add it in the engine's daemon.json (docs/runtime-classes.md)"
    )]
    NoHostSockets { class: String },
    #[error(
        "the engine runs its default runtime {default:?} whatever a container names ({why}), so it cannot run {class:?}"
    )]
    ChoiceIgnored { class: String, default: String, why: String },
}

impl EngineRuntimes {
    /// Whether a session can run under `class` here: the engine has it, and, when the session
    /// needs its Unix sockets, a gVisor runtime is allowed to connect to host sockets (gVisor
    /// refuses by default: `connect` fails with EPERM).
    pub fn fit(&self, class: &RuntimeClass, needs_host_sockets: bool) -> Result<(), RuntimeUnfit> {
        let Some(args) = self.registered.get(class.as_str()) else {
            return Err(RuntimeUnfit::NotRegistered {
                class: class.to_string(),
                registered: self.registered.keys().cloned().collect(),
            });
        };
        if let Some(why) = &self.choice_ignored
            && class.as_str() != self.default
        {
            return Err(RuntimeUnfit::ChoiceIgnored {
                class: class.to_string(),
                default: self.default.clone(),
                why: why.clone(),
            });
        }
        if needs_host_sockets
            && SandboxKernel::of(class) == SandboxKernel::Gvisor
            && !gvisor_connects_host_sockets(args)
        {
            return Err(RuntimeUnfit::NoHostSockets { class: class.to_string() });
        }
        Ok(())
    }
}

/// Whether runsc's arguments let the sandbox connect to host Unix sockets: `--host-uds=open` or
/// `all` (as one argument or two), or the older `--fsgofer-host-uds`.
pub fn gvisor_connects_host_sockets(args: &[String]) -> bool {
    let flags: Vec<&str> = args.iter().map(|a| a.trim_start_matches('-')).collect();
    flags.iter().enumerate().any(|(i, flag)| {
        let value = match flag.split_once('=') {
            Some(("host-uds", value)) => Some(value),
            None if *flag == "host-uds" => flags.get(i + 1).copied(),
            _ => None,
        };
        matches!(value, Some("open" | "all")) || *flag == "fsgofer-host-uds" || *flag == "fsgofer-host-uds=true"
    })
}

/// The runtime a session runs under, as the spawn gate resolved it, and what its self-check must
/// see from inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedRuntime {
    pub class: RuntimeClass,
    pub kernel: SandboxKernel,
    /// The host kernel's release, which a sandbox kernel must not be and the host kernel must.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_kernel: Option<String>,
}

impl ResolvedRuntime {
    pub fn new(class: RuntimeClass, host_kernel: Option<String>) -> Self {
        Self { kernel: SandboxKernel::of(&class), class, host_kernel }
    }
}

/// The file only gVisor's kernel has: the Sentry's own memory statistics.
pub const GVISOR_ONLY_FILE: &str = "/proc/sentry-meminfo";

/// What the self-check reads inside the container to tell the kernel: `/proc/version` (the
/// runtime mounts `/proc`; the image cannot supply it) and whether [`GVISOR_ONLY_FILE`] exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFacts {
    pub proc_version: Option<String>,
    pub gvisor_file: bool,
}

/// The self-check's verdict on the kernel: whether it is the one `expected` names, and what was
/// seen. The host's kernel is recognised by its release in `/proc/version`; gVisor by its own
/// file and the host's release absent; a kernel of its own by the host's release absent.
pub fn judge_kernel(expected: &ResolvedRuntime, facts: &KernelFacts) -> (bool, String) {
    let version = facts.proc_version.as_deref().unwrap_or("");
    let host_seen = expected.host_kernel.as_deref().is_some_and(|k| version.contains(&format!("Linux version {k} ")));
    let ok = match expected.kernel {
        SandboxKernel::Host => !facts.gvisor_file && expected.host_kernel.as_ref().is_none_or(|_| host_seen),
        SandboxKernel::Gvisor => facts.gvisor_file && !host_seen,
        SandboxKernel::Own => !facts.gvisor_file && expected.host_kernel.is_some() && !host_seen,
    };
    let host = match (&expected.host_kernel, host_seen) {
        (Some(k), true) => format!("the host's {k} seen"),
        (Some(k), false) => format!("the host's {k} not seen"),
        (None, _) => "the host's release unknown".to_owned(),
    };
    let detail = format!(
        "runtime {} must show {}: /proc/version {:?}; {} {}; {host}",
        expected.class,
        expected.kernel.described(),
        version,
        GVISOR_ONLY_FILE,
        if facts.gvisor_file { "present" } else { "absent" },
    );
    (ok, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str) -> RuntimeClass {
        name.parse().expect("class")
    }

    const HOST: &str = "6.1.0-28-amd64";
    const HOST_VERSION: &str = "Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) #1 SMP";
    const GVISOR_VERSION: &str = "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016";

    fn judge(name: &str, version: &str, gvisor_file: bool) -> bool {
        let expected = ResolvedRuntime::new(class(name), Some(HOST.into()));
        judge_kernel(&expected, &KernelFacts { proc_version: Some(version.into()), gvisor_file }).0
    }

    #[test]
    fn each_kernel_is_told_by_what_only_it_shows() {
        assert!(judge("runc", HOST_VERSION, false));
        assert!(judge("runsc", GVISOR_VERSION, true));
        assert!(judge("kata", "Linux version 5.15.0 #1", false));
        // runc that is not the host's kernel, or shows gVisor's file.
        assert!(!judge("runc", GVISOR_VERSION, false));
        assert!(!judge("runc", HOST_VERSION, true));
        // A "runsc" that is really runc: the host's release is seen and gVisor's file is absent.
        assert!(!judge("runsc", HOST_VERSION, false));
        assert!(!judge("runsc", GVISOR_VERSION, false), "gVisor's version string alone proves nothing");
        // A VM runtime that shares the host's kernel is no VM.
        assert!(!judge("kata", HOST_VERSION, false));
    }

    #[test]
    fn a_kernel_of_its_own_cannot_be_told_without_the_hosts_release() {
        let expected = ResolvedRuntime::new(class("kata"), None);
        let facts = KernelFacts { proc_version: Some("Linux version 5.15.0 #1".into()), gvisor_file: false };
        assert!(!judge_kernel(&expected, &facts).0);
    }

    #[test]
    fn runtime_names_map_to_the_kernel_they_must_show() {
        assert_eq!(SandboxKernel::of(&class("runc")), SandboxKernel::Host);
        assert_eq!(SandboxKernel::of(&class("runsc")), SandboxKernel::Gvisor);
        assert_eq!(SandboxKernel::of(&class("runsc-kvm")), SandboxKernel::Gvisor);
        assert_eq!(SandboxKernel::of(&class("kata-fc")), SandboxKernel::Own);
    }

    #[test]
    fn gvisor_reaches_host_sockets_only_when_its_arguments_allow_it() {
        let args = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert!(gvisor_connects_host_sockets(&args(&["--network=none", "--host-uds=open"])));
        assert!(gvisor_connects_host_sockets(&args(&["--host-uds", "all"])));
        assert!(gvisor_connects_host_sockets(&args(&["--fsgofer-host-uds"])));
        assert!(!gvisor_connects_host_sockets(&args(&["--network=none"])));
        assert!(!gvisor_connects_host_sockets(&args(&["--host-uds=create"])));
        assert!(!gvisor_connects_host_sockets(&args(&["--host-uds=none"])));
    }

    #[test]
    fn a_runtime_fits_when_registered_and_able_to_reach_the_sockets_a_session_needs() {
        let engine = EngineRuntimes {
            default: "runc".into(),
            registered: BTreeMap::from([
                ("runc".to_owned(), vec![]),
                ("runsc".to_owned(), vec!["--network=none".to_owned()]),
            ]),
            host_kernel: Some(HOST.into()),
            ..EngineRuntimes::default()
        };
        assert!(engine.fit(&class("runc"), true).is_ok());
        assert!(engine.fit(&class("runsc"), false).is_ok());
        let no_sockets = engine.fit(&class("runsc"), true).expect_err("sockets");
        assert!(no_sockets.to_string().contains("--host-uds=open"), "{no_sockets}");
        let missing = engine.fit(&class("kata"), false).expect_err("missing");
        assert!(
            missing.to_string().contains("runc, runsc") && missing.to_string().contains("daemon.json"),
            "{missing}"
        );
        let podman = EngineRuntimes { choice_ignored: Some("Podman 4.3.1".into()), ..engine };
        assert!(podman.fit(&class("runc"), true).is_ok(), "its default still runs");
        let ignored = podman.fit(&class("runsc"), false).expect_err("ignored");
        assert!(ignored.to_string().contains("runs its default runtime \"runc\" whatever"), "{ignored}");
    }
}
