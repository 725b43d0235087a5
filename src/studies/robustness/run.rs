//! How study 2 runs: each target (a server model, a server peer, or any URL)
//! gets a fresh process in a memory-capped cgroup of its own, pinned apart
//! from the load; the number of concurrent slow requests is stepped up; after
//! each step the target is checked for life (process, OOM kills, `/test`),
//! and a target that died is recorded with how and where, its remaining
//! levels not run.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::jmeter;
use super::plan::{Client, SweepPlan};
use super::report;
use super::results::{Death, DeathKind, Recovery, Step, StepStatus, SweepResults, TargetResult};
use super::step;
use crate::harness::cgroup::MemoryCgroup;
use crate::harness::launch::{Covers, MemoryCap, Spec};
use crate::harness::placement;
use crate::harness::process::ServerProcess;
use crate::harness::sampler::Sampler;
use crate::harness::target::Target;
use crate::server::Model;
use crate::server::model::AdmissionMode;

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
    let (descriptor_limit, warning) = descriptors_for(plan);
    warnings.extend(warning);
    for w in &warnings {
        eprintln!("blocklab: warning: {w}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.placement.load_cpus.len().max(1))
        .enable_all()
        .build()?;
    let client_detail = match plan.client {
        Client::Blocklab => {
            "blocklab's own load generator: the level's N connections opened first, then one \
                             request sent on each at once"
                .to_string()
        }
        Client::Jmeter => {
            std::fs::create_dir_all(plan.out.join("jtl"))?;
            format!(
                "JMeter, the seed's client (the jmeter peer: {}): one thread group of N threads, ramp-up 0, one \
                 GET each; JMeter starts them one by one (see each step's spread); JTLs in jtl/",
                plan.available.peers.get(jmeter::PEER).map_or("", |p| p.versions.as_str())
            )
        }
    };
    let mut results = SweepResults {
        schema: "blocklab-sweep/2",
        client: plan.client,
        client_detail,
        started: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        wall_s: 0.0,
        interrupted: false,
        quick: plan.quick,
        delay_ms: plan.delay.as_millis() as u64,
        timeout_ms: plan.timeout.as_millis() as u64,
        levels: plan.levels.clone(),
        placement: plan.placement.clone(),
        jvm_opts: plan.jvm_opts.clone(),
        allocator: "mimalloc, built without transparent huge pages (feature no_thp); reactive, under \
                    admission control in its cap, returns freed memory at once (MIMALLOC_PURGE_DELAY=0)"
            .to_string(),
        warnings,
        descriptor_limit,
        machine: crate::harness::conditions::machine(),
        command: crate::harness::conditions::command(),
        versions: crate::harness::conditions::versions(),
        targets: Vec::new(),
    };
    for target in &plan.targets {
        if let Target::Peer(peer) = target {
            let name = &peer.name;
            if !plan.available.is_built(target) {
                let w = plan.available.why_skipped(target);
                eprintln!("sweep: {w}");
                results.warnings.push(w);
                continue;
            }
            results.versions.insert(name.clone(), peer.versions.clone());
            if target.is_jvm()
                && !results.versions.contains_key("java")
                && let Ok(out) = Command::new("java").arg("-version").output()
            {
                let text = String::from_utf8_lossy(&out.stderr);
                results.versions.insert("java".to_string(), text.lines().next().unwrap_or("").to_string());
            }
        }
        let result = sweep_target(plan, target, &runtime, interrupt, descriptor_limit);
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

/// Descriptors beyond a level's connections, on either side: the sweep's
/// probes and files; a target's listener, jars and files (a Spring Boot JVM
/// holds ~100).
pub const SPARE_DESCRIPTORS: u64 = 1024;

/// Raises the descriptor limit (soft and, with CAP_SYS_RESOURCE, hard) to
/// what the highest level needs on each side — the sweep holds a socket per
/// connection, and so does the target, which inherits the limit (a JVM and
/// Go raise their soft limit to the hard one; blocklab too). Returns the
/// limit in force, and a warning naming the levels it stops: only JMeter's,
/// which is one process; blocklab's client splits a level over several
/// processes ([`super::agents`]), and a target's own limit is read from it
/// once it runs ([`TargetDescriptors`]).
fn descriptors_for(plan: &SweepPlan) -> (Option<u64>, Option<String>) {
    let top = plan.levels.iter().copied().max().unwrap_or(0) as u64;
    let wanted = top + SPARE_DESCRIPTORS;
    let Some(limit) = crate::harness::raise_nofile_to(wanted) else { return (None, None) };
    if plan.client != Client::Jmeter {
        return (Some(limit), None);
    }
    let stopped: Vec<String> =
        plan.levels.iter().filter(|l| !fits(**l, Some(limit))).map(ToString::to_string).collect();
    let warning = (!stopped.is_empty()).then(|| {
        format!(
            "the descriptor limit is {limit} (RLIMIT_NOFILE; raising its hard limit to {wanted} takes \
             CAP_SYS_RESOURCE, which this process lacks): levels {} are not run with JMeter, one process \
             holding a descriptor per connection",
            stopped.join(", ")
        )
    });
    (Some(limit), warning)
}

/// Whether a level's connections fit under the descriptor `limit`.
fn fits(level: usize, limit: Option<u64>) -> bool {
    limit.is_none_or(|limit| level as u64 + SPARE_DESCRIPTORS <= limit)
}

/// Whether `target` refuses what does not fit (`--admission auto`, the
/// default of `lean` and `reactive`): past its descriptors it accepts and
/// closes at once, so it runs every level. Any other target, past its
/// descriptors, leaves connections in the kernel's accept queue, where
/// they wait unseen: such a level measures the limit, not the server.
fn admits(target: &Target) -> bool {
    matches!(target, Target::Blocklab(Some(model)) if model.default_admission() == AdmissionMode::Auto)
}

/// The most worker processes the sweep gives lean by itself (a descriptor
/// limit near the spare would otherwise ask for hundreds).
pub const MAX_LEAN_PROCESSES: usize = 16;

/// `lean`'s worker processes (`serve --processes`) at `level`:
/// `--lean-processes`, or as many as the level needs for each worker to
/// hold its share of the connections under the descriptor limit, less the
/// spare.
/// (SO_REUSEPORT spreads connections over the workers by a hash of their
/// addresses: at 50,000 over 3 workers, shares differ by about a hundred.)
pub fn lean_processes(plan: &SweepPlan, level: usize, descriptor_limit: Option<u64>) -> usize {
    if let Some(n) = plan.lean_processes {
        return n;
    }
    let top = level;
    let per_worker =
        descriptor_limit.map_or(usize::MAX, |l| l.saturating_sub(SPARE_DESCRIPTORS).max(1) as usize);
    top.div_ceil(per_worker).max(1)
}

/// What lean's admission control admits to under a cap of `cap` bytes: the
/// cap less the share it keeps free (`serve --admission-reserve`, whose
/// default the sweep's targets run with).
fn admission_budget(cap: u64) -> u64 {
    cap - cap / 100 * u64::from(crate::server::model::Model::Lean.default_admission_reserve())
}

/// The descriptor limit of a running target: the highest soft
/// `RLIMIT_NOFILE` among its processes (its cgroup's, or its own pid's), as
/// read from `/proc` once it is up — a JVM and Go raise theirs as they
/// start, so what the sweep gave it is not what it runs with.
fn target_descriptors(server: &ServerProcess, cgroup: Option<&MemoryCgroup>) -> Option<u64> {
    let pids = cgroup.map(MemoryCgroup::pids).filter(|p| !p.is_empty()).unwrap_or_else(|| vec![server.pid()]);
    pids.into_iter().filter_map(|pid| crate::proc::open_files_limit(crate::proc::Pid::Of(pid))).max()
}

/// What a started target holds before any level: its cgroup's charge less
/// page cache (the kernel's share of its sockets included), or its own
/// resident memory when it runs without a cgroup.
fn idle_memory(server: &ServerProcess, cgroup: Option<&MemoryCgroup>) -> Option<u64> {
    match cgroup {
        Some(c) => crate::harness::cgroup::usage_less_cache(c.path()),
        None => crate::proc::rss_bytes(crate::proc::Pid::Of(server.pid())),
    }
}

/// The longest target name swept, for the progress lines' first column.
fn name_width(plan: &SweepPlan) -> usize {
    plan.targets.iter().map(|t| t.name().chars().count()).max().unwrap_or(0)
}

/// What starts `target`, pinned to the targets' CPUs, under the sweep's
/// memory cap: `--memory`, covering the heap of a runtime that has one (the
/// seed's heap, or `JAVA_OPTS`, for a JVM; V8's old space for Node.js) and
/// the whole process of the others; `--jvm-memory`, when given, the whole
/// process of the former. Its cgroup is measured either way, unless
/// `--no-cgroup`.
fn spec_for(plan: &SweepPlan, target: &Target, workers: Option<usize>) -> Option<Spec> {
    let cpus = placement::list(&plan.placement.server_cpus);
    let mut args: Vec<String> = match target {
        Target::Blocklab(_) => vec!["--nodes".into(), "100".into()],
        _ => Vec::new(),
    };
    if let Some(n) = workers.filter(|n| *n > 1) {
        args.extend(["--processes".to_string(), n.to_string()]);
    }
    let cap = MemoryCap {
        bytes: plan.memory,
        covers: Covers::Heap { process: plan.jvm_memory },
        jvm_opts: Some(plan.jvm_opts.clone()),
        cgroup: plan.use_cgroups.then(|| format!("blocklab-sweep-{}-{}", std::process::id(), target.name())),
    };
    Some(plan.available.spec(target, &args)?.pinned(Some(&cpus)).memory(cap))
}

/// Starts `target` (with `workers` worker processes, for lean) through the
/// launcher, writing its command and which memory setting it got into
/// `result` (or its failure to start as a death at level 0). Returns the
/// cgroup and the process, to be dropped in this order: process first.
fn start(
    plan: &SweepPlan,
    target: &Target,
    workers: Option<usize>,
    result: &mut TargetResult,
) -> (Option<MemoryCgroup>, Option<ServerProcess>) {
    let name = target.name();
    let Some(spec) = spec_for(plan, target, workers) else { return (None, None) };
    let prepared = spec.prepare();
    if let Some(memory) = prepared.memory() {
        result.cap_bytes = memory.cap_bytes;
        result.cap = memory.setting.clone();
    }
    result.command = Some(prepared.command_line());
    eprintln!("sweep: {name}: memory cap {}", result.cap);
    match prepared.serve(Duration::from_secs(60)) {
        Ok(server) => (server.cgroup, Some(server.process)),
        Err(e) => {
            eprintln!("sweep: {name} did not start: {e}");
            result.died =
                Some(Death { level: 0, how: DeathKind::DidNotStart, detail: e, answered_again: None });
            (None, None)
        }
    }
}

fn sweep_target(
    plan: &SweepPlan,
    target: &Target,
    runtime: &tokio::runtime::Runtime,
    interrupt: &AtomicBool,
    descriptor_limit: Option<u64>,
) -> TargetResult {
    let name = target.name();
    let mut result = TargetResult::new(&name, target.family());
    let (addr, host, path) = match target {
        Target::Url(service) => {
            result.cap = "none: a running service (--url) is not managed".to_string();
            (service.addr, service.host.clone(), service.path.clone())
        }
        _ => (
            "127.0.0.1:0".parse().expect("valid"),
            String::new(),
            format!("/delay?ms={}", plan.delay.as_millis()),
        ),
    };
    result.admission = admits(target);
    let is_lean = matches!(target, Target::Blocklab(Some(Model::Lean)));
    // lean's worker processes; one process for blocklab's other models; a peer's are its own.
    let mut workers = match target {
        Target::Blocklab(Some(Model::Lean)) => {
            Some(lean_processes(plan, plan.levels.first().copied().unwrap_or(1), descriptor_limit))
        }
        Target::Blocklab(_) => Some(1),
        _ => None,
    };
    // The managed process and its cgroup (dropped in this order: process first).
    let (mut cgroup, mut server) = start(plan, target, workers, &mut result);
    let (mut addr, mut host) = match &server {
        Some(s) => (s.addr(), s.addr().to_string()),
        None => (addr, host),
    };
    result.descriptor_limit = server.as_ref().and_then(|s| target_descriptors(s, cgroup.as_ref()));
    if target.runtime().needs_warm_up() && server.is_some() && !interrupt.load(Relaxed) {
        let warmup = warm_up(runtime, addr, &host, plan.per_address);
        eprintln!("sweep: {name}: {warmup}");
        result.warmup = Some(warmup);
    }
    result.idle_bytes = server.as_ref().and_then(|s| idle_memory(s, cgroup.as_ref()));
    // The level whose answers came in waves past --stop-after-waves × the delay.
    let mut in_waves: Option<usize> = None;
    for &level in &plan.levels {
        if result.died.is_some() {
            result.steps.push(Step::not_run(level, StepStatus::NotRunDown));
            continue;
        }
        if let Some(at) = in_waves {
            eprintln!(
                "sweep: {name} {level}: not run: its answers came in waves at {at} (--stop-after-waves)"
            );
            result.steps.push(Step::not_run(level, StepStatus::NotRunWaves));
            continue;
        }
        if interrupt.load(Relaxed) {
            result.steps.push(Step::not_run(level, StepStatus::NotRunInterrupted));
            continue;
        }
        if plan.client == Client::Jmeter && !fits(level, descriptor_limit) {
            eprintln!("sweep: {name} {level}: not run: more connections than JMeter's descriptors allow");
            result.steps.push(Step::not_run(level, StepStatus::NotRunLimit));
            continue;
        }
        if !result.admission && !fits(level, result.descriptor_limit) {
            eprintln!(
                "sweep: {name} {level}: not run: more connections than its {} descriptors allow, and no \
                 admission control to refuse the rest",
                result.descriptor_limit.unwrap_or(0)
            );
            result.steps.push(Step::not_run(level, StepStatus::NotRunLimit));
            continue;
        }
        // lean gets the worker processes this level needs: a fresh server
        // with more of them. Each costs its runtime's memory, so no more
        // than needed run at the lower levels, and no more than the cap can
        // fill with requests at the levels past what it holds: a worker
        // more would take memory the cap could give requests, and past its
        // workers' descriptors lean refuses at once.
        let by_level = lean_processes(plan, level, descriptor_limit);
        let holds = super::memory::cap_holds(&result.steps, result.cap_bytes.map(admission_budget))
            .filter(|h| is_lean && *h < level);
        let needed = holds.map_or(by_level, |h| lean_processes(plan, h, descriptor_limit));
        if let Some(now) = workers.filter(|_| is_lean)
            && server.is_some()
            && needed > now
        {
            if let Some(mut running) = server.take() {
                running.stop(Duration::from_secs(5));
            }
            drop(cgroup.take());
            let why = match holds.filter(|_| needed < by_level) {
                Some(h) => format!(
                    " ({by_level} would hold them all; its admission budget holds about {h} requests)"
                ),
                None => String::new(),
            };
            eprintln!("sweep: {name}: restarted with {needed} worker processes for {level} connections{why}");
            workers = Some(needed);
            (cgroup, server) = start(plan, target, workers, &mut result);
            let Some(s) = &server else {
                result.died.get_or_insert(Death {
                    level,
                    how: DeathKind::DidNotStart,
                    detail: "did not restart".to_string(),
                    answered_again: None,
                });
                result.steps.push(Step::not_run(level, StepStatus::NotRunDown));
                continue;
            };
            (addr, host) = (s.addr(), s.addr().to_string());
        }
        let pid = server.as_ref().map(ServerProcess::pid);
        if let Some(c) = &cgroup {
            c.reset_peak();
        }
        let oom_before = cgroup.as_ref().map_or(0, MemoryCgroup::oom_kills);
        let threads_before = pid.and_then(threads_of);
        let jvm = pid.filter(|_| target.is_jvm());
        let gc_before = jvm.and_then(crate::harness::jvm::gc);
        let sampler = Sampler::start(pid, jvm, cgroup.as_ref().map(|c| c.path().to_path_buf()));
        let per_process = plan.per_process.unwrap_or_else(|| {
            descriptor_limit.map_or(usize::MAX, |l| l.saturating_sub(SPARE_DESCRIPTORS).max(1) as usize)
        });
        let load = match plan.client {
            Client::Blocklab if level > per_process => Ok(Some(super::agents::run_split(
                &plan.available.exe,
                addr,
                &host,
                &path,
                level,
                plan.timeout,
                plan.per_address,
                per_process,
            ))),
            Client::Blocklab => Ok(runtime.block_on(async {
                tokio::select! {
                    load = step::run(addr, &host, &path, level, plan.timeout, plan.per_address) => Some(load),
                    () = interrupted(interrupt) => None,
                }
            })),
            Client::Jmeter => {
                let url = match target {
                    Target::Url(service) => service.url.clone(),
                    _ => format!("http://{addr}{path}"),
                };
                let jtl = plan.out.join("jtl").join(format!("{}-{level}.jtl", file_name(&name)));
                let cpus = placement::list(&plan.placement.load_cpus);
                jmeter::run(&plan.available.peers, &url, level, plan.timeout, &jtl, &cpus, interrupt)
            }
        };
        let samples = sampler.stop();
        let gc_pause_ms = match (gc_before, jvm.and_then(crate::harness::jvm::gc)) {
            (Some(a), Some(b)) => Some(b.pause.saturating_sub(a.pause).as_secs_f64() * 1e3),
            _ => None,
        };
        let peak_threads = samples.threads.max(threads_before);
        let load = match load {
            Ok(Some(load)) => load,
            Ok(None) => {
                result.steps.push(Step::not_run(level, StepStatus::NotRunInterrupted));
                continue;
            }
            Err(e) => {
                eprintln!("sweep: {name} {level}: the client failed: {e}");
                result.client_failures.push(format!("{level}: {e}"));
                result.steps.push(Step::not_run(level, StepStatus::ClientFailed));
                continue;
            }
        };
        let died = check_life(runtime, server.as_mut(), cgroup.as_ref(), oom_before, addr, &host, level)
            .or_else(|| workers_killed(server.as_ref(), cgroup.as_ref(), oom_before, workers, level));
        let rate = load.success_rate(level);
        let mut step = Step {
            level,
            status: StepStatus::Run,
            success_rate: Some(rate),
            min_ms: load.quantile_ms(0.0),
            p50_ms: load.quantile_ms(0.5),
            p99_ms: load.quantile_ms(0.99),
            max_ms: load.quantile_ms(1.0),
            peak_memory_bytes: samples.memory,
            cgroup_peak_bytes: cgroup.as_ref().and_then(MemoryCgroup::peak),
            peak_threads,
            peak_heap_bytes: samples.heap,
            gc_pause_ms,
            alive_after: Some(died.is_none()),
            recovered_after_s: None,
            workers,
            cap_holds: holds.filter(|_| workers.is_some_and(|w| w < by_level)),
            load: Some(load),
        };
        eprintln!("sweep: {}", report::progress_line(&name, name_width(plan), &step, died.as_ref()));
        if rate >= 1.0 && died.is_none() {
            result.highest_full_success = Some(level);
        }
        // A target that answers again is alive: the seed's question is how far
        // a server survives, so a recovered target runs its later levels (the
        // seed's WebFlux "still returns a response" at 2000 is this case).
        match died.map(|d| answers_again(runtime, server.as_mut(), d, addr, &host, plan.recheck)) {
            Some(Ok(recovery)) => {
                step.recovered_after_s = Some(recovery.after_s);
                result.recoveries.push(recovery);
            }
            Some(Err(death)) => result.died = Some(death),
            None => {}
        }
        let waves = plan.stop_after_waves.map(|k| f64::from(k) * plan.delay.as_secs_f64() * 1000.0);
        if waves.is_some_and(|limit| step.max_ms.is_some_and(|max| max > limit)) {
            in_waves = Some(level);
        }
        result.steps.push(step);
        // Drain: the step's connections are closed; let the target see it.
        std::thread::sleep(Duration::from_millis(300));
    }
    result.per_request = super::memory::per_request(&result.steps);
    if let Some(mut s) = server {
        s.stop(Duration::from_secs(5));
    }
    drop(cgroup);
    result
}

/// Requests of each warm-up round, sent at once on as many connections.
const WARMUP_CONNECTIONS: usize = 100;
/// Rounds of `GET /test`, then as many of a short `/delay`.
const WARMUP_ROUNDS: usize = 3;
/// The short delay of the warm-up's `/delay` rounds.
const WARMUP_DELAY_MS: u64 = 20;

/// A runtime that compiles as it runs would be measured cold at the first
/// level ([`crate::harness::peers::Runtime::needs_warm_up`]: a JVM). So
/// before the first level such a target gets a few hundred requests —
/// `/test`, then a short `/delay`, on fresh connections, 100 at a time —
/// through blocklab's client whichever client the sweep uses. Returns what
/// was sent, in words.
fn warm_up(runtime: &tokio::runtime::Runtime, addr: SocketAddr, host: &str, per_address: usize) -> String {
    let started = Instant::now();
    let delay = format!("/delay?ms={WARMUP_DELAY_MS}");
    let (mut sent, mut ok) = (0, 0);
    for path in ["/test", delay.as_str()] {
        for _ in 0..WARMUP_ROUNDS {
            let load = runtime.block_on(step::run(
                addr,
                host,
                path,
                WARMUP_CONNECTIONS,
                Duration::from_secs(10),
                per_address,
            ));
            sent += WARMUP_CONNECTIONS;
            ok += load.count(step::Outcome::Ok);
        }
    }
    format!(
        "JVM warmed up before the first level: {sent} requests ({n} GET /test, then {n} GET {delay}, {WARMUP_CONNECTIONS} \
         at a time on fresh connections) in {:.1} s, {ok} answered 2xx",
        started.elapsed().as_secs_f64(),
        n = WARMUP_ROUNDS * WARMUP_CONNECTIONS,
    )
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
        return Some(Death { level, how, detail, answered_again: Some(false) });
    }
    // A managed target answers /test; a running service (--url) anything at /.
    let probe_path = if server.is_some() { "/test" } else { "/" };
    let unanswered = runtime.block_on(step::probe(addr, host, probe_path, Duration::from_secs(2))).err()?;
    // What the process said last (a JVM's OutOfMemoryError, say) explains it.
    let tail = server.map(|s| s.stderr_tail()).unwrap_or_default();
    let detail =
        if tail.is_empty() { unanswered } else { format!("{unanswered}; stderr: {}", last_lines(&tail, 5)) };
    Some(Death { level, how: DeathKind::Unresponsive, detail, answered_again: None })
}

/// What the detail of a death says when some of the target's processes were
/// OOM-killed and its main process lives on.
pub(super) const PART_KILLED: &str = "OOM-killed during the level";

/// After a step the target's main process survived: was one of its other
/// processes OOM-killed (one of lean's worker processes, a gunicorn worker)?
/// That is a death too, whatever the rest still answers: the target lost part
/// of itself to its memory, and its cgroup counted the kills.
fn workers_killed(
    server: Option<&ServerProcess>,
    cgroup: Option<&MemoryCgroup>,
    oom_before: u64,
    workers: Option<usize>,
    level: usize,
) -> Option<Death> {
    server?;
    let killed = cgroup?.oom_kills().saturating_sub(oom_before);
    if killed == 0 {
        return None;
    }
    let detail = match workers {
        Some(workers) if workers > 1 => {
            format!("{killed} of its {workers} worker processes {PART_KILLED}; the rest still serve the port")
        }
        _ => format!("{killed} of its processes {PART_KILLED}; its main process lives on"),
    };
    eprintln!("sweep: {detail}");
    Some(Death { level, how: DeathKind::OomKilled, detail, answered_again: None })
}

/// After an unresponsive step: does the target answer `/test` again within
/// `recheck` (probed every 0.5 s), the requests of the step being over? If
/// it does, it recovered (how long it took is the figure); if not, or if it
/// is killed or exits meanwhile, it is dead. The seed's Spring Web never
/// answered again ("you need to restart the system").
fn answers_again(
    runtime: &tokio::runtime::Runtime,
    mut server: Option<&mut ServerProcess>,
    mut death: Death,
    addr: SocketAddr,
    host: &str,
    recheck: Duration,
) -> Result<Recovery, Death> {
    if death.how != DeathKind::Unresponsive || server.is_none() {
        return Err(death);
    }
    let started = Instant::now();
    while started.elapsed() < recheck {
        if let Some(Err(detail)) = server.as_mut().map(|s| s.check_alive()) {
            death.how = DeathKind::Exited;
            death.detail = format!("{detail} (after it stopped answering: {})", death.detail);
            break;
        }
        if runtime.block_on(step::probe(addr, host, "/test", Duration::from_secs(2))).is_ok() {
            let after_s = started.elapsed().as_secs_f64();
            eprintln!("sweep: recovered: answered /test again {after_s:.1} s after the step");
            return Ok(Recovery { level: death.level, after_s, detail: death.detail });
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("sweep: still not answering /test {:.0} s after the step: down", recheck.as_secs_f64());
    death.answered_again = Some(false);
    Err(death)
}

/// A target's name as a file name (a `--url` has slashes).
fn file_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
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
