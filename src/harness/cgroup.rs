//! A memory-capped cgroup for one target process: a child of the cgroup this
//! process runs in (so every limit that already applies still applies),
//! under the cgroup v1 memory controller or cgroup v2, removed on drop with
//! every process still in it killed first.
//!
//! The target joins it before it runs any code of its own: it is started
//! through `sh -c 'echo $$ > …/cgroup.procs && exec "$@"'`, so every page it
//! ever allocates is charged here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Which cgroup hierarchy holds the memory controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    /// `/sys/fs/cgroup/memory/…`: `memory.limit_in_bytes`, `memory.max_usage_in_bytes`.
    V1,
    /// `/sys/fs/cgroup/…` unified: `memory.max`, `memory.peak`.
    V2,
}

/// A cgroup of our own, with or without a memory limit.
#[derive(Debug)]
pub struct MemoryCgroup {
    path: PathBuf,
    version: Version,
}

impl MemoryCgroup {
    /// Creates `name` under this process's own memory cgroup, limited to
    /// `limit` bytes (`None`: no limit, measured only). The error says why
    /// no cgroup can be made here (not root, no memory controller).
    pub fn create(name: &str, limit: Option<u64>) -> Result<MemoryCgroup, String> {
        let (parent, version) = own_memory_cgroup()?;
        let path = parent.join(name);
        std::fs::create_dir(&path)
            .map_err(|e| format!("cannot create the cgroup {}: {e}", path.display()))?;
        let cgroup = MemoryCgroup { path, version };
        if let Some(limit) = limit {
            let file = match version {
                Version::V1 => "memory.limit_in_bytes",
                Version::V2 => "memory.max",
            };
            cgroup.write(file, &limit.to_string())?;
            if version == Version::V1 {
                // Swap would let a capped process live on slowly instead of being
                // killed; where the kernel accounts swap, cap it at the same figure.
                let _ = cgroup.write("memory.memsw.limit_in_bytes", &limit.to_string());
            } else {
                let _ = cgroup.write("memory.swap.max", "0");
            }
        }
        Ok(cgroup)
    }

    /// Its directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// v1 or v2.
    pub fn version(&self) -> Version {
        self.version
    }

    /// `command` wrapped so that the process joins this cgroup before it execs.
    pub fn wrap(&self, command: &Command) -> Command {
        let procs = self.path.join("cgroup.procs");
        let mut wrapped = Command::new("sh");
        wrapped
            .arg("-c")
            .arg(format!("echo $$ > '{}' && exec \"$@\"", procs.display()))
            .arg("sh")
            .arg(command.get_program())
            .args(command.get_args());
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => wrapped.env(key, value),
                None => wrapped.env_remove(key),
            };
        }
        wrapped
    }

    /// Charged memory now, in bytes.
    pub fn usage(&self) -> Option<u64> {
        self.read_number(match self.version {
            Version::V1 => "memory.usage_in_bytes",
            Version::V2 => "memory.current",
        })
    }

    /// The highest charged memory since creation or the last [`Self::reset_peak`].
    pub fn peak(&self) -> Option<u64> {
        self.read_number(match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        })
    }

    /// Starts a new peak from now (v1; on v2 where the kernel allows it).
    pub fn reset_peak(&self) {
        let file = match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        };
        let _ = self.write(file, "0");
    }

    /// Processes the kernel's OOM killer killed in this cgroup so far.
    pub fn oom_kills(&self) -> u64 {
        let file = match self.version {
            Version::V1 => "memory.oom_control",
            Version::V2 => "memory.events",
        };
        std::fs::read_to_string(self.path.join(file))
            .ok()
            .and_then(|text| {
                text.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// Pids in it now.
    pub fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    fn read_number(&self, file: &str) -> Option<u64> {
        std::fs::read_to_string(self.path.join(file)).ok()?.trim().parse().ok()
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        std::fs::write(self.path.join(file), value)
            .map_err(|e| format!("cannot write {value} to {}: {e}", self.path.join(file).display()))
    }
}

impl Drop for MemoryCgroup {
    /// Kills whatever is still in it, then removes it.
    fn drop(&mut self) {
        let started = Instant::now();
        loop {
            let pids = self.pids();
            if pids.is_empty() {
                if std::fs::remove_dir(&self.path).is_ok() || started.elapsed() > Duration::from_secs(5) {
                    return;
                }
            } else {
                for pid in pids {
                    let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
                }
            }
            if started.elapsed() > Duration::from_secs(5) {
                tracing::warn!(cgroup = %self.path.display(), "cannot remove the cgroup");
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `Ok` if this process can create memory cgroups under its own; else why not.
pub fn available() -> Result<(), String> {
    own_memory_cgroup().map(|_| ())
}

/// This process's own memory cgroup directory and its hierarchy's version.
fn own_memory_cgroup() -> Result<(PathBuf, Version), String> {
    let groups = crate::proc::own_cgroups()?;
    for (controllers, path) in &groups {
        if controllers.iter().any(|c| c == "memory") {
            let dir = Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
            return writable(dir, Version::V1);
        }
    }
    for (controllers, path) in &groups {
        if controllers.is_empty() {
            let dir = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
            let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                return writable(dir, Version::V2);
            }
        }
    }
    Err("no cgroup memory controller is available to this process".to_string())
}

fn writable(dir: PathBuf, version: Version) -> Result<(PathBuf, Version), String> {
    let probe = dir.join(format!("blocklab-probe-{}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&probe);
            Ok((dir, version))
        }
        Err(e) => Err(format!("cannot create cgroups under {} ({e}); run as root", dir.display())),
    }
}

/// The threads of every process in the cgroup at `dir` (v1's `tasks`, v2's
/// `cgroup.threads`: one thread id a line): a process tree's, such as
/// gunicorn's master and its worker.
pub fn threads(dir: &Path) -> Option<u64> {
    let list = std::fs::read_to_string(dir.join("tasks"))
        .or_else(|_| std::fs::read_to_string(dir.join("cgroup.threads")))
        .ok()?;
    Some(list.lines().filter(|l| !l.trim().is_empty()).count() as u64)
}

/// Charged memory less page cache of the cgroup at `dir` (v1 or v2): what
/// the process itself holds. Page cache (the binary's and the jars' pages)
/// is charged to whichever cgroup reads it first and is reclaimed before
/// an OOM kill, so this is the figure that compares across targets.
pub fn usage_less_cache(dir: &Path) -> Option<u64> {
    let stat = std::fs::read_to_string(dir.join("memory.stat")).ok()?;
    let field = |name: &str| {
        stat.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let (usage, cache) = match std::fs::read_to_string(dir.join("memory.usage_in_bytes")) {
        Ok(v1) => (v1.trim().parse::<u64>().ok()?, field("cache").unwrap_or(0)),
        Err(_) => (
            std::fs::read_to_string(dir.join("memory.current")).ok()?.trim().parse().ok()?,
            field("file").unwrap_or(0),
        ),
    };
    Some(usage.saturating_sub(cache))
}
