//! How study 1 runs: the seed study reproduced end to end.
//!
//! For each API (Test ID) a **fresh server process** is started — pinned to
//! its CPUs, ready when it prints `listening on` — and loaded `--runs` times
//! (Run IDs) by a `blocklab load` child pinned to the other CPUs, as the seed
//! restarted Play for every Test ID and ran `ab -k -c 200 -n 100000` twice.
//! While each load runs, the server's `/metrics` is scraped every 250 ms to
//! explain the numbers (worker busy ratio, blocking threads, mailboxes,
//! server-side latency); its CPU time and peak RSS come from /proc.
//!
//! What it needs from the machine (CPU placement, the server child, `/metrics`
//! scrapes, the conditions) is the [`crate::harness`]'s, shared with study 2.
//!
//! A server that fails to start or dies mid-run fails that Test ID (with the
//! reason and its stderr tail); the others still run. An interrupt stops the
//! children and the partial results are still written.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

use indicatif::{ProgressBar, ProgressStyle};

use super::ceiling::{CeilingClient, CeilingRun};
use super::link::{Link, LinkRecord};
use super::results::{
    BenchResults, ClientCeiling, Conditions, CurveStep, DbLimit, JvmFigures, Parameters, Protocol, RunRecord,
    RunStatus, TargetWarm, TestId, TestRecord, WarmUp, reads_per_request,
};
use super::stall::{StallKind, StallRecord, StallSecond, StallSpec};
use super::test_id::{HasTestId, MEASURED};
use crate::db::{DbUrl, EmbeddedRead, PgStats};
use crate::harness::conditions;
use crate::harness::database::{Engine, ManagedDatabase};
use crate::harness::jvm;
use crate::harness::launch::{self, Spec};
use crate::harness::placement::{self, Placement};
use crate::harness::process::ServerProcess;
use crate::harness::scrape::{Scrape, ServerFigures};
use crate::harness::target::{Target, Targets};
use crate::harness::toxiproxy::{Fault, Stream, Toxic};
use crate::load::report::LoadReport;
use crate::server::{Endpoint, Model};

/// The longest a fresh server is warmed before its measured runs, unless
/// told (`--warm`): see [`TARGET_WARM_WHY`].
pub const TARGET_WARM: Duration = Duration::from_secs(60);

/// One window of a fresh server's warm-up.
pub const TARGET_WARM_WINDOW: Duration = Duration::from_secs(3);

/// A server whose last two warm-up windows were no more than this above the
/// best window before them is warm.
pub const TARGET_WARM_SETTLED: f64 = 0.10;

/// Why the warm-up is as it is, as the outputs say it.
pub const TARGET_WARM_WHY: &str = "closed-loop load on the Test ID's own endpoint for every target, not counted, in \
    windows of 3 s until two windows in a row are no more than 10 % above the best before them (at most --warm): \
    with 5 s alone Play's second run of 8,000 requests was 20-60 % faster than its first on most Test IDs (its \
    JIT still compiling); at most 30 s, Play's /getData still rose at the end (232 to 1784 req/s) and its second \
    run was 35 % faster than its first (2026-12-07): at most 60 s";

/// The longest a managed database is warmed before the matrix, unless
/// told (`--db-warm`): measured from fresh starts, Neo4j settled after 211 s
/// (2026-12-07, 531f972); at cf0aa30 its windows still moved ±15 % at 300 s,
/// where five minutes more would not have settled them (the reading says how
/// much they still fell).
pub const DB_WARM_MAX: Duration = Duration::from_secs(240);

/// How often the server is scraped while the load runs.
const SCRAPE_EVERY: Duration = Duration::from_millis(250);
/// A run whose server answers no request for this long is stopped and failed.
const STALL_LIMIT: Duration = Duration::from_secs(60);

/// The database of a bench run: one the bench starts and ends, or one given.
#[derive(Debug, Clone, PartialEq)]
pub enum BenchDb {
    /// `--db neo4j|postgres`: the project's Neo4j or PostgreSQL, started on
    /// a free loopback port, pinned, seeded and warmed before the matrix,
    /// stopped and wiped after.
    Managed(Engine),
    /// `--db embedded|falkor://…|bolt://…`.
    Url(DbUrl),
}

impl BenchDb {
    /// Whether it is a PostgreSQL, managed or given.
    pub fn is_postgres(&self) -> bool {
        match self {
            BenchDb::Managed(engine) => *engine == Engine::Postgres,
            BenchDb::Url(url) => matches!(url, DbUrl::Postgres(_)),
        }
    }

    /// Parses `--db`.
    pub fn parse(s: &str) -> Result<BenchDb, String> {
        Engine::parse(s).map_or_else(|| s.parse().map(BenchDb::Url), |e| Ok(BenchDb::Managed(e)))
    }
}

impl std::fmt::Display for BenchDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchDb::Managed(engine) => write!(f, "{} (managed)", engine.name()),
            BenchDb::Url(url) => write!(f, "{url}"),
        }
    }
}

impl BenchPlan {
    /// How long each run is: "8000 requests" or "3 s".
    pub fn run_length(&self) -> String {
        match self.duration {
            Some(d) => format!("{} s", d.as_secs_f64()),
            None => format!("{} requests", self.requests),
        }
    }

    /// `--peer-pool` where it applies: to a PostgreSQL peer on PostgreSQL.
    fn peer_pool_of(&self, peer: &crate::harness::peers::Peer) -> Option<usize> {
        self.peer_pool.filter(|_| self.db.is_postgres() && peer.reads(Engine::Postgres.name()))
    }

    /// The most connections a peer's pool opens here: `--peer-pool`, else
    /// its manifest's `db_pool`.
    pub fn peer_connections(&self, peer: &crate::harness::peers::Peer) -> Option<usize> {
        self.peer_pool_of(peer).or_else(|| peer.db_connections().map(|n| n as usize))
    }

    /// A run's share of the progress bar: its requests, or its milliseconds when timed.
    fn units_per_run(&self) -> u64 {
        self.duration.map_or(self.requests, |d| d.as_millis() as u64)
    }
}

/// A whole bench run, validated.
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// The APIs, in Test ID order.
    pub apis: Vec<Endpoint>,
    /// Concurrent connections (`-c`).
    pub connections: usize,
    /// Requests per run (`-n`), unless timed.
    pub requests: u64,
    /// `--duration`: each run lasts this long instead.
    pub duration: Option<Duration>,
    /// Runs per API.
    pub runs: u32,
    /// Database.
    pub db: BenchDb,
    /// CPUs of a managed database.
    pub db_cpus: Vec<usize>,
    /// How long a managed database is warmed before the matrix.
    pub db_warm: Duration,
    /// The servers measured, in order.
    pub targets: Vec<Target>,
    /// Every target of this checkout: the blocklab binary that serves
    /// (normally this one, or `$BLOCKLAB_SERVER_EXE` to measure another
    /// build) and the peers.
    pub available: Targets,
    /// Client flags for a networked database (`--db-pool` ...), passed to each server.
    pub db_client: Vec<String>,
    /// The same settings: the pools the reading weighs rates against.
    pub db_settings: crate::db::DbSettings,
    /// `--db-rtt`: a round trip put on the link to a networked database
    /// (Toxiproxy between it and every server), or `None`: reached directly.
    pub db_rtt: Option<Duration>,
    /// Every round trip of `--db-rtt` (more than one: the curve; the first is `db_rtt`).
    pub db_rtts: Vec<Duration>,
    /// `--db-stall`: the stall each target's database endpoints meet after the matrix.
    pub db_stall: Option<StallSpec>,
    /// `--db-stall-rate`: the open-loop rate of the stall runs (None: from the ceiling and the matrix).
    pub db_stall_rate: Option<u32>,
    /// `--db-stall-apis`: the APIs that meet the stall (those of `apis` without a read are skipped).
    pub db_stall_apis: Vec<Endpoint>,
    /// `--db-stall-targets`: the targets that meet the stall, by name (empty: every target).
    pub db_stall_targets: Vec<String>,
    /// `--db-faults`: the APIs that meet the link's faults (empty: none; those without a read are skipped).
    pub db_fault_apis: Vec<Endpoint>,
    /// blocklab's server stack (`serve --model`: reactive or lean).
    pub model: Model,
    /// How the embedded database is read (`None`: a networked database, read by Cypher).
    pub embedded_read: Option<EmbeddedRead>,
    /// Simulated round trip per read.
    pub db_latency: Duration,
    /// Content nodes.
    pub nodes: u64,
    /// HTTP workers of each server (None: the server's default).
    pub workers: Option<usize>,
    /// `--quick`.
    pub quick: bool,
    /// `--cold` (or `--quick`): each fresh server measured at once, with no warm-up.
    pub cold: bool,
    /// `--warm`: each fresh server's warm-up on a Test ID, not counted.
    pub target_warm: Duration,
    /// `--db-stall-rounds`: how many times each endpoint of each target meets the stall.
    pub db_stall_rounds: u32,
    /// `--peer-pool`: the pool of every PostgreSQL peer (`--pool N`).
    pub peer_pool: Option<usize>,
    /// Output folder.
    pub out: PathBuf,
    /// The blocklab binary to run as the load generator.
    pub exe: PathBuf,
    /// Draw a progress bar.
    pub progress: bool,
    /// CPU placement.
    pub placement: Placement,
}

