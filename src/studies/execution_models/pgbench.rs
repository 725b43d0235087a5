//! PostgreSQL's ceiling with PostgreSQL's own client, pgbench: the study's
//! read as a custom script (`\set id random(1, N)`, then blocklab's prepared
//! SELECT, [`CONTENT_SQL`]), `-M prepared -j 1`, C connections, no HTTP.
//! Each answer's id is checked in the script: a row other than the one asked
//! for ends the run with an error, so a ceiling here never counts one.
//!
//! One pgbench run covers the warm-up and the window (`-T` both, plus one
//! second): a second run would open its C connections — C backends forked —
//! inside the window. pgbench's progress lines (`-P 1`) mark the window's
//! edges: the database's and pgbench's CPU are read there, and the reads are
//! the transactions its log (`-l`) says ended between them, with their
//! latencies.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

use super::ceiling::{Ceiling, CeilingRun, ClientLines, bound, window};
use crate::db::{CONTENT_SQL, DbUrl, PostgresTarget};
use crate::harness::launch::{self, Spec};
use crate::proc::{Pid, cpu_time};

/// pgbench of the newest PostgreSQL installed (Debian's, under
/// `/usr/lib/postgresql/MAJOR/bin`), else the one on `PATH`.
pub fn program() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|d| {
            let major = d.file_name().to_str()?.parse().ok()?;
            let exe = d.path().join("bin/pgbench");
            exe.is_file().then_some((major, exe))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, exe)| exe).or_else(|| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join("pgbench"))
            .find(|p| p.is_file())
    })
}

/// The custom script: the read, its id checked (a wrong row divides by zero,
/// which aborts the client and fails the run).
fn script(nodes: u64) -> String {
    let select = CONTENT_SQL.replace("$1", ":id");
    format!(
        "\\set id random(1, {nodes})\n{select} \\gset got_\n\\if :got_id != :id\nSELECT 1 / 0 AS wrong_row;\n\\endif\n"
    )
}

/// The words a ceiling measured by pgbench is named by.
pub fn client_words(concurrency: usize) -> String {
    format!(
        "pgbench (PostgreSQL's own client): the prepared SELECT, -M prepared -j 1, {concurrency} connections, \
         each answer's id checked, no HTTP"
    )
}

/// Runs pgbench as `run` says; the error says why there is no ceiling.
pub fn measure(run: &CeilingRun) -> Result<Ceiling, String> {
    let exe = program().ok_or("pgbench is not installed (apt-get install postgresql)")?;
    let Ok(DbUrl::Postgres(target)) = run.url.parse::<DbUrl>() else {
        return Err("pgbench measures PostgreSQL only".to_string());
    };
    let (seconds, warmup) = window(run.quick);
    let dir = std::env::temp_dir().join(format!("blocklab-pgbench-{}-{}", std::process::id(), target.port));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = measure_in(&exe, run, &target, seconds, warmup, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn measure_in(
    exe: &Path,
    run: &CeilingRun,
    target: &PostgresTarget,
    seconds: Duration,
    warmup: Duration,
    dir: &Path,
) -> Result<Ceiling, String> {
    let script_file = dir.join("read.sql");
    std::fs::write(&script_file, script(run.nodes)).map_err(|e| format!("{}: {e}", script_file.display()))?;
    // The user and password as blocklab's client takes them: from the URL,
    // else PGUSER and PGPASSWORD. The password goes through the environment only.
    let (user, password) = match &target.credentials {
        Some((user, password)) => (user.clone(), Some(password.clone()).filter(|p| !p.is_empty())),
        None => (std::env::var("PGUSER").unwrap_or_else(|_| "postgres".to_string()), None),
    };
    let total = (warmup + seconds).as_secs() + 1;
    let args: Vec<String> = [
        "-n",
        "-M",
        "prepared",
        "-j",
        "1",
        "-c",
        &run.concurrency.to_string(),
        "-T",
        &total.to_string(),
        "-P",
        "1",
        "-l",
        "--log-prefix",
        &dir.join("tx").to_string_lossy(),
        "-f",
        &script_file.to_string_lossy(),
        "-h",
        target.host.trim_start_matches('[').trim_end_matches(']'),
        "-p",
        &target.port.to_string(),
        "-U",
        &user,
        target.database.as_deref().unwrap_or(&user),
    ]
    .map(String::from)
    .to_vec();
    let mut spec = Spec::program(exe, args).pinned(run.cpus);
    if let Some(password) = password {
        spec = spec.env("PGPASSWORD", password);
    }
    let mut child = launch::client(spec.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()))?;
    let pid = child.id();
    let mut lines = ClientLines::of(&mut child)?;
    /// A window edge: when, the database's CPU, pgbench's.
    type Edge = (SystemTime, Option<Duration>, Option<Duration>);
    let edge = || -> Edge { (SystemTime::now(), run.db.cpu_time(), cpu_time(Pid::Of(pid))) };
    let deadline = Instant::now() + Duration::from_secs(total + 60);
    let (mut start, mut end): (Option<Edge>, Option<Edge>) = (None, None);
    while let Some(line) = lines.next(&mut child, deadline)? {
        // "progress: 5.0 s, 31234.5 tps, lat 4.1 ms stddev 1.2, 0 failed"
        match progress_seconds(&line) {
            Some(at) if start.is_none() && at >= warmup.as_secs_f64() => start = Some(edge()),
            Some(at) if start.is_some() && end.is_none() && at >= (warmup + seconds).as_secs_f64() => {
                end = Some(edge());
            }
            Some(_) => {}
            None => lines.keep(line),
        }
    }
    let tail = lines.tail;
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        let why = if tail.iter().any(|l| l.contains("division by zero")) {
            "a read answered another row than the one asked for".to_string()
        } else {
            tail.join(" | ")
        };
        return Err(format!("pgbench failed ({status}): {why}"));
    }
    let (Some(start), Some(end)) = (start, end) else {
        return Err(format!("pgbench printed no progress across the window: {}", tail.join(" | ")));
    };
    let window = Window::read(dir, micros(start.0), micros(end.0))?;
    let elapsed = end.0.duration_since(start.0).unwrap_or_default().as_secs_f64();
    let per_read = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
        (Some(a), Some(b)) if window.reads > 0 => {
            Some(b.saturating_sub(a).as_secs_f64() * 1e6 / window.reads as f64)
        }
        _ => None,
    };
    let db_cpu_per_query_us = per_read(start.1, end.1);
    let client_cpu_per_read_us = per_read(start.2, end.2);
    let reads_per_s = if elapsed > 0.0 { window.reads as f64 / elapsed } else { 0.0 };
    // -j 1: pgbench is one thread, whatever CPUs it may use.
    let db_cpus = run.cpu_counts.0;
    Ok(Ceiling {
        bound: Some(bound(reads_per_s, db_cpu_per_query_us, db_cpus, client_cpu_per_read_us, 1)),
        client: client_words(run.concurrency),
        cpus: run.cpus.map_or_else(|| "not pinned".to_string(), |c| format!("CPU {c}")),
        seconds: elapsed,
        warmup_s: warmup.as_secs_f64(),
        reads: window.reads,
        reads_per_s,
        p50_ms: window.latency_us.value_at_quantile(0.5) as f64 / 1000.0,
        p99_ms: window.latency_us.value_at_quantile(0.99) as f64 / 1000.0,
        errors: window.errors,
        wrong_answers: 0,
        client_cpu_per_read_us,
        db_cpu_per_query_us,
    })
}

