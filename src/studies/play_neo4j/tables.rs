//! The tables of a bench report, built once as data and rendered as
//! Markdown (results.md, stdout) or HTML (report.html).

use super::results::{BenchResults, RunRecord, RunStatus, SHARE_LIMIT, Spread, TestId, TestRecord};
use super::test_id::HasTestId;
use crate::server::Endpoint;

/// A table: headers and rows of cells.
pub struct Table {
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// GitHub-flavoured Markdown.
    pub fn markdown(&self) -> String {
        let mut out = format!("| {} |\n", self.headers.join(" | "));
        out += &format!("|{}\n", "---|".repeat(self.headers.len()));
        for row in &self.rows {
            out += &format!("| {} |\n", row.join(" | "));
        }
        out
    }
}

/// Milliseconds, with the precision the size deserves.
pub fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Requests per second, whole.
pub fn rps(v: f64) -> String {
    format!("{v:.0}")
}

/// A ratio as a percentage.
pub fn pct(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

/// The API as the seed labelled it (`/getData (Blocking)`).
pub fn label(test: &TestRecord) -> String {
    let blocking = [Endpoint::GetData, Endpoint::GetDataAkka].map(Endpoint::test_id);
    if blocking.contains(&Some(test.test_id)) { format!("{} (Blocking)", test.api) } else { test.api.clone() }
}

fn runs(results: &BenchResults) -> impl Iterator<Item = (&TestRecord, &RunRecord)> {
    results.tests.iter().flat_map(|t| t.runs.iter().map(move |r| (t, r)))
}

/// The seed's table, with its exact columns (times in ms), and the target
/// first when more than one ran.
pub fn seed_columns(results: &BenchResults) -> Table {
    let several = results.target_names().len() > 1;
    let mut table = Table {
        headers: [
            "Test ID",
            "Run ID",
            "API",
            "RPS",
            "Mean Response Time",
            "Max Response Time",
            "99 percentile",
        ]
        .map(String::from)
        .to_vec(),
        rows: runs(results)
            .map(|(t, r)| {
                vec![
                    t.test_id.to_string(),
                    r.run_id.to_string(),
                    label(t),
                    rps(r.rps),
                    ms(r.mean_ms),
                    ms(r.max_ms),
                    ms(r.p99_ms),
                ]
            })
            .collect(),
    };
    if several {
        table.headers.insert(0, "Target".to_string());
        for (row, (t, _)) in table.rows.iter_mut().zip(runs(results)) {
            row.insert(0, t.target.clone());
        }
    }
    table
}

/// A µs figure, or a dash when not measured.
fn us(v: Option<f64>) -> String {
    v.map_or("—".to_string(), |v| format!("{v:.0}"))
}

/// Per Test ID: every target here, the seed's published run, and the ratios
/// (each target ÷ the seed, the first target ÷ each other), with the CPU each
/// spent per request and what the database spent per request under it.
/// Each figure is its best run's (as the seed reported the better of two),
/// followed by its range over the runs in brackets when there were several.
pub fn side_by_side(results: &BenchResults) -> Table {
    let targets = results.target_names();
    let runs = results.conditions.parameters.runs;
    let spread_note = if runs > 1 { format!(" (range of {runs} runs)") } else { String::new() };
    let mut headers = vec!["Test ID".to_string(), "API".to_string()];
    for t in &targets {
        headers.push(format!("{t} RPS{spread_note}"));
    }
    headers.push("seed RPS (Play, 2019)".to_string());
    for t in &targets {
        headers.push(format!("{t} ÷ seed"));
    }
    for other in targets.iter().skip(1) {
        headers.push(format!("{} ÷ {other}{spread_note}", targets[0]));
    }
    for t in &targets {
        headers.push(format!("{t} p99 ms"));
    }
    headers.push("seed p99 ms".to_string());
    for t in &targets {
        headers.push(format!("{t} server CPU µs/req"));
        headers.push(format!("database CPU µs/req under {t}"));
    }
    let ceiling = results.conditions.ceiling_reads_per_s();
    if ceiling.is_some() {
        for t in &targets {
            headers.push(format!("{t} reads ÷ its driver's ceiling"));
        }
    }
    let mut ids: Vec<TestId> = results.tests.iter().map(|t| t.test_id).collect();
    ids.sort();
    ids.dedup();
    let rows = ids
        .into_iter()
        .map(|id| {
            let tests: Vec<Option<&TestRecord>> = targets.iter().map(|t| results.test(t, id)).collect();
            let best: Vec<Option<&RunRecord>> = tests.iter().map(|t| t.and_then(TestRecord::best)).collect();
            let spread = |i: usize, f: fn(&RunRecord) -> f64| tests[i].and_then(|t| t.range(f));
            let seed = results.seed.iter().find(|s| s.test_id == id);
            let api = results.tests.iter().find(|t| t.test_id == id).map_or(String::new(), |t| t.api.clone());
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                _ => "—".to_string(),
            };
            let mut row = vec![id.to_string(), api];
            for (i, b) in best.iter().enumerate() {
                row.push(b.map_or_else(
                    || not_run(results, targets[i], id),
                    |r| {
                        let range = spread(i, |r| r.rps).map_or(String::new(), |s| s.range_text(rps));
                        format!("{}{range}", rps(r.rps))
                    },
                ));
            }
            row.push(seed.map_or("—".to_string(), |s| rps(s.rps)));
            for b in &best {
                row.push(ratio(b.map(|r| r.rps), seed.map(|s| s.rps)));
            }
            for (i, b) in best.iter().enumerate().skip(1) {
                let range = match (spread(0, |r| r.rps), spread(i, |r| r.rps)) {
                    (Some(a), Some(b)) => {
                        Spread::ratio(a, b).map_or(String::new(), |s| s.range_text(|v| format!("{v:.2}")))
                    }
                    _ => String::new(),
                };
                row.push(format!("{}{range}", ratio(best[0].map(|r| r.rps), b.map(|r| r.rps))));
            }
            for (i, b) in best.iter().enumerate() {
                row.push(b.map_or("—".to_string(), |r| {
                    format!(
                        "{}{}",
                        ms(r.p99_ms),
                        spread(i, |r| r.p99_ms).map_or(String::new(), |s| s.range_text(ms))
                    )
                }));
            }
            row.push(seed.map_or("—".to_string(), |s| ms(s.p99_ms)));
            for (i, b) in best.iter().enumerate() {
                row.push(b.map_or("—".to_string(), |r| {
                    let range = spread(i, |r| r.server_cpu_per_request_us)
                        .map_or(String::new(), |s| s.range_text(|v| format!("{v:.0}")));
                    format!("{}{range}", us(Some(r.server_cpu_per_request_us)))
                }));
                row.push(us(b.and_then(|r| r.db_cpu_per_request_us)));
            }
            if ceiling.is_some() {
                let reads = super::results::reads_of_test(id);
                for (t, b) in targets.iter().zip(&best) {
                    let share = b.filter(|_| reads > 0.0).and_then(|r| results.conditions.share(t, r.rps * reads));
                    row.push(share.map_or("—".to_string(), |s| format!("{s:.2}")));
                }
            }
            row
        })
        .collect();
    Table { headers, rows }
}

