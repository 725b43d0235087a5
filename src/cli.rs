//! The command line, in two stages (as ripgrep does): the raw flags clap
//! parses, then a validated plan ([`ServeConfig`]) that the commands run.
//! Kept in the library so tests can parse argument lists in process.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use hyper::header::{HeaderName, HeaderValue};

use crate::experiment::BenchPlan;
use crate::graph::{DbSettings, DbUrl};
use crate::harness::placement::Placement;
use crate::load::{LoadPlan, Stop};
use crate::server::model::DEFAULT_POOL_THREADS;
use crate::server::{ActorLimits, Model, ServeConfig, available_cores};

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
    /// Load an HTTP endpoint: closed loop like ab and wrk, or open loop at a fixed rate like wrk2.
    #[command(after_help = LOAD_EXAMPLES)]
    Load(LoadArgs),
    /// Load the Content dataset and its index into a FalkorDB or Neo4j server (idempotent).
    #[command(after_help = SEED_EXAMPLES)]
    Seed(SeedArgs),
    /// Reproduce the seed study: a fresh server per API, repeated loads, its table, charts and an HTML report.
    #[command(after_help = BENCH_EXAMPLES)]
    Bench(BenchArgs),
    /// Study 2: step up concurrent slow requests against server models, JVM peers or a URL, each in a
    /// memory-capped cgroup, and see where and how each one breaks.
    #[command(after_help = SWEEP_EXAMPLES)]
    Sweep(SweepArgs),
    /// Both studies: bench (study 1), then sweep (study 2), and one index page that leads to both reports.
    #[command(after_help = STUDIES_EXAMPLES)]
    Studies(StudiesArgs),
}

const STUDIES_EXAMPLES: &str = "\
Runs 'blocklab bench' into DIR/bench and 'blocklab sweep' into DIR/sweep with their
defaults (about 10 + 8 minutes on 2 cores; --quick: about 2 minutes), then writes
DIR/index.html. Each study's own flags: run it alone ('blocklab bench --help',
'blocklab sweep --help').

Examples:
  blocklab studies
  blocklab studies --quick --out /tmp/first-look";

/// Flags of `blocklab studies`.
#[derive(Debug, Args)]
pub struct StudiesArgs {
    /// Both studies' --quick: a first look in about two minutes.
    #[arg(long)]
    pub quick: bool,

