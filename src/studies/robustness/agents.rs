//! A level split over several client processes. One process may hold only
//! `RLIMIT_NOFILE` descriptors (20,000 here, and no privilege raises it), one
//! per connection, so a level of 50,000 concurrent requests needs three. Each
//! agent (`blocklab sweep-agent`, a hidden subcommand of this binary) opens
//! its share of the connections from its own loopback source addresses,
//! says `ready`, waits for `go` on its stdin, sends every request at once,
//! and prints its outcomes and every response time as one JSON line. The
//! sweep writes `go` to all of them together (one send instant, within the
//! time the writes take, which the level's `sent over` figure includes) and
//! merges their reports losslessly: outcomes add up, the response times are
//! pooled sample by sample (each measured from its own request's send).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;

use super::step::{self, Outcome, StepLoad};
use crate::failure::Failure;
use crate::flags::parse_positive_duration;
use crate::harness::launch::{self, Spec};

/// Flags of `blocklab sweep-agent` (run by the sweep, not by hand).
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The target's address.
    #[arg(long)]
    pub addr: SocketAddr,
    /// Its `Host` header.
    #[arg(long)]
    pub host: String,
    /// Path and query of each request.
    #[arg(long)]
    pub path: String,
    /// The first connection's number in the level (it picks the source addresses).
    #[arg(long, default_value_t = 0)]
    pub first: usize,
    /// Connections (and requests) of this agent.
    #[arg(long)]
    pub count: usize,
    /// Connections per source address.
    #[arg(long, default_value_t = step::CONNECTIONS_PER_ADDRESS)]
    pub per_address: usize,
    /// Limit for one request, connect included.
    #[arg(long, value_parser = parse_positive_duration)]
    pub timeout: Duration,
}

/// What an agent prints when its requests are over.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Report {
    connected: usize,
    connect_max_ms: f64,
    outcomes: BTreeMap<String, usize>,
    ok_ms: Vec<f64>,
    /// Beside each of `ok_ms`: when it reached the socket, from its send.
    #[serde(default)]
    ok_arrived_ms: Vec<Option<f64>>,
    refused_max_ms: f64,
    #[serde(default)]
    refused_for: BTreeMap<String, usize>,
    wall_ms: f64,
    send_spread_ms: f64,
    sources: Vec<std::net::IpAddr>,
}

/// `blocklab sweep-agent`: opens its connections, prints `ready N`, waits
/// for a line on stdin, sends, prints its [`Report`] as one JSON line.
pub fn agent(args: &AgentArgs) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Failed(e.into()))?;
    let range = args.first..args.first + args.count;
    let opened = runtime.block_on(step::open(args.addr, range, args.timeout, args.per_address));
    let sources = opened.sources().iter().copied().collect();
    println!("ready {}", opened.connected());
    let _ = std::io::stdout().flush();
    let mut go = String::new();
    if std::io::stdin().read_line(&mut go).is_err() || go.trim() != "go" {
        return Err(Failure::Failed(anyhow::anyhow!("sweep-agent: no 'go' on stdin")));
    }
    let load = runtime.block_on(step::send(opened, &args.host, &args.path, args.timeout));
    let report = Report {
        connected: load.connected,
        connect_max_ms: load.connect_max_ms,
        outcomes: load.outcomes.iter().map(|(k, v)| ((*k).to_string(), *v)).collect(),
        ok_ms: load.ok_ms,
        ok_arrived_ms: load.ok_arrived_ms,
        refused_max_ms: load.refused_max_ms,
        refused_for: load.refused_for,
        wall_ms: load.wall_ms,
        send_spread_ms: load.send_spread_ms,
        sources,
    };
    println!("{}", serde_json::to_string(&report).map_err(|e| Failure::Failed(e.into()))?);
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

/// One agent of a level, started.
struct Agent {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// When it was told to go, ms after the first (`None`: the write failed).
    go_offset_ms: Option<f64>,
}