/// Parses `all` or a comma list of paths, names or Test IDs (`/getData`, `getDataAsync`, `9`).
pub fn parse_apis(s: &str) -> Result<Vec<Endpoint>, String> {
    if s.trim() == "all" {
        return Ok(MEASURED.to_vec());
    }
    let mut apis = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let found = MEASURED.into_iter().find(|e| {
            let path = e.path();
            item == path
                || item.eq_ignore_ascii_case(&path[1..])
                || item.parse::<u32>().ok().is_some_and(|id| e.test_id() == Some(TestId(id)))
        });
        match found {
            Some(e) if !apis.contains(&e) => apis.push(e),
            Some(_) => {}
            None => {
                let known: Vec<String> = MEASURED
                    .iter()
                    .map(|e| format!("{} ({})", e.path(), e.test_id().unwrap_or(TestId(0))))
                    .collect();
                return Err(format!("unknown API '{item}'; known: all, {}", known.join(", ")));
            }
        }
    }
    if apis.is_empty() {
        return Err("--apis names no API".to_string());
    }
    apis.sort_by_key(|e| e.test_id());
    Ok(apis)
}

/// Why a run did not produce a record.
enum RunError {
    Interrupted,
    Failed(String),
}

/// The database the servers read during a run, with what the bench knows of it.
struct Database {
    /// The URL the servers get (through their environment).
    url: DbUrl,
    /// The database's process when the bench started it.
    managed: Option<ManagedDatabase>,
    /// Its name, version and CPUs, as every output names it.
    name: String,
    /// How a managed database was warmed.
    warm_up: Option<WarmUp>,
    /// The link in front of it (`--db-rtt`), once it is open.
    link: Option<Link>,
}

impl Database {
    /// The URL the servers and the ceiling client read: through the link when there is one.
    fn served_url(&self) -> &DbUrl {
        self.link.as_ref().map_or(&self.url, Link::url)
    }
}

