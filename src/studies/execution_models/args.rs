//! `blocklab bench`: study 1's flags, validated into a [`BenchPlan`].

use std::time::Duration;

use clap::Args;

use super::run::{BenchDb, BenchPlan, DB_WARM_MAX, TARGET_WARM, parse_apis};
use super::stall::StallSpec;
use crate::db::{DbUrl, EmbeddedRead};
use crate::flags::{CpuList, DbClientArgs, parse_duration, parse_positive_duration};
use crate::harness::database::Engine;
use crate::harness::placement::Placement;
use crate::harness::target::{Target, Targets};
use crate::server::{Endpoint, Model};

/// What `blocklab bench --help` shows after the flags.
pub const BENCH_EXAMPLES: &str = "\
APIs (Test IDs as in the seed study; 9 is blocklab's own):
  1 /test  2 /getData  3 /getDataAsync  4 /getDataAsync2  5 /getDataAkka
  7 /getDataAkkaAsync  8 /getDataAkkaAsync2  9 /getDataSpawnBlocking

Examples:
  blocklab bench                                  (the full default run: -c 200 -n 100000, 2 runs)
  blocklab bench --quick                          (one run of 600 requests per API: a first look)
  blocklab bench --apis 2,3,9 --db-latency 5ms --out results/latency-5ms
  blocklab bench --workers 4 --runs 3
  blocklab bench --model lean --db-latency 0ms     (study 1 under the lean server, the embedded read at full speed)
  blocklab bench --embedded-read cypher --apis 1,3  (the embedded database read through Cypher, as before)
  blocklab bench --db neo4j --target blocklab,play
                                                  (the seed's stack: a Neo4j 5.26 started, seeded, warmed
                                                   and wiped by the bench; blocklab and the Play peer on it)
  blocklab bench --db neo4j --db-cpus 1 --db-warm 2m --apis 1,3
  blocklab bench --db bolt://127.0.0.1:7687       (a Neo4j you run, seeded with `blocklab seed`)
  blocklab bench --db postgres --apis 2,3,9       (PostgreSQL started, seeded, warmed and wiped by the bench;
                                                   its ceiling measured with blocklab's client and pgbench)
  blocklab bench --db postgres --db-rtt 1ms --db-stall +50ms:10s --apis 2,3,7
                                                  (PostgreSQL a network hop away, then a stall of the link)
  blocklab bench --db postgres --db-rtt 0,2,10,20ms --target blocklab,spring-jdbc,spring-r2dbc,go-pgx -z 3s
                                                  (the round-trip curve: each server at each round trip,
                                                   beside the bound Little's law gives it)
  blocklab bench --db postgres://me@127.0.0.1:5432/shop   (a PostgreSQL you run, seeded with `blocklab seed`;
                                                   a password through BLOCKLAB_DB or PGPASSWORD)
  blocklab bench --db neo4j --target blocklab,play --db-rtt 1ms --apis 2,3,7
                                                  (Neo4j a network hop away: Toxiproxy between
                                                   it and every server and the ceiling client)
  blocklab bench --db neo4j --db-rtt 1ms --db-async-connections 4 --apis 3
                                                  (a pool of 4, the old default: Little's law's cap)
  blocklab bench --db neo4j --target blocklab,play --db-rtt 1ms --db-stall +50ms:10s --apis 2,3,7
                                                  (then each endpoint meets a 10 s stall of +50 ms
                                                   on every answer: time to recover)
  blocklab bench --db bolt://127.0.0.1:7687 --db-stall freeze:5s --db-stall-rate 300 --apis 3
  blocklab bench --db neo4j --target blocklab,play --db-stall +50ms:10s --db-stall-apis 2,3

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

    /// Requests per run [default: 100000, or 600 with --quick].
    #[arg(short = 'n', long = "requests", value_parser = clap::value_parser!(u64).range(1..), value_name = "N",
          conflicts_with = "duration")]
    pub requests: Option<u64>,

    /// Timed runs instead: each run lasts DUR (e.g. 5s), whatever the rate; a slow endpoint's
    /// run then takes no longer than a fast one's.
    #[arg(short = 'z', long = "duration", value_parser = parse_positive_duration, value_name = "DUR")]
    pub duration: Option<Duration>,

    /// Runs per API (Run IDs) [default: 2, or 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100), value_name = "N")]
    pub runs: Option<u32>,

    /// Database: 'embedded'; 'neo4j' or 'postgres' (a Neo4j 5.26 or a PostgreSQL the bench starts,
    /// seeds, warms and wipes: scripts/neo4j, scripts/postgres); or one you run, seeded with
    /// `blocklab seed`: falkor://HOST:PORT[/GRAPH], bolt://HOST:PORT, postgres://[USER@]HOST:PORT/DB.
    #[arg(long, default_value = "embedded", env = "BLOCKLAB_DB", hide_env_values = true,
          value_parser = clap::builder::ValueParser::new(parse_bench_db), value_name = "DB")]
    pub db: BenchDb,

    /// CPUs of the database `--db neo4j|postgres` starts (a taskset list, within this process's CPUs)
    /// [default: the load generator's: Neo4j and the load share CPU 1, the server gets CPU 0,
    /// as measured best on this 2-core machine].
    #[arg(long, value_parser = clap::builder::ValueParser::new(CpuList::parse), value_name = "LIST")]
    pub db_cpus: Option<CpuList>,

    /// The longest `--db neo4j|postgres` is warmed under load before the matrix: it is warmed in 15 s
    /// windows until the last three cost it the same CPU per read within 5 % of their mean (Neo4j's
    /// JIT: its CPU per read falls ~3x over the first minutes on a fresh machine; PostgreSQL's within
    /// seconds) [default: 4m, or 5s with --quick].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub db_warm: Option<Duration>,

    /// The servers measured: blocklab, or a comma list of blocklab and server peers (play).
    #[arg(long, default_value = "blocklab", value_name = "LIST")]
    pub target: String,

    /// blocklab's server stack: reactive (hyper + axum, the stack Rust users use) or lean
    /// (blocklab's own httparse server); the endpoints' execution models are the same under both.
    #[arg(long, value_enum, default_value_t = Model::Reactive, value_name = "reactive|lean")]
    pub model: Model,

    /// How the embedded database is read: its property index on id, or the Cypher query
    /// [default: index] (embedded database only).
    #[arg(long, value_enum, value_name = "index|cypher")]
    pub embedded_read: Option<EmbeddedRead>,

    /// Database client settings.
    #[command(flatten)]
    pub db_client: DbClientArgs,

    /// Simulated network round trip per read (embedded database only; a networked one has a real one).
    #[arg(long, default_value = "1ms", value_parser = parse_duration, value_name = "DUR")]
    pub db_latency: Duration,

    /// A network round trip between the servers and a networked database (neo4j, bolt://,
    /// falkor://, postgres): Toxiproxy (peers/toxiproxy) stands between them, with a latency toxic
    /// of half of it each way, in whole milliseconds; 0ms puts the proxy there without a delay. The
    /// ceiling client goes through the same link. A list (0,2,10ms: a number without a unit takes
    /// the last one's) draws the round-trip curve: each target's server, warmed once per Test ID,
    /// is measured at each round trip in turn, beside the rate Little's law allows it there.
    /// [default: none, the database is reached directly]
    #[arg(long, value_parser = parse_rtts, value_name = "DUR[,DUR...]")]
    pub db_rtt: Option<RttList>,

    /// After the matrix, each target's database endpoints meet a database that stalls, under an
    /// open-loop load on -c connections: +DELAY:LENGTH makes every answer DELAY slower for LENGTH
    /// (e.g. +50ms:10s), freeze:LENGTH lets no byte through for LENGTH. Figures: time to recover,
    /// requests failed during and after, the most requests held, whether the server survived.
    /// Needs a networked database; puts Toxiproxy on the link (with --db-rtt's RTT, or none).
    #[arg(long, value_parser = clap::builder::ValueParser::new(StallSpec::parse), value_name = "SPEC")]
    pub db_stall: Option<StallSpec>,

    /// The open-loop rate of the stall runs, requests per second, the same for every target
    /// [default: half the lower of the database's ceiling for the endpoint and the lowest
    /// rate the targets reached on it in the matrix].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "R")]
    pub db_stall_rate: Option<u32>,

    /// The APIs that meet the stall, a comma list as --apis [default: every database API run].
    #[arg(long, value_name = "LIST")]
    pub db_stall_apis: Option<String>,

    /// The targets that meet the stall, a comma list of --target's [default: every target].
    #[arg(long, value_name = "LIST")]
    pub db_stall_targets: Option<String>,

    /// After the matrix (and the stall), each target's database APIs (all, or a comma list as
    /// --apis) meet four faults on the link in turn, each held 3 s on a fresh server under 8
    /// clients that check every answer's node: the connection reset in mid-query, a link that
    /// stops answering, answers cut short, a slow close. Figures: answered right, another node,
    /// failed by kind, the longest, back to right answers after. Needs a networked database
    /// (puts Toxiproxy on the link, with --db-rtt's RTT or none); about 50 s per target and API.
    #[arg(long, num_args = 0..=1, default_missing_value = "all", value_name = "all|LIST")]
    pub db_faults: Option<String>,

    /// Content nodes.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000), value_name = "N")]
    pub nodes: u64,

    /// HTTP worker threads of each server [default: the cores the server may use].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub workers: Option<u16>,

    /// The longest each fresh server is warmed on a Test ID before its measured runs, not counted:
    /// the same closed loop (-c connections) for every target, Rust included, in windows of 3 s
    /// until two in a row are no more than 10 % above the best before them (a JIT's compilation,
    /// a pool's connections) [default: 60s; none with --quick or --cold].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub warm: Option<Duration>,

    /// The seed's protocol: each fresh server measured at once, with no warm-up (a JVM peer is then
    /// measured while its JIT compiles: Play's first run of 8,000 requests was the slowest on every
    /// Test ID). The outputs say which protocol ran.
    #[arg(long, conflicts_with = "warm")]
    pub cold: bool,

    /// How many times each endpoint of each target meets the stall of --db-stall, on the same warmed
    /// server, in alternating order: a difference between targets is claimed only where the rounds'
    /// ranges do not overlap [default: 2, or 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10), value_name = "N")]
    pub db_stall_rounds: Option<u32>,

    /// The pool size of every PostgreSQL peer (`--pool N` to each; its peer.toml's db_pool is its
    /// default): every target at the pool Little's law asks for, beside --db-pool and
    /// --db-async-connections for blocklab's.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000), value_name = "N")]
    pub peer_pool: Option<u32>,

    /// A small matrix (one run of 600 requests per API; a cold JVM on a peer): a first look.
    #[arg(long)]
    pub quick: bool,

    /// Output folder [default: results/<timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

