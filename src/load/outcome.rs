//! What a run recorded: per engine thread a [`ThreadStats`] (no sharing while
//! the load runs), merged at the end into one [`RunResult`].
//!
//! Latencies go into HdrHistograms at microsecond resolution (3 significant
//! digits, 1 µs to 1 hour): constant memory whatever the length of the run.

use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;

use super::client::{ErrorKind, Reply};

/// Highest latency a histogram holds, in microseconds (one hour); longer is clamped.
const MAX_US: u64 = 3_600_000_000;

/// An empty latency histogram: 1 µs to one hour, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_US)
}

/// One second of a run: what one thread recorded in it, or (added up) all
/// threads. The timeline and the `--hdr-log` file are made of these.
#[derive(Clone)]
pub struct Interval {
    /// Seconds since the start: the interval covers `[index, index + 1)`.
    pub index: u64,
    /// Its length (shorter for the last one).
    pub length: Duration,
    /// Latency from the actual send (µs).
    pub measured: Histogram<u64>,
    /// Open loop: latency from the due time (µs).
    pub corrected: Option<Histogram<u64>>,
    /// Requests that got a whole response, any status.
    pub completed: u64,
    /// Of those, responses with a status of 400 and above.
    pub bad_status: u64,
    /// Requests that failed without a response, by [`ErrorKind::index`].
    pub errors: [u64; ErrorKind::ALL.len()],
    /// Connections open at the end of the second.
    pub connections: u64,
}

impl Interval {
    /// An empty second; `open_loop` adds the corrected histogram.
    pub fn new(open_loop: bool) -> Interval {
        Interval {
            index: 0,
            length: Duration::ZERO,
            measured: histogram(),
            corrected: open_loop.then(histogram),
            completed: 0,
            bad_status: 0,
            errors: [0; ErrorKind::ALL.len()],
            connections: 0,
        }
    }

    /// Adds another thread's figures of the same second.
    pub fn add(&mut self, other: &Interval) {
        self.measured.add(&other.measured).expect("same histogram bounds");
        if let (Some(a), Some(b)) = (self.corrected.as_mut(), other.corrected.as_ref()) {
            a.add(b).expect("same histogram bounds");
        }
        self.completed += other.completed;
        self.bad_status += other.bad_status;
        for (a, b) in self.errors.iter_mut().zip(&other.errors) {
            *a += b;
        }
        self.connections += other.connections;
        self.length = self.length.max(other.length);
    }
}

/// One second of the timeline, as the JSON report has it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Second {
    /// Seconds since the start: this row covers `[second, second + length_s)`.
    pub second: u64,
    /// Its length (s): 1, shorter for the last one.
    pub length_s: f64,
    /// Requests that got a whole response in it, any status.
    pub requests: u64,
    /// Of those, responses with a status of 400 and above.
    pub status_4xx_5xx: u64,
    /// Requests that failed without a response in it, by kind (kinds with none left out).
    pub errors: std::collections::BTreeMap<String, u64>,
    /// Median latency of the requests that completed in it (ms; 0 when none did).
    pub p50_ms: f64,
    /// 99th percentile latency (ms).
    pub p99_ms: f64,
    /// Open loop: 99th percentile of the corrected latency (ms).
    pub corrected_p99_ms: Option<f64>,
    /// Connections open at its end.
    pub connections: u64,
}

/// What one request of a `--urls` run got, summed over the run.
#[derive(Clone)]
pub struct UrlStats {
    /// Requests that got a whole response, any status.
    pub completed: u64,
    /// Of those, responses with a status of 400 and above.
    pub bad_status: u64,
    /// Requests that failed without a response (any kind).
    pub errors: u64,
    /// Send to last body byte, per completed request (µs).
    pub latency: Histogram<u64>,
}

impl Default for UrlStats {
    fn default() -> UrlStats {
        UrlStats { completed: 0, bad_status: 0, errors: 0, latency: histogram() }
    }
}

