//! Writing a bench run out: `results.md` (the seed's table first), `results.json`
//! (`schema/bench-results.json`), `results.csv`, the charts as SVG and one
//! self-contained `report.html`.
//!
//! The pieces: [`super::tables`] (the tables as data, rendered to Markdown and
//! HTML), [`super::reading`] (the sentences that explain the numbers),
//! [`super::charts`] (the SVG charts, plotters) and [`super::html`] (the page).

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::results::BenchResults;
use super::{charts, curve, html, reading, tables};

/// Writes every output into `dir`; returns the files written.
pub fn write_all(results: &BenchResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir.join("charts"))?;
    let reading = reading::sentences(results);
    let mut charts = charts::all(results);
    charts.extend(curve::charts(results));
    let mut written = Vec::new();
    let mut write = |name: &str, text: &str| -> anyhow::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    write("results.md", &markdown(results, &reading))?;
    write("results.json", &serde_json::to_string_pretty(results)?)?;
    write("results.csv", &csv(results)?)?;
    for chart in &charts {
        write(&format!("charts/{}", chart.file), &chart.svg)?;
    }
    write("report.html", &html::page(results, &reading, &charts))?;
    Ok(written)
}

/// `results.md`.
pub fn markdown(results: &BenchResults, reading: &[String]) -> String {
    let mut out = String::from("# blocklab bench — the seed study, reproduced\n\n");
    if results.conditions.parameters.quick {
        out += &format!("**{}**\n\n", tables::first_look(results));
    }
    if results.interrupted {
        out += "**Interrupted: partial results.**\n\n";
    }
    if let Some(t) = curve::table(results) {
        out += "## The round-trip curve\n\n";
        for s in curve::answer(results) {
            out += &format!("**{s}**\n\n");
        }
        out += &format!("{}\n\n", curve::how(results));
        for s in curve::sentences(results) {
            out += &format!("- {s}\n");
        }
        out += "\n";
        out += &t.markdown();
        for chart in curve::charts(results) {
            out += &format!("\n![{}](charts/{})\n", chart.title, chart.file);
        }
        out += "\n";
    }
    out += "## Results (the seed's columns; times in ms)\n\n";
    out += &tables::seed_columns(results).markdown();
    out += &format!("\nDatabase: {}.\n", results.conditions.database_name);
    out += "\n## Side by side: each server here and the seed's published run\n\n";
    out += &sections(&tables::side_by_side(results));
    out += "\n## Normalized to /test, beside the seed's Play figures\n\n";
    out += &tables::normalized(results).markdown();
    if let Some(t) = tables::stalls(results) {
        out += &format!("\n## The database stalls\n\n{}\n\n", tables::stalls_how(results));
        out += &markdown_tables(&t);
    }
    if let Some(t) = tables::faults(results) {
        out += &format!("\n## Faults on the link, under load\n\n{}\n\n", tables::faults_how(results));
        out += &markdown_tables(&t);
    }
    out += "\n## Reading\n\n";
    for s in reading {
        out += &format!("- {s}\n");
    }
    out += "\n## More figures per run (client and server side)\n\n";
    out += &sections(&tables::extra_columns(results));
    if let Some(f) = tables::failures(results) {
        out += "\n## Failures\n\n";
        out += &f.markdown();
    }
    out += "\n## Conditions\n\n";
    for (k, v) in tables::conditions(results) {
        out += &format!("- **{k}**: {v}\n");
    }
    if let Some(w) = results.conditions.placement.warning() {
        out += &format!("- **warning**: {w}\n");
    }
    out
}

/// Sections of tables as Markdown, a blank line between them.
pub fn sections(sections: &[tables::Section]) -> String {
    sections.iter().map(tables::Section::markdown).collect::<Vec<_>>().join("\n")
}

/// Tables as Markdown, a blank line between them.
fn markdown_tables(tables: &[tables::Table]) -> String {
    tables.iter().map(tables::Table::markdown).collect::<Vec<_>>().join("\n")
}

