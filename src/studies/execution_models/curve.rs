//! The round-trip curve (`bench --db-rtt 0,2,10ms`): each target's rate
//! and p99 at each round trip to the database, beside the rate Little's law
//! allows it there (requests in flight = rate × time per request), and the
//! limit that sets that bound.
//!
//! The bound of a point is the least of:
//! - the reads the endpoint can hold in flight (its HTTP workers, its one
//!   event loop, its connection pool: what holds a read while it waits) ÷
//!   the time one read holds it, the round trip measured on the link plus
//!   the query's own time inside PostgreSQL (`pg_stat_statements`), ÷ the
//!   reads per request;
//! - the load's connections (`-c`), each with one request in flight, the same way;
//! - the server's CPUs ÷ its CPU time per request.
//!
//! A measured rate above its bound means the model is wrong, and the
//! reading says so; where a pool sets the bound, the reading gives the pool
//! that would keep the loopback rate, and the command that measures it.

use plotters::prelude::*;

use super::charts::Chart;
use super::link::{LinkRecord, fmt_ms};
use super::pools::{Limit, blocklab_limit, endpoint_of_id, peer_limit};
use super::results::{BLOCKLAB, BenchResults, CurveStep, RunRecord, TestRecord, reads_per_request};
use super::tables::{Table, ms, rps};
use super::test_id::TestId;
use crate::page::{DrawError, canvas, color, draw_legend};
use crate::server::Endpoint;

/// A measured rate more than this far above its bound is flagged.
pub const ABOVE_BOUND: f64 = 1.10;

/// A rate at this share of its bound or more: the bound's limit set it.
pub const AT_BOUND: f64 = 0.8;

/// What set a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundKind {
    /// A connection pool: more connections would raise it.
    Pool,
    /// Threads, an event loop or actors: what the stack holds a read with.
    Holders,
    /// The load's connections.
    Client,
    /// The server's CPU.
    Cpu,
}

/// The rate Little's law allows one point, and what sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// Requests per second.
    pub rps: f64,
    /// What sets it, in words, with its figures.
    pub by: String,
    /// Its kind.
    pub kind: BoundKind,
    /// The reads in flight it allows (for a concurrency limit).
    pub holders: Option<f64>,
}

/// One target's endpoint at one round trip.
#[derive(Debug, Clone)]
pub struct Point<'a> {
    /// The round trip asked (ms).
    pub rtt_ms: f64,
    /// The round trip the link measured (ms).
    pub measured_rtt_ms: f64,
    /// Its record.
    pub test: &'a TestRecord,
    /// Its best run.
    pub best: &'a RunRecord,
    /// Its bound, when one can be computed.
    pub bound: Option<Bound>,
}

impl Point<'_> {
    /// Whether the rate lies above its bound by more than [`ABOVE_BOUND`].
    pub fn above_bound(&self) -> bool {
        self.bound.as_ref().is_some_and(|b| self.best.rps > ABOVE_BOUND * b.rps)
    }
}

/// The round trip a read through the link takes at least (ms): its fastest
/// probe read less the median read straight to the database (never below 0).
/// The least, not the median: a bound must not be set too low.
pub fn least_rtt_ms(link: &LinkRecord) -> f64 {
    (link.least_read_ms() - link.direct_read_ms).max(0.0)
}

/// Every point of the curve, round trip by round trip.
pub fn points(results: &BenchResults) -> Vec<Point<'_>> {
    results
        .curve
        .iter()
        .flat_map(|step| {
            step.tests.iter().filter_map(move |test| {
                let best = test.best()?;
                Some(Point {
                    rtt_ms: step.rtt_ms,
                    measured_rtt_ms: least_rtt_ms(&step.link),
                    test,
                    best,
                    bound: bound(results, step, test, best),
                })
            })
        })
        .collect()
}

