//! `roundtable sandbox check`: run inside an agent container before the agent, it verifies from
//! the inside what the controller asked for (`docker inspect` only echoes the request). Any
//! mismatch fails the execution closed, naming the item.

use std::path::Path;

use roundtable_specs::layout;

pub use roundtable_session_runtime::Expected;
use roundtable_specs::runtime_class::{KernelFacts, ResolvedRuntime, SandboxKernel, judge_kernel};
pub use roundtable_specs::session::{CheckItem, CheckReport};

fn status_field<'a>(status: &'a str, field: &str) -> Option<&'a str> {
    status.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':')).map(str::trim)
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|text| text.trim().to_owned())
}

/// The first readable file of `candidates` (cgroup v2 path first, then v1).
fn read_first(candidates: &[&str]) -> Option<(String, String)> {
    candidates.iter().find_map(|path| read(path).map(|value| (path.to_string(), value)))
}

/// Whether creating a file in `dir` fails (it must, for read-only places).
fn write_denied(dir: &str) -> (bool, String) {
    let probe = Path::new(dir).join(format!(".roundtable-write-probe-{}", std::process::id()));
    match std::fs::write(&probe, b"x") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            (false, format!("{dir} is writable"))
        }
        Err(error) => (true, format!("{dir}: {error}")),
    }
}

fn item(name: &str, ok: bool, detail: impl Into<String>) -> CheckItem {
    CheckItem { name: name.into(), ok, detail: detail.into() }
}

/// The CPU limit in thousandths, from cgroup v2 `cpu.max` or v1 quota/period.
fn cpu_limit_millis() -> Option<(u64, String)> {
    if let Some(max) = read("/sys/fs/cgroup/cpu.max") {
        let mut parts = max.split_whitespace();
        let quota: u64 = parts.next()?.parse().ok()?;
        let period: u64 = parts.next()?.parse().ok()?;
        return Some((quota * 1000 / period.max(1), format!("cpu.max {max}")));
    }
    let quota: i64 = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")?.parse().ok()?;
    let period: u64 = read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")?.parse().ok()?;
    let quota = u64::try_from(quota).ok()?;
    Some((quota * 1000 / period.max(1), format!("cfs_quota_us {quota} / cfs_period_us {period}")))
}

/// The kernel item: the runtime the container was created under shows the kernel it must,
/// told by what the runtime mounts at `/proc` (the image cannot supply it).
fn kernel_item(runtime: &ResolvedRuntime) -> CheckItem {
    let facts = KernelFacts {
        proc_version: read("/proc/version"),
        gvisor_file: Path::new(roundtable_specs::runtime_class::GVISOR_ONLY_FILE).exists(),
    };
    let (ok, detail) = judge_kernel(runtime, &facts);
    item("kernel", ok, detail)
}

