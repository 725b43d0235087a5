//! Neo4j's ceiling for the study's one-node read: how many reads per second
//! the managed Neo4j answers when nothing but a driver stands in front of it
//! (`peers/neo4j-ceiling`: the Java driver 4.4.20's async API, C reads in
//! flight, no HTTP, every answer's id checked). The line every database
//! endpoint is measured against: a server that reaches it adds nothing of its
//! own to the database's limit.
//!
//! Measured once per bench, after the database is warmed and before the
//! matrix, with the client pinned where the servers run (the database keeps
//! its own CPUs), so the ceiling and the servers meet the same placement.
//! The database's CPU is read from /proc over exactly the measured window
//! (the client marks its start on stderr).

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::harness::database::ManagedNeo4j;
use crate::harness::peers::Peers;

/// The peer that measures it.
pub const PEER: &str = "neo4j-ceiling";
/// Reads kept in flight (as the warm-up's connections).
pub const CONCURRENCY: usize = 64;

/// Neo4j's ceiling, as `results.json` keeps it (`conditions.ceiling`).
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
    /// Neo4j's CPU per read over the window (µs), from /proc.
    pub db_cpu_per_query_us: Option<f64>,
}

/// How long the ceiling is measured: 10 s after 5 s of warm-up; 3 after 2
/// with `--quick`.
pub fn window(quick: bool) -> (Duration, Duration) {
    if quick {
        (Duration::from_secs(3), Duration::from_secs(2))
    } else {
        (Duration::from_secs(10), Duration::from_secs(5))
    }
}

/// Runs the ceiling client once against `db` (pinned to `cpus` when given)
/// and reads its JSON line. The error says why there is no ceiling (the peer
/// not built, the client failed, it hung past its window plus a minute).
pub fn measure(
    peers: &Peers,
    db: &ManagedNeo4j,
    nodes: u64,
    cpus: Option<&str>,
    quick: bool,
) -> Result<Ceiling, String> {
    if !peers.is_built(PEER) {
        return Err(format!("peers/{PEER} is not built (scripts/peers build {PEER})"));
    }
    let (seconds, warmup) = window(quick);
    let mut command = match cpus {
        Some(cpus) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpus]).arg(&peers.script);
            c
        }
        None => Command::new(&peers.script),
    };
    command
        .args(["run", PEER, "--db", db.url()])
        .args(["--nodes", &nodes.to_string(), "--concurrency", &CONCURRENCY.to_string()])
        .args(["--seconds", &seconds.as_secs().to_string(), "--warmup", &warmup.as_secs().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| format!("cannot start {}: {e}", peers.script.display()))?;
    let (lines_tx, lines) = mpsc::channel();
    let stderr = child.stderr.take().ok_or("no stderr")?;
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + seconds + warmup + Duration::from_secs(60);
    let mut cpu_at_start = None;
    let mut tail: Vec<String> = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                if line.contains("measuring") {
                    cpu_at_start = db.cpu_time();
                }
                tail.push(line);
                if tail.len() > 10 {
                    tail.remove(0);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the ceiling client did not finish within {} s",
                    (seconds + warmup).as_secs() + 60
                ));
            }
        }
    }
    let cpu_at_end = db.cpu_time();
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
    Ok(Ceiling {
        client: format!(
            "{PEER}: neo4j-java-driver 4.4.20, async API, {CONCURRENCY} reads in flight, no HTTP"
        ),
        cpus: cpus.map_or_else(|| "not pinned".to_string(), |c| format!("CPU {c}")),
        seconds: seconds.as_secs_f64(),
        warmup_s: warmup.as_secs_f64(),
        reads,
        reads_per_s: num("reads_per_s").unwrap_or(0.0),
        p50_ms: num("p50_us").unwrap_or(0.0) / 1000.0,
        p99_ms: num("p99_us").unwrap_or(0.0) / 1000.0,
        errors: v.get("errors").and_then(serde_json::Value::as_u64).unwrap_or(0),
        wrong_answers: v.get("wrong_answers").and_then(serde_json::Value::as_u64).unwrap_or(0),
        client_cpu_per_read_us: num("client_cpu_us_per_read"),
        db_cpu_per_query_us,
    })
}

/// The line the bench prints for it.
pub fn describe(c: &Ceiling) -> String {
    format!(
        "Neo4j's ceiling: {:.0} reads/s (p50 {:.1} ms, p99 {:.1} ms, {} errors, {} wrong answers; Neo4j {} µs CPU \
         per read; {} on {}, {:.0} s after {:.0} s of warm-up)",
        c.reads_per_s,
        c.p50_ms,
        c.p99_ms,
        c.errors,
        c.wrong_answers,
        c.db_cpu_per_query_us.map_or("?".to_string(), |u| format!("{u:.0}")),
        c.client,
        c.cpus,
        c.seconds,
        c.warmup_s
    )
}
