//! The reading of a sweep, computed from its data: who died where and why,
//! who degraded and how, who held and at what memory per request; and the
//! words every output shares (a target's verdict, a step's failures).

use super::results::{DeathKind, Step, StepStatus, SweepResults, TargetResult};
use super::step::Outcome;

/// Sentences that explain the sweep, one or two per target.
pub fn reading(results: &SweepResults) -> Vec<String> {
    let delay_s = results.delay_ms as f64 / 1e3;
    let mut out = Vec::new();
    for t in &results.targets {
        let run: Vec<&Step> = t.steps.iter().filter(|s| s.status == StepStatus::Run).collect();
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
                failures(worse)
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
    let alive: Vec<&Step> =
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

/// The first line of `text`, at most 160 bytes.
pub fn head(text: &str) -> &str {
    let line = text.lines().next().unwrap_or("");
    &line[..line.len().min(160)]
}

/// Where a target stopped coping, in words.
pub fn verdict(target: &TargetResult) -> String {
    let held = match target.highest_full_success {
        Some(level) => format!("100 % up to {level}"),
        None => "never 100 %".to_string(),
    };
    match &target.died {
        Some(d) if d.level == 0 => format!("{}: {}", d.how.words(), head(&d.detail)),
        Some(d) => format!("{held}; {} at {}", d.how.words(), d.level),
        None => format!("{held}; alive to the end"),
    }
}

/// The non-ok outcomes of a step, e.g. "timeout 12, refused 3".
pub fn failures(step: &Step) -> String {
    let Some(load) = &step.load else { return "-".to_string() };
    let parts: Vec<String> = Outcome::ALL
        .into_iter()
        .filter(|o| *o != Outcome::Ok && load.count(*o) > 0)
        .map(|o| format!("{} {}", o.name(), load.count(o)))
        .collect();
    if parts.is_empty() { "0".to_string() } else { parts.join(", ") }
}