/// Runs the matrix. `interrupt` is checked between and during runs.
pub fn run(plan: &BenchPlan, interrupt: &AtomicBool) -> anyhow::Result<BenchResults> {
    std::fs::create_dir_all(plan.out.join("raw"))?;
    let started_at = SystemTime::now();
    let clock = Instant::now();
    // Started (and, when managed, seeded and warmed) first; dropped last,
    // which stops and wipes a managed one on every path out of here.
    let mut database = open_database(plan, interrupt)?;
    // With no --db-rtt the matrix reads the database directly; a stall opens
    // the link (no delay on it) after the matrix, for the stalls alone.
    if let Some(rtt) = plan.db_rtt {
        database.link = Some(open_link(plan, &database, rtt)?);
    }
    let (mut ceilings, best_levels) = measure_ceilings(plan, &database, "before the matrix", None, interrupt);
    let total = plan.targets.len() as u64
        * plan.apis.len() as u64
        * plan.db_rtts.len().max(1) as u64
        * u64::from(plan.runs)
        * plan.units_per_run();
    let bar = if plan.progress { ProgressBar::new(total) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}% {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    // One step per round trip of the curve (one step without it).
    let steps = plan.db_rtts.len().max(1);
    let mut step_tests: Vec<Vec<TestRecord>> = vec![Vec::new(); steps];
    let mut step_links: Vec<Option<LinkRecord>> = vec![None; steps];
    step_links[0] = database.link.as_ref().map(|l| l.record.clone());
    let stats = pg_stats(plan, &database, &bar);
    let mut interrupted = interrupt.load(Relaxed);
    let mut info = Vec::new();
    let mut runs_done = 0u64;
    for api in &plan.apis {
        if interrupted || interrupt.load(Relaxed) {
            interrupted = true;
            break;
        }
        if steps > 1
            && let Err(e) = set_curve_rtt(plan, &mut database, 0)
        {
            say(plan, &bar, format!("the curve stopped: {e}"));
            break;
        }
        let mut cells = start_cells(plan, &database, *api, &bar, interrupt);
        for (step, step_link) in step_links.iter_mut().enumerate() {
            if step > 0 {
                if interrupted || interrupt.load(Relaxed) {
                    interrupted = true;
                    break;
                }
                match set_curve_rtt(plan, &mut database, step) {
                    Ok(record) => {
                        step_link.get_or_insert(record);
                    }
                    Err(e) => {
                        say(plan, &bar, format!("the curve stopped: {e}"));
                        break;
                    }
                }
                for cell in &mut cells {
                    cell.done.push(cell.record.clone());
                    cell.record.runs.clear();
                    cell.record.warm = None;
                }
                settle_cells(plan, &mut cells, *api, step, &bar, interrupt);
            }
            for run_id in 1..=plan.runs {
                for cell in round_order(&mut cells, run_id) {
                    let Some(server) = cell.server.as_mut() else { continue };
                    if interrupted || interrupt.load(Relaxed) {
                        interrupted = true;
                        break;
                    }
                    let who =
                        format!("{} Test ID {} {}", cell.record.target, cell.record.test_id, api.path());
                    bar.set_message(format!("{who} run {run_id}/{}", plan.runs));
                    let measured = Measured {
                        api: *api,
                        target: &cell.record.target,
                        scraped: matches!(cell.target, Target::Blocklab(_)),
                        db: database.managed.as_ref(),
                        link: database.link.as_ref(),
                        stats: stats.as_ref(),
                        step,
                    };
                    if let Err(e) = server.pause(false) {
                        say(plan, &bar, format!("{who}: {e}"));
                    }
                    let outcome = run_once(
                        plan,
                        &measured,
                        run_id,
                        server,
                        &bar,
                        runs_done * plan.units_per_run(),
                        interrupt,
                    );
                    drain(server);
                    if let Err(e) = server.pause(true) {
                        say(plan, &bar, format!("{who}: {e}"));
                    }
                    runs_done += 1;
                    bar.set_position(runs_done * plan.units_per_run());
                    match outcome {
                        Ok((run, scrape_info)) => {
                            if !plan.progress {
                                say(
                                    plan,
                                    &bar,
                                    format!("{who} run {run_id}/{}: {}", plan.runs, run.summary()),
                                );
                            }
                            if info.is_empty() {
                                info = scrape_info;
                            }
                            cell.record.runs.push(run);
                        }
                        Err(RunError::Interrupted) => {
                            cell.record.status = RunStatus::Interrupted;
                            interrupted = true;
                        }
                        Err(RunError::Failed(reason)) => {
                            cell.record.status = RunStatus::Failed;
                            cell.record.failure = Some(format!("run {run_id}: {reason}"));
                            say(plan, &bar, format!("{who} run {run_id} failed: {reason}"));
                            // A failed server is measured no more.
                            if let Some(mut server) = cell.server.take() {
                                server.stop(Duration::from_secs(15));
                            }
                        }
                    }
                }
            }
        }
        for mut cell in cells {
            if let Some(mut server) = cell.server.take() {
                server.stop(Duration::from_secs(15));
                // Stopped before its runs were done: by an interrupt.
                if cell.record.status == RunStatus::Ok && cell.record.runs.len() < plan.runs as usize {
                    cell.record.status = RunStatus::Interrupted;
                }
            }
            cell.done.push(cell.record);
            for (step, record) in cell.done.into_iter().enumerate() {
                step_tests[step].push(record);
            }
        }
    }
    if steps > 1
        && let Err(e) = set_curve_rtt(plan, &mut database, 0)
    {
        say(plan, &bar, format!("the link stays at its last round trip: {e}"));
    }
    bar.finish_and_clear();
    // In target order, then Test ID, as every table reads them.
    let rank = |name: &str| plan.targets.iter().position(|t| t.name() == name).unwrap_or(usize::MAX);
    for tests in &mut step_tests {
        tests.sort_by_key(|t| (rank(&t.target), t.test_id));
    }
    let curve: Vec<CurveStep> = if steps > 1 {
        step_tests
            .iter()
            .zip(&step_links)
            .zip(&plan.db_rtts)
            .filter_map(|((tests, link), rtt)| {
                Some(CurveStep {
                    rtt_ms: rtt.as_secs_f64() * 1000.0,
                    link: link.clone()?,
                    tests: tests.clone(),
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let tests = step_tests.swap_remove(0);
    if !interrupted {
        let (after, _) =
            measure_ceilings(plan, &database, "again after the matrix", Some(&best_levels), interrupt);
        add_after(&mut ceilings, after);
    }
    let ceiling_rps = ceilings.iter().filter_map(super::results::ClientCeiling::reads_per_s).reduce(f64::max);
    let database_described = describe_db(plan, &database);
    let matrix_link = database.link.as_ref().map(|l| l.record.clone());
    let stalls = if interrupted {
        Vec::new()
    } else {
        run_stalls(plan, &mut database, &tests, ceiling_rps, interrupt)
    };
    let faults =
        if interrupt.load(Relaxed) { Vec::new() } else { run_faults(plan, &mut database, &tests, interrupt) };
    // A link opened for the stalls alone (the matrix read the database directly).
    let stall_link =
        if matrix_link.is_none() { database.link.as_ref().map(|l| l.record.clone()) } else { None };
    let info_value = |key: &str| info.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    // The database's reference client, that a peer's reads are weighed against.
    let reference = Engine::of(&database.url).map_or(CeilingClient::Blocklab, |e| CeilingClient::of(e)[1]);
    let networked = plan.db != BenchDb::Url(DbUrl::Embedded);
    let conditions = Conditions {
        machine: conditions::machine(),
        command: conditions::command(),
        placement: plan.placement.clone(),
        parameters: Parameters {
            apis: plan
                .apis
                .iter()
                .map(|e| format!("{} {}", e.test_id().unwrap_or(TestId(0)), e.path()))
                .collect(),
            connections: plan.connections,
            requests: if plan.duration.is_some() { 0 } else { plan.requests },
            run_s: plan.duration.map(|d| d.as_secs_f64()),
            runs: plan.runs,
            keep_alive: true,
            db: database.url.to_string(),
            db_latency_ms: plan.db_latency.as_secs_f64() * 1000.0,
            db_pool: networked.then_some(plan.db_settings.pool),
            db_async_connections: networked.then_some(plan.db_settings.async_connections),
            db_timeout_ms: networked.then_some(plan.db_settings.timeout.as_secs_f64() * 1000.0),
            server_model: plan.model.to_string(),
            embedded_read: plan.embedded_read.map(|r| r.to_string()),
            nodes: plan.nodes,
            workers_requested: plan.workers,
            workers: info_value("workers").and_then(|w| w.parse().ok()),
            actor_threads: info_value("actor_threads").and_then(|w| w.parse().ok()),
            quick: plan.quick,
        },
        versions: conditions::versions(),
        database: database_described,
        database_name: database.name.clone(),
        db_warm_s: database.warm_up.as_ref().map_or(0.0, |w| w.seconds),
        warm_up: database.warm_up.clone(),
        targets: plan.targets.iter().map(Target::describe).collect(),
        families: plan.targets.iter().map(|t| (t.name().to_string(), t.family())).collect(),
        db_pools: plan
            .targets
            .iter()
            .filter_map(|t| match t {
                Target::Peer(peer) => match (plan.peer_pool_of(peer), peer.db_pool.as_ref()) {
                    (Some(n), Some(_)) => Some((
                        peer.name.clone(),
                        format!("{n} (--peer-pool; its default: {})", peer.db_pool.as_deref().unwrap_or("?")),
                    )),
                    (_, pool) => pool.map(|pool| (peer.name.clone(), pool.clone())),
                },
                _ => None,
            })
            .collect(),
        db_limits: plan
            .targets
            .iter()
            .filter_map(|t| match t {
                Target::Peer(peer) if peer.db_pool.is_some() => {
                    let limits: BTreeMap<String, DbLimit> = plan
                        .apis
                        .iter()
                        .filter(|api| peer.serves(api.path()) && reads_per_request(**api) > 0.0)
                        .filter_map(|api| {
                            let (reads, what, pool) = peer.db_limit(api.path(), plan.peer_pool_of(peer))?;
                            Some((api.path().to_string(), DbLimit { reads, what, pool }))
                        })
                        .collect();
                    Some((peer.name.clone(), limits))
                }
                _ => None,
            })
            .collect(),
        link: matrix_link,
        stall_link,
        ceiling_clients: plan
            .targets
            .iter()
            .map(|t| {
                // blocklab's own client where it was measured; a peer against the database's
                // reference client (on Neo4j the Java driver, Play's: Python's is weighed
                // against it too, and the reading says so; on PostgreSQL pgbench).
                let own = matches!(t, Target::Blocklab(_))
                    && ceilings.iter().any(|c| c.client == CeilingClient::Blocklab && c.before.is_some());
                (t.name().to_string(), if own { CeilingClient::Blocklab } else { reference })
            })
            .collect(),
        ceilings,
        protocol: Some(protocol(plan)),
    };
    drop(database);
    let seed = super::results::seed_table();
    let normalized = BenchResults::normalize(&tests, &seed);
    Ok(BenchResults {
        schema: "blocklab/bench-results".to_string(),
        schema_version: super::results::SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: humantime::format_rfc3339_seconds(started_at).to_string(),
        finished_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        wall_s: clock.elapsed().as_secs_f64(),
        interrupted,
        conditions,
        tests,
        seed,
        normalized,
        stalls,
        faults,
        curve,
    })
}

/// One target's server on one Test ID in the matrix: its record, and its
/// server while it is measured (paused between its runs).
struct MatrixCell<'a> {
    target: &'a Target,
    record: TestRecord,
    server: Option<ServerProcess>,
    /// Its records at the curve's earlier round trips.
    done: Vec<TestRecord>,
}

/// Every target's fresh server for `api`, each warmed alike (unless
/// `--cold`) and then paused (SIGSTOP) until its turn: a server that waits
/// takes no CPU from the one measured (idle JVMs on the same core raised
/// blocklab's CPU per read from about 32 to 45 µs).
fn start_cells<'a>(
    plan: &'a BenchPlan,
    database: &Database,
    api: Endpoint,
    bar: &ProgressBar,
    interrupt: &AtomicBool,
) -> Vec<MatrixCell<'a>> {
    let test_id = api.test_id().unwrap_or(TestId(0));
    let mut cells = Vec::with_capacity(plan.targets.len());
    for target in &plan.targets {
        let mut record = TestRecord {
            target: target.name().to_string(),
            test_id,
            api: api.path().to_string(),
            model: api.model().to_string(),
            status: RunStatus::Ok,
            failure: None,
            warm: None,
            runs: Vec::new(),
        };
        let who = format!("{} Test ID {test_id} {}", target.name(), api.path());
        if !target.serves(api.path()) {
            record.status = RunStatus::NotServed;
            record.failure = Some(format!("not served by {}", target.name()));
            say(plan, bar, format!("{who}: not served by {}", target.name()));
            cells.push(MatrixCell { target, record, server: None, done: Vec::new() });
            continue;
        }
        if interrupt.load(Relaxed) {
            record.status = RunStatus::Interrupted;
            cells.push(MatrixCell { target, record, server: None, done: Vec::new() });
            continue;
        }
        bar.set_message(format!("{who}: starting{}", if plan.cold { "" } else { " and warming" }));
        let server = match start_server(plan, target, database, test_id) {
            Ok(server) => server,
            Err(reason) => {
                record.status = RunStatus::Failed;
                record.failure = Some(format!("server failed to start: {reason}"));
                say(plan, bar, format!("{who}: {}", record.failure.as_deref().unwrap_or("")));
                cells.push(MatrixCell { target, record, server: None, done: Vec::new() });
                continue;
            }
        };
        let mut server = server;
        if !plan.cold {
            record.warm = Some(warm_target(plan, &server, target, api, interrupt));
            if !plan.progress {
                let warm = record.warm.as_ref().map_or(String::new(), TargetWarm::summary);
                say(plan, bar, format!("{who}: warmed, not counted: {warm}"));
            }
            if let Err(reason) = server.check_alive() {
                record.status = RunStatus::Failed;
                record.failure = Some(format!("the server died during its warm-up: {reason}"));
                say(plan, bar, format!("{who}: {}", record.failure.as_deref().unwrap_or("")));
                cells.push(MatrixCell { target, record, server: None, done: Vec::new() });
                continue;
            }
        }
        if let Err(e) = server.pause(true) {
            say(plan, bar, format!("{who}: {e}"));
        }
        cells.push(MatrixCell { target, record, server: Some(server), done: Vec::new() });
    }
    cells
}

/// The cells in the order of round `run_id`: the targets' order in odd
/// rounds, reversed in even ones, so that no target is always measured
/// first (on a database still drifting) or last.
fn round_order<'c, 'a>(cells: &'c mut [MatrixCell<'a>], run_id: u32) -> Vec<&'c mut MatrixCell<'a>> {
    let mut order: Vec<&mut MatrixCell> = cells.iter_mut().collect();
    if run_id.is_multiple_of(2) {
        order.reverse();
    }
    order
}

/// How long each server meets its endpoint's load, not counted, after the
/// link moves to the curve's next round trip: its pool opens the connections
/// the new round trip asks for before it is measured.
pub const CURVE_SETTLE: Duration = Duration::from_secs(2);

/// PostgreSQL's statistics for the runs (connections by server, the reads'
/// own time), when the database is PostgreSQL and they can be read.
fn pg_stats(plan: &BenchPlan, database: &Database, bar: &ProgressBar) -> Option<PgStats> {
    let DbUrl::Postgres(target) = &database.url else { return None };
    match PgStats::connect(target) {
        Ok(stats) => {
            if !stats.has_statements() {
                say(
                    plan,
                    bar,
                    "pg_stat_statements is not created in this database: no read's own time is given                      (CREATE EXTENSION pg_stat_statements, with it in shared_preload_libraries)"
                        .to_string(),
                );
            }
            Some(stats)
        }
        Err(e) => {
            say(plan, bar, format!("PostgreSQL's statistics cannot be read: {e}"));
            None
        }
    }
}

/// Sets the link to the curve's round trip number `step` and measures it again.
fn set_curve_rtt(plan: &BenchPlan, database: &mut Database, step: usize) -> Result<LinkRecord, String> {
    let rtt = plan.db_rtts[step];
    let link = database.link.as_mut().ok_or("no link is open")?;
    if link.record.rtt_ms == rtt.as_secs_f64() * 1000.0 {
        return Ok(link.record.clone());
    }
    link.change_rtt(&database.url, rtt, plan.nodes, plan.db_settings).cloned()
}

/// Each server's load at the curve's new round trip, not counted
/// ([`CURVE_SETTLE`]), each resumed for it and paused after.
fn settle_cells(
    plan: &BenchPlan,
    cells: &mut [MatrixCell],
    api: Endpoint,
    step: usize,
    bar: &ProgressBar,
    interrupt: &AtomicBool,
) {
    let rtt_ms = plan.db_rtts[step].as_millis();
    for cell in cells.iter_mut() {
        let Some(server) = cell.server.as_mut() else { continue };
        if interrupt.load(Relaxed) {
            return;
        }
        let who = format!("{} Test ID {} {}", cell.record.target, cell.record.test_id, api.path());
        bar.set_message(format!("{who}: settling at RTT {rtt_ms} ms"));
        if let Err(e) = server.pause(false) {
            say(plan, bar, format!("{who}: {e}"));
        }
        let name = format!("settle-{}-test{}-rtt{rtt_ms}ms", cell.record.target, cell.record.test_id);
        closed_loop(plan, server, api, CURVE_SETTLE, &name);
        if let Err(e) = server.pause(true) {
            say(plan, bar, format!("{who}: {e}"));
        }
    }
}

/// The matrix's protocol, as the outputs name it.
fn protocol(plan: &BenchPlan) -> Protocol {
    let names: Vec<String> = plan.targets.iter().map(Target::name).collect();
    let order = (1..=plan.runs)
        .map(|run_id| {
            let mut round = names.clone();
            if run_id.is_multiple_of(2) {
                round.reverse();
            }
            format!("run {run_id}: {}", round.join(", "))
        })
        .collect();
    Protocol {
        cold: plan.cold,
        target_warm_s: if plan.cold { 0.0 } else { plan.target_warm.as_secs_f64() },
        target_warm_why: if plan.cold {
            "--cold: each fresh server measured at once, as the seed did".to_string()
        } else {
            TARGET_WARM_WHY.to_string()
        },
        order,
        paused: true,
    }
}

/// A fresh server's warm-up on `api`, not counted: a closed loop on the
/// matrix's connections in windows of [`TARGET_WARM_WINDOW`] until its rate
/// stops rising ([`TARGET_WARM_SETTLED`]), at most `--warm` (the same rule
/// for every target).
fn warm_target(
    plan: &BenchPlan,
    server: &ServerProcess,
    target: &Target,
    api: Endpoint,
    interrupt: &AtomicBool,
) -> TargetWarm {
    let mut warm =
        TargetWarm { seconds: 0.0, requests: 0, rps: None, windows_rps: Vec::new(), settled: false };
    while !warm.settled && !interrupt.load(Relaxed) {
        let left = plan.target_warm.saturating_sub(Duration::from_secs_f64(warm.seconds));
        if left < Duration::from_secs(1) {
            break;
        }
        let name = format!(
            "warm-{}-test{}-{}",
            target.name(),
            api.test_id().unwrap_or(TestId(0)),
            warm.windows_rps.len() + 1
        );
        let window = closed_loop(plan, server, api, left.min(TARGET_WARM_WINDOW), &name);
        warm.seconds += window.seconds;
        warm.requests += window.requests;
        if !window.answered {
            // No report: the load generator could not run; the runs will say why.
            break;
        }
        // A window with no answer in its second half is a server still starting (Play's
        // first answers on /getDataAkkaAsync2 took over 3 s): 0, and the warm-up goes on.
        let rate = window.rps.unwrap_or(0.0);
        warm.rps = Some(rate);
        warm.windows_rps.push(rate);
        warm.settled = TargetWarm::has_settled(&warm.windows_rps, TARGET_WARM_SETTLED);
    }
    warm
}

/// A closed loop on the matrix's connections against `server`'s `api` for
/// `length`, its JSON kept as `raw/NAME.json`: what it answered and its rate
/// over its second half.
fn closed_loop(
    plan: &BenchPlan,
    server: &ServerProcess,
    api: Endpoint,
    length: Duration,
    name: &str,
) -> Window {
    let url = format!("http://{}{}", server.addr(), api.path());
    let json = plan.out.join(format!("raw/{name}.json"));
    let stop = ["-z".to_string(), format!("{}ms", length.as_millis())];
    let mut load = load_command(plan, &url, &json, plan.connections, &stop);
    load.stdout(Stdio::null()).stderr(Stdio::null());
    let _ = load.status();
    drain(server);
    let report: Option<LoadReport> =
        std::fs::read_to_string(&json).ok().and_then(|t| serde_json::from_str(&t).ok());
    Window {
        seconds: report.as_ref().map_or(length.as_secs_f64(), |r| r.duration_s),
        requests: report.as_ref().map_or(0, |r| r.completed),
        answered: report.is_some(),
        rps: report.and_then(|r| super::stall::steady_rps(&r.timeline)),
    }
}

/// The longest [`drain`] waits.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);

/// Waits until `server` answers `/test` again (at most [`DRAIN_LIMIT`]): a
/// timed load ends with its requests still in the server, and a server that
/// serves them one at a time (Python's loop held by a blocking read: 200
/// requests of 150 ms at a 20 ms round trip) would meet the next run with
/// 30 s of them before its first answer. A server that is gone answers
/// nothing; the run after says why.
fn drain(server: &ServerProcess) {
    let _ = crate::harness::get::get(server.addr(), "/test", DRAIN_LIMIT);
}

/// One closed loop of [`closed_loop`].
struct Window {
    seconds: f64,
    requests: u64,
    /// Whether the load generator wrote its report.
    answered: bool,
    /// Completed requests a second over its second half (none: no answer there).
    rps: Option<f64>,
}

/// The database's ceiling with every client that can measure it (a managed
/// database only), `when`.
/// The database's ceiling with each client of its engine, at each of
/// [`ceiling_levels`] (or, given `only`, at the level each client did best
/// at before: after the matrix), the better kept; with the level it was.
fn measure_ceilings(
    plan: &BenchPlan,
    database: &Database,
    when: &str,
    only: Option<&[(CeilingClient, usize)]>,
    interrupt: &AtomicBool,
) -> (Vec<ClientCeiling>, Vec<(CeilingClient, usize)>) {
    let Some(db) = database.managed.as_ref() else { return (Vec::new(), Vec::new()) };
    let clients = CeilingClient::of(db.engine());
    let pin = plan.placement.pinned.then(|| placement::list(&plan.placement.server_cpus));
    let url = database.served_url().full_url();
    let run = CeilingRun {
        db,
        url: &url,
        nodes: plan.nodes,
        concurrency: ceiling_concurrency(plan),
        cpus: pin.as_deref(),
        cpu_counts: (plan.db_cpus.len(), plan.placement.server_cpus.len()),
        quick: plan.quick,
    };
    let all_levels = ceiling_levels(run.concurrency);
    let (mut out, mut best_levels) = (Vec::new(), Vec::new());
    for client in clients {
        let levels = match only.and_then(|o| o.iter().find(|(c, _)| *c == client)) {
            Some(&(_, level)) => vec![level],
            None => all_levels.clone(),
        };
        let mut best: Option<super::ceiling::Ceiling> = None;
        let mut best_level = None;
        let (mut tried, mut failures) = (Vec::new(), Vec::new());
        for &concurrency in &levels {
            if interrupt.load(Relaxed) {
                break;
            }
            eprintln!(
                "bench: measuring the database's ceiling for the read {when} with {client} ({concurrency} reads in \
                 flight, no HTTP, where the servers run)"
            );
            let run = CeilingRun { concurrency, ..run };
            let measured = match client {
                CeilingClient::Pgbench => super::pgbench::measure(&run),
                _ => super::ceiling::measure(&plan.available.peers, &plan.exe, client, &run),
            };
            match measured {
                Ok(c) => {
                    eprintln!("bench: {client}: {}", super::ceiling::describe(&c));
                    tried.push(format!("{concurrency} → {:.0} reads/s", c.reads_per_s));
                    if best.as_ref().is_none_or(|b| c.reads_per_s > b.reads_per_s) {
                        best = Some(c);
                        best_level = Some(concurrency);
                    }
                }
                Err(why) => {
                    eprintln!("bench: no ceiling with {client} at {concurrency} in flight {when}: {why}");
                    failures.push(format!("{concurrency} in flight: {why}"));
                }
            }
        }
        if let Some(c) = best.as_mut() {
            if tried.len() > 1 {
                let asked: Vec<String> = levels.iter().map(usize::to_string).collect();
                c.client.push_str(&format!(
                    " (the better of {} reads in flight: {})",
                    asked.join(" and "),
                    tried.join(", ")
                ));
            }
            if let Some(link) = &database.link {
                c.client.push_str(&format!(", through the link (RTT {} ms)", link.record.rtt_ms));
            }
        }
        let failure = (best.is_none() && !failures.is_empty()).then(|| failures.join("; "));
        out.push(ClientCeiling { client, before: best, after: None, failure });
        best_levels.extend(best_level.map(|level| (client, level)));
    }
    (out, best_levels)
}

/// Fewer reads in flight than the largest pool, tried beside it: on one CPU
/// Neo4j answered 128 reads in flight at 186 µs of CPU a read, where a
/// server with fewer in flight got its reads at 127 (2026-12-07), so the
/// ceiling at the largest pool alone was below what a server reached.
const CEILING_FEW: usize = 16;

/// The reads in flight each client's ceiling is measured at, the best kept:
/// [`CEILING_FEW`] and `most` (the largest pool of any target).
fn ceiling_levels(most: usize) -> Vec<usize> {
    let mut levels = vec![CEILING_FEW.min(most), most];
    levels.dedup();
    levels
}

/// The measurements made after the matrix, each put beside its client's
/// first as `after`.
fn add_after(ceilings: &mut [ClientCeiling], after: Vec<ClientCeiling>) {
    for measured in after {
        if let Some(c) = ceilings.iter_mut().find(|c| c.client == measured.client) {
            c.after = measured.before;
        }
    }
}

/// Reads in flight for the ceiling: at least the largest pool of any target
/// measured (blocklab's async connections; a peer's `db_pool`, its first
/// number), so that no server has more reads in flight than its ceiling had.
fn ceiling_concurrency(plan: &BenchPlan) -> usize {
    let peers = plan.targets.iter().filter_map(|t| match t {
        Target::Peer(peer) => plan.peer_connections(peer),
        _ => None,
    });
    peers
        .chain([plan.db_settings.async_connections, super::ceiling::CONCURRENCY])
        .max()
        .unwrap_or(super::ceiling::CONCURRENCY)
}

/// The most connections the managed database must take at once: every
/// target's pools (the servers of a Test ID live side by side, paused in
/// turn), the ceiling's clients, and 10 to spare (PostgreSQL refuses a
/// connection past its `max_connections`).
fn most_connections(plan: &BenchPlan) -> usize {
    let own = plan.db_settings.pool + plan.db_settings.async_connections;
    let servers: usize = plan
        .targets
        .iter()
        .map(|t| match t {
            // Twice a peer's pool: a peer may keep a pool per driver (python-pg's two).
            Target::Peer(peer) => plan.peer_connections(peer).map_or(own, |n| 2 * n),
            _ => own,
        })
        .sum();
    servers + ceiling_concurrency(plan) + 10
}

/// The database of the run: the one given, or a Neo4j or PostgreSQL started now (pinned
/// to `--db-cpus`), seeded with the study's nodes and warmed.
fn open_database(plan: &BenchPlan, interrupt: &AtomicBool) -> anyhow::Result<Database> {
    let engine = match &plan.db {
        BenchDb::Url(url) => {
            let name = crate::harness::database::name_of(url);
            return Ok(Database { url: url.clone(), managed: None, name, warm_up: None, link: None });
        }
        BenchDb::Managed(engine) => *engine,
    };
    let cpus = placement::list(&plan.db_cpus);
    let pin = plan.placement.pinned.then_some(cpus.as_str());
    eprintln!(
        "bench: starting {engine} (scripts/{}) on a free loopback port, pinned to CPU {cpus}",
        engine.name()
    );
    let started = Instant::now();
    let db = ManagedDatabase::start(engine, &plan.available, pin, most_connections(plan))
        .map_err(|e| anyhow::anyhow!("--db {}: {e}", engine.name()))?;
    let url: DbUrl = db.url().parse().map_err(|e| anyhow::anyhow!("{}: {e}", db.url()))?;
    let name = format!(
        "{} (started by the bench on 127.0.0.1:{}, pid {}, {})",
        db.describe(),
        db.port(),
        db.pid(),
        if pin.is_some() { format!("CPU {cpus}") } else { "not pinned".to_string() }
    );
    eprintln!("bench: {name} up in {:.1} s; seeding {} nodes", started.elapsed().as_secs_f64(), plan.nodes);
    let mut database = Database { url, managed: Some(db), name, warm_up: None, link: None };
    let seeded =
        Spec::program(&plan.exe, ["seed".to_string(), "--nodes".to_string(), plan.nodes.to_string()])
            .env("BLOCKLAB_DB", database.url.full_url())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .own_group()
            .prepare()
            .into_command()
            .output()?;
    if !seeded.status.success() {
        anyhow::bail!(
            "seeding {} failed ({}): {}",
            database.url,
            seeded.status,
            String::from_utf8_lossy(&seeded.stderr).trim()
        );
    }
    if !plan.db_warm.is_zero() && !interrupt.load(Relaxed) {
        database.warm_up = Some(warm(plan, &database, interrupt)?);
    }
    Ok(database)
}

/// Toxiproxy in front of the database, with `rtt` on the link, pinned to
/// the database's CPUs: on two shared cores it is part of the machine's load.
fn open_link(plan: &BenchPlan, database: &Database, rtt: Duration) -> anyhow::Result<Link> {
    let cpus = placement::list(&plan.db_cpus);
    let pin = plan.placement.pinned.then_some(cpus.as_str());
    eprintln!(
        "bench: putting a round trip of {} between the servers and the database (Toxiproxy, CPU {cpus})",
        humantime::format_duration(rtt)
    );
    let link = Link::open(&plan.available, &database.url, rtt, plan.nodes, plan.db_settings, pin)
        .map_err(|e| anyhow::anyhow!("--db-rtt: {e}"))?;
    eprintln!("bench: {}", link.record.describe());
    Ok(link)
}

/// One window of the warm-up's load.
const WARM_WINDOW: Duration = Duration::from_secs(15);

/// Warms the database until it is warm: its JIT compiles the query path
/// under load, and on a fresh machine its CPU per read fell from 5,727 to
/// 313 µs over 3 minutes and on to 242 during the matrix (2026-12-07). A
/// measurement on a cold database is wrong by that much (a by-hand
/// comparison once made the server measured second look 3.7x faster), so
/// every target meets a warm one. Load: blocklab's `/getDataAsync` on the
/// matrix's connections, in windows of 15 s; it stops when the last three
/// windows cost the database the same CPU per read within 5 % of their mean
/// ([`WarmUp::is_settled`]), or when `--db-warm` (the maximum) runs out, and
/// says which.
fn warm(plan: &BenchPlan, database: &Database, interrupt: &AtomicBool) -> anyhow::Result<WarmUp> {
    eprintln!(
        "bench: warming the database until its CPU per read stops falling (windows of {} s, until the last {} \
         are within {:.0} % of their mean, at most {}; blocklab /getDataAsync, -c {}; --db-warm DUR sets the \
         maximum)",
        WARM_WINDOW.as_secs(),
        super::results::WARM_WINDOWS,
        super::results::WARM_SETTLED * 100.0,
        humantime::format_duration(plan.db_warm),
        plan.connections
    );
    let mut server = start_server(plan, &Target::Blocklab(None), database, TestId(0))
        .map_err(|e| anyhow::anyhow!("the warm-up server failed to start: {e}"))?;
    let url = format!("http://{}/getDataAsync", server.addr());
    let started = Instant::now();
    let mut costs: Vec<f64> = Vec::new();
    let mut settled = false;
    while !settled && !interrupt.load(Relaxed) {
        let left = plan.db_warm.saturating_sub(started.elapsed());
        if left < Duration::from_secs(1) {
            break;
        }
        let window = left.min(WARM_WINDOW);
        let json = plan.out.join(format!("raw/warm-up-{}.json", costs.len() + 1));
        let stop = ["-z".to_string(), format!("{}ms", window.as_millis())];
        let mut load = load_command(plan, &url, &json, plan.connections, &stop);
        load.stdout(Stdio::null()).stderr(Stdio::null());
        let cpu_before = database.managed.as_ref().and_then(ManagedDatabase::cpu_time);
        let status = load.status();
        let cpu = match (cpu_before, database.managed.as_ref().and_then(ManagedDatabase::cpu_time)) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => Duration::ZERO,
        };
        let report: Option<LoadReport> =
            std::fs::read_to_string(&json).ok().and_then(|t| serde_json::from_str(&t).ok());
        let Some(r) = report.filter(|r| r.completed > 0) else {
            server.stop(Duration::from_secs(15));
            anyhow::bail!("warming the database answered nothing ({status:?})");
        };
        costs.push(cpu.as_secs_f64() * 1e6 / r.completed as f64);
        settled = WarmUp::is_settled(&costs);
        eprintln!(
            "bench: warm-up window {}: {:.0} req/s, the database {:.0} µs CPU per read{}",
            costs.len(),
            r.rps,
            costs.last().copied().unwrap_or(0.0),
            if settled { " (the last three within 5 % of their mean: warm)" } else { "" }
        );
    }
    server.stop(Duration::from_secs(15));
    let warm_up = WarmUp {
        seconds: started.elapsed().as_secs_f64(),
        cpu_per_read_us: costs,
        settled,
        max_s: plan.db_warm.as_secs_f64(),
    };
    let end = warm_up.cpu_per_read_us.last().copied().unwrap_or(0.0);
    eprintln!(
        "bench: {}",
        if warm_up.settled {
            format!("warmed in {:.0} s: the database {end:.0} µs CPU per read at the end", warm_up.seconds)
        } else {
            format!(
                "warmed for {:.0} s, the maximum, and its CPU per read had not settled ({end:.0} µs at the end, \
                 {:.0} % lower than {} windows before): figures may still drift",
                warm_up.seconds,
                warm_up.still_falling().unwrap_or(0.0) * 100.0,
                super::results::WARM_WINDOWS - 1
            )
        }
    );
    Ok(warm_up)
}

/// A fresh server of `target` on `database`, pinned to the server's CPUs.
fn start_server(
    plan: &BenchPlan,
    target: &Target,
    database: &Database,
    test_id: TestId,
) -> Result<ServerProcess, String> {
    let pin = plan.placement.pinned.then(|| placement::list(&plan.placement.server_cpus));
    // No credentials on a command line (`ps` shows it to anyone, and a
    // peer's failure quoting it would land in the report): blocklab takes
    // the whole URL through its environment (BLOCKLAB_DB); a peer takes
    // `--db` without them, and them as NEO4J_USER and NEO4J_PASSWORD.
    let db = database.served_url();
    let mut args = match target {
        Target::Blocklab(_) => server_args(plan),
        _ => ["--db", &db.to_string(), "--nodes", &plan.nodes.to_string()].map(String::from).to_vec(),
    };
    if let Target::Peer(peer) = target
        && let Some(pool) = plan.peer_pool_of(peer)
    {
        args.extend(["--pool".to_string(), pool.to_string()]);
    }
    let spec =
        plan.available.spec(target, &args).ok_or("a running service has no command")?.pinned(pin.as_deref());
    let spec = match target {
        Target::Blocklab(_) => {
            spec.env("BLOCKLAB_BENCH_TEST_ID", test_id.to_string()).env("BLOCKLAB_DB", db.full_url())
        }
        _ => spec.database_credentials(db),
    };
    let ready_within = Duration::from_secs(if target.is_jvm() { 120 } else { 300 });
    Ok(launch::server(spec, ready_within)?.process)
}

/// A line for the reader: above the progress bar on a terminal; else a plain
/// line on stderr (indicatif draws nothing off a terminal, so a log or CI
/// gets a line per finished run instead of silence).
fn say(plan: &BenchPlan, bar: &ProgressBar, line: String) {
    if plan.progress {
        bar.println(line);
    } else {
        eprintln!("bench: {line}");
    }
}

fn describe_db(plan: &BenchPlan, database: &Database) -> String {
    if database.url == DbUrl::Embedded {
        return format!(
            "embedded Grafeo {}, {} Content nodes indexed on id, read by {}, simulated network round trip {} per read \
             (blocking reads sleep their thread, non-blocking reads await a timer)",
            grafeo::VERSION,
            plan.nodes,
            match plan.embedded_read {
                Some(EmbeddedRead::Cypher) => "the Cypher query (--embedded-read cypher)",
                _ => "its property index (--embedded-read index)",
            },
            humantime::format_duration(plan.db_latency)
        );
    }
    format!(
        "{} {} ({} nodes; real network round trips, no simulated latency; client flags: {}){}",
        database.url,
        database.link.as_ref().map_or_else(
            || "over loopback".to_string(),
            |l| format!("through Toxiproxy, a round trip of {} ms put on the link", l.record.rtt_ms)
        ),
        plan.nodes,
        plan.db_client.join(" "),
        if database.managed.is_some() {
            format!(
                "; seeded and warmed (until its CPU per read settled, at most {}) before the matrix, \
                 stopped and wiped after",
                humantime::format_duration(plan.db_warm)
            )
        } else {
            String::new()
        }
    )
}

fn server_args(plan: &BenchPlan) -> Vec<String> {
    // The database URL goes through the environment (BLOCKLAB_DB), so that its
    // credentials are neither on a command line (ps) nor in a report.
    let mut args = vec![
        "--nodes".to_string(),
        plan.nodes.to_string(),
        "--db-latency".to_string(),
        format!("{}us", plan.db_latency.as_micros()),
        "--model".to_string(),
        plan.model.to_string(),
    ];
    if let Some(read) = plan.embedded_read {
        args.extend(["--embedded-read".to_string(), read.to_string()]);
    }
    if plan.db != BenchDb::Url(DbUrl::Embedded) {
        args.extend(plan.db_client.iter().cloned());
    }
    if let Some(workers) = plan.workers {
        args.extend(["--workers".to_string(), workers.to_string()]);
    }
    args
}

/// What one run measures: an API of a target, scraped when it is blocklab's
/// (a peer has no `/metrics`: its figures come from /proc only).
struct Measured<'a> {
    api: Endpoint,
    target: &'a str,
    scraped: bool,
    db: Option<&'a ManagedDatabase>,
    link: Option<&'a Link>,
    /// PostgreSQL's statistics, when it is the database.
    stats: Option<&'a PgStats>,
    /// The curve's round trip number (0 without a curve).
    step: usize,
}

