//! `--html FILE`: one self-contained page of a run — what ran, the summary
//! as printed, the thresholds' verdicts, the latency distribution and the
//! timeline charts ([`super::charts`]) — built from the studies' page
//! pieces (style, escaping, inline SVG).

use super::report::LoadReport;
use crate::page::{STYLE, charts_html, escape};

/// The page: `summary` is the text `blocklab load` printed (thresholds included).
pub fn page(report: &LoadReport, summary: &str) -> String {
    let mut body = String::new();
    body += &format!("<h1>blocklab load — {} {}</h1>", escape(&report.method), escape(&report.url));
    body += &format!(
        "<p class=\"sub\">Started {}; {} loop, {} connections, {}, {} thread(s); {:.1} s; {:.0} responses/s.</p>",
        escape(&report.started_at),
        escape(&report.mode),
        report.connections,
        if report.keep_alive { "keep-alive" } else { "a new connection per request" },
        report.threads,
        report.duration_s,
        report.rps
    );
    if !report.balanced {
        body +=
            "<p class=\"fail\">sent ≠ completed + failed + in flight: this is a bug, please report it.</p>";
    }
    body += "<h2>Charts</h2>";
    body += &charts_html(&super::charts::all(report));
    body += "<p class=\"sub\">Latency by percentile: every request of the run (HdrHistogram, µs resolution); \
             <i>corrected</i> (open loop) counts from when each request was due. Timeline: each point is one \
             second of the run, every engine thread's figures added up; p50 and p99 are of the requests that \
             completed in that second.</p>";
    body += "<h2>Summary</h2>";
    body += &format!("<pre>{}</pre>", escape(summary));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>blocklab load {}</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{STYLE}</style></head>\
         <body>{body}</body></html>\n",
        escape(&report.url)
    )
}
