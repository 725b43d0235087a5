//! The command line, in two stages (as ripgrep does): the raw flags clap
//! parses, then a validated plan ([`ServeConfig`]) that the commands run.
//! Kept in the library so tests can parse argument lists in process.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::graph::DbUrl;
use crate::server::{ActorLimits, ServeConfig, available_cores};

/// blocklab: what blocking calls, thread pools and actors do to a web
/// service's throughput, latency and robustness, measured on your machine.
#[derive(Debug, Parser)]
#[command(name = "blocklab", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the seed study's endpoints, one execution model each.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
}

const SERVE_EXAMPLES: &str = "\
Endpoints (GET; every data endpoint takes ?id=N, else reads a random node):
  /test                   200 'works', no I/O
  /getData                blocking read on the HTTP worker thread
  /getDataAsync           non-blocking read, awaited
  /getDataAsync2          two non-blocking reads in sequence
  /getDataAkka            router over 4 blocking actors; handler blocks on the reply (5 s)
  /getDataAkkaAsync       one actor piping a non-blocking read back
  /getDataAkkaAsync2      two asks in sequence
  /getDataSpawnBlocking   blocking read on tokio's blocking pool
  /metrics                Prometheus metrics

Examples:
  blocklab serve
  blocklab serve --listen 127.0.0.1:0 --db-latency 1ms --workers 1
  RUST_LOG=debug blocklab serve --nodes 100000";

/// Flags of `blocklab serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the real one is printed).
    #[arg(long, default_value = "127.0.0.1:9000", value_parser = parse_addr, value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Content nodes to load: valid ids are 1..=N.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000), value_name = "N")]
    pub nodes: u64,

    /// Graph database: 'embedded' (Grafeo, in process).
    #[arg(long, default_value = "embedded", value_parser = clap::builder::ValueParser::new(parse_db), value_name = "DB")]
    pub db: DbUrl,

    /// Simulated network round trip added to every read, e.g. 1ms, 500us.
    #[arg(long, default_value = "0ms", value_parser = parse_duration, value_name = "DUR")]
    pub db_latency: Duration,

    /// Worker threads of the HTTP runtime [default: the cores this process may use].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub workers: Option<u16>,

    /// Worker threads of the actor dispatcher (the seed's own actor dispatcher had 4).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub actor_threads: u16,

    /// How long /getDataAkka blocks for its reply before answering 503 (the seed's Await.result).
    #[arg(long, default_value = "5s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub await_timeout: Duration,

    /// How long /getDataAkkaAsync waits for each ask before answering 503 (the seed's ask timeout).
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub ask_timeout: Duration,

    /// On SIGINT/SIGTERM, how long to wait for in-flight requests.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DUR")]
    pub shutdown_timeout: Duration,
}

impl ServeArgs {
    /// The validated plan.
    pub fn config(&self) -> ServeConfig {
        ServeConfig {
            nodes: self.nodes,
            db: self.db.clone(),
            db_latency: self.db_latency,
            workers: self.workers.map_or_else(available_cores, usize::from),
            actor_threads: usize::from(self.actor_threads),
            limits: ActorLimits { await_timeout: self.await_timeout, ask_timeout: self.ask_timeout },
            shutdown_grace: self.shutdown_timeout,
        }
    }
}

/// Parses `10ms`, `1s`, `500us`, `2m`, or a bare `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (expected e.g. 500us, 10ms, 1s)"))
}

/// As [`parse_duration`], but zero is refused.
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be more than zero".to_string()),
        d => Ok(d),
    }
}

fn parse_db(s: &str) -> Result<DbUrl, String> {
    s.parse()
}

fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse() {
        return Ok(addr);
    }
    let mut addrs = s.to_socket_addrs().map_err(|e| format!("not an address (HOST:PORT): {e}"))?;
    addrs.next().ok_or_else(|| "the name resolves to no address".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        let argv = ["blocklab", "serve"].iter().chain(args);
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Serve(s) => s,
        })
    }

    #[test]
    fn defaults_follow_the_issue() {
        let s = serve(&[]).unwrap();
        assert_eq!(s.listen, "127.0.0.1:9000".parse().unwrap());
        let c = s.config();
        assert_eq!((c.nodes, c.db_latency, c.actor_threads), (10_000, Duration::ZERO, 4));
        assert_eq!(c.limits.await_timeout, Duration::from_secs(5));
        assert!(c.workers >= 1);
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        for bad in [
            &["--nodes", "0"][..],
            &["--db-latency", "soon"],
            &["--workers", "0"],
            &["--listen", "nowhere"],
            &["--db", "mysql://x"],
            &["--await-timeout", "0s"],
        ] {
            let err = serve(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("-1ms").is_err());
    }
}
