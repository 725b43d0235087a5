//! A database that stalls (`bench --db-stall`): under a steady open-loop
//! load, the link to the database slows down (`+50ms:10s`: 50 ms more each
//! way… of the answers, for 10 s) or freezes (`freeze:5s`: no byte passes),
//! then comes back. Per second it records what the client got (answers,
//! failures, p50 and the corrected p99) and what the server held (its
//! threads from /proc; blocklab's requests in flight from /metrics), and it
//! computes the figures that answer the question: how long after the stall
//! the service was itself again, how many requests failed during and after
//! it, the most requests it held, and whether it survived.
//!
//! The load is `blocklab load -k -c C --rate R`, the matrix's connections
//! in an open loop (a request's latency counts from when it was due, so a
//! queue that builds during the stall is seen), at half the lower of the
//! database's ceiling and the endpoint's closed-loop rate in the matrix, the
//! same for every target (`--db-stall-rate` sets it). Each target's endpoint
//! may run the stall more than once (rounds): its figures are then given as
//! a median with their range over the rounds ([`StallRounds`]), and two
//! targets are said to differ only where their ranges part ([`comparison`]).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::test_id::TestId;
use crate::flags::parse_duration;

/// What a stall run is, in words, for the reports: `connections` is the
/// open loop's (the matrix's `-c`).
pub fn how(connections: usize) -> String {
    format!(
        "After the matrix, a fresh server per endpoint and target, warmed first by a closed-loop load through the \
         link (a JVM's JIT; the open loop's rate is at most half the rate it reached there), then under an \
         open-loop load on {connections} connection{} (latency counted from when each request was due), steady \
         first; then the link to the database stalls and comes back. Recovered: the rate within {:.0} % of its \
         value before the stall and the p99 within {:.0} % or {P99_BACK_MS:.0} ms of it, whichever is larger, for \
         {BACK_FOR} seconds in a row; counted from the end of the stall. Beside it, the same against the steady \
         seconds' own spread: the p99 at most the worst steady second's (a second's p99 at a few hundred requests \
         a second is its fifth slowest request, which one scheduler hiccup sets).",
        if connections == 1 { "" } else { "s" },
        RATE_BACK * 100.0,
        P99_BACK * 100.0,
    )
}

/// A rate that is back: within this share of the rate before the stall.
pub const RATE_BACK: f64 = 0.10;
/// A p99 that is back: within this share of the p99 before the stall…
pub const P99_BACK: f64 = 0.10;
/// …or within this many ms, whichever is larger.
pub const P99_BACK_MS: f64 = 2.0;
/// Seconds in a row that must be back for the service to have recovered.
pub const BACK_FOR: usize = 3;

/// What happens to the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StallKind {
    /// Every answer is delayed by this much more (a `latency` toxic downstream).
    Slower(#[serde(with = "humantime_serde_ms")] Duration),
    /// No byte passes (a `timeout` toxic with no timeout); when it is removed
    /// Toxiproxy closes the connections it held.
    Freeze,
}

/// `--db-stall`: what happens to the link, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallSpec {
    /// What happens.
    pub kind: StallKind,
    /// For how long.
    #[serde(with = "humantime_serde_ms")]
    pub length: Duration,
}

impl StallSpec {
    /// Parses `+50ms:10s` (the link 50 ms slower for 10 s) or `freeze:5s`.
    pub fn parse(s: &str) -> Result<StallSpec, String> {
        let usage = "expected +DELAY:LENGTH (the link DELAY slower for LENGTH, e.g. +50ms:10s) or freeze:LENGTH \
                     (e.g. freeze:5s)";
        let (what, length) = s.trim().split_once(':').ok_or_else(|| format!("'{s}': {usage}"))?;
        let length = parse_duration(length).map_err(|e| format!("'{s}': the length: {e}"))?;
        if length < Duration::from_secs(1) {
            return Err(format!("'{s}': a stall of at least 1s (the timeline counts whole seconds)"));
        }
        let kind = match what.strip_prefix('+') {
            Some(delay) => {
                let delay = parse_duration(delay).map_err(|e| format!("'{s}': the delay: {e}"))?;
                crate::harness::toxiproxy::check_rtt(delay).map_err(|e| format!("'{s}': {e}"))?;
                if delay.is_zero() {
                    return Err(format!("'{s}': a delay of 0 is no stall"));
                }
                StallKind::Slower(delay)
            }
            None if what == "freeze" => StallKind::Freeze,
            None => return Err(format!("'{s}': {usage}")),
        };
        Ok(StallSpec { kind, length })
    }
}

impl fmt::Display for StallSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let length = humantime::format_duration(self.length);
        match self.kind {
            StallKind::Slower(d) => {
                write!(f, "answers {} slower for {length}", humantime::format_duration(d))
            }
            StallKind::Freeze => write!(f, "the link frozen for {length}"),
        }
    }
}