impl BenchArgs {
    /// The flags `blocklab bench --out OUT [--quick]` gives (for the main job).
    pub fn alone(out: &std::path::Path, quick: bool) -> Result<BenchArgs, String> {
        crate::flags::parse_alone("bench", out, quick)
    }

    /// The validated plan (the output folder is not created here).
    pub fn plan(&self) -> Result<BenchPlan, String> {
        let apis = parse_apis(&self.apis)?;
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the blocklab binary: {e}"))?;
        let server_exe =
            std::env::var_os("BLOCKLAB_SERVER_EXE").map_or_else(|| exe.clone(), std::path::PathBuf::from);
        let available =
            Targets::of_this_checkout(server_exe).map_err(|e| format!("cannot read the peers: {e}"))?;
        let targets = parse_targets(&self.target, &available)?;
        check_peers_read(&targets, &self.db)?;
        if !matches!(self.model, Model::Reactive | Model::Lean) {
            return Err(format!(
                "--model {} does not serve study 1: use --model reactive or --model lean",
                self.model
            ));
        }
        let embedded = self.db == BenchDb::Url(DbUrl::Embedded);
        if self.embedded_read.is_some() && !embedded {
            return Err(
                "--embedded-read applies to --db embedded only (FalkorDB and Neo4j run the Cypher query)"
                    .to_string(),
            );
        }
        let db_rtts = self.db_rtt.clone().map(|l| l.0).unwrap_or_default();
        for &rtt in &db_rtts {
            if embedded {
                return Err(
                    "--db-rtt puts a round trip on the link to a networked database (neo4j, bolt://, \
                            falkor://); the embedded one simulates it with --db-latency"
                        .to_string(),
                );
            }
            crate::harness::toxiproxy::check_rtt(rtt).map_err(|e| format!("--db-rtt: {e}"))?;
        }
        if self.db_faults.is_some() && embedded {
            return Err(
                "--db-faults puts faults on the link to a networked database (neo4j, bolt://, falkor://)"
                    .to_string(),
            );
        }
        let db_fault_apis = match self.db_faults.as_deref() {
            None => Vec::new(),
            Some("all") => apis.clone(),
            Some(list) => {
                let asked = parse_apis(list)?;
                if let Some(e) = asked.iter().find(|e| !apis.contains(e)) {
                    return Err(format!("--db-faults names {}, which --apis does not run", e.path()));
                }
                asked
            }
        };
        if self.db_stall.is_some() && embedded {
            return Err(
                "--db-stall stalls the link to a networked database (neo4j, bolt://, falkor://)".to_string()
            );
        }
        if (self.db_stall_rate.is_some()
            || self.db_stall_apis.is_some()
            || self.db_stall_targets.is_some()
            || self.db_stall_rounds.is_some())
            && self.db_stall.is_none()
        {
            return Err(
                "--db-stall-rate, --db-stall-apis, --db-stall-targets and --db-stall-rounds shape --db-stall's runs: \
                 give --db-stall too"
                    .to_string(),
            );
        }
        let mut db_stall_targets = Vec::new();
        for name in self.db_stall_targets.iter().flat_map(|l| l.split(',')).map(str::trim) {
            if !targets.iter().any(|t| t.name() == name) {
                return Err(format!("--db-stall-targets names '{name}', which --target does not run"));
            }
            db_stall_targets.push(name.to_string());
        }
        let db_stall_apis = match &self.db_stall_apis {
            Some(list) => {
                let stalled = parse_apis(list)?;
                if let Some(e) = stalled.iter().find(|e| !apis.contains(e)) {
                    return Err(format!("--db-stall-apis names {}, which --apis does not run", e.path()));
                }
                stalled
            }
            None => apis.clone(),
        };
        let placement = Placement::detect();
        let db_cpus = match &self.db_cpus {
            Some(CpuList(cpus)) => cpus.clone(),
            None => placement.load_cpus.clone(),
        };
        if !matches!(self.db, BenchDb::Managed(_)) && (self.db_cpus.is_some() || self.db_warm.is_some()) {
            return Err(
                "--db-cpus and --db-warm apply to a database the bench starts (--db neo4j, --db postgres) only"
                    .to_string(),
            );
        }
        if self.peer_pool.is_some() {
            let on_postgres = self.db.is_postgres();
            let pg_peer =
                targets.iter().any(|t| matches!(t, Target::Peer(p) if p.reads(Engine::Postgres.name())));
            if !on_postgres || !pg_peer {
                return Err(
                    "--peer-pool sets the pool of a PostgreSQL peer (db = \"postgres\" in its peer.toml): \
                     give --db postgres and --target with one (spring-jdbc, python-pg, go-pgx, ...)"
                        .to_string(),
                );
            }
        }
        let db_warm = match self.db {
            BenchDb::Managed(_) => {
                self.db_warm.unwrap_or(if self.quick { Duration::from_secs(5) } else { DB_WARM_MAX })
            }
            _ => Duration::ZERO,
        };
        let requests = self.requests.unwrap_or(if self.quick { 600 } else { 100_000 });
        let connections = self.concurrency as usize;
        if self.duration.is_none() && requests < connections as u64 {
            return Err(format!(
                "-n {requests} is smaller than -c {connections}: every connection needs a request"
            ));
        }
        let out = self.out.clone().unwrap_or_else(|| {
            let stamp =
                humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace(':', "-");
            std::path::PathBuf::from("results").join(stamp)
        });
        Ok(BenchPlan {
            apis,
            connections,
            requests,
            duration: self.duration,
            runs: self.runs.unwrap_or(if self.quick { 1 } else { 2 }),
            db: self.db.clone(),
            db_cpus,
            db_warm,
            targets,
            available,
            db_client: self.db_client.to_args(),
            db_settings: self.db_client.settings(),
            db_rtt: db_rtts.first().copied(),
            db_rtts,
            db_stall: self.db_stall,
            db_stall_rate: self.db_stall_rate,
            db_stall_apis,
            db_stall_targets,
            db_fault_apis,
            model: self.model,
            embedded_read: embedded.then(|| self.embedded_read.unwrap_or_default()),
            db_latency: if self.db == BenchDb::Url(DbUrl::Embedded) {
                self.db_latency
            } else {
                Duration::ZERO
            },
            nodes: self.nodes,
            workers: self.workers.map(usize::from),
            quick: self.quick,
            cold: self.cold || (self.quick && self.warm.is_none()),
            target_warm: self.warm.unwrap_or(TARGET_WARM),
            db_stall_rounds: self.db_stall_rounds.unwrap_or(if self.quick { 1 } else { 2 }),
            peer_pool: self.peer_pool.map(|n| n as usize),
            out,
            exe,
            progress: false,
            placement,
        })
    }
}

