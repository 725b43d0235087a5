//! What a sweep found: per target and level, the seed's variables (success
//! rate, minimum and maximum response time), the memory and threads it took,
//! and where and how each target died. Serialized as `results.json`
//! (`blocklab-sweep/2`).

use super::step::StepLoad;
use crate::harness::placement::Placement;

/// How a target stopped answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeathKind {
    /// The kernel's OOM killer killed it (its cgroup counted the kill).
    OomKilled,
    /// It exited by itself (or by a signal other than an OOM kill).
    Exited,
    /// Alive, but `/test` did not answer within 2 s.
    Unresponsive,
    /// It never started.
    DidNotStart,
}

impl DeathKind {
    /// Words for the reports.
    pub fn words(self) -> &'static str {
        match self {
            DeathKind::OomKilled => "OOM-killed",
            DeathKind::Exited => "exited",
            DeathKind::Unresponsive => "alive but no longer answering",
            DeathKind::DidNotStart => "did not start",
        }
    }
}

/// Where and how a target died.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Death {
    /// The level during or after which it died (0: at start).
    pub level: usize,
    /// How.
    pub how: DeathKind,
    /// The detail: exit status, stderr tail, probe error.
    pub detail: String,
    /// Whether it answered `/test` again after dying (probed for a while after
    /// an unresponsive death; a killed or exited process never does).
    pub answered_again: Option<bool>,
}

/// A target that stopped answering after a level and came back by itself.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Recovery {
    /// The level after which it stopped answering.
    pub level: usize,
    /// Seconds from the end of that level until `/test` answered again.
    pub after_s: f64,
    /// Why the first probe failed (and what the process said).
    pub detail: String,
}

/// Whether a step ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// It ran.
    Run,
    /// Not run: the target was down.
    NotRunDown,
    /// Not run: the sweep was interrupted.
    NotRunInterrupted,
    /// The client failed (JMeter did not run or wrote no JTL): no figures.
    ClientFailed,
    /// Not run: its connections need more descriptors than the target's
    /// `RLIMIT_NOFILE` allows, less a spare, and it has no admission control
    /// to refuse the rest (or, with `--client jmeter`, more than the
    /// client's: JMeter is one process).
    NotRunLimit,
    /// Not run: at a lower level the target's answers came in waves, its
    /// slowest past `--stop-after-waves` × the delay (a pool of threads
    /// that each sleep the delay: each level more only adds a wave; the
    /// main job stops there to keep its time).
    NotRunWaves,
}

/// One level of one target.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Step {
    /// Concurrent requests.
    pub level: usize,
    /// Whether it ran.
    pub status: StepStatus,
    /// What the load side saw (when run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<StepLoad>,
    /// 2xx within the timeout, over the level.
    pub success_rate: Option<f64>,
    /// Response times of the 2xx answers, ms.
    pub min_ms: Option<f64>,
    /// Median.
    pub p50_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Slowest.
    pub max_ms: Option<f64>,
    /// The target's peak charged memory during the step, page cache excluded, bytes (sampled every 50 ms).
    pub peak_memory_bytes: Option<u64>,
    /// The cgroup's own peak (page cache included), bytes.
    pub cgroup_peak_bytes: Option<u64>,
    /// The target's peak OS threads during the step (sampled every 50 ms).
    pub peak_threads: Option<u64>,
    /// A JVM target's peak heap in use during the step, bytes (its
    /// performance counters, as `jstat -gc` reads them, sampled every 50 ms;
    /// live objects and garbage not yet collected alike).
    pub peak_heap_bytes: Option<u64>,
    /// A JVM target's stop-the-world collector pauses during the step, ms
    /// (its performance counters before and after the step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc_pause_ms: Option<f64>,
    /// Whether the target was alive and answering after the step.
    pub alive_after: Option<bool>,
    /// When it did not answer `/test` within 2 s after the step but answered
    /// again while it was probed: the seconds from the end of the step until
    /// it did (the target recovered, and its later levels ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered_after_s: Option<f64>,
    /// The target's worker processes: `lean`'s `--processes`, 1 for
    /// blocklab's other models, `None` for a peer (its own affair).
    pub workers: Option<usize>,
    /// When lean ran fewer workers than the level's connections would need
    /// under the descriptor limit: about how many requests its admission
    /// budget (the cap less what admission control keeps free) holds, at the
    /// cost per request measured by the levels held before, for which the
    /// workers were sized.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_holds: Option<usize>,
}

impl Step {
    /// A step that did not run.
    pub fn not_run(level: usize, status: StepStatus) -> Step {
        Step {
            level,
            status,
            load: None,
            success_rate: None,
            min_ms: None,
            p50_ms: None,
            p99_ms: None,
            max_ms: None,
            peak_memory_bytes: None,
            cgroup_peak_bytes: None,
            peak_threads: None,
            peak_heap_bytes: None,
            gc_pause_ms: None,
            alive_after: None,
            recovered_after_s: None,
            workers: None,
            cap_holds: None,
        }
    }
}

