//! The short reading of a bench run: which model won, by how much, and the
//! runtime figure that explains each result. Every sentence is computed from
//! the recorded figures; where a figure is missing the sentence is left out.

use super::results::{BLOCKLAB, BenchResults, RunRecord, RunStatus, SHARE_LIMIT, Spread, TestId, TestRecord};
use super::tables::{ms, pct, rps};
use super::test_id::HasTestId;
use crate::server::Endpoint;

fn best(results: &BenchResults, endpoint: Endpoint) -> Option<(&TestRecord, &RunRecord)> {
    let test = results.test(BLOCKLAB, endpoint.test_id()?)?;
    Some((test, test.best()?))
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

/// The reading, as plain sentences (one per bullet).
pub fn sentences(results: &BenchResults) -> Vec<String> {
    let mut out = Vec::new();
    let p = &results.conditions.parameters;
    let latency_ms = p.db_latency_ms;
    let workers = p.workers.unwrap_or(1).max(1) as f64;
    let w_label = |w: f64| {
        if w == 1.0 { "the one HTTP worker".to_string() } else { format!("each of the {w} HTTP workers") }
    };

    let data: Vec<(&TestRecord, &RunRecord)> = results
        .tests
        .iter()
        .filter(|t| t.target == BLOCKLAB && Some(t.test_id) != Endpoint::Test.test_id())
        .filter_map(|t| Some((t, t.best()?)))
        .collect();
    if let (Some(fast), Some(slow)) = (
        data.iter().max_by(|a, b| a.1.rps.total_cmp(&b.1.rps)),
        data.iter().min_by(|a, b| a.1.rps.total_cmp(&b.1.rps)),
    ) && slow.1.rps > 0.0
        && fast.0.test_id != slow.0.test_id
    {
        out.push(format!(
            "Fastest data endpoint: {} ({}) at {} req/s, {:.1}× the slowest, {} ({}) at {} req/s.",
            fast.0.api,
            fast.0.model,
            rps(fast.1.rps),
            fast.1.rps / slow.1.rps,
            slow.0.api,
            slow.0.model,
            rps(slow.1.rps)
        ));
    }
    if let Some((_, r)) = best(results, Endpoint::Test) {
        out.push(format!(
            "/test (no I/O) is the ceiling of the HTTP stack here: {} req/s, mean {} ms, HTTP workers {} busy, \
             {}{}.",
            rps(r.rps),
            ms(r.mean_ms),
            pct(r.server.http_busy_ratio),
            server_cpu(r.server_cpu_per_request_us),
            if r.server.http_busy_ratio < 0.85 {
                " — the workers had time to spare, so the load generator on its own core set this ceiling, not the \
                 server"
            } else {
                ""
            }
        ));
    }
    let embedded = p.db == "embedded";
    let ceiling = (embedded && latency_ms > 0.0).then(|| workers * 1000.0 / latency_ms);
    if let Some((_, r)) = best(results, Endpoint::GetData) {
        match ceiling {
            Some(c) => out.push(format!(
                "/getData: {} req/s against a ceiling of {} req/s ({} ÷ {} ms): {} is blocked for the whole \
                 simulated round trip, so at most {} read{} in flight at once while {} connections wait. Workers \
                 {} busy — {} — at {}.",
                rps(r.rps),
                rps(c),
                if workers == 1.0 { "1 worker".to_string() } else { format!("{workers} workers") },
                ms(latency_ms),
                w_label(workers),
                workers,
                if workers == 1.0 { " is" } else { "s are" },
                p.connections,
                pct(r.server.http_busy_ratio),
                if r.server.http_busy_ratio > 0.8 && r.rps < 1.2 * c {
                    "blocked in the sleep, not computing"
                } else {
                    "busy"
                },
                server_cpu(r.server_cpu_per_request_us)
            )),
            None if !embedded => out.push(format!(
                "/getData: {} req/s. {} waits on the socket for each database round trip (server-side mean {} ms), \
                 so at most {} read{} in flight at once while {} connections wait; workers {} busy.",
                rps(r.rps),
                capitalize(&w_label(workers)),
                ms(r.server.server_mean_ms),
                workers,
                if workers == 1.0 { " is" } else { "s are" },
                p.connections,
                pct(r.server.http_busy_ratio)
            )),
            None => out.push(format!(
                "/getData: {} req/s. With no simulated latency a read is a few microseconds of CPU, so blocking \
                 the worker costs little; run with --db-latency to see the difference.",
                rps(r.rps)
            )),
        }
    }
    if let (Some((_, a)), Some((_, b))) =
        (best(results, Endpoint::GetDataAsync), best(results, Endpoint::GetData))
    {
        out.push(format!(
            "/getDataAsync: {} req/s, {:.1}× /getData. The worker awaits the round trip and serves the other \
             connections meanwhile; workers {} busy, mean latency {} ms{}.",
            rps(a.rps),
            a.rps / b.rps.max(1e-9),
            pct(a.server.http_busy_ratio),
            ms(a.mean_ms),
            if embedded { format!(" for a {} ms round trip", ms(latency_ms)) } else { String::new() }
        ));
    }
    if let (Some((_, two)), Some((_, one))) =
        (best(results, Endpoint::GetDataAsync2), best(results, Endpoint::GetDataAsync))
    {
        out.push(format!(
            "/getDataAsync2 (two reads in sequence): {} req/s, {} of /getDataAsync; mean latency {} ms against {} ms.",
            rps(two.rps),
            pct(two.rps / one.rps.max(1e-9)),
            ms(two.mean_ms),
            ms(one.mean_ms)
        ));
    }
    if let Some((_, r)) = best(results, Endpoint::GetDataAkka) {
        let pool = ceiling.map(|_| 4.0 * 1000.0 / latency_ms);
        out.push(format!(
            "/getDataAkka: {} req/s. The handler blocks its HTTP worker until one of the 4 blocking actors replies, \
             so it is bound like /getData{}; at most {} job{} waited in the actor pool's mailbox (the blocked HTTP \
             workers cannot send more) and the actor threads were {} busy.",
            rps(r.rps),
            pool.map_or(String::new(), |p| format!(" ({} in flight at most; the 4 actors alone could do {} req/s)", workers, rps(p))),
            r.server.actor_mailbox_max,
            if r.server.actor_mailbox_max == 1 { "" } else { "s" },
            pct(r.server.actor_busy_ratio)
        ));
    }
    if let Some((_, r)) = best(results, Endpoint::GetDataAkkaAsync) {
        out.push(format!(
            "/getDataAkkaAsync: {} req/s. The actor only starts each read and moves on: up to {} reads were in flight \
             at once, and at most {} messages waited in its mailbox.",
            rps(r.rps),
            r.server.async_reads_in_flight_max,
            r.server.async_mailbox_max
        ));
    }
    if let (Some((_, two)), Some((_, one))) =
        (best(results, Endpoint::GetDataAkkaAsync2), best(results, Endpoint::GetDataAkkaAsync))
    {
        out.push(format!(
            "/getDataAkkaAsync2 (two asks in sequence): {} req/s, {} of /getDataAkkaAsync.",
            rps(two.rps),
            pct(two.rps / one.rps.max(1e-9))
        ));
    }
    if let Some((_, r)) = best(results, Endpoint::GetDataSpawnBlocking) {
        let vs_async = best(results, Endpoint::GetDataAsync).map_or(String::new(), |(_, a)| {
            format!(", against {} for /getDataAsync", server_cpu(a.server_cpu_per_request_us))
        });
        out.push(format!(
            "/getDataSpawnBlocking (the idiomatic fix): {} req/s. Each read occupies a blocking-pool thread instead of a \
             worker; the pool grew to {} threads, at {}{}.",
            rps(r.rps),
            r.server.blocking_threads_max,
            server_cpu(r.server_cpu_per_request_us),
            vs_async
        ));
    }
    let row = |e: Endpoint| results.normalized.iter().find(|n| Some(n.test_id) == e.test_id());
    if let (Some(b), Some(a)) = (row(Endpoint::GetData), row(Endpoint::GetDataAsync))
        && let (Some(sb), Some(bb), Some(sa), Some(ba)) = (b.seed, b.blocklab, a.seed, a.blocklab)
    {
        out.push(format!(
            "Against the seed, as fractions of /test (absolute numbers from different machines do not compare): \
             Play's /getData kept {} and /getDataAsync {}; here they keep {} and {}.",
            pct(sb),
            pct(sa),
            pct(bb),
            pct(ba)
        ));
    }
    let failed: u64 = results.tests.iter().flat_map(|t| &t.runs).map(|r| r.error_total).sum();
    if failed > 0 {
        out.push(format!("{failed} requests failed without a response (see the per-run table for where)."));
    }
    out.extend(side_by_side(results));
    out.extend(super::pools::sentences(results));
    out.extend(stall_sentences(results));
    out.extend(fault_sentences(results));
    for t in results.tests.iter().filter(|t| !matches!(t.status, RunStatus::Ok | RunStatus::NotServed)) {
        out.push(format!(
            "{} Test ID {} {} {}: {}",
            t.target,
            t.test_id,
            t.api,
            t.status,
            t.failure.as_deref().unwrap_or("")
        ));
    }
    out
}

/// The sentences that compare the targets on one database: which process
/// was saturated (server or database CPU per request), and the ratios.
fn side_by_side(results: &BenchResults) -> Vec<String> {
    let mut out = Vec::new();
    let targets = results.target_names();
    let c = &results.conditions;
    out.extend(c.warm_up.as_ref().map(|w| warm_up_sentence(&c.database_name, w)));
    out.extend(protocol_sentence(results));
    out.extend(ceiling_sentences(results));
    if targets.len() < 2 {
        return out;
    }
    out.extend(blocking_side_by_side(results, &targets));
    for endpoint in [Endpoint::Test, Endpoint::GetDataAsync, Endpoint::GetDataAkkaAsync] {
        let Some(id) = endpoint.test_id() else { continue };
        let best = best_of_each(results, &targets, id);
        if best.len() < 2 {
            continue;
        }
        let parts: Vec<String> = best
            .iter()
            .map(|(t, r)| {
                format!(
                    "{t} {} req/s, p99 {} ms, {}{}{}",
                    rps(r.rps),
                    ms(r.p99_ms),
                    server_cpu(r.server_cpu_per_request_us),
                    r.db_cpu_per_request_us
                        .map_or(String::new(), |us| format!(", database {us:.0} µs per request")),
                    r.jvm.as_ref().map_or(String::new(), |j| format!(
                        " (its JVM: heap peak {:.0} MiB, {} collection{} pausing {:.0} ms in all, {:.1} % of the run)",
                        j.heap_peak_mib,
                        j.gc_collections,
                        if j.gc_collections == 1 { "" } else { "s" },
                        j.gc_pause_ms,
                        j.gc_pause_ms / 10.0 / r.duration_s.max(1e-9)
                    ))
                )
            })
            .collect();
        let (a, b) = (best[0].1, best[1].1);
        out.push(format!(
            "{}: {}; {} ÷ {} = {:.2} in requests/s{}, {} in server CPU per request.",
            endpoint.path(),
            parts.join("; "),
            best[0].0,
            best[1].0,
            if b.rps > 0.0 { a.rps / b.rps } else { 0.0 },
            compare(results, (best[0].0, best[1].0), id),
            if a.server_cpu_per_request_us > 0.0 && b.server_cpu_per_request_us > 0.0 {
                format!("{:.2}", a.server_cpu_per_request_us / b.server_cpu_per_request_us)
            } else {
                "not measurable".to_string()
            },
        ));
    }
    out
}

/// How the database was warmed before the matrix, from its windows: how
/// long, its CPU per read in each, how much cheaper a read became, and
/// whether it had settled; when the maximum ran out first, how much its
/// last windows still fell.
/// How the servers met the load (warmed alike or cold, the order of the
/// rounds), and how far each target's runs of one Test ID lay apart: a first
/// run far from the second is a server still warming.
fn protocol_sentence(results: &BenchResults) -> Option<String> {
    let p = results.conditions.protocol.as_ref()?;
    let how = if p.cold {
        "Each fresh server was measured at once, with no warm-up (--cold, the seed's protocol)".to_string()
    } else {
        // Per target, how long its warm-ups took, and on which Test IDs its rate was still rising.
        let per_target: Vec<String> = results
            .target_names()
            .into_iter()
            .filter_map(|target| {
                let warms: Vec<(TestId, &super::results::TargetWarm)> = results
                    .tests
                    .iter()
                    .filter(|t| t.target == target)
                    .filter_map(|t| Some((t.test_id, t.warm.as_ref()?)))
                    .collect();
                let lo = warms.iter().map(|(_, w)| w.seconds).reduce(f64::min)?;
                let hi = warms.iter().map(|(_, w)| w.seconds).fold(lo, f64::max);
                let rising: Vec<String> =
                    warms.iter().filter(|(_, w)| !w.settled).map(|(id, _)| id.to_string()).collect();
                Some(format!(
                    "{target} {}{}",
                    if hi - lo < 1.0 { format!("{hi:.0} s") } else { format!("{lo:.0}–{hi:.0} s") },
                    if rising.is_empty() {
                        String::new()
                    } else {
                        format!(" (still rising when it ran out on Test ID {})", rising.join(", "))
                    }
                ))
            })
            .collect();
        format!(
            "Each fresh server was warmed under the same uncounted load on its endpoint until its rate stopped \
             rising (at most {:.0} s, --warm): {}",
            p.target_warm_s,
            per_target.join(", ")
        )
    };
    let order = if p.order.len() > 1 && results.target_names().len() > 1 {
        format!(
            ", and the targets' runs were interleaved ({}){}",
            p.order.join("; "),
            if p.paused { ", the servers not measured paused" } else { "" }
        )
    } else {
        String::new()
    };
    // Per target, the Test ID whose runs lay furthest apart.
    let mut apart: Vec<String> = Vec::new();
    for target in results.target_names() {
        let widest = results
            .tests
            .iter()
            .filter(|t| t.target == target && t.status == RunStatus::Ok && t.runs.len() > 1)
            .filter_map(|t| {
                let (lo, hi) = t
                    .runs
                    .iter()
                    .map(|r| r.rps)
                    .fold((f64::MAX, 0.0f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
                (hi > 0.0).then(|| ((hi - lo) / hi, t.test_id))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((gap, id)) = widest {
            apart.push(format!("{target} {} (Test ID {id})", pct(gap)));
        }
    }
    let spread = if apart.is_empty() {
        String::new()
    } else {
        format!(
            ". The slowest run of one Test ID lay at most this far below its fastest: {}",
            apart.join(", ")
        )
    };
    Some(format!("{how}{order}{spread}."))
}

fn warm_up_sentence(database: &str, w: &super::results::WarmUp) -> String {
    let costs = &w.cpu_per_read_us;
    let list: Vec<String> = costs.iter().map(|u| format!("{u:.0}")).collect();
    let fell = match (costs.first(), costs.last()) {
        (Some(first), Some(last)) if costs.len() > 1 && *last > 0.0 && *first > *last => {
            format!(", a read {:.1}× cheaper at the end than at the start", first / last)
        }
        _ => String::new(),
    };
    let last: &[f64] = &costs[costs.len().saturating_sub(3)..];
    let mean = last.iter().sum::<f64>() / last.len().max(1) as f64;
    let spread = last.iter().map(|u| (u - mean).abs()).fold(0.0, f64::max) / mean.max(1e-9);
    let end = if w.settled {
        format!(
            ": warm, its last {} windows within {:.0} % of their mean",
            last.len(),
            (spread * 100.0).ceil()
        )
    } else {
        let how = match (last.first(), last.last()) {
            (Some(a), Some(b)) if last.len() > 1 && b < a => format!(
                "still falling: its last {} windows went from {a:.0} to {b:.0} µs, {:.0} % less",
                last.len(),
                (1.0 - b / a) * 100.0
            ),
            _ => {
                format!("its last {} windows still {:.0} % apart from their mean", last.len(), spread * 100.0)
            }
        };
        format!(
            ", and its maximum ({:.0} s, --db-warm) ran out with it {how}: every figure below may carry the \
             database's own change",
            w.max_s
        )
    };
    format!(
        "The database, {database}, was warmed under load for {:.0} s before the matrix (a database whose reads \
         are still getting cheaper favours whichever server runs later); its CPU per read in each window {} \
         µs{fell}{end}.",
        w.seconds,
        list.join(", ")
    )
}

/// The database's own ceiling for the read, once per client it was measured
/// with (before and after the matrix), what set each, and every non-blocking
/// database endpoint of every target as a share of its own driver's ceiling
/// (the higher of before and after). A share above [`SHARE_LIMIT`] means the
/// ceiling is wrong: it is reported as a defect of the measurement.
fn ceiling_sentences(results: &BenchResults) -> Vec<String> {
    let c = &results.conditions;
    let mut out = Vec::new();
    for ceiling in &c.ceilings {
        let Some(before) = &ceiling.before else {
            // The reason, when the record gives one beyond the fact.
            let why = ceiling.failure.as_deref().filter(|f| !f.is_empty() && *f != "not measured");
            out.push(format!(
                "The database's ceiling with {} was not measured{}.",
                ceiling.client,
                why.map_or(String::new(), |w| format!(": {w}"))
            ));
            continue;
        };
        let bracket = match (&ceiling.after, ceiling.drift()) {
            (Some(after), Some(drift)) => format!(
                "; {} reads/s again after the matrix ({:+.0} %; shares are taken against the higher)",
                rps(after.reads_per_s),
                drift * 100.0,
            ),
            _ => "; not measured again after the matrix".to_string(),
        };
        let used = ceiling.used().unwrap_or(before);
        let bound = match used.bound.as_deref() {
            Some("database") => " It was set by the database: its CPUs were busy.".to_string(),
            Some("client") => format!(
                " It was set by the client, not by the database: {} spent {} µs of CPU per read, so it is a \
                 lower bound of the database's own.",
                ceiling.client,
                used.client_cpu_per_read_us.map_or("?".to_string(), |u| format!("{u:.0}"))
            ),
            Some("neither") => {
                " Neither side's CPUs were saturated: the reads in flight and their latency set it."
                    .to_string()
            }
            _ => String::new(),
        };
        out.push(format!(
            "The database's ceiling for the read with {} ({}, on {}, where the servers run): {} reads/s before \
             the matrix, p99 {} ms, {} µs of the database's CPU per read{bracket}.{bound}",
            ceiling.client,
            before.client,
            before.cpus,
            rps(before.reads_per_s),
            ms(before.p99_ms),
            before.db_cpu_per_query_us.map_or("?".to_string(), |u| format!("{u:.0}")),
        ));
    }
    // Every non-blocking database endpoint of every target, as a share of
    // its own driver's ceiling: the highest said, and each one above the
    // limit reported as a defect of that ceiling, with what the database
    // spent per read under the target and under the ceiling's client.
    let mut highest: Option<(String, f64)> = None;
    let mut above = Vec::new();
    for endpoint in [
        Endpoint::GetDataAsync,
        Endpoint::GetDataAsync2,
        Endpoint::GetDataAkkaAsync,
        Endpoint::GetDataAkkaAsync2,
    ] {
        let Some(id) = endpoint.test_id() else { continue };
        let reads = super::results::reads_per_request(endpoint);
        for t in results.target_names() {
            let Some(r) = results.test(t, id).and_then(TestRecord::best) else { continue };
            let (Some(ceiling), Some(share)) = (c.ceiling_for(t), c.share(t, r.rps * reads)) else {
                continue;
            };
            let name = format!("{t} {}", endpoint.path());
            if highest.as_ref().is_none_or(|(_, h)| share > *h) {
                highest = Some((name.clone(), share));
            }
            if share <= SHARE_LIMIT {
                continue;
            }
            let under_target = r.db_cpu_per_request_us.map(|us| us / reads);
            let under_ceiling = ceiling.used().and_then(|u| u.db_cpu_per_query_us);
            let cost = match (under_target, under_ceiling) {
                (Some(t_us), Some(c_us)) if t_us < c_us * 0.9 => format!(
                    ", the database spending {t_us:.0} µs of CPU a read under {t} against {c_us:.0} µs under \
                     {}: that client costs the database more per read than {t}'s does",
                    ceiling.client
                ),
                (Some(t_us), Some(c_us)) => {
                    format!(
                        ", the database spending {t_us:.0} µs of CPU a read under {t} and {c_us:.0} µs under the ceiling's client"
                    )
                }
                _ => String::new(),
            };
            above.push(format!(
                "{name} read {} times a second against {}'s ceiling of {} ({share:.2}){cost}",
                rps(r.rps * reads),
                ceiling.client,
                rps(ceiling.reads_per_s().unwrap_or(0.0)),
            ));
        }
    }
    if let Some((name, share)) = highest {
        let against: Vec<String> = results
            .target_names()
            .iter()
            .map(|t| {
                match c.ceiling_client(t).filter(|_| c.ceiling_for(t).and_then(|x| x.reads_per_s()).is_some())
                {
                    Some(client) => format!("{t} against {client}'s"),
                    None => format!("{t} against none: its driver's ceiling was not measured"),
                }
            })
            .collect();
        out.push(format!(
            "Each target's reads per second are weighed against the ceiling of its own driver ({}; the table of \
             shares gives each endpoint's): the highest share, {name}, {share:.2}{}.",
            against.join(", "),
            if share <= SHARE_LIMIT { format!(", within {SHARE_LIMIT:.2}") } else { String::new() }
        ));
    }
    if !above.is_empty() {
        out.push(format!(
            "Defect: above the ceiling of their own driver by more than {:.0} %: {}. A server cannot read faster \
             than the database answers its own driver with no HTTP in front, so that ceiling was measured wrong, \
             and these shares are not figures of the server.",
            (SHARE_LIMIT - 1.0) * 100.0,
            above.join("; ")
        ));
    }
    out
}

/// The blocking endpoints (2 and 5) side by side, with why they differ: blocklab's
/// `/getData` blocks its one runtime worker (the anti-pattern the study shows), a
/// JVM peer's blocks one thread of a pool of many.
fn blocking_side_by_side(results: &BenchResults, targets: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for endpoint in [Endpoint::GetData, Endpoint::GetDataAkka] {
        let Some(id) = endpoint.test_id() else { continue };
        let best = best_of_each(results, targets, id);
        if best.len() < 2 {
            continue;
        }
        let parts: Vec<String> = best
            .iter()
            .map(|(t, r)| {
                let how = if *t == BLOCKLAB {
                    if endpoint == Endpoint::GetData {
                        "each read blocks the runtime worker that owns the connection, and every other connection \
                         on that worker waits behind it (the anti-pattern the study shows)"
                            .to_string()
                    } else {
                        "each request blocks its runtime worker until one of the 4 blocking actors replies".to_string()
                    }
                } else if r.server_threads_max == Some(1) && r.rps > 0.0 {
                    one_thread(r.rps, r.server_cpu_per_request_us)
                } else {
                    let threads = r.server_threads_max.map_or("? threads".to_string(), |n| {
                        format!("{n} thread{}", if n == 1 { "" } else { "s" })
                    });
                    format!(
                        "each read blocks one thread of a pool ({threads} in the process at its peak), and the \
                         pool's other threads go on"
                    )
                };
                format!("{t} {} req/s, p99 {} ms: {how}", rps(r.rps), ms(r.p99_ms))
            })
            .collect();
        out.push(format!("{} (blocking): {}.", endpoint.path(), parts.join("; ")));
    }
    out
}

/// Why a blocking endpoint served by a process of one thread ran at `rps`:
/// the reads were serialised on that thread, so each request took 1 ÷ the
/// rate of it, `cpu_us` on the CPU and the rest waiting for the database.
fn one_thread(rps: f64, cpu_us: f64) -> String {
    let each_us = 1e6 / rps;
    format!(
        "its process ran one thread at its peak, so each read blocked it and every other request waited: one \
         read at a time, {:.2} ms of the thread a request (1 ÷ the rate), {:.0} µs of it on the CPU and {:.0} µs \
         waiting for the database",
        each_us / 1e3,
        cpu_us,
        (each_us - cpu_us).max(0.0)
    )
}

/// Study 1's answer in a sentence or two, for the index page: what blocking
/// cost blocklab (its blocking `/getData` against its non-blocking
/// `/getDataAsync`), and how it stood beside the seed's app, each with the
/// range over its runs.
pub fn answer(results: &BenchResults) -> Vec<String> {
    let mut out = Vec::new();
    if results.conditions.parameters.quick {
        out.push(super::tables::first_look(results));
    }
    let range_of = |t: &str, e: Endpoint| results.test(t, e.test_id()?)?.range(|r| r.rps);
    let rate = |s: Spread| format!("{} req/s{}", rps(s.max), s.range_text(rps));
    if let (Some(blocking), Some(async_)) =
        (range_of(BLOCKLAB, Endpoint::GetData), range_of(BLOCKLAB, Endpoint::GetDataAsync))
    {
        let ratio = async_.max / blocking.max.max(1e-9);
        let verdict = if async_.runs < 2 || blocking.runs < 2 {
            "one run each, so no difference is claimed".to_string()
        } else if async_.min > blocking.max {
            format!("non-blocking was faster in every run, {ratio:.2}× at best")
        } else if async_.overlaps(&blocking) {
            "their runs overlap: no difference measured".to_string()
        } else {
            format!("blocking was faster in every run ({ratio:.2}×)")
        };
        out.push(format!(
            "blocklab on {}: the non-blocking /getDataAsync at {} against the blocking /getData at {}: {verdict}.",
            results.conditions.database_name.split(" (").next().unwrap_or(""),
            rate(async_),
            rate(blocking)
        ));
    }
    let targets = results.target_names();
    for peer in targets.iter().filter(|t| **t != BLOCKLAB) {
        let Some(id) = Endpoint::GetDataAsync.test_id() else { continue };
        let (Some(ours), Some(theirs)) = (
            results.test(BLOCKLAB, id).and_then(TestRecord::best),
            results.test(peer, id).and_then(TestRecord::best),
        ) else {
            continue;
        };
        out.push(format!(
            "Beside {peer}, /getDataAsync: blocklab ÷ {peer} = {:.2}{}.",
            ours.rps / theirs.rps.max(1e-9),
            compare(results, (BLOCKLAB, peer), id)
        ));
    }
    if let Some(sentence) = blocking_cost_per_target(results, &targets) {
        out.push(sentence);
    }
    // The stall, one sentence per target: how its endpoints came through,
    // each figure a median with its range when it ran more than one round.
    let groups = super::stall::by_endpoint(&results.stalls);
    for target in &targets {
        let mine: Vec<&super::stall::StallRounds<'_>> =
            groups.iter().filter(|g| g.first().target == *target).collect();
        let Some(first) = mine.first() else { continue };
        let each: Vec<String> = mine.iter().map(|g| stall_answer(g)).collect();
        out.push(format!(
            "{target} when the database stalled ({}): {}.",
            first.first().stall,
            each.join("; ")
        ));
    }
    out
}

/// One endpoint through the stall, for the index page: whether it survived,
/// when it recovered and how many requests failed, over its rounds.
fn stall_answer(g: &super::stall::StallRounds<'_>) -> String {
    let s = g.first();
    let whole = |v: f64| format!("{v:.0}");
    let failed = g.failed().map_or("?".to_string(), |f| f.text(whole));
    if g.rounds() > 1 {
        let n = g.rounds();
        return match (g.survived(), g.recovered()) {
            (alive, _) if alive < n => format!("{} survived {alive} of {n} rounds, {failed} failed", s.api),
            (_, Some(r)) => {
                format!(
                    "{} recovered {} s after it, {failed} failed (median and range of {n} rounds)",
                    s.api,
                    r.text(whole)
                )
            }
            (_, None) => format!(
                "{} recovered within the run in {} of {n} rounds, {failed} failed (median and range)",
                s.api,
                g.recovered_rounds()
            ),
        };
    }
    match s.recovered_after_s {
        _ if !s.survived => format!("{} did not survive", s.api),
        Some(after) => format!("{} recovered {after} s after it, {failed} failed", s.api),
        None => match s.recovered_in_spread_after_s {
            Some(after) => format!(
                "{} had not recovered by the run's end with its p99 within {:.0} % or {:.0} ms of before (a rule {} \
                 of its {} steady seconds met themselves), but was back within the steady seconds' own spread (p99 \
                 up to {:.1} ms) {after} s after it, {failed} failed",
                s.api,
                super::stall::P99_BACK * 100.0,
                super::stall::P99_BACK_MS,
                s.steady_back().0,
                s.steady_back().1,
                s.steady_p99_max_ms
            ),
            None => format!("{} had not recovered by the run's end, {failed} failed", s.api),
        },
    }
}

/// What blocking cost each target, in one sentence: its non-blocking
/// `/getDataAsync` against its blocking `/getData` (and, where it serves it,
/// its idiomatic fix, a thread pool for the blocking call: `/getDataSpawnBlocking`),
/// each ratio with its range over the runs. `None` with fewer than two targets
/// serving both.
fn blocking_cost_per_target(results: &BenchResults, targets: &[&str]) -> Option<String> {
    let spread = |t: &str, e: Endpoint| results.test(t, e.test_id()?)?.range(|r| r.rps);
    let each: Vec<String> = targets
        .iter()
        .filter_map(|t| {
            let blocking = spread(t, Endpoint::GetData)?;
            let async_ = spread(t, Endpoint::GetDataAsync)?;
            let fix = spread(t, Endpoint::GetDataSpawnBlocking).map_or(String::new(), |fix| {
                format!(
                    ", /getDataSpawnBlocking ÷ /getData = {:.2}{}",
                    fix.max / blocking.max.max(1e-9),
                    compare_spreads(("/getDataSpawnBlocking", fix), ("/getData", blocking))
                )
            });
            Some(format!(
                "{t} /getDataAsync ÷ /getData = {:.2}{}{fix}",
                async_.max / blocking.max.max(1e-9),
                compare_spreads(("/getDataAsync", async_), ("/getData", blocking))
            ))
        })
        .collect();
    (each.len() >= 2).then(|| format!("What blocking cost each server here, best runs: {}.", each.join("; ")))
}

/// The link's faults: one sentence per target, endpoint and fault, then,
/// per fault, every target's figures side by side where more than one met it.
fn fault_sentences(results: &BenchResults) -> Vec<String> {
    let mut out: Vec<String> = results.faults.iter().map(super::faults::sentence).collect();
    let mut kinds: Vec<&str> = results.faults.iter().map(|r| r.fault.as_str()).collect();
    kinds.dedup();
    for kind in kinds {
        let each: Vec<&super::faults::FaultRecord> =
            results.faults.iter().filter(|r| r.fault == kind).collect();
        if each.iter().map(|r| &r.target).collect::<std::collections::BTreeSet<_>>().len() < 2 {
            continue;
        }
        let parts: Vec<String> = each
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} of {} right, {} failed, the longest {:.0} ms, right again {}",
                    r.target,
                    r.api,
                    r.during.right,
                    r.during.total(),
                    r.during.total() - r.during.right - r.during.wrong,
                    r.longest_ms(),
                    match r.recovered_after_s {
                        _ if !r.survived => "never: it died".to_string(),
                        Some(s) => format!("{s:.1} s after"),
                        None => "not within the window".to_string(),
                    }
                )
            })
            .collect();
        out.push(format!("Under {kind}, side by side: {}.", parts.join("; ")));
    }
    out
}

/// The stall: one sentence per target and endpoint (its rounds' medians
/// and ranges), then, per endpoint, blocklab beside each peer, a difference
/// claimed only where their ranges over the rounds part.
fn stall_sentences(results: &BenchResults) -> Vec<String> {
    let groups = super::stall::by_endpoint(&results.stalls);
    let mut out: Vec<String> = groups.iter().map(super::stall::StallRounds::sentence).collect();
    out.extend(stall_bounds(results, &groups));
    for ours in groups.iter().filter(|g| g.first().target == BLOCKLAB) {
        for theirs in groups
            .iter()
            .filter(|g| g.first().target != BLOCKLAB && g.first().test_id == ours.first().test_id)
        {
            out.push(super::stall::comparison(ours, theirs));
        }
    }
    out
}

/// The stall against the bound each blocklab endpoint has: a non-blocking
/// read gives up after `--db-timeout`, so no request to a non-blocking
/// endpoint should wait longer than that per read plus a second from its
/// intended send; the blocking `/getData` and `/getDataAkka` queue behind
/// the worker a read blocks and have no such bound, which is said too. The
/// longest of every round is checked against it. Then the failures by kind, over
/// the rounds, for every target that failed any.
fn stall_bounds(results: &BenchResults, groups: &[super::stall::StallRounds<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    for g in groups.iter().filter(|g| g.first().target == BLOCKLAB) {
        let Some(longest) = g.records.iter().map(|r| r.longest_ms).filter(|ms| *ms > 0.0).reduce(f64::max)
        else {
            continue;
        };
        let api = &g.first().api;
        let endpoint = Endpoint::from_path(api);
        let reads = super::results::reads_per_request(endpoint);
        let of_rounds = if g.rounds() > 1 { format!(" of its {} rounds", g.rounds()) } else { String::new() };
        match results.conditions.parameters.db_timeout_ms {
            _ if matches!(endpoint, Endpoint::GetData | Endpoint::GetDataAkka) => out.push(format!(
                "blocklab {api}: its requests queue behind the worker a read blocks, so --db-timeout bounds each \
                 read but not the wait: the longest{of_rounds} took {longest:.0} ms."
            )),
            Some(timeout) if reads > 0.0 => {
                let bound = reads * timeout + 1000.0;
                let per = if reads > 1.0 { format!("{reads:.0} × --db-timeout") } else { "--db-timeout".to_string() };
                out.push(if longest <= bound {
                    format!(
                        "blocklab {api}: no request waited longer than {per} + 1 s ({bound:.0} ms) from its intended \
                         send: the longest{of_rounds} took {longest:.0} ms."
                    )
                } else {
                    format!(
                        "blocklab {api}: a request waited {longest:.0} ms from its intended send, past {per} + 1 s \
                         ({bound:.0} ms): not the read's wait (a read gives up at --db-timeout) but the server's \
                         or the machine's."
                    )
                });
            }
            _ => {}
        }
    }
    for g in groups {
        let mut kinds: std::collections::BTreeMap<&str, u64> = Default::default();
        for (kind, n) in g.records.iter().flat_map(|r| &r.failures) {
            *kinds.entry(kind).or_default() += n;
        }
        let text: Vec<String> =
            kinds.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{n} {k}")).collect();
        if !text.is_empty() {
            let over =
                if g.rounds() > 1 { format!(" over its {} rounds", g.rounds()) } else { String::new() };
            out.push(format!(
                "{} {} failed by kind{over}: {}.",
                g.first().target,
                g.first().api,
                text.join(", ")
            ));
        }
    }
    let mut unseen: Vec<&str> = results
        .stalls
        .iter()
        .filter(|s| s.peak_in_flight.is_none() && s.peak_waiting.is_none() && s.peak_threads.is_some())
        .map(|s| s.target.as_str())
        .collect();
    unseen.sort_unstable();
    unseen.dedup();
    for target in unseen {
        out.push(format!(
            "{target} gives no figure for its requests in flight or the reads waiting for its driver's pool (it \
             exposes no metrics endpoint; its JVM's would need an agent): only its threads, from /proc."
        ));
    }
    out
}

/// How two targets' requests per second compare over their runs: the range
/// of the ratio, and "faster" only when their ranges do not overlap.
fn compare(results: &BenchResults, (a, b): (&str, &str), id: TestId) -> String {
    let spread = |t: &str| results.test(t, id).and_then(|t| t.range(|r| r.rps));
    let (Some(sa), Some(sb)) = (spread(a), spread(b)) else { return String::new() };
    compare_spreads((a, sa), (b, sb))
}

/// Two rates' ratio with its range, and whether the runs say one is faster.
fn compare_spreads((a, sa): (&str, Spread), (b, sb): (&str, Spread)) -> String {
    let range = Spread::ratio(sa, sb).map_or(String::new(), |r| r.range_text(|v| format!("{v:.2}")));
    if sa.runs < 2 || sb.runs < 2 {
        format!("{range} (one run each: no spread, so no difference can be claimed)")
    } else if sa.overlaps(&sb) {
        format!(
            "{range}: their runs overlap ({}–{} and {}–{} req/s), so no difference measured",
            rps(sa.min),
            rps(sa.max),
            rps(sb.min),
            rps(sb.max)
        )
    } else if sa.min > sb.max {
        format!("{range}: {a} is faster in every run")
    } else {
        format!("{range}: {b} is faster in every run")
    }
}

/// Each target's best run of Test ID `id`, for the targets that have one.
fn best_of_each<'a>(
    results: &'a BenchResults,
    targets: &[&'a str],
    id: TestId,
) -> Vec<(&'a str, &'a RunRecord)> {
    targets.iter().filter_map(|t| Some((*t, results.test(t, id).and_then(TestRecord::best)?))).collect()
}

/// "7.7 µs of server CPU per request", or, when the run was too short for the
/// kernel's CPU clock to count any (it counts in 10 ms ticks), that it could
/// not be measured: never a 0 that reads as free.
fn server_cpu(us: f64) -> String {
    if us > 0.0 {
        format!("{us:.1} µs of server CPU per request")
    } else {
        "server CPU per request not measurable (under one tick of the kernel's CPU clock, 10 ms, over the whole run)"
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_thread_server_spends_one_over_its_rate_on_each_request() {
        // 488 req/s on one thread: 2.05 ms a request, 990 µs of it CPU.
        let s = one_thread(488.0, 990.0);
        assert!(s.contains("one read at a time, 2.05 ms of the thread a request"), "{s}");
        assert!(s.contains("990 µs of it on the CPU and 1059 µs waiting for the database"), "{s}");
        // CPU measured above the time a request had (a coarse clock): no negative wait.
        assert!(one_thread(1000.0, 1200.0).contains("and 0 µs waiting"));
    }

    #[test]
    fn a_server_cpu_below_the_clock_tick_is_not_measurable_never_zero() {
        assert_eq!(server_cpu(7.66), "7.7 µs of server CPU per request");
        let none = server_cpu(0.0);
        assert!(none.starts_with("server CPU per request not measurable") && !none.contains("0.0"), "{none}");
    }

    #[test]
    fn the_runs_connections_are_named_never_the_seeds_200() {
        let results = crate::studies::execution_models::tables::sample::results(&["blocklab", "play"], 64);
        let text = sentences(&results).join("\n");
        assert!(!text.contains("200 connections"), "{text}");
        assert!(text.contains("at once while 64 connections wait"), "{text}");
    }

    #[test]
    fn the_warm_up_is_told_from_its_windows_not_from_a_literal() {
        let results = crate::studies::execution_models::tables::sample::results(&["blocklab"], 200);
        let text = sentences(&results).join("\n");
        assert!(!text.contains("about 3× cheaper") && !text.contains("~2 minutes"), "{text}");
        assert!(text.contains("its CPU per read in each window 5727, 900, 420, 330, 313 µs"), "{text}");
        assert!(text.contains("a read 18.3× cheaper at the end than at the start"), "{text}");
        // The maximum ran out: how much the last three windows still fell.
        assert!(
            text.contains("still falling: its last 3 windows went from 420 to 313 µs, 25 % less"),
            "{text}"
        );
    }

    #[test]
    fn a_share_above_the_limit_is_a_defect_of_the_ceiling_with_its_figures() {
        // play reads 2929 a second through the Java driver, whose ceiling is 2653:
        // 1.10 of it, at 250 µs of the database's CPU a read against 384.
        let results = crate::studies::execution_models::tables::sample::results(&["blocklab", "play"], 200);
        let text = sentences(&results).join("\n");
        let defect = text.lines().find(|l| l.starts_with("Defect:")).expect(&text);
        assert!(
            defect.contains(
                "play /getDataAsync read 2929 times a second against the Java driver's ceiling of 2653 (1.10)"
            ),
            "{defect}"
        );
        assert!(
            defect.contains("250 µs of CPU a read under play against 384 µs under the Java driver"),
            "{defect}"
        );
        assert!(
            !defect.contains("blocklab /getDataAsync"),
            "blocklab's own client's ceiling is 3950: {defect}"
        );
        assert!(!text.contains("drifted"), "{text}");
    }
}