/// Durations in JSON as whole milliseconds.
mod humantime_serde_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// One second of a stall run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StallSecond {
    /// Seconds since the load started.
    pub second: u64,
    /// Answers per second in it (any status).
    pub rps: f64,
    /// Requests that failed in it: no answer (by any kind), or a status of 400 and above.
    pub failed: u64,
    /// Median latency of its answers (ms).
    pub p50_ms: f64,
    /// 99th percentile of its answers' latency from when each was due (ms).
    pub p99_ms: f64,
    /// The server's most OS threads seen in it (/proc, every 250 ms).
    pub threads: Option<u64>,
    /// The server's most requests in flight on this endpoint (blocklab's /metrics; null for a peer).
    pub in_flight: Option<u64>,
    /// The most reads seen waiting for a pooled database connection in it
    /// (blocklab's /metrics, both its clients; null for a peer, or a client with no pool).
    #[serde(default)]
    pub waiting: Option<u64>,
}

fn first_round() -> u32 {
    1
}

/// One target's endpoint through one stall.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StallRecord {
    /// The target.
    pub target: String,
    /// Its Test ID.
    pub test_id: TestId,
    /// The endpoint.
    pub api: String,
    /// Which run of this target and endpoint through the stall (1, 2, …):
    /// each runs more than once, so that a difference is claimed only where
    /// the ranges part.
    #[serde(default = "first_round")]
    pub round: u32,
    /// The stall.
    pub stall: StallSpec,
    /// The offered load (requests per second, open loop).
    pub rate: f64,
    /// Where the rate came from, in words.
    pub rate_from: String,
    /// Seconds of closed-loop load the fresh server got before the open loop.
    #[serde(default)]
    pub warm_s: f64,
    /// When the stall began, seconds after the load started.
    pub starts_s: u64,
    /// Every second of the run.
    pub seconds: Vec<StallSecond>,
    /// Answers per second before the stall (mean over its steady seconds).
    pub before_rps: f64,
    /// The p99 before the stall (median of its steady seconds' p99s, ms).
    pub before_p99_ms: f64,
    /// Seconds from the stall's end until the rate and the p99 were back for
    /// [`BACK_FOR`] seconds in a row (null: not within the run).
    pub recovered_after_s: Option<u64>,
    /// The highest of the steady seconds' p99s before the stall (ms): how far
    /// one second's p99 strays on its own here.
    #[serde(default)]
    pub steady_p99_max_ms: f64,
    /// As `recovered_after_s`, against the steady period's own spread: the
    /// rate within 10 % and each second's p99 at most the worst steady
    /// second's, for [`BACK_FOR`] seconds in a row (null: not within the run).
    /// At a few hundred requests a second, a second's p99 is its fifth
    /// slowest request, and one scheduler hiccup on two shared cores sets it.
    #[serde(default)]
    pub recovered_in_spread_after_s: Option<u64>,
    /// Requests failed while the link stalled.
    pub failed_during: u64,
    /// Requests failed after it.
    pub failed_after: u64,
    /// The server's most requests in flight (blocklab only).
    pub peak_in_flight: Option<u64>,
    /// The server's most OS threads.
    pub peak_threads: Option<u64>,
    /// The most reads waiting for a pooled database connection (blocklab only).
    #[serde(default)]
    pub peak_waiting: Option<u64>,
    /// The longest any request took from when it was due to its answer or
    /// failure (ms; the open loop's corrected maximum; 0: not recorded).
    #[serde(default)]
    pub longest_ms: f64,
    /// Requests that failed, by kind (the load generator's error kinds, and
    /// `status NNN` for answers of 400 and above), over the whole run.
    #[serde(default)]
    pub failures: std::collections::BTreeMap<String, u64>,
    /// Whether the server was alive at the end.
    pub survived: bool,
    /// Why the figures are incomplete, or how the server ended.
    pub note: Option<String>,
}

impl StallRecord {
    /// The second the stall ended.
    pub fn ends_s(&self) -> u64 {
        self.starts_s + self.stall.length.as_secs()
    }

    /// Fills in the figures computed from the seconds: the steady state
    /// before the stall, the time to recover and the failures.
    pub fn compute(&mut self) {
        let (start, end) = (self.starts_s as usize, self.ends_s() as usize);
        let steady: Vec<(f64, f64)> = self.steady().iter().map(|s| (s.rps, s.p99_ms)).collect();
        self.before_rps = mean(steady.iter().map(|s| s.0));
        self.before_p99_ms = median(steady.iter().map(|s| s.1));
        self.steady_p99_max_ms = steady.iter().map(|s| s.1).fold(0.0, f64::max);
        let back = |s: &StallSecond| self.back(s);
        let in_spread = |s: &StallSecond| self.rate_back(s) && s.p99_ms <= self.steady_p99_max_ms;
        let after: Vec<&StallSecond> = self.seconds.iter().skip(end).collect();
        let first_back = |back: &dyn Fn(&StallSecond) -> bool| {
            (self.before_rps > 0.0)
                .then(|| after.windows(BACK_FOR).position(|w| w.iter().all(|s| back(s))))
                .flatten()
                .map(|i| i as u64)
        };
        let recovered = (first_back(&back), first_back(&in_spread));
        (self.recovered_after_s, self.recovered_in_spread_after_s) = recovered;
        self.failed_during = self.seconds.iter().skip(start).take(end - start).map(|s| s.failed).sum();
        self.failed_after = after.iter().map(|s| s.failed).sum();
        self.peak_in_flight = self.seconds.iter().filter_map(|s| s.in_flight).max();
        self.peak_threads = self.seconds.iter().filter_map(|s| s.threads).max();
        self.peak_waiting = self.seconds.iter().filter_map(|s| s.waiting).max();
    }

