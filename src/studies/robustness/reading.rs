//! The reading of a sweep, computed from its data: one sentence per target
//! (the level it held, the level it answered in full, the level it
//! survived, what happened past them and why), then what every target took
//! idle; and the words every output shares (a target's verdict, a step's
//! failures). The per-level figures are the per-level tables', not the
//! reading's.
//!
//! One word for one meaning: a level is *held* when every request was
//! answered 2xx and the slowest within [`held_max_ms`] ([`held`]); a level
//! whose every request was answered, however late, is *answered in full*
//! ("answered all of N", `highest_full_success`).

use super::results::{DeathKind, Step, StepStatus, SweepResults, TargetResult};
use super::step::Outcome;

/// Sentences that explain the sweep: one per target, then what each took
/// idle and which targets' levels the descriptors left out.
pub fn reading(results: &SweepResults) -> Vec<String> {
    let mut out: Vec<String> = results.targets.iter().filter_map(|t| target_sentence(t, results)).collect();
    out.extend(idle_sentence(&results.targets));
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
             measure the limit, not the server. These targets were still alive: how far they go is not known \
             from this machine.",
            limited.join("; "),
            super::run::SPARE_DESCRIPTORS
        ));
    }
    out
}

/// One target in one sentence: the level it held, the highest it answered
/// in full and why that one was slow, its memory per request, the level it
/// survived, the highest level it ran past those, how it went down or came
/// back, the levels its descriptors left out, and whose the time past the
/// delay was. `None` for a target with no level run and no death.
pub fn target_sentence(t: &TargetResult, results: &SweepResults) -> Option<String> {
    let delay_ms = results.delay_ms;
    if let Some(d) = t.died.as_ref().filter(|d| d.how == DeathKind::DidNotStart) {
        return Some(format!("{} did not start: {}.", t.name, first_line(&d.detail)));
    }
    let run: Vec<&Step> = t.steps.iter().filter(|s| s.status == StepStatus::Run).collect();
    if run.is_empty() {
        return None;
    }
    let limit_ms = held_max_ms(delay_ms);
    let held = held(t, delay_ms);
    let mut sentence = match held {
        Some(s) => format!(
            "{}: held {} (100 %, the slowest answer {:.0} ms, within {limit_ms:.0} ms)",
            t.name,
            s.level,
            s.max_ms.unwrap_or(0.0)
        ),
        None => format!("{}: held no level (100 % with the slowest answer within {limit_ms:.0} ms)", t.name),
    };
    if let Some(kib) = t.per_request.as_ref().and_then(|p| p.process_kib) {
        sentence += &format!(", at about {kib:.1} KiB of memory per concurrent request");
    }
    let full = run.iter().rev().find(|s| s.success_rate == Some(1.0)).copied();
    match full {
        Some(f) if held.is_none_or(|h| f.level > h.level) => {
            let heap_limit = heap_limit(&results.jvm_opts).filter(|_| f.peak_heap_bytes.is_some());
            sentence +=
                &format!(", and answered all of {} but slower: {}", f.level, slower(f, delay_ms, heap_limit));
        }
        Some(_) => {}
        None => sentence += ", and answered all of no level",
    }
    let last = t.steps.last().map(|s| s.level);
    sentence += &match survived(t) {
        Some(s) if Some(s.level) == last => format!("; survived {} (the sweep's last level)", s.level),
        Some(s) => format!("; survived {}", s.level),
        None => "; survived no level".to_string(),
    };
    let above = full.or(held).map_or(0, |s| s.level);
    if let Some(top) = run.iter().rev().find(|s| s.level > above) {
        sentence += &format!("; its highest level run, at {}: {}", top.level, outcomes(top));
    }
    if let Some(d) = &t.died {
        sentence += &format!("; {}", death(t, d, results));
    }
    for r in &t.recoveries {
        let later = if results.levels.iter().any(|l| *l > r.level) {
            "so its later levels ran"
        } else {
            "at the sweep's last level"
        };
        sentence += &format!(
            "; it stopped answering /test within 2 s after {} ({}) and answered again {:.1} s after the level, \
             {later}",
            r.level,
            first_line(&r.detail),
            r.after_s
        );
    }
    if let (None, Some(first)) = (&t.died, t.limited_levels().first()) {
        sentence += &format!(
            "; {} and above not run: over its {} descriptors, with no admission control to refuse the rest",
            first,
            t.descriptor_limit.map_or("-".to_string(), |l| l.to_string())
        );
    }
    if let Some(whose) = whose_time(t, delay_ms) {
        sentence += &format!("; {whose}");
    }
    Some(sentence + ".")
}

