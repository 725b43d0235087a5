//! The tables of a bench report, built once as data and rendered as
//! Markdown (results.md, stdout) or HTML (report.html).

use super::results::{
    BenchResults, JvmFigures, RunRecord, RunStatus, SHARE_LIMIT, Spread, TestId, TestRecord,
};
use super::test_id::HasTestId;
use crate::page::{Column, escape};
use crate::server::Endpoint;

pub use crate::page::Table;

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

/// A dash: no figure (not measured, not served, or failed; the notes under
/// the table say which).
const DASH: &str = "—";

/// One question of the side-by-side comparison: its heading, what its
/// figures are, its tables (more than one only when the targets are too many
/// for one page's width), and what a dash in them stands for.
pub struct Section {
    /// Its heading.
    pub title: String,
    /// What its figures are, in a sentence or two.
    pub about: String,
    /// Its tables, each of at most [`crate::page::MAX_COLUMNS`] columns.
    pub tables: Vec<Table>,
    /// What the dashes stand for, a line each.
    pub notes: Vec<String>,
}

impl Section {
    /// As Markdown, under a third-level heading.
    pub fn markdown(&self) -> String {
        let mut out = format!("### {}\n\n{}\n\n", self.title, self.about);
        let tables: Vec<String> = self.tables.iter().map(Table::markdown).collect();
        out += &tables.join("\n");
        for note in &self.notes {
            out += &format!("\n{note}\n");
        }
        out
    }

    /// As HTML, under an `h3`.
    pub fn html(&self) -> String {
        let mut out = format!("<h3>{}</h3><p>{}</p>", escape(&self.title), escape(&self.about));
        for table in &self.tables {
            out += &table.html();
        }
        for note in &self.notes {
            out += &format!("<p class=\"sub\">{}</p>", escape(note));
        }
        out
    }
}

