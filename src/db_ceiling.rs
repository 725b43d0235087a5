//! `blocklab db-ceiling` (hidden): a database's ceiling for study 1's read
//! with blocklab's own client and no HTTP — the line a blocklab server's
//! reads are weighed against.
//!
//! Two clients cost a database different CPU per read (on Neo4j 5.26 here,
//! blocklab's Bolt client about 240–300 µs a read, the Java driver about 384),
//! so a ceiling measured with the Java driver is not blocklab's: a blocklab
//! server once read at 1.38 × "the ceiling". This measures it with the very
//! code a server's non-blocking endpoint runs ([`crate::db::open`], then
//! [`GraphBackend::read`]), C reads in flight, each answer's id checked.
//!
//! It speaks the same protocol as `peers/neo4j-ceiling`, so that the bench
//! reads both alike: `measuring` on stderr when the window starts (the bench
//! reads the database's CPU then), one JSON line on stdout at the end
//! (`reads`, `reads_per_s`, `p50_us`, `p99_us`, `errors`, `wrong_answers`,
//! `client_cpu_us_per_read`, …). The database comes from `--db` or
//! `BLOCKLAB_DB`, whose credentials never reach the output.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use rand::Rng;

use crate::db::{DbSettings, DbUrl, EmbeddedRead, GraphBackend};
use crate::failure::Failure;
use crate::flags::parse_duration;

/// Flags of `blocklab db-ceiling`.
#[derive(Debug, Args, Clone)]
pub struct DbCeilingArgs {
    /// The database (bolt://, falkor://; credentials through BLOCKLAB_DB, never the command line).
    #[arg(long, env = "BLOCKLAB_DB", hide_env_values = true,
          value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<DbUrl>()), value_name = "URL")]
    pub db: DbUrl,

    /// Content nodes: each read asks for a random id in 1..=N.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub nodes: u64,

    /// Reads kept in flight (and the client's connections).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=10_000), value_name = "C")]
    pub concurrency: u32,

    /// Length of the measured window.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DUR")]
    pub seconds: Duration,

    /// Reads before the window, not measured (the client's connections open, the database settles).
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DUR")]
    pub warmup: Duration,
}

/// What one reader counted in the window.
struct Tally {
    latency_us: Histogram<u64>,
    errors: u64,
    wrong: u64,
    first_error: Option<String>,
}

/// `blocklab db-ceiling`: measures, prints the JSON line.
pub fn db_ceiling(args: &DbCeilingArgs) -> Result<(), Failure> {
    if args.db == DbUrl::Embedded {
        return Err(Failure::Usage(
            "db-ceiling measures a networked database (bolt://, falkor://)".to_string(),
        ));
    }
    // As many runtime workers as the CPUs this process may use: the client
    // is pinned where the servers run, and gets all of it.
    let workers = crate::proc::allowed_cpus().map_or(1, |c| c.len().max(1));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| Failure::Failed(anyhow::anyhow!("cannot start the runtime: {e}")))?;
    let line = runtime.block_on(measure(args)).map_err(Failure::Failed)?;
    println!("{line}");
    Ok(())
}

async fn measure(args: &DbCeilingArgs) -> anyhow::Result<serde_json::Value> {
    let concurrency = args.concurrency as usize;
    let settings = DbSettings { async_connections: concurrency, ..DbSettings::default() };
    let backend = crate::db::open(&args.db, args.nodes, Duration::ZERO, settings, EmbeddedRead::Index)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", args.db))?;
    // One read first, so that an unreachable database is one clear error, not a window of failures.
    backend.read(1).await.map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.db))?;
    let recording = Arc::new(AtomicBool::new(false));
    let stopping = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..concurrency)
        .map(|_| tokio::spawn(reader(backend.clone(), args.nodes, recording.clone(), stopping.clone())))
        .collect();
    if !args.warmup.is_zero() {
        eprintln!(
            "db-ceiling: warming up {:.1} s with {concurrency} reads in flight",
            args.warmup.as_secs_f64()
        );
        tokio::time::sleep(args.warmup).await;
    }
    let cpu_start = own_cpu();
    let start = Instant::now();
    recording.store(true, Relaxed);
    eprintln!("db-ceiling: measuring {:.1} s", args.seconds.as_secs_f64());
    tokio::time::sleep(args.seconds).await;
    recording.store(false, Relaxed);
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = own_cpu().saturating_sub(cpu_start);
    stopping.store(true, Relaxed);
    let mut latency_us = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let (mut errors, mut wrong, mut first_error) = (0, 0, None);
    for reader in readers {
        let tally = reader.await?;
        latency_us.add(&tally.latency_us)?;
        errors += tally.errors;
        wrong += tally.wrong;
        first_error = first_error.or(tally.first_error);
    }
    let reads = latency_us.len();
    let per_read = |d: Duration| if reads > 0 { d.as_secs_f64() * 1e6 / reads as f64 } else { 0.0 };
    let mut line = serde_json::json!({
        "tool": "db-ceiling",
        "driver": format!("blocklab {} ({}, async, {concurrency} connections)", env!("CARGO_PKG_VERSION"), backend.describe()),
        "db": args.db.to_string(),
        "nodes": args.nodes,
        "concurrency": concurrency,
        "warmup_s": args.warmup.as_secs_f64(),
        "seconds": elapsed,
        "reads": reads,
        "reads_per_s": reads as f64 / elapsed.max(1e-9),
        "p50_us": latency_us.value_at_quantile(0.50),
        "p90_us": latency_us.value_at_quantile(0.90),
        "p99_us": latency_us.value_at_quantile(0.99),
        "max_us": latency_us.max(),
        "errors": errors,
        "wrong_answers": wrong,
        "client_cpu_us_per_read": per_read(cpu),
    });
    if let Some(e) = first_error {
        line["first_error"] = serde_json::Value::String(crate::db::redact_credentials(&e));
    }
    Ok(line)
}

/// One read in flight, again and again until `stopping`: a random id, the
/// answer's id checked, its latency counted while `recording`.
async fn reader(
    backend: Arc<dyn GraphBackend>,
    nodes: u64,
    recording: Arc<AtomicBool>,
    stopping: Arc<AtomicBool>,
) -> Tally {
    let mut tally = Tally {
        latency_us: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds"),
        errors: 0,
        wrong: 0,
        first_error: None,
    };
    while !stopping.load(Relaxed) {
        let id = rand::rng().random_range(1..=nodes) as i64;
        let counts = recording.load(Relaxed);
        let started = Instant::now();
        let answer = backend.read(id).await;
        if !counts {
            continue;
        }
        match answer {
            Ok(content) if content.id == id => {
                let us = started.elapsed().as_micros().clamp(1, 60_000_000) as u64;
                tally.latency_us.saturating_record(us);
            }
            Ok(_) => tally.wrong += 1,
            Err(e) => {
                tally.errors += 1;
                tally.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    tally
}

/// This process's CPU time so far (every thread), from /proc.
fn own_cpu() -> Duration {
    crate::proc::cpu_time(crate::proc::Pid::Myself).unwrap_or_default()
}