impl Measured<'_> {
    /// The `application_name`s the target's connections carry: blocklab's
    /// two clients, or a peer's own name.
    fn application_names(&self) -> Vec<String> {
        if self.target == super::results::BLOCKLAB {
            vec!["blocklab-async".to_string(), "blocklab-blocking".to_string()]
        } else {
            vec![self.target.to_string()]
        }
    }
}

/// One load of one API on a running server.
fn run_once(
    plan: &BenchPlan,
    cell: &Measured,
    run_id: u32,
    server: &mut ServerProcess,
    bar: &ProgressBar,
    done_before: u64,
    interrupt: &AtomicBool,
) -> Result<(RunRecord, Vec<(String, String)>), RunError> {
    let api = cell.api;
    let test_id = api.test_id().unwrap_or(TestId(0));
    let addr = server.addr();
    let mut name = if cell.target == super::results::BLOCKLAB {
        format!("test{test_id}-run{run_id}")
    } else {
        format!("{}-test{test_id}-run{run_id}", cell.target)
    };
    if plan.db_rtts.len() > 1 {
        name.push_str(&format!("-rtt{}ms", plan.db_rtts[cell.step].as_millis()));
    }
    let names = cell.application_names();
    let connections_now = || cell.stats.and_then(|s| s.connections(&names).ok());
    let mut connections_max = connections_now();
    let statements = cell.stats.filter(|s| s.reset_statements().is_ok());
    let json_rel = format!("raw/{name}.json");
    let json_path = plan.out.join(&json_rel);
    let scrape = |what: &str| {
        Scrape::fetch(addr, Duration::from_secs(5)).map_err(|e| format!("scraping /metrics {what}: {e}"))
    };
    let before = if cell.scraped { Some(scrape("before the run").map_err(RunError::Failed)?) } else { None };
    let cpu_before = server.cpu_time().unwrap_or_default();
    let db_cpu_before = cell.db.and_then(ManagedDatabase::cpu_time);
    let link_cpu_before = cell.link.and_then(Link::cpu_time);
    let server_pid = crate::proc::Pid::Of(server.pid());
    let mut threads_max = crate::proc::threads(server_pid);
    // A JVM peer's heap and collections, from its perf counters (none for blocklab).
    let gc_before = if cell.scraped { None } else { jvm::gc(server.pid()) };
    let mut heap_peak = gc_before.and_then(|_| jvm::heap_used(server.pid()));

    let stop = match plan.duration {
        Some(d) => ["-z".to_string(), format!("{}ms", d.as_millis())],
        None => ["-n".to_string(), plan.requests.to_string()],
    };
    let mut load =
        load_command(plan, &format!("http://{addr}{}", api.path()), &json_path, plan.connections, &stop);
    let text = std::fs::File::create(plan.out.join(format!("raw/{name}.txt")))
        .map_err(|e| RunError::Failed(e.to_string()))?;
    load.stdout(text).stderr(Stdio::piped());
    let mut child =
        load.spawn().map_err(|e| RunError::Failed(format!("cannot start the load generator: {e}")))?;
    let started = Instant::now();

    let mut during = Vec::new();
    let mut failures = 0;
    let mut last_count = 0.0;
    let mut last_progress = Instant::now();
    let path_label = format!("endpoint=\"{}\"", api.path());
    let mut last_scrape = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| RunError::Failed(e.to_string()))? {
            break status;
        }
        let stop_load = |child: &mut std::process::Child| {
            let _ = child.kill();
            let _ = child.wait();
        };
        if interrupt.load(Relaxed) {
            stop_load(&mut child);
            return Err(RunError::Interrupted);
        }
        if let Err(reason) = server.check_alive() {
            stop_load(&mut child);
            return Err(RunError::Failed(format!("the server died during the run: {reason}")));
        }
        if let Some(db) = cell.db
            && !db.is_alive()
        {
            stop_load(&mut child);
            return Err(RunError::Failed("the database died during the run".to_string()));
        }
        // Checked often, so the scrape after the run follows its end closely.
        std::thread::sleep(Duration::from_millis(10));
        if last_scrape.elapsed() < SCRAPE_EVERY {
            continue;
        }
        last_scrape = Instant::now();
        threads_max = threads_max.max(crate::proc::threads(server_pid));
        connections_max = connections_max.max(connections_now());
        if heap_peak.is_some() {
            heap_peak = heap_peak.max(jvm::heap_used(server.pid()));
        }
        let Some(before) = &before else {
            // A peer has no /metrics: the load generator's own timeout
            // (30 s a request) bounds the run.
            continue;
        };
        match Scrape::fetch(addr, Duration::from_secs(2)) {
            Ok(s) => {
                let count = s.sum("blocklab_http_requests_total", &[&path_label])
                    - before.sum("blocklab_http_requests_total", &[&path_label]);
                if count > last_count {
                    last_count = count;
                    last_progress = Instant::now();
                }
                let done = match plan.duration {
                    Some(_) => started.elapsed().as_millis() as u64,
                    None => count.max(0.0) as u64,
                };
                bar.set_position(done_before + done.min(plan.units_per_run()));
                during.push(s);
            }
            Err(_) => failures += 1,
        }
        if last_progress.elapsed() > STALL_LIMIT {
            stop_load(&mut child);
            return Err(RunError::Failed(format!("no request answered for {STALL_LIMIT:?}; stopped")));
        }
    };
    // A server that died just as the load ended must be reported as dead, not as unscrapable.
    server
        .check_alive()
        .map_err(|reason| RunError::Failed(format!("the server died during the run: {reason}")))?;
    let after = match &before {
        Some(_) => Some(scrape("after the run").map_err(|e| match server.check_alive() {
            Err(reason) => RunError::Failed(format!("the server died during the run: {reason}")),
            Ok(()) => RunError::Failed(e),
        })?),
        None => None,
    };
    let cpu = server.cpu_time().unwrap_or_default().saturating_sub(cpu_before);
    let query_ms = statements.and_then(|s| s.content_reads().ok()).and_then(|t| t.mean_ms());
    let db_cpu = match (db_cpu_before, cell.db.and_then(ManagedDatabase::cpu_time)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let link_cpu = match (link_cpu_before, cell.link.and_then(Link::cpu_time)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let peak_rss = server.peak_rss().unwrap_or(0);
    let jvm = match (gc_before, jvm::gc(server.pid())) {
        (Some(a), Some(b)) => Some(JvmFigures {
            heap_peak_mib: heap_peak.unwrap_or(0) as f64 / 1024.0 / 1024.0,
            gc_collections: b.collections.saturating_sub(a.collections),
            gc_pause_ms: b.pause.saturating_sub(a.pause).as_secs_f64() * 1000.0,
        }),
        _ => None,
    };

    let report: LoadReport = std::fs::read_to_string(&json_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
            }
            RunError::Failed(format!("the load generator wrote no result ({status}): {}", stderr.trim()))
        })?;
    if report.completed == 0 {
        // A timed run ends at its length whatever is in flight: a server that answered
        // nothing in it would otherwise be a row of zeros with no error.
        return Err(RunError::Failed(format!(
            "no request was answered in its run of {}: {} sent, {} failed, {} still open at its end",
            plan.run_length(),
            report.sent,
            report.error_total,
            report.in_flight_at_deadline
        )));
    }
    let figures = match (&before, &after) {
        (Some(before), Some(after)) => {
            ServerFigures::between(api.path(), before, &during, after, failures, report.duration_s)
        }
        _ => ServerFigures::default(),
    };
    let per_request = |d: Duration| {
        if report.completed > 0 { d.as_secs_f64() * 1e6 / report.completed as f64 } else { 0.0 }
    };
    let l = &report.latency_ms;
    let record = RunRecord {
        run_id,
        rps: report.rps,
        mean_ms: l.mean,
        max_ms: l.max,
        p50_ms: l.p50,
        p99_ms: l.p99,
        p999_ms: l.p999,
        completed: report.completed,
        ok: report.ok,
        non_2xx: report.non_2xx,
        errors: report.errors.clone(),
        error_total: report.error_total,
        duration_s: report.duration_s,
        server_cpu_s: cpu.as_secs_f64(),
        server_cpu_per_request_us: per_request(cpu),
        server_peak_rss_mib: peak_rss as f64 / 1024.0 / 1024.0,
        server_threads_max: threads_max,
        db_cpu_s: db_cpu.map(|d| d.as_secs_f64()),
        db_cpu_per_request_us: db_cpu.map(per_request),
        link_cpu_per_request_us: link_cpu.map(per_request),
        db_connections_max: connections_max,
        db_query_ms: query_ms,
        server: figures,
        jvm,
        load_json: json_rel,
    };
    Ok((record, before.map(|b| b.info()).unwrap_or_default()))
}