/// The Test IDs any target ran, in order.
fn test_ids(results: &BenchResults) -> Vec<TestId> {
    let mut ids: Vec<TestId> = results.tests.iter().map(|t| t.test_id).collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The Test ID and API columns every side-by-side table begins with.
fn key_columns(results: &BenchResults, ids: &[TestId]) -> Vec<Column> {
    let api = |id: &TestId| {
        results.tests.iter().find(|t| t.test_id == *id).map_or(String::new(), |t| t.api.clone())
    };
    vec![
        Column::new("Test ID", ids.iter().map(ToString::to_string).collect()),
        Column::new("API", ids.iter().map(api).collect()),
    ]
}

/// A figure of `test`'s best run (the seed reported the better of two),
/// with its range over the runs in brackets when there were several; a dash
/// when it has none.
fn best_with_range(
    test: Option<&TestRecord>,
    figure: impl Fn(&RunRecord) -> Option<f64>,
    fmt: impl Fn(f64) -> String,
) -> String {
    let Some(test) = test else { return DASH.to_string() };
    let Some(best) = test.best().and_then(&figure) else { return DASH.to_string() };
    format!("{}{}", fmt(best), range(Spread::of(test.runs.iter().filter_map(&figure)), &fmt))
}

/// ` (lo–hi)` of a spread over several runs, or nothing when there was one
/// run or every run gave the same figure as written.
fn range(spread: Option<Spread>, fmt: &dyn Fn(f64) -> String) -> String {
    match spread {
        Some(s) if fmt(s.min) != fmt(s.max) => s.range_text(fmt),
        _ => String::new(),
    }
}

/// A ratio with two decimals.
fn ratio_text(v: f64) -> String {
    format!("{v:.2}")
}

/// The side-by-side comparison, by question: the rates and their ratios,
/// the latency, the CPU per request, and the shares of each target's own
/// driver's ceiling (when one was measured). Every cell is a figure of the
/// best run with its range over the runs; what explains them is the reading's.
pub fn side_by_side(results: &BenchResults) -> Vec<Section> {
    let mut sections = vec![rates(results), latency(results), cpu(results)];
    sections.extend(shares(results));
    sections
}

/// Requests per second: each target's, the seed's, and the ratios (each
/// target ÷ the seed, the first target ÷ each other).
fn rates(results: &BenchResults) -> Section {
    let targets = results.target_names();
    let ids = test_ids(results);
    let seed = |id: &TestId| results.seed.iter().find(|s| s.test_id == *id);
    let mut measured: Vec<Column> = targets
        .iter()
        .map(|t| {
            Column::new(
                format!("{t} req/s"),
                ids.iter().map(|id| best_with_range(results.test(t, *id), |r| Some(r.rps), rps)).collect(),
            )
        })
        .collect();
    measured.push(Column::new(
        "seed req/s (Play, 2019)",
        ids.iter().map(|id| seed(id).map_or(DASH.to_string(), |s| rps(s.rps))).collect(),
    ));
    let mut ratios: Vec<Column> = targets
        .iter()
        .map(|t| {
            Column::new(
                format!("{t} ÷ seed"),
                ids.iter()
                    .map(|id| match seed(id).filter(|s| s.rps > 0.0) {
                        Some(s) => best_with_range(results.test(t, *id), |r| Some(r.rps / s.rps), ratio_text),
                        None => DASH.to_string(),
                    })
                    .collect(),
            )
        })
        .collect();
    for other in targets.iter().skip(1) {
        ratios.push(Column::new(
            format!("{} ÷ {other}", targets[0]),
            ids.iter().map(|id| target_ratio(results, (targets[0], other), *id)).collect(),
        ));
    }
    let runs = results.conditions.parameters.runs;
    Section {
        title: "Requests per second".to_string(),
        about: format!(
            "Each target's best run (the seed reported the better of its two){}; the seed's published best run \
             (Play 2.7 on a 4-core laptop, 2019: another machine, so a scale only). A ratio between two targets \
             here compares; {}.",
            if runs > 1 { format!(", its range over the {runs} runs in brackets") } else { String::new() },
            if runs > 1 {
                "its range runs from the lowest over the highest to the highest over the lowest"
            } else {
                "with one run each it has no range, and no difference can be claimed from it"
            }
        ),
        tables: Table::packed(&key_columns(results, &ids), vec![measured, ratios]),
        notes: dashes(results, &targets, &ids),
    }
}

/// The first target's best rate ÷ another's, with the range of the ratio over their runs.
fn target_ratio(results: &BenchResults, (a, b): (&str, &str), id: TestId) -> String {
    let (Some(ta), Some(tb)) = (results.test(a, id), results.test(b, id)) else { return DASH.to_string() };
    let (Some(ra), Some(rb)) = (ta.best(), tb.best()) else { return DASH.to_string() };
    if rb.rps <= 0.0 {
        return DASH.to_string();
    }
    let spread = match (ta.range(|r| r.rps), tb.range(|r| r.rps)) {
        (Some(sa), Some(sb)) => Spread::ratio(sa, sb),
        _ => None,
    };
    format!("{}{}", ratio_text(ra.rps / rb.rps), range(spread, &ratio_text))
}

/// What the dashes of the side-by-side tables stand for: a Test ID a target
/// does not serve, or one that failed.
fn dashes(results: &BenchResults, targets: &[&str], ids: &[TestId]) -> Vec<String> {
    let mut out = Vec::new();
    for t in targets {
        let missing = |status: Option<RunStatus>| -> Vec<String> {
            ids.iter()
                .filter_map(|id| {
                    let test = results.test(t, *id);
                    let none = test.and_then(TestRecord::best).is_none();
                    (none && test.map(|t| t.status) == status)
                        .then(|| test.map_or(id.to_string(), |test| format!("Test ID {id}, {}", test.api)))
                })
                .collect()
        };
        let not_served = missing(Some(RunStatus::NotServed));
        if !not_served.is_empty() {
            out.push(format!("A dash for {t}: not served by {t} ({}).", not_served.join("; ")));
        }
        for status in [RunStatus::Failed, RunStatus::Interrupted] {
            let ended = missing(Some(status));
            if !ended.is_empty() {
                out.push(format!("A dash for {t}: {status} ({}); see the failures.", ended.join("; ")));
            }
        }
        let not_run = missing(None);
        if !not_run.is_empty() {
            out.push(format!("A dash for {t}: not run (Test IDs {}).", not_run.join(", ")));
        }
    }
    out
}

/// The 99th percentile of the latency per target, beside the seed's.
fn latency(results: &BenchResults) -> Section {
    let targets = results.target_names();
    let ids = test_ids(results);
    let mut columns: Vec<Column> = targets
        .iter()
        .map(|t| {
            Column::new(
                format!("{t} p99 ms"),
                ids.iter().map(|id| best_with_range(results.test(t, *id), |r| Some(r.p99_ms), ms)).collect(),
            )
        })
        .collect();
    columns.push(Column::new(
        "seed p99 ms",
        ids.iter()
            .map(|id| {
                results.seed.iter().find(|s| s.test_id == *id).map_or(DASH.to_string(), |s| ms(s.p99_ms))
            })
            .collect(),
    ));
    Section {
        title: "Latency".to_string(),
        about:
            "The 99th percentile of the response time the load generator saw, in ms: each target's best run \
                (by requests per second), its range over the runs in brackets; the seed's published one."
                .to_string(),
        tables: Table::packed(&key_columns(results, &ids), vec![columns]),
        notes: Vec::new(),
    }
}

/// CPU per request: the server's, and the database's during the same runs.
fn cpu(results: &BenchResults) -> Section {
    let targets = results.target_names();
    let ids = test_ids(results);
    let database = results.tests.iter().flat_map(|t| &t.runs).any(|r| r.db_cpu_per_request_us.is_some());
    let whole = |v: f64| format!("{v:.0}");
    let groups: Vec<Vec<Column>> = targets
        .iter()
        .map(|t| {
            let mut group = vec![Column::new(
                format!("{t} server µs/req"),
                ids.iter()
                    .map(|id| {
                        best_with_range(
                            results.test(t, *id),
                            |r| Some(r.server_cpu_per_request_us).filter(|us| *us > 0.0),
                            whole,
                        )
                    })
                    .collect(),
            )];
            if database {
                group.push(Column::new(
                    format!("database µs/req under {t}"),
                    ids.iter()
                        .map(|id| best_with_range(results.test(t, *id), |r| r.db_cpu_per_request_us, whole))
                        .collect(),
                ));
            }
            group
        })
        .collect();
    Section {
        title: "CPU per request".to_string(),
        about: format!(
            "CPU time per completed request, in µs: the server process's{}, each the best run's with its range \
             over the runs. A dash: under one tick of the kernel's CPU clock (10 ms) over the whole run, or not \
             measured.",
            if database {
                ", and the database process's during the same run (side by side they say which process was \
                 saturated)"
            } else {
                ""
            }
        ),
        tables: Table::packed(&key_columns(results, &ids), groups),
        notes: Vec::new(),
    }
}

/// Each target's reads per second as a share of its own driver's ceiling
/// (None: no ceiling was measured), with the ceilings themselves.
fn shares(results: &BenchResults) -> Option<Section> {
    let c = &results.conditions;
    c.ceiling_reads_per_s()?;
    let targets = results.target_names();
    let ids: Vec<TestId> =
        test_ids(results).into_iter().filter(|id| super::results::reads_of_test(*id) > 0.0).collect();
    let columns: Vec<Column> = targets
        .iter()
        .map(|t| {
            Column::new(
                format!("{t} ÷ its driver's ceiling"),
                ids.iter()
                    .map(|id| {
                        let reads = super::results::reads_of_test(*id);
                        best_with_range(results.test(t, *id), |r| c.share(t, r.rps * reads), ratio_text)
                    })
                    .collect(),
            )
        })
        .collect();
    let mut tables = Table::packed(&key_columns(results, &ids), vec![columns]);
    tables.push(ceilings(results));
    let against: Vec<String> = targets
        .iter()
        .map(|t| match c.ceiling_for(t).and_then(|ceiling| Some((ceiling.client, ceiling.reads_per_s()?))) {
            Some((client, _)) => format!("{t} against {client}'s"),
            None => format!("{t} against none (no ceiling of its driver was measured: a dash)"),
        })
        .collect();
    Some(Section {
        title: "Shares of each driver's ceiling".to_string(),
        about: format!(
            "Reads per second (two a request for the …2 endpoints) ÷ the database's ceiling for the read with \
             the target's own driver and no HTTP, the higher of its measures before and after the matrix: {}. \
             1.00: the server adds no limit of its own; above {SHARE_LIMIT:.2} the ceiling was measured wrong \
             (the reading says where). Below them, each client's ceiling.",
            against.join(", ")
        ),
        tables,
        notes: Vec::new(),
    })
}

/// The database's ceiling per client: before and after the matrix, the
/// change, and what a read cost the database and the client.
fn ceilings(results: &BenchResults) -> Table {
    let or_dash = |v: Option<f64>, fmt: &dyn Fn(f64) -> String| v.map_or(DASH.to_string(), fmt);
    let whole = |v: f64| format!("{v:.0}");
    Table {
        headers: [
            "ceiling's client",
            "before: reads/s",
            "after: reads/s",
            "change %",
            "p99 ms",
            "database µs/read",
            "client µs/read",
        ]
        .map(String::from)
        .to_vec(),
        rows: results
            .conditions
            .ceilings
            .iter()
            .map(|c| {
                let used = c.used();
                vec![
                    c.client.to_string(),
                    or_dash(c.before.as_ref().map(|b| b.reads_per_s), &rps),
                    or_dash(c.after.as_ref().map(|a| a.reads_per_s), &rps),
                    or_dash(c.drift().map(|d| d * 100.0), &|v| format!("{v:+.0}")),
                    or_dash(used.map(|u| u.p99_ms), &ms),
                    or_dash(used.and_then(|u| u.db_cpu_per_query_us), &whole),
                    or_dash(used.and_then(|u| u.client_cpu_per_read_us), &whole),
                ]
            })
            .collect(),
    }
}

/// The figures of every run beyond the seed's, from the client and from
/// the server's own view, by question: latency and failures, the threads
/// and queues, the resources, and a JVM's heap and collections (when a JVM
/// ran). Every table begins with the target, the Test ID, the Run ID and the API.
pub fn extra_columns(results: &BenchResults) -> Vec<Section> {
    let rows: Vec<(&TestRecord, &RunRecord)> = runs(results).collect();
    let keys = vec![
        Column::new("Target", rows.iter().map(|(t, _)| t.target.clone()).collect()),
        Column::new("Test ID", rows.iter().map(|(t, _)| t.test_id.to_string()).collect()),
        Column::new("Run ID", rows.iter().map(|(_, r)| r.run_id.to_string()).collect()),
        Column::new("API", rows.iter().map(|(t, _)| t.api.clone()).collect()),
    ];
    let column = |header: &str, cell: &dyn Fn(&RunRecord) -> String| {
        Column::new(header, rows.iter().map(|(_, r)| cell(r)).collect())
    };
    let one = |v: f64| format!("{v:.1}");
    let mut sections = vec![
        Section {
            title: "Latency and failures".to_string(),
            about: "Percentiles of the client's latency beside the server's own (from its router to its response; \
                    the gap is time queued before the server got to the request), in ms, and the requests that \
                    failed."
                .to_string(),
            tables: Table::packed(
                &keys,
                vec![vec![
                    column("p50 ms", &|r| ms(r.p50_ms)),
                    column("p99.9 ms", &|r| ms(r.p999_ms)),
                    column("server mean ms", &|r| ms(r.server.server_mean_ms)),
                    column("server p99 ≤ ms", &|r| ms(r.server.server_p99_ms)),
                    column("failed", &|r| r.error_total.to_string()),
                    column("non-2xx", &|r| r.non_2xx.to_string()),
                ]],
            ),
            notes: Vec::new(),
        },
        Section {
            title: "Threads and queues".to_string(),
            about: "How busy blocklab's threads were and what waited for them (its /metrics, every 250 ms; a peer \
                    has none, so 0)."
                .to_string(),
            tables: Table::packed(
                &keys,
                vec![vec![
                    column("HTTP workers busy", &|r| pct(r.server.http_busy_ratio)),
                    column("actor threads busy", &|r| pct(r.server.actor_busy_ratio)),
                    column("blocking threads", &|r| r.server.blocking_threads_max.to_string()),
                    column("actor mailbox peak", &|r| {
                        r.server.actor_mailbox_max.max(r.server.async_mailbox_max).to_string()
                    }),
                    column("actor reads in flight peak", &|r| r.server.async_reads_in_flight_max.to_string()),
                ]],
            ),
            notes: Vec::new(),
        },
        Section {
            title: "Resources".to_string(),
            about: "What each run cost the machine: the server's CPU per request, its peak memory and threads \
                    (/proc), and the CPU per request of the database and of the link's proxy, when the bench \
                    started them."
                .to_string(),
            tables: Table::packed(
                &keys,
                vec![vec![
                    column("server CPU µs/req", &|r| one(r.server_cpu_per_request_us)),
                    column("server peak RSS MiB", &|r| one(r.server_peak_rss_mib)),
                    column("server threads peak", &|r| r.server_threads_max.map_or(DASH.to_string(), |n| n.to_string())),
                    column("database CPU µs/req", &|r| us(r.db_cpu_per_request_us)),
                    column("link CPU µs/req", &|r| us(r.link_cpu_per_request_us)),
                ]],
            ),
            notes: Vec::new(),
        },
    ];
    if rows.iter().any(|(_, r)| r.jvm.is_some()) {
        let jvm = |cell: fn(&JvmFigures) -> String| {
            move |r: &RunRecord| r.jvm.as_ref().map_or(DASH.to_string(), cell)
        };
        sections.push(Section {
            title: "A JVM's heap and collections".to_string(),
            about:
                "A JVM peer's heap at its peak and its stop-the-world collections during the run, from its \
                    hsperfdata counters (the ones jstat -gc reads) every 250 ms."
                    .to_string(),
            tables: Table::packed(
                &keys,
                vec![vec![
                    column("JVM heap peak MiB", &jvm(|j| format!("{:.1}", j.heap_peak_mib))),
                    column("GC collections", &jvm(|j| j.gc_collections.to_string())),
                    column("GC pauses ms", &jvm(|j| format!("{:.0}", j.gc_pause_ms))),
                ]],
            ),
            notes: Vec::new(),
        });
    }
    sections
}

/// How the stalls ran, above their table: the method, and the link they ran
/// through when the matrix read the database directly.
pub fn stalls_how(results: &BenchResults) -> String {
    let how = super::stall::how(results.conditions.parameters.connections);
    let mut specs: Vec<String> = results.stalls.iter().map(|s| s.stall.to_string()).collect();
    specs.dedup();
    let link = results.conditions.stall_link.as_ref().map_or(String::new(), |link| {
        format!(
            " The matrix read the database directly; the stalls ran through Toxiproxy, opened after it with no \
             delay of its own: {}.",
            link.describe()
        )
    });
    format!(
        "{how}{link} The stall: {}. Each target and endpoint ran it {}; a dash under recovered: not within the run.",
        specs.join("; "),
        match results.stalls.iter().map(|s| s.round).max().unwrap_or(1) {
            1 => "once".to_string(),
            n => format!("{n} times (rounds)"),
        }
    )
}

/// Each target's endpoint through the stall of `--db-stall`, a row per
/// round: how it came back, then the most the server carried meanwhile (None: no
/// stall was run). Cells are figures; a dash for a figure not measured, or
/// for a recovery not reached within the run (the reading says how long
/// the run went on after the stall).
pub fn stalls(results: &BenchResults) -> Option<Vec<Table>> {
    if results.stalls.is_empty() {
        return None;
    }
    // A target's rounds of an endpoint next to each other, however the runs were interleaved.
    let targets = results.target_names();
    let mut records: Vec<&super::stall::StallRecord> = results.stalls.iter().collect();
    records.sort_by_key(|r| (targets.iter().position(|t| *t == r.target), r.test_id, r.round));
    let keys = vec![
        Column::new("Target", records.iter().map(|r| r.target.clone()).collect()),
        Column::new("API", records.iter().map(|r| r.api.clone()).collect()),
        Column::new("round", records.iter().map(|r| r.round.to_string()).collect()),
    ];
    let column = |header: &str, cell: &dyn Fn(&super::stall::StallRecord) -> String| {
        Column::new(header, records.iter().map(|r| cell(r)).collect())
    };
    let or_dash = |v: Option<u64>| v.map_or(DASH.to_string(), |v| v.to_string());
    let recovery = Table::packed(
        &keys,
        vec![vec![
            column("offered req/s", &|r| rps(r.rate)),
            column("before: req/s", &|r| rps(r.before_rps)),
            column("before: p99 ms", &|r| ms(r.before_p99_ms)),
            column("recovered after s", &|r| or_dash(r.recovered_after_s)),
            column("recovered within the steady spread after s", &|r| or_dash(r.recovered_in_spread_after_s)),
            column("failed during", &|r| r.failed_during.to_string()),
            column("failed after", &|r| r.failed_after.to_string()),
        ]],
    );
    let peaks = Table::packed(
        &keys,
        vec![vec![
            column("steady p99 worst ms", &|r| ms(r.steady_p99_max_ms)),
            column("longest ms", &|r| if r.longest_ms > 0.0 { ms(r.longest_ms) } else { DASH.to_string() }),
            column("peak in flight", &|r| or_dash(r.peak_in_flight)),
            column("peak waiting for a connection", &|r| or_dash(r.peak_waiting)),
            column("peak threads", &|r| or_dash(r.peak_threads)),
            column("survived", &|r| if r.survived { "yes" } else { "no" }.to_string()),
        ]],
    );
    Some(recovery.into_iter().chain(peaks).collect())
}

/// The link's faults (`--db-faults`), a row per target, endpoint and
/// fault: while it lasted, then after it (`None`: none ran).
pub fn faults(results: &BenchResults) -> Option<Vec<Table>> {
    if results.faults.is_empty() {
        return None;
    }
    let records = &results.faults;
    let keys = vec![
        Column::new("Target", records.iter().map(|r| r.target.clone()).collect()),
        Column::new("API", records.iter().map(|r| r.api.clone()).collect()),
        Column::new("fault", records.iter().map(|r| r.fault.clone()).collect()),
    ];
    let column = |header: &str, cell: &dyn Fn(&super::faults::FaultRecord) -> String| {
        Column::new(header, records.iter().map(cell).collect())
    };
    let during = Table::packed(
        &keys,
        vec![vec![
            column("lasted s", &|r| format!("{:.1}", r.held_s)),
            column("during: right", &|r| r.during.right.to_string()),
            column("during: all", &|r| r.during.total().to_string()),
            column("during: failed", &|r| r.during.failed.values().sum::<u64>().to_string()),
            column("another node", &|r| (r.during.wrong + r.after.wrong).to_string()),
            column("longest ms", &|r| ms(r.longest_ms())),
        ]],
    );
    let after = Table::packed(
        &keys,
        vec![vec![
            column("after: right", &|r| r.after.right.to_string()),
            column("after: all", &|r| r.after.total().to_string()),
            column("right again after s", &|r| {
                r.recovered_after_s.map_or(DASH.to_string(), |s| format!("{s:.1}"))
            }),
            column("survived", &|r| if r.survived { "yes" } else { "no" }.to_string()),
        ]],
    );
    Some(during.into_iter().chain(after).collect())
}

/// How the faults ran, above their table.
pub fn faults_how(results: &BenchResults) -> String {
    let link = results.conditions.link.as_ref().or(results.conditions.stall_link.as_ref());
    format!(
        "After the matrix, a fresh server per endpoint and target, reading through Toxiproxy{}, under {} clients that \
         each send one request after another (a new connection each, 20 ms apart) and check that every answer \
         carries the node asked for. Healthy 3 s, then each fault on the database's answers in turn, for {} s, \
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
                "blocklab load -k -c {} {} per run, closed loop (as ab -k), {} run{} per API, fresh server per API",
                p.connections,
                p.stop_flag(),
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
        "A first look (--quick): {} a run, {} run{}{warm}: too short for its figures to mean anything, and \
         no ratio between targets below is a finding. Run without --quick for figures.",
        p.run_length(),
        p.runs,
        if p.runs == 1 { "" } else { "s" }
    )
}

/// Bench results made up for the unit tests, shaped as a real run's: built
/// as `results.json` would hold them and read back, so that a field the
/// record gains with a default does not break them.
#[cfg(test)]
pub(super) mod sample {
    use serde_json::{Value, json};

    use super::super::results::BenchResults;

    /// A run of `rps` requests a second, its other figures in proportion.
    pub fn run(run_id: u32, rps: f64, db_us: Option<f64>) -> Value {
        let mut server = serde_json::to_value(crate::harness::scrape::ServerFigures::default()).unwrap();
        server["http_busy_ratio"] = json!(0.9);
        json!({
            "run_id": run_id, "rps": rps, "mean_ms": 200_000.0 / rps, "max_ms": 900_000.0 / rps,
            "p50_ms": 180_000.0 / rps, "p99_ms": 600_000.0 / rps, "p999_ms": 800_000.0 / rps,
            "completed": 8000, "ok": 8000, "non_2xx": 0, "errors": {}, "error_total": 0,
            "duration_s": 8000.0 / rps, "server_cpu_s": 0.5, "server_cpu_per_request_us": 62.5,
            "server_peak_rss_mib": 40.0, "server_threads_max": 12, "db_cpu_s": db_us.map(|u| u * 8000.0 / 1e6),
            "db_cpu_per_request_us": db_us, "server": server, "jvm": null, "load_json": "raw/x.json"
        })
    }

    /// Every Test ID of the matrix for each of `targets` (the first at
    /// `rates`, each next one at 80 % of the one before), two runs each,
    /// `connections` per run, on a managed Neo4j with the Java driver's
    /// ceiling and blocklab's own.
    pub fn results(targets: &[&str], connections: usize) -> BenchResults {
        let apis = [
            (1, "/test", 9000.0),
            (2, "/getData", 2500.0),
            (3, "/getDataAsync", 3661.0),
            (4, "/getDataAsync2", 1700.0),
            (5, "/getDataAkka", 2400.0),
            (7, "/getDataAkkaAsync", 3500.0),
            (8, "/getDataAkkaAsync2", 1650.0),
            (9, "/getDataSpawnBlocking", 3300.0),
        ];
        let mut tests = Vec::new();
        for (i, target) in targets.iter().enumerate() {
            let scale = 0.8f64.powi(i as i32);
            for (id, api, rate) in apis {
                let served = i == 0 || id != 9;
                let rate: f64 = rate * scale;
                tests.push(json!({
                    "target": target, "test_id": id, "api": api, "model": "a model",
                    "status": if served { "ok" } else { "not served" }, "failure": null,
                    "runs": if served {
                        vec![run(1, rate * 0.96, Some(242.0)), run(2, rate, Some(250.0))]
                    } else {
                        Vec::new()
                    }
                }));
            }
        }
        let ceiling = |reads: f64, db_us: f64| {
            json!({
                "client": "a client, 128 reads in flight", "cpus": "CPU 0", "seconds": 10.0, "warmup_s": 5.0,
                "reads": (reads * 10.0) as u64, "reads_per_s": reads, "p50_ms": 40.0, "p99_ms": 95.0,
                "errors": 0, "wrong_answers": 0, "client_cpu_per_read_us": 30.0, "db_cpu_per_query_us": db_us,
                "bound": "database"
            })
        };
        let clients: serde_json::Map<String, Value> = targets
            .iter()
            .map(|t| (t.to_string(), json!(if *t == "blocklab" { "blocklab" } else { "java_driver" })))
            .collect();
        let value = json!({
            "schema": "blocklab/bench-results", "schema_version": 3, "tool_version": "0.1.0",
            "started_at": "2026-12-07T00:00:00Z", "finished_at": "2026-12-07T00:20:00Z", "wall_s": 1200.0,
            "interrupted": false,
            "conditions": {
                "machine": serde_json::to_value(crate::harness::conditions::machine()).unwrap(),
                "command": "blocklab studies",
                "placement": serde_json::to_value(crate::harness::placement::Placement::split(&[0, 1], true)).unwrap(),
                "parameters": {
                    "apis": apis.iter().map(|(id, api, _)| format!("{id} {api}")).collect::<Vec<_>>(),
                    "connections": connections, "requests": 8000, "runs": 2, "keep_alive": true,
                    "db": "neo4j", "db_latency_ms": 0.0, "db_pool": 128, "db_async_connections": 128,
                    "db_timeout_ms": 2000.0, "server_model": "reactive", "embedded_read": null, "nodes": 10000,
                    "workers_requested": null, "workers": 1, "actor_threads": 4, "quick": false
                },
                "versions": {"blocklab": "0.1.0"},
                "database": "Neo4j Community 5.26.19, managed", "database_name": "Neo4j Community 5.26.19",
                "db_warm_s": 180.0,
                "warm_up": {"seconds": 180.0, "cpu_per_read_us": [5727.0, 900.0, 420.0, 330.0, 313.0],
                            "settled": false, "max_s": 180.0},
                "targets": targets, "db_pools": {}, "link": null, "stall_link": null, "families": {},
                "ceilings": [
                    {"client": "java_driver", "before": ceiling(2653.0, 384.0), "after": ceiling(2638.0, 380.0)},
                    {"client": "blocklab", "before": ceiling(3900.0, 245.0), "after": ceiling(3950.0, 242.0)}
                ],
                "ceiling_clients": clients
            },
            "tests": tests, "seed": serde_json::to_value(super::super::results::seed_table()).unwrap(),
            "normalized": [], "stalls": [], "faults": []
        });
        serde_json::from_value(value).expect("the sample reads as results.json")
    }
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
    fn the_seed_labels_its_blocking_apis() {
        let test = |id: u32, api: &str| TestRecord {
            target: "blocklab".into(),
            test_id: TestId(id),
            api: api.into(),
            model: String::new(),
            status: RunStatus::Ok,
            failure: None,
            warm: None,
            runs: Vec::new(),
        };
        assert_eq!(label(&test(2, "/getData")), "/getData (Blocking)");
        assert_eq!(label(&test(5, "/getDataAkka")), "/getDataAkka (Blocking)");
        assert_eq!(label(&test(3, "/getDataAsync")), "/getDataAsync");
    }

    use crate::page::is_figure as figures_only;

    #[test]
    fn the_side_by_side_is_split_by_question_into_tables_of_figures_that_fit_the_page() {
        let targets = ["blocklab", "play", "python-neo4j"];
        let results = sample::results(&targets, 200);
        let sections = side_by_side(&results);
        let titles: Vec<&str> = sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(
            titles,
            ["Requests per second", "Latency", "CPU per request", "Shares of each driver's ceiling"]
        );
        for section in &sections {
            for table in &section.tables {
                assert!(
                    table.headers.len() <= crate::page::MAX_COLUMNS,
                    "{}: {:?}",
                    section.title,
                    table.headers
                );
                for row in &table.rows {
                    assert_eq!(row.len(), table.headers.len());
                    // The key columns (Test ID, API; a ceiling's client) aside, figures only.
                    for cell in row.iter().skip(2) {
                        assert!(figures_only(cell), "{}: {cell:?} in {row:?}", section.title);
                    }
                }
            }
        }
        // Rates: the best run and its range; the ratio between targets with its range.
        let rates = &sections[0];
        let markdown = rates.markdown();
        assert!(
            markdown.contains("| 3 | /getDataAsync | 3661 (3515–3661) | 2929 (2812–2929) |"),
            "{markdown}"
        );
        assert!(markdown.contains("| blocklab ÷ play |"), "{markdown}");
        assert!(
            markdown.contains("A dash for play: not served by play (Test ID 9, /getDataSpawnBlocking)."),
            "{markdown}"
        );
        // A share above 1.05 is a figure in its cell; the reading says it is a defect.
        let shares = sections[3].markdown();
        assert!(shares.contains("| 3 | /getDataAsync | 0.93 (0.89–0.93) | 1.10 (1.06–1.10) |"), "{shares}");
        assert!(shares.contains("play against the Java driver's"), "{shares}");
        assert!(shares.contains("| the Java driver | 2653 | 2638 | -1 |"), "{shares}");
    }

    #[test]
    fn many_targets_still_give_tables_of_at_most_ten_columns() {
        let targets = ["blocklab", "play", "python-neo4j", "go", "node", "spring", "quarkus"];
        let results = sample::results(&targets, 200);
        let tables: Vec<Table> = side_by_side(&results).into_iter().flat_map(|s| s.tables).collect();
        assert!(tables.iter().all(|t| t.headers.len() <= crate::page::MAX_COLUMNS));
        // Every target's rate is somewhere, each table beginning with the Test ID and the API.
        for t in targets {
            assert!(tables.iter().any(|table| table.headers.contains(&format!("{t} req/s"))), "{t}");
        }
        assert!(
            tables.iter().all(|t| t.headers[..2] == ["Test ID", "API"] || t.headers[0] == "ceiling's client")
        );
        let per_run: Vec<Table> = extra_columns(&results).into_iter().flat_map(|s| s.tables).collect();
        assert!(per_run.iter().all(|t| t.headers.len() <= crate::page::MAX_COLUMNS));
    }
}
