//! The command line: the subcommands, each configured by flags that live
//! beside the command they configure (in two stages, as ripgrep does: the
//! raw flags clap parses, then a validated plan the command runs), and the
//! dispatch. Kept in the library so tests can parse argument lists in process.

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};

use crate::failure::Failure;
use crate::harness::peers::{Peers, add_outside_folders};
use crate::load::args::{LOAD_EXAMPLES, LoadArgs};
use crate::peer_check::{PEERS_EXAMPLES, PeersArgs};
use crate::seed::{SEED_EXAMPLES, SeedArgs};
use crate::server::args::{SERVE_EXAMPLES, ServeArgs};
use crate::studies::args::{STUDIES_EXAMPLES, StudiesArgs};
use crate::studies::execution_models::args::{BENCH_EXAMPLES, BenchArgs};
use crate::studies::robustness::agents::AgentArgs;
use crate::studies::robustness::args::{SWEEP_EXAMPLES, SweepArgs};

/// blocklab: what blocking calls, thread pools and actors do to a web
/// service's throughput, latency and robustness, measured on your machine.
#[derive(Debug, Parser)]
#[command(name = "blocklab", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,

    /// A folder of your own peers, or one peer folder, anywhere (repeatable; also BLOCKLAB_PEER_DIRS=DIR:DIR):
    /// its servers join sweep's and bench's targets beside peers/, built into .local/peers/ at the start
    /// (bench, sweep, studies and peers; serve, load, seed and sweep --url run no peer and refuse it).
    #[arg(long = "peers", global = true, value_name = "DIR")]
    pub peer_dirs: Vec<std::path::PathBuf>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the seed study's endpoints, one execution model each.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// Load an HTTP endpoint: closed loop like ab and wrk, or open loop at a fixed rate like wrk2.
    #[command(after_help = LOAD_EXAMPLES)]
    Load(LoadArgs),
    /// Load the Content dataset and its index into a FalkorDB or Neo4j server (idempotent).
    #[command(after_help = SEED_EXAMPLES)]
    Seed(SeedArgs),
    /// Reproduce the seed study: a fresh server per API, repeated loads, its table, charts and an HTML report.
    #[command(after_help = BENCH_EXAMPLES)]
    Bench(BenchArgs),
    /// Study 2: step up concurrent slow requests against server models, server peers or a URL, each in a
    /// memory-capped cgroup, and see where and how each one breaks.
    #[command(after_help = SWEEP_EXAMPLES)]
    Sweep(SweepArgs),
    /// Every study: bench (study 1), then sweep (study 2), and one index page that leads to their reports.
    #[command(after_help = STUDIES_EXAMPLES)]
    Studies(StudiesArgs),
    /// Your own server as a peer: `peers check DIR` builds a peer folder, starts it and checks it against
    /// the contract a study holds it to.
    #[command(after_help = PEERS_EXAMPLES)]
    Peers(PeersArgs),
    /// One client process of a sweep level that needs more descriptors than one process may hold
    /// (started by `blocklab sweep`, not by hand).
    #[command(hide = true)]
    SweepAgent(AgentArgs),
    /// A database's ceiling for study 1's read with blocklab's own client, no HTTP: one JSON line, as
    /// peers/neo4j-ceiling prints (started by `blocklab bench`, not by hand).
    #[command(hide = true)]
    DbCeiling(crate::db_ceiling::DbCeilingArgs),
}

/// The command line of this process, parsed; or, when it asks for help or is
/// wrong, the exit status once help or the one-line error is printed (0 for
/// help and version, 2 for a usage error).
pub fn parse() -> Result<Cli, u8> {
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            Err(0)
        }
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprintln!("blocklab: a command is required, e.g. 'blocklab serve' (see 'blocklab --help')");
            Err(2)
        }
        Err(e) => {
            // One line: clap's first line says what is wrong; the rest is advice.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid command line");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            // clap lists the missing arguments on the lines after the first: bring them up.
            let missing = match e.get(clap::error::ContextKind::InvalidArg) {
                Some(clap::error::ContextValue::Strings(args))
                    if e.kind() == ErrorKind::MissingRequiredArgument =>
                {
                    args.join(", ")
                }
                _ => String::new(),
            };
            let first = if missing.is_empty() {
                first.to_string()
            } else {
                format!("{} {missing}", first.trim_end())
            };
            let first = crate::db::redact_credentials(&first);
            eprintln!("blocklab: {first} (see 'blocklab --help')");
            Err(2)
        }
    }
}

/// Runs the command `cli` names.
pub fn run(cli: Cli) -> Result<(), Failure> {
    if let Some(why) = runs_no_peer(&cli.command)
        && !cli.peer_dirs.is_empty()
    {
        return Err(Failure::Usage(format!(
            "--peers does not apply: {why} (--peers adds server peers to bench, sweep, studies and peers check)"
        )));
    }
    add_outside_folders(&cli.peer_dirs).map_err(Failure::Usage)?;
    if matches!(cli.command, Command::Bench(_) | Command::Sweep(_) | Command::Studies(_)) {
        outside_peers_built()?;
    }
    if !matches!(cli.command, Command::Seed(_)) {
        // Thousands of connections need thousands of descriptors; children inherit it.
        let limit = crate::harness::raise_nofile();
        tracing::debug!(?limit, "RLIMIT_NOFILE soft limit");
    }
    match cli.command {
        Command::Serve(args) => crate::server::args::serve(&args),
        Command::Load(args) => crate::load::args::load(&args),
        Command::Bench(args) => crate::studies::execution_models::bench(&args),
        Command::Seed(args) => crate::seed::seed(&args),
        Command::Sweep(args) => crate::studies::robustness::sweep(&args),
        Command::Studies(args) => crate::studies::studies(&args),
        Command::SweepAgent(args) => crate::studies::robustness::agents::agent(&args),
        Command::Peers(args) => crate::peer_check::peers(&args),
        Command::DbCeiling(args) => crate::db_ceiling::db_ceiling(&args),
    }
}

/// Why `command` has no use for `--peers` (it starts no server peer), or
/// None when it reads the peers: a flag it would ignore is refused instead.
fn runs_no_peer(command: &Command) -> Option<&'static str> {
    match command {
        Command::Serve(_) => Some("serve runs blocklab's own server"),
        Command::Load(_) => Some("load sends requests to the URL it is given"),
        Command::Seed(_) => Some("seed writes the dataset into a database"),
        Command::Sweep(args) if args.url.is_some() => {
            Some("sweep --url loads the service at that URL, not a peer")
        }
        Command::SweepAgent(_) => Some("sweep-agent is one client process of a sweep"),
        Command::DbCeiling(_) => Some("db-ceiling reads the database with blocklab's own client"),
        Command::Bench(_) | Command::Sweep(_) | Command::Studies(_) | Command::Peers(_) => None,
    }
}

/// The server peers of the outside folders (`--peers`, `BLOCKLAB_PEER_DIRS`),
/// read and built before a study starts: a folder that is not a peer's or a
/// name that clashes is a usage error, a failed build a failure.
fn outside_peers_built() -> Result<(), Failure> {
    let peers = Peers::of_this_checkout().map_err(Failure::Usage)?;
    let outside: Vec<&str> = peers
        .list
        .iter()
        .filter(|p| p.kind == crate::harness::peers::PeerKind::Server && peers.is_outside(p))
        .map(|p| p.name.as_str())
        .collect();
    peers.build(&outside).map_err(|e| Failure::Failed(anyhow::anyhow!("--peers: {e}")))
}
