//! The sweep's outputs: `results.md` (the seed's variables per target and
//! level, and where each target stopped coping), `results.json`,
//! `results.csv`, and the one-line progress of each step. (`report.html` is
//! [`super::html`]'s; [`super::write_all`] writes them all.)

use std::fmt::Write;

use super::reading::{self, head, verdict};
use super::results::{Death, DeathKind, Step, StepStatus, SweepResults, TargetResult};
use super::step::{Outcome, StepLoad};
use crate::page::{Column, Table};

/// One line for stderr after a step, the target's name padded to `width`
/// (the longest name swept) so that the columns line up.
pub fn progress_line(target: &str, width: usize, step: &Step, died: Option<&Death>) -> String {
    let mut line = format!(
        "{target:<width$} {:>6} concurrent: {:>5.1} % ok, min {} ms, max {} ms, peak {}, {} threads",
        step.level,
        step.success_rate.unwrap_or(0.0) * 100.0,
        ms(step.min_ms),
        ms(step.max_ms),
        mib(step.peak_memory_bytes),
        step.peak_threads.map_or("-".to_string(), |t| t.to_string())
    );
    if let Some(load) = &step.load {
        let _ = write!(line, ", {} refused, {} timed out", load.count(Outcome::Refused), load.timed_out());
        if load.processes > 1 {
            let _ = write!(line, ", {} client processes", load.processes);
        }
    }
    if let Some(workers) = step.workers.filter(|w| *w > 1) {
        let _ = write!(line, ", {workers} workers");
    }
    if step.peak_heap_bytes.is_some() {
        let _ = write!(line, ", heap {}", mib(step.peak_heap_bytes));
    }
    if let Some(load) = step.load.as_ref().filter(|l| l.send_spread_ms >= 1.0) {
        let _ = write!(line, ", sent over {:.0} ms", load.send_spread_ms);
    }
    match died {
        Some(death) if death.how == DeathKind::Unresponsive => {
            let _ = write!(line, "; NOT ANSWERING /test within 2 s ({}): probing", head(&death.detail));
        }
        Some(death) => {
            let _ = write!(line, "; DOWN: {} ({})", death.how.words(), head(&death.detail));
        }
        None => {}
    }
    line
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.0}"))
}

fn mib(v: Option<u64>) -> String {
    v.map_or("-".to_string(), |b| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64))
}

/// The one line a `--quick` sweep's outputs open with.
pub fn first_look(results: &SweepResults) -> String {
    format!(
        "A first look (--quick): {} levels, a {} ms delay: too few and too short for its figures to say where a \
         target breaks, and no comparison between targets below is a finding. Run without --quick for figures.",
        results.levels.len(),
        results.delay_ms
    )
}

/// `results.md`.
pub fn markdown(results: &SweepResults) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# blocklab sweep, {}\n", results.started);
    if results.quick {
        let _ = writeln!(md, "**{}**\n", first_look(results));
    }
    let _ = writeln!(
        md,
        "Each request: `GET /delay?ms={}` on its own connection; all connections of a level opened \
         first, then every request sent at once. Timeout {} ms per request. Targets on CPUs {}, \
         load on CPUs {}. JVM peers: `{}`. Rust targets: {}.\n",
        results.delay_ms,
        results.timeout_ms,
        crate::harness::placement::list(&results.placement.server_cpus),
        crate::harness::placement::list(&results.placement.load_cpus),
        results.jvm_opts,
        results.allocator
    );
    let _ = writeln!(md, "Client: **{}**, {}.\n", results.client.name(), results.client_detail);
    let m = &results.machine;
    let _ = writeln!(
        md,
        "Made by `{}` on {}, {} CPUs online, {} GiB, Linux {}; {}.\n",
        results.command,
        m.cpu_model,
        m.cpus_online,
        m.memory_gib,
        m.kernel,
        results.versions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    );
    for w in &results.warnings {
        let _ = writeln!(md, "**Warning:** {w}\n");
    }
    if results.interrupted {
        let _ = writeln!(md, "**Interrupted:** partial results.\n");
    }
    let _ = writeln!(md, "## Reading\n");
    for sentence in reading::reading(results) {
        let _ = writeln!(md, "- {sentence}");
    }
    let _ = writeln!(md, "\n## Where each target stopped coping\n");
    md += &coping(results).markdown();
    let warmed: Vec<_> = results.targets.iter().filter_map(|t| Some((&t.name, t.warmup.as_ref()?))).collect();
    if !warmed.is_empty() {
        let _ = writeln!(md);
        for (name, warmup) in warmed {
            let _ = writeln!(md, "- {name}: {warmup}.");
        }
    }
    let _ = writeln!(md, "\n## The seed's question, on this machine\n");
    for sentence in super::seed::answer(results) {
        let _ = writeln!(md, "- {sentence}");
    }
    let _ = writeln!(md, "\n## Memory per in-flight request\n");
    let _ = writeln!(md, "{}\n", super::memory::MEANING);
    md += &memory(results).markdown();
    let _ = writeln!(md, "\n## Per level\n");
    let _ = writeln!(md, "{PER_LEVEL}\n");
    let tables: Vec<String> = per_level(results).iter().map(Table::markdown).collect();
    md += &tables.join("\n");
    for note in level_notes(results) {
        let _ = writeln!(md, "\n{note}");
    }
    md
}