/// The round trips of `--db-rtt`, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct RttList(pub Vec<Duration>);

/// Parses `--db-rtt`: `1ms`, or a list `0,2,10ms` whose bare numbers take
/// the unit of the next item that has one (or of the last).
pub fn parse_rtts(s: &str) -> Result<RttList, String> {
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(format!("'{s}' has an empty item; give round trips such as 0,2,10ms"));
    }
    let mut rtts = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let bare = item.chars().all(|c| c.is_ascii_digit() || c == '.');
        let text = if bare {
            let unit = items[i..]
                .iter()
                .find_map(|later| {
                    let at = later.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
                    Some(&later[at..])
                })
                .ok_or_else(|| format!("'{s}' gives no unit; write 0,2,10ms"))?;
            format!("{item}{unit}")
        } else {
            item.to_string()
        };
        let rtt = parse_duration(&text)?;
        if rtts.contains(&rtt) {
            return Err(format!("'{s}' gives {text} twice"));
        }
        rtts.push(rtt);
    }
    Ok(RttList(rtts))
}

/// Every form `bench --db` takes, as its error lists them: a database the
/// bench learns adds its form here.
pub const BENCH_DB_FORMS: &[&str] = &[
    "embedded",
    "neo4j or postgres (one the bench starts)",
    "falkor://HOST:PORT[/GRAPH]",
    "bolt://HOST:PORT or neo4j://HOST:PORT",
    "postgres://HOST:PORT/DATABASE",
];