/// `blocklab load` pinned to the load generator's CPUs, keep-alive, `-c
/// connections`, stopping at `stop` (`-n N` or `-z DUR`), its JSON to `json`.
fn load_command(plan: &BenchPlan, url: &str, json: &Path, connections: usize, stop: &[String]) -> Command {
    let mut args: Vec<OsString> = ["load", "-k", "--quiet", "-c"].map(OsString::from).into();
    args.push(connections.to_string().into());
    args.extend(stop.iter().map(OsString::from));
    args.extend(["--threads".into(), plan.placement.load_cpus.len().max(1).to_string().into()]);
    args.extend(["--timeout", "30s", "--json"].map(OsString::from));
    args.extend([json.as_os_str().to_owned(), url.into()]);
    let cpus = plan.placement.pinned.then(|| placement::list(&plan.placement.load_cpus));
    Spec::program(&plan.exe, args)
        .pinned(cpus.as_deref())
        .stdin(Stdio::null())
        .own_group()
        .prepare()
        .into_command()
}

/// The link the stalls and faults run through: the matrix's (`--db-rtt`)
/// or, when the matrix read the database directly, one opened now with no
/// delay on it and kept in `database`, so that the servers started after
/// read through it. The error says why there is none.
fn ensure_link(plan: &BenchPlan, database: &mut Database) -> Result<(), String> {
    if database.link.is_none() {
        database.link = Some(open_link(plan, database, Duration::ZERO).map_err(|e| format!("{e:#}"))?);
    }
    Ok(())
}

