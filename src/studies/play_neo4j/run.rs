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

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

use indicatif::{ProgressBar, ProgressStyle};

use super::results::{BenchResults, Conditions, Parameters, RunRecord, RunStatus, TestId, TestRecord};
use crate::graph::DbUrl;
use crate::harness::conditions;
use crate::harness::placement::{self, Placement};
use crate::harness::scrape::{Scrape, ServerFigures};
use crate::harness::target::ServerProcess;
use crate::load::report::LoadReport;
use crate::server::Endpoint;

/// How often the server is scraped while the load runs.
const SCRAPE_EVERY: Duration = Duration::from_millis(250);
/// A run whose server answers no request for this long is stopped and failed.
const STALL_LIMIT: Duration = Duration::from_secs(60);

/// A whole bench run, validated.
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// The APIs, in Test ID order.
    pub apis: Vec<Endpoint>,
    /// Concurrent connections (`-c`).
    pub connections: usize,
    /// Requests per run (`-n`).
    pub requests: u64,
    /// Runs per API.
    pub runs: u32,
    /// Database.
    pub db: DbUrl,
    /// Client flags for a networked database (`--db-pool` ...), passed to each server.
    pub db_client: Vec<String>,
    /// Simulated round trip per read.
    pub db_latency: Duration,
    /// Content nodes.
    pub nodes: u64,
    /// HTTP workers of each server (None: the server's default).
    pub workers: Option<usize>,
    /// `--quick`.
    pub quick: bool,
    /// Output folder.
    pub out: PathBuf,
    /// The blocklab binary to run as the load generator.
    pub exe: PathBuf,
    /// The binary to run as the server (`blocklab serve ...`); normally the
    /// same, or `$BLOCKLAB_SERVER_EXE` to measure another build.
    pub server_exe: PathBuf,
    /// Draw a progress bar.
    pub progress: bool,
    /// CPU placement.
    pub placement: Placement,
}