/// A share of the database's ceiling as a table cell: the figure when it
/// can be one, and when it is above [`SHARE_LIMIT`] (a server reading faster
/// than the database answers a bare driver), the reason in the cell itself.
pub fn share_cell(share: f64, client_bound: bool) -> String {
    if share <= SHARE_LIMIT {
        format!("{share:.2}")
    } else if client_bound {
        format!(
            "{share:.2}: above the ceiling, so not a share (the ceiling's own client set it, not Neo4j: a lower \
             bound; see the reading)"
        )
    } else {
        format!("{share:.2}: above the ceiling, so not a share (the database drifted: see the reading)")
    }
}

/// Why a target has no figure for a Test ID: not served, failed, or not run.
fn not_run(results: &BenchResults, target: &str, id: TestId) -> String {
    match results.test(target, id) {
        Some(t) if t.status == RunStatus::NotServed => format!("not served by {target}"),
        Some(t) => t.status.to_string(),
        None => "—".to_string(),
    }
}

/// blocklab's extra figures per run, with the server's own view.
pub fn extra_columns(results: &BenchResults) -> Table {
    Table {
        headers: [
            "Target",
            "Test ID",
            "Run ID",
            "API",
            "p50 ms",
            "p99.9 ms",
            "failed",
            "non-2xx",
            "HTTP workers busy",
            "actor threads busy",
            "blocking threads",
            "actor mailbox peak",
            "actor reads in flight peak",
            "server mean ms",
            "server p99 ≤ ms",
            "server CPU µs/req",
            "server peak RSS MiB",
            "server threads peak",
            "JVM heap peak MiB",
            "GC pauses (ms)",
            "database CPU µs/req",
            "link CPU µs/req",
        ]
        .map(String::from)
        .to_vec(),
        rows: runs(results)
            .map(|(t, r)| {
                let s = &r.server;
                vec![
                    t.target.clone(),
                    t.test_id.to_string(),
                    r.run_id.to_string(),
                    t.api.clone(),
                    ms(r.p50_ms),
                    ms(r.p999_ms),
                    r.error_total.to_string(),
                    r.non_2xx.to_string(),
                    pct(s.http_busy_ratio),
                    pct(s.actor_busy_ratio),
                    s.blocking_threads_max.to_string(),
                    s.actor_mailbox_max.max(s.async_mailbox_max).to_string(),
                    s.async_reads_in_flight_max.to_string(),
                    ms(s.server_mean_ms),
                    ms(s.server_p99_ms),
                    format!("{:.1}", r.server_cpu_per_request_us),
                    format!("{:.1}", r.server_peak_rss_mib),
                    r.server_threads_max.map_or("—".to_string(), |n| n.to_string()),
                    r.jvm.as_ref().map_or("—".to_string(), |j| format!("{:.1}", j.heap_peak_mib)),
                    r.jvm.as_ref().map_or("—".to_string(), |j| {
                        format!("{} ({:.0})", j.gc_collections, j.gc_pause_ms)
                    }),
                    us(r.db_cpu_per_request_us),
                    us(r.link_cpu_per_request_us),
                ]
            })
            .collect(),
    }
}