/// One target's sweep.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TargetResult {
    /// Its name.
    pub name: String,
    /// What it is built on, as its charts draw it (blocklab, jvm, go, …).
    pub family: crate::page::Family,
    /// The command that started it (none for `--url`).
    pub command: Option<String>,
    /// The memory cap applied, bytes (`None`: uncapped).
    pub cap_bytes: Option<u64>,
    /// How the cap was applied, or why not.
    pub cap: String,
    /// What it held idle, bytes: before the first level (after a JVM's
    /// warm-up), its cgroup's charge less page cache, or its processes'
    /// resident memory when it has no cgroup (`None`: not started, or a
    /// running service).
    pub idle_bytes: Option<u64>,
    /// Its steps, one per level.
    pub steps: Vec<Step>,
    /// Where and how it died, if it did. A target that stopped answering
    /// and answered again is not dead: see [`TargetResult::recoveries`].
    pub died: Option<Death>,
    /// Each time it stopped answering `/test` after a level and answered
    /// again while it was probed.
    pub recoveries: Vec<Recovery>,
    /// The highest level answered 100 % within the timeout.
    pub highest_full_success: Option<usize>,
    /// Memory per in-flight request (the slope over the levels held at 100 %).
    pub per_request: Option<PerRequest>,
    /// Steps whose client failed, with why (`--client jmeter`).
    pub client_failures: Vec<String>,
    /// What a target was sent before the first level, and how it went: a
    /// JVM's warm-up, or the burst that teaches admission control its costs
    /// (`None`: neither).
    pub warmup: Option<String>,
    /// Whether it refuses what does not fit (`--admission auto`: `lean` and
    /// `reactive`): it then runs every level, past its descriptors too.
    pub admission: bool,
    /// Its own descriptor limit (the highest soft `RLIMIT_NOFILE` of its
    /// processes, read once it runs); without admission control, levels
    /// above it less [`super::run::SPARE_DESCRIPTORS`] are not run.
    pub descriptor_limit: Option<u64>,
}

impl TargetResult {
    /// A target before anything is known of it: no step, no cap, no death.
    pub fn new(name: &str, family: crate::page::Family) -> TargetResult {
        TargetResult {
            name: name.to_string(),
            family,
            command: None,
            cap_bytes: None,
            cap: "none".to_string(),
            idle_bytes: None,
            steps: Vec::new(),
            died: None,
            recoveries: Vec::new(),
            highest_full_success: None,
            per_request: None,
            client_failures: Vec::new(),
            warmup: None,
            admission: false,
            descriptor_limit: None,
        }
    }

    /// The levels not run for want of descriptors.
    pub fn limited_levels(&self) -> Vec<usize> {
        self.steps.iter().filter(|s| s.status == StepStatus::NotRunLimit).map(|s| s.level).collect()
    }
}

/// The whole sweep.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SweepResults {
    /// The format of this document.
    pub schema: &'static str,
    /// When it started (RFC 3339).
    pub started: String,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Stopped by SIGINT/SIGTERM before the end.
    pub interrupted: bool,
    /// `--quick`: a first look (three levels, a short delay), not figures.
    pub quick: bool,
    /// Who sent the requests: `blocklab` or `jmeter`.
    pub client: super::plan::Client,
    /// The client in words, with its version.
    pub client_detail: String,
    /// The `/delay` of every request, ms.
    pub delay_ms: u64,
    /// The per-request limit, ms.
    pub timeout_ms: u64,
    /// The levels.
    pub levels: Vec<usize>,
    /// CPUs of the targets and of the load.
    pub placement: Placement,
    /// The JVM peers' options.
    pub jvm_opts: String,
    /// The Rust targets' allocator and its settings.
    pub allocator: String,
    /// Things the reader must know (no cap, shared CPUs, peers not built).
    pub warnings: Vec<String>,
    /// The descriptor limit (`RLIMIT_NOFILE`, soft) the sweep ran with, and
    /// gave its targets and client processes.
    pub descriptor_limit: Option<u64>,
    /// The machine.
    pub machine: crate::harness::conditions::Machine,
    /// The command that made this run (`blocklab sweep …`, or `blocklab studies` for the main job).
    pub command: String,
    /// blocklab's, rustc's and the key crates' versions, and Java's when a JVM peer ran.
    pub versions: std::collections::BTreeMap<String, String>,
    /// Per target.
    pub targets: Vec<TargetResult>,
}

/// One target's memory per in-flight request (computed in `memory.rs`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PerRequest {
    /// The levels the slopes are taken over (held at 100 %, alive after).
    pub levels: Vec<usize>,
    /// Whole process (cgroup peak), KiB per request.
    pub process_kib: Option<f64>,
    /// Cgroup usage less page cache, KiB per request.
    pub less_cache_kib: Option<f64>,
    /// A JVM's heap in use, KiB per request.
    pub heap_kib: Option<f64>,
}
