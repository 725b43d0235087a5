//! Faults on the link, under load (`blocklab bench --db-faults`): each
//! target's database endpoints, each on a fresh server reading through
//! Toxiproxy, meet four faults in turn — the connection reset in mid-query,
//! a link that stops answering, answers cut short, a slow close — while
//! [`CLIENTS`] clients send request after request and check that each answer
//! carries the node asked for. Per fault: the requests sent while it held
//! and after its removal, answered right, answered with another node, or
//! failed (by kind); the longest; how long after its removal every answer
//! was right again; whether the server lived. The same faults and figures
//! for every target, the Play peer's whatever they are.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::db::content_record;
use crate::harness::get::{get, same_node};
use crate::harness::toxiproxy::{Fault, Stream, Toxic};

/// Clients sending at once, each one request after another on a new
/// connection (a few: the faults, not the load, are the subject).
pub const CLIENTS: usize = 8;
/// A client's pause between its requests.
const PAUSE: Duration = Duration::from_millis(20);
/// A request not answered within this is counted as hung.
pub const HANG: Duration = Duration::from_secs(30);
/// Healthy seconds before the first fault (the server's first reads).
const HEALTHY: Duration = Duration::from_secs(3);
/// How long each fault holds.
pub const HOLD: Duration = Duration::from_secs(3);
/// How long after each fault's removal its requests are watched (the next
/// fault's healthy lead as well).
pub const AFTER: Duration = Duration::from_secs(8);

/// The four faults: each toxic on the database's answers, and what it
/// stands for.
pub fn faults() -> Vec<(Toxic, &'static str)> {
    vec![
        (
            Toxic::new("reset", Stream::Downstream, Fault::ResetPeer { after: Duration::ZERO }),
            "the connection reset in mid-query (the answer on its way, then a TCP RST)",
        ),
        (
            Toxic::new("stall", Stream::Downstream, Fault::Timeout { after: None }),
            "a link that stops answering (no byte back, the connection kept open)",
        ),
        (
            Toxic::new("cut", Stream::Downstream, Fault::LimitData { bytes: 64 }),
            "answers cut short (64 bytes per connection, then closed)",
        ),
        (
            Toxic::new(
                "slow-close",
                Stream::Downstream,
                Fault::SlowClose { delay: Duration::from_millis(1500) },
            ),
            "a slow close (each close delayed 1.5 s)",
        ),
    ]
}

/// What the requests of one window did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcomes {
    /// Answered 200 with the node asked for.
    pub right: u64,
    /// Answered 200 with another node (or none): never acceptable.
    pub wrong: u64,
    /// Failed, by kind: `status NNN`, `hung` (no answer within [`HANG`]), or
    /// the client's error (`connect`, `no whole answer`, …).
    pub failed: BTreeMap<String, u64>,
    /// The longest any took, answered or failed (ms).
    pub longest_ms: f64,
}

impl Outcomes {
    /// Every request of the window.
    pub fn total(&self) -> u64 {
        self.right + self.wrong + self.failed.values().sum::<u64>()
    }

    /// The failures in words: `12 status 503, 1 hung`, or `none`.
    pub fn failed_text(&self) -> String {
        let kinds: Vec<String> = self.failed.iter().map(|(kind, n)| format!("{n} {kind}")).collect();
        if kinds.is_empty() { "none".to_string() } else { kinds.join(", ") }
    }
}

/// One target's endpoint through one fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultRecord {
    /// The target.
    pub target: String,
    /// The endpoint.
    pub api: String,
    /// Toxiproxy's kind of toxic (`reset_peer`, `timeout`, `limit_data`, `slow_close`).
    pub fault: String,
    /// What it stands for, in words.
    pub what: String,
    /// How long it held (s).
    pub held_s: f64,
    /// The requests sent while it held.
    pub during: Outcomes,
    /// The requests sent after its removal, for [`AFTER`].
    pub after: Outcomes,
    /// Seconds from its removal to the first request after which every one
    /// sent was answered right (0: none failed after it; null: still failing
    /// at the end of the window).
    pub recovered_after_s: Option<f64>,
    /// Whether the server was alive after it.
    pub survived: bool,
}

impl FaultRecord {
    /// The longest any of its requests took, while the fault held or after (ms).
    pub fn longest_ms(&self) -> f64 {
        self.during.longest_ms.max(self.after.longest_ms)
    }
}

/// One request a client sent.
#[derive(Debug, Clone)]
struct Sent {
    at: Instant,
    took: Duration,
    /// `None`: right; `Some("wrong")` or the failure's kind.
    outcome: Option<String>,
}

