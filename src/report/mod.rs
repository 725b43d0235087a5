//! Writing a bench run out: `results.md` (the seed's table first), `results.json`
//! (`schema/bench-results.json`), `results.csv`, the charts as SVG and one
//! self-contained `report.html`.
//!
//! * [`tables`] — the tables as data, rendered to Markdown and HTML.
//! * [`reading`] — the sentences that explain the numbers.
//! * [`charts`] — the SVG charts (plotters).
//! * [`html`] — the page.

pub mod charts;
pub mod html;
pub mod reading;
pub mod tables;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::experiment::results::BenchResults;

/// Writes every output into `dir`; returns the files written.
pub fn write_all(results: &BenchResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir.join("charts"))?;
    let reading = reading::sentences(results);
    let charts = charts::all(results);
    let mut written = Vec::new();
    let mut write = |name: &str, text: &str| -> anyhow::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    write("results.md", &markdown(results, &reading))?;
    write("results.json", &serde_json::to_string_pretty(results)?)?;
    write("results.csv", &csv(results))?;
    for chart in &charts {
        write(&format!("charts/{}", chart.file), &chart.svg)?;
    }
    write("report.html", &html::page(results, &reading, &charts))?;
    Ok(written)
}

/// `results.md`.
pub fn markdown(results: &BenchResults, reading: &[String]) -> String {
    let mut out = String::from("# blocklab bench — the seed study, reproduced\n\n");
    if results.interrupted {
        out += "**Interrupted: partial results.**\n\n";
    }
    out += "## Results (the seed's columns; times in ms)\n\n";
    out += &tables::seed_columns(results).markdown();
    out += "\n## Normalized to /test, beside the seed's Play figures\n\n";
    out += &tables::normalized(results).markdown();
    out += "\n## Reading\n\n";
    for s in reading {
        out += &format!("- {s}\n");
    }
    out += "\n## More figures per run (client and server side)\n\n";
    out += &tables::extra_columns(results).markdown();
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

/// `results.csv`: one row per run, every figure.
pub fn csv(results: &BenchResults) -> String {
    let mut out = String::from(
        "test_id,run_id,api,rps,mean_ms,max_ms,p50_ms,p99_ms,p999_ms,completed,ok,non_2xx,error_total,duration_s,\
         server_cpu_s,server_cpu_per_request_us,server_peak_rss_mib,http_busy_ratio,actor_busy_ratio,\
         blocking_threads_max,spawn_blocking_in_flight_max,actor_mailbox_max,async_mailbox_max,\
         async_reads_in_flight_max,server_requests,server_mean_ms,server_p99_ms,status\n",
    );
    for t in &results.tests {
        for r in &t.runs {
            let s = &r.server;
            out += &format!(
                "{},{},{},{:.2},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{:.3},{:.3},{:.2},{:.2},{:.4},{:.4},{},{},{},{},{},{},{:.3},{:.3},{}\n",
                t.test_id,
                r.run_id,
                t.api,
                r.rps,
                r.mean_ms,
                r.max_ms,
                r.p50_ms,
                r.p99_ms,
                r.p999_ms,
                r.completed,
                r.ok,
                r.non_2xx,
                r.error_total,
                r.duration_s,
                r.server_cpu_s,
                r.server_cpu_per_request_us,
                r.server_peak_rss_mib,
                s.http_busy_ratio,
                s.actor_busy_ratio,
                s.blocking_threads_max,
                s.spawn_blocking_in_flight_max,
                s.actor_mailbox_max,
                s.async_mailbox_max,
                s.async_reads_in_flight_max,
                s.server_requests,
                s.server_mean_ms,
                s.server_p99_ms,
                t.status
            );
        }
    }
    out
}
