//! The one place `/proc` is read: a process's threads, CPU time and memory,
//! the CPUs it may use and its cgroups; the machine's CPU model, memory,
//! kernel and host name. Built on the `procfs` crate (its parsers handle the
//! command names with spaces, the units and the kernel versions), so no other
//! module parses `/proc` text. Linux only, as blocklab is.

use std::time::Duration;

use procfs::process::Process;
use procfs::{Current, FromBufRead};

/// Which process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pid {
    /// This process.
    Myself,
    /// Another process, by its id.
    Of(u32),
}

fn process(pid: Pid) -> Option<Process> {
    match pid {
        Pid::Myself => Process::myself().ok(),
        Pid::Of(pid) => Process::new(i32::try_from(pid).ok()?).ok(),
    }
}

/// The OS threads of `pid` now.
pub fn threads(pid: Pid) -> Option<u64> {
    Some(process(pid)?.status().ok()?.threads)
}

/// The descriptors `pid` may open now: its soft `RLIMIT_NOFILE`
/// (`u64::MAX` when unlimited). A JVM and Go raise theirs to the hard limit
/// as they start, so read it once the process is up.
pub fn open_files_limit(pid: Pid) -> Option<u64> {
    match process(pid)?.limits().ok()?.max_open_files.soft_limit {
        procfs::process::LimitValue::Value(n) => Some(n),
        procfs::process::LimitValue::Unlimited => Some(u64::MAX),
    }
}

/// User plus system CPU time `pid` has used.
pub fn cpu_time(pid: Pid) -> Option<Duration> {
    let stat = process(pid)?.stat().ok()?;
    let ticks = stat.utime + stat.stime;
    Some(Duration::from_secs_f64(ticks as f64 / procfs::ticks_per_second() as f64))
}

/// CPU time of `pid` and every process under it, user plus system: each
/// live one's own, plus what each has counted of its children that ended and
/// were reaped (a PostgreSQL backend that closed is in its postmaster's).
pub fn tree_cpu_time(pid: u32) -> Option<Duration> {
    let root = process(Pid::Of(pid))?.stat().ok()?;
    let mut children: std::collections::HashMap<i32, Vec<procfs::process::Stat>> =
        std::collections::HashMap::new();
    for stat in procfs::process::all_processes().ok()?.flatten().filter_map(|p| p.stat().ok()) {
        children.entry(stat.ppid).or_default().push(stat);
    }
    let mut ticks = 0u64;
    let mut todo = vec![root];
    while let Some(stat) = todo.pop() {
        ticks += stat.utime + stat.stime + stat.cutime.max(0) as u64 + stat.cstime.max(0) as u64;
        todo.extend(children.remove(&stat.pid).unwrap_or_default());
    }
    Some(Duration::from_secs_f64(ticks as f64 / procfs::ticks_per_second() as f64))
}

/// Resident memory of `pid` now, bytes.
pub fn rss_bytes(pid: Pid) -> Option<u64> {
    Some(process(pid)?.status().ok()?.vmrss? * 1024)
}

/// The highest resident memory of `pid` since it started, bytes.
pub fn peak_rss_bytes(pid: Pid) -> Option<u64> {
    Some(process(pid)?.status().ok()?.vmhwm? * 1024)
}

/// The CPUs this process may run on (honours taskset and cpusets).
pub fn allowed_cpus() -> Option<Vec<usize>> {
    let ranges = process(Pid::Myself)?.status().ok()?.cpus_allowed_list?;
    let cpus: Vec<usize> = ranges.into_iter().flat_map(|(a, b)| a as usize..=b as usize).collect();
    (!cpus.is_empty()).then_some(cpus)
}

/// This process's cgroups: per hierarchy, its controllers (empty for the
/// cgroup v2 hierarchy) and its path in it.
pub fn own_cgroups() -> Result<Vec<(Vec<String>, String)>, String> {
    let groups = process(Pid::Myself)
        .ok_or("cannot read /proc/self")?
        .cgroups()
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    Ok(groups.0.into_iter().map(|g| (g.controllers, g.pathname)).collect())
}

/// The threads field of a `/proc/PID/status` text already read.
pub fn threads_in_status(status: &str) -> Option<u64> {
    procfs::process::Status::from_buf_read(status.as_bytes()).ok().map(|s| s.threads)
}

/// The machine's CPU model name.
pub fn cpu_model() -> Option<String> {
    procfs::CpuInfo::current().ok()?.model_name(0).map(str::to_string)
}

/// The machine's memory, bytes.
pub fn memory_bytes() -> Option<u64> {
    Some(procfs::Meminfo::current().ok()?.mem_total)
}

/// The kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    read_trimmed("/proc/sys/kernel/osrelease")
}

/// The host name.
pub fn hostname() -> String {
    read_trimmed("/proc/sys/kernel/hostname")
}

// procfs has no reader for these two one-line files.
fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads() {
        assert!(threads(Pid::Myself).is_some_and(|n| n >= 1));
        assert!(cpu_time(Pid::Myself).is_some());
        let (rss, peak) = (rss_bytes(Pid::Myself).unwrap(), peak_rss_bytes(Pid::Myself).unwrap());
        assert!(rss > 0 && peak >= rss, "{rss} {peak}");
        assert!(!allowed_cpus().unwrap().is_empty());
        assert!(memory_bytes().unwrap() > 1 << 20);
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(threads_in_status(&status).is_some_and(|n| n >= 1));
        assert_eq!(threads(Pid::Of(u32::MAX)), None);
    }
}
