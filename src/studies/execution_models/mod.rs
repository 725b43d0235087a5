//! Study 1, the seed study (Play Framework 2.7 + Neo4j + Akka), translated
//! to Rust: `blocklab bench`. Everything the study knows lives here — its
//! Test IDs and matrix, the seed's published table, how it runs, its tables,
//! charts and reading — on the [`crate::harness`], which knows no study.
//!
//! * [`test_id`] — the seed's Test IDs and the endpoints measured.
//! * [`args`] — `blocklab bench`'s flags, validated into a [`BenchPlan`].
//! * [`run`] — a fresh server per Test ID, repeated loads, `/metrics` scraped.
//! * [`results`] — the records, the seed's table, normalization.
//! * [`report`] — writes `results.md`, `.json`, `.csv`, the charts and
//!   `report.html`, from [`tables`], [`reading`], [`charts`] and [`html`].

pub mod args;
pub mod ceiling;
pub mod charts;
pub mod curve;
pub mod faults;
pub mod html;
pub mod link;
pub mod pgbench;
pub mod pools;
pub mod reading;
pub mod report;
pub mod results;
pub mod run;
pub mod stall;
pub mod tables;
pub mod test_id;

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub use args::BenchArgs;
pub use run::{BenchDb, BenchPlan, parse_apis};

use super::study::{Study, StudyRun};
use crate::command::{watch_for_interrupt, writable_dir};
use crate::failure::Failure;
use crate::harness::database::Engine;
use results::BenchResults;

/// The study as the main job (`blocklab studies`) lists it.
pub const STUDY: Study = Study {
    command: "bench",
    folder: "bench",
    title: "Study 1: the seed's endpoints, one execution model each",
    summary: "Play + Neo4j + Akka translated to Rust: requests per second and latency of each endpoint, and \
              what the server's threads did.",
    check: |out, quick| BenchArgs::alone(out, quick)?.plan().map(|_| ()),
    run: |out, quick| {
        let mut args = match BenchArgs::alone(out, quick) {
            Ok(args) => args,
            Err(e) => return StudyRun::failed(Failure::Usage(e)),
        };
        let mut skipped = Vec::new();
        if !quick && args.requests.is_none() && args.duration.is_none() {
            // Timed runs: a fixed count of requests made a run of Play's /test last 0.3 s (a GC
            // pause's length) and a Python run 10 s; three targets × 8 APIs × 2 runs of 3 s keep
            // both studies under 35 minutes (blocklab bench alone keeps the seed's 100,000).
            args.duration = Some(MAIN_JOB_RUN);
            eprintln!(
                "bench: runs of {} s in the main job (blocklab bench alone: the seed's 100000 requests), to keep \
                 both studies under 35 minutes",
                MAIN_JOB_RUN.as_secs()
            );
        }
        match seed_stack() {
            Ok(()) => {
                args.db = BenchDb::Managed(Engine::Neo4j);
                args.target = format!("{},{SEED_APP}", results::BLOCKLAB);
                // Python beside Rust and the JVM on the same Neo4j, when its toolchain is here.
                match built(PYTHON_APP) {
                    Ok(()) => args.target += &format!(",{PYTHON_APP}"),
                    Err(why) => skipped.push(format!(
                        "{PYTHON_APP} not in study 1: {why}; with python3, `scripts/peers build {PYTHON_APP}` adds it"
                    )),
                }
                if !quick && args.db_stall.is_none() {
                    // The database that stalls, on the blocking, the non-blocking and the actor's
                    // endpoint of both servers: a shorter stall than `blocklab bench`'s example, to
                    // fit the main job's time.
                    match stall::StallSpec::parse(MAIN_JOB_STALL) {
                        Ok(spec) => args.db_stall = Some(spec),
                        Err(e) => return StudyRun::failed(Failure::Usage(e)),
                    }
                    args.db_stall_apis = Some(MAIN_JOB_STALL_APIS.to_string());
                    args.db_stall_targets = Some(format!("{},{SEED_APP}", results::BLOCKLAB));
                }
            }
            Err(why) => {
                let line = format!(
                    "study 1 ran on the embedded database, not on the seed's stack: {why}; with Java 17 and Maven, \
                     `scripts/peers build {SEED_APP} {SEED_DB}` then `blocklab bench --db neo4j --target \
                     blocklab,{SEED_APP}` adds Neo4j 5.26 and the seed's Play app"
                );
                eprintln!("bench: {line}");
                skipped.push(line);
            }
        }
        let results = bench_run(&args);
        let ran = results.as_ref().ok().map(ran_lines).unwrap_or_default();
        let versions = results.as_ref().map(|r| r.conditions.versions.clone()).unwrap_or_default();
        let answer = results.as_ref().map(reading::answer).unwrap_or_default();
        let chart = results
            .as_ref()
            .ok()
            .and_then(|r| charts::all(r).into_iter().find(|c| c.file == "side_by_side.svg"));
        StudyRun { outcome: results.map(|_| ()), answer, chart, ran, skipped, versions }
    },
};

