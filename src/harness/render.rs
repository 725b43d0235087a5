//! The index page of the main job (`blocklab studies`), which leads to every
//! study's report; the pieces every page is made of are [`crate::page`]'s.

use crate::page::{STYLE, escape};

/// One study on the index page: where its report is, what it is, what ran,
/// what was skipped, and the versions of what ran.
#[derive(Debug, Clone, Default)]
pub struct IndexSection {
    /// Its folder (its `report.html` and `results.md` are in it).
    pub folder: String,
    /// Its title.
    pub title: String,
    /// What it measures.
    pub about: String,
    /// Its answer, a sentence or two with their figures.
    pub answer: Vec<String>,
    /// Its first chart.
    pub chart: Option<crate::page::Chart>,
    /// What ran, a line each.
    pub ran: Vec<String>,
    /// What was skipped or run otherwise than asked, and why, a line each.
    pub skipped: Vec<String>,
    /// Versions of what ran (blocklab, rustc, crates, every peer and database).
    pub versions: std::collections::BTreeMap<String, String>,
}

/// The page that leads to every study's report (`index.html` of `blocklab
/// studies`): per study its answer in a sentence or two and its first chart,
/// a link to its report, what ran and what was skipped; then where it all
/// ran (the machine, its CPUs and memory) with the versions of everything
/// that ran, and what the whole job skipped.
pub fn index(
    dir: &std::path::Path,
    machine: &super::conditions::Machine,
    studies: &[IndexSection],
    skipped: &[String],
) -> String {
    let list = |lines: &[String]| -> String {
        let mut html = String::from("<ul>");
        for line in lines {
            html += &format!("<li>{}</li>", escape(line));
        }
        html + "</ul>"
    };
    let mut body = String::from("<h1>blocklab — the studies</h1>");
    body += "<p class=\"sub\">What blocking calls, thread pools and actors do to a web service, measured on this machine.</p>";
    // The answers first: a sentence or two per study and its one chart; the
    // details (what ran, what was skipped) after, and the reports a click away.
    let mut versions = std::collections::BTreeMap::new();
    for study in studies {
        let folder = &study.folder;
        body += &format!("<h2><a href=\"{folder}/report.html\">{}</a></h2>", escape(&study.title));
        if !dir.join(folder).join("results.md").is_file() {
            body += "<p class=\"fail\">This study wrote no results (it failed or was interrupted before the end).</p>";
        }
        for sentence in &study.answer {
            body += &format!("<p class=\"answer\">{}</p>", escape(sentence));
        }
        if let Some(chart) = &study.chart {
            body += &crate::page::charts_html([chart]);
        }
        body += &format!(
            "<p>{} <a href=\"{folder}/report.html\">The full report</a> (tables, every chart, the reading, the \
             conditions); <a href=\"{folder}/results.md\">results.md</a>, <a href=\"{folder}/results.json\">results.json</a>.</p>",
            escape(&study.about)
        );
        let mut details = String::new();
        if !study.ran.is_empty() {
            details += "<h3>What ran</h3>";
            details += &list(&study.ran);
        }
        if !study.skipped.is_empty() {
            details += "<h3>Skipped, or run otherwise than asked</h3>";
            details += &list(&study.skipped);
        }
        if !details.is_empty() {
            body += &format!("<details><summary>What ran, and what was skipped</summary>{details}</details>");
        }
        versions.extend(study.versions.clone());
    }
    body += "<h2>Where</h2>";
    body += &list(&[
        format!("{} ({}), kernel {}", machine.hostname, machine.cpu_model, machine.kernel),
        format!(
            "{} CPUs online, this job could use CPUs {}; {:.1} GiB of memory",
            machine.cpus_online,
            super::placement::list(&machine.cpus_allowed),
            machine.memory_gib
        ),
        match super::cgroup::available() {
            Ok(()) => {
                "memory caps: each target in a memory-capped cgroup of its own (its cap is under What ran)"
                    .to_string()
            }
            Err(e) => format!("memory caps: none ({e})"),
        },
    ]);
    body += "<h3>Versions</h3>";
    body += &list(&versions.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>());
    if !skipped.is_empty() {
        body += "<h2>Skipped</h2>";
        body += &list(skipped);
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>blocklab</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{STYLE}</style></head>\
         <body>{body}</body></html>\n"
    )
}
