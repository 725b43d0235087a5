//! A validated sweep: its targets, its levels, the caps, where it writes.

use std::path::PathBuf;
use std::time::Duration;

use crate::harness::placement::Placement;
use crate::harness::target::{Target, Targets};
use crate::server::Model;

/// The seed's levels of concurrency, and blocklab's beyond them. 25,000 is
/// past one process's descriptors (20,000 here): only a target with
/// admission control runs it (lean with two worker processes; the others
/// are not run there, at no cost). 200, between the seed's 100 and 400,
/// pays for it in the main job's 40 minutes (a level of every target alive
/// at 200, about 6 s each, against lean's 25,000, about 25 s).
pub const DEFAULT_LEVELS: [usize; 10] = [100, 400, 600, 700, 800, 1000, 2000, 5000, 10_000, 25_000];
/// `--quick`: three levels.
pub const QUICK_LEVELS: [usize; 3] = [100, 400, 800];
/// The JVM peers' options, the seed's heap.
pub const JVM_OPTS: &str = "-Xms25M -Xmx50M";

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
    /// Cap of the whole process of a peer whose runtime has a heap (a JVM,
    /// Node.js; `None`: only the heap is capped, as the seed's JVMs).
    pub jvm_memory: Option<u64>,
    /// The JVM peers' options (`JAVA_OPTS`; the seed's heap by default).
    pub jvm_opts: String,
    /// Limit for one request, connect included.
    pub timeout: Duration,
    /// Output folder.
    pub out: PathBuf,
    /// Every target of this checkout: blocklab's binary and the peers
    /// (`peers/*/peer.toml`) with the script that runs them.
    pub available: Targets,
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
    /// Connections one client process holds before a level is split over
    /// several (`None`: as many as the descriptor limit allows).
    pub per_process: Option<usize>,
    /// `--quick`: a first look, and its report says so.
    pub quick: bool,
    /// `--stop-after-waves K`: a target's higher levels are not run once a
    /// level's slowest answer took more than K × the delay (its answers came
    /// in waves: a pool of threads each sleeping the delay); `None`: every
    /// level runs.
    pub stop_after_waves: Option<u32>,
    /// `lean`'s worker processes (`--lean-processes`; `None`: as many as
    /// each level needs, [`super::run::lean_processes`], no more than what
    /// its admission budget holds needs, [`super::memory::cap_holds`]).
    pub lean_processes: Option<usize>,
}

/// The path every swept target must serve.
pub const DELAY_PATH: &str = "/delay";

/// blocklab's targets in study 2: the server under each of its models.
pub fn own_targets() -> Vec<Target> {
    Model::ALL.into_iter().map(Target::model).collect()
}

/// Every target by default: the four server models, then every server peer
/// that serves `/delay`; with `quick`, of the peers only [`QUICK_PEERS`].
pub fn default_targets(available: &Targets, quick: bool) -> Vec<Target> {
    let mut targets = own_targets();
    targets.extend(
        available.peers_serving(DELAY_PATH).filter(|t| !quick || QUICK_PEERS.contains(&t.name().as_str())),
    );
    targets
}

/// The peers `--quick` sweeps beside the four models: the seed's two
/// applications, Go, Python's two models and Node.js (a JVM costs ~15 s a
/// target to start and step, so the engines and virtual threads wait for the
/// full run; the Python and Node.js peers ~7 s each).
pub const QUICK_PEERS: [&str; 6] =
    ["go-nethttp", "node", "python-asyncio", "python-threads", "spring-web", "spring-webflux"];