/// `results.csv`: one row per run, every figure; written by the `csv` crate
/// from [`CsvRow`], a column a field.
pub fn csv(results: &BenchResults) -> anyhow::Result<String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    let parameters = &results.conditions.parameters;
    for t in &results.tests {
        // The server model and the embedded read are blocklab's settings: a
        // peer's rows leave them empty.
        let blocklab = t.target == super::results::BLOCKLAB;
        for r in &t.runs {
            let s = &r.server;
            out.serialize(CsvRow {
                target: &t.target,
                database: &results.conditions.database_name,
                test_id: t.test_id.to_string(),
                run_id: r.run_id,
                api: &t.api,
                rps: Fixed::<2>(r.rps),
                mean_ms: Fixed(r.mean_ms),
                max_ms: Fixed(r.max_ms),
                p50_ms: Fixed(r.p50_ms),
                p99_ms: Fixed(r.p99_ms),
                p999_ms: Fixed(r.p999_ms),
                completed: r.completed,
                ok: r.ok,
                non_2xx: r.non_2xx,
                error_total: r.error_total,
                duration_s: Fixed(r.duration_s),
                server_cpu_s: Fixed(r.server_cpu_s),
                server_cpu_per_request_us: Fixed(r.server_cpu_per_request_us),
                server_peak_rss_mib: Fixed(r.server_peak_rss_mib),
                server_threads_max: r.server_threads_max,
                db_cpu_s: r.db_cpu_s.map(Fixed),
                db_cpu_per_request_us: r.db_cpu_per_request_us.map(Fixed),
                http_busy_ratio: Fixed(s.http_busy_ratio),
                actor_busy_ratio: Fixed(s.actor_busy_ratio),
                blocking_threads_max: s.blocking_threads_max,
                spawn_blocking_in_flight_max: s.spawn_blocking_in_flight_max,
                actor_mailbox_max: s.actor_mailbox_max,
                async_mailbox_max: s.async_mailbox_max,
                async_reads_in_flight_max: s.async_reads_in_flight_max,
                server_requests: s.server_requests,
                server_mean_ms: Fixed(s.server_mean_ms),
                server_p99_ms: Fixed(s.server_p99_ms),
                status: t.status.to_string(),
                jvm_heap_peak_mib: r.jvm.as_ref().map(|j| Fixed(j.heap_peak_mib)),
                jvm_gc_collections: r.jvm.as_ref().map(|j| j.gc_collections),
                jvm_gc_pause_ms: r.jvm.as_ref().map(|j| Fixed(j.gc_pause_ms)),
                server_model: blocklab.then_some(parameters.server_model.as_str()),
                embedded_read: parameters.embedded_read.as_deref().filter(|_| blocklab),
            })?;
        }
    }
    Ok(String::from_utf8(out.into_inner()?)?)
}

/// One row of `results.csv`; the field names are the header.
#[derive(serde::Serialize)]
struct CsvRow<'a> {
    target: &'a str,
    database: &'a str,
    test_id: String,
    run_id: u32,
    api: &'a str,
    rps: Fixed<2>,
    mean_ms: Fixed<3>,
    max_ms: Fixed<3>,
    p50_ms: Fixed<3>,
    p99_ms: Fixed<3>,
    p999_ms: Fixed<3>,
    completed: u64,
    ok: u64,
    non_2xx: u64,
    error_total: u64,
    duration_s: Fixed<3>,
    server_cpu_s: Fixed<3>,
    server_cpu_per_request_us: Fixed<2>,
    server_peak_rss_mib: Fixed<2>,
    server_threads_max: Option<u64>,
    db_cpu_s: Option<Fixed<3>>,
    db_cpu_per_request_us: Option<Fixed<2>>,
    http_busy_ratio: Fixed<4>,
    actor_busy_ratio: Fixed<4>,
    blocking_threads_max: u64,
    spawn_blocking_in_flight_max: u64,
    actor_mailbox_max: u64,
    async_mailbox_max: u64,
    async_reads_in_flight_max: u64,
    server_requests: u64,
    server_mean_ms: Fixed<3>,
    server_p99_ms: Fixed<3>,
    status: String,
    /// A JVM peer's heap peak and collections; empty on blocklab's rows.
    jvm_heap_peak_mib: Option<Fixed<2>>,
    jvm_gc_collections: Option<u64>,
    jvm_gc_pause_ms: Option<Fixed<1>>,
    /// blocklab's server stack (`--model`); empty on a peer's rows.
    server_model: Option<&'a str>,
    /// How blocklab read the embedded database; empty for a networked one and on a peer's rows.
    embedded_read: Option<&'a str>,
}

/// A figure written with `D` decimals.
struct Fixed<const D: usize>(f64);

impl<const D: usize> serde::Serialize for Fixed<D> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{:.*}", D, self.0))
    }
}