/// Parses `bench --db`. [`DbUrl`]'s own error lists the forms `serve` takes,
/// without the bench's `neo4j`: a value that names no form the bench knows
/// gets the bench's whole list instead, and a URL of a known scheme that is
/// malformed keeps its reason, with the list after it.
fn parse_bench_db(s: &str) -> Result<BenchDb, String> {
    BenchDb::parse(s).map_err(|why| {
        let forms = BENCH_DB_FORMS.join(", ");
        let Some((scheme, _)) = s.split_once("://") else {
            return format!("not a database; --db takes {forms}");
        };
        // The scheme alone, tried on a well-formed URL: does any form take it? (Only the part
        // before :// is quoted: a password comes after it.)
        if format!("{scheme}://127.0.0.1:1").parse::<DbUrl>().is_err() {
            return format!("no database speaks {scheme}://; --db takes {forms}");
        }
        let reason = why.split_once(" (expected").map_or(why.as_str(), |(reason, _)| reason);
        format!("{reason}; --db takes {forms}")
    })
}

/// Refuses, in one line, a server peer that does not read the database
/// `db` (its manifest's `db`); blocklab reads every one.
pub fn check_peers_read(targets: &[Target], db: &BenchDb) -> Result<(), String> {
    let engine = match db {
        BenchDb::Managed(engine) => Some(*engine),
        BenchDb::Url(url) => Engine::of(url),
    };
    for target in targets {
        let Target::Peer(peer) = target else { continue };
        if engine.is_none_or(|e| !peer.reads(e.name())) {
            let reads = if peer.db.is_empty() { "no database" } else { peer.db.as_str() };
            return Err(format!(
                "--target {} reads {reads} (its peers/{}/peer.toml), not {}: leave it out of --target, or use --db {}",
                peer.name,
                peer.name,
                engine.map_or_else(|| db.to_string(), |e| e.label().to_string()),
                peer.db.split_whitespace().next().unwrap_or("neo4j"),
            ));
        }
    }
    Ok(())
}

