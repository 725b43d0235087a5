//! How study 2 runs: each target (a server model, a server peer, or any URL)
//! gets a fresh process in a memory-capped cgroup of its own, pinned apart
//! from the load; the number of concurrent slow requests is stepped up; after
//! each step the target is checked for life (process, OOM kills, `/test`),
//! and a target that died is recorded with how and where, its remaining
//! levels not run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::plan::{JVM_OPTS, SweepPlan};
use super::report;
use super::results::{Death, DeathKind, Step, StepStatus, SweepResults, TargetResult};
use super::step;
use super::target::Target;
use crate::harness::cgroup::MemoryCgroup;
use crate::harness::placement;
use crate::harness::target::ServerProcess;

/// Runs the sweep; `interrupt` set (SIGINT) stops it between and within steps.
pub fn run(plan: &SweepPlan, interrupt: &AtomicBool) -> anyhow::Result<SweepResults> {
    let started_at = Instant::now();
    let mut warnings: Vec<String> = plan.placement.warning().into_iter().collect();
    if !plan.use_cgroups {
        warnings
            .push("cgroups off (--no-cgroup): targets run uncapped and their memory is not measured".into());
    } else if let Err(e) = crate::harness::cgroup::available() {
        warnings.push(format!("no memory cap can be set ({e}): targets run uncapped"));
    }
    for w in &warnings {
        eprintln!("blocklab: warning: {w}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.placement.load_cpus.len().max(1))
        .enable_all()
        .build()?;
    let mut results = SweepResults {
        schema: "blocklab-sweep/1",
        started: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        wall_s: 0.0,
        interrupted: false,
        delay_ms: plan.delay.as_millis() as u64,
        timeout_ms: plan.timeout.as_millis() as u64,
        levels: plan.levels.clone(),
        placement: plan.placement.clone(),
        jvm_opts: std::env::var("JAVA_OPTS").unwrap_or_else(|_| JVM_OPTS.to_string()),
        allocator: "mimalloc, built without transparent huge pages (feature no_thp)".to_string(),
        warnings,
        machine: crate::harness::conditions::machine(),
        versions: crate::harness::conditions::versions(),
        targets: Vec::new(),
    };
    for target in &plan.targets {
        if let Target::Peer { name, .. } = target {
            if !plan.peers.is_built(name) {
                let w = skipped_peer(plan, name);
                eprintln!("blocklab: warning: {w}");
                results.warnings.push(w);
                continue;
            }
            if let Some(peer) = plan.peers.get(name) {
                results.versions.insert(name.clone(), peer.versions.clone());
            }
            if target.is_jvm()
                && !results.versions.contains_key("java")
                && let Ok(out) = Command::new("java").arg("-version").output()
            {
                let text = String::from_utf8_lossy(&out.stderr);
                results.versions.insert("java".to_string(), text.lines().next().unwrap_or("").to_string());
            }
        }
        let result = sweep_target(plan, target, &runtime, interrupt);
        results.targets.push(result);
        if interrupt.load(Relaxed) {
            results.interrupted = true;
            break;
        }
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
    results.wall_s = started_at.elapsed().as_secs_f64();
    Ok(results)
}

/// Why the peer `name` is skipped, and the one command that would add it.
fn skipped_peer(plan: &SweepPlan, name: &str) -> String {
    let missing = plan.peers.get(name).map(crate::harness::peers::Peer::missing).unwrap_or_default();
    let script = "scripts/peers";
    if missing.is_empty() {
        format!("{name} is not built: run {script} build {name}; the other targets run")
    } else {
        format!(
            "{name} is not built and needs {} (not on PATH): run {script} install && {script} build {name}; \
             the other targets run",
            missing.join(", ")
        )
    }
}

/// The command that starts `target`, pinned to the targets' CPUs.
fn command_for(plan: &SweepPlan, target: &Target) -> Command {
    let mut command = Command::new("taskset");
    command.args(["-c", &placement::list(&plan.placement.server_cpus)]);
    match target {
        Target::Model(model) => {
            command.arg(&plan.exe).args(["serve", "--listen", "127.0.0.1:0", "--nodes", "100", "--model"]);
            command.arg(model.name());
        }
        Target::Peer { name, .. } => {
            let run = plan.peers.run_command(name, "127.0.0.1:0");
            command.arg(run.get_program()).args(run.get_args());
        }
        Target::Url { .. } => unreachable!("a URL target has no command"),
    }
    command
}

fn sweep_target(
    plan: &SweepPlan,
    target: &Target,
    runtime: &tokio::runtime::Runtime,
    interrupt: &AtomicBool,
) -> TargetResult {
    let name = target.name();
    let mut result = TargetResult {
        name: name.clone(),
        command: None,
        cap_bytes: None,
        cap: "none".to_string(),
        steps: Vec::new(),
        died: None,
        highest_full_success: None,
    };
    let (addr, host, path) = match target {
        Target::Url { addr, host, path, .. } => {
            result.cap = "none: a running service (--url) is not managed".to_string();
            (*addr, host.clone(), path.clone())
        }
        _ => (
            "127.0.0.1:0".parse().expect("valid"),
            String::new(),
            format!("/delay?ms={}", plan.delay.as_millis()),
        ),
    };
    // The managed process and its cgroup (dropped in this order: process first).
    let mut cgroup = None;
    let mut server = None;
    if !matches!(target, Target::Url { .. }) {
        let cap = if target.is_jvm() { plan.jvm_memory } else { Some(plan.memory) };
        let mut command = command_for(plan, target);
        result.command = Some(describe(&command));
        if plan.use_cgroups {
            let cgroup_name = format!("blocklab-sweep-{}-{name}", std::process::id());
            match MemoryCgroup::create(&cgroup_name, cap) {
                Ok(c) => {
                    result.cap_bytes = cap;
                    result.cap = match cap {
                        Some(bytes) => {
                            format!("{} MiB, whole process (cgroup {:?})", bytes >> 20, c.version())
                        }
                        None => format!("heap only ({JVM_OPTS}); measured in a cgroup {:?}", c.version()),
                    };
                    command = c.wrap(&command);
                    cgroup = Some(c);
                }
                Err(e) => result.cap = format!("none: {e}"),
            }
        }
        match ServerProcess::spawn(command, Duration::from_secs(60)) {
            Ok(s) => server = Some(s),
            Err(e) => {
                eprintln!("sweep: {name} did not start: {e}");
                result.died = Some(Death { level: 0, how: DeathKind::DidNotStart, detail: e });
            }
        }
    }
    let (addr, host) = match &server {
        Some(s) => (s.addr(), s.addr().to_string()),
        None => (addr, host),
    };
    for &level in &plan.levels {
        if result.died.is_some() {
            result.steps.push(Step::not_run(level, StepStatus::NotRunDown));
            continue;
        }
        if interrupt.load(Relaxed) {
            result.steps.push(Step::not_run(level, StepStatus::NotRunInterrupted));
            continue;
        }
        let pid = server.as_ref().map(ServerProcess::pid);
        if let Some(c) = &cgroup {
            c.reset_peak();
        }
        let oom_before = cgroup.as_ref().map_or(0, MemoryCgroup::oom_kills);
        let threads_before = pid.and_then(threads_of);
        let sampler = Sampler::start(pid, cgroup.as_ref().map(|c| c.path().to_path_buf()));
        let load = runtime.block_on(async {
            tokio::select! {
                load = step::run(addr, &host, &path, level, plan.timeout) => Some(load),
                () = interrupted(interrupt) => None,
            }
        });
        let (peak_threads, peak_memory) = sampler.stop();
        let peak_threads = peak_threads.max(threads_before);
        let Some(load) = load else {
            result.steps.push(Step::not_run(level, StepStatus::NotRunInterrupted));
            continue;
        };
        let died = check_life(runtime, server.as_mut(), cgroup.as_ref(), oom_before, addr, &host, level);
        let rate = load.success_rate(level);
        let step = Step {
            level,
            status: StepStatus::Run,
            success_rate: Some(rate),
            min_ms: load.quantile_ms(0.0),
            p50_ms: load.quantile_ms(0.5),
            p99_ms: load.quantile_ms(0.99),
            max_ms: load.quantile_ms(1.0),
            peak_memory_bytes: peak_memory,
            cgroup_peak_bytes: cgroup.as_ref().and_then(MemoryCgroup::peak),
            peak_threads,
            alive_after: Some(died.is_none()),
            load: Some(load),
        };
        eprintln!("sweep: {}", report::progress_line(&name, &step, died.as_ref()));
        if rate >= 1.0 && died.is_none() {
            result.highest_full_success = Some(level);
        }
        result.steps.push(step);
        result.died = died;
        // Drain: the step's connections are closed; let the target see it.
        std::thread::sleep(Duration::from_millis(300));
    }
    if let Some(mut s) = server {
        s.stop(Duration::from_secs(5));
    }
    drop(cgroup);
    result
}

/// Resolves once `interrupt` is set.
async fn interrupted(interrupt: &AtomicBool) {
    while !interrupt.load(Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// After a step: alive? OOM-killed? still answering within 2 s?
fn check_life(
    runtime: &tokio::runtime::Runtime,
    mut server: Option<&mut ServerProcess>,
    cgroup: Option<&MemoryCgroup>,
    oom_before: u64,
    addr: SocketAddr,
    host: &str,
    level: usize,
) -> Option<Death> {
    if let Some(server) = &mut server
        && let Err(detail) = server.check_alive()
    {
        let oom = cgroup.is_some_and(|c| c.oom_kills() > oom_before);
        let how = if oom { DeathKind::OomKilled } else { DeathKind::Exited };
        return Some(Death { level, how, detail });
    }
    // A managed target answers /test; a running service (--url) anything at /.
    let probe_path = if server.is_some() { "/test" } else { "/" };
    let unanswered = runtime.block_on(step::probe(addr, host, probe_path, Duration::from_secs(2))).err()?;
    // What the process said last (a JVM's OutOfMemoryError, say) explains it.
    let tail = server.map(|s| s.stderr_tail()).unwrap_or_default();
    let detail =
        if tail.is_empty() { unanswered } else { format!("{unanswered}; stderr: {}", last_lines(&tail, 5)) };
    Some(Death { level, how: DeathKind::Unresponsive, detail })
}

/// Samples a process's threads and its cgroup's memory (page cache excluded)
/// every 50 ms, from a thread of its own.
struct Sampler {
    stop: std::sync::Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Option<u64>, Option<u64>)>,
}

impl Sampler {
    fn start(pid: Option<u32>, cgroup: Option<PathBuf>) -> Sampler {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut threads, mut memory): (Option<u64>, Option<u64>) = (None, None);
            loop {
                if let Some(n) = pid.and_then(threads_of) {
                    threads = Some(threads.unwrap_or(0).max(n));
                }
                if let Some(dir) = &cgroup
                    && let Some(bytes) = crate::harness::cgroup::usage_less_cache(dir)
                {
                    memory = Some(memory.unwrap_or(0).max(bytes));
                }
                if stopped.load(Relaxed) {
                    return (threads, memory);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Sampler { stop, thread }
    }

    fn stop(self) -> (Option<u64>, Option<u64>) {
        self.stop.store(true, Relaxed);
        self.thread.join().unwrap_or((None, None))
    }
}

/// The last `n` lines of `text`, joined with " | ".
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// The OS threads of process `pid` now.
fn threads_of(pid: u32) -> Option<u64> {
    crate::proc::threads(crate::proc::Pid::Of(pid))
}

/// A command as one line, for the outputs.
fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