/// Study 1 on PostgreSQL as the main job runs it: the round-trip curve.
pub const CURVE: Study = Study {
    command: "bench",
    folder: "curve",
    title: "Study 1 on PostgreSQL: blocking against non-blocking as the database moves away",
    summary: "blocklab and each ecosystem's own PostgreSQL stack (Spring JDBC, on virtual threads, R2DBC, \
              psycopg and asyncpg, pgx, node-postgres) at round trips of 0, 2 and 10 ms: rate and p99 beside the \
              bound Little's law gives each, and what set it.",
    check: |out, quick| curve_args(out, quick, &[])?.plan().map(|_| ()),
    run: |out, quick| {
        let mut skipped = Vec::new();
        if let Err(why) = built(LINK) {
            return StudyRun::skipped(format!(
                "the curve did not run: {why}; with Go, `scripts/peers build {LINK}` adds it"
            ));
        }
        if let Err(why) = postgres_here() {
            return StudyRun::skipped(format!(
                "the curve did not run: {why}; `apt-get install postgresql` (as root) adds it"
            ));
        }
        let mut peers = Vec::new();
        if !quick {
            for peer in CURVE_PEERS {
                match built(peer) {
                    Ok(()) => peers.push(peer),
                    Err(why) => skipped.push(format!(
                        "{peer} not in the curve: {why}; `scripts/peers build {peer}` adds it"
                    )),
                }
            }
        }
        let args = match curve_args(out, quick, &peers) {
            Ok(args) => args,
            Err(e) => return StudyRun::failed(Failure::Usage(e)),
        };
        let results = bench_run(&args);
        let answer = results.as_ref().map(curve::answer).unwrap_or_default();
        let chart = results.as_ref().ok().and_then(|r| curve::charts(r).into_iter().next());
        let versions = results.as_ref().map(|r| r.conditions.versions.clone()).unwrap_or_default();
        let ran = results.as_ref().ok().map(ran_lines).unwrap_or_default();
        StudyRun { outcome: results.map(|_| ()), answer, chart, ran, skipped, versions }
    },
};

/// Whether `scripts/postgres build` finds PostgreSQL's server here; the
/// error is its own last line.
fn postgres_here() -> Result<(), String> {
    let peers = crate::harness::peers::Peers::of_this_checkout()?;
    let out = std::process::Command::new(peers.root.join("scripts/postgres"))
        .arg("build")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run scripts/postgres: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(stderr.lines().last().unwrap_or("scripts/postgres build failed").to_string())
}

/// The PostgreSQL peers the main job's curve runs, when built.
const CURVE_PEERS: [&str; 6] =
    ["spring-jdbc", "spring-jdbc-vt", "spring-r2dbc", "python-pg", "go-pgx", "node-pg"];

/// The link the curve's round trips are put on.
const LINK: &str = "toxiproxy";

/// The main job's curve: Test IDs 2, 3 and 9, round trips of 0, 2 and 10
/// ms, timed runs of 2 s after warm-ups of at most 8 s, one run each (under
/// `--quick`: blocklab alone, 0 and 10 ms, 1 s runs, no warm-up).
fn curve_args(out: &std::path::Path, quick: bool, peers: &[&str]) -> Result<BenchArgs, String> {
    let mut args = BenchArgs::alone(out, quick)?;
    args.db = BenchDb::Managed(Engine::Postgres);
    args.target =
        std::iter::once(results::BLOCKLAB).chain(peers.iter().copied()).collect::<Vec<_>>().join(",");
    let (apis, rtts, run) = if quick { ("2,3", "0,10ms", "1s") } else { ("2,3,9", "0,2,10ms", "2s") };
    args.apis = apis.to_string();
    args.db_rtt = Some(args::parse_rtts(rtts)?);
    args.duration = Some(crate::flags::parse_duration(run)?);
    args.requests = None;
    args.runs = Some(1);
    if !quick {
        args.warm = Some(std::time::Duration::from_secs(8));
        args.db_warm = Some(std::time::Duration::from_secs(15));
    }
    Ok(args)
}

/// Each run's length when the main job runs study 1 (not `--quick`): 3 s,
/// one warm-up window's length. 8,000 requests a run before: 0.3 s of Play's
/// warm `/test`, 10 s of the Python peer's `/getData`.
pub const MAIN_JOB_RUN: std::time::Duration = std::time::Duration::from_secs(3);

/// The stall the main job's study 1 runs (not `--quick`), on which endpoints,
/// and on the seed's pair of targets only (blocklab and Play: the Python
/// peer's would add a minute the main job does not have).
pub const MAIN_JOB_STALL: &str = "+50ms:5s";
/// `/getData` and `/getDataAsync`: blocking against non-blocking (the actor's
/// endpoint took two more minutes than the main job has; `blocklab bench
/// --db-stall` alone stalls every endpoint).
pub const MAIN_JOB_STALL_APIS: &str = "2,3";