/// What the per-level tables' columns are.
pub const PER_LEVEL: &str = "Three tables, a row per target and level each: what became of the requests, how long \
    the answers took, and what the target took to serve them. Success: 2xx within the timeout. Refused: a 503 \
    (admission control's answer) or a connection closed before its request was sent, with the reason the server \
    gave in brackets (blocklab's x-refused-for header: memory or descriptors at accept, memory_at_request for a \
    request that came on an admitted connection past the memory line; unstated: a 503 without it; closed: the \
    close). Timed out: no whole answer (or no connection) within the timeout. Other failures: connect refused \
    (ECONNREFUSED), reset, closed early, another status, the client's own. Response times of the successes, from \
    the send to the whole response; the slowest answer split at the moment it reached the client's socket (the \
    kernel's receive timestamp): before it, the target's time and the loopback's; after it, the time it waited \
    unread, the client's. Refused within: the slowest refusal from its send. Sent over: the first request sent to \
    the last (JMeter starts its threads one by one). Peak memory: the target's cgroup, page cache excluded, sampled \
    every 50 ms; peak heap: a JVM's heap in use (its performance counters), sampled every 50 ms. Client \
    processes: how many sent the level; workers: the target's worker processes (lean's --processes).";

/// Where each target stopped coping: its cap, what it took idle, its verdict.
pub fn coping(results: &SweepResults) -> Table {
    Table {
        headers: ["target", "memory cap", "idle", "verdict"].map(String::from).to_vec(),
        rows: results
            .targets
            .iter()
            .map(|t| vec![t.name.clone(), t.cap.clone(), reading::idle(t), verdict(t)])
            .collect(),
    }
}

/// Memory per in-flight request, per target.
pub fn memory(results: &SweepResults) -> Table {
    let kib = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    Table {
        headers: ["target", "levels answered in full", "process KiB", "less page cache KiB", "JVM heap KiB"]
            .map(String::from)
            .to_vec(),
        rows: results
            .targets
            .iter()
            .map(|t| {
                let p = t.per_request.as_ref();
                vec![
                    t.name.clone(),
                    p.map_or("fewer than two".to_string(), |p| {
                        p.levels.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                    }),
                    kib(p.and_then(|p| p.process_kib)),
                    kib(p.and_then(|p| p.less_cache_kib)),
                    kib(p.and_then(|p| p.heap_kib)),
                ]
            })
            .collect(),
    }
}