/// A level's requests by outcome, as the per-level table counts them:
/// served, refused (and how fast), timed out, failed otherwise; with the
/// worker processes lean ran and what its admission budget allows.
fn outcomes(s: &Step) -> String {
    let Some(load) = &s.load else {
        return format!("{:.1} % answered", s.success_rate.unwrap_or(0.0) * 100.0);
    };
    let other =
        s.level.saturating_sub(load.count(Outcome::Ok) + load.count(Outcome::Refused) + load.timed_out());
    let refused_within = if load.count(Outcome::Refused) > 0 {
        format!(" (each within {:.0} ms of its send)", load.refused_max_ms.ceil().max(1.0))
    } else {
        String::new()
    };
    // lean's workers sized for what its admission budget allows, not for every connection.
    let workers = match (s.workers, s.cap_holds) {
        (Some(w), Some(h)) => format!(" on {w} workers (its admission budget allows about {h} requests)"),
        _ => String::new(),
    };
    format!(
        "{} served, {} refused{refused_within}, {} timed out{}{workers}",
        load.count(Outcome::Ok),
        load.count(Outcome::Refused),
        load.timed_out(),
        if other > 0 { format!(", {other} failed otherwise") } else { String::new() }
    )
}

/// How a target went down, as a clause of its sentence.
fn death(t: &TargetResult, d: &super::results::Death, results: &SweepResults) -> String {
    let cap = t
        .cap_bytes
        .map_or("with no memory cap of its own".to_string(), |b| format!("under a {} MiB cap", b >> 20));
    match d.how {
        DeathKind::DidNotStart => format!("it did not start: {}", first_line(&d.detail)),
        DeathKind::OomKilled if d.detail.contains(super::run::PART_KILLED) => format!(
            "then, at {}, it lost part of itself {cap} ({}): the requests in those processes failed, and a lost \
             worker counts as a death, so its later levels were not run",
            d.level,
            first_line(&d.detail)
        ),
        DeathKind::OomKilled => format!(
            "then {} was OOM-killed at {} concurrent requests {cap}: the kernel killed the whole process, so every \
             request in flight failed and it never answered again",
            t.name, d.level
        ),
        DeathKind::Exited => format!("then it exited at {}: {}", d.level, first_line(&d.detail)),
        DeathKind::Unresponsive if d.detail.contains("OutOfMemoryError") => format!(
            "then, at {}, it ran out of heap (java.lang.OutOfMemoryError in its stderr{}) and stayed alive \
             without answering /test within 2 s{}",
            d.level,
            heap_limit(&results.jvm_opts).map_or(String::new(), |b| format!(", under -Xmx{}M", b >> 20)),
            match d.answered_again {
                Some(false) => ", nor while it was probed after",
                Some(true) => ", then answered again while it was probed",
                None => "",
            }
        ),
        DeathKind::Unresponsive => format!(
            "then, after {}, it was alive but no longer answered /test within 2 s ({})",
            d.level,
            first_line(&d.detail)
        ),
    }
}