/// Parses `all` or a comma list of paths, names or Test IDs (`/getData`, `getDataAsync`, `9`).
pub fn parse_apis(s: &str) -> Result<Vec<Endpoint>, String> {
    if s.trim() == "all" {
        return Ok(Endpoint::MEASURED.to_vec());
    }
    let mut apis = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let found = Endpoint::MEASURED.into_iter().find(|e| {
            let path = e.path();
            item == path
                || item.eq_ignore_ascii_case(&path[1..])
                || item.parse::<u32>().ok().is_some_and(|id| e.test_id() == Some(TestId(id)))
        });
        match found {
            Some(e) if !apis.contains(&e) => apis.push(e),
            Some(_) => {}
            None => {
                let known: Vec<String> = Endpoint::MEASURED
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

/// Runs the matrix. `interrupt` is checked between and during runs.
pub fn run(plan: &BenchPlan, interrupt: &AtomicBool) -> anyhow::Result<BenchResults> {
    std::fs::create_dir_all(plan.out.join("raw"))?;
    let started_at = SystemTime::now();
    let clock = Instant::now();
    let total = plan.apis.len() as u64 * u64::from(plan.runs) * plan.requests;
    let bar = if plan.progress { ProgressBar::new(total) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}% {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut tests = Vec::with_capacity(plan.apis.len());
    let mut interrupted = false;
    let mut info = Vec::new();
    for (i, api) in plan.apis.iter().enumerate() {
        if interrupt.load(Relaxed) {
            interrupted = true;
            break;
        }
        let test_id = api.test_id().unwrap_or(TestId(0));
        let mut record = TestRecord {
            test_id,
            api: api.path().to_string(),
            model: api.model().to_string(),
            status: RunStatus::Ok,
            failure: None,
            runs: Vec::new(),
        };
        bar.set_message(format!("Test ID {test_id} {} ({}/{})", api.path(), i + 1, plan.apis.len()));
        let pin = plan.placement.pinned.then(|| placement::list(&plan.placement.server_cpus));
        let started = ServerProcess::start(
            &plan.server_exe,
            &server_args(plan),
            pin.as_deref(),
            &[("BLOCKLAB_BENCH_TEST_ID", test_id.to_string()), ("BLOCKLAB_DB", plan.db.full_url())],
            Duration::from_secs(300),
        );
        match started {
            Err(reason) => {
                record.status = RunStatus::Failed;
                record.failure = Some(format!("server failed to start: {reason}"));
                say(
                    plan,
                    &bar,
                    format!("Test ID {test_id} {}: {}", api.path(), record.failure.as_deref().unwrap_or("")),
                );
            }
            Ok(mut server) => {
                for run_id in 1..=plan.runs {
                    // Requests of the runs before this one, for the progress bar.
                    let done = (i as u64 * u64::from(plan.runs) + u64::from(run_id - 1)) * plan.requests;
                    match run_once(plan, *api, run_id, &mut server, &bar, done, interrupt) {
                        Ok((run, scrape_info)) => {
                            if !plan.progress {
                                say(
                                    plan,
                                    &bar,
                                    format!(
                                        "Test ID {test_id} {} run {run_id}/{}: {:.0} req/s, mean {:.1} ms, p99 {:.1} ms, \
                                     max {:.0} ms, {} errors, {} non-2xx",
                                        api.path(),
                                        plan.runs,
                                        run.rps,
                                        run.mean_ms,
                                        run.p99_ms,
                                        run.max_ms,
                                        run.error_total,
                                        run.non_2xx
                                    ),
                                );
                            }
                            if info.is_empty() {
                                info = scrape_info;
                            }
                            record.runs.push(run);
                        }
                        Err(RunError::Interrupted) => {
                            record.status = RunStatus::Interrupted;
                            interrupted = true;
                            break;
                        }
                        Err(RunError::Failed(reason)) => {
                            record.status = RunStatus::Failed;
                            record.failure = Some(format!("run {run_id}: {reason}"));
                            say(
                                plan,
                                &bar,
                                format!("Test ID {test_id} {} run {run_id} failed: {reason}", api.path()),
                            );
                            break;
                        }
                    }
                }
                server.stop(Duration::from_secs(15));
            }
        }
        bar.set_position((i as u64 + 1) * u64::from(plan.runs) * plan.requests);
        tests.push(record);
        if interrupted {
            break;
        }
    }
    bar.finish_and_clear();
    let info_value = |key: &str| info.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let conditions = Conditions {
        machine: conditions::machine(),
        placement: plan.placement.clone(),
        parameters: Parameters {
            apis: plan
                .apis
                .iter()
                .map(|e| format!("{} {}", e.test_id().unwrap_or(TestId(0)), e.path()))
                .collect(),
            connections: plan.connections,
            requests: plan.requests,
            runs: plan.runs,
            keep_alive: true,
            db: plan.db.to_string(),
            db_latency_ms: plan.db_latency.as_secs_f64() * 1000.0,
            nodes: plan.nodes,
            workers_requested: plan.workers,
            workers: info_value("workers").and_then(|w| w.parse().ok()),
            actor_threads: info_value("actor_threads").and_then(|w| w.parse().ok()),
            quick: plan.quick,
        },
        versions: conditions::versions(),
        database: describe_db(plan),
    };
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
    })
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

fn describe_db(plan: &BenchPlan) -> String {
    match &plan.db {
        DbUrl::Falkor(_) | DbUrl::Neo4j(_) => format!(
            "{} over loopback ({} nodes; real network round trips, no simulated latency; client flags: {})",
            plan.db,
            plan.nodes,
            plan.db_client.join(" ")
        ),
        DbUrl::Embedded => format!(
            "embedded Grafeo {}, {} Content nodes indexed on id, simulated network round trip {} per read \
             (blocking reads sleep their thread, non-blocking reads await a timer)",
            grafeo::VERSION,
            plan.nodes,
            humantime::format_duration(plan.db_latency)
        ),
    }
}

fn server_args(plan: &BenchPlan) -> Vec<String> {
    // The database URL goes through the environment (BLOCKLAB_DB), so that its
    // credentials are neither on a command line (ps) nor in a report.
    let mut args = vec![
        "--nodes".to_string(),
        plan.nodes.to_string(),
        "--db-latency".to_string(),
        format!("{}us", plan.db_latency.as_micros()),
    ];
    if plan.db != DbUrl::Embedded {
        args.extend(plan.db_client.iter().cloned());
    }
    if let Some(workers) = plan.workers {
        args.extend(["--workers".to_string(), workers.to_string()]);
    }
    args
}

/// One load of one API on a running server.
fn run_once(
    plan: &BenchPlan,
    api: Endpoint,
    run_id: u32,
    server: &mut ServerProcess,
    bar: &ProgressBar,
    done_before: u64,
    interrupt: &AtomicBool,
) -> Result<(RunRecord, Vec<(String, String)>), RunError> {
    let test_id = api.test_id().unwrap_or(TestId(0));
    let addr = server.addr();
    let name = format!("test{test_id}-run{run_id}");
    let json_rel = format!("raw/{name}.json");
    let json_path = plan.out.join(&json_rel);
    let scrape = |what: &str| {
        Scrape::fetch(addr, Duration::from_secs(5)).map_err(|e| format!("scraping /metrics {what}: {e}"))
    };
    let before = scrape("before the run").map_err(RunError::Failed)?;
    let cpu_before = server.cpu_time().unwrap_or_default();

    let mut load = load_command(plan, &format!("http://{addr}{}", api.path()), &json_path);
    let text = std::fs::File::create(plan.out.join(format!("raw/{name}.txt")))
        .map_err(|e| RunError::Failed(e.to_string()))?;
    load.stdout(text).stderr(Stdio::piped());
    let mut child =
        load.spawn().map_err(|e| RunError::Failed(format!("cannot start the load generator: {e}")))?;

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
        // Checked often, so the scrape after the run follows its end closely.
        std::thread::sleep(Duration::from_millis(10));
        if last_scrape.elapsed() < SCRAPE_EVERY {
            continue;
        }
        last_scrape = Instant::now();
        match Scrape::fetch(addr, Duration::from_secs(2)) {
            Ok(s) => {
                let count = s.sum("blocklab_http_requests_total", &[&path_label])
                    - before.sum("blocklab_http_requests_total", &[&path_label]);
                if count > last_count {
                    last_count = count;
                    last_progress = Instant::now();
                }
                bar.set_position(done_before + (count.max(0.0) as u64).min(plan.requests));
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
    let after = scrape("after the run").map_err(|e| match server.check_alive() {
        Err(reason) => RunError::Failed(format!("the server died during the run: {reason}")),
        Ok(()) => RunError::Failed(e),
    })?;
    let cpu = server.cpu_time().unwrap_or_default().saturating_sub(cpu_before);
    let peak_rss = server.peak_rss().unwrap_or(0);

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
    let figures = ServerFigures::between(api.path(), &before, &during, &after, failures, report.duration_s);
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
        server_cpu_per_request_us: if report.completed > 0 {
            cpu.as_secs_f64() * 1e6 / report.completed as f64
        } else {
            0.0
        },
        server_peak_rss_mib: peak_rss as f64 / 1024.0 / 1024.0,
        server: figures,
        load_json: json_rel,
    };
    Ok((record, before.info()))
}

fn load_command(plan: &BenchPlan, url: &str, json: &Path) -> Command {
    let mut command = if plan.placement.pinned {
        let mut c = Command::new("taskset");
        c.args(["-c", &placement::list(&plan.placement.load_cpus)]).arg(&plan.exe);
        c
    } else {
        Command::new(&plan.exe)
    };
    command
        .arg("load")
        .args(["-k", "--quiet", "-c", &plan.connections.to_string(), "-n", &plan.requests.to_string()])
        .args(["--threads", &plan.placement.load_cpus.len().max(1).to_string()])
        .args(["--timeout", "30s", "--json"])
        .arg(json)
        .arg(url)
        .stdin(Stdio::null())
        .process_group(0);
    command
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