/// The seed's application, as a server peer (`peers/play`).
const SEED_APP: &str = "play";
/// The seed's database, as a database peer (`peers/neo4j`).
const SEED_DB: &str = "neo4j";
/// Study 1 in Python, as a server peer (`peers/python-neo4j`).
const PYTHON_APP: &str = "python-neo4j";

/// Whether the main job can run study 1 on the seed's own stack: both peers
/// present, their toolchain on `PATH`, and built (the main job builds every
/// peer it can before the studies). The error says what is missing.
fn seed_stack() -> Result<(), String> {
    built(SEED_APP)?;
    built(SEED_DB)
}

/// Whether the peer `name` is present, its toolchain on `PATH`, and built.
/// The error says what is missing.
fn built(name: &str) -> Result<(), String> {
    let peers = crate::harness::peers::Peers::of_this_checkout()?;
    let peer = peers.get(name).ok_or_else(|| format!("no peers/{name}"))?;
    let missing = peer.missing();
    if !missing.is_empty() {
        return Err(format!("{} not found (peers/{name} needs them)", missing.join(" and ")));
    }
    if !peers.is_built(name) {
        return Err(format!("peers/{name} is not built (`scripts/peers check {name}` fails)"));
    }
    Ok(())
}

/// What ran, for the index page: the server, the database, each Test ID.
fn ran_lines(results: &BenchResults) -> Vec<String> {
    let mut lines: Vec<String> = results
        .tests
        .iter()
        .map(|t| {
            // The model's words are blocklab's own; a peer's endpoint is as the peer wrote it.
            let model = if t.target == results::BLOCKLAB { format!(" ({})", t.model) } else { String::new() };
            format!(
                "{} Test ID {} {}{model}: {} runs, {}",
                t.target,
                t.test_id,
                t.api,
                t.runs.len(),
                t.status
            )
        })
        .collect();
    lines.insert(
        0,
        format!("{} against {}", results.conditions.targets.join(" and "), results.conditions.database_name),
    );
    lines.insert(1, format!("CPUs: {}", tables::placement(results)));
    lines
}

/// `blocklab bench`: validate, run the matrix, write every output, print the table.
pub fn bench(args: &BenchArgs) -> Result<(), Failure> {
    bench_run(args).map(|_| ())
}

/// As [`bench`], returning the results (for the main job's index page).
pub fn bench_run(args: &BenchArgs) -> Result<BenchResults, Failure> {
    let mut plan = args.plan().map_err(Failure::Usage)?;
    plan.progress = std::io::stderr().is_terminal() && std::io::stdout().is_terminal();
    writable_dir(&plan.out)?;
    if let Some(warning) = plan.placement.warning() {
        eprintln!("blocklab: warning: {warning}");
    }
    eprintln!(
        "bench: {} x {} APIs x {} runs of {} (-c {}), {}, database {}; writing to {}",
        plan.targets.iter().map(|t| t.name()).collect::<Vec<_>>().join(","),
        plan.apis.len(),
        plan.runs,
        plan.run_length(),
        plan.connections,
        plan.placement,
        plan.db,
        plan.out.display()
    );
    let interrupt = Arc::new(AtomicBool::new(false));
    watch_for_interrupt(interrupt.clone());
    let results = run::run(&plan, &interrupt)?;
    let written = report::write_all(&results, &plan.out)?;
    if results.conditions.parameters.quick {
        println!("{}\n", tables::first_look(&results));
    }
    print!("{}", tables::seed_columns(&results).markdown());
    println!();
    println!("database: {}", results.conditions.database_name);
    println!("server: {}", tables::server(&results.conditions.parameters));
    println!("placement: {}", tables::placement(&results));
    if results.target_names().len() > 1 || results.conditions.db_warm_s > 0.0 {
        println!();
        print!("{}", report::sections(&tables::side_by_side(&results)));
    }
    println!();
    println!("wall time {:.0} s; {} files in {}", results.wall_s, written.len(), plan.out.display());
    println!("report: {}", plan.out.join("report.html").display());
    if results.interrupted {
        return Err(Failure::Interrupted);
    }
    let failed: Vec<String> = results
        .tests
        .iter()
        .filter(|t| !matches!(t.status, results::RunStatus::Ok | results::RunStatus::NotServed))
        .map(|t| format!("{} {} {}", t.target, t.test_id, t.api))
        .collect();
    if !failed.is_empty() {
        return Err(Failure::Failed(anyhow::anyhow!(
            "{} of {} tests failed: {}",
            failed.len(),
            results.tests.len(),
            failed.join(", ")
        )));
    }
    Ok(results)
}
