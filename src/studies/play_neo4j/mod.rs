//! Study 1, the seed study (Play Framework 2.7 + Neo4j + Akka), translated
//! to Rust: `blocklab bench`. Everything the study knows lives here — its
//! Test IDs and matrix, the seed's published table, how it runs, its tables,
//! charts and reading — on the [`crate::harness`], which knows no study.
//!
//! * [`args`] — `blocklab bench`'s flags, validated into a [`BenchPlan`].
//! * [`run`] — a fresh server per Test ID, repeated loads, `/metrics` scraped.
//! * [`results`] — the records, the seed's table, normalization.
//! * [`report`] — writes `results.md`, `.json`, `.csv`, the charts and
//!   `report.html`, from [`tables`], [`reading`], [`charts`] and [`html`].

pub mod args;
pub mod charts;
pub mod html;
pub mod reading;
pub mod report;
pub mod results;
pub mod run;
pub mod tables;

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub use args::BenchArgs;
pub use run::{BenchPlan, parse_apis};

use super::study::{Study, StudyRun};
use crate::command::{watch_for_interrupt, writable_dir};
use crate::failure::Failure;
use results::BenchResults;

/// The study as the main job (`blocklab studies`) lists it.
pub const STUDY: Study = Study {
    command: "bench",
    title: "Study 1: the seed's endpoints, one execution model each",
    summary: "Play + Neo4j + Akka translated to Rust: requests per second and latency of each endpoint, and \
              what the server's threads did.",
    check: |out, quick| BenchArgs::alone(out, quick)?.plan().map(|_| ()),
    run: |out, quick| {
        let args = match BenchArgs::alone(out, quick) {
            Ok(args) => args,
            Err(e) => return StudyRun::failed(Failure::Usage(e)),
        };
        let results = bench_run(&args);
        let ran = results.as_ref().ok().map(ran_lines).unwrap_or_default();
        let versions = results.as_ref().map(|r| r.conditions.versions.clone()).unwrap_or_default();
        StudyRun { outcome: results.map(|_| ()), ran, skipped: Vec::new(), versions }
    },
};

/// What ran, for the index page: the server, the database, each Test ID.
fn ran_lines(results: &BenchResults) -> Vec<String> {
    let mut lines: Vec<String> = results
        .tests
        .iter()
        .map(|t| {
            format!("Test ID {} {} ({}): {} runs, {}", t.test_id, t.api, t.model, t.runs.len(), t.status)
        })
        .collect();
    lines.insert(0, format!("blocklab serve against {}", results.conditions.database));
    lines.insert(1, format!("CPUs: {}", results.conditions.placement));
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
        "bench: {} APIs x {} runs of {} requests (-c {}), {}; writing to {}",
        plan.apis.len(),
        plan.runs,
        plan.requests,
        plan.connections,
        plan.placement,
        plan.out.display()
    );
    let interrupt = Arc::new(AtomicBool::new(false));
    watch_for_interrupt(interrupt.clone());
    let results = run::run(&plan, &interrupt)?;
    let written = report::write_all(&results, &plan.out)?;
    print!("{}", tables::seed_columns(&results).markdown());
    println!();
    println!("wall time {:.0} s; {} files in {}", results.wall_s, written.len(), plan.out.display());
    println!("report: {}", plan.out.join("report.html").display());
    if results.interrupted {
        return Err(Failure::Interrupted);
    }
    let failed: Vec<String> = results
        .tests
        .iter()
        .filter(|t| t.status != results::RunStatus::Ok)
        .map(|t| format!("{} {}", t.test_id, t.api))
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
