//! Study 2, the robustness study (Spring Web against Spring WebFlux, a
//! 50 MB heap, concurrency stepped up): `blocklab sweep`. Everything the
//! study knows lives here — its levels, how a target's death is told, its
//! charts and reading — on the [`crate::harness`], which knows no study.
//!
//! * [`args`] — `blocklab sweep`'s flags, validated into a [`SweepPlan`].
//! * [`target`] — what is swept: a server model, a server peer, a URL.
//! * [`plan`] — the validated sweep; [`run`] — runs it; [`step`] — one level.
//! * [`jmeter`] — a step sent by the seed's own client instead of blocklab's.
//! * [`results`] — what it found; [`memory`] — memory per in-flight request;
//!   [`reading`] — what that means, in words.
//! * [`seed`] — the seed's question answered, its figures for the charts.
//! * [`report`] (`results.md`, `.csv`), [`charts`], [`html`] (`report.html`),
//!   all written by [`write_all`].

pub mod agents;
pub mod args;
pub mod charts;
pub mod html;
pub mod jmeter;
pub mod memory;
pub mod plan;
pub mod reading;
pub mod report;
pub mod results;
pub mod run;
pub mod seed;
pub mod step;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;

pub use args::SweepArgs;
pub use plan::SweepPlan;

use super::study::{Study, StudyRun};
use crate::command::{watch_for_interrupt, writable_dir};
use crate::failure::Failure;
use results::SweepResults;

/// The study as the main job (`blocklab studies`) lists it.
pub const STUDY: Study = Study {
    command: "sweep",
    folder: "sweep",
    title: "Study 2: slow requests, a memory cap, and who survives",
    summary: "Concurrency stepped up under a memory cap against blocklab's four server models and every \
              server peer built here.",
    check: |out, quick| SweepArgs::alone(out, quick)?.plan().map(|_| ()),
    run: |out, quick| {
        let mut args = match SweepArgs::alone(out, quick) {
            Ok(args) => args,
            Err(e) => return StudyRun::failed(Failure::Usage(e)),
        };
        // The thread-pool targets (Spring Web, Tomcat, the pool, Python's threads) spent minutes
        // of the main job answering in waves, up to 55 s a level, where each level more only adds
        // a wave: the main job stops them there (`blocklab sweep` alone runs every level).
        if !quick && args.levels.is_none() {
            args.levels = Some(MAIN_JOB_LEVELS.to_vec());
            eprintln!(
                "sweep: levels {} in the main job (blocklab sweep alone adds 700 and 800)",
                MAIN_JOB_LEVELS.map(|l| l.to_string()).join(",")
            );
        }
        if args.stop_after_waves.is_none() {
            args.stop_after_waves = Some(MAIN_JOB_WAVES);
            eprintln!(
                "sweep: a target's higher levels are not run once its answers come in waves past \
                 {MAIN_JOB_WAVES} × the delay (the main job's time; blocklab sweep alone runs every level)"
            );
        }
        let results = sweep_run(&args);
        let (ran, skipped, versions) = match &results {
            Ok(r) => (ran_lines(r), r.warnings.clone(), r.versions.clone()),
            Err(_) => Default::default(),
        };
        let answer = results.as_ref().map(reading::answer).unwrap_or_default();
        let chart =
            results.as_ref().ok().and_then(|r| charts::all(r).into_iter().find(|c| c.file == "success.svg"));
        StudyRun { outcome: results.map(|_| ()), answer, chart, ran, skipped, versions }
    },
};

/// The main job's `--stop-after-waves`: a pool of P threads answers 2P
/// requests in two waves; a third (at 600 for a pool of 200) told nothing new
/// and took 15 s a target.
pub const MAIN_JOB_WAVES: u32 = 2;

/// The main job's levels: the seed's, without 700 and 800 (between 600 and
/// 1000 they placed no target's limit in the main jobs of 2026-12-07 and
/// took about two minutes).
pub const MAIN_JOB_LEVELS: [u32; 8] = [100, 400, 600, 1000, 2000, 5000, 10_000, 25_000];

/// What ran, for the index page: each target, its cap and its verdict.
fn ran_lines(results: &SweepResults) -> Vec<String> {
    let placement = &results.placement;
    let cpus = format!(
        "CPUs: targets on {}, load on {}",
        crate::harness::placement::list(&placement.server_cpus),
        crate::harness::placement::list(&placement.load_cpus)
    );
    std::iter::once(cpus)
        .chain(results.targets.iter().map(|t| {
            format!("{}: memory cap {}; idle {}; {}", t.name, t.cap, reading::idle(t), reading::verdict(t))
        }))
        .collect()
}

/// `blocklab sweep`: study 2 over its targets; writes results.md, .json and
/// .csv into the output folder; partial results and exit 130 on SIGINT.
pub fn sweep(args: &SweepArgs) -> Result<(), Failure> {
    sweep_run(args).map(|_| ())
}

/// As [`sweep`], returning the results (for the main job's index page);
/// interrupted: the results written, then [`Failure::Interrupted`].
pub fn sweep_run(args: &SweepArgs) -> Result<SweepResults, Failure> {
    let plan = args.plan().map_err(Failure::Usage)?;
    writable_dir(&plan.out)?;
    if plan.client == plan::Client::Jmeter && !plan.available.peers.is_built(jmeter::PEER) {
        let why =
            plan.available.peers.why_not_buildable(jmeter::PEER).map_or(String::new(), |r| format!(" ({r})"));
        return Err(Failure::Usage(format!(
            "--client jmeter: the jmeter peer is not built{why}: run scripts/peers build jmeter"
        )));
    }
    if plan.placement.pinned && !plan.placement.shared {
        crate::harness::pin_self(&crate::harness::placement::list(&plan.placement.load_cpus));
    }
    let names: Vec<String> = plan.targets.iter().map(crate::harness::target::Target::name).collect();
    eprintln!(
        "sweep: {} at levels {:?}, /delay {} ms, client {}; writing to {}",
        names.join(", "),
        plan.levels,
        plan.delay.as_millis(),
        plan.client.name(),
        plan.out.display()
    );
    let interrupt = Arc::new(AtomicBool::new(false));
    watch_for_interrupt(interrupt.clone());
    let results = run::run(&plan, &interrupt)?;
    let written = write_all(&results, &plan.out)?;
    print!("{}", report::markdown(&results));
    println!("\nwall time {:.0} s; {} files in {}", results.wall_s, written.len(), plan.out.display());
    if results.interrupted {
        return Err(Failure::Interrupted);
    }
    Ok(results)
}

/// Writes `results.md`, `results.json`, `results.csv`, the charts and
/// `report.html` into `dir`.
pub fn write_all(results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir.join("charts"))?;
    let reading = reading::reading(results);
    let charts = charts::all(results);
    let mut files = vec![
        ("results.md".to_string(), report::markdown(results)),
        ("results.json".to_string(), serde_json::to_string_pretty(results)? + "\n"),
        ("results.csv".to_string(), report::csv(results)?),
        ("report.html".to_string(), html::page(results, &reading, &charts)),
    ];
    files.extend(charts.into_iter().map(|c| (format!("charts/{}", c.file), c.svg)));
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