/// Whose the time past the delay was, over `t`'s levels answered in full
/// but past [`held_max_ms`]: before the answer reached the client's socket
/// (the target's, with the loopback's few µs) or after, waiting unread (the
/// client's), from the kernel's receive timestamps (each level's figures are
/// in the per-level table). `None` when no such level has them.
pub fn whose_time(t: &TargetResult, delay_ms: u64) -> Option<String> {
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
    Some(format!("the time its slowest answers took past the {delay:.0} ms delay {whose}"))
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

/// Study 2's answer in a sentence or two, for the index page: who answered
/// all of the most concurrent slow requests under the cap (the ranking
/// counts every answer, however late, so each is given with its slowest
/// answer and the level it held beside it), and where each of the others
/// stopped coping. (Each level runs once: there is no spread to give, and
/// the sentence claims no more than the level.)
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
    // The targets that answered all of the highest level (and, among those,
    // died latest): every one of them when several tie.
    let key = |t: &TargetResult| {
        (t.highest_full_success, std::cmp::Reverse(t.died.as_ref().map_or(usize::MAX, |d| d.level)))
    };
    let top = results.targets.iter().filter(|t| t.highest_full_success.is_some()).map(key).max();
    let best: Vec<&TargetResult> =
        results.targets.iter().filter(|t| top.is_some() && Some(key(t)) == top).collect();
    if let Some(first) = best.first() {
        let level = first.highest_full_success.unwrap_or(0);
        let limit_ms = held_max_ms(results.delay_ms);
        let each: Vec<String> = best
            .iter()
            .map(|t| {
                let slowest = t
                    .steps
                    .iter()
                    .find(|s| s.level == level)
                    .and_then(|s| s.max_ms)
                    .map_or("?".to_string(), |m| format!("{:.2} s", m / 1e3));
                let held = held(t, results.delay_ms).map_or("no level".to_string(), |h| h.level.to_string());
                let name = if best.len() > 1 { format!("{}: ", t.name) } else { String::new() };
                format!("{name}the slowest answer {slowest}, held {held}")
            })
            .collect();
        let names: Vec<&str> = best.iter().map(|t| t.name.as_str()).collect();
        let who = match names.as_slice() {
            [one] => one.to_string(),
            _ => format!("{} and {}", names[..names.len() - 1].join(", "), names[names.len() - 1]),
        };
        let ended = match (&first.died, best.len()) {
            (None, 1) => "; it never died".to_string(),
            (None, _) => "; none of them died".to_string(),
            (Some(d), 1) => format!("; then it was {} at {}", d.how.words(), d.level),
            (Some(d), _) => format!("; then each went down at {}", d.level),
        };
        out.push(format!(
            "{who} answered all of {level} concurrent {:.0} s requests {cap}, the most of any target ({}; held: \
             every answer within {limit_ms:.0} ms){ended}.",
            results.delay_ms as f64 / 1e3,
            each.join("; "),
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

/// Why the slowest answer of a level answered in full took so long, as a
/// clause. Within 1.5 × the delay, only the figure. Beyond it: a server that
/// runs each request on a thread of a pool of P (Tomcat's 200, blocklab's
/// `pool`) answers N requests in ⌈N / P⌉ waves, each one delay long: max ≈
/// k × delay for a whole k. Read back, k waves at N mean a pool of between
/// ⌈N / k⌉ and ⌊(N − 1) / (k − 1)⌋ threads.
///
/// That inference is a claim, so it is checked before it is written: the
/// process's OS threads bound its pool from above (a pool of P runs at
/// least P threads, and a runtime's own threads are a few dozen, so more
/// than a quarter above the inferred range is not that pool), and a JVM
/// whose collector paused for a tenth of the step or more, or whose heap
/// stood within a tenth of its limit, was slowed by memory, not by a pool.
/// When the check fails, the figures are given and no pool is named.
fn slower(step: &Step, delay_ms: u64, heap_limit: Option<u64>) -> String {
    let max_ms = step.max_ms.unwrap_or(0.0);
    let delay = delay_ms as f64;
    if delay <= 0.0 || max_ms <= delay * 1.5 {
        return format!("the slowest answer {max_ms:.0} ms");
    }
    let (max_s, delay_s) = (max_ms / 1e3, delay / 1e3);
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
            "in waves, the slowest {max_s:.1} s ≈ {waves:.0} × the {delay_s} s delay, as a server keeping each \
             request on one of a pool of P threads answers (⌈N / P⌉ waves of one delay each; {waves:.0} waves at {} \
             means P between {low:.0} and {high:.0}){threads}",
            step.level
        )
    } else if let Some(memory) = memory {
        format!(
            "the slowest {max_s:.1} s, {ratio:.1} × the {delay_s} s delay, under memory pressure ({memory}){threads}"
        )
    } else if whole {
        format!(
            "the slowest {max_s:.1} s ≈ {waves:.0} × the {delay_s} s delay, yet not as a pool would: {waves:.0} \
             waves at {} would mean a pool of {low:.0} to {high:.0} threads, and it ran {} — requests waited \
             elsewhere (the accept queue, a starved core)",
            step.level,
            step.peak_threads.map_or("-".to_string(), |t| format!("{t} OS threads"))
        )
    } else {
        format!(
            "the slowest {max_s:.1} s, {ratio:.1} × the {delay_s} s delay, not a whole number of waves — requests \
             waited beyond the delay (for a thread, in the accept queue, behind a collector or a starved \
             core){threads}"
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

/// Where a target stopped coping, in words: the highest level it answered
/// in full with its slowest answer there, its recoveries, and how it ended.
pub fn verdict(target: &TargetResult) -> String {
    let full = match target.highest_full_success {
        Some(level) => {
            let slowest = target.steps.iter().find(|s| s.level == level).and_then(|s| s.max_ms);
            format!(
                "answered all of {level}{}",
                slowest.map_or(String::new(), |m| format!(" (the slowest in {:.2} s)", m / 1e3))
            )
        }
        None => "answered all of no level".to_string(),
    };
    let recovered: String = target
        .recoveries
        .iter()
        .map(|r| format!("; recovered after {:.1} s at {}", r.after_s, r.level))
        .collect();
    match &target.died {
        Some(d) if d.level == 0 => format!("{}: {}", d.how.words(), head(&d.detail)),
        Some(d) => format!("{full}{recovered}; {} at {}", d.how.words(), d.level),
        None => format!("{full}{recovered}; alive to the end"),
    }
}

/// What a target took idle, beside its cap: `1.9 MiB (4 % of the cap)`,
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

/// One sentence: what each target took idle, before any request, beside its
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
         included), each target took: {}. What a target takes idle is memory its requests cannot use.",
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
    use crate::studies::robustness::results::{Death, Recovery};

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
                "took: lean 2.0 MiB (4 % of the cap), node 40.5 MiB (no cap on the whole process)."
            ),
            "{sentence}"
        );
        assert!(idle_sentence(&[never]).is_none());
    }

    /// A level answered in full, its slowest answer `max_ms`.
    fn full(level: usize, max_ms: f64, threads: Option<u64>) -> Step {
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
        let clause = slower(&full(1000, 25_600.0, Some(221)), 5000, None);
        assert!(clause.contains("≈ 5 × the 5 s delay"), "{clause}");
        assert!(clause.contains("P between 200 and 249"), "{clause}");
        assert!(clause.contains("221 OS threads"), "{clause}");
        // 700 in four waves: 175 to 233 threads, 200 among them.
        assert!(slower(&full(700, 20_400.0, None), 5000, None).contains("P between 175 and 233"));
        // Within 1.5 × the delay, the figure alone: no cause is read into it.
        assert_eq!(slower(&full(700, 7_000.0, None), 5000, None), "the slowest answer 7000 ms");
    }

    #[test]
    fn a_maximum_between_waves_is_not_read_as_a_pool() {
        let clause = slower(&full(2000, 12_500.0, None), 5000, None);
        assert!(clause.contains("2.5 × the 5 s delay, not a whole number of waves"), "{clause}");
        assert!(!clause.contains("P between"), "{clause}");
    }

    #[test]
    fn a_pool_the_threads_counted_contradict_is_not_written() {
        // The 2026-12-06 main job: 6 waves at 700 would mean P of 117 to 139,
        // but spring-web ran 220 threads (Tomcat's pool is 200).
        let clause = slower(&full(700, 31_000.0, Some(220)), 5000, None);
        assert!(!clause.contains("P between"), "{clause}");
        assert!(clause.contains("not as a pool would"), "{clause}");
        assert!(clause.contains("220 OS threads"), "{clause}");
    }

    #[test]
    fn a_heap_at_its_limit_is_the_cause_written_not_a_pool() {
        let step = Step {
            peak_heap_bytes: Some(48 << 20),
            gc_pause_ms: Some(4_200.0),
            ..full(700, 31_000.0, Some(220))
        };
        let clause = slower(&step, 5000, heap_limit("-Xms25M -Xmx50M"));
        assert!(clause.contains("under memory pressure"), "{clause}");
        assert!(clause.contains("heap peaked at 48 of 50 MiB"), "{clause}");
        assert!(clause.contains("collector paused 4.2 s"), "{clause}");
        assert!(!clause.contains("P between"), "{clause}");
    }

    #[test]
    fn a_target_heard_again_is_reported_recovered_not_dead() {
        let at_5000 =
            Step { success_rate: Some(0.62), recovered_after_s: Some(7.5), ..full(5000, 9_000.0, None) };
        let at_10000 =
            Step { success_rate: Some(0.3), alive_after: Some(true), ..full(10_000, 9_000.0, None) };
        let target = TargetResult {
            steps: vec![full(2000, 5_900.0, None), at_5000, at_10000],
            recoveries: vec![Recovery { level: 5000, after_s: 7.5, detail: "timed out".to_string() }],
            highest_full_success: Some(2000),
            ..TargetResult::new("spring-webflux", crate::page::Family::Jvm)
        };
        let verdict = verdict(&target);
        assert_eq!(
            verdict,
            "answered all of 2000 (the slowest in 5.90 s); recovered after 7.5 s at 5000; alive to the end"
        );
        assert!(
            !verdict.contains("dead") && !verdict.contains("no longer") && !verdict.contains("held"),
            "{verdict}"
        );
    }

    fn target(name: &str, steps: Vec<Step>) -> TargetResult {
        let highest_full_success =
            steps.iter().filter(|s| s.success_rate == Some(1.0)).map(|s| s.level).max();
        TargetResult { steps, highest_full_success, ..TargetResult::new(name, crate::page::Family::Blocklab) }
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

    /// A sweep of `targets` at `levels`, a 5 s delay.
    fn sweep(targets: Vec<TargetResult>, levels: Vec<usize>) -> SweepResults {
        SweepResults {
            schema: "blocklab-sweep/2",
            started: "2026-12-07T00:00:00Z".to_string(),
            wall_s: 60.0,
            interrupted: false,
            quick: false,
            client: crate::studies::robustness::plan::Client::Blocklab,
            client_detail: "blocklab's own".to_string(),
            delay_ms: 5000,
            timeout_ms: 60_000,
            levels,
            placement: crate::harness::placement::Placement::split(&[0, 1], true),
            jvm_opts: "-Xms25M -Xmx50M".to_string(),
            allocator: "mimalloc".to_string(),
            warnings: Vec::new(),
            descriptor_limit: Some(20_000),
            machine: crate::harness::conditions::machine(),
            command: "blocklab sweep".to_string(),
            versions: Default::default(),
            targets,
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
            whose_time(&netty, 5000).unwrap(),
            "the time its slowest answers took past the 5000 ms delay was the target's (and the loopback's), not \
             the client's"
        );
        // lean: on time at the socket, read a second late at 15,000.
        let lean = target("lean", vec![slow(15_000, 6000.0, 5040.0)]);
        assert!(
            whose_time(&lean, 5000).unwrap().ends_with(
                "was the client's (answers that had arrived waited unread in its sockets), not the target's"
            ),
            "{:?}",
            whose_time(&lean, 5000)
        );
        // Both kinds, and a level under 100 % or within the limit says nothing.
        let both = target("both", vec![slow(10_000, 6000.0, 5040.0), slow(18_000, 6000.0, 5990.0)]);
        assert!(
            whose_time(&both, 5000).unwrap().ends_with("was the target's at 18000 and the client's at 10000")
        );
        let mut partial = slow(25_000, 7000.0, 5000.0);
        partial.success_rate = Some(0.9);
        assert_eq!(whose_time(&target("x", vec![partial, slow(1000, 5400.0, 5399.0)]), 5000), None);
        // In the target's one sentence, without the per-level figures (the table's).
        let results = sweep(vec![netty], vec![5000, 18_000]);
        let s = target_sentence(&results.targets[0], &results).unwrap();
        assert!(
            s.contains("; the time its slowest answers took past the 5000 ms delay was the target's"),
            "{s}"
        );
        assert!(!s.contains("6190"), "the per-level detail is the table's: {s}");
    }

    #[test]
    fn one_sentence_per_target_reads_held_answered_and_survived_from_the_steps() {
        // lean: held 25,000, refused what did not fit at 50,000, alive to the end.
        let lean = target(
            "lean",
            vec![
                ran(25_000, 25_000, 0, 0, 5_070.0),
                Step { workers: Some(2), cap_holds: Some(31_500), ..ran(50_000, 31_000, 19_000, 0, 5_400.0) },
            ],
        );
        // go: held 2000, answered all of 5000 but too slowly to count as held; OOM-killed at 10,000.
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
        // spring-web: ran out of heap at 2000 and never answered again.
        let mut web = target(
            "spring-web",
            vec![
                ran(1000, 1000, 0, 0, 25_600.0),
                Step { alive_after: Some(false), ..ran(2000, 0, 0, 2000, 0.0) },
            ],
        );
        web.died = Some(Death {
            level: 2000,
            how: DeathKind::Unresponsive,
            detail: "java.lang.OutOfMemoryError: Java heap space".to_string(),
            answered_again: Some(false),
        });
        let results =
            sweep(vec![lean, go, netty, web], vec![2000, 5000, 10_000, 18_000, 20_000, 25_000, 50_000]);
        let sentences: Vec<String> =
            results.targets.iter().map(|t| target_sentence(t, &results).unwrap()).collect();
        assert_eq!(
            sentences[0],
            "lean: held 25000 (100 %, the slowest answer 5070 ms, within 5500 ms); survived 50000 (the sweep's \
             last level); its highest level run, at 50000: 31000 served, 19000 refused (each within 40 ms of \
             its send), 0 timed out on 2 workers (its admission budget allows about 31500 requests)."
        );
        assert_eq!(
            sentences[1],
            "go: held 2000 (100 %, the slowest answer 5200 ms, within 5500 ms), and answered all of 5000 but \
             slower: the slowest answer 7000 ms; survived 5000; its highest level run, at 10000: 3000 served, 0 \
             refused, 7000 timed out; then go was OOM-killed at 10000 concurrent requests with no memory cap of its \
             own: the kernel killed the whole process, so every request in flight failed and it never answered \
             again."
        );
        assert_eq!(
            sentences[2],
            "netty: held 18000 (100 %, the slowest answer 5300 ms, within 5500 ms); survived 18000; 25000 and \
             above not run: over its 20000 descriptors, with no admission control to refuse the rest."
        );
        let web = &sentences[3];
        assert!(web.starts_with("spring-web: held no level (100 % with the slowest answer within 5500 ms), and answered all of 1000 but slower: in waves, the slowest 25.6 s ≈ 5 × the 5 s delay"), "{web}");
        assert!(web.contains("then, at 2000, it ran out of heap (java.lang.OutOfMemoryError in its stderr, under -Xmx50M) and stayed alive without answering /test within 2 s, nor while it was probed after"), "{web}");
        // No claim about the seed's Tomcat from a heap that ran out here.
        assert!(!web.contains("Tomcat") && !web.contains("the same way"), "{web}");
        // One sentence per target, and one for the levels the descriptors left out: none per level.
        assert_eq!(reading(&results).len(), 5, "{:#?}", reading(&results));
    }

    #[test]
    fn the_ranking_says_answered_all_of_with_the_slowest_answer_and_the_level_held() {
        // webflux answered all of 2000 but its slowest took 6 s: the most answered, yet held only 1000.
        let webflux =
            target("spring-webflux", vec![ran(1000, 1000, 0, 0, 5_200.0), ran(2000, 2000, 0, 0, 6_000.0)]);
        let web =
            target("spring-web", vec![ran(1000, 1000, 0, 0, 25_600.0), ran(2000, 10, 0, 1990, 59_000.0)]);
        let results = sweep(vec![webflux, web], vec![1000, 2000]);
        let answer = answer(&results);
        assert_eq!(
            answer[0],
            "spring-webflux answered all of 2000 concurrent 5 s requests uncapped, the most of any target (the \
             slowest answer 6.00 s, held 1000; held: every answer within 5500 ms); it never died."
        );
        assert!(!answer[0].contains("held the most"), "{}", answer[0]);
        assert_eq!(
            answer[1],
            "The others: spring-web answered all of 1000 (the slowest in 25.60 s); alive to the end."
        );
    }

    #[test]
    fn heap_limits_are_read_from_jvm_options() {
        assert_eq!(heap_limit("-Xms25M -Xmx50M"), Some(50 << 20));
        assert_eq!(heap_limit("-Xmx1g"), Some(1 << 30));
        assert_eq!(heap_limit("-Xms25M"), None);
    }
}
