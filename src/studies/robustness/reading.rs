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
            out.push(degraded(&t.name, last_full, max_s, delay_s));
        } else if t.died.is_none() {
            out.push(format!(
                "{} held every level up to {} at 100 % with the slowest answer at {max_s:.2} s{}.",
                t.name,
                last_full.level,
                t.per_request.as_ref().and_then(|p| p.process_kib).map_or(String::new(), |kib| format!(
                    ", at about {kib:.1} KiB of memory per concurrent request"
                ))
            ));
        }
    }
    let limited: Vec<String> = results
        .targets
        .iter()
        .filter(|t| t.died.is_none())
        .filter_map(|t| {
            let levels: Vec<String> = t
                .steps
                .iter()
                .filter(|s| s.status == StepStatus::NotRunLimit)
                .map(|s| s.level.to_string())
                .collect();
            (!levels.is_empty()).then(|| format!("{} ({})", t.name, levels.join(", ")))
        })
        .collect();
    if !limited.is_empty() {
        out.push(format!(
            "Not run for want of descriptors: {}. Each connection takes one descriptor in the sweep and one in \
             the target, and RLIMIT_NOFILE is {} here; these targets were still alive, so how far they hold is \
             not known from this machine.",
            limited.join("; "),
            results.descriptor_limit.map_or("-".to_string(), |l| l.to_string())
        ));
    }
    out
}

/// Why the slowest answer at a level held at 100 % took `max_s`, many times
/// the delay. A server that runs each request on a thread of a pool of P
/// (Tomcat's 200, blocklab's `pool`) answers N requests in ⌈N / P⌉ waves,
/// each one delay long: max ≈ k × delay for a whole k. Read back, k waves
/// at N mean a pool of between ⌈N / k⌉ and ⌊(N − 1) / (k − 1)⌋ threads.
/// A maximum between whole waves means the requests waited elsewhere too
/// (the accept queue's SYN retries, a garbage collector, a starved core).
fn degraded(name: &str, step: &Step, max_s: f64, delay_s: f64) -> String {
    let ratio = max_s / delay_s;
    let waves = ratio.round();
    let level = step.level as f64;
    let threads =
        step.peak_threads.map_or(String::new(), |t| format!("; it ran {t} OS threads at that level"));
    if (ratio - waves).abs() <= 0.3 && waves >= 2.0 && level >= waves {
        let (low, high) = ((level / waves).ceil(), ((level - 1.0) / (waves - 1.0)).floor());
        format!(
            "{name} answered every request up to {} but in waves: the slowest took {max_s:.1} s ≈ {waves:.0} × \
             the {delay_s} s delay, as a server holding each request on one of a pool of P threads does \
             (⌈N / P⌉ waves of one delay each; {waves:.0} waves at {} means P between {low:.0} and {high:.0}){threads}.",
            step.level, step.level
        )
    } else {
        format!(
            "{name} answered every request up to {} but degraded: the slowest took {max_s:.1} s, {ratio:.1} × the \
             {delay_s} s delay, not a whole number of waves — requests waited beyond the delay (for a thread, \
             in the accept queue, behind a collector or a starved core){threads}.",
            step.level
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn held(level: usize, max_ms: f64, threads: Option<u64>) -> Step {
        Step {
            success_rate: Some(1.0),
            max_ms: Some(max_ms),
            peak_threads: threads,
            ..Step::not_run(level, StepStatus::Run)
        }
    }

    #[test]
    fn whole_waves_are_read_back_as_a_pool_size() {
        // Tomcat's 200 threads at 1000 requests of 5 s: five waves.
        let sentence = degraded("spring-web", &held(1000, 25_600.0, Some(221)), 25.6, 5.0);
        assert!(sentence.contains("≈ 5 × the 5 s delay"), "{sentence}");
        assert!(sentence.contains("P between 200 and 249"), "{sentence}");
        assert!(sentence.contains("221 OS threads"), "{sentence}");
        // 700 in four waves: 175 to 233 threads, 200 among them.
        assert!(degraded("pool", &held(700, 20_400.0, None), 20.4, 5.0).contains("P between 175 and 233"));
    }

    #[test]
    fn a_maximum_between_waves_is_not_read_as_a_pool() {
        let sentence = degraded("x", &held(2000, 12_500.0, None), 12.5, 5.0);
        assert!(sentence.contains("2.5 × the 5 s delay, not a whole number of waves"), "{sentence}");
        assert!(!sentence.contains("P between"), "{sentence}");
    }
}
