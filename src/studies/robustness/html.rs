//! `report.html` of a sweep: the reading ([`super::reading`]), the charts,
//! the tables of `results.md`. One self-contained page (styles and charts
//! inlined).

use super::report;
use super::results::SweepResults;
use crate::page::{Chart, STYLE, charts_html, escape};

/// The whole page.
pub fn page(results: &SweepResults, reading: &[String], charts: &[Chart]) -> String {
    let mut body = String::new();
    body += "<h1>blocklab sweep — study 2: slow requests, a memory cap, and who survives</h1>";
    body += &format!(
        "<p class=\"sub\">Client: <b>{}</b>, {}.</p>",
        results.client.name(),
        escape(&results.client_detail)
    );
    body += &format!(
        "<p class=\"sub\">Each level N: N connections opened, then one <code>GET /delay?ms={}</code> on each at once; \
         timeout {} s. Levels {:?}.</p>",
        results.delay_ms,
        results.timeout_ms / 1000,
        results.levels
    );
    if results.quick {
        body += &format!(
            "<p class=\"warn\"><strong>{}</strong></p>",
            escape(&super::report::first_look(results))
        );
    }
    for w in &results.warnings {
        body += &format!("<p class=\"warn\">{}</p>", escape(w));
    }
    if results.interrupted {
        body += "<p class=\"fail\">This run was interrupted: the results below are partial.</p>";
    }
    // The answer first: where each target stopped coping and the success
    // chart, then the reading that explains them.
    body += "<h2>Where each target stopped coping</h2>";
    body += &report::coping(results).html();
    let (first, rest): (Vec<&Chart>, Vec<&Chart>) = charts.iter().partition(|c| c.file == "success.svg");
    body += &charts_html(first);
    body += "<h2>Reading</h2><ul class=\"reading\">";
    for s in reading {
        body += &format!("<li>{}</li>", escape(s));
    }
    body += "</ul><h2>The seed's question, on this machine</h2><ul class=\"reading\">";
    for s in super::seed::answer(results) {
        body += &format!("<li>{}</li>", escape(&s));
    }
    body += "</ul><h2>Memory per in-flight request</h2>";
    body += &format!("<p>{}</p>", escape(super::memory::MEANING));
    body += &report::memory(results).html();
    body += "<h2>Charts</h2>";
    body += &charts_html(rest);
    body += &format!("<h2>Per level</h2><p>{}</p>", escape(report::PER_LEVEL));
    for table in report::per_level(results) {
        body += &table.html();
    }
    for note in report::level_notes(results) {
        body += &format!("<p class=\"sub\">{}</p>", escape(&note));
    }
    body += "<h2>Conditions</h2><dl>";
    let conditions = [
        ("targets' CPUs", crate::harness::placement::list(&results.placement.server_cpus)),
        ("load's CPUs", crate::harness::placement::list(&results.placement.load_cpus)),
        ("JVM options", results.jvm_opts.clone()),
        ("Rust targets' allocator", results.allocator.clone()),
        (
            "machine",
            format!(
                "{}, {} CPUs online, {} GiB, kernel {}",
                results.machine.cpu_model,
                results.machine.cpus_online,
                results.machine.memory_gib,
                results.machine.kernel
            ),
        ),
        ("versions", results.versions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")),
        ("command", results.command.clone()),
        ("started", results.started.clone()),
        ("wall time", format!("{:.0} s", results.wall_s)),
    ];
    for (k, v) in conditions {
        body += &format!("<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    }
    for t in &results.targets {
        body += &format!(
            "<dt>{}</dt><dd>{} — cap: {}</dd>",
            escape(&t.name),
            escape(t.command.as_deref().unwrap_or("a running service (--url)")),
            escape(&t.cap)
        );
    }
    body += "</dl>";
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>blocklab sweep {}</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{STYLE}</style></head>\
         <body>{body}</body></html>\n",
        escape(&results.started)
    )
}
