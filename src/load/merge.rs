//! `blocklab load merge`: one report from several runs of `blocklab load`
//! that went against the same target at the same time, from one machine or
//! many (each agent writes its `--json`; nothing coordinates them).
//!
//! Counts and errors are summed and the histograms, embedded in each JSON in
//! HdrHistogram's own encoding, are added, so the merged percentiles are the
//! percentiles of all the requests, not an average of percentiles. The rate
//! is over the union of the runs' time spans: runs that overlap count their
//! shared time once, and a gap between runs that did not overlap is not
//! counted as time under load (the report then says that they did not
//! overlap, because their sum is not a concurrent load).

use std::time::{Duration, SystemTime};

use super::client::ErrorKind;
use super::outcome::{RunResult, ThreadStats};
use super::plan::{LoadPlan, Stop, Target};
use super::report::{self, LoadReport, SCHEMA_VERSION, decode_histogram};

/// The merged run, its report, and what the merge has to say about the inputs.
pub struct Merged {
    /// The plan the runs add up to (connections and threads summed).
    pub plan: LoadPlan,
    /// The summed figures over the union of the spans.
    pub result: RunResult,
    /// The merged JSON document.
    pub report: LoadReport,
    /// Whether every run's span overlaps the others' (one stretch of time).
    pub overlapping: bool,
}

/// Merges `runs` (each a `--json` document and a name for messages).
pub fn merge(runs: &[(String, LoadReport)]) -> Result<Merged, String> {
    let (first_name, first) = runs.first().ok_or("nothing to merge")?;
    for (name, run) in runs {
        if run.schema != "blocklab/load-result" || !(2..=SCHEMA_VERSION).contains(&run.schema_version) {
            return Err(format!(
                "{name} is not a blocklab load result of schema_version 2 to {SCHEMA_VERSION} (run blocklab load --json with this version)"
            ));
        }
        for (what, a, b) in [
            ("URL", &first.url, &run.url),
            ("method", &first.method, &run.method),
            ("loop", &first.mode, &run.mode),
            ("protocol", &first.protocol, &run.protocol),
        ] {
            if a != b {
                return Err(format!(
                    "{first_name} and {name} differ in their {what} ({a} and {b}): not one load"
                ));
            }
        }
        if run.keep_alive != first.keep_alive {
            return Err(format!("{first_name} and {name} differ in keep-alive: not one load"));
        }
    }
    let mut stats = ThreadStats::new(first.mode == "open");
    let mut spans = Vec::with_capacity(runs.len());
    for (name, run) in runs {
        stats.merge(&stats_of(run).map_err(|e| format!("{name}: {e}"))?);
        let start = humantime::parse_rfc3339_weak(&run.started_at)
            .map_err(|e| format!("{name}: started_at '{}': {e}", run.started_at))?;
        spans.push((start, start + Duration::from_secs_f64(run.duration_s.max(0.0))));
    }
    let (duration, overlapping) = union(&mut spans);
    let started_at = spans.iter().map(|s| s.0).min().expect("at least one run");
    let threads = runs.iter().map(|(_, r)| r.threads).sum();
    // Each run's timeline stays in its own file: their seconds began at different instants.
    let result = RunResult { stats, duration, started_at, threads, timeline: Vec::new() };
    let plan = LoadPlan {
        target: Target::unresolved(&first.url)?,
        method: first.method.parse().map_err(|_| format!("{first_name}: bad method {}", first.method))?,
        headers: Vec::new(),
        body: None,
        content_type: None,
        urls: Vec::new(),
        tls: None,
        connections: runs.iter().map(|(_, r)| r.connections).sum(),
        connection_stages: None,
        stop: match runs.iter().map(|(_, r)| r.requests_planned).sum::<Option<u64>>() {
            Some(n) => Stop::Requests(n),
            None => Stop::Duration(Duration::from_secs_f64(
                runs.iter().filter_map(|(_, r)| r.duration_planned_s).fold(0.0, f64::max),
            )),
        },
        keep_alive: first.keep_alive,
        rate: runs
            .iter()
            .map(|(_, r)| r.schedule.as_ref().map(|s| s.target_rate))
            .sum::<Option<f64>>()
            .map(super::plan::RateSchedule::constant),
        timeout: Duration::from_secs_f64(first.timeout_s),
        threads,
        pipeline: first.pipeline,
        progress: super::plan::Progress::Silent,
        h2: first.protocol != "http/1.1",
        streams: first.streams,
        busy_poll: false,
    };
    let report = LoadReport::new(&plan, &result);
    Ok(Merged { plan, result, report, overlapping })
}