/// The endpoint's own limit on reads in flight, and whether it is a pool.
fn endpoint_limit(results: &BenchResults, target: &str, endpoint: Endpoint) -> Option<(Limit, bool)> {
    if target == BLOCKLAB {
        let limit = blocklab_limit(&results.conditions.parameters, endpoint)?;
        let pool = !matches!(endpoint, Endpoint::GetData | Endpoint::GetDataAkka);
        return Some((limit, pool));
    }
    let pool =
        results.conditions.db_limits.get(target).and_then(|l| l.get(endpoint.path())).is_none_or(|l| l.pool);
    Some((peer_limit(results, target, endpoint)?, pool))
}

/// The least of the point's bounds (see the module's text).
fn bound(results: &BenchResults, step: &CurveStep, test: &TestRecord, best: &RunRecord) -> Option<Bound> {
    let endpoint = endpoint_of_id(test.test_id)?;
    let mut bounds = Vec::new();
    let cpus = results.conditions.placement.server_cpus.len().max(1) as f64;
    if best.server_cpu_per_request_us > 0.0 {
        bounds.push(Bound {
            rps: cpus * 1e6 / best.server_cpu_per_request_us,
            by: format!("CPU: {cpus:.0} CPU ÷ {:.0} µs a request", best.server_cpu_per_request_us),
            kind: BoundKind::Cpu,
            holders: None,
        });
    }
    let reads = reads_per_request(endpoint);
    if reads > 0.0 {
        let rtt = least_rtt_ms(&step.link);
        let query = best.db_query_ms.unwrap_or(0.0);
        let read_ms = rtt + query;
        if read_ms > 0.0 {
            let per_read = format!("{} + {} ms a read", ms(rtt), ms(query));
            let twice = if reads > 1.0 { format!(", {reads:.0} reads a request") } else { String::new() };
            let of = |n: f64| n * 1000.0 / (reads * read_ms);
            if let Some((limit, pool)) = endpoint_limit(results, &test.target, endpoint) {
                bounds.push(Bound {
                    rps: of(limit.reads),
                    by: format!("{} ÷ ({per_read}{twice})", limit.what),
                    kind: if pool { BoundKind::Pool } else { BoundKind::Holders },
                    holders: Some(limit.reads),
                });
            }
            let c = results.conditions.parameters.connections as f64;
            bounds.push(Bound {
                rps: of(c),
                by: format!("the load's {c:.0} connections ÷ ({per_read}{twice})"),
                kind: BoundKind::Client,
                holders: Some(c),
            });
        }
    }
    bounds.into_iter().min_by(|a, b| a.rps.total_cmp(&b.rps))
}

/// The curve as a table: target × endpoint × round trip.
pub fn table(results: &BenchResults) -> Option<Table> {
    let points = points(results);
    if points.is_empty() {
        return None;
    }
    let mut rows: Vec<(usize, TestId, f64, Vec<String>)> = points
        .iter()
        .map(|p| {
            let b = p.best;
            let rank = results.target_names().iter().position(|t| *t == p.test.target).unwrap_or(usize::MAX);
            let bound = p.bound.as_ref();
            let mut rate = rps(b.rps);
            if p.above_bound() {
                rate += " (above its bound)";
            }
            let row = vec![
                p.test.target.clone(),
                format!("{} {}", p.test.test_id, p.test.api),
                format!("{} ({})", fmt_ms(p.rtt_ms), ms(p.measured_rtt_ms)),
                rate,
                ms(b.p99_ms),
                b.server_threads_max.map_or("–".to_string(), |t| t.to_string()),
                b.db_connections_max.map_or("–".to_string(), |c| c.to_string()),
                format!("{:.0}", b.server_cpu_per_request_us),
                bound.map_or("–".to_string(), |b| rps(b.rps)),
                bound.map_or("–".to_string(), |b| b.by.clone()),
            ];
            (rank, p.test.test_id, p.rtt_ms, row)
        })
        .collect();
    rows.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)).then(a.2.total_cmp(&b.2)));
    Some(Table {
        headers: [
            "target",
            "Test ID",
            "RTT ms (measured)",
            "req/s (best)",
            "p99 ms",
            "threads",
            "DB connections",
            "CPU µs/req",
            "bound req/s",
            "bound set by",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows.into_iter().map(|r| r.3).collect(),
    })
}