/// Runs a level of `level` connections over ⌈level / per_process⌉ agents of
/// `exe` and merges their outcomes. Every request ends as one outcome: an
/// agent that fails counts its share as [`Outcome::LoadSide`], never as lost.
#[allow(clippy::too_many_arguments)]
pub fn run_split(
    exe: &Path,
    addr: SocketAddr,
    host: &str,
    path: &str,
    level: usize,
    timeout: Duration,
    per_address: usize,
    per_process: usize,
) -> StepLoad {
    let per_process = per_process.max(1);
    let shares: Vec<(usize, usize)> =
        (0..level).step_by(per_process).map(|first| (first, per_process.min(level - first))).collect();
    let mut agents: Vec<Option<Agent>> = shares
        .iter()
        .map(|(first, count)| {
            let args = [
                "sweep-agent".to_string(),
                "--addr".to_string(),
                addr.to_string(),
                "--host".to_string(),
                host.to_string(),
                "--path".to_string(),
                path.to_string(),
                "--first".to_string(),
                first.to_string(),
                "--count".to_string(),
                count.to_string(),
                "--per-address".to_string(),
                per_address.to_string(),
                "--timeout".to_string(),
                format!("{}ms", timeout.as_millis()),
            ];
            // Unpinned: an agent runs where the runner runs (on the load's CPUs).
            let spec = Spec::program(exe, args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            start(spec)
        })
        .collect();
    let mut load = StepLoad { processes: shares.len(), ..StepLoad::default() };
    let mut sources = std::collections::BTreeSet::new();
    let lost = |load: &mut StepLoad, count: usize| {
        *load.outcomes.entry(Outcome::LoadSide.name()).or_default() += count;
    };
    // Every agent opens its connections; then all are told to go at once.
    let ready_by = Instant::now() + timeout + Duration::from_secs(30);
    for (agent, (_, count)) in agents.iter_mut().zip(&shares) {
        let ready = agent.as_ref().and_then(|a| a.lines.recv_timeout(left(ready_by)).ok());
        if !ready.is_some_and(|line| line.starts_with("ready ")) {
            eprintln!(
                "sweep: a client process did not open its {count} connections: its share counts as load_side"
            );
            if let Some(mut a) = agent.take() {
                let _ = a.child.kill();
                let _ = a.child.wait();
            }
        }
    }
    let go_at = Instant::now();
    for agent in agents.iter_mut().flatten() {
        let sent = agent.child.stdin.as_mut().is_some_and(|stdin| stdin.write_all(b"go\n").is_ok());
        agent.go_offset_ms = sent.then(|| go_at.elapsed().as_secs_f64() * 1e3);
    }
    let done_by = Instant::now() + timeout + Duration::from_secs(30);
    for (agent, (_, count)) in agents.iter_mut().zip(&shares) {
        let Some(a) = agent.as_mut() else {
            lost(&mut load, *count);
            continue;
        };
        let offset = a.go_offset_ms.unwrap_or(0.0);
        let report: Option<Report> = loop {
            match a.lines.recv_timeout(left(done_by)) {
                Ok(line) if line.starts_with('{') => break serde_json::from_str(&line).ok(),
                Ok(_) => {}
                Err(_) => break None,
            }
        };
        let _ = a.child.kill();
        let _ = a.child.wait();
        match report {
            Some(r) => {
                sources.extend(r.sources.iter().copied());
                merge(&mut load, r, offset);
            }
            None => {
                eprintln!(
                    "sweep: a client process reported nothing for its {count} requests: counted as load_side"
                );
                lost(&mut load, *count);
            }
        }
    }
    load.source_addresses = sources.len();
    load.settle_arrivals();
    load
}

/// Adds one agent's report to the level's figures; `offset_ms` is when it
/// was told to go after the first.
fn merge(load: &mut StepLoad, r: Report, offset_ms: f64) {
    load.connected += r.connected;
    load.connect_max_ms = load.connect_max_ms.max(r.connect_max_ms);
    for (name, n) in r.outcomes {
        let outcome = Outcome::ALL.into_iter().find(|o| o.name() == name).unwrap_or(Outcome::LoadSide);
        *load.outcomes.entry(outcome.name()).or_default() += n;
    }
    // Each time beside its own arrival, whatever the report carried.
    let mut arrived = r.ok_arrived_ms;
    arrived.resize(r.ok_ms.len(), None);
    load.ok_ms.extend(r.ok_ms);
    load.ok_arrived_ms.extend(arrived);
    load.refused_max_ms = load.refused_max_ms.max(r.refused_max_ms);
    for (why, n) in r.refused_for {
        *load.refused_for.entry(why).or_default() += n;
    }
    load.wall_ms = load.wall_ms.max(offset_ms + r.wall_ms);
    load.send_spread_ms = load.send_spread_ms.max(offset_ms + r.send_spread_ms);
}

fn start(spec: Spec) -> Option<Agent> {
    let mut child = launch::client(spec).map_err(|e| eprintln!("sweep: a client process: {e}")).ok()?;
    let stdout = child.stdout.take()?;
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Some(Agent { child, lines, go_offset_ms: None })
}

fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_merge_losslessly() {
        let mut load = StepLoad { processes: 2, ..StepLoad::default() };
        let report = |ok: usize, timeout: usize, ms: Vec<f64>| Report {
            connected: ok + timeout,
            connect_max_ms: 3.0,
            outcomes: [("ok".to_string(), ok), ("timeout".to_string(), timeout)].into_iter().collect(),
            // Each answer reached the socket 1 ms before it was read; the first report's last had no stamp.
            ok_arrived_ms: ms.iter().map(|t| Some(t - 1.0)).take(if ok == 2 { 1 } else { ok }).collect(),
            ok_ms: ms,
            refused_max_ms: 0.0,
            refused_for: [("memory".to_string(), timeout)].into_iter().collect(),
            wall_ms: 5000.0,
            send_spread_ms: 1.0,
            sources: vec!["127.0.0.1".parse().unwrap()],
        };
        merge(&mut load, report(2, 1, vec![5000.0, 5001.0]), 0.0);
        merge(&mut load, report(3, 2, vec![5002.0, 5003.0, 5004.0]), 0.4);
        assert_eq!(load.count(Outcome::Ok), 5);
        assert_eq!(load.count(Outcome::Timeout), 3);
        assert_eq!(load.refused_for["memory"], 3, "the reasons add up across processes");
        assert_eq!(load.connected, 8);
        assert_eq!(load.ok_ms.len(), 5);
        assert_eq!(load.quantile_ms(1.0), Some(5004.0));
        assert!((load.send_spread_ms - 1.4).abs() < 1e-9);
        // Each time stays beside its own arrival, a missing one included.
        assert_eq!(load.ok_arrived_ms, vec![Some(4999.0), None, Some(5001.0), Some(5002.0), Some(5003.0)]);
        load.settle_arrivals();
        assert_eq!((load.slowest_arrived_ms, load.unread_max_ms), (Some(5003.0), Some(1.0)));
    }
}