/// The per-level figures, by question, each table a row per target and
/// level: the requests' outcomes, the answers' times, what the target took.
pub fn per_level(results: &SweepResults) -> Vec<Table> {
    let rows: Vec<(&TargetResult, &Step)> =
        results.targets.iter().flat_map(|t| t.steps.iter().map(move |s| (t, s))).collect();
    let keys = vec![
        Column::new("target", rows.iter().map(|(t, _)| t.name.clone()).collect()),
        Column::new("concurrent", rows.iter().map(|(_, s)| s.level.to_string()).collect()),
    ];
    let column = |header: &str, cell: &dyn Fn(&TargetResult, &Step) -> String| {
        Column::new(header, rows.iter().map(|(t, s)| cell(t, s)).collect())
    };
    let count =
        |s: &Step, f: fn(&StepLoad) -> usize| s.load.as_ref().map_or("-".to_string(), |l| f(l).to_string());
    let slowest_arrived = |s: &Step| s.load.as_ref().and_then(|l| l.slowest_arrived_ms);
    let outcomes = vec![
        column("success %", &|_, s| s.success_rate.map_or("-".to_string(), |r| format!("{:.1}", r * 100.0))),
        column("refused", &|_, s| s.load.as_ref().map_or("-".to_string(), refused_cell)),
        column("timed out", &|_, s| count(s, StepLoad::timed_out)),
        column("other failures", &|_, s| other_failures(s)),
        column("after", &|t, s| after(t, s)),
    ];
    let times = vec![
        column("min ms", &|_, s| ms(s.min_ms)),
        column("p50 ms", &|_, s| ms(s.p50_ms)),
        column("p99 ms", &|_, s| ms(s.p99_ms)),
        column("max ms", &|_, s| ms(s.max_ms)),
        column("slowest: to the socket ms", &|_, s| ms(slowest_arrived(s))),
        column("slowest: unread ms", &|_, s| {
            ms(s.max_ms.zip(slowest_arrived(s)).map(|(max, arrived)| (max - arrived).max(0.0)))
        }),
        column("refused within ms", &|_, s| {
            ms(s.load.as_ref().filter(|l| l.count(Outcome::Refused) > 0).map(|l| l.refused_max_ms))
        }),
        column("sent over ms", &|_, s| ms(s.load.as_ref().map(|l| l.send_spread_ms))),
    ];
    let took = vec![
        column("peak memory", &|_, s| mib(s.peak_memory_bytes)),
        column("peak heap", &|_, s| mib(s.peak_heap_bytes)),
        column("peak threads", &|_, s| s.peak_threads.map_or("-".to_string(), |t| t.to_string())),
        column("client processes", &|_, s| count(s, |l| l.processes)),
        column("workers", &|_, s| s.workers.map_or("-".to_string(), |w| w.to_string())),
    ];
    [outcomes, times, took].into_iter().flat_map(|group| Table::packed(&keys, vec![group])).collect()
}

/// The lines under the per-level tables: levels whose connections came
/// from more than one source address, or were sent by more than one
/// client process.
pub fn level_notes(results: &SweepResults) -> Vec<String> {
    let mut notes = Vec::new();
    let spread = steps_where(results, |load| load.source_addresses);
    if !spread.is_empty() {
        notes.push(format!(
            "Connections from more than one loopback source address (127.0.0.1, 127.0.0.2, …; one address has \
             ~28,000 ephemeral ports): {}.",
            spread.join("; ")
        ));
    }
    let split = steps_where(results, |load| load.processes);
    if !split.is_empty() {
        notes.push(format!(
            "Levels sent by more than one client process (one process holds at most RLIMIT_NOFILE descriptors; \
             each ran on the load's CPUs {}, was told to send at the same instant, and their outcomes were merged \
             request by request): {}.",
            crate::harness::placement::list(&results.placement.load_cpus),
            split.join("; ")
        ));
    }
    notes
}

/// What became of the target after a step, or why the step did not run.
pub fn after(t: &TargetResult, s: &Step) -> String {
    match (s.status, s.alive_after) {
        (StepStatus::NotRunDown, _) => "not run: down".to_string(),
        (StepStatus::NotRunInterrupted, _) => "not run: interrupted".to_string(),
        (StepStatus::ClientFailed, _) => "client failed".to_string(),
        (StepStatus::NotRunWaves, _) => "not run: its answers came in waves at a lower level".to_string(),
        (StepStatus::NotRunLimit, _) => match t.descriptor_limit {
            Some(limit) if !t.admission && !fits_limit(s.level, limit) => {
                format!("not run: over its {limit} descriptors, no admission control")
            }
            _ => "not run: over the client's descriptors".to_string(),
        },
        (StepStatus::Run, Some(true)) => "alive".to_string(),
        (StepStatus::Run, _) if s.recovered_after_s.is_some() => {
            format!("recovered after {:.1} s", s.recovered_after_s.unwrap_or(0.0))
        }
        (StepStatus::Run, _) => t.died.as_ref().map_or("down".to_string(), |d| d.how.words().to_string()),
    }
}

fn fits_limit(level: usize, limit: u64) -> bool {
    level as u64 + super::run::SPARE_DESCRIPTORS <= limit
}