/// What the curve ran, in a sentence.
pub fn how(results: &BenchResults) -> String {
    let rtts: Vec<String> = results
        .curve
        .iter()
        .map(|s| format!("{} ({} measured)", fmt_ms(s.rtt_ms), ms(least_rtt_ms(&s.link))))
        .collect();
    format!(
        "Each target's endpoints at round trips of {} ms to the database, through one Toxiproxy link. Each \
         server is warmed once per Test ID at the first round trip, then meets {} s of its endpoint's load, not \
         counted, at each next one before its runs. The bound is the least of: the reads the endpoint can hold \
         in flight ÷ the time a read holds one (the measured round trip, the fastest of 40 probe reads \
         through the link less the median straight to the database, plus the query's own time in PostgreSQL, \
         from pg_stat_statements); the load's connections, the same way; the server's CPUs ÷ its \
         CPU per request. DB connections: the most the server held open, from pg_stat_activity.",
        rtts.join(", "),
        super::run::CURVE_SETTLE.as_secs()
    )
}

/// The endpoints whose blocking form is set against the non-blocking one:
/// (blocking, non-blocking).
const TWINS: [(TestId, TestId); 2] = [(TestId(2), TestId(3)), (TestId(9), TestId(3))];

/// The reading's sentences on the curve.
pub fn sentences(results: &BenchResults) -> Vec<String> {
    let points = points(results);
    if points.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(line) = super::pools::pools_line(results) {
        out.push(format!(
            "The pools, each stack's default unless a flag set it: {line}. A pool of N holds at most N reads \
             a round trip, so the farther the database, the more a rate measures its pool."
        ));
    }
    let rtts: Vec<f64> = results.curve.iter().map(|s| s.rtt_ms).collect();
    let last = rtts.last().copied().unwrap_or(0.0);
    let at = |target: &str, id: TestId, rtt: f64| {
        points.iter().find(|p| p.test.target == target && p.test.test_id == id && p.rtt_ms == rtt)
    };
    for target in results.target_names() {
        // The blocking endpoint against its non-blocking twin, in the same server.
        for (blocking, twin) in TWINS {
            let pairs: Vec<(f64, f64, f64)> = rtts
                .iter()
                .filter_map(|&r| Some((r, at(target, blocking, r)?.best.rps, at(target, twin, r)?.best.rps)))
                .collect();
            let Some(&(_, b0, t0)) = pairs.first() else { continue };
            let (bp, tp) = (path_of(blocking), path_of(twin));
            match pairs.iter().find(|(_, b, t)| *b < 0.5 * t) {
                Some((r, b, t)) if *r == rtts[0] => out.push(format!(
                    "{target}: {bp} is below half of {tp} from the first round trip, {} ms ({} against {} \
                     req/s, {:.2}×).",
                    fmt_ms(*r),
                    rps(*b),
                    rps(*t),
                    b / t
                )),
                Some((r, b, t)) => out.push(format!(
                    "{target}: {bp} falls below half of {tp} at {} ms ({} against {} req/s, {:.2}×; at {} ms \
                     it was {:.2}×).",
                    fmt_ms(*r),
                    rps(*b),
                    rps(*t),
                    b / t,
                    fmt_ms(rtts[0]),
                    b0 / t0
                )),
                None => {
                    let (r, b, t) = pairs[pairs.len() - 1];
                    out.push(format!(
                        "{target}: {bp} stays above half of {tp} up to {} ms ({} against {} req/s there, \
                         {:.2}×).",
                        fmt_ms(r),
                        rps(b),
                        rps(t),
                        b / t
                    ));
                }
            }
        }
        // What bound each endpoint at the farthest round trip.
        let farthest: Vec<&Point> =
            points.iter().filter(|p| p.test.target == target && p.rtt_ms == last).collect();
        let parts: Vec<String> = farthest
            .iter()
            .filter_map(|p| {
                let b = p.bound.as_ref()?;
                let share = p.best.rps / b.rps;
                let verdict = if p.above_bound() {
                    format!("{:.0} % above it: the model misses something here", (share - 1.0) * 100.0)
                } else if share >= AT_BOUND {
                    format!("{:.0} % of it: that limit set the rate", share * 100.0)
                } else {
                    format!("{:.0} % of it: none of the model's limits set the rate", share * 100.0)
                };
                Some(format!(
                    "{} {} req/s against a bound of {} ({}), {verdict}",
                    p.test.api,
                    rps(p.best.rps),
                    rps(b.rps),
                    b.by
                ))
            })
            .collect();
        if !parts.is_empty() {
            out.push(format!("{target} at {} ms: {}.", fmt_ms(last), parts.join("; ")));
        }
    }
    out.extend(pool_sentences(results, &points, &rtts));
    out
}