fn micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// `at` of a progress line (`progress: 5.0 s, …`).
fn progress_seconds(line: &str) -> Option<f64> {
    line.strip_prefix("progress: ")?.split_once(" s")?.0.trim().parse().ok()
}

/// The transactions pgbench's log says ended in the window.
struct Window {
    reads: u64,
    errors: u64,
    latency_us: Histogram<u64>,
}

impl Window {
    /// Reads every log file in `dir` (`tx.PID`: one per thread), counting the
    /// transactions that ended in `[from, to]` (µs since the epoch).
    fn read(dir: &Path, from: u64, to: u64) -> Result<Window, String> {
        let mut window = Window {
            reads: 0,
            errors: 0,
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?,
        };
        let logs = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for log in logs.flatten().filter(|f| f.file_name().to_string_lossy().starts_with("tx.")) {
            let file =
                std::fs::File::open(log.path()).map_err(|e| format!("{}: {e}", log.path().display()))?;
            for line in BufReader::new(file).lines().map_while(Result::ok) {
                window.add(&line, from, to);
            }
        }
        if window.reads == 0 {
            return Err("pgbench's log holds no read in the window".to_string());
        }
        Ok(window)
    }

    /// One log line: `client transaction latency_us script epoch_s epoch_us`;
    /// a latency that is not a number (`failed`, `skipped`) is an error.
    fn add(&mut self, line: &str, from: u64, to: u64) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, _, latency, _, secs, us, ..] = fields[..] else { return };
        let (Ok(secs), Ok(us)) = (secs.parse::<u64>(), us.parse::<u64>()) else { return };
        let ended = secs * 1_000_000 + us;
        if ended < from || ended > to {
            return;
        }
        match latency.parse::<u64>() {
            Ok(latency) => {
                self.reads += 1;
                let _ = self.latency_us.record(latency.max(1));
            }
            Err(_) => self.errors += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_reads_the_row_asked_for_and_checks_its_id() {
        let s = script(1000);
        assert!(s.starts_with("\\set id random(1, 1000)\n"));
        assert!(s.contains("FROM content WHERE id = :id \\gset got_\n"));
        assert!(s.contains("\\if :got_id != :id\n"));
    }

    #[test]
    fn only_the_transactions_that_ended_in_the_window_count() {
        let mut w =
            Window { reads: 0, errors: 0, latency_us: Histogram::new_with_bounds(1, 60_000_000, 3).unwrap() };
        let (from, to) = (100_500_000, 101_000_000);
        w.add("0 1 1500 0 100 400000", from, to); // before
        w.add("0 2 2500 0 100 600000", from, to);
        w.add("1 1 failed 0 100 700000", from, to);
        w.add("1 2 3000 0 101 000001", from, to); // after
        w.add("garbage", from, to);
        assert_eq!((w.reads, w.errors), (1, 1));
        assert_eq!(
            progress_seconds("progress: 5.0 s, 31234.5 tps, lat 4.1 ms stddev 1.2, 0 failed"),
            Some(5.0)
        );
        assert_eq!(progress_seconds("pgbench (15.18)"), None);
    }
}
