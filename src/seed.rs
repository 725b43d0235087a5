//! `blocklab seed`: the Content dataset and its index, into a networked
//! database (FalkorDB, Neo4j or PostgreSQL), idempotently.

use std::io::IsTerminal;

use anyhow::Context;
use clap::Args;
use indicatif::ProgressBar;

use crate::db::DbUrl;
use crate::failure::Failure;
use crate::flags::{DbClientArgs, parse_db};

/// What `blocklab seed --help` shows after the flags.
pub const SEED_EXAMPLES: &str = "\
Examples:
  blocklab seed --db falkor://127.0.0.1:6379
  blocklab seed --db falkor://127.0.0.1:6379/content --nodes 100000
  NEO4J_PASSWORD=secret blocklab seed --db bolt://127.0.0.1:7687
  blocklab seed --db postgres://blocklab@127.0.0.1:5432/blocklab --nodes 100000
  PGPASSWORD=secret blocklab seed --db postgresql://app@db.internal:5432/content

On a graph database: creates the index on Content.id, then MERGEs nodes 1..=N (running it
twice leaves N nodes) and deletes any Content node outside 1..=N. On PostgreSQL: drops and
creates the table content(id bigint primary key, name, code, mime_type, content_type, body)
and COPYs rows 1..=N into it, in one transaction.

A database that cannot be reached or refuses the client (a wrong password, no such
database, not the database the URL names) is one line and exit 2, before anything is written.";

/// Flags of `blocklab seed`.
#[derive(Debug, Args)]
pub struct SeedArgs {
    /// The database: falkor://HOST:PORT[/GRAPH], bolt://HOST:PORT or
    /// postgres://[USER[:PASSWORD]@]HOST:PORT/DATABASE.
    #[arg(long, env = "BLOCKLAB_DB", hide_env_values = true,
          value_parser = clap::builder::ValueParser::new(parse_db), value_name = "DB")]
    pub db: DbUrl,

    /// Content nodes: ids 1..=N.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000), value_name = "N")]
    pub nodes: u64,

    /// Database client settings.
    #[command(flatten)]
    pub db_client: DbClientArgs,
}

/// `blocklab seed`: the dataset and its index, into a networked database.
pub fn seed(args: &SeedArgs) -> Result<(), Failure> {
    if args.db == DbUrl::Embedded {
        return Err(Failure::Usage(
            "the embedded database is loaded at start; seed takes falkor://, bolt:// or postgres://".into(),
        ));
    }
    let mut settings = args.db_client.settings();
    settings.timeout = settings.timeout.max(std::time::Duration::from_secs(60));
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting a runtime")?;
    let backend = runtime
        .block_on(crate::db::open(
            &args.db,
            args.nodes,
            std::time::Duration::ZERO,
            settings,
            Default::default(),
        ))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    // First contact apart: a URL that leads nowhere usable is a usage error.
    backend.count().map_err(|e| {
        let why = e.to_string();
        // Most errors name the database already.
        Failure::Usage(if why.contains(&args.db.to_string()) {
            format!("cannot seed: {why}")
        } else {
            format!("cannot seed {}: {why}", args.db)
        })
    })?;
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
