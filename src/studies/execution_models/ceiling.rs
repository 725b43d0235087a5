//! The database's ceiling for the study's one-node read: how many reads per
//! second the managed database answers when nothing but a driver stands in
//! front of it, C reads in flight, no HTTP, every answer's id checked. It is
//! measured once per client, because two drivers cost the database different
//! CPU per read: with blocklab's own client (`blocklab db-ceiling`, the code
//! its non-blocking endpoints run) and with the database's reference client:
//! on Neo4j the Java driver 4.4.20's async API (`peers/neo4j-ceiling`,
//! Play's driver), on PostgreSQL pgbench ([`super::pgbench`]). Each target's reads are weighed
//! against its own driver's: a server that reaches it adds nothing of its own
//! to the database's limit, and one above it means the ceiling is wrong.
//!
//! Measured twice per bench, after the database is warm: before the matrix
//! and again after it, so that the two bracket the matrix (a database still
//! warming, or one the matrix slowed, shows as drift between them). The
//! client is pinned where the servers run (the database keeps its own
//! CPUs), so the ceiling and the servers meet the same placement.
//! The database's CPU is read from /proc over exactly the measured window
//! (the client marks its start on stderr).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::db::DbUrl;
use crate::harness::database::{Engine, ManagedDatabase};
use crate::harness::launch::{self, Spec};
use crate::harness::peers::Peers;

/// The peer that measures it with the Java driver.
pub const PEER: &str = "neo4j-ceiling";
/// Reads kept in flight at least: blocklab's async pool by default
/// ([`crate::db::DEFAULT_ASYNC_CONNECTIONS`]); the bench raises it to the
/// largest pool of any target measured, so that no server has more reads in
/// flight than the ceiling had.
pub const CONCURRENCY: usize = crate::db::DEFAULT_ASYNC_CONNECTIONS;

/// Whose client a ceiling was measured with. A server's reads are weighed
/// against the ceiling of the driver it uses: two drivers cost the database
/// different CPU per read (on Neo4j 5.26 here blocklab's Bolt client about
/// 240-300 µs, the Java driver about 384), so one client's ceiling is not
/// another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CeilingClient {
    /// blocklab's own database client, non-blocking, with no HTTP
    /// (`blocklab db-ceiling`, hidden).
    Blocklab,
    /// The Java driver's async API (`peers/neo4j-ceiling`): Play's driver.
    JavaDriver,
    /// pgbench, PostgreSQL's own client ([`super::pgbench`]).
    Pgbench,
}

impl CeilingClient {
    /// In words, for tables and sentences.
    pub fn name(self) -> &'static str {
        match self {
            CeilingClient::Blocklab => "blocklab's own client",
            CeilingClient::JavaDriver => "the Java driver",
            CeilingClient::Pgbench => "pgbench",
        }
    }

    /// Every client a managed `engine`'s ceiling is measured with: blocklab's
    /// own, then the database's reference client (Neo4j: the driver of the
    /// seed's Play app; PostgreSQL: its own pgbench).
    pub fn of(engine: Engine) -> [CeilingClient; 2] {
        match engine {
            Engine::Neo4j => [CeilingClient::Blocklab, CeilingClient::JavaDriver],
            Engine::Postgres => [CeilingClient::Blocklab, CeilingClient::Pgbench],
        }
    }
}