    /// Output folder [default: results/<timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

impl StudiesArgs {
    /// The two studies' own flags, validated, writing under one folder.
    pub fn plans(&self) -> Result<(std::path::PathBuf, BenchArgs, SweepArgs), String> {
        let out = self.out.clone().unwrap_or_else(|| {
            let stamp =
                humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace(':', "-");
            std::path::PathBuf::from("results").join(stamp)
        });
        let argv = |command: &str| -> Vec<std::ffi::OsString> {
            let mut argv: Vec<std::ffi::OsString> = vec!["blocklab".into(), command.into(), "--out".into()];
            argv.push(out.join(command).into_os_string());
            if self.quick {
                argv.push("--quick".into());
            }
            argv
        };
        let bench = match Cli::try_parse_from(argv("bench")).map_err(|e| e.to_string())?.command {
            Command::Bench(b) => b,
            _ => unreachable!("parsed bench"),
        };
        let sweep = match Cli::try_parse_from(argv("sweep")).map_err(|e| e.to_string())?.command {
            Command::Sweep(s) => s,
            _ => unreachable!("parsed sweep"),
        };
        Ok((out, bench, sweep))
    }
}

const SWEEP_EXAMPLES: &str = "\
Each level N: N connections opened first, then one GET /delay sent on every one at once.
After each level: is the target alive, was it OOM-killed, does /test answer within 2 s?
A target that died is reported with how and where; its later levels are not run.

Examples:
  blocklab sweep                                  # all six targets, the seed's levels, 50 MiB cap
  blocklab sweep --quick                          # three levels, 1 s delay: under a minute
  blocklab sweep --targets lean,reactive --levels 1000,5000,10000
  blocklab sweep --targets tomcat,netty --jvm-memory 256MiB
  blocklab sweep --url 'http://127.0.0.1:8080/slow' --levels 100,1000

Run as root for the memory cap (a child cgroup of the sweep's own); without one, a warning
and an uncapped run. The JVM peers need: scripts/peers install && scripts/peers build.";

/// Flags of `blocklab sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Targets, comma-separated: reactive, lean, pool, thread (blocklab serve --model), tomcat, netty.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub targets: Option<Vec<String>>,

    /// Concurrent requests per step, comma-separated, ascending [default: 100,200,400,600,700,800,1000,2000,5000,10000].
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=60_000), value_name = "LIST")]
    pub levels: Option<Vec<u32>>,

    /// The wait of each /delay request [default: 5s; 1s with --quick].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub delay: Option<Duration>,

    /// Memory cap of each Rust target's whole process (e.g. 50MiB, 1GiB).
    #[arg(long, default_value = "50MiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,

    /// Memory cap of each JVM peer's whole process [default: none; the heap is capped at -Xmx50M, as the seed].
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub jvm_memory: Option<u64>,

    /// Limit for one request, connect included.
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub timeout: Duration,

    /// Three levels (100, 400, 800) and a 1 s delay: under a minute for all six targets.
    #[arg(long)]
    pub quick: bool,

    /// Output folder [default: results/sweep-<timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,

    /// Sweep a running service instead: each request is GET URL (no process managed, no cap).
    #[arg(long, value_name = "URL", conflicts_with = "targets")]
    pub url: Option<String>,

    /// Do not use cgroups: run every target uncapped (memory is then not measured).
    #[arg(long)]
    pub no_cgroup: bool,
}

impl SweepArgs {
    /// The validated plan (the output folder is not created here).
    pub fn plan(&self) -> Result<crate::sweep::SweepPlan, String> {
        use crate::sweep::{QUICK_LEVELS, Target};
        let targets = match (&self.url, &self.targets) {
            (Some(url), _) => vec![url_target(url)?],
            (None, Some(names)) => names.iter().map(|n| Target::parse(n)).collect::<Result<Vec<_>, _>>()?,
            (None, None) => crate::sweep::default_targets(),
        };
        if targets.is_empty() {
            return Err("--targets is empty".to_string());
        }
        let levels: Vec<usize> = match &self.levels {
            Some(levels) => levels.iter().map(|l| *l as usize).collect(),
            None if self.quick => QUICK_LEVELS.to_vec(),
            None => crate::sweep::DEFAULT_LEVELS.to_vec(),
        };
        if levels.windows(2).any(|w| w[0] >= w[1]) {
            return Err("--levels must be ascending, e.g. 100,200,400".to_string());
        }
        let delay =
            self.delay.unwrap_or(if self.quick { Duration::from_secs(1) } else { Duration::from_secs(5) });
        if delay > Duration::from_millis(crate::server::delay::MAX_MS) {
            return Err(format!("--delay is at most {} ms", crate::server::delay::MAX_MS));
        }
        if delay >= self.timeout && self.url.is_none() {
            return Err(format!(
                "--timeout ({:?}) must be longer than --delay ({delay:?}), or every request times out",
                self.timeout
            ));
        }
        let out = self.out.clone().unwrap_or_else(|| {
            let stamp =
                humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace(':', "-");
            std::path::PathBuf::from("results").join(format!("sweep-{stamp}"))
        });
        let exe = std::env::var_os("BLOCKLAB_SERVER_EXE").map_or_else(
            || std::env::current_exe().map_err(|e| format!("cannot find the blocklab binary: {e}")),
            |exe| Ok(std::path::PathBuf::from(exe)),
        )?;
        let peers = std::env::var_os("BLOCKLAB_PEERS").map_or_else(
            || std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/peers")),
            std::path::PathBuf::from,
        );
        Ok(crate::sweep::SweepPlan {
            targets,
            levels,
            delay,
            memory: self.memory,
            jvm_memory: self.jvm_memory,
            timeout: self.timeout,
            out,
            exe,
            peers,
            placement: crate::harness::placement::Placement::detect(),
            use_cgroups: !self.no_cgroup,
        })
    }
}