/// How the stalls ran, above their table: the method, and the link they ran
/// through when the matrix read the database directly.
pub fn stalls_how(results: &BenchResults) -> String {
    match &results.conditions.stall_link {
        Some(link) => format!(
            "{} The matrix read the database directly; the stalls ran through Toxiproxy, opened after it with no \
             delay of its own: {}.",
            super::stall::HOW,
            link.describe()
        ),
        None => super::stall::HOW.to_string(),
    }
}

/// Each target's endpoint through the stall of `--db-stall`: the figures that
/// answer the question (None: no stall was run).
pub fn stalls(results: &BenchResults) -> Option<Table> {
    if results.stalls.is_empty() {
        return None;
    }
    let or_dash = |v: Option<u64>| v.map_or("—".to_string(), |v| v.to_string());
    Some(Table {
        headers: [
            "Target",
            "API",
            "stall",
            "offered req/s",
            "before: req/s",
            "before: p99 ms",
            "recovered after s",
            "recovered within the steady spread after s",
            "failed during",
            "failed after",
            "longest ms",
            "peak in flight",
            "peak waiting for a connection",
            "peak threads",
            "survived",
        ]
        .map(String::from)
        .to_vec(),
        rows: results
            .stalls
            .iter()
            .map(|r| {
                let not_within =
                    || format!("not within {} s", r.seconds.len().saturating_sub(r.ends_s() as usize));
                vec![
                    r.target.clone(),
                    r.api.clone(),
                    r.stall.to_string(),
                    rps(r.rate),
                    rps(r.before_rps),
                    ms(r.before_p99_ms),
                    r.recovered_after_s.map_or_else(not_within, |s| s.to_string()),
                    r.recovered_in_spread_after_s
                        .map_or_else(not_within, |s| format!("{s} (p99 ≤ {})", ms(r.steady_p99_max_ms))),
                    r.failed_during.to_string(),
                    r.failed_after.to_string(),
                    if r.longest_ms > 0.0 { ms(r.longest_ms) } else { "—".to_string() },
                    if r.queued_unread() {
                        "0 seen: they queued unread (see the reading)".to_string()
                    } else {
                        or_dash(r.peak_in_flight)
                    },
                    or_dash(r.peak_waiting),
                    or_dash(r.peak_threads),
                    if r.survived { "yes".to_string() } else { "**no**".to_string() },
                ]
            })
            .collect(),
    })
}

