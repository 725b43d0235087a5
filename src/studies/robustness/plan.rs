//! A validated sweep: its targets, its levels, the caps, where it writes.

use std::path::PathBuf;
use std::time::Duration;

use super::target::Target;
use crate::harness::peers::Peers;
use crate::harness::placement::Placement;

/// The seed's levels of concurrency, and blocklab's beyond them.
pub const DEFAULT_LEVELS: [usize; 10] = [100, 200, 400, 600, 700, 800, 1000, 2000, 5000, 10_000];
/// `--quick`: three levels.
pub const QUICK_LEVELS: [usize; 3] = [100, 400, 800];
/// The JVM peers' options, the seed's heap.
pub const JVM_OPTS: &str = "-Xms25M -Xmx50M";

/// `GOMEMLIMIT` for a Go target under a cgroup cap of `cap` bytes: four
/// fifths of it, whole MiB (40 MiB under 50 MiB), the headroom Go's runtime
/// needs beyond its heap (stacks, runtime structures, the kernel's share).
pub fn go_memory_limit(cap: u64) -> u64 {
    (cap / 5 * 4) >> 20 << 20
}

/// Who sends a step's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Client {
    /// blocklab's own: every connection opened first, then every request at once.
    Blocklab,
    /// The seed's: JMeter 5.6.3 (the `jmeter` peer), N threads with ramp-up 0,
    /// started one by one; its JTL read back into the same figures.
    Jmeter,
}

impl Client {
    /// Its name in the outputs.
    pub fn name(self) -> &'static str {
        match self {
            Client::Blocklab => "blocklab",
            Client::Jmeter => "jmeter",
        }
    }
}

/// A validated sweep.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    /// What is swept, in order.
    pub targets: Vec<Target>,
    /// Concurrent requests per step, ascending.
    pub levels: Vec<usize>,
    /// The `/delay` each request asks for.
    pub delay: Duration,
    /// Cap of a Rust target's whole process, in bytes.
    pub memory: u64,
    /// Cap of a JVM peer's whole process (`None`: only the heap is capped, as the seed).
    pub jvm_memory: Option<u64>,
    /// The JVM peers' options (`JAVA_OPTS`; the seed's heap by default).
    pub jvm_opts: String,
    /// Limit for one request, connect included.
    pub timeout: Duration,
    /// Output folder.
    pub out: PathBuf,
    /// The `blocklab` binary the Rust targets run.
    pub exe: PathBuf,
    /// The peers of this checkout (`peers/*/peer.toml`), and the script that runs them.
    pub peers: Peers,
    /// CPUs of the targets and of the load.
    pub placement: Placement,
    /// Who sends the requests.
    pub client: Client,
    /// How long a target that stopped answering is probed for answering again.
    pub recheck: std::time::Duration,
    /// False: run uncapped without trying cgroups (`--no-cgroup`).
    pub use_cgroups: bool,
    /// Connections one source address opens before the next takes over
    /// ([`super::step::CONNECTIONS_PER_ADDRESS`]; lower only in tests).
    pub per_address: usize,
}