/// Parses `--target`: a comma list of `blocklab` (each endpoint under its own
/// model) and server peers that serve any of study 1's database endpoints.
pub fn parse_targets(list: &str, available: &Targets) -> Result<Vec<Target>, String> {
    let own = [Target::Blocklab(None)];
    let mut targets = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let reads = Endpoint::DATA.map(Endpoint::path);
        let target = available.named(name, &own, &reads, "--target")?;
        if !targets.contains(&target) {
            targets.push(target);
        }
    }
    if targets.is_empty() {
        return Err("--target names no server".to_string());
    }
    Ok(targets)
}

#[cfg(test)]
mod target_tests {
    use super::*;
    use crate::harness::target::BLOCKLAB;

    #[test]
    fn a_list_of_round_trips_takes_the_unit_that_follows_each_bare_number() {
        let ms = |list: &[u64]| RttList(list.iter().map(|&m| Duration::from_millis(m)).collect());
        assert_eq!(parse_rtts("1ms"), Ok(ms(&[1])));
        assert_eq!(parse_rtts("0,2,10ms"), Ok(ms(&[0, 2, 10])));
        assert_eq!(parse_rtts("0, 1ms, 5, 20ms"), Ok(ms(&[0, 1, 5, 20])));
        assert_eq!(parse_rtts("20ms,0"), Err("'20ms,0' gives no unit; write 0,2,10ms".to_string()));
        assert!(parse_rtts("1,1ms").is_err_and(|e| e.contains("twice")));
    }