/// The link's faults (`--db-faults`), one row per target, endpoint and
/// fault (`None`: none ran).
pub fn faults(results: &BenchResults) -> Option<Table> {
    if results.faults.is_empty() {
        return None;
    }
    Some(Table {
        headers: [
            "Target",
            "API",
            "fault",
            "held s",
            "while it held: right / all",
            "failed, by kind",
            "another node",
            "longest ms",
            "after: right / all",
            "right again after s",
            "survived",
        ]
        .map(String::from)
        .to_vec(),
        rows: results
            .faults
            .iter()
            .map(|r| {
                vec![
                    r.target.clone(),
                    r.api.clone(),
                    r.fault.clone(),
                    format!("{:.1}", r.held_s),
                    format!("{} / {}", r.during.right, r.during.total()),
                    r.during.failed_text(),
                    (r.during.wrong + r.after.wrong).to_string(),
                    ms(r.longest_ms()),
                    format!("{} / {}", r.after.right, r.after.total()),
                    r.recovered_after_s.map_or_else(
                        || format!("not within {} s", super::faults::AFTER.as_secs()),
                        |s| format!("{s:.1}"),
                    ),
                    if r.survived { "yes".to_string() } else { "**no**".to_string() },
                ]
            })
            .collect(),
    })
}

/// How the faults ran, above their table.
pub fn faults_how(results: &BenchResults) -> String {
    let link = results.conditions.link.as_ref().or(results.conditions.stall_link.as_ref());
    format!(
        "After the matrix, a fresh server per endpoint and target, reading through Toxiproxy{}, under {} clients that \
         each send one request after another (a new connection each, 20 ms apart) and check that every answer \
         carries the node asked for. Healthy 3 s, then each fault on the database's answers in turn, held {} s, \
         removed, and watched {} s: the reset (reset_peer), a link that stops answering (timeout), answers cut \
         short (limit_data, 64 bytes), a slow close (slow_close, 1.5 s). A request unanswered after {} s is hung.",
        link.map_or(String::new(), |l| format!(" ({})", l.proxy)),
        super::faults::CLIENTS,
        super::faults::HOLD.as_secs(),
        super::faults::AFTER.as_secs(),
        super::faults::HANG.as_secs()
    )
}

/// Best RPS of each API as a fraction of `/test`, beside the seed's.
pub fn normalized(results: &BenchResults) -> Table {
    let fraction = |v: Option<f64>| v.map_or("—".to_string(), |f| format!("{f:.3}"));
    Table {
        headers: [
            "Test ID",
            "API",
            "seed RPS (Play)",
            "seed ÷ /test",
            "blocklab RPS (best run)",
            "blocklab ÷ /test",
        ]
        .map(String::from)
        .to_vec(),
        rows: results
            .normalized
            .iter()
            .map(|n| {
                let seed = results.seed.iter().find(|s| s.test_id == n.test_id);
                let ours = results.tests.iter().find(|t| t.test_id == n.test_id).and_then(TestRecord::best);
                vec![
                    n.test_id.to_string(),
                    n.api.clone(),
                    seed.map_or("—".to_string(), |s| rps(s.rps)),
                    fraction(n.seed),
                    ours.map_or("—".to_string(), |r| rps(r.rps)),
                    fraction(n.blocklab),
                ]
            })
            .collect(),
    }
}

/// Tests that did not complete.
pub fn failures(results: &BenchResults) -> Option<Table> {
    let rows: Vec<Vec<String>> = results
        .tests
        .iter()
        .filter(|t| !matches!(t.status, RunStatus::Ok | RunStatus::NotServed))
        .map(|t| {
            vec![
                t.target.clone(),
                t.test_id.to_string(),
                t.api.clone(),
                t.status.to_string(),
                t.failure.clone().unwrap_or_default(),
            ]
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        headers: ["Target", "Test ID", "API", "status", "reason"].map(String::from).to_vec(),
        rows,
    })
}

/// Where each process ran: the server, the load generator and the database.
pub fn placement(results: &BenchResults) -> String {
    let c = &results.conditions;
    format!("{}; database: {}", c.placement, c.database_name)
}

