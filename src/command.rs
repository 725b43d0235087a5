//! What each subcommand does, start to finish, and the one error type that
//! decides the exit status: 2 for a usage error (bad flag, address in use),
//! 1 for a failure while running.

use anyhow::Context;
use tokio::net::TcpListener;

use std::io::IsTerminal;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::ProgressBar;

use crate::cli::{
    BenchArgs, Cli, Command, LoadAction, LoadArgs, MergeArgs, SeedArgs, ServeArgs, StudiesArgs, SweepArgs,
};
use crate::graph::DbUrl;
use crate::load::report::LoadReport;
use crate::server::{self, runtime::build_runtime};

/// Why a command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The command line asks for something impossible; nothing was started.
    #[error("{0}")]
    Usage(String),
    /// The command started and failed.
    #[error("{0:#}")]
    Failed(#[from] anyhow::Error),
    /// Stopped by SIGINT or SIGTERM before it was done (partial results written).
    #[error("interrupted")]
    Interrupted,
}

impl Failure {
    /// The process exit status for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Failed(_) => 1,
            Failure::Interrupted => 130,
        }
    }
}

/// Runs the command `cli` names.
pub fn run(cli: Cli) -> Result<(), Failure> {
    if !matches!(cli.command, Command::Seed(_)) {
        // Thousands of connections need thousands of descriptors; children inherit it.
        let limit = crate::harness::raise_nofile();
        tracing::debug!(?limit, "RLIMIT_NOFILE soft limit");
    }
    match cli.command {
        Command::Serve(args) => serve(&args),
        Command::Load(args) => load(&args),
        Command::Bench(args) => bench(&args),
        Command::Seed(args) => seed(&args),
        Command::Sweep(args) => sweep(&args),
        Command::Studies(args) => studies(&args),
    }
}

/// `blocklab studies`: bench, then sweep, then an index page that leads to
/// both reports. A study that fails does not stop the other; the first
/// failure is the exit status. Ctrl-C stops both.
fn studies(args: &StudiesArgs) -> Result<(), Failure> {
    let (out, bench_args, sweep_args) = args.plans().map_err(Failure::Usage)?;
    // Both plans are checked before anything starts.
    bench_args.plan().map_err(Failure::Usage)?;
    sweep_args.plan().map_err(Failure::Usage)?;
    writable_dir(&out)?;
    eprintln!("studies: study 1 (bench) into {}, then study 2 (sweep)", out.join("bench").display());
    let first = bench(&bench_args);
    let second = if matches!(first, Err(Failure::Interrupted)) {
        Err(Failure::Interrupted)
    } else {
        sweep(&sweep_args)
    };
    let index = out.join("index.html");
    let studies = [
        (
            "bench",
            "Study 1: the seed's endpoints, one execution model each",
            "Play + Neo4j + Akka translated to Rust: requests per second and latency of each endpoint, and what \
             the server's threads did.",
        ),
        (
            "sweep",
            "Study 2: slow requests, a memory cap, and who survives",
            "Spring Web (Tomcat) against WebFlux (Netty), and blocklab's four server models: concurrency stepped \
             up under a 50 MiB cap.",
        ),
    ];
    let page = crate::harness::render::index(&out, &studies);
    std::fs::write(&index, page).with_context(|| format!("writing {}", index.display()))?;
    println!("\nboth studies: {}", index.display());
    first.and(second)
}

/// `blocklab sweep`: study 2 over its targets; writes results.md, .json and
/// .csv into the output folder; partial results and exit 130 on SIGINT.
fn sweep(args: &SweepArgs) -> Result<(), Failure> {
    let plan = args.plan().map_err(Failure::Usage)?;
    writable_dir(&plan.out)?;
    if plan.placement.pinned && !plan.placement.shared {
        crate::harness::pin_self(&crate::harness::placement::list(&plan.placement.load_cpus));
    }
    let names: Vec<String> = plan.targets.iter().map(crate::sweep::Target::name).collect();
    eprintln!(
        "sweep: {} at levels {:?}, /delay {} ms; writing to {}",
        names.join(", "),
        plan.levels,
        plan.delay.as_millis(),
        plan.out.display()
    );
    let interrupt = Arc::new(AtomicBool::new(false));
    watch_for_interrupt(interrupt.clone());
    let results = crate::sweep::run(&plan, &interrupt)?;
    let written = crate::sweep::report::write_all(&results, &plan.out)?;
    print!("{}", crate::sweep::report::markdown(&results));
    println!("\nwall time {:.0} s; {} files in {}", results.wall_s, written.len(), plan.out.display());
    if results.interrupted {
        return Err(Failure::Interrupted);
    }
    Ok(())
}

/// `blocklab seed`: the dataset and its index, into a networked database.
fn seed(args: &SeedArgs) -> Result<(), Failure> {
    if args.db == DbUrl::Embedded {
        return Err(Failure::Usage(
            "the embedded database is loaded at start; seed takes falkor:// or bolt://".into(),
        ));
    }
    let mut settings = args.db_client.settings();
    settings.timeout = settings.timeout.max(std::time::Duration::from_secs(60));
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting a runtime")?;
    let backend = runtime
        .block_on(crate::graph::open(&args.db, args.nodes, std::time::Duration::ZERO, settings))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let bar =
        if std::io::stderr().is_terminal() { ProgressBar::new(args.nodes) } else { ProgressBar::hidden() };
    let report = backend
        .seed(args.nodes, &|done| bar.set_position(done))
        .map_err(|e| anyhow::anyhow!("seeding {}: {e}", args.db))?;
    bar.finish_and_clear();
    println!(
        "{}: {} Content nodes (was {}), index on id, in {:.1} s",
        args.db,
        report.after,
        report.before,
        report.took.as_secs_f64()
    );
    if report.after != args.nodes {
        return Err(Failure::Failed(anyhow::anyhow!(
            "expected {} nodes after seeding, found {}",
            args.nodes,
            report.after
        )));
    }
    Ok(())
}