    /// The steady seconds before the stall: the first second is the load's
    /// own ramp, left out.
    fn steady(&self) -> Vec<&StallSecond> {
        self.seconds.iter().skip(1).take((self.starts_s as usize).saturating_sub(1)).collect()
    }

    fn rate_back(&self, s: &StallSecond) -> bool {
        (s.rps - self.before_rps).abs() <= RATE_BACK * self.before_rps
    }

    /// Whether a second is back by the strict rule: the rate within 10 % of
    /// before and the p99 within 10 % or 2 ms of it.
    fn back(&self, s: &StallSecond) -> bool {
        self.rate_back(s) && s.p99_ms <= self.before_p99_ms + (P99_BACK * self.before_p99_ms).max(P99_BACK_MS)
    }

    /// How many of the steady seconds met the strict rule themselves, of how
    /// many: when some did not, a run can miss 3 seconds in a row after the
    /// stall on the machine's own noise.
    pub fn steady_back(&self) -> (usize, usize) {
        let steady = self.steady();
        (steady.iter().filter(|s| self.back(s)).count(), steady.len())
    }

    /// Its failures by kind in words (`700 status 503, 31 request_timeout`), or "none".
    pub fn failures_text(&self) -> String {
        let kinds: Vec<String> =
            self.failures.iter().filter(|(_, n)| **n > 0).map(|(kind, n)| format!("{n} {kind}")).collect();
        if kinds.is_empty() { "none".to_string() } else { kinds.join(", ") }
    }

    /// Whether its requests waited where /metrics cannot see them: none in
    /// flight by the gauge (it counts a request from the router on), yet one
    /// took a second or more, so they queued unread behind a blocked worker.
    pub fn queued_unread(&self) -> bool {
        self.peak_in_flight == Some(0) && self.longest_ms >= 1000.0
    }

    /// How it went, in one sentence, from its figures.
    pub fn sentence(&self) -> String {
        let recovered = match self.recovered_after_s {
            _ if !self.survived => "did not survive".to_string(),
            Some(0) => "was itself again as soon as the stall ended".to_string(),
            Some(s) => format!("recovered {s} s after the stall ended"),
            None => {
                let (met, steady) = self.steady_back();
                let noise = if met < steady {
                    format!(", a rule only {met} of its {steady} steady seconds before it met themselves")
                } else {
                    String::new()
                };
                format!(
                    "had not recovered {} s after the stall ended{noise}",
                    self.seconds.len().saturating_sub(self.ends_s() as usize)
                )
            }
        };
        let spread = match self.recovered_in_spread_after_s {
            _ if !self.survived || self.recovered_in_spread_after_s == self.recovered_after_s => {
                String::new()
            }
            Some(s) => format!(
                " (against the steady seconds' own spread, a p99 up to their worst, {:.1} ms: back after {s} s)",
                self.steady_p99_max_ms
            ),
            None => format!(
                " (nor against the steady seconds' own spread, a p99 up to their worst, {:.1} ms)",
                self.steady_p99_max_ms
            ),
        };
        let carried = match (self.peak_in_flight, self.peak_threads) {
            // The gauge counts a request from the router on: one waiting
            // to be read (behind a worker a read blocks) is not in it.
            (_, Some(t)) if self.queued_unread() => format!(
                "; its /metrics never saw one of these requests in flight, though the longest took {:.0} ms: \
                 they waited before the server read them (it counts a request from its router on), on {t} threads",
                self.longest_ms
            ),
            (Some(r), Some(t)) => format!("; it had up to {r} requests in flight on {t} threads"),
            (None, Some(t)) => format!("; it ran up to {t} threads"),
            _ => String::new(),
        };
        let waiting = match self.peak_waiting {
            Some(0) => ", no read ever waited for a database connection".to_string(),
            Some(w) => format!(", up to {w} reads waiting for a database connection"),
            None => String::new(),
        };
        let longest = if self.longest_ms > 0.0 {
            format!("; the longest request took {:.0} ms", self.longest_ms)
        } else {
            String::new()
        };
        format!(
            "{} {} ({}, at {:.0} req/s, {:.0} req/s and p99 {:.1} ms before): {recovered}{spread}; {} requests failed during \
             the stall and {} after{carried}{waiting}{longest}{}.",
            self.target,
            self.api,
            self.stall,
            self.rate,
            self.before_rps,
            self.before_p99_ms,
            self.failed_during,
            self.failed_after,
            self.note.as_deref().map_or(String::new(), |n| format!(" ({n})"))
        )
    }
}

/// A figure over the rounds of one target's endpoint through the stall: its
/// median, lowest and highest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverRounds {
    /// The median (of two rounds, their mean).
    pub median: f64,
    /// The lowest.
    pub min: f64,
    /// The highest.
    pub max: f64,
    /// How many rounds.
    pub rounds: usize,
}

