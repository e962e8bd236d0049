//! The standard process metrics every Prometheus client library exports (`process_*`), read
//! from `/proc/self` at scrape time: CPU seconds, resident and virtual memory, open and maximum
//! file descriptors, and the start time. What cannot be read is left out, never guessed.

use crate::ComputedFamily;

/// The families, from `/proc` now.
pub fn process_families() -> Vec<ComputedFamily> {
    let mut families = Vec::new();
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    // The fields after the command (which may hold spaces and parentheses), from field 3 on.
    let fields: Vec<&str> = stat
        .as_deref()
        .and_then(|text| text.rsplit_once(") "))
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |number: usize| fields.get(number - 3).and_then(|f| f.parse::<f64>().ok());
    // The unit of the CPU and start times there (`USER_HZ`).
    let ticks_per_second = rustix::param::clock_ticks_per_second() as f64;
    if let (Some(user), Some(system)) = (field(14), field(15)) {
        let mut cpu = ComputedFamily::counter(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            &[],
        );
        cpu.set(&[], (user + system) / ticks_per_second);
        families.push(cpu);
    }
    if let Some(bytes) = field(23) {
        let mut virtual_memory =
            ComputedFamily::gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", &[]);
        virtual_memory.set(&[], bytes);
        families.push(virtual_memory);
    }
    if let Some(pages) = field(24) {
        let mut resident =
            ComputedFamily::gauge("process_resident_memory_bytes", "Resident memory size in bytes.", &[]);
        resident.set(&[], pages * rustix::param::page_size() as f64);
        families.push(resident);
    }
    if let (Some(ticks), Some(boot)) = (field(22), boot_time()) {
        let mut start = ComputedFamily::gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            &[],
        );
        start.set(&[], boot + ticks / ticks_per_second);
        families.push(start);
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        let mut open = ComputedFamily::gauge("process_open_fds", "Number of open file descriptors.", &[]);
        open.set(&[], entries.count() as f64);
        families.push(open);
    }
    if let Some(limit) = max_fds() {
        let mut max = ComputedFamily::gauge("process_max_fds", "Maximum number of open file descriptors.", &[]);
        max.set(&[], limit);
        families.push(max);
    }
    families
}

/// When the machine booted, seconds since the epoch (`btime` in `/proc/stat`).
fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines().find_map(|line| line.strip_prefix("btime ")).and_then(|value| value.trim().parse().ok())
}

/// The soft limit on open files (`/proc/self/limits`); `None` when unlimited or unreadable.
fn max_fds() -> Option<f64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files").split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_read_from_this_process() {
        let families = process_families();
        let text = crate::Registry::new().render_with(&families);
        for name in [
            "process_cpu_seconds_total",
            "process_virtual_memory_bytes",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
            "process_open_fds",
            "process_max_fds",
        ] {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name} missing: {text}");
        }
        let resident = text.lines().find_map(|l| l.strip_prefix("process_resident_memory_bytes ")).expect("rss");
        assert!(resident.parse::<f64>().is_ok_and(|bytes| bytes > 1_000_000.0), "{resident}");
        let started = text.lines().find_map(|l| l.strip_prefix("process_start_time_seconds ")).expect("start");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
        assert!(started.parse::<f64>().is_ok_and(|t| t > now - 86_400.0 && t <= now + 1.0), "{started}");
    }
}