/// The curve's answer in two sentences, for the main job's index page:
/// where each server's blocking endpoint fell below half of its
/// non-blocking one, and what set the rates at the farthest round trip.
pub fn answer(results: &BenchResults) -> Vec<String> {
    let points = points(results);
    let rtts: Vec<f64> = results.curve.iter().map(|s| s.rtt_ms).collect();
    let Some(&last) = rtts.last() else { return Vec::new() };
    let rate = |target: &str, id: TestId, rtt: f64| {
        points
            .iter()
            .find(|p| p.test.target == target && p.test.test_id == id && p.rtt_ms == rtt)
            .map(|p| p.best.rps)
    };
    let mut out = Vec::new();
    let mut halves = Vec::new();
    for target in results.target_names() {
        let pairs: Vec<(f64, f64, f64)> = rtts
            .iter()
            .filter_map(|&r| Some((r, rate(target, TestId(2), r)?, rate(target, TestId(3), r)?)))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        halves.push(match pairs.iter().find(|(_, b, t)| *b < 0.5 * t) {
            Some((r, b, t)) => format!("{target} at {} ms ({:.2}×)", fmt_ms(*r), b / t),
            None => {
                let (r, b, t) = pairs[pairs.len() - 1];
                format!("{target} not up to {} ms ({:.2}× there)", fmt_ms(r), b / t)
            }
        });
    }
    if !halves.is_empty() {
        out.push(format!(
            "/getData (blocking) fell below half of /getDataAsync (non-blocking) in the same server: {}.",
            halves.join("; ")
        ));
    }
    let farthest: Vec<&Point> = points.iter().filter(|p| p.rtt_ms == last && p.bound.is_some()).collect();
    if !farthest.is_empty() {
        let set_by = |kind: BoundKind| {
            farthest
                .iter()
                .filter(|p| {
                    p.bound.as_ref().is_some_and(|b| b.kind == kind && p.best.rps >= AT_BOUND * b.rps)
                })
                .count()
        };
        let above = farthest.iter().filter(|p| p.above_bound()).count();
        let counts = [BoundKind::Pool, BoundKind::Holders, BoundKind::Client, BoundKind::Cpu].map(set_by);
        out.push(format!(
            "At {} ms, of {} endpoints a pool set the rate of {}, threads or an event loop holding one read \
             each of {}, the load's connections of {}, the CPU of {}, none of these (under 80 % of every bound) \
             of {}; {} above the bound Little's law gives.",
            fmt_ms(last),
            farthest.len(),
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            farthest.len() - counts.iter().sum::<usize>(),
            match above {
                0 => "none lay".to_string(),
                1 => "1 lay".to_string(),
                n => format!("{n} lay"),
            }
        ));
    }
    out
}

