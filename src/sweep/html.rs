//! `report.html` of a sweep, and the reading computed from its data: who
//! died where and why, who degraded and how, who held and at what memory
//! per request. One self-contained page (styles and charts inlined).

use super::report::verdict;
use super::{DeathKind, StepStatus, SweepResults, TargetResult};
use crate::harness::render::{Chart, STYLE, escape, strip_xml_decl};

/// Sentences that explain the sweep, one or two per target.
pub fn reading(results: &SweepResults) -> Vec<String> {
    let delay_s = results.delay_ms as f64 / 1e3;
    let mut out = Vec::new();
    for t in &results.targets {
        let run: Vec<&super::Step> = t.steps.iter().filter(|s| s.status == StepStatus::Run).collect();
        let cap = t.cap_bytes.map_or("uncapped".to_string(), |b| format!("under a {} MiB cap", b >> 20));
        if let Some(d) = &t.died {
            let sentence = match d.how {
                DeathKind::DidNotStart => format!("{} did not start: {}.", t.name, first_line(&d.detail)),
                DeathKind::OomKilled => format!(
                    "{} was OOM-killed at {} concurrent requests {cap}{}: the kernel killed the whole process, \
                     so every request in flight failed and it never answered again.",
                    t.name,
                    d.level,
                    t.highest_full_success.map_or(String::new(), |l| format!(" after holding {l} at 100 %"))
                ),
                DeathKind::Exited => {
                    format!(
                        "{} exited at {} concurrent requests: {}.",
                        t.name,
                        d.level,
                        first_line(&d.detail)
                    )
                }
                DeathKind::Unresponsive if d.detail.contains("OutOfMemoryError") => format!(
                    "{} ran out of heap at {} concurrent requests (java.lang.OutOfMemoryError in its stderr): \
                     the JVM stayed alive but no longer answered /test within 2 s — the seed's Tomcat died the same way.",
                    t.name, d.level
                ),
                DeathKind::Unresponsive => format!(
                    "{} was alive after {} concurrent requests but no longer answered /test within 2 s ({}).",
                    t.name,
                    d.level,
                    first_line(&d.detail)
                ),
            };
            out.push(sentence);
        }
        let Some(last_full) = run.iter().rev().find(|s| s.success_rate == Some(1.0)) else {
            if t.died.is_none() && !run.is_empty() {
                out.push(format!("{} never answered a whole level at 100 %.", t.name));
            }
            continue;
        };
        if let Some(worse) = run.iter().find(|s| s.level > last_full.level && s.alive_after == Some(true)) {
            out.push(format!(
                "{} stayed alive beyond {} but answered only {:.1} % of {} within the timeout ({}).",
                t.name,
                last_full.level,
                worse.success_rate.unwrap_or(0.0) * 100.0,
                worse.level,
                super::report::failures(worse)
            ));
        }
        let max_s = last_full.max_ms.unwrap_or(0.0) / 1e3;
        if delay_s > 0.0 && max_s > delay_s * 1.5 {
            let waves = max_s / delay_s;
            out.push(format!(
                "{} answered every request up to {} but degraded: the slowest took {max_s:.1} s, {waves:.1} × the \
                 {delay_s:.0} s delay — requests waited for a thread and were answered in waves{}.",
                t.name,
                last_full.level,
                if matches!(t.name.as_str(), "pool" | "tomcat") {
                    format!(" (⌈N / 200 threads⌉ × delay = {:.0} s at {})", (last_full.level as f64 / 200.0).ceil() * delay_s, last_full.level)
                } else {
                    String::new()
                }
            ));
        } else if t.died.is_none() {
            out.push(format!(
                "{} held every level up to {} at 100 % with the slowest answer at {max_s:.2} s{}.",
                t.name,
                last_full.level,
                per_request(t).map_or(String::new(), |b| format!(
                    ", at about {:.1} KiB of memory per concurrent request",
                    b / 1024.0
                ))
            ));
        }
    }
    out
}

/// Memory per concurrent request: the slope of peak memory between the
/// lowest and the highest level run while alive.
fn per_request(t: &TargetResult) -> Option<f64> {
    let alive: Vec<&super::Step> =
        t.steps.iter().filter(|s| s.alive_after == Some(true) && s.peak_memory_bytes.is_some()).collect();
    let (first, last) = (alive.first()?, alive.last()?);
    if last.level <= first.level {
        return None;
    }
    let grew = last.peak_memory_bytes? as f64 - first.peak_memory_bytes? as f64;
    Some(grew.max(0.0) / (last.level - first.level) as f64)
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").chars().take(160).collect()
}

/// The whole page.
pub fn page(results: &SweepResults, reading: &[String], charts: &[Chart]) -> String {
    let mut body = String::new();
    body += "<h1>blocklab sweep — study 2: slow requests, a memory cap, and who survives</h1>";
    body += &format!(
        "<p class=\"sub\">Each level N: N connections opened, then one <code>GET /delay?ms={}</code> on each at once; \
         timeout {} s. Levels {:?}.</p>",
        results.delay_ms,
        results.timeout_ms / 1000,
        results.levels
    );
    for w in &results.warnings {
        body += &format!("<p class=\"warn\">{}</p>", escape(w));
    }
    if results.interrupted {
        body += "<p class=\"fail\">This run was interrupted: the results below are partial.</p>";
    }
    body += "<h2>Reading</h2><ul class=\"reading\">";
    for s in reading {
        body += &format!("<li>{}</li>", escape(s));
    }
    body += "</ul><h2>Where each target stopped coping</h2><table><thead><tr><th>target</th><th>memory cap</th>\
             <th>verdict</th></tr></thead><tbody>";
    for t in &results.targets {
        body += &format!(
            "<tr><td>{}</td><td>{}</td><td style=\"text-align:left\">{}</td></tr>",
            escape(&t.name),
            escape(&t.cap),
            escape(&verdict(t))
        );
    }
    body += "</tbody></table><h2>Charts</h2>";
    for chart in charts {
        body += &format!(
            "<div class=\"chart\" title=\"{}\">{}</div>",
            escape(&chart.title),
            strip_xml_decl(&chart.svg)
        );
    }
    body += "<h2>Per level</h2>";
    body += &markdown_table_to_html(&super::report::markdown(results));
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

/// The per-level table of `results.md`, as HTML.
fn markdown_table_to_html(md: &str) -> String {
    let section = md.split("## Per level").nth(1).unwrap_or("");
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with('|') && !l.starts_with("|---")).collect();
    let mut out = String::from("<table>");
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let tag = if i == 0 { "th" } else { "td" };
        out += "<tr>";
        for cell in cells {
            out += &format!("<{tag}>{}</{tag}>", escape(cell));
        }
        out += "</tr>";
    }
    out + "</table>"
}
