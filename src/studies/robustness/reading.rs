//! The reading of a sweep, computed from its data: who died where and why,
//! who degraded and how, who held and at what memory per request; and the
//! words every output shares (a target's verdict, a step's failures).

use super::results::{DeathKind, Step, StepStatus, SweepResults, TargetResult};
use super::step::Outcome;

/// Sentences that explain the sweep, one or two per target.
pub fn reading(results: &SweepResults) -> Vec<String> {
    let delay_s = results.delay_ms as f64 / 1e3;
    let mut out = held_and_survived(&results.targets, results.delay_ms);
    out.extend(results.targets.iter().filter_map(|t| where_the_time_went(t, results.delay_ms)));
    out.extend(idle_sentence(&results.targets));
    for t in &results.targets {
        let run: Vec<&Step> = t.steps.iter().filter(|s| s.status == StepStatus::Run).collect();
        let cap = t.cap_bytes.map_or("uncapped".to_string(), |b| format!("under a {} MiB cap", b >> 20));
        if let Some(d) = &t.died {
            let sentence = match d.how {
                DeathKind::DidNotStart => format!("{} did not start: {}.", t.name, first_line(&d.detail)),
                DeathKind::OomKilled if d.detail.contains(super::run::PART_KILLED) => format!(
                    "{} lost part of itself at {} concurrent requests {cap}{}: {}. The requests those processes \
                     held failed; a lost worker counts as a death, so its later levels were not run.",
                    t.name,
                    d.level,
                    t.highest_full_success.map_or(String::new(), |l| format!(" after holding {l} at 100 %")),
                    first_line(&d.detail)
                ),
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
        for r in &t.recoveries {
            let later = if results.levels.iter().any(|l| *l > r.level) {
                "so its later levels ran"
            } else {
                "at the sweep's last level"
            };
            out.push(format!(
                "{} stopped answering /test within 2 s after {} concurrent requests ({}) and recovered: it \
                 answered again {:.1} s after the level, {later}.",
                t.name,
                r.level,
                first_line(&r.detail),
                r.after_s
            ));
        }
        let Some(last_full) = run.iter().rev().find(|s| s.success_rate == Some(1.0)) else {
            if t.died.is_none() && !run.is_empty() {
                out.push(format!("{} never answered a whole level at 100 %.", t.name));
            }
            continue;
        };
        if let Some(worse) = run.iter().find(|s| {
            s.level > last_full.level && (s.alive_after == Some(true) || s.recovered_after_s.is_some())
        }) {
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
            let heap_limit = heap_limit(&results.jvm_opts).filter(|_| last_full.peak_heap_bytes.is_some());
            out.push(degraded(&t.name, last_full, max_s, delay_s, heap_limit));
        } else if t.died.is_none() {
            out.push(format!(
                "{} answered every level up to {} at 100 % with the slowest answer at {max_s:.2} s{}.",
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
            let levels: Vec<String> = t.limited_levels().iter().map(ToString::to_string).collect();
            let limit = t.descriptor_limit.map_or("its".to_string(), |l| format!("its {l}"));
            (!levels.is_empty()).then(|| format!("{} ({}; {limit} descriptors)", t.name, levels.join(", ")))
        })
        .collect();
    if !limited.is_empty() {
        out.push(format!(
            "Not run for want of descriptors: {}. Each connection takes a descriptor in the target, whose \
             RLIMIT_NOFILE (read from the running process, less {} spare) it cannot raise here; without \
             admission control a connection past it waits unseen in the accept queue, so such a level would \
             measure the limit, not the server. These targets were still alive: how far they hold is not known \
             from this machine.",
            limited.join("; "),
            super::run::SPARE_DESCRIPTORS
        ));
    }
    out
}

/// Where the slowest answers of `t`'s levels answered at 100 % but past
/// [`held_max_ms`] spent their time: before the answer reached the client's
/// socket (the target's, with the loopback's few µs) or after, waiting
/// unread (the client's), from the kernel's receive timestamps. `None` when
/// no such level has them.
pub fn where_the_time_went(t: &TargetResult, delay_ms: u64) -> Option<String> {
    let slow: Vec<(&Step, f64, f64)> = t
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Run && s.success_rate == Some(1.0))
        .filter_map(|s| {
            let max = s.max_ms.filter(|m| *m > held_max_ms(delay_ms))?;
            Some((s, max, s.load.as_ref()?.slowest_arrived_ms?))
        })
        .collect();
    if slow.is_empty() {
        return None;
    }
    let delay = delay_ms as f64;
    let levels: Vec<String> = slow
        .iter()
        .map(|(s, max, arrived)| {
            format!(
                "at {}, {max:.0} ms from the send, {arrived:.0} of them before the answer reached the client's \
                 socket and {:.0} after, unread",
                s.level,
                max - arrived
            )
        })
        .collect();
    let target_s = |(_, max, arrived): &&(&Step, f64, f64)| arrived - delay >= max - arrived;
    let whose = match slow.iter().filter(target_s).count() {
        n if n == slow.len() => "was the target's (and the loopback's), not the client's".to_string(),
        0 => "was the client's (answers that had arrived waited unread in its sockets), not the target's"
            .to_string(),
        _ => {
            let list = |server: bool| -> String {
                let levels: Vec<String> = slow
                    .iter()
                    .filter(|x| target_s(x) == server)
                    .map(|(s, ..)| s.level.to_string())
                    .collect();
                levels.join(", ")
            };
            format!("was the target's at {} and the client's at {}", list(true), list(false))
        }
    };
    Some(format!(
        "Where {}'s slowest answers went past {:.0} ms: {}. The time past the {delay:.0} ms delay {whose}.",
        t.name,
        held_max_ms(delay_ms),
        levels.join("; ")
    ))
}

/// The slowest answer a level may take to count as held: a tenth above the
/// delay (5.5 s for the seed's 5 s), and at least 100 ms above it (a test's
/// short delay would otherwise leave no room for scheduling).
pub fn held_max_ms(delay_ms: u64) -> f64 {
    (delay_ms as f64 * 1.1).max(delay_ms as f64 + 100.0)
}

/// The highest level a target held: every request answered 2xx within the
/// timeout, the slowest within [`held_max_ms`].
pub fn held(t: &TargetResult, delay_ms: u64) -> Option<&Step> {
    t.steps.iter().rev().find(|s| {
        s.status == StepStatus::Run
            && s.success_rate == Some(1.0)
            && s.max_ms.is_some_and(|m| m <= held_max_ms(delay_ms))
    })
}

/// The highest level after which a target was alive (answering `/test`,
/// within 2 s or after a pause it recovered from).
pub fn survived(t: &TargetResult) -> Option<&Step> {
    t.steps.iter().rev().find(|s| {
        s.status == StepStatus::Run && (s.alive_after == Some(true) || s.recovered_after_s.is_some())
    })
}

/// One sentence per target: the level it held, the level it survived, and
/// what happened past them — each level run above the one held, its
/// requests served, refused and timed out (the per-level table's columns),
/// then how it went down or why its higher levels did not run.
pub fn held_and_survived(targets: &[TargetResult], delay_ms: u64) -> Vec<String> {
    targets
        .iter()
        .filter(|t| t.steps.iter().any(|s| s.status == StepStatus::Run))
        .map(|t| {
            let held = held(t, delay_ms);
            let survived = survived(t);
            // In whole milliseconds, as the per-level table gives them.
            let limit_ms = held_max_ms(delay_ms);
            let mut held_words = match held {
                Some(s) => format!(
                    "held {} (100 %, the slowest answer {:.0} ms, within {limit_ms:.0} ms)",
                    s.level,
                    s.max_ms.unwrap_or(0.0)
                ),
                None => format!("held no level (100 % with the slowest answer within {limit_ms:.0} ms)"),
            };
            // Every request answered at a higher level, but too slowly to count as held.
            if let Some(full) = t.steps.iter().rev().find(|s| {
                s.status == StepStatus::Run && s.success_rate == Some(1.0) && s.level > held.map_or(0, |h| h.level)
            }) {
                held_words += &format!(
                    ", and answered every request up to {} but slower (the slowest {:.0} ms)",
                    full.level,
                    full.max_ms.unwrap_or(0.0)
                );
            }
            let last = t.steps.last().map(|s| s.level);
            let survived_words = match survived {
                Some(s) if Some(s.level) == last => format!("survived {} (the sweep's last level)", s.level),
                Some(s) => format!("survived {}", s.level),
                None => "survived no level".to_string(),
            };
            let above = held.map_or(0, |s| s.level);
            let past: Vec<String> = t
                .steps
                .iter()
                .filter(|s| s.status == StepStatus::Run && s.level > above)
                .filter_map(|s| {
                    let load = s.load.as_ref()?;
                    let other = s
                        .level
                        .saturating_sub(load.count(Outcome::Ok) + load.count(Outcome::Refused) + load.timed_out());
                    let refused_within = if load.count(Outcome::Refused) > 0 {
                        format!(" (each within {:.0} ms of its send)", load.refused_max_ms.ceil().max(1.0))
                    } else {
                        String::new()
                    };
                    // lean's workers sized for what its admission budget holds, not for every connection.
                    let workers = match (s.workers, s.cap_holds) {
                        (Some(w), Some(h)) => format!(" ({w} workers: its admission budget holds about {h} requests)"),
                        _ => String::new(),
                    };
                    Some(format!(
                        "at {}{workers}: {} served, {} refused{refused_within}, {} timed out{}",
                        s.level,
                        load.count(Outcome::Ok),
                        load.count(Outcome::Refused),
                        load.timed_out(),
                        if other > 0 { format!(", {other} failed otherwise") } else { String::new() }
                    ))
                })
                .collect();
            let mut sentence = format!("{}: {held_words}; {survived_words}", t.name);
            if !past.is_empty() {
                let past_what = held.map_or(String::new(), |s| format!("past {}, ", s.level));
                sentence += &format!("; {past_what}{}", past.join("; "));
            }
            let limited = t.limited_levels();
            let end = match (&t.died, limited.first()) {
                (Some(d), _) if d.level > 0 => format!("; then it was {} at {}", d.how.words(), d.level),
                (_, Some(first)) => format!(
                    "; {} and above not run: over its {} descriptors, with no admission control to refuse the rest",
                    first,
                    t.descriptor_limit.map_or("-".to_string(), |l| l.to_string())
                ),
                _ => String::new(),
            };
            sentence + &end + "."
        })
        .collect()
}

/// Study 2's answer in a sentence or two, for the index page: who held the
/// most concurrent slow requests at 100 % under the cap, and where each of
/// the others stopped coping. (Each level runs once: there is no spread to
/// give, and the sentence claims no more than the level.)
pub fn answer(results: &SweepResults) -> Vec<String> {
    let mut out = Vec::new();
    if results.quick {
        out.push(super::report::first_look(results));
    }
    let cap = results
        .targets
        .iter()
        .find_map(|t| t.cap_bytes)
        .map_or("uncapped".to_string(), |b| format!("under a {} MiB cap", b >> 20));
    // The targets that held the highest level at 100 % (and, among those,
    // died latest): every one of them when several tie.
    let key = |t: &TargetResult| {
        (t.highest_full_success, std::cmp::Reverse(t.died.as_ref().map_or(usize::MAX, |d| d.level)))
    };
    let top = results.targets.iter().filter(|t| t.highest_full_success.is_some()).map(key).max();
    let best: Vec<&TargetResult> =
        results.targets.iter().filter(|t| top.is_some() && Some(key(t)) == top).collect();
    if let Some(first) = best.first() {
        let level = first.highest_full_success.unwrap_or(0);
        let slowest: Vec<String> = best
            .iter()
            .filter_map(|t| t.steps.iter().find(|s| s.level == level).and_then(|s| s.max_ms))
            .map(|m| format!("{:.2} s", m / 1e3))
            .collect();
        let names: Vec<&str> = best.iter().map(|t| t.name.as_str()).collect();
        let (who, slowest) = match names.as_slice() {
            [one] => (
                one.to_string(),
                slowest.first().map_or(String::new(), |m| format!(", the slowest answer {m}")),
            ),
            _ => (
                format!("{} and {}", names[..names.len() - 1].join(", "), names[names.len() - 1]),
                if slowest.len() == names.len() {
                    format!(" (the slowest answers {}, in that order)", slowest.join(", "))
                } else {
                    String::new()
                },
            ),
        };
        let ended = match (&first.died, best.len()) {
            (None, 1) => " and it never died".to_string(),
            (None, _) => " and none of them died".to_string(),
            (Some(d), 1) => format!(", then was {} at {}", d.how.words(), d.level),
            (Some(d), _) => format!(", then each went down at {}", d.level),
        };
        out.push(format!(
            "{who} held the most: {level} concurrent {:.0} s requests at 100 % {cap}{slowest}{ended}.",
            results.delay_ms as f64 / 1e3,
        ));
    }
    let others: Vec<String> = results
        .targets
        .iter()
        .filter(|t| best.iter().all(|b| b.name != t.name))
        .map(|t| format!("{} {}", t.name, verdict(t)))
        .collect();
    if !others.is_empty() {
        out.push(format!("The others: {}.", others.join("; ")));
    }
    out
}

/// Why the slowest answer at a level held at 100 % took `max_s`, many times
/// the delay. A server that runs each request on a thread of a pool of P
/// (Tomcat's 200, blocklab's `pool`) answers N requests in ⌈N / P⌉ waves,
/// each one delay long: max ≈ k × delay for a whole k. Read back, k waves
/// at N mean a pool of between ⌈N / k⌉ and ⌊(N − 1) / (k − 1)⌋ threads.
///
/// That inference is a claim, so it is checked before it is written: the
/// process's OS threads bound its pool from above (a pool of P runs at
/// least P threads, and a runtime's own threads are a few dozen, so more
/// than a quarter above the inferred range is not that pool), and a JVM
/// whose collector paused for a tenth of the step or more, or whose heap
/// stood within a tenth of its limit, was slowed by memory, not by a pool.
/// When the check fails, the figures are given and no pool is named.
fn degraded(name: &str, step: &Step, max_s: f64, delay_s: f64, heap_limit: Option<u64>) -> String {
    let ratio = max_s / delay_s;
    let waves = ratio.round();
    let level = step.level as f64;
    let threads =
        step.peak_threads.map_or(String::new(), |t| format!("; it ran {t} OS threads at that level"));
    let memory = memory_pressure(step, max_s, heap_limit);
    let whole = (ratio - waves).abs() <= 0.3 && waves >= 2.0 && level >= waves;
    let (low, high) = ((level / waves.max(2.0)).ceil(), ((level - 1.0) / (waves - 1.0).max(1.0)).floor());
    let threads_fit = step.peak_threads.is_none_or(|t| t as f64 >= low && t as f64 <= high * 1.25);
    if whole && threads_fit && memory.is_none() {
        format!(
            "{name} answered every request up to {} but in waves: the slowest took {max_s:.1} s ≈ {waves:.0} × \
             the {delay_s} s delay, as a server holding each request on one of a pool of P threads does \
             (⌈N / P⌉ waves of one delay each; {waves:.0} waves at {} means P between {low:.0} and {high:.0}){threads}.",
            step.level, step.level
        )
    } else if let Some(memory) = memory {
        format!(
            "{name} answered every request up to {} but slowly: the slowest took {max_s:.1} s, {ratio:.1} × the \
             {delay_s} s delay, under memory pressure ({memory}){threads}.",
            step.level
        )
    } else if whole {
        format!(
            "{name} answered every request up to {} but slowly: the slowest took {max_s:.1} s ≈ {waves:.0} × the \
             {delay_s} s delay, yet not as a pool would: {waves:.0} waves at {} would mean a pool of {low:.0} to \
             {high:.0} threads, and it ran {} — requests waited elsewhere (the accept queue, a starved core).",
            step.level,
            step.level,
            step.peak_threads.map_or("-".to_string(), |t| format!("{t} OS threads"))
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

/// A JVM step's memory pressure, in words, when its collector paused for a
/// tenth of the slowest answer or more, or its heap peaked within a tenth
/// of `heap_limit`; `None` otherwise (or for a target with no heap figures).
fn memory_pressure(step: &Step, max_s: f64, heap_limit: Option<u64>) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(gc_ms) = step.gc_pause_ms.filter(|ms| *ms >= max_s * 100.0) {
        parts.push(format!("its collector paused {:.1} s during the level", gc_ms / 1e3));
    }
    if let (Some(heap), Some(limit)) = (step.peak_heap_bytes, heap_limit)
        && heap as f64 >= 0.9 * limit as f64
    {
        parts.push(format!("its heap peaked at {:.0} of {:.0} MiB", mib_f(heap), mib_f(limit)));
    }
    (!parts.is_empty()).then(|| parts.join(" and "))
}

fn mib_f(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// A JVM's heap limit from its options (`-Xmx50M`, `-Xmx1g`), bytes.
pub fn heap_limit(jvm_opts: &str) -> Option<u64> {
    let value = jvm_opts.split_whitespace().find_map(|o| o.strip_prefix("-Xmx"))?;
    let (digits, unit) = value.split_at(value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len()));
    let n: u64 = digits.parse().ok()?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return None,
    };
    Some(n * scale)
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
    let recovered: String = target
        .recoveries
        .iter()
        .map(|r| format!("; recovered after {:.1} s at {}", r.after_s, r.level))
        .collect();
    match &target.died {
        Some(d) if d.level == 0 => format!("{}: {}", d.how.words(), head(&d.detail)),
        Some(d) => format!("{held}{recovered}; {} at {}", d.how.words(), d.level),
        None => format!("{held}{recovered}; alive to the end"),
    }
}

/// What a target held idle, beside its cap: `1.9 MiB (4 % of the cap)`,
/// `40.3 MiB (no cap on the whole process)`, or `-` when not measured.
pub fn idle(target: &TargetResult) -> String {
    let Some(bytes) = target.idle_bytes else { return "-".to_string() };
    let mib = bytes as f64 / 1024.0 / 1024.0;
    match target.cap_bytes {
        Some(cap) if cap > 0 => {
            format!("{mib:.1} MiB ({:.0} % of the cap)", bytes as f64 * 100.0 / cap as f64)
        }
        _ => format!("{mib:.1} MiB (no cap on the whole process)"),
    }
}

/// One sentence: what each target held idle, before any request, beside its
/// cap, from the lightest to the heaviest (`None`: none was measured).
fn idle_sentence(targets: &[TargetResult]) -> Option<String> {
    let mut measured: Vec<&TargetResult> = targets.iter().filter(|t| t.idle_bytes.is_some()).collect();
    if measured.is_empty() {
        return None;
    }
    measured.sort_by_key(|t| t.idle_bytes);
    let each: Vec<String> = measured.iter().map(|t| format!("{} {}", t.name, idle(t))).collect();
    Some(format!(
        "Idle, started and before the first level (its cgroup's charge less page cache, the kernel's share \
         included), each target held: {}. What a target holds idle is memory its requests cannot use.",
        each.join(", ")
    ))
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

    #[test]
    fn idle_memory_is_given_beside_the_cap_lightest_first() {
        let mib = 1024 * 1024;
        let mut lean = TargetResult::new("lean", crate::page::Family::Blocklab);
        lean.cap_bytes = Some(50 * mib);
        lean.idle_bytes = Some(2 * mib);
        let mut node = TargetResult::new("node", crate::page::Family::Node);
        node.idle_bytes = Some(40 * mib + mib / 2);
        let never = TargetResult::new("spring-web", crate::page::Family::Jvm);
        assert_eq!(idle(&lean), "2.0 MiB (4 % of the cap)");
        assert_eq!(idle(&node), "40.5 MiB (no cap on the whole process)");
        assert_eq!(idle(&never), "-");
        let sentence = idle_sentence(&[node.clone(), never.clone(), lean.clone()]).unwrap();
        assert!(
            sentence.contains(
                "held: lean 2.0 MiB (4 % of the cap), node 40.5 MiB (no cap on the whole process)."
            ),
            "{sentence}"
        );
        assert!(idle_sentence(&[never]).is_none());
    }

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
        let sentence = degraded("spring-web", &held(1000, 25_600.0, Some(221)), 25.6, 5.0, None);
        assert!(sentence.contains("≈ 5 × the 5 s delay"), "{sentence}");
        assert!(sentence.contains("P between 200 and 249"), "{sentence}");
        assert!(sentence.contains("221 OS threads"), "{sentence}");
        // 700 in four waves: 175 to 233 threads, 200 among them.
        assert!(
            degraded("pool", &held(700, 20_400.0, None), 20.4, 5.0, None).contains("P between 175 and 233")
        );
    }

    #[test]
    fn a_maximum_between_waves_is_not_read_as_a_pool() {
        let sentence = degraded("x", &held(2000, 12_500.0, None), 12.5, 5.0, None);
        assert!(sentence.contains("2.5 × the 5 s delay, not a whole number of waves"), "{sentence}");
        assert!(!sentence.contains("P between"), "{sentence}");
    }

    #[test]
    fn a_pool_the_threads_counted_contradict_is_not_written() {
        // The 2026-12-06 main job: 6 waves at 700 would mean P of 117 to 139,
        // but spring-web ran 220 threads (Tomcat's pool is 200).
        let sentence = degraded("spring-web", &held(700, 31_000.0, Some(220)), 31.0, 5.0, None);
        assert!(!sentence.contains("P between"), "{sentence}");
        assert!(sentence.contains("not as a pool would"), "{sentence}");
        assert!(sentence.contains("220 OS threads"), "{sentence}");
    }

    #[test]
    fn a_heap_at_its_limit_is_the_cause_written_not_a_pool() {
        let step = Step {
            peak_heap_bytes: Some(48 << 20),
            gc_pause_ms: Some(4_200.0),
            ..held(700, 31_000.0, Some(220))
        };
        let sentence = degraded("spring-web", &step, 31.0, 5.0, heap_limit("-Xms25M -Xmx50M"));
        assert!(sentence.contains("under memory pressure"), "{sentence}");
        assert!(sentence.contains("heap peaked at 48 of 50 MiB"), "{sentence}");
        assert!(sentence.contains("collector paused 4.2 s"), "{sentence}");
        assert!(!sentence.contains("P between"), "{sentence}");
    }

    #[test]
    fn a_target_heard_again_is_reported_recovered_not_dead() {
        use crate::studies::robustness::results::{Recovery, TargetResult};
        let at_5000 =
            Step { success_rate: Some(0.62), recovered_after_s: Some(7.5), ..held(5000, 9_000.0, None) };
        let at_10000 =
            Step { success_rate: Some(0.3), alive_after: Some(true), ..held(10_000, 9_000.0, None) };
        let target = TargetResult {
            steps: vec![held(2000, 5_900.0, None), at_5000, at_10000],
            recoveries: vec![Recovery { level: 5000, after_s: 7.5, detail: "timed out".to_string() }],
            highest_full_success: Some(2000),
            ..TargetResult::new("spring-webflux", crate::page::Family::Jvm)
        };
        let verdict = verdict(&target);
        assert_eq!(verdict, "100 % up to 2000; recovered after 7.5 s at 5000; alive to the end");
        assert!(!verdict.contains("dead") && !verdict.contains("no longer"), "{verdict}");
    }

    fn target(name: &str, steps: Vec<Step>) -> TargetResult {
        TargetResult { steps, ..TargetResult::new(name, crate::page::Family::Blocklab) }
    }

    fn ran(level: usize, ok: usize, refused: usize, timeout: usize, max_ms: f64) -> Step {
        use crate::studies::robustness::step::StepLoad;
        let outcomes = [("ok", ok), ("refused", refused), ("timeout", timeout)];
        Step {
            success_rate: Some(ok as f64 / level as f64),
            max_ms: Some(max_ms),
            alive_after: Some(true),
            load: Some(StepLoad {
                outcomes: outcomes.into_iter().filter(|(_, n)| *n > 0).collect(),
                refused_max_ms: if refused > 0 { 40.0 } else { 0.0 },
                ..StepLoad::default()
            }),
            ..Step::not_run(level, StepStatus::Run)
        }
    }

    #[test]
    fn a_slow_answer_is_the_targets_or_the_clients_by_when_it_reached_the_socket() {
        let slow = |level: usize, max_ms: f64, arrived: f64| {
            let mut s = ran(level, level, 0, 0, max_ms);
            s.load.as_mut().unwrap().slowest_arrived_ms = Some(arrived);
            s
        };
        // netty: its answers left late; the client read them at once.
        let netty = target("netty", vec![slow(5000, 5300.0, 5290.0), slow(18_000, 6251.0, 6190.0)]);
        assert_eq!(
            where_the_time_went(&netty, 5000).unwrap(),
            "Where netty's slowest answers went past 5500 ms: at 18000, 6251 ms from the send, 6190 of them \
             before the answer reached the client's socket and 61 after, unread. The time past the 5000 ms delay \
             was the target's (and the loopback's), not the client's."
        );
        // lean: on time at the socket, read a second late at 15,000.
        let lean = target("lean", vec![slow(15_000, 6000.0, 5040.0)]);
        assert!(
            where_the_time_went(&lean, 5000).unwrap().ends_with(
                "was the client's (answers that had arrived waited unread in its sockets), not the target's."
            ),
            "{:?}",
            where_the_time_went(&lean, 5000)
        );
        // Both kinds, and a level under 100 % or within the limit says nothing.
        let both = target("both", vec![slow(10_000, 6000.0, 5040.0), slow(18_000, 6000.0, 5990.0)]);
        assert!(
            where_the_time_went(&both, 5000)
                .unwrap()
                .ends_with("was the target's at 18000 and the client's at 10000.")
        );
        let mut partial = slow(25_000, 7000.0, 5000.0);
        partial.success_rate = Some(0.9);
        assert_eq!(where_the_time_went(&target("x", vec![partial, slow(1000, 5400.0, 5399.0)]), 5000), None);
    }

    #[test]
    fn held_and_survived_are_read_from_the_steps() {
        use crate::studies::robustness::results::Death;
        // lean: held 25,000, refused what did not fit at 50,000, alive to the end.
        let lean = target(
            "lean",
            vec![
                ran(25_000, 25_000, 0, 0, 5_070.0),
                Step { workers: Some(2), cap_holds: Some(31_500), ..ran(50_000, 31_000, 19_000, 0, 5_400.0) },
            ],
        );
        // go: 100 % at 2000 but too slow to count as held at 5000; OOM-killed at 10,000.
        let mut go = target(
            "go",
            vec![
                ran(2000, 2000, 0, 0, 5_200.0),
                ran(5000, 5000, 0, 0, 7_000.0),
                Step { alive_after: Some(false), ..ran(10_000, 3000, 0, 7000, 9_000.0) },
                Step::not_run(20_000, StepStatus::NotRunDown),
            ],
        );
        go.died = Some(Death {
            level: 10_000,
            how: DeathKind::OomKilled,
            detail: String::new(),
            answered_again: Some(false),
        });
        // netty: no admission control, its descriptors stop it above 18,000.
        let mut netty = target(
            "netty",
            vec![ran(18_000, 18_000, 0, 0, 5_300.0), Step::not_run(25_000, StepStatus::NotRunLimit)],
        );
        netty.descriptor_limit = Some(20_000);
        let sentences = held_and_survived(&[lean, go, netty], 5000);
        assert_eq!(
            sentences[0],
            "lean: held 25000 (100 %, the slowest answer 5070 ms, within 5500 ms); survived 50000 (the sweep's last level); past 25000, \
             at 50000 (2 workers: its admission budget holds about 31500 requests): 31000 served, 19000 refused (each within 40 ms of its send), 0 timed out."
        );
        assert_eq!(
            sentences[1],
            "go: held 2000 (100 %, the slowest answer 5200 ms, within 5500 ms), and answered every request up \
             to 5000 but slower (the slowest 7000 ms); survived 5000; past 2000, at 5000: 5000 served, 0 \
             refused, 0 timed out; at 10000: 3000 served, 0 refused, 7000 timed out; then it was OOM-killed at 10000."
        );
        assert_eq!(
            sentences[2],
            "netty: held 18000 (100 %, the slowest answer 5300 ms, within 5500 ms); survived 18000; 25000 and above not run: over its \
             20000 descriptors, with no admission control to refuse the rest."
        );
    }

    #[test]
    fn heap_limits_are_read_from_jvm_options() {
        assert_eq!(heap_limit("-Xms25M -Xmx50M"), Some(50 << 20));
        assert_eq!(heap_limit("-Xmx1g"), Some(1 << 30));
        assert_eq!(heap_limit("-Xms25M"), None);
    }
}