/// The figures one engine thread recorded.
pub struct ThreadStats {
    /// Send to last body byte, per completed request (µs). Without keep-alive
    /// it includes connecting (and the TLS handshake), as the client saw it.
    pub latency: Histogram<u64>,
    /// Open loop only: from the time the request *should* have been sent (µs).
    pub corrected: Option<Histogram<u64>>,
    /// The current second's figures, handed to the timeline (and the
    /// `--hdr-log` writer) and emptied every second.
    pub interval: Interval,
    /// Connections open now (a gauge, for the timeline).
    pub open_connections: u64,
    /// Time to establish each new connection (µs): TCP only, the TLS
    /// handshake is in `handshake`.
    pub connect: Histogram<u64>,
    /// `https://`: time of each TLS handshake that succeeded, from the
    /// established TCP connection to the end of the handshake (µs).
    pub handshake: Histogram<u64>,
    /// Of those handshakes, the ones that resumed an earlier session.
    pub resumed: u64,
    /// What the first TLS handshake negotiated (version, cipher suite, ALPN).
    pub tls_session: Option<String>,
    /// Why the first failed TLS handshake failed, in rustls' words.
    pub tls_first_error: Option<String>,
    /// `--urls`: per request of the file, in its order (empty otherwise).
    pub urls: Vec<UrlStats>,
    /// Requests the run started (each ends as exactly one of the three below).
    pub sent: u64,
    /// Requests that got a whole response, any status.
    pub completed: u64,
    /// Completed with 2xx or 3xx.
    pub ok: u64,
    /// Completed responses by status code (index = code; codes 0..=999).
    pub statuses: Vec<u64>,
    /// Requests that failed without a response, by [`ErrorKind::index`].
    pub errors: [u64; ErrorKind::ALL.len()],
    /// Requests still open when the `-z` deadline came.
    pub in_flight_at_deadline: u64,
    /// Connections opened, successfully.
    pub connections_opened: u64,
    /// Response head bytes (status line and headers).
    pub head_bytes: u64,
    /// Response body bytes.
    pub body_bytes: u64,
    /// The `Server` header of the first response.
    pub server: Option<String>,
    /// The body length of the first 2xx response.
    pub document_length: Option<u64>,
    /// Open loop: requests that were due before the end but never sent.
    pub backlog: u64,
    /// Open loop: requests sent more than 1 ms after their scheduled time.
    pub late_sends: u64,
    /// Open loop: the largest delay of a send behind its schedule.
    pub max_send_lag: Duration,
}

impl ThreadStats {
    /// Empty figures; `open_loop` adds the corrected histogram.
    pub fn new(open_loop: bool) -> ThreadStats {
        ThreadStats {
            latency: histogram(),
            corrected: open_loop.then(histogram),
            interval: Interval::new(open_loop),
            open_connections: 0,
            connect: histogram(),
            handshake: histogram(),
            resumed: 0,
            tls_session: None,
            tls_first_error: None,
            urls: Vec::new(),
            sent: 0,
            completed: 0,
            ok: 0,
            statuses: vec![0; 1000],
            errors: [0; ErrorKind::ALL.len()],
            in_flight_at_deadline: 0,
            connections_opened: 0,
            head_bytes: 0,
            body_bytes: 0,
            server: None,
            document_length: None,
            backlog: 0,
            late_sends: 0,
            max_send_lag: Duration::ZERO,
        }
    }

    /// Records a whole response. `latency` is from the actual send,
    /// `corrected` (open loop) from the scheduled send.
    pub fn response(&mut self, reply: &Reply, latency: Duration, corrected: Option<Duration>) {
        self.completed += 1;
        if (200..400).contains(&reply.status) {
            self.ok += 1;
            if self.document_length.is_none() {
                self.document_length = Some(reply.body_bytes);
            }
        }
        self.statuses[usize::from(reply.status.min(999))] += 1;
        self.head_bytes += reply.head_bytes;
        self.body_bytes += reply.body_bytes;
        if self.server.is_none() {
            self.server.clone_from(&reply.server);
        }
        self.latency.saturating_record(micros(latency));
        if let (Some(h), Some(c)) = (self.corrected.as_mut(), corrected) {
            h.saturating_record(micros(c));
        }
        let now = &mut self.interval;
        now.completed += 1;
        if reply.status >= 400 {
            now.bad_status += 1;
        }
        now.measured.saturating_record(micros(latency));
        if let (Some(h), Some(c)) = (now.corrected.as_mut(), corrected) {
            h.saturating_record(micros(c));
        }
    }

    /// Records a request that failed without a response.
    pub fn error(&mut self, kind: ErrorKind) {
        self.errors[kind.index()] += 1;
        self.interval.errors[kind.index()] += 1;
    }

    /// Records, for `--urls` request `url`, a whole response.
    pub fn url_response(&mut self, url: usize, status: u16, latency: Duration) {
        let u = &mut self.urls[url];
        u.completed += 1;
        if status >= 400 {
            u.bad_status += 1;
        }
        u.latency.saturating_record(micros(latency));
    }

    /// Records, for `--urls` request `url`, a failure without a response.
    pub fn url_error(&mut self, url: usize) {
        self.urls[url].errors += 1;
    }

    /// Records a TLS handshake that succeeded.
    pub fn handshaken(&mut self, took: Duration, resumed: bool, session: impl FnOnce() -> String) {
        self.handshake.saturating_record(micros(took));
        self.resumed += u64::from(resumed);
        if self.tls_session.is_none() {
            self.tls_session = Some(session());
        }
    }

    /// Records why a TLS handshake failed (the first reason is kept).
    pub fn tls_failed(&mut self, reason: String) {
        if self.tls_first_error.is_none() {
            self.tls_first_error = Some(reason);
        }
    }

    /// Records how long a new connection took to establish.
    pub fn connected(&mut self, took: Duration) {
        self.connections_opened += 1;
        self.open_connections += 1;
        self.connect.saturating_record(micros(took));
    }

    /// Records that a connection was closed.
    pub fn disconnected(&mut self) {
        self.open_connections = self.open_connections.saturating_sub(1);
    }

