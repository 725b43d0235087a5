//! `report.html`: one self-contained page (styles and charts inlined, no
//! external requests) with the reading, the tables, the charts and the
//! conditions of the run.

use super::results::BenchResults;
use super::tables::{self, Table};
use crate::page::{Chart, STYLE, charts_html, escape};

fn table(t: &Table) -> String {
    t.html()
}

const GLOSSARY: [(&str, &str); 13] = [
    (
        "RPS",
        "completed requests per second, as the load generator measured them (ab's 'Requests per second')",
    ),
    (
        "Mean / Max / 99 percentile",
        "response time seen by the load generator, from sending a request to its last byte, in ms",
    ),
    (
        "HTTP workers busy",
        "share of the run the HTTP runtime's worker threads spent inside tasks; a blocked task counts as busy, so near 100 % with low RPS means blocked",
    ),
    ("actor threads busy", "the same for the actor system's own executor"),
    ("blocking threads", "most threads seen in tokio's blocking pool (spawn_blocking) during the run"),
    (
        "actor mailbox peak",
        "most messages seen waiting for the actors (the blocking pool's router, or the async actor)",
    ),
    (
        "server mean / p99",
        "time inside the server, from the router to the response (p99 is the upper bound of its histogram bucket); the gap to the client's latency is time spent queued",
    ),
    ("server CPU µs/req", "CPU time the server process used during the run, per completed request"),
    ("server peak RSS", "highest resident memory of the server process so far"),
    (
        "server threads peak",
        "most OS threads the server process had during the run, read from /proc every 250 ms (a JVM's include its GC and JIT threads)",
    ),
    (
        "database CPU µs/req",
        "CPU time the database process used during the run per completed request, from /proc (only for a database the bench started); beside server CPU µs/req it says which process was saturated: at ~1 core-second per second, that one set the rate",
    ),
    (
        "÷ seed, A ÷ B",
        "a target's best RPS divided by the seed's published RPS (different machines: a rough scale only), and one target's best RPS divided by another's on the same database and placement (this one compares)",
    ),
    (
        "÷ /test",
        "an API's best RPS divided by /test's best RPS: how much of the HTTP stack's ceiling the model keeps",
    ),
];

/// The whole page.
pub fn page(results: &BenchResults, reading: &[String], charts: &[Chart]) -> String {
    let p = &results.conditions.parameters;
    let mut body = String::new();
    body += "<h1>blocklab bench — the seed study, reproduced</h1>";
    body += &format!(
        "<p class=\"sub\">Play 2.7 + Neo4j + Akka (the seed) translated to Rust: {} APIs × {} × {} run{} of {} \
         each at {} concurrent keep-alive connections, a fresh server per API. {}</p>",
        p.apis.len(),
        match results.target_names().len() {
            1 => "1 server".to_string(),
            n => format!("{n} servers"),
        },
        p.runs,
        if p.runs == 1 { "" } else { "s" },
        p.run_length(),
        p.connections,
        escape(&results.conditions.database)
    );
    if let Some(warning) = results.conditions.placement.warning() {
        body += &format!("<p class=\"warn\">{}</p>", escape(&warning));
    }
    if p.quick {
        body += &format!("<p class=\"warn\"><strong>{}</strong></p>", escape(&tables::first_look(results)));
    }
    if results.interrupted {
        body += "<p class=\"fail\">This run was interrupted: the results below are partial.</p>";
    }
    if let Some(f) = tables::failures(results) {
        body += "<div class=\"fail\"><strong>Failed tests</strong>";
        body += &table(&f);
        body += "</div>";
    }
    // A curve's question first: the rate as the database moves away.
    let (curve_charts, charts): (Vec<&Chart>, Vec<&Chart>) =
        charts.iter().partition(|c| c.file.starts_with("curve-"));
    if let Some(t) = super::curve::table(results) {
        // The answer and its charts first; how it was measured and the details after.
        body += "<h2>The round-trip curve</h2><ul class=\"reading\">";
        for s in super::curve::answer(results) {
            body += &format!("<li>{}</li>", escape(&s));
        }
        body += "</ul>";
        let (rates, p99s): (Vec<&Chart>, Vec<&Chart>) =
            curve_charts.into_iter().partition(|c| c.file.starts_with("curve-rate-"));
        body += &charts_html(rates);
        body += &format!("<p>{}</p><ul class=\"reading\">", escape(&super::curve::how(results)));
        for s in super::curve::sentences(results) {
            body += &format!("<li>{}</li>", escape(&s));
        }
        body += "</ul>";
        body += &table(&t);
        body += &charts_html(p99s);
    }
    // The answer first: the servers side by side and their chart, then why.
    body += &format!(
        "<h2>Side by side: each server here and the seed's published run</h2><p>Database: {}. Placement: {}.</p>",
        escape(&results.conditions.database_name),
        escape(&tables::placement(results))
    );
    for section in tables::side_by_side(results) {
        body += &section.html();
    }
    let (first, rest): (Vec<&Chart>, Vec<&Chart>) =
        charts.into_iter().partition(|c| c.file == "side_by_side.svg");
    body += &charts_html(first);
    let (stall_charts, rest): (Vec<&Chart>, Vec<&Chart>) =
        rest.into_iter().partition(|c| c.file.starts_with("stall-"));
    if let Some(t) = tables::stalls(results) {
        body += &format!("<h2>The database stalls</h2><p>{}</p>", escape(&tables::stalls_how(results)));
        for t in &t {
            body += &table(t);
        }
        body += &charts_html(stall_charts);
    }
    if let Some(t) = tables::faults(results) {
        body += &format!(
            "<h2>Faults on the link, under load</h2><p>{}</p>",
            escape(&tables::faults_how(results))
        );
        for t in &t {
            body += &table(t);
        }
    }
    body += "<h2>Reading</h2><ul class=\"reading\">";
    for s in reading {
        body += &format!("<li>{}</li>", escape(s));
    }
    body += "</ul>";
    body += "<h2>Results, in the seed's columns</h2><p>Times in ms, measured by the load generator.</p>";
    body += &table(&tables::seed_columns(results));
    body += "<h2>Normalized to /test, beside the seed</h2>";
    body += "<p>Absolute numbers from different machines do not compare; the fraction of the HTTP stack's ceiling \
             each model keeps does. The seed's figures are the better of its two runs, on a 4-core laptop.</p>";
    body += &table(&tables::normalized(results));
    body += "<h2>Charts</h2>";
    body += &charts_html(rest);
    body += "<h2>What the server said about itself</h2>";
    body += "<p>Sampled from each server's <code>/metrics</code> every 250 ms during the run, and from /proc.</p>";
    for section in tables::extra_columns(results) {
        body += &section.html();
    }
    body += "<h2>What the figures mean</h2><table class=\"glossary\"><tbody>";
    for (name, meaning) in GLOSSARY {
        body += &format!("<tr><td><strong>{}</strong></td><td>{}</td></tr>", escape(name), escape(meaning));
    }
    body += "</tbody></table>";
    body += "<h2>Conditions</h2><dl>";
    for (k, v) in tables::conditions(results) {
        body += &format!("<dt>{}</dt><dd>{}</dd>", escape(&k), escape(&v));
    }
    body += "</dl>";
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>blocklab bench {}</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{STYLE}</style></head>\
         <body>{body}</body></html>\n",
        escape(&results.started_at)
    )
}