/// A `--url` target: http://HOST:PORT/PATH, resolved now.
fn url_target(url: &str) -> Result<crate::sweep::Target, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--url takes http://HOST:PORT/PATH, got '{url}'"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let with_port = if authority.contains(':') { authority.to_string() } else { format!("{authority}:80") };
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&with_port)
        .map_err(|e| format!("--url: cannot resolve '{authority}': {e}"))?
        .next()
        .ok_or_else(|| format!("--url: '{authority}' resolves to no address"))?;
    Ok(crate::sweep::Target::Url {
        url: url.to_string(),
        addr,
        host: authority.to_string(),
        path: path.to_string(),
    })
}

/// Parses `50MiB`, `512KiB`, `1GiB`, `50MB` (10^6), or a number of bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("'{s}' is not a size (e.g. 50MiB)"))?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        other => return Err(format!("unknown unit '{other}' in '{s}' (B, KiB, MiB, GiB, KB, MB, GB)")),
    };
    let bytes = number * factor;
    if bytes < 1024.0 * 1024.0 {
        return Err(format!("'{s}' is below 1 MiB: no server starts in that"));
    }
    Ok(bytes as u64)
}

const SEED_EXAMPLES: &str = "\
Examples:
  blocklab seed --db falkor://127.0.0.1:6379
  blocklab seed --db falkor://127.0.0.1:6379/content --nodes 100000
  NEO4J_PASSWORD=secret blocklab seed --db bolt://127.0.0.1:7687

Creates the index on Content.id, then MERGEs nodes 1..=N (running it twice leaves N
nodes) and deletes any Content node outside 1..=N.";