impl std::fmt::Display for CeilingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A ceiling, as `results.json` keeps it (`conditions.ceilings[].before`, `.after`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ceiling {
    /// The client, in words (driver, API, reads in flight).
    pub client: String,
    /// The CPUs the client ran on (the servers').
    pub cpus: String,
    /// Length of the measured window (s), after `warmup_s` unmeasured.
    pub seconds: f64,
    /// Unmeasured reads before the window (s).
    pub warmup_s: f64,
    /// Reads completed in the window.
    pub reads: u64,
    /// Reads per second: the ceiling.
    pub reads_per_s: f64,
    /// Median read latency (ms).
    pub p50_ms: f64,
    /// 99th percentile read latency (ms).
    pub p99_ms: f64,
    /// Failed reads.
    pub errors: u64,
    /// Answers that carried another node than the one asked for.
    pub wrong_answers: u64,
    /// The client's own CPU per read (µs).
    pub client_cpu_per_read_us: Option<f64>,
    /// The database's CPU per read over the window (µs), from /proc (its whole process tree).
    pub db_cpu_per_query_us: Option<f64>,
    /// What set it: `database` (Neo4j's CPUs were busy), `client` (the
    /// driver's), or `neither` (both had time to spare: the reads in
    /// flight and their latency did), from the CPU each spent per read.
    #[serde(default)]
    pub bound: Option<String>,
}

/// A process whose CPUs were this busy is taken as the one that set a rate.
const SATURATED: f64 = 0.85;

/// Which side set a ceiling of `reads_per_s`: the database, on `db_cpus`
/// CPUs at `db_us` per read, or the client, on `client_cpus` at `client_us`.
pub fn bound(
    reads_per_s: f64,
    db_us: Option<f64>,
    db_cpus: usize,
    client_us: Option<f64>,
    client_cpus: usize,
) -> String {
    let busy = |us: Option<f64>, cpus: usize| us.map(|us| us * reads_per_s / 1e6 / cpus.max(1) as f64);
    match (busy(db_us, db_cpus), busy(client_us, client_cpus)) {
        (Some(db), Some(client)) if db >= SATURATED && db >= client => "database",
        (Some(db), Some(client)) if client >= SATURATED && client > db => "client",
        (Some(db), None) if db >= SATURATED => "database",
        (None, Some(client)) if client >= SATURATED => "client",
        (Some(_), Some(_)) => "neither",
        _ => "unknown",
    }
    .to_string()
}

/// How long the ceiling is measured: 8 s after 4 s of warm-up (the database
/// warmed before; the Java driver's client JIT-compiled in its 4 s); 3 after
/// 2 with `--quick`.
pub fn window(quick: bool) -> (Duration, Duration) {
    if quick {
        (Duration::from_secs(3), Duration::from_secs(2))
    } else {
        (Duration::from_secs(8), Duration::from_secs(4))
    }
}

/// Where and how a ceiling is measured: the database (its CPU is read over
/// the window), the URL the client reads (directly, or through the link of
/// `--db-rtt`), the nodes, the reads in flight, the client's CPUs (the
/// servers'), and the CPU counts of the database and the client.
pub struct CeilingRun<'a> {
    /// The managed database.
    pub db: &'a ManagedDatabase,
    /// The URL with its credentials: it reaches the client through its
    /// environment only.
    pub url: &'a str,
    /// Content nodes.
    pub nodes: u64,
    /// Reads in flight.
    pub concurrency: usize,
    /// The client's CPUs (a taskset list), when pinned.
    pub cpus: Option<&'a str>,
    /// CPUs of the database and of the client.
    pub cpu_counts: (usize, usize),
    /// `--quick`: a shorter window.
    pub quick: bool,
}

/// Runs `client` once as `run` says, and reads its JSON line. The error says
/// why there is no ceiling (the client not built, it failed, it hung past its
/// window plus a minute).
pub fn measure(
    peers: &Peers,
    exe: &Path,
    client: CeilingClient,
    run: &CeilingRun,
) -> Result<Ceiling, String> {
    let (seconds, warmup) = window(run.quick);
    // The URL without its credentials on the command line, them in the
    // client's environment (NEO4J_USER, NEO4J_PASSWORD; blocklab's own reads
    // BLOCKLAB_DB): `ps` shows a command line.
    let db_url: DbUrl = run.url.parse().map_err(|e| format!("the ceiling client's database: {e}"))?;
    let spec = match client {
        CeilingClient::JavaDriver => {
            if !peers.is_built(PEER) {
                return Err(format!("peers/{PEER} is not built (scripts/peers build {PEER})"));
            }
            let args = [
                "--db".to_string(),
                db_url.to_string(),
                "--nodes".to_string(),
                run.nodes.to_string(),
                "--concurrency".to_string(),
                run.concurrency.to_string(),
                "--seconds".to_string(),
                seconds.as_secs().to_string(),
                "--warmup".to_string(),
                warmup.as_secs().to_string(),
            ];
            Spec::client_peer(peers, PEER, args).database_credentials(&db_url)
        }
        // PostgreSQL's own client reports on its own terms (pgbench.rs).
        CeilingClient::Pgbench => return Err("pgbench is measured by its own runner".to_string()),
        CeilingClient::Blocklab => {
            let args = [
                "db-ceiling".to_string(),
                "--nodes".to_string(),
                run.nodes.to_string(),
                "--concurrency".to_string(),
                run.concurrency.to_string(),
                "--seconds".to_string(),
                format!("{}s", seconds.as_secs()),
                "--warmup".to_string(),
                format!("{}s", warmup.as_secs()),
            ];
            Spec::program(exe, args).env("BLOCKLAB_DB", run.url)
        }
    };
    let spec = spec.pinned(run.cpus).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = launch::client(spec)?;
    let mut lines = ClientLines::of(&mut child)?;
    let deadline = Instant::now() + seconds + warmup + Duration::from_secs(60);
    let mut cpu_at_start = None;
    while let Some(line) = lines.next(&mut child, deadline)? {
        if line.contains("measuring") {
            cpu_at_start = run.db.cpu_time();
        }
        lines.keep(line);
    }
    let tail = lines.tail;
    let cpu_at_end = run.db.cpu_time();
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("the ceiling client failed ({status}): {}", tail.join(" | ")));
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or("the ceiling client printed no JSON line")?;
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("the ceiling client's JSON: {e}"))?;
    let num = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
    let reads =
        v.get("reads").and_then(serde_json::Value::as_u64).ok_or("the ceiling client's JSON has no reads")?;
    let db_cpu_per_query_us = match (cpu_at_start, cpu_at_end) {
        (Some(a), Some(b)) if reads > 0 => Some(b.saturating_sub(a).as_secs_f64() * 1e6 / reads as f64),
        _ => None,
    };
    let reads_per_s = num("reads_per_s").unwrap_or(0.0);
    let client_cpu_per_read_us = num("client_cpu_us_per_read");
    let (db_cpus, client_cpus) = run.cpu_counts;
    let words = match client {
        CeilingClient::JavaDriver => format!("{PEER}: neo4j-java-driver 4.4.20, async API"),
        CeilingClient::Blocklab => "blocklab db-ceiling: blocklab's own client, non-blocking".to_string(),
        CeilingClient::Pgbench => "pgbench".to_string(),
    };
    Ok(Ceiling {
        bound: Some(bound(reads_per_s, db_cpu_per_query_us, db_cpus, client_cpu_per_read_us, client_cpus)),
        client: format!("{words}, {} reads in flight, no HTTP", run.concurrency),
        cpus: run.cpus.map_or_else(|| "not pinned".to_string(), |c| format!("CPU {c}")),
        seconds: seconds.as_secs_f64(),
        warmup_s: warmup.as_secs_f64(),
        reads,
        reads_per_s,
        p50_ms: num("p50_us").unwrap_or(0.0) / 1000.0,
        p99_ms: num("p99_us").unwrap_or(0.0) / 1000.0,
        errors: v.get("errors").and_then(serde_json::Value::as_u64).unwrap_or(0),
        wrong_answers: v.get("wrong_answers").and_then(serde_json::Value::as_u64).unwrap_or(0),
        client_cpu_per_read_us,
        db_cpu_per_query_us,
    })
}