/// The text: what was merged, then the same summary `blocklab load` prints.
pub fn text(merged: &Merged, names: &[String]) -> String {
    let span = if merged.overlapping {
        "their time spans overlap".to_string()
    } else {
        "THEIR TIME SPANS DO NOT OVERLAP: these runs were not one simultaneous load; the rate below is over \
         the time they ran, gaps excluded"
            .to_string()
    };
    format!(
        "merged {} runs ({}); {span}; rate over the union of their spans ({:.3} s)\n\n{}",
        names.len(),
        names.join(", "),
        merged.result.duration.as_secs_f64(),
        report::text(&merged.plan, &merged.result, &merged.report)
    )
}

/// The figures of one run, from its JSON document.
fn stats_of(run: &LoadReport) -> Result<ThreadStats, String> {
    let mut stats = ThreadStats::new(run.mode == "open");
    stats.latency = decode_histogram(&run.histograms.latency)?;
    stats.connect = decode_histogram(&run.histograms.connect)?;
    stats.corrected = match (&run.histograms.corrected, run.mode.as_str()) {
        (Some(h), _) => Some(decode_histogram(h)?),
        (None, "open") => return Err("an open-loop run without its corrected histogram".to_string()),
        (None, _) => None,
    };
    stats.sent = run.sent;
    stats.completed = run.completed;
    stats.ok = run.ok;
    for (code, n) in &run.status_codes {
        let code: usize =
            code.parse().ok().filter(|c| *c < 1000).ok_or_else(|| format!("bad status code {code}"))?;
        stats.statuses[code] = *n;
    }
    for kind in ErrorKind::ALL {
        stats.errors[kind.index()] = run.errors.get(kind.key()).copied().unwrap_or(0);
    }
    if let Some(h) = &run.histograms.handshake {
        stats.handshake = decode_histogram(h)?;
    }
    if let Some(tls) = &run.tls {
        stats.resumed = tls.resumed;
        stats.tls_session.clone_from(&tls.session);
        stats.tls_first_error.clone_from(&tls.first_error);
    }
    stats.in_flight_at_deadline = run.in_flight_at_deadline;
    stats.connections_opened = run.connections_opened;
    stats.head_bytes = run.bytes_head;
    stats.body_bytes = run.bytes_body;
    stats.server.clone_from(&run.server);
    stats.document_length = run.document_length;
    if let Some(schedule) = &run.schedule {
        stats.backlog = schedule.backlog;
        stats.late_sends = schedule.late_sends;
        stats.max_send_lag = Duration::from_secs_f64(schedule.max_send_lag_ms / 1000.0);
    }
    if stats.latency.len() != stats.completed {
        return Err(format!(
            "its latency histogram holds {} samples for {} completed requests",
            stats.latency.len(),
            stats.completed
        ));
    }
    Ok(stats)
}

/// The measure of the union of `spans` (sorted in place), and whether they
/// form one stretch of time.
fn union(spans: &mut [(SystemTime, SystemTime)]) -> (Duration, bool) {
    spans.sort();
    let mut total = Duration::ZERO;
    let mut overlapping = true;
    let (mut start, mut end) = spans[0];
    for &(s, e) in &spans[1..] {
        if s > end {
            total += end.duration_since(start).unwrap_or_default();
            overlapping = false;
            (start, end) = (s, e);
        } else {
            end = end.max(e);
        }
    }
    total += end.duration_since(start).unwrap_or_default();
    (total, overlapping)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_union_counts_shared_time_once_and_gaps_not_at_all() {
        let t = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(union(&mut [(t(0), t(10)), (t(5), t(12))]), (Duration::from_secs(12), true));
        assert_eq!(union(&mut [(t(20), t(30)), (t(0), t(10))]), (Duration::from_secs(20), false));
        assert_eq!(
            union(&mut [(t(0), t(10)), (t(2), t(3)), (t(10), t(11))]),
            (Duration::from_secs(11), true)
        );
    }
}