/// Every fault of `--db-faults` ([`super::faults`]): each database API
/// asked for, on every target that ran it in the matrix, each on a fresh
/// server reading through the link, the four faults in turn.
fn run_faults(
    plan: &BenchPlan,
    database: &mut Database,
    tests: &[TestRecord],
    interrupt: &AtomicBool,
) -> Vec<super::faults::FaultRecord> {
    let apis: Vec<Endpoint> =
        plan.db_fault_apis.iter().copied().filter(|a| super::results::reads_per_request(*a) > 0.0).collect();
    if apis.is_empty() {
        return Vec::new();
    }
    if let Err(e) = ensure_link(plan, database) {
        eprintln!("bench: faults: not run: {e}");
        return Vec::new();
    }
    let database = &*database;
    let Some(link) = database.link.as_ref() else { return Vec::new() };
    let mut records = Vec::new();
    for api in apis {
        let ran = |t: &&Target| tests.iter().any(|r| r.target == t.name() && r.api == api.path());
        for target in plan.targets.iter().filter(ran) {
            if interrupt.load(Relaxed) {
                return records;
            }
            let who = format!("{} {}", target.name(), api.path());
            eprintln!(
                "bench: faults: {who}: reset, timeout, limit_data, slow_close on the link, each {} s under {} checking clients",
                super::faults::HOLD.as_secs(),
                super::faults::CLIENTS
            );
            let test_id = api.test_id().unwrap_or(TestId(0));
            let mut server = match start_server(plan, target, database, test_id) {
                Ok(server) => server,
                Err(e) => {
                    eprintln!("bench: faults: {who}: did not start: {e}");
                    continue;
                }
            };
            let clients = super::faults::Clients::start(server.addr(), api.path(), plan.nodes);
            let ran = {
                let mut alive = || server.check_alive().is_ok();
                super::faults::run(&target.name(), api.path(), link.proxy(), clients, &mut alive, interrupt)
            };
            match ran {
                Ok(done) => {
                    for r in &done {
                        eprintln!("bench: {}", super::faults::sentence(r));
                    }
                    records.extend(done);
                }
                Err(e) => eprintln!("bench: faults: {who}: Toxiproxy refused {e}"),
            }
            server.stop(Duration::from_secs(15));
        }
    }
    records
}