/// What `GET path?id=` answered, as a [`Sent`] outcome.
fn classify(addr: SocketAddr, path: &str, id: i64) -> Option<String> {
    match get(addr, &format!("{path}?id={id}"), HANG) {
        Ok(a) if a.status == 200 => {
            let want = serde_json::to_value(content_record(id)).unwrap_or_default();
            let got: serde_json::Value = serde_json::from_str(&a.body).unwrap_or_default();
            (!same_node(&got, &want)).then(|| "wrong".to_string())
        }
        Ok(a) => Some(format!("status {}", a.status)),
        Err(e) => Some(e.split(':').next().unwrap_or("error").trim().to_string()),
    }
}

/// The requests sent in `[from, to)` and answered (or failed) by `done`:
/// one still in hand at `done` may meet what comes next (the next fault).
fn sent_in(log: &[Sent], from: Instant, to: Instant, done: Instant) -> impl Iterator<Item = &Sent> {
    log.iter().filter(move |s| s.at >= from && s.at < to && s.at + s.took <= done)
}

/// The outcomes of the requests sent in `[from, to)`, done by `done`.
fn window(log: &[Sent], from: Instant, to: Instant, done: Instant) -> Outcomes {
    let mut out = Outcomes::default();
    for s in sent_in(log, from, to, done) {
        match s.outcome.as_deref() {
            None => out.right += 1,
            Some("wrong") => out.wrong += 1,
            Some(kind) => *out.failed.entry(kind.to_string()).or_default() += 1,
        }
        out.longest_ms = out.longest_ms.max(s.took.as_secs_f64() * 1e3);
    }
    out
}

/// Seconds from `removed` to the first request sent after the last one
/// that was not right, of those done by `end` (0 when every one was right;
/// `None` when the last of them was not right, or there was none).
fn recovered_after(log: &[Sent], removed: Instant, end: Instant) -> Option<f64> {
    let after: Vec<&Sent> = sent_in(log, removed, end, end).collect();
    let last = after.last()?;
    if last.outcome.is_some() {
        return None;
    }
    match after.iter().rposition(|s| s.outcome.is_some()) {
        None => Some(0.0),
        Some(i) => Some((after[i + 1].at - removed).as_secs_f64()),
    }
}