/// A ceiling client's stderr, line by line as it comes (read on a thread of
/// its own), and its last ten lines, for the error when it fails.
pub struct ClientLines {
    lines: mpsc::Receiver<String>,
    /// The last lines kept.
    pub tail: Vec<String>,
}

impl ClientLines {
    /// Takes `child`'s stderr.
    pub fn of(child: &mut Child) -> Result<ClientLines, String> {
        let (lines_tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().ok_or("no stderr")?;
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(ClientLines { lines, tail: Vec::new() })
    }

    /// The next line; `None` once the client closed its stderr. Past
    /// `deadline` the client is killed and the error says so.
    pub fn next(&mut self, child: &mut Child, deadline: Instant) -> Result<Option<String>, String> {
        match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => Ok(Some(line)),
            Err(mpsc::RecvTimeoutError::Disconnected) => Ok(None),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                Err("the ceiling client did not finish within its window plus a minute".to_string())
            }
        }
    }

    /// Keeps `line` among the last ten.
    pub fn keep(&mut self, line: String) {
        self.tail.push(line);
        if self.tail.len() > 10 {
            self.tail.remove(0);
        }
    }
}

/// The line the bench prints for it.
pub fn describe(c: &Ceiling) -> String {
    format!(
        "the database's ceiling: {:.0} reads/s (p50 {:.1} ms, p99 {:.1} ms, {} errors, {} wrong answers; the database {} µs \
         CPU per read, the client {} µs; {}; {} on {}, {:.0} s after {:.0} s of warm-up)",
        c.reads_per_s,
        c.p50_ms,
        c.p99_ms,
        c.errors,
        c.wrong_answers,
        c.db_cpu_per_query_us.map_or("?".to_string(), |u| format!("{u:.0}")),
        c.client_cpu_per_read_us.map_or("?".to_string(), |u| format!("{u:.0}")),
        match c.bound.as_deref() {
            Some("database") => "set by the database",
            Some("client") => "set by its client",
            Some("neither") => "neither CPU saturated: set by the reads in flight and their latency",
            _ => "what set it is unknown",
        },
        c.client,
        c.cpus,
        c.seconds,
        c.warmup_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_side_whose_cpus_were_busy_set_the_ceiling() {
        // 2,937 reads/s at 352 µs of Neo4j CPU each on one CPU: 103 % busy.
        assert_eq!(bound(2937.0, Some(352.0), 1, Some(60.0), 1), "database");
        // The driver at 300 µs a read on one CPU, Neo4j at 150.
        assert_eq!(bound(3000.0, Some(150.0), 1, Some(300.0), 1), "client");
        // Neither above 85 %: the reads in flight and their latency set it.
        assert_eq!(bound(1000.0, Some(150.0), 1, Some(100.0), 1), "neither");
        assert_eq!(bound(1000.0, None, 1, None, 1), "unknown");
    }
}