/// Every stall of the run (`--db-stall`): each database endpoint that ran
/// in the matrix, on every target that ran it, each on a fresh server. The
/// link is the matrix's (`--db-rtt`) or, when the matrix read the database
/// directly, one opened here with no delay on it (then kept in `database`,
/// so that the servers started here read through it).
/// Each endpoint's servers are all started and warmed first, by a closed
/// loop through the link, so that its one open-loop rate for every target
/// comes from their rates where the stall happens; each is paused (SIGSTOP)
/// from its warm-up to its stall.
fn run_stalls(
    plan: &BenchPlan,
    database: &mut Database,
    tests: &[TestRecord],
    ceiling_reads_per_s: Option<f64>,
    interrupt: &AtomicBool,
) -> Vec<StallRecord> {
    let Some(spec) = plan.db_stall else { return Vec::new() };
    if let Err(e) = ensure_link(plan, database) {
        eprintln!("bench: stall: not run: {e}");
        return Vec::new();
    }
    let database = &*database;
    let Some(link) = database.link.as_ref() else { return Vec::new() };
    let mut stalls = Vec::new();
    // The targets that meet the stall (`--db-stall-targets`; empty: all).
    let stalled =
        |name: &str| plan.db_stall_targets.is_empty() || plan.db_stall_targets.iter().any(|s| s == name);
    for api in plan.db_stall_apis.iter().filter(|a| super::results::reads_per_request(**a) > 0.0) {
        let ran = |t: &&Target| {
            let name = t.name();
            stalled(&name)
                && tests.iter().any(|r| r.target == name && r.api == api.path() && r.best().is_some())
        };
        let mut warmed = Vec::new();
        for target in plan.targets.iter().filter(ran) {
            if interrupt.load(Relaxed) {
                break;
            }
            match warm_server(plan, database, target, *api) {
                Ok((server, rps)) => {
                    // Paused until its stall, so that it takes no CPU from the others'.
                    if let Err(e) = server.pause(true) {
                        eprintln!("bench: stall: {} {}: {e}", target.name(), api.path());
                    }
                    warmed.push((target, server, rps));
                }
                Err(why) => eprintln!("bench: stall: {} {}: {why}", target.name(), api.path()),
            }
        }
        // One rate for every target of an endpoint, so that they meet the same load: from the
        // lowest of their closed-loop rates, in the matrix and through the link as they warmed.
        let lowest = |rates: &mut dyn Iterator<Item = f64>| rates.filter(|r| *r > 0.0).reduce(f64::min);
        let in_matrix = lowest(
            &mut tests
                .iter()
                .filter(|t| t.api == api.path() && stalled(&t.target))
                .filter_map(|t| t.best().map(|r| r.rps)),
        );
        let warming = lowest(&mut warmed.iter().filter_map(|w| w.2));
        let closed_loop = match (in_matrix, warming) {
            (Some(m), w) if w.is_none_or(|w| w >= m) => {
                Some((m, "the lowest closed-loop rate in the matrix"))
            }
            (_, w) => w.map(|w| (w, "the lowest closed-loop rate through the link, as they warmed")),
        };
        let ceiling = ceiling_reads_per_s.map(|c| c / super::results::reads_per_request(*api));
        let Some((rate, from)) = super::stall::rate(plan.db_stall_rate, ceiling, closed_loop) else {
            for (_, mut server, _) in warmed {
                server.stop(Duration::from_secs(15));
            }
            continue;
        };
        // Each round in turn on the same warmed servers, in alternating order (as the matrix's
        // runs), the others paused: a difference is claimed only where the rounds' ranges part.
        for round in 1..=plan.db_stall_rounds {
            let mut order: Vec<&mut (&Target, ServerProcess, Option<f64>)> = warmed.iter_mut().collect();
            if round.is_multiple_of(2) {
                order.reverse();
            }
            for (target, server, _) in order {
                if interrupt.load(Relaxed) {
                    break;
                }
                let who =
                    format!("{} {} (round {round} of {})", target.name(), api.path(), plan.db_stall_rounds);
                eprintln!("bench: stall: {who}, {spec}, at {rate:.0} req/s ({from})");
                if let Err(e) = server.pause(false) {
                    eprintln!("bench: stall: {who}: {e}");
                }
                match stall_once(plan, link, target, *api, server, (spec, rate, from.clone(), round)) {
                    Ok(record) => {
                        eprintln!("bench: {}", record.sentence());
                        stalls.push(record);
                    }
                    Err(why) => eprintln!("bench: stall: {who}: {why}"),
                }
                if let Err(e) = server.pause(true) {
                    eprintln!("bench: stall: {who}: {e}");
                }
            }
        }
        for (_, mut server, _) in warmed {
            server.stop(Duration::from_secs(15));
        }
    }
    stalls
}

/// A fresh server for `api`'s stall, warmed by a closed loop on the
/// matrix's connections (a JVM's JIT: the steady state is a warm server's),
/// with its rate over the warm-up's second half (None: no answer came).
fn warm_server(
    plan: &BenchPlan,
    database: &Database,
    target: &Target,
    api: Endpoint,
) -> Result<(ServerProcess, Option<f64>), String> {
    let test_id = api.test_id().unwrap_or(TestId(0));
    let server = start_server(plan, target, database, test_id)?;
    let name = format!("stall-{}-test{test_id}-warm", target.name());
    let warm = closed_loop(plan, &server, api, super::stall::warm(plan.quick), &name);
    Ok((server, warm.rps))
}