fn path_of(id: TestId) -> &'static str {
    endpoint_of_id(id).map_or("?", Endpoint::path)
}

/// Where a pool sets the bound: the pool Little's law needs to keep the
/// first round trip's rate, beside the pool there and HikariCP's formula,
/// and the command that re-runs the curve at it.
fn pool_sentences(results: &BenchResults, points: &[Point], rtts: &[f64]) -> Vec<String> {
    let Some(&last) = rtts.last() else { return Vec::new() };
    let cores = results.conditions.machine.cpus_online.max(1);
    let hikari = cores * 2 + 1;
    let mut out = Vec::new();
    let mut most_needed = 0usize;
    for p in points.iter().filter(|p| p.rtt_ms == last) {
        // A pool sets the rate only where the rate reaches its bound.
        let Some(b) =
            p.bound.as_ref().filter(|b| b.kind == BoundKind::Pool && p.best.rps >= AT_BOUND * b.rps)
        else {
            continue;
        };
        let Some(first) = points.iter().find(|q| {
            q.test.target == p.test.target && q.test.test_id == p.test.test_id && q.rtt_ms == rtts[0]
        }) else {
            continue;
        };
        let endpoint = endpoint_of_id(p.test.test_id);
        let reads = endpoint.map_or(1.0, reads_per_request);
        let read_ms = p.measured_rtt_ms + p.best.db_query_ms.unwrap_or(0.0);
        let needed = (first.best.rps * reads * read_ms / 1000.0).ceil() as usize;
        if (needed as f64) <= b.holders.unwrap_or(0.0) {
            continue;
        }
        most_needed = most_needed.max(needed);
        out.push(format!(
            "{} {} at {} ms: a pool, not blocking, sets the rate. To keep its {} req/s of {} ms it needs {} \
             connections (rate × {} ms a read{}); it had {:.0}; HikariCP's formula, cores × 2 + spindles = \
             {cores} × 2 + 1 = {hikari} here, has no term for the round trip.",
            p.test.target,
            p.test.api,
            fmt_ms(last),
            rps(first.best.rps),
            fmt_ms(rtts[0]),
            needed,
            ms(read_ms),
            if reads > 1.0 { format!(" × {reads:.0} reads") } else { String::new() },
            b.holders.unwrap_or(0.0)
        ));
    }
    if most_needed > 0 {
        let p = &results.conditions.parameters;
        let ids: Vec<String> =
            p.apis.iter().filter_map(|a| a.split_whitespace().next().map(String::from)).collect();
        let list: Vec<String> = rtts.iter().map(|r| fmt_ms(*r)).collect();
        out.push(format!(
            "To measure the curve with every pool at that size: blocklab bench --db postgres --db-rtt {}ms --target {} \
             --apis {} --peer-pool {most_needed} --db-pool {most_needed} --db-async-connections {most_needed}.",
            list.join(","),
            results.target_names().join(","),
            ids.join(",")
        ));
    }
    out
}