/// blocklab's server as the run set it: its stack, its threads, and how the
/// embedded database was read.
pub fn server(p: &super::results::Parameters) -> String {
    format!(
        "blocklab --model {} ({}), {} HTTP worker thread{}{}, {} actor dispatcher threads{}",
        p.server_model,
        if p.server_model == "lean" { "tokio + httparse" } else { "tokio + hyper/axum" },
        p.workers.map_or("?".to_string(), |w| w.to_string()),
        if p.workers == Some(1) { "" } else { "s" },
        if p.workers_requested.is_none() { " (default: the cores the server may use)" } else { "" },
        p.actor_threads.map_or("?".to_string(), |w| w.to_string()),
        p.embedded_read.as_deref().map_or(String::new(), |r| format!("; embedded read: {r}")),
    )
}

/// The run's conditions as (what, value) pairs.
pub fn conditions(results: &BenchResults) -> Vec<(String, String)> {
    let c = &results.conditions;
    let p = &c.parameters;
    let m = &c.machine;
    let mut rows = vec![
        (
            "machine".to_string(),
            format!(
                "{} — {} CPUs online, {} usable, {} GiB, Linux {}",
                m.cpu_model,
                m.cpus_online,
                m.cpus_allowed.len(),
                m.memory_gib,
                m.kernel
            ),
        ),
        ("command".to_string(), c.command.clone()),
        ("placement".to_string(), placement(results)),
        ("database".to_string(), c.database.clone()),
    ];
    if let Some(pools) = super::pools::pools_line(results) {
        rows.push(("database pools".to_string(), pools));
    }
    if let Some(link) = &c.link {
        rows.push(("link".to_string(), link.describe()));
    }
    rows.extend([
        ("targets".to_string(), c.targets.join("; ")),
        (
            "load".to_string(),
            format!(
                "blocklab load -k -c {} -n {} per run, closed loop (as ab -k), {} run{} per API, fresh server per API",
                p.connections,
                p.requests,
                p.runs,
                if p.runs == 1 { "" } else { "s" }
            ),
        ),
        ("server".to_string(), server(p)),
        ("APIs".to_string(), p.apis.join(", ")),
        ("started".to_string(), format!("{} (wall time {:.0} s)", results.started_at, results.wall_s)),
    ]);
    if p.quick {
        rows.push(("mode".to_string(), first_look(results)));
    }
    let versions: Vec<String> = c.versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    rows.push(("versions".to_string(), versions.join(", ")));
    rows
}

/// The one line a `--quick` report opens with: what was too short for its
/// figures to mean anything.
pub fn first_look(results: &BenchResults) -> String {
    let p = &results.conditions.parameters;
    let warm = results.conditions.warm_up.as_ref().map_or(String::new(), |w| {
        format!(", a database warmed for {:.0} s{}", w.seconds, if w.settled { "" } else { " (still cold)" })
    });
    format!(
        "A first look (--quick): {} requests a run, {} run{}{warm}: too short for its figures to mean anything, and \
         no ratio between targets below is a finding. Run without --quick for figures.",
        p.requests,
        p.runs,
        if p.runs == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_get_the_precision_their_size_deserves() {
        assert_eq!(
            (ms(1234.4), ms(45.67), ms(4.567), ms(0.0456)),
            ("1234".into(), "45.7".into(), "4.57".into(), "0.046".into())
        );
        assert_eq!((rps(39058.6), pct(0.123)), ("39059".into(), "12 %".into()));
    }

    #[test]
    fn markdown_has_the_header_rule_and_one_line_per_row() {
        let t = Table {
            headers: vec!["Test ID".into(), "API".into()],
            rows: vec![vec!["1".into(), "/test".into()], vec!["2".into(), "/getData".into()]],
        };
        assert_eq!(t.markdown(), "| Test ID | API |\n|---|---|\n| 1 | /test |\n| 2 | /getData |\n");
    }

    #[test]
    fn the_seed_labels_its_blocking_apis() {
        let test = |id: u32, api: &str| TestRecord {
            target: "blocklab".into(),
            test_id: TestId(id),
            api: api.into(),
            model: String::new(),
            status: RunStatus::Ok,
            failure: None,
            runs: Vec::new(),
        };
        assert_eq!(label(&test(2, "/getData")), "/getData (Blocking)");
        assert_eq!(label(&test(5, "/getDataAkka")), "/getDataAkka (Blocking)");
        assert_eq!(label(&test(3, "/getDataAsync")), "/getDataAsync");
    }
}