/// One endpoint of one target through the stall, on its warmed server: an
/// open-loop load at `rate`; the toxic added after the steady seconds and
/// removed after the stall's length; the server's threads (and blocklab's
/// requests in flight) sampled every 250 ms. The server is left running.
fn stall_once(
    plan: &BenchPlan,
    link: &Link,
    target: &Target,
    api: Endpoint,
    server: &mut ServerProcess,
    (spec, rate, rate_from, round): (StallSpec, f64, String, u32),
) -> Result<StallRecord, String> {
    let test_id = api.test_id().unwrap_or(TestId(0));
    let (before, after) = (super::stall::before(plan.quick), super::stall::after(&spec, plan.quick));
    let total = before + spec.length + after;
    let addr = server.addr();
    let url = format!("http://{addr}{}", api.path());
    let warm = super::stall::warm(plan.quick);
    let json = plan.out.join(format!("raw/stall-{}-test{test_id}.json", target.name()));
    let stop =
        ["-z".to_string(), format!("{}ms", total.as_millis()), "--rate".to_string(), format!("{rate:.0}")];
    let mut load = load_command(plan, &url, &json, plan.connections, &stop);
    load.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = load.spawn().map_err(|e| format!("cannot start the load generator: {e}"))?;
    let started = Instant::now();
    let toxics = stall_toxics(spec);
    let scraped = matches!(target, Target::Blocklab(_));
    let label = format!("endpoint=\"{}\"", api.path());
    let pid = crate::proc::Pid::Of(server.pid());
    // Per second: the most threads, requests in flight and pool waiters seen in it.
    let mut held: std::collections::BTreeMap<u64, Held> = Default::default();
    let (mut stalled, mut restored) = (false, false);
    let mut failure = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => {
                failure = Some(e.to_string());
                break None;
            }
        }
        let t = started.elapsed();
        if !stalled && t >= before {
            stalled = true;
            if let Err(e) = toxics.iter().try_for_each(|toxic| link.proxy().add(toxic)) {
                failure = Some(e);
                break None;
            }
        }
        if stalled && !restored && t >= before + spec.length {
            restored = true;
            if let Err(e) = toxics.iter().try_for_each(|toxic| link.proxy().remove(&toxic.name)) {
                failure = Some(e);
                break None;
            }
        }
        if t > total + Duration::from_secs(60) {
            failure = Some(format!("the load did not end within {} s", total.as_secs() + 60));
            break None;
        }
        let slot = held.entry(t.as_secs()).or_default();
        slot.threads = slot.threads.max(crate::proc::threads(pid));
        if scraped && let Ok(s) = Scrape::fetch(addr, Duration::from_millis(200)) {
            slot.in_flight =
                slot.in_flight.max(Some(s.sum("blocklab_http_requests_in_flight", &[&label]) as u64));
            let clients =
                ["async", "blocking"].map(|c| s.get(&format!("blocklab_db_pool_waiting{{client=\"{c}\"}}")));
            if clients.iter().any(Option::is_some) {
                slot.waiting = slot.waiting.max(Some(clients.iter().flatten().sum::<f64>() as u64));
            }
        }
        std::thread::sleep(Duration::from_millis(250).saturating_sub(started.elapsed() - t));
    };
    if stalled && !restored {
        for toxic in &toxics {
            let _ = link.proxy().remove(&toxic.name);
        }
    }
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let alive = server.check_alive();
    if let Some(why) = failure {
        return Err(why);
    }
    let report: LoadReport = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| format!("the load generator wrote no result ({status:?})"))?;
    let seconds = stall_seconds(&report.timeline, &held);
    let mut failures: std::collections::BTreeMap<String, u64> =
        report.errors.iter().filter(|(_, n)| **n > 0).map(|(k, n)| (k.clone(), *n)).collect();
    for (code, n) in &report.status_codes {
        if code.parse::<u16>().is_ok_and(|c| c >= 400) {
            failures.insert(format!("status {code}"), *n);
        }
    }
    let longest = report.corrected_latency_ms.as_ref().unwrap_or(&report.latency_ms).max;
    let mut record = StallRecord {
        target: target.name().to_string(),
        test_id,
        api: api.path().to_string(),
        round,
        stall: spec,
        rate,
        rate_from,
        warm_s: warm.as_secs_f64(),
        starts_s: before.as_secs(),
        seconds,
        before_rps: 0.0,
        before_p99_ms: 0.0,
        recovered_after_s: None,
        steady_p99_max_ms: 0.0,
        recovered_in_spread_after_s: None,
        failed_during: 0,
        failed_after: 0,
        peak_in_flight: None,
        peak_threads: None,
        peak_waiting: None,
        longest_ms: longest,
        failures,
        survived: alive.is_ok(),
        note: alive.err().map(|why| format!("the server died: {why}")),
    };
    record.compute();
    Ok(record)
}

/// What the server held in one second of a stall: the most seen in it.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    /// OS threads (/proc).
    threads: Option<u64>,
    /// Requests in flight on the endpoint (blocklab's /metrics).
    in_flight: Option<u64>,
    /// Reads waiting for a pooled database connection (blocklab's /metrics).
    waiting: Option<u64>,
}

/// The stall's seconds from the load's timeline and what the server held in
/// each (threads, requests in flight, pool waiters). One row a second; the run's last,
/// cut-short second (the load stops on time) is folded into the one before,
/// so that its answers and failures count without a rate computed over a
/// sliver of a second.
fn stall_seconds(
    timeline: &[crate::load::outcome::Second],
    held: &std::collections::BTreeMap<u64, Held>,
) -> Vec<StallSecond> {
    let mut seconds: Vec<StallSecond> = Vec::with_capacity(timeline.len());
    let mut lengths: Vec<f64> = Vec::with_capacity(timeline.len());
    for s in timeline {
        let failed = s.status_4xx_5xx + s.errors.values().sum::<u64>();
        let p99_ms = s.corrected_p99_ms.unwrap_or(s.p99_ms);
        let Held { threads, in_flight, waiting } = held.get(&s.second).copied().unwrap_or_default();
        if let (true, Some(last), Some(length)) = (s.length_s < 0.5, seconds.last_mut(), lengths.last_mut()) {
            let answers = last.rps * *length + s.requests as f64;
            *length += s.length_s;
            last.rps = answers / *length;
            last.failed += failed;
            last.p99_ms = last.p99_ms.max(p99_ms);
            last.threads = last.threads.max(threads);
            last.in_flight = last.in_flight.max(in_flight);
            last.waiting = last.waiting.max(waiting);
            continue;
        }
        lengths.push(s.length_s);
        seconds.push(StallSecond {
            second: s.second,
            rps: if s.length_s > 0.0 { s.requests as f64 / s.length_s } else { 0.0 },
            failed,
            p50_ms: s.p50_ms,
            p99_ms,
            threads,
            in_flight,
            waiting,
        });
    }
    seconds
}

/// The toxics of a stall on the link. `+DELAY`: every answer DELAY later (a
/// latency toxic downstream). `freeze`: a latency toxic of the freeze's
/// length on both streams, removed when it ends: every byte sent during the
/// freeze, either way, is held and delivered when it ends (Toxiproxy's
/// latency toxic passes on what it holds when it is removed), as a stalled
/// database holds a query and answers it late. (A `timeout` toxic, used
/// before, let queries reach the database and dropped the answers, so that
/// a connection came back out of step: not a stall.)
pub fn stall_toxics(spec: StallSpec) -> Vec<Toxic> {
    let latency = |name: &str, stream, latency| {
        Toxic::new(name, stream, Fault::Latency { latency, jitter: Duration::ZERO })
    };
    match spec.kind {
        StallKind::Slower(delay) => vec![latency("stall", Stream::Downstream, delay)],
        StallKind::Freeze => vec![
            latency("stall-up", Stream::Upstream, spec.length),
            latency("stall-down", Stream::Downstream, spec.length),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_is_tried_at_few_reads_in_flight_and_at_the_largest_pool() {
        assert_eq!(ceiling_levels(128), vec![16, 128]);
        assert_eq!(ceiling_levels(16), vec![16]);
        assert_eq!(ceiling_levels(4), vec![4]);
    }

    #[test]
    fn apis_parse_by_path_name_or_test_id() {
        assert_eq!(parse_apis("all").unwrap().len(), 8);
        assert_eq!(
            parse_apis("9,/getData,getDataAsync,1").unwrap(),
            vec![Endpoint::Test, Endpoint::GetData, Endpoint::GetDataAsync, Endpoint::GetDataSpawnBlocking]
        );
        assert!(parse_apis("getNothing").unwrap_err().contains("unknown API 'getNothing'"));
        assert!(parse_apis("6").is_err(), "the seed has no Test ID 6");
        assert!(parse_apis(",").is_err());
    }
    #[test]
    fn a_cut_short_last_second_is_folded_into_the_one_before_and_nothing_is_lost() {
        let second = |second, length_s, requests, failed: u64| crate::load::outcome::Second {
            second,
            length_s,
            requests,
            status_4xx_5xx: failed,
            errors: Default::default(),
            p50_ms: 1.0,
            p99_ms: 2.0,
            corrected_p99_ms: Some(3.0),
            connections: 200,
        };
        let timeline = [second(0, 1.0, 500, 0), second(1, 1.0, 480, 2), second(2, 0.04, 20, 1)];
        let held = [
            (1, Held { threads: Some(9), in_flight: Some(3), waiting: Some(0) }),
            (2, Held { threads: Some(10), in_flight: None, waiting: Some(5) }),
        ]
        .into_iter()
        .collect();
        let rows = stall_seconds(&timeline, &held);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[1].rps, rows[1].failed, rows[1].threads), (500.0 / 1.04, 3, Some(10)));
        assert_eq!((rows[0].rps, rows[0].p99_ms, rows[1].in_flight), (500.0, 3.0, Some(3)));
        assert_eq!((rows[0].waiting, rows[1].waiting), (None, Some(5)), "the cut second's waiters fold in");
    }
}
