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
    /// False: run uncapped without trying cgroups (`--no-cgroup`).
    pub use_cgroups: bool,
}