/// A `/proc/meminfo` field in bytes.
fn meminfo_bytes(field: &str) -> Option<u64> {
    let meminfo = read("/proc/meminfo")?;
    let kib: u64 = status_field(&meminfo, field)?.strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// The limits as gVisor shows them. Its kernel sizes itself to the memory limit (MemTotal) and
/// never swaps; the pids and CPU limits bound the sandbox from the host's cgroup, which the
/// sandbox cannot see, so those two are the engine's to keep (the hardening tests prove they
/// hold under runsc).
fn gvisor_limit_items(expected: &Expected, items: &mut Vec<CheckItem>) {
    let total = meminfo_bytes("MemTotal");
    items.push(item(
        "memoryLimit",
        total == Some(expected.memory_bytes),
        format!("gVisor's MemTotal = {total:?} bytes, expected {}", expected.memory_bytes),
    ));
    let swap = meminfo_bytes("SwapTotal");
    items.push(item("noSwap", swap.unwrap_or(0) == 0, format!("gVisor's SwapTotal = {swap:?} bytes")));
    let outside = "not visible inside gVisor: the host's cgroup around the sandbox enforces it";
    let tasks = u32::try_from(expected.pids).map(|p| SandboxKernel::Gvisor.engine_pids_limit(p));
    items.push(item(
        "pidsLimit",
        true,
        format!(
            "{} agent processes, {} host tasks of the sandbox; {outside}",
            expected.pids,
            tasks.unwrap_or(u32::MAX)
        ),
    ));
    items.push(item("cpuLimit", true, format!("expected {} millicpu; {outside}", expected.cpu_millis)));
}

/// Runs every check and reports each item.
pub fn run(expected: &Expected) -> CheckReport {
    let mut items = Vec::new();
    // gVisor's facts are read only once its kernel is proven; a failed kernel fails the check.
    let gvisor = expected.runtime.as_ref().is_some_and(|r| r.kernel == SandboxKernel::Gvisor);
    if let Some(runtime) = &expected.runtime {
        items.push(kernel_item(runtime));
    }
    let status = read("/proc/self/status").unwrap_or_default();
    let first =
        |field: &str| status_field(&status, field).and_then(|v| v.split_whitespace().next()).unwrap_or("?").to_owned();
    let uid = first("Uid");
    items.push(item("uid", uid == expected.uid.to_string(), format!("Uid {uid}")));
    let gid = first("Gid");
    items.push(item("gid", gid == expected.gid.to_string(), format!("Gid {gid}")));
    let zero = |value: &str| value.chars().all(|c| c == '0') && !value.is_empty() && value != "?";
    for field in ["CapEff", "CapBnd", "CapPrm"] {
        let value = first(field);
        items.push(item(&field.to_lowercase(), zero(&value), format!("{field} {value}")));
    }
    // gVisor's status has no CapAmb line. The ambient set is always within the permitted one,
    // so an empty permitted set proves it empty too.
    let (ambient, permitted) = (first("CapAmb"), first("CapPrm"));
    let ambient_ok = zero(&ambient) || (ambient == "?" && zero(&permitted));
    let ambient_detail = if ambient == "?" {
        format!("CapAmb not shown; the ambient set lies within CapPrm {permitted}")
    } else {
        format!("CapAmb {ambient}")
    };
    items.push(item("capamb", ambient_ok, ambient_detail));
    // Asked of the kernel (prctl), not read from status, which gVisor's lacks.
    let nnp = rustix::thread::no_new_privs();
    items.push(item("noNewPrivs", nnp.as_ref().is_ok_and(|on| *on), format!("PR_GET_NO_NEW_PRIVS {nnp:?}")));
    let seccomp = first("Seccomp");
    if gvisor {
        items.push(item(
            "seccomp",
            true,
            format!("Seccomp {seccomp} inside: gVisor's Sentry serves every system call, itself under its own host seccomp filter"),
        ));
    } else {
        items.push(item("seccomp", seccomp == "2", format!("Seccomp {seccomp} (2 = filter)")));
    }

    let interfaces: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|entries| entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let only_lo = interfaces.iter().all(|name| name == "lo");
    items.push(item("network", only_lo, format!("interfaces: {}", interfaces.join(", "))));

    if gvisor {
        gvisor_limit_items(expected, &mut items);
    } else {
        cgroup_limit_items(expected, &mut items);
    }
    mount_items(&mut items);
    let ok = items.iter().all(|i| i.ok);
    CheckReport { ok, items }
}

/// The limits as the cgroup files of a container on the host's kernel show them.
fn cgroup_limit_items(expected: &Expected, items: &mut Vec<CheckItem>) {
    let memory = read_first(&["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]);
    let memory_ok = memory.as_ref().is_some_and(|(_, v)| v.parse::<u64>().ok() == Some(expected.memory_bytes));
    items.push(item(
        "memoryLimit",
        memory_ok,
        memory.map_or("no memory limit file".into(), |(p, v)| format!("{p} = {v}, expected {}", expected.memory_bytes)),
    ));
    let swap = read_first(&["/sys/fs/cgroup/memory.swap.max", "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"]);
    let swap_ok = swap.as_ref().is_some_and(|(path, v)| {
        if path.ends_with("memory.swap.max") { v == "0" } else { v.parse::<u64>().ok() == Some(expected.memory_bytes) }
    });
    items.push(item("noSwap", swap_ok, swap.map_or("no swap limit file".into(), |(p, v)| format!("{p} = {v}"))));
    let pids = read_first(&["/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"]);
    let pids_ok = pids.as_ref().is_some_and(|(_, v)| v.parse::<u64>().ok() == Some(expected.pids));
    items.push(item(
        "pidsLimit",
        pids_ok,
        pids.map_or("no pids limit file".into(), |(p, v)| format!("{p} = {v}, expected {}", expected.pids)),
    ));
    let cpu = cpu_limit_millis();
    let cpu_ok = cpu.as_ref().is_some_and(|(millis, _)| *millis == expected.cpu_millis);
    items.push(item(
        "cpuLimit",
        cpu_ok,
        cpu.map_or("no CPU quota".into(), |(m, d)| format!("{d} = {m} millicpu, expected {}", expected.cpu_millis)),
    ));
}

/// The read-only and writable places, and no engine socket.
fn mount_items(items: &mut Vec<CheckItem>) {
    let mounts = read("/proc/self/mountinfo").unwrap_or_default();
    let mount_of =
        |target: &str| mounts.lines().find(|line| line.split_whitespace().nth(4) == Some(target)).map(str::to_owned);
    let read_only = |line: &str| line.split_whitespace().nth(5).is_some_and(|o| o.split(',').any(|x| x == "ro"));
    for (name, target, want_ro) in [
        ("rootReadOnly", "/", true),
        ("sourceReadOnly", layout::SOURCE, true),
        ("binaryReadOnly", layout::BINARY, true),
        ("workspaceWritable", layout::WORKSPACE, false),
        ("tmpWritable", "/tmp", false),
    ] {
        match mount_of(target) {
            Some(line) => items.push(item(name, read_only(&line) == want_ro, line)),
            None => items.push(item(name, false, format!("{target} is not a mount point"))),
        }
    }
    let engine_socket = mounts.contains("docker.sock") || mounts.contains("podman.sock");
    items.push(item(
        "noEngineSocket",
        !engine_socket,
        if engine_socket { "an engine socket is mounted" } else { "none mounted" },
    ));
    for (name, dir) in [("rootWriteDenied", "/"), ("sourceWriteDenied", layout::SOURCE)] {
        let (denied, detail) = write_denied(dir);
        items.push(item(name, denied, detail));
    }
}

/// Seeds the workspace from the source mount once every check has passed (a container that
/// failed its check gets nothing written), and adds the outcome to the report as `workspaceSeed`:
/// a seed that failed (a workspace too small) fails the check too, so the agent never starts on
/// a partial tree.
pub fn seed_workspace(report: &mut CheckReport) {
    if !report.ok {
        return;
    }
    let seeded = crate::seed::copy_tree(Path::new(layout::SOURCE), Path::new(layout::WORKSPACE));
    let item = match seeded {
        Ok(seeded) => item(
            "workspaceSeed",
            true,
            format!(
                "{} files, {} bytes from {} into {}",
                seeded.files,
                seeded.bytes,
                layout::SOURCE,
                layout::WORKSPACE
            ),
        ),
        Err(error) => item("workspaceSeed", false, error.to_string()),
    };
    report.ok = item.ok;
    report.items.push(item);
}