/// Flags of `blocklab seed`.
#[derive(Debug, Args)]
pub struct SeedArgs {
    /// The database: falkor://HOST:PORT[/GRAPH] or bolt://HOST:PORT.
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

const BENCH_EXAMPLES: &str = "\
APIs (Test IDs as in the seed study; 9 is blocklab's own):
  1 /test  2 /getData  3 /getDataAsync  4 /getDataAsync2  5 /getDataAkka
  7 /getDataAkkaAsync  8 /getDataAkkaAsync2  9 /getDataSpawnBlocking

Examples:
  blocklab bench                                  (the full default run: -c 200 -n 100000, 2 runs)
  blocklab bench --quick                          (a small matrix in about a minute)
  blocklab bench --apis 2,3,9 --db-latency 5ms --out results/latency-5ms
  blocklab bench --workers 4 --runs 3

Writes into --out: results.md, results.json, results.csv, charts/*.svg, report.html, raw/.
BLOCKLAB_SERVER_EXE=PATH runs another build as the server (it gets BLOCKLAB_BENCH_TEST_ID).
Exit status: 0 when every test completed; 1 when one failed (the others still ran);
130 when interrupted (partial results are written); 2 for a usage error.";

/// Flags of `blocklab bench`.
#[derive(Debug, Args, Clone)]
pub struct BenchArgs {
    /// APIs to run: all, or a comma list of Test IDs, paths or names (2,/getDataAsync,getDataAkka).
    #[arg(long, default_value = "all", value_name = "all|LIST")]
    pub apis: String,

    /// Concurrent connections, as the seed's ab -c.
    #[arg(short = 'c', long = "concurrency", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..=100_000), value_name = "N")]
    pub concurrency: u32,

    /// Requests per run [default: 100000, or 3000 with --quick].
    #[arg(short = 'n', long = "requests", value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub requests: Option<u64>,

    /// Runs per API (Run IDs).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100), value_name = "N")]
    pub runs: u32,

    /// Graph database: 'embedded', falkor://HOST:PORT[/GRAPH] or bolt://HOST:PORT (seeded with `blocklab seed`).
    #[arg(long, default_value = "embedded", env = "BLOCKLAB_DB", hide_env_values = true,
          value_parser = clap::builder::ValueParser::new(parse_db), value_name = "DB")]
    pub db: DbUrl,

    /// Database client settings.
    #[command(flatten)]
    pub db_client: DbClientArgs,

    /// Simulated network round trip per read (embedded database only; a networked one has a real one).
    #[arg(long, default_value = "1ms", value_parser = parse_duration, value_name = "DUR")]
    pub db_latency: Duration,

    /// Content nodes.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000), value_name = "N")]
    pub nodes: u64,

    /// HTTP worker threads of each server [default: the cores the server may use].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub workers: Option<u16>,

    /// A small matrix (3000 requests per run) that finishes in about a minute.
    #[arg(long)]
    pub quick: bool,

    /// Output folder [default: results/<timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

impl BenchArgs {
    /// The validated plan (the output folder is not created here).
    pub fn plan(&self) -> Result<BenchPlan, String> {
        let apis = crate::experiment::parse_apis(&self.apis)?;
        let requests = self.requests.unwrap_or(if self.quick { 3_000 } else { 100_000 });
        let connections = self.concurrency as usize;
        if requests < connections as u64 {
            return Err(format!(
                "-n {requests} is smaller than -c {connections}: every connection needs a request"
            ));
        }
        let out = self.out.clone().unwrap_or_else(|| {
            let stamp =
                humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace(':', "-");
            std::path::PathBuf::from("results").join(stamp)
        });
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the blocklab binary: {e}"))?;
        let server_exe =
            std::env::var_os("BLOCKLAB_SERVER_EXE").map_or_else(|| exe.clone(), std::path::PathBuf::from);
        Ok(BenchPlan {
            apis,
            connections,
            requests,
            runs: self.runs,
            db: self.db.clone(),
            db_client: self.db_client.to_args(),
            db_latency: if self.db == DbUrl::Embedded { self.db_latency } else { Duration::ZERO },
            nodes: self.nodes,
            workers: self.workers.map(usize::from),
            quick: self.quick,
            out,
            exe,
            server_exe,
            progress: false,
            placement: Placement::detect(),
        })
    }
}

const LOAD_EXAMPLES: &str = "\
Examples:
  blocklab load -k -c 200 -n 100000 http://localhost:9000/test     (the seed study's ab run)
  blocklab load -k -c 50 -z 30s http://127.0.0.1:9000/getDataAsync
  blocklab load -k -c 20 -z 10s --rate 2000 http://127.0.0.1:9000/getData
  blocklab load -k -n 10000 --json result.json --quiet http://127.0.0.1:9000/test
  blocklab load -k -c 100 -z 10s --pipeline 16 http://127.0.0.1:9000/test
  blocklab load -k -z 60s --json a.json --hdr-log a.hlog http://127.0.0.1:9000/test
  blocklab load merge a.json b.json c.json --json merged.json

Closed loop (default): each connection sends its next request when the previous one ends.
Open loop (--rate): requests are due at fixed intervals; latency is also measured from when
each was due ('corrected'), so a stalled server cannot hide the stall.

Exit status: 0 if at least one request got a 2xx/3xx response; 1 if none did (every failure
is still counted and printed); 2 for a usage error.";

/// Flags of `blocklab load`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct LoadArgs {
    /// `blocklab load merge …` instead of a run.
    #[command(subcommand)]
    pub action: Option<LoadAction>,

    /// The URL to load (http:// only).
    #[arg(value_name = "URL", required = true)]
    pub url: Option<String>,

    /// Concurrent connections, each with one request in flight at a time.
    #[arg(short = 'c', long = "concurrency", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000), value_name = "N")]
    pub concurrency: u32,

    /// Total requests [default: 100000 unless -z is given].
    #[arg(short = 'n', long = "requests", conflicts_with = "duration",
          value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub requests: Option<u64>,

    /// Run for this long instead of a number of requests (e.g. 30s, 2m).
    #[arg(short = 'z', long = "duration", value_parser = parse_positive_duration, value_name = "DUR")]
    pub duration: Option<Duration>,

    /// Keep connections alive (as ab -k); without it every request opens a new connection.
    #[arg(short = 'k', long = "keep-alive")]
    pub keep_alive: bool,

    /// Open loop: total requests per second, on a fixed schedule.
    #[arg(long, value_parser = parse_rate, value_name = "R", allow_negative_numbers = true)]
    pub rate: Option<f64>,

    /// Limit to connect, and to get a whole response after sending.
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub timeout: Duration,

    /// Engine threads [default: the cores this process may use].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub threads: Option<u16>,

    /// Pipelining: N requests written at once per connection, their responses
    /// read in order, then the next N (as wrk's pipeline script). Closed loop
    /// with -k only; each request's latency runs from the batch's write.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub pipeline: u16,

    /// Also write the result as JSON (schema/load-result.json) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,

    /// Also write the latencies as an HdrHistogram interval log to FILE: one interval
    /// per second, tagged 'measured' (and 'corrected' in open loop), microseconds,
    /// read by HdrHistogram's own tools (HdrLogProcessing, Python hdrhistogram).
    #[arg(long = "hdr-log", value_name = "FILE")]
    pub hdr_log: Option<std::path::PathBuf>,

    /// No progress bar.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// HTTP method.
    #[arg(short = 'm', long, default_value = "GET", value_name = "METHOD")]
    pub method: String,

    /// Extra request header, repeatable: -H 'Accept: application/json'.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
}

impl LoadArgs {
    /// The validated plan.
    pub fn plan(&self) -> Result<LoadPlan, String> {
        let stop = match (self.requests, self.duration) {
            (_, Some(d)) => Stop::Duration(d),
            (Some(n), None) => Stop::Requests(n),
            (None, None) => Stop::Requests(100_000),
        };
        let url = self.url.as_deref().ok_or("a URL to load is needed")?;
        let mut plan = LoadPlan::new(url, self.concurrency as usize, stop)?;
        plan.keep_alive = self.keep_alive;
        plan.rate = self.rate;
        plan.timeout = self.timeout;
        plan.threads = self.threads.map_or_else(available_cores, usize::from);
        plan.pipeline = usize::from(self.pipeline);
        plan.method = self.method.parse().map_err(|_| format!("invalid method '{}'", self.method))?;
        for header in &self.headers {
            let (name, value) =
                header.split_once(':').ok_or_else(|| format!("header '{header}' is not 'Name: value'"))?;
            let name = HeaderName::try_from(name.trim())
                .map_err(|_| format!("invalid header name in '{header}'"))?;
            let value = HeaderValue::try_from(value.trim())
                .map_err(|_| format!("invalid header value in '{header}'"))?;
            plan.headers.push((name, value));
        }
        plan.validate()?;
        Ok(plan)
    }
}

/// What `blocklab load` does other than a run.
#[derive(Debug, Subcommand)]
pub enum LoadAction {
    /// One report from the --json results of runs made at the same time against the same
    /// target, on one machine or many: counts summed, histograms added losslessly, the rate
    /// over the union of their time spans.
    #[command(after_help = MERGE_EXAMPLES)]
    Merge(MergeArgs),
}

const MERGE_EXAMPLES: &str = "\
Examples:
  # three agents, started together by any orchestrator (ssh, a Kubernetes Job), each writing its JSON
  blocklab load -k -c 300 -z 60s --json /shared/agent-$HOSTNAME.json http://target:9000/test
  # then, anywhere:
  blocklab load merge /shared/agent-*.json --json /shared/merged.json";

/// Flags of `blocklab load merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The `--json` results of `blocklab load` to merge.
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub files: Vec<std::path::PathBuf>,

    /// Also write the merged result as JSON (schema/load-result.json) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        Ok(_) => Err("must be a positive number of requests per second".to_string()),
        Err(_) => Err("not a number".to_string()),
    }
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
  /delay                  waits ?ms= (default 5000, at most 600000), then {\"success\":true}
  /metrics                Prometheus metrics

Server models (--model; study 2):
  reactive   tokio + hyper/axum; handlers on the async workers (all endpoints)
  lean       tokio tasks holding no buffer while idle, httparse (/delay, /test, /metrics)
  pool       --threads OS threads (default 200, Tomcat's maxThreads); requests beyond
             them wait for a free one; /delay sleeps its thread (/delay, /test, /getData)
  thread     a new OS thread per request (/delay, /test, /getData)

Examples:
  blocklab serve
  blocklab serve --listen 127.0.0.1:0 --db-latency 1ms --workers 1
  blocklab serve --model pool --threads 200 --max-connections 8192
  blocklab serve --model lean --max-connections 20000
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

    /// Graph database: 'embedded' (Grafeo, in process), falkor://HOST:PORT[/GRAPH] or bolt://HOST:PORT.
    #[arg(long, default_value = "embedded", env = "BLOCKLAB_DB", hide_env_values = true,
          value_parser = clap::builder::ValueParser::new(parse_db), value_name = "DB")]
    pub db: DbUrl,

    /// Simulated network round trip added to every read, e.g. 1ms, 500us (embedded database only).
    #[arg(long, default_value = "0ms", value_parser = parse_duration, value_name = "DUR")]
    pub db_latency: Duration,

    /// Database client settings.
    #[command(flatten)]
    pub db_client: DbClientArgs,

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

    /// Server model: how connections are held and where handlers run (see below).
    #[arg(long, value_enum, default_value_t = Model::Reactive, value_name = "MODEL")]
    pub model: Model,

    /// OS threads of the pool model [default: 200, Tomcat's maxThreads] (pool only).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000), value_name = "N")]
    pub threads: Option<u32>,

    /// Connections open at most; beyond it the server stops accepting until one closes
    /// [default: 8192 for pool, as Tomcat; no limit otherwise].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000), value_name = "N")]
    pub max_connections: Option<u64>,

    /// Listen backlog: connections the kernel queues unaccepted [default: 100 for pool,
    /// as Tomcat's acceptCount; 4096 otherwise; capped by net.core.somaxconn].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65_535), value_name = "N")]
    pub accept_count: Option<u32>,

    /// How long a client may take to send a request head; under every model but lean an
    /// idle keep-alive connection is closed after it too (lean answers a started head 408).
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub header_timeout: Duration,
}

/// How the server's database clients connect (networked databases only).
#[derive(Debug, Args, Clone)]
pub struct DbClientArgs {
    /// Connections in the blocking client's pool: at most this many blocking reads at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=255), value_name = "N")]
    pub db_pool: u16,

    /// Connections of the async client (multiplexed for FalkorDB, pooled for Neo4j).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=255), value_name = "N")]
    pub db_async_connections: u16,

    /// Limit for one database read; a read that takes longer answers 503.
    #[arg(long, default_value = "2s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub db_timeout: Duration,
}

impl DbClientArgs {
    /// The settings the backends take.
    pub fn settings(&self) -> DbSettings {
        DbSettings {
            pool: usize::from(self.db_pool),
            async_connections: usize::from(self.db_async_connections),
            timeout: self.db_timeout,
            connect_timeout: self.db_timeout.min(Duration::from_millis(500)),
        }
    }

    /// The same flags, to pass on to a `blocklab serve` child.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--db-pool".to_string(),
            self.db_pool.to_string(),
            "--db-async-connections".to_string(),
            self.db_async_connections.to_string(),
            "--db-timeout".to_string(),
            format!("{}ms", self.db_timeout.as_millis()),
        ]
    }
}

impl ServeArgs {
    /// The validated plan, or why the flags do not make one.
    pub fn config(&self) -> Result<ServeConfig, String> {
        if self.threads.is_some() && self.model != Model::Pool {
            return Err(format!("--threads applies to --model pool only (this is --model {})", self.model));
        }
        Ok(ServeConfig {
            nodes: self.nodes,
            db: self.db.clone(),
            db_latency: self.db_latency,
            db_settings: self.db_client.settings(),
            workers: self.workers.map_or_else(available_cores, usize::from),
            actor_threads: usize::from(self.actor_threads),
            limits: ActorLimits { await_timeout: self.await_timeout, ask_timeout: self.ask_timeout },
            shutdown_grace: self.shutdown_timeout,
            model: self.model,
            threads: self.threads.map_or(DEFAULT_POOL_THREADS, |n| n as usize),
            max_connections: self
                .max_connections
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .or(self.model.default_max_connections()),
            accept_count: self.accept_count.unwrap_or(self.model.default_accept_count()),
            header_timeout: self.header_timeout,
        })
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
            _ => unreachable!("parsed serve"),
        })
    }

    #[test]
    fn defaults_follow_the_issue() {
        let s = serve(&[]).unwrap();
        assert_eq!(s.listen, "127.0.0.1:9000".parse().unwrap());
        let c = s.config().unwrap();
        assert_eq!((c.nodes, c.db_latency, c.actor_threads), (10_000, Duration::ZERO, 4));
        assert_eq!(c.limits.await_timeout, Duration::from_secs(5));
        assert!(c.workers >= 1);
        assert_eq!((c.model, c.max_connections, c.accept_count), (Model::Reactive, None, 4096));
    }

    #[test]
    fn pool_defaults_are_tomcats_and_threads_is_pool_only() {
        let c = serve(&["--model", "pool"]).unwrap().config().unwrap();
        assert_eq!((c.threads, c.max_connections, c.accept_count), (200, Some(8192), 100));
        let c = serve(&["--model", "lean", "--max-connections", "3", "--accept-count", "7"]).unwrap();
        let c = c.config().unwrap();
        assert_eq!((c.model, c.max_connections, c.accept_count), (Model::Lean, Some(3), 7));
        for model in ["reactive", "lean", "thread"] {
            let e = serve(&["--model", model, "--threads", "4"]).unwrap().config().unwrap_err();
            assert!(e.contains("--threads applies to --model pool only"), "{e}");
        }
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
            &["--model", "actors"],
            &["--threads", "0"],
            &["--max-connections", "0"],
        ] {
            let err = serve(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad:?}");
        }
    }

    fn load(args: &[&str]) -> Result<LoadPlan, String> {
        let argv = ["blocklab", "load"].iter().chain(args);
        match Cli::try_parse_from(argv).map_err(|e| e.to_string())?.command {
            Command::Load(l) => l.plan(),
            _ => unreachable!("parsed load"),
        }
    }

    #[test]
    fn the_seed_invocation_parses_as_written() {
        let plan = load(&["-k", "-c", "200", "-n", "100000", "http://localhost:9000/test"]).unwrap();
        assert_eq!((plan.connections, plan.stop, plan.keep_alive), (200, Stop::Requests(100_000), true));
        assert_eq!(plan.target.path, "/test");
        assert_eq!(plan.mode(), "closed");
    }

    #[test]
    fn bad_load_flags_are_refused() {
        for bad in [
            &["-c", "0", "http://127.0.0.1:1/"][..],
            &["-c", "10", "-n", "5", "http://127.0.0.1:1/"],
            &["-n", "10", "-z", "1s", "http://127.0.0.1:1/"],
            &["--rate", "0", "http://127.0.0.1:1/"],
            &["--rate", "-3", "http://127.0.0.1:1/"],
            &["-z", "soon", "http://127.0.0.1:1/"],
            &["--timeout", "0s", "http://127.0.0.1:1/"],
            &["https://127.0.0.1:1/"],
            &["not a url"],
            &["-H", "nocolon", "http://127.0.0.1:1/"],
        ] {
            assert!(load(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(load(&["https://127.0.0.1:1/"]).unwrap_err().contains("https is not supported yet"));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("-1ms").is_err());
    }
}