/// One chart per endpoint: the rate against the round trip, a line per
/// target and its bound dashed in the same colour; and one of p99.
pub fn charts(results: &BenchResults) -> Vec<Chart> {
    let points = points(results);
    if points.is_empty() {
        return Vec::new();
    }
    let rtts: Vec<f64> = results.curve.iter().map(|s| s.rtt_ms).collect();
    let mut ids: Vec<TestId> = points.iter().map(|p| p.test.test_id).collect();
    ids.sort();
    ids.dedup();
    let targets = results.target_names();
    let mut charts = Vec::new();
    for id in ids {
        let api = path_of(id);
        let of = |target: &str, f: &dyn Fn(&Point) -> Option<f64>| -> Vec<(f64, f64)> {
            rtts.iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let p = points
                        .iter()
                        .find(|p| p.test.target == target && p.test.test_id == id && p.rtt_ms == *r)?;
                    Some((i as f64, f(p)?))
                })
                .collect()
        };
        let series: Vec<RateSeries> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                (i, t.to_string(), of(t, &|p| Some(p.best.rps)), of(t, &|p| p.bound.as_ref().map(|b| b.rps)))
            })
            .filter(|s| !s.2.is_empty())
            .collect();
        let title = format!("Test ID {} {api}: rate against the round trip", id);
        if let Ok(svg) =
            rtt_chart(&title, &rtts, "requests/s (log scale)", &series, SeriesLabelPosition::LowerLeft)
        {
            charts.push(Chart { file: format!("curve-rate-test{id}.svg"), title, svg });
        }
        let p99: Vec<RateSeries> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| (i, t.to_string(), of(t, &|p| Some(p.best.p99_ms)), Vec::new()))
            .filter(|s| !s.2.is_empty())
            .collect();
        let title = format!("Test ID {} {api}: p99 against the round trip", id);
        if let Ok(svg) = rtt_chart(&title, &rtts, "p99, ms (log scale)", &p99, SeriesLabelPosition::UpperLeft)
        {
            charts.push(Chart { file: format!("curve-p99-test{id}.svg"), title, svg });
        }
    }
    charts
}

/// The round trips as evenly spaced categories (loopback has its place).
fn rtt_label(rtts: &[f64], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    rtts.get(i as usize).map_or(String::new(), |r| format!("{} ms", fmt_ms(*r)))
}

fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.filter(|v| *v > 0.0).fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi <= 0.0 { (1.0, 10.0) } else { (lo / 1.6, hi * 1.6) }
}

/// A target's line, its colour's index and its name first, and its
/// bound's line (empty: none drawn).
type RateSeries = (usize, String, Vec<(f64, f64)>, Vec<(f64, f64)>);

/// A chart of `series` against the round trips, as evenly spaced categories,
/// on a log scale: each target a solid line with dots, its bound dashed in
/// the same colour.
fn rtt_chart(
    title: &str,
    rtts: &[f64],
    y_desc: &str,
    series: &[RateSeries],
    legend: SeriesLabelPosition,
) -> Result<String, DrawError> {
    let (lo, hi) = log_range(series.iter().flat_map(|s| s.2.iter().chain(&s.3).map(|p| p.1)));
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, (900, 440))?;
        let x_hi = rtts.len().max(2) as f64 - 0.5;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..x_hi, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("round trip to the database (asked)")
            .y_desc(y_desc)
            .x_labels(rtts.len() * 2 + 1)
            .x_label_formatter(&|x| rtt_label(rtts, *x))
            .y_label_formatter(&|y| if *y >= 10.0 { format!("{y:.0}") } else { format!("{y}") })
            .light_line_style(WHITE.mix(0.0))
            .label_style(("sans-serif", 13))
            .draw()?;
        for (i, name, points, bound) in series {
            let colour = color(*i);
            chart
                .draw_series(LineSeries::new(points.iter().copied(), colour.stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, colour.filled())))?;
            if bound.len() > 1 {
                chart
                    .draw_series(DashedLineSeries::new(bound.iter().copied(), 6, 4, colour.stroke_width(2)))?
                    .label(format!("{name}: bound (Little's law)"))
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (7, 0)], colour.stroke_width(2))
                            + PathElement::new(vec![(11, 0), (18, 0)], colour.stroke_width(2))
                    });
            }
        }
        draw_legend(&mut chart, legend)?;
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_are_evenly_spaced_categories() {
        let rtts = [0.0, 2.0, 10.0];
        assert_eq!(rtt_label(&rtts, 0.0), "0 ms");
        assert_eq!(rtt_label(&rtts, 2.0), "10 ms");
        assert_eq!(rtt_label(&rtts, 0.5), "");
        assert_eq!(rtt_label(&rtts, 3.0), "");
    }
}