    #[test]
    fn a_wrong_db_is_answered_with_every_form() {
        assert_eq!(parse_bench_db("neo4j"), Ok(BenchDb::Managed(Engine::Neo4j)));
        assert_eq!(parse_bench_db("postgres"), Ok(BenchDb::Managed(Engine::Postgres)));
        assert_eq!(parse_bench_db("embedded"), Ok(BenchDb::Url(DbUrl::Embedded)));
        for (bad, says) in [
            ("neo4k", "not a database; --db takes "),
            ("mysql://u:secret@h:1", "no database speaks mysql://; --db takes "),
            ("bolt://h:notaport", "invalid port number in the database URL; --db takes "),
            ("bolt://h:1/x", "bolt:// takes no path (got '/x'); --db takes "),
        ] {
            let err = parse_bench_db(bad).unwrap_err();
            assert!(err.starts_with(says), "{bad}: {err}");
            assert!(err.ends_with(&BENCH_DB_FORMS.join(", ")) && !err.contains("secret"), "{bad}: {err}");
            assert_eq!(err.matches("expected").count(), 0, "one list of forms: {err}");
        }
    }

    #[test]
    fn targets_parse_from_the_checkouts_peers() {
        let available = Targets::of_this_checkout(std::path::PathBuf::from("blocklab")).unwrap();
        let targets = parse_targets("blocklab,play,blocklab", &available).unwrap();
        assert_eq!(targets.len(), 2);
        assert_eq!((targets[0].name(), targets[1].name()), (BLOCKLAB.to_string(), "play".to_string()));
        assert!(
            targets[1].serves(Endpoint::GetDataAkka.path())
                && !targets[1].serves(Endpoint::GetDataSpawnBlocking.path())
        );
        let err = parse_targets("tomcat", &available).unwrap_err();
        assert!(err.starts_with("unknown --target 'tomcat' (blocklab, play"), "{err}");
        assert!(parse_targets(",", &available).is_err());
    }
}