    /// This second's figures, `index` seconds into the run and `length`
    /// long, taken out (the counters start again from zero).
    pub fn take_interval(&mut self, index: u64, length: Duration) -> Interval {
        let mut next = Interval::new(self.interval.corrected.is_some());
        next.connections = self.open_connections;
        let mut taken = std::mem::replace(&mut self.interval, next);
        (taken.index, taken.length, taken.connections) = (index, length, self.open_connections);
        taken
    }

    /// Adds another thread's figures to these.
    pub fn merge(&mut self, other: &ThreadStats) {
        let add = |a: &mut Histogram<u64>, b: &Histogram<u64>| a.add(b).expect("same histogram bounds");
        add(&mut self.latency, &other.latency);
        if let (Some(a), Some(b)) = (self.corrected.as_mut(), other.corrected.as_ref()) {
            add(a, b);
        }
        add(&mut self.connect, &other.connect);
        add(&mut self.handshake, &other.handshake);
        self.resumed += other.resumed;
        if self.tls_session.is_none() {
            self.tls_session.clone_from(&other.tls_session);
        }
        if self.tls_first_error.is_none() {
            self.tls_first_error.clone_from(&other.tls_first_error);
        }
        if self.urls.len() < other.urls.len() {
            self.urls.resize(other.urls.len(), UrlStats::default());
        }
        for (a, b) in self.urls.iter_mut().zip(&other.urls) {
            a.completed += b.completed;
            a.bad_status += b.bad_status;
            a.errors += b.errors;
            add(&mut a.latency, &b.latency);
        }
        self.sent += other.sent;
        self.completed += other.completed;
        self.ok += other.ok;
        for (a, b) in self.statuses.iter_mut().zip(&other.statuses) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(&other.errors) {
            *a += b;
        }
        self.in_flight_at_deadline += other.in_flight_at_deadline;
        self.connections_opened += other.connections_opened;
        self.head_bytes += other.head_bytes;
        self.body_bytes += other.body_bytes;
        if self.server.is_none() {
            self.server.clone_from(&other.server);
        }
        if self.document_length.is_none() {
            self.document_length = other.document_length;
        }
        self.backlog += other.backlog;
        self.late_sends += other.late_sends;
        self.max_send_lag = self.max_send_lag.max(other.max_send_lag);
    }

    /// Failed requests, all kinds.
    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Completed responses with status 400 and above, by code.
    pub fn error_statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.statuses
            .iter()
            .enumerate()
            .filter(|(code, n)| *code >= 400 && **n > 0)
            .map(|(c, n)| (c as u16, *n))
    }
}

/// A whole run: the merged figures and the time they took.
pub struct RunResult {
    /// Second by second (every thread's figures of each second added up).
    pub timeline: Vec<Second>,
    /// Every thread's figures, merged.
    pub stats: ThreadStats,
    /// From the first scheduled send to the end of the last request (or the deadline).
    pub duration: Duration,
    /// When the run started (wall clock).
    pub started_at: SystemTime,
    /// Engine threads used.
    pub threads: usize,
}

impl RunResult {
    /// Completed requests per second.
    pub fn rps(&self) -> f64 {
        self.stats.completed as f64 / self.duration.as_secs_f64().max(1e-9)
    }

    /// Requests that ended (completed or failed) per second: what the target
    /// actually absorbed, compared with `--rate` in open loop.
    pub fn achieved_rate(&self) -> f64 {
        (self.stats.completed + self.stats.error_total()) as f64 / self.duration.as_secs_f64().max(1e-9)
    }

    /// Whether `sent = completed + errors + in flight` holds.
    pub fn is_balanced(&self) -> bool {
        let s = &self.stats;
        s.sent == s.completed + s.error_total() + s.in_flight_at_deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16) -> Reply {
        Reply { status, head_bytes: 100, body_bytes: 5, server: Some("x".into()) }
    }

    #[test]
    fn merge_adds_everything() {
        let mut a = ThreadStats::new(true);
        let mut b = ThreadStats::new(true);
        a.sent = 3;
        a.response(&reply(200), Duration::from_millis(2), Some(Duration::from_millis(3)));
        a.response(&reply(503), Duration::from_millis(4), Some(Duration::from_millis(4)));
        a.error(ErrorKind::ConnectRefused);
        b.sent = 2;
        b.response(&reply(302), Duration::from_millis(8), Some(Duration::from_millis(80)));
        b.in_flight_at_deadline = 1;
        a.merge(&b);
        assert_eq!((a.sent, a.completed, a.ok, a.error_total(), a.in_flight_at_deadline), (5, 3, 2, 1, 1));
        assert_eq!(a.error_statuses().collect::<Vec<_>>(), vec![(503, 1)]);
        assert_eq!(a.latency.len(), 3);
        assert_eq!(
            a.corrected.as_ref().unwrap().max(),
            a.corrected.as_ref().unwrap().highest_equivalent(80_000)
        );
        let result = RunResult {
            stats: a,
            duration: Duration::from_secs(1),
            started_at: SystemTime::now(),
            threads: 2,
            timeline: Vec::new(),
        };
        assert!(result.is_balanced());
        assert_eq!(result.rps(), 3.0);
    }
}