/// `blocklab bench`: validate, run the matrix, write every output, print the table.
fn bench(args: &BenchArgs) -> Result<(), Failure> {
    let mut plan = args.plan().map_err(Failure::Usage)?;
    plan.progress = std::io::stderr().is_terminal();
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
    let results = crate::experiment::run(&plan, &interrupt)?;
    let written = crate::report::write_all(&results, &plan.out)?;
    print!("{}", crate::report::tables::seed_columns(&results).markdown());
    println!();
    println!("wall time {:.0} s; {} files in {}", results.wall_s, written.len(), plan.out.display());
    println!("report: {}", plan.out.join("report.html").display());
    if results.interrupted {
        return Err(Failure::Interrupted);
    }
    let failed: Vec<String> = results
        .tests
        .iter()
        .filter(|t| t.status != crate::experiment::results::RunStatus::Ok)
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
    Ok(())
}

/// Creates `dir` and proves it writable, before any server or load starts:
/// a bad `--out` is a usage error, never a lost run at the end.
fn writable_dir(dir: &std::path::Path) -> Result<(), Failure> {
    let probe = dir.join(".blocklab-write-probe");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| Failure::Usage(format!("cannot write into {}: {e}", dir.display())))
}

/// Sets `flag` on the first SIGINT or SIGTERM, from a thread of its own.
fn watch_for_interrupt(flag: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            return;
        };
        runtime.block_on(async {
            shutdown_signal().await;
            eprintln!("blocklab: interrupted; stopping the servers and writing partial results");
            flag.store(true, Ordering::Relaxed);
        });
    });
}

/// The output file at `path`, created now, so that a bad path is a usage
/// error before any work instead of a lost run at the end.
fn created(path: Option<&std::path::Path>) -> Result<Option<(&std::path::Path, std::fs::File)>, Failure> {
    path.map(|path| {
        std::fs::File::create(path)
            .map(|file| (path, file))
            .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", path.display())))
    })
    .transpose()
}

/// `blocklab load merge`: read every file first, merge, print, write the JSON.
fn load_merge(args: &MergeArgs) -> Result<(), Failure> {
    let mut runs = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
        let run: LoadReport = serde_json::from_str(&text).map_err(|e| {
            Failure::Usage(format!("{} is not a blocklab load --json result: {e}", path.display()))
        })?;
        runs.push((path.display().to_string(), run));
    }
    let json_file = created(args.json.as_deref())?;
    let merged = crate::load::merge::merge(&runs).map_err(Failure::Usage)?;
    let names: Vec<String> = runs.into_iter().map(|(name, _)| name).collect();
    print!("{}", crate::load::merge::text(&merged, &names));
    if let Some((path, file)) = json_file {
        serde_json::to_writer_pretty(std::io::BufWriter::new(file), &merged.report)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `blocklab load`: validate, run, print the summary, write the JSON.
fn load(args: &LoadArgs) -> Result<(), Failure> {
    if let Some(LoadAction::Merge(merge)) = &args.action {
        return load_merge(merge);
    }
    let mut plan = args.plan().map_err(Failure::Usage)?;
    plan.progress = !args.quiet && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
    // Created before the run, so a bad path cannot lose a long run's results.
    let json_file = created(args.json.as_deref())?;
    let hdr_log = created(args.hdr_log.as_deref())?.map(|(_, file)| file);
    let result = crate::load::engine::run_with_log(&plan, hdr_log)?;
    let report = LoadReport::new(&plan, &result);
    print!("{}", crate::load::report::text(&plan, &result, &report));
    if let Some((path, file)) = json_file {
        serde_json::to_writer_pretty(std::io::BufWriter::new(file), &report)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if result.stats.ok == 0 {
        return Err(Failure::Failed(anyhow::anyhow!(
            "no request succeeded: {} failed without a response, {} non-2xx/3xx responses",
            result.stats.error_total(),
            result.stats.completed
        )));
    }
    Ok(())
}

/// `blocklab serve`: bind, load the database, print `listening on`, serve
/// until SIGINT or SIGTERM, drain, exit.
fn serve(args: &ServeArgs) -> Result<(), Failure> {
    let config = args.config().map_err(Failure::Usage)?;
    // Bound before anything slow happens, so "address in use" is immediate.
    let listener = server::bind(args.listen, config.accept_count)
        .map_err(|e| Failure::Usage(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    listener.set_nonblocking(true).context("configuring the listener")?;
    let (runtime, probe) = build_runtime("http", config.workers).context("starting the HTTP runtime")?;
    let result = runtime.block_on(async {
        let listener = TcpListener::from_std(listener).context("registering the listener")?;
        let ready = || println!("listening on http://{addr}");
        server::run(&config, listener, None, probe, ready, shutdown_signal()).await
    });
    tracing::info!("stopped");
    // Blocking-pool threads still in a read must not hold the exit up.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result.map_err(Failure::Failed)
}

/// Resolves on the first SIGINT (ctrl-c) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT: shutting down"),
        () = term => tracing::info!("SIGTERM: shutting down"),
    }
}
