//! The conditions a report states: the machine and the versions.

use std::collections::BTreeMap;

use super::placement::allowed_cpus;
use serde::{Deserialize, Serialize};

/// The machine a study ran on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    /// CPU model name.
    pub cpu_model: String,
    /// CPUs online.
    pub cpus_online: usize,
    /// CPUs this process could use.
    pub cpus_allowed: Vec<usize>,
    /// Memory (GiB).
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// Host name.
    pub hostname: String,
}

/// Facts about this machine, from /proc and /sys.
pub fn machine() -> Machine {
    let cpu_model = crate::proc::cpu_model().unwrap_or_else(|| "unknown".to_string());
    let cpus_online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| super::placement::parse_cpu_list(s.trim()).len())
        .unwrap_or(0);
    let memory_kb = crate::proc::memory_bytes().unwrap_or(0) as f64 / 1024.0;
    Machine {
        cpu_model,
        cpus_online,
        cpus_allowed: allowed_cpus(),
        memory_gib: (memory_kb / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        kernel: crate::proc::kernel_release(),
        hostname: crate::proc::hostname(),
    }
}

/// blocklab's, the compiler's and the key crates' versions, recorded at build time.
pub fn versions() -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    v.insert("blocklab".to_string(), env!("CARGO_PKG_VERSION").to_string());
    v.insert("rustc".to_string(), env!("BLOCKLAB_RUSTC_VERSION").to_string());
    for pair in env!("BLOCKLAB_CRATE_VERSIONS").split(';').filter(|p| !p.is_empty()) {
        if let Some((name, version)) = pair.split_once('=') {
            v.insert(name.to_string(), version.to_string());
        }
    }
    v
}