/// A step's failures other than refusals and timeouts, e.g. "reset 3".
fn other_failures(step: &Step) -> String {
    let Some(load) = &step.load else { return "-".to_string() };
    let parts: Vec<String> = Outcome::ALL
        .into_iter()
        .filter(|o| !matches!(o, Outcome::Ok | Outcome::Refused | Outcome::Timeout | Outcome::ConnectTimeout))
        .filter(|o| load.count(*o) > 0)
        .map(|o| format!("{} {}", o.name(), load.count(o)))
        .collect();
    if parts.is_empty() { "0".to_string() } else { parts.join(", ") }
}

/// "TARGET at LEVEL: N" for every step whose load side counted more than
/// one of `count` (source addresses, client processes).
fn steps_where(results: &SweepResults, count: fn(&super::step::StepLoad) -> usize) -> Vec<String> {
    results
        .targets
        .iter()
        .flat_map(|t| t.steps.iter().map(move |s| (t, s)))
        .filter_map(|(t, s)| {
            let n = count(s.load.as_ref()?);
            (n > 1).then(|| format!("{} at {}: {n}", t.name, s.level))
        })
        .collect()
}

/// A level's refusals, with their reasons when the server gave any:
/// `172 (memory 170, descriptors 2)`.
fn refused_cell(load: &StepLoad) -> String {
    let refused = load.count(Outcome::Refused);
    if refused == 0 || load.refused_for.is_empty() {
        return refused.to_string();
    }
    let why: Vec<String> = load.refused_for.iter().map(|(why, n)| format!("{why} {n}")).collect();
    format!("{refused} ({})", why.join(", "))
}

/// The reasons as one CSV cell: `memory:170;descriptors:2`.
fn refused_for_cell(load: &StepLoad) -> String {
    load.refused_for.iter().map(|(why, n)| format!("{why}:{n}")).collect::<Vec<_>>().join(";")
}

/// `results.csv`: one row per target and level, written by the `csv` crate.
/// A column per outcome follows the fixed ones, so rows are records of
/// strings rather than one serde struct (the `csv` crate takes no flattened maps).
pub fn csv(results: &SweepResults) -> anyhow::Result<String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> =
        "target,client,level,status,success_rate,min_ms,p50_ms,p99_ms,max_ms,connect_max_ms,\
         send_spread_ms,refused_max_ms,refused_for,peak_memory_bytes,cgroup_peak_bytes,peak_heap_bytes,peak_threads,alive_after,\
         client_processes,workers,slowest_arrived_ms,unread_max_ms"
            .split(',')
            .map(String::from)
            .collect();
    header.extend(Outcome::ALL.into_iter().map(|o| o.name().to_string()));
    // The run's warnings (no cap, shared CPUs) travel with every row.
    header.push("warnings".to_string());
    out.write_record(&header)?;
    let warnings = results.warnings.join("; ");
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
    let int = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    for t in &results.targets {
        for s in &t.steps {
            let status = serde_json::to_value(s.status)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            let mut row = vec![
                t.name.clone(),
                results.client.name().to_string(),
                s.level.to_string(),
                status,
                opt(s.success_rate),
                opt(s.min_ms),
                opt(s.p50_ms),
                opt(s.p99_ms),
                opt(s.max_ms),
                opt(s.load.as_ref().map(|l| l.connect_max_ms)),
                opt(s.load.as_ref().map(|l| l.send_spread_ms)),
                opt(s.load.as_ref().map(|l| l.refused_max_ms)),
                s.load.as_ref().map_or(String::new(), refused_for_cell),
                int(s.peak_memory_bytes),
                int(s.cgroup_peak_bytes),
                int(s.peak_heap_bytes),
                int(s.peak_threads),
                s.alive_after.map_or(String::new(), |v| v.to_string()),
                s.load.as_ref().map_or(String::new(), |l| l.processes.to_string()),
                s.workers.map_or(String::new(), |w| w.to_string()),
                opt(s.load.as_ref().and_then(|l| l.slowest_arrived_ms)),
                opt(s.load.as_ref().and_then(|l| l.unread_max_ms)),
            ];
            row.extend(
                Outcome::ALL
                    .into_iter()
                    .map(|o| s.load.as_ref().map_or(String::new(), |l| l.count(o).to_string())),
            );
            row.push(warnings.clone());
            out.write_record(&row)?;
        }
    }
    Ok(String::from_utf8(out.into_inner()?)?)
}