impl OverRounds {
    /// The figure over `values`, one per round (`None`: no round).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<OverRounds> {
        let mut v: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let (min, max) = (*v.first()?, *v.last()?);
        let mid = v.len() / 2;
        let median = if v.len().is_multiple_of(2) { (v[mid - 1] + v[mid]) / 2.0 } else { v[mid] };
        Some(OverRounds { median, min, max, rounds: v.len() })
    }

    /// Whether the two ranges share a value: if they do, the rounds measured no difference.
    pub fn overlaps(&self, other: &OverRounds) -> bool {
        self.min <= other.max && other.min <= self.max
    }

    /// `3` for one round or rounds that agree, `3 (2–4)` for several that
    /// do not, with `fmt`.
    pub fn text(&self, fmt: impl Fn(f64) -> String) -> String {
        let (min, max) = (fmt(self.min), fmt(self.max));
        if self.rounds < 2 || min == max {
            fmt(self.median)
        } else {
            format!("{} ({min}–{max})", fmt(self.median))
        }
    }
}

/// A whole number, as a recovery's seconds and a count of failures are.
fn whole(v: f64) -> String {
    format!("{v:.0}")
}

/// One target's endpoint through the stall: every round of it.
#[derive(Debug, Clone)]
pub struct StallRounds<'a> {
    /// Its rounds, in the order run.
    pub records: Vec<&'a StallRecord>,
}

/// The stall records grouped by target and endpoint, in the order each
/// pair first ran.
pub fn by_endpoint(stalls: &[StallRecord]) -> Vec<StallRounds<'_>> {
    let mut groups: Vec<StallRounds<'_>> = Vec::new();
    for record in stalls {
        match groups
            .iter_mut()
            .find(|g| g.first().target == record.target && g.first().test_id == record.test_id)
        {
            Some(group) => group.records.push(record),
            None => groups.push(StallRounds { records: vec![record] }),
        }
    }
    for group in &mut groups {
        group.records.sort_by_key(|r| r.round);
    }
    groups
}

impl StallRounds<'_> {
    /// Its first round: the target, the endpoint and the stall are every round's.
    pub fn first(&self) -> &StallRecord {
        self.records[0]
    }

    /// How many rounds.
    pub fn rounds(&self) -> usize {
        self.records.len()
    }

    /// The rounds it survived.
    pub fn survived(&self) -> usize {
        self.records.iter().filter(|r| r.survived).count()
    }

    /// The rounds it survived and recovered in within the run.
    pub fn recovered_rounds(&self) -> usize {
        self.records.iter().filter(|r| r.survived && r.recovered_after_s.is_some()).count()
    }

    /// Seconds from the stall's end to recovery over the rounds, when it
    /// survived and recovered in every one (`None` otherwise: a round that did
    /// not recover has no figure, only a bound the run's length sets).
    pub fn recovered(&self) -> Option<OverRounds> {
        let each: Option<Vec<f64>> = self
            .records
            .iter()
            .map(|r| r.recovered_after_s.filter(|_| r.survived).map(|s| s as f64))
            .collect();
        OverRounds::of(each?)
    }

    /// Requests failed during and after the stall, over the rounds.
    pub fn failed(&self) -> Option<OverRounds> {
        OverRounds::of(self.records.iter().map(|r| (r.failed_during + r.failed_after) as f64))
    }

    /// The longest request over the rounds (ms), when every round recorded it.
    pub fn longest(&self) -> Option<OverRounds> {
        OverRounds::of(self.records.iter().filter(|r| r.longest_ms > 0.0).map(|r| r.longest_ms))
    }

    /// How it went, in one sentence: a round's own sentence when it ran
    /// once; with several, each figure as its median and its range over them.
    pub fn sentence(&self) -> String {
        let first = self.first();
        if self.rounds() == 1 {
            return first.sentence();
        }
        let n = self.rounds();
        let over = |f: fn(&StallRecord) -> f64| OverRounds::of(self.records.iter().map(|r| f(r)));
        let text = |o: Option<OverRounds>, fmt: fn(f64) -> String| o.map_or("?".to_string(), |o| o.text(fmt));
        let one = |v: f64| format!("{v:.1}");
        let recovered = match (self.survived(), self.recovered()) {
            (s, _) if s < n => format!("survived {s} of its {n} rounds"),
            (_, Some(r)) => format!("recovered {} s after the stall ended", r.text(whole)),
            (_, None) => {
                let each: Vec<String> = self
                    .records
                    .iter()
                    .map(|r| match r.recovered_after_s {
                        Some(s) => format!("round {} after {s} s", r.round),
                        None => format!(
                            "round {} not within {} s",
                            r.round,
                            r.seconds.len().saturating_sub(r.ends_s() as usize)
                        ),
                    })
                    .collect();
                format!("recovered in {} of its {n} rounds ({})", self.recovered_rounds(), each.join(", "))
            }
        };
        let peak = |f: fn(&StallRecord) -> Option<u64>| self.records.iter().filter_map(|r| f(r)).max();
        let carried = match (peak(|r| r.peak_in_flight), peak(|r| r.peak_threads)) {
            (_, Some(t)) if self.records.iter().any(|r| r.queued_unread()) => format!(
                "; its /metrics never saw one of these requests in flight in a round where one took a second or \
                 more: they waited before the server read them, on up to {t} threads"
            ),
            (Some(r), Some(t)) => format!("; it had up to {r} requests in flight on {t} threads"),
            (None, Some(t)) => format!("; it ran up to {t} threads"),
            _ => String::new(),
        };
        let waiting = match peak(|r| r.peak_waiting) {
            Some(0) => ", no read ever waited for a database connection".to_string(),
            Some(w) => format!(", up to {w} reads waiting for a database connection"),
            None => String::new(),
        };
        let longest = self
            .longest()
            .map_or(String::new(), |l| format!("; the longest request took {} ms", l.text(whole)));
        format!(
            "{} {} ({}, at {} req/s, {} req/s and p99 {} ms before), over {n} rounds (median, range): {recovered}; \
             {} requests failed during the stall and {} after{carried}{waiting}{longest}.",
            first.target,
            first.api,
            first.stall,
            text(over(|r| r.rate), whole),
            text(over(|r| r.before_rps), whole),
            text(over(|r| r.before_p99_ms), one),
            text(over(|r| r.failed_during as f64), whole),
            text(over(|r| r.failed_after as f64), whole),
        )
    }
}