/// A server under [`CLIENTS`] checking clients: started by [`Clients::start`],
/// stopped (and its log returned) by [`Clients::stop`].
pub struct Clients {
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Sent>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Clients {
    /// [`CLIENTS`] threads sending `GET path?id=` to `addr`, ids 1..=`nodes` in turn.
    pub fn start(addr: SocketAddr, path: &'static str, nodes: u64) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let threads = (0..CLIENTS)
            .map(|c| {
                let (stop, log) = (stop.clone(), log.clone());
                std::thread::spawn(move || {
                    let mut n = c as u64 * 131;
                    while !stop.load(Relaxed) {
                        n += 7;
                        let id = (n % nodes.max(1)) as i64 + 1;
                        let at = Instant::now();
                        let outcome = classify(addr, path, id);
                        let took = at.elapsed();
                        // No answer within the bound: whatever the socket said, it hung.
                        let outcome = if outcome.is_some() && took >= HANG {
                            Some("hung".to_string())
                        } else {
                            outcome
                        };
                        let sent = Sent { at, took, outcome };
                        log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(sent);
                        std::thread::sleep(PAUSE);
                    }
                })
            })
            .collect();
        Clients { stop, log, threads }
    }

    /// Every request sent so far, in the order they were sent.
    fn log(&self) -> Vec<Sent> {
        let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        log.sort_by_key(|s| s.at);
        log
    }

    /// Stops the clients (each after its request in hand, at most [`HANG`]).
    fn stop(self) {
        self.stop.store(true, Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Puts each of [`faults`] on `proxy` in turn under `clients`: healthy
/// first, each held [`HOLD`] then removed and watched for [`AFTER`].
/// `alive` says after each whether the server still runs. One record per
/// fault; the error names a fault Toxiproxy refused.
pub fn run(
    target: &str,
    api: &str,
    proxy: &crate::harness::toxiproxy::Proxy,
    clients: Clients,
    alive: &mut dyn FnMut() -> bool,
    interrupt: &AtomicBool,
) -> Result<Vec<FaultRecord>, String> {
    std::thread::sleep(HEALTHY);
    let mut marks = Vec::new();
    let mut refused = None;
    for (toxic, what) in faults() {
        if interrupt.load(Relaxed) {
            break;
        }
        let added = Instant::now();
        if let Err(e) = proxy.add(&toxic) {
            refused = Some(format!("{}: {e}", toxic.fault.kind()));
            break;
        }
        std::thread::sleep(HOLD);
        let removed_ok = proxy.remove(&toxic.name);
        let removed = Instant::now();
        if let Err(e) = removed_ok {
            refused = Some(format!("removing {}: {e}", toxic.fault.kind()));
            break;
        }
        std::thread::sleep(AFTER);
        marks.push((toxic.fault.kind().to_string(), what, added, removed, Instant::now(), alive()));
    }
    let log = clients.log();
    clients.stop();
    let records = marks
        .into_iter()
        .map(|(fault, what, added, removed, end, survived)| FaultRecord {
            target: target.to_string(),
            api: api.to_string(),
            fault,
            what: what.to_string(),
            held_s: (removed - added).as_secs_f64(),
            // A request sent while the fault held counts there, however late it ended; one
            // sent after its removal counts if it ended before the next fault came.
            during: window(&log, added, removed, end),
            after: window(&log, removed, end, end),
            recovered_after_s: recovered_after(&log, removed, end),
            survived,
        })
        .collect();
    match refused {
        Some(e) => Err(e),
        None => Ok(records),
    }
}

/// One sentence per record: how the target's endpoint came through the fault.
pub fn sentence(r: &FaultRecord) -> String {
    let recovered = match r.recovered_after_s {
        _ if !r.survived => "and did not survive it".to_string(),
        Some(0.0) => "and every request after its removal was answered right".to_string(),
        Some(s) => format!("and answered right again {s:.1} s after its removal, without a restart"),
        None => format!("and was still failing {:.0} s after its removal", AFTER.as_secs_f64()),
    };
    let wrong = if r.during.wrong + r.after.wrong > 0 {
        format!("; {} answers carried another node than the one asked for", r.during.wrong + r.after.wrong)
    } else {
        String::new()
    };
    format!(
        "{} {} under {} ({}, {:.0} s): {} of {} requests answered right while it lasted, failed: {}, the longest \
         {:.0} ms; {recovered}{wrong}.",
        r.target,
        r.api,
        r.fault,
        r.what,
        r.held_s,
        r.during.right,
        r.during.total(),
        r.during.failed_text(),
        r.longest_ms()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(start: Instant, at_ms: u64, took_ms: u64, outcome: Option<&str>) -> Sent {
        Sent {
            at: start + Duration::from_millis(at_ms),
            took: Duration::from_millis(took_ms),
            outcome: outcome.map(str::to_string),
        }
    }

    #[test]
    fn windows_count_by_kind_and_recovery_waits_for_the_last_failure() {
        let t = Instant::now();
        let log = vec![
            sent(t, 0, 5, None),
            sent(t, 100, 2000, Some("status 503")),
            sent(t, 200, 30_000, Some("hung")),
            sent(t, 300, 4, Some("wrong")),
            // removed at 1000
            sent(t, 1100, 9, Some("status 503")),
            sent(t, 1500, 6, None),
            sent(t, 1900, 6, None),
        ];
        let at = |ms| t + Duration::from_millis(ms);
        let during = window(&log, at(0), at(1000), at(40_000));
        assert_eq!((during.right, during.wrong, during.total()), (1, 1, 4));
        assert_eq!(during.failed_text(), "1 hung, 1 status 503");
        assert_eq!(during.longest_ms, 30_000.0);
        assert_eq!(recovered_after(&log, at(1000), at(3000)), Some(0.5));
        // Nothing failed after the removal: recovered at once.
        assert_eq!(recovered_after(&log, at(1400), at(3000)), Some(0.0));
        // Still failing at the window's end.
        assert_eq!(recovered_after(&log, at(1000), at(1200)), None);
        // A request still in hand when the window ends (the next fault's) is not the window's.
        let late = [log.clone(), vec![sent(t, 2900, 500, Some("status 503"))]].concat();
        assert_eq!(recovered_after(&late, at(1000), at(3000)), Some(0.5));
        assert_eq!(window(&late, at(1000), at(3000), at(3000)).total(), 3);
        let record = FaultRecord {
            target: "play".into(),
            api: "/getDataAsync".into(),
            fault: "timeout".into(),
            what: "a link that stops answering".into(),
            held_s: 3.0,
            during,
            after: window(&log, at(1000), at(3000), at(3000)),
            recovered_after_s: Some(0.5),
            survived: true,
        };
        let s = sentence(&record);
        assert!(
            s.starts_with("play /getDataAsync under timeout (a link that stops answering, 3 s): 1 of 4"),
            "{s}"
        );
        assert!(
            s.contains("answered right again 0.5 s after its removal") && s.contains("1 answers carried"),
            "{s}"
        );
    }
}