/// Two figures over their rounds, beside each other: which is lower in
/// every round, claimed only where their ranges part and each side ran at
/// least twice; otherwise that they are within each other's range.
/// `(lower, higher)` are the words for `a` below `b` and above it.
fn beside(
    (a_name, a): (&str, OverRounds),
    (b_name, b): (&str, OverRounds),
    (lower, higher): (&str, &str),
    unit: &str,
) -> String {
    let figures = format!("{a_name} {}{unit}, {b_name} {}{unit}", a.text(whole), b.text(whole));
    if a.rounds < 2 || b.rounds < 2 {
        format!("{figures} (one round on a side, so no difference is claimed)")
    } else if a.overlaps(&b) {
        format!("{figures}: within each other's range, so no difference is claimed")
    } else if a.max < b.min {
        format!("{a_name} {lower} in every round ({figures})")
    } else {
        format!("{a_name} {higher} in every round ({figures})")
    }
}

/// Two targets' same endpoint through the stall, `a` beside `b`: survival,
/// recovery and failures, a difference claimed only where their ranges over
/// the rounds do not overlap.
pub fn comparison(a: &StallRounds<'_>, b: &StallRounds<'_>) -> String {
    let (an, bn) = (a.first().target.as_str(), b.first().target.as_str());
    let rounds = match (a.rounds(), b.rounds()) {
        (x, y) if x == y => format!("{x} round{} each", if x == 1 { "" } else { "s" }),
        (x, y) => format!("{x} and {y} rounds"),
    };
    let recovery = match (a.survived() == a.rounds(), b.survived() == b.rounds()) {
        (true, false) if b.survived() == 0 => format!("{an} survived every round and {bn} none"),
        (false, true) if a.survived() == 0 => format!("{bn} survived every round and {an} none"),
        (false, _) | (_, false) => format!(
            "{an} survived {} of {} rounds and {bn} {} of {}: no difference is claimed",
            a.survived(),
            a.rounds(),
            b.survived(),
            b.rounds()
        ),
        (true, true) => match (a.recovered(), b.recovered()) {
            (Some(ra), Some(rb)) => format!(
                "recovery: {}",
                beside((an, ra), (bn, rb), ("recovered sooner", "recovered later"), " s")
            ),
            (Some(_), None) if b.recovered_rounds() == 0 => {
                format!("{an} recovered in every round and {bn} in none within the run")
            }
            (None, Some(_)) if a.recovered_rounds() == 0 => {
                format!("{bn} recovered in every round and {an} in none within the run")
            }
            (None, None) if a.recovered_rounds() == 0 && b.recovered_rounds() == 0 => {
                "neither recovered within the run in any round".to_string()
            }
            _ => format!(
                "{an} recovered in {} of {} rounds and {bn} in {} of {}: no difference is claimed",
                a.recovered_rounds(),
                a.rounds(),
                b.recovered_rounds(),
                b.rounds()
            ),
        },
    };
    let failed = match (a.failed(), b.failed()) {
        (Some(fa), Some(fb)) => {
            format!("; failed requests: {}", beside((an, fa), (bn, fb), ("failed fewer", "failed more"), ""))
        }
        _ => String::new(),
    };
    format!(
        "Through the stall, {} beside {bn} ({rounds}, at {:.0} req/s): {recovery}{failed}.",
        a.first().api,
        a.first().rate
    )
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The closed-loop load a fresh server gets before the open loop starts:
/// without it a JVM's first seconds (its JIT) would be the "steady state"
/// the recovery is measured against. Its second half also gives the
/// endpoint's closed-loop rate through the link ([`steady_rps`]).
pub fn warm(quick: bool) -> Duration {
    Duration::from_secs(if quick { 2 } else { 6 })
}

/// Steady seconds before the stall (the first is left out as the load's ramp).
pub fn before(quick: bool) -> Duration {
    Duration::from_secs(if quick { 4 } else { 6 })
}

/// Seconds of load after the stall: room to recover (at least 10 s, or twice the stall).
pub fn after(spec: &StallSpec, quick: bool) -> Duration {
    let floor = Duration::from_secs(if quick { 6 } else { 10 });
    floor.max(spec.length * 2)
}

/// The rate over a load's second half (its whole seconds; the ramp and a
/// JVM's first seconds left out), or None when nothing was answered.
pub fn steady_rps(timeline: &[crate::load::outcome::Second]) -> Option<f64> {
    let whole: Vec<_> = timeline.iter().filter(|s| s.length_s >= 0.5).collect();
    let half = &whole[whole.len() / 2..];
    let (answers, seconds) =
        half.iter().fold((0.0, 0.0), |(a, t), s| (a + s.requests as f64, t + s.length_s));
    (answers > 0.0 && seconds > 0.0).then(|| answers / seconds)
}

/// The open-loop rate for an endpoint: half the lower of the database's
/// ceiling for it and a closed-loop rate of the endpoint (the lowest of the
/// targets', so that every target meets the same load; with the words that
/// say which), or `given`; with the words that say where it came from.
pub fn rate(
    given: Option<u32>,
    ceiling_rps: Option<f64>,
    closed_loop: Option<(f64, &str)>,
) -> Option<(f64, String)> {
    if let Some(r) = given {
        return Some((f64::from(r), "--db-stall-rate".to_string()));
    }
    match (ceiling_rps.filter(|c| *c > 0.0), closed_loop.filter(|(o, _)| *o > 0.0)) {
        (Some(c), Some((o, what))) if c < o => Some((
            c / 2.0,
            format!("half the database's ceiling for it ({c:.0} req/s), below {what} ({o:.0} req/s)"),
        )),
        (_, Some((o, what))) => Some((o / 2.0, format!("half {what} ({o:.0} req/s)"))),
        (Some(c), None) => Some((c / 2.0, format!("half the database's ceiling for it ({c:.0} req/s)"))),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_parse_and_bad_ones_say_why() {
        let slow = StallSpec::parse("+50ms:10s").unwrap();
        assert_eq!(
            slow,
            StallSpec { kind: StallKind::Slower(Duration::from_millis(50)), length: Duration::from_secs(10) }
        );
        assert_eq!(slow.to_string(), "answers 50ms slower for 10s");
        assert_eq!(StallSpec::parse("freeze:5s").unwrap().kind, StallKind::Freeze);
        for (bad, says) in [
            ("50ms:10s", "expected +DELAY:LENGTH"),
            ("+50ms", "expected +DELAY:LENGTH"),
            ("+1500us:10s", "whole number of milliseconds"),
            ("+50ms:500ms", "at least 1s"),
            ("+0ms:5s", "no stall"),
            ("thaw:5s", "expected"),
        ] {
            assert!(StallSpec::parse(bad).unwrap_err().contains(says), "{bad}");
        }
        let json = serde_json::to_value(slow).unwrap();
        assert_eq!(json, serde_json::json!({"kind": {"slower": 50}, "length": 10000}));
        assert_eq!(serde_json::from_value::<StallSpec>(json).unwrap(), slow);
    }

    fn second(second: u64, rps: f64, p99_ms: f64, failed: u64) -> StallSecond {
        StallSecond {
            second,
            rps,
            failed,
            p50_ms: p99_ms / 2.0,
            p99_ms,
            threads: Some(10),
            in_flight: None,
            waiting: Some(second % 3),
        }
    }

    #[test]
    fn recovery_waits_for_rate_and_p99_to_hold_for_three_seconds() {
        // 0: ramp; 1-3 steady at 100/s, p99 10 ms; stall 4-5; a backlog drains in 6 (rate 150: not
        // back), 7 is back, 8 is not (p99 30), then 9, 10, 11 are back: recovered 3 s after the end (6).
        let rows = [(40.0, 50.0, 0), (100.0, 10.0, 0), (101.0, 11.0, 0), (99.0, 10.0, 0), (20.0, 900.0, 5)]
            .into_iter()
            .chain([(0.0, 0.0, 7), (150.0, 400.0, 0), (100.0, 11.0, 0), (98.0, 30.0, 0)])
            .chain([(100.0, 12.0, 0), (104.0, 10.0, 1), (95.0, 9.0, 0), (100.0, 10.0, 0)]);
        let seconds: Vec<StallSecond> =
            rows.enumerate().map(|(i, (r, p, f))| second(i as u64, r, p, f)).collect();
        let mut record = StallRecord {
            target: "blocklab".to_string(),
            test_id: TestId(3),
            api: "/getDataAsync".to_string(),
            round: 1,
            stall: StallSpec::parse("+50ms:2s").unwrap(),
            rate: 100.0,
            rate_from: String::new(),
            warm_s: 0.0,
            starts_s: 4,
            seconds,
            before_rps: 0.0,
            before_p99_ms: 0.0,
            recovered_after_s: None,
            steady_p99_max_ms: 0.0,
            recovered_in_spread_after_s: None,
            failed_during: 0,
            failed_after: 0,
            peak_in_flight: None,
            peak_threads: None,
            peak_waiting: None,
            longest_ms: 0.0,
            failures: [("status 503".to_string(), 12), ("request_timeout".to_string(), 1)].into(),
            survived: true,
            note: None,
        };
        record.compute();
        assert_eq!((record.before_rps, record.before_p99_ms), (100.0, 10.0));
        assert_eq!(record.recovered_after_s, Some(3));
        // Against the steady seconds' own spread (p99 at most 11 ms): 9's 12 ms is not back.
        assert_eq!((record.steady_p99_max_ms, record.recovered_in_spread_after_s), (11.0, Some(4)));
        assert_eq!((record.failed_during, record.failed_after), (12, 1));
        assert_eq!((record.peak_threads, record.peak_waiting), (Some(10), Some(2)));
        assert_eq!(record.failures_text(), "1 request_timeout, 12 status 503");
        let s = record.sentence();
        assert!(
            s.contains(
                "recovered 3 s after the stall ended (against the steady seconds' own spread, a p99 up to their \
                 worst, 11.0 ms: back after 4 s); 12 requests failed during the stall and 1 after"
            ),
            "{s}"
        );
        // A blocked endpoint's requests wait before the server reads them: a
        // gauge that never saw one is not "had up to 0".
        (record.peak_in_flight, record.longest_ms) = (Some(0), 4710.0);
        let s = record.sentence();
        assert!(
            s.contains("never saw one of these requests in flight, though the longest took 4710 ms"),
            "{s}"
        );
        assert!(!s.contains("up to 0 requests"), "{s}");
        assert!(record.queued_unread(), "the table says so too");
        (record.peak_in_flight, record.longest_ms) = (Some(38), 79.0);
        assert!(!record.queued_unread());
        assert!(record.sentence().contains("it had up to 38 requests in flight on 10 threads"));
        // Cut the run before it is back for three seconds: not recovered.
        record.seconds.truncate(11);
        record.compute();
        assert_eq!(record.recovered_after_s, None);
        assert!(record.sentence().contains("had not recovered 5 s after"), "{}", record.sentence());
        assert_eq!(record.steady_back(), (3, 3));
        assert!(!record.sentence().contains("steady seconds before it"), "{}", record.sentence());
        // A steady second outside the strict rule itself: the sentence says the rule is the noise's.
        record.seconds[2].p99_ms = 30.0;
        record.compute();
        assert_eq!((record.before_p99_ms, record.steady_back()), (10.0, (2, 3)));
        assert!(
            record.sentence().contains(
                "had not recovered 5 s after the stall ended, a rule only 2 of its 3 steady seconds before it met \
                 themselves"
            ),
            "{}",
            record.sentence()
        );
        record.survived = false;
        assert!(record.sentence().contains("did not survive"));
    }

    #[test]
    fn the_rate_is_half_the_lower_of_the_ceiling_and_the_endpoints_own() {
        let matrix = "the lowest closed-loop rate in the matrix";
        assert_eq!(rate(None, Some(4000.0), Some((900.0, matrix))).unwrap().0, 450.0);
        let (r, from) = rate(None, Some(3000.0), Some((5000.0, matrix))).unwrap();
        assert_eq!(r, 1500.0);
        assert!(
            from.contains("ceiling for it (3000 req/s), below the lowest closed-loop rate in the matrix")
        );
        let (r, from) = rate(None, None, Some((800.0, "the rate through the link"))).unwrap();
        assert_eq!((r, from.as_str()), (400.0, "half the rate through the link (800 req/s)"));
        assert_eq!(
            rate(Some(300), Some(3000.0), Some((5000.0, matrix))).unwrap(),
            (300.0, "--db-stall-rate".to_string())
        );
        assert_eq!(rate(None, None, None), None);
    }

    #[test]
    fn the_steady_rate_leaves_out_the_first_half_and_a_cut_second() {
        let second = |second: u64, requests: u64, length_s: f64| crate::load::outcome::Second {
            second,
            length_s,
            requests,
            status_4xx_5xx: 0,
            errors: Default::default(),
            p50_ms: 1.0,
            p99_ms: 2.0,
            corrected_p99_ms: None,
            connections: 200,
        };
        // A JVM's JIT: 100, 200, then 1000 a second; the last second cut to 0.2 s.
        let timeline = [
            second(0, 100, 1.0),
            second(1, 200, 1.0),
            second(2, 1000, 1.0),
            second(3, 1000, 1.0),
            second(4, 50, 0.2),
        ];
        assert_eq!(steady_rps(&timeline), Some(1000.0));
        assert_eq!(steady_rps(&[]), None);
        assert_eq!(steady_rps(&[second(0, 0, 1.0)]), None);
    }

    /// A round of `target`'s `/getDataAsync` through a 5 s stall: recovered
    /// `recovered` s after it (None: not within the run), `failed` failed.
    fn round(target: &str, round: u32, recovered: Option<u64>, failed: u64) -> StallRecord {
        StallRecord {
            target: target.to_string(),
            test_id: TestId(3),
            api: "/getDataAsync".to_string(),
            round,
            stall: StallSpec::parse("+50ms:5s").unwrap(),
            rate: 450.0,
            rate_from: String::new(),
            warm_s: 10.0,
            starts_s: 8,
            seconds: (0..30).map(|i| second(i, 450.0, 20.0, 0)).collect(),
            before_rps: 450.0,
            before_p99_ms: 20.0,
            recovered_after_s: recovered,
            steady_p99_max_ms: 24.0,
            recovered_in_spread_after_s: recovered,
            failed_during: failed,
            failed_after: 0,
            peak_in_flight: Some(30),
            peak_threads: Some(9),
            peak_waiting: Some(0),
            longest_ms: 900.0,
            failures: Default::default(),
            survived: true,
            note: None,
        }
    }

    #[test]
    fn a_figure_over_rounds_is_its_median_and_range() {
        let o = OverRounds::of([5.0, 1.0, 3.0]).unwrap();
        assert_eq!((o.median, o.min, o.max, o.rounds), (3.0, 1.0, 5.0, 3));
        assert_eq!(OverRounds::of([2.0, 4.0]).unwrap().text(|v| format!("{v:.0}")), "3 (2–4)");
        assert_eq!(OverRounds::of([2.0]).unwrap().text(|v| format!("{v:.0}")), "2");
        assert_eq!(OverRounds::of([450.0, 450.2]).unwrap().text(|v| format!("{v:.0}")), "450");
        assert_eq!(OverRounds::of([]), None);
    }

    #[test]
    fn rounds_are_grouped_by_target_and_endpoint_whatever_the_order_run() {
        let stalls = [
            round("blocklab", 1, Some(2), 0),
            round("play", 1, Some(5), 3),
            round("blocklab", 2, Some(3), 1),
        ];
        let groups = by_endpoint(&stalls);
        assert_eq!(groups.len(), 2);
        assert_eq!((groups[0].first().target.as_str(), groups[0].rounds()), ("blocklab", 2));
        let s = groups[0].sentence();
        assert!(s.starts_with("blocklab /getDataAsync (answers 50ms slower for 5s, at 450 req/s"), "{s}");
        assert!(
            s.contains("over 2 rounds (median, range): recovered 2 (2–3) s after the stall ended"),
            "{s}"
        );
        assert!(s.contains("it had up to 30 requests in flight on 9 threads"), "{s}");
        // One round: its own sentence.
        assert_eq!(groups[1].sentence(), stalls[1].sentence());
    }

    #[test]
    fn a_difference_is_claimed_only_where_the_rounds_ranges_part() {
        // Apart: blocklab 2–3 s, play 5–7 s; failures 0–1 against 3–9.
        let ours = [round("blocklab", 1, Some(2), 0), round("blocklab", 2, Some(3), 1)];
        let theirs = [round("play", 1, Some(5), 3), round("play", 2, Some(7), 9)];
        let (a, b) = (by_endpoint(&ours), by_endpoint(&theirs));
        let s = comparison(&a[0], &b[0]);
        assert!(
            s.starts_with("Through the stall, /getDataAsync beside play (2 rounds each, at 450 req/s)"),
            "{s}"
        );
        assert!(
            s.contains("blocklab recovered sooner in every round (blocklab 2 (2–3) s, play 6 (5–7) s)"),
            "{s}"
        );
        assert!(s.contains("blocklab failed fewer in every round (blocklab 0 (0–1), play 6 (3–9))"), "{s}");
        // Overlapping: 2–6 s against 5–7 s, and the same failures: nothing claimed.
        let ours = [round("blocklab", 1, Some(2), 3), round("blocklab", 2, Some(6), 9)];
        let s = comparison(&by_endpoint(&ours)[0], &b[0]);
        assert!(s.contains("recovery: blocklab 4 (2–6) s, play 6 (5–7) s: within each other's range, so no difference is claimed"), "{s}");
        assert!(!s.contains("sooner") && !s.contains("later") && !s.contains("fewer"), "{s}");
        // One round each: never a claim, however far apart.
        let s = comparison(&by_endpoint(&ours[..1])[0], &by_endpoint(&theirs[1..])[0]);
        assert!(s.contains("(one round on a side, so no difference is claimed)"), "{s}");
        assert!(!s.contains("sooner"), "{s}");
        // Recovered in every round against none: a difference the run's end bounds.
        let never = [round("play", 1, None, 40), round("play", 2, None, 52)];
        let s = comparison(&a[0], &by_endpoint(&never)[0]);
        assert!(s.contains("blocklab recovered in every round and play in none within the run"), "{s}");
        // Recovered in one round of two: not claimed either way.
        let once = [round("play", 1, Some(1), 0), round("play", 2, None, 0)];
        let s = comparison(&a[0], &by_endpoint(&once)[0]);
        assert!(
            s.contains("blocklab recovered in 2 of 2 rounds and play in 1 of 2: no difference is claimed"),
            "{s}"
        );
    }

    #[test]
    fn the_method_names_the_runs_connections() {
        let how = how(64);
        assert!(how.contains("open-loop load on 64 connections"), "{how}");
        assert!(!how.contains("200"), "{how}");
    }
}
