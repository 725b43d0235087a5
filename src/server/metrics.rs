//! What the server measures about itself, and its Prometheus text exposition.
//!
//! Counters and histograms are plain atomics in fixed arrays (one slot per
//! endpoint, per status, per bucket): recording a request costs a few relaxed
//! atomic adds and no allocation or lock, so measuring does not disturb what is
//! measured. Every metric is documented once, in its `# HELP` line, with how to
//! read it; the experiment runner and the report use the same names.

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use super::capacity::Capacity;
use super::endpoint::Endpoint;
use super::exposition::{escape, help};
use super::runtime::{RuntimeProbe, render_runtimes};

/// Upper bounds of the latency histogram buckets, in microseconds.
const BUCKETS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

/// Status codes counted by name. Two more slots follow them: `other` (any
/// other code) and `cancelled` (the request was dropped unanswered, e.g. its
/// client went away or the server shut down).
const CODES: [u16; 7] = [200, 400, 404, 405, 500, 503, 504];
const OTHER: usize = CODES.len();
const CANCELLED: usize = CODES.len() + 1;
const CODE_SLOTS: usize = CODES.len() + 2;

/// A gauge that also remembers the highest value it reached since start.
#[derive(Debug, Default)]
pub struct PeakGauge {
    current: AtomicI64,
    peak: AtomicI64,
}

impl PeakGauge {
    /// Adds one and raises the peak if needed.
    pub fn inc(&self) {
        let now = self.current.fetch_add(1, Relaxed) + 1;
        self.peak.fetch_max(now, Relaxed);
    }

    /// Takes one away.
    pub fn dec(&self) {
        self.current.fetch_sub(1, Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> i64 {
        self.current.load(Relaxed)
    }

    /// The highest value since start.
    pub fn peak(&self) -> i64 {
        self.peak.load(Relaxed)
    }
}

#[derive(Default)]
struct EndpointStats {
    in_flight: PeakGauge,
    by_code: [AtomicU64; CODE_SLOTS],
    buckets: [AtomicU64; BUCKETS_US.len() + 1],
    /// Sum of latencies in nanoseconds (a /test request takes well under a microsecond).
    sum_ns: AtomicU64,
    /// The longest latency so far, microseconds: finer than the buckets
    /// (a `/delay?ms=5000` answered 400 ms late falls in the same one).
    max_us: AtomicU64,
}

/// Figures of the actor system, updated by the actors and the handlers.
#[derive(Debug, Default)]
pub struct ActorGauges {
    /// Jobs sent to the blocking pool's router and not yet started by a worker.
    pub pool_mailbox: PeakGauge,
    /// Worker actors started by the pool's supervisor (restarts included).
    pub pool_worker_starts: AtomicU64,
    /// Messages sent to the async actor and not yet handled by it.
    pub async_mailbox: PeakGauge,
    /// Reads the async actor started and that have not completed yet.
    pub async_reads_in_flight: PeakGauge,
}

/// All the server's own figures.
#[derive(Default)]
pub struct Metrics {
    endpoints: [EndpointStats; Endpoint::ALL.len()],
    db_errors: [AtomicU64; DB_ERROR_KINDS.len()],
    /// Blocking reads running on tokio's blocking pool (`/getDataSpawnBlocking`).
    pub spawn_blocking_in_flight: PeakGauge,
    /// Figures of the actor system.
    pub actors: ActorGauges,
    /// Connections accepted and not yet closed.
    pub connections_open: PeakGauge,
    /// Connections accepted since start.
    pub connections_accepted: AtomicU64,
    /// Request threads running a handler now (`pool` and `thread` models).
    pub handler_threads_busy: PeakGauge,
    /// Requests waiting for a free pool thread (`pool` model).
    pub handler_queue: PeakGauge,
    /// Threads started for one request each (`thread` model).
    pub handler_threads_started: AtomicU64,
    /// Admission control's figures and the worker processes'.
    pub capacity: Capacity,
}

/// A request that has started; recording it on drop keeps in-flight honest
/// even when a handler panics or its connection goes away mid-request.
pub struct RequestTimer {
    metrics: Arc<Metrics>,
    endpoint: usize,
    started: std::time::Instant,
    finished: bool,
}

impl RequestTimer {
    fn stats(&self) -> &EndpointStats {
        &self.metrics.endpoints[self.endpoint]
    }

    /// Records the request as finished with `status`.
    pub fn finish(mut self, status: u16) {
        let elapsed = self.started.elapsed();
        let us = elapsed.as_micros().min(u64::MAX as u128) as u64;
        let code = CODES.iter().position(|c| *c == status).unwrap_or(OTHER);
        let stats = self.stats();
        stats.by_code[code].fetch_add(1, Relaxed);
        let bucket = BUCKETS_US.partition_point(|bound| *bound < us);
        stats.buckets[bucket].fetch_add(1, Relaxed);
        stats.sum_ns.fetch_add(elapsed.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
        stats.max_us.fetch_max(us, Relaxed);
        self.finished = true;
        // in_flight is decremented by Drop.
    }
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        let stats = self.stats();
        if !self.finished {
            stats.by_code[CANCELLED].fetch_add(1, Relaxed);
        }
        stats.in_flight.dec();
    }
}

impl Metrics {
    /// Requests received and not yet answered, every endpoint's.
    pub fn requests_in_flight(&self) -> u64 {
        let sum: i64 = self.endpoints.iter().map(|e| e.in_flight.get()).sum();
        u64::try_from(sum).unwrap_or(0)
    }

    /// Starts timing a request to `endpoint`.
    pub fn start(self: &Arc<Self>, endpoint: Endpoint) -> RequestTimer {
        self.endpoints[endpoint.index()].in_flight.inc();
        RequestTimer {
            metrics: self.clone(),
            endpoint: endpoint.index(),
            started: std::time::Instant::now(),
            finished: false,
        }
    }

    /// Counts a failed database read by the kind of failure.
    pub fn db_error(&self, kind: &'static str) {
        let slot = DB_ERROR_KINDS.iter().position(|k| *k == kind).unwrap_or(DB_ERROR_KINDS.len() - 1);
        self.db_errors[slot].fetch_add(1, Relaxed);
    }

    /// Requests to `endpoint` answered so far, all statuses (cancelled ones excluded).
    pub fn requests(&self, endpoint: Endpoint) -> u64 {
        self.endpoints[endpoint.index()].by_code[..CANCELLED].iter().map(|c| c.load(Relaxed)).sum()
    }

    /// The Prometheus text exposition of every figure.
    pub fn render(&self, info: &[(&str, String)], runtimes: &[&RuntimeProbe]) -> String {
        let mut out = String::with_capacity(16 * 1024);
        let w = &mut out;

        help(w, "blocklab_info", "gauge", "Always 1; the labels say how this server was started.");
        let labels: Vec<String> = info.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        let _ = writeln!(w, "blocklab_info{{{}}} 1", labels.join(","));

        help(
            w,
            "blocklab_http_requests_total",
            "counter",
            "Requests answered, by endpoint and status code (code=\"cancelled\": dropped unanswered \
             because the client left or the server stopped). Its rate is the server-side throughput; \
             a rising code=\"503\" means replies missed their limit or the database is down.",
        );
        for e in Endpoint::ALL {
            let s = &self.endpoints[e.index()];
            for (slot, count) in s.by_code.iter().enumerate() {
                let n = count.load(Relaxed);
                if n > 0 {
                    let code = match CODES.get(slot) {
                        Some(code) => code.to_string(),
                        None if slot == OTHER => "other".to_string(),
                        None => "cancelled".to_string(),
                    };
                    let _ = writeln!(
                        w,
                        "blocklab_http_requests_total{{endpoint=\"{}\",code=\"{code}\"}} {n}",
                        e.path()
                    );
                }
            }
        }

        help(
            w,
            "blocklab_http_requests_in_flight",
            "gauge",
            "Requests received and not yet answered, by endpoint. Far above the load's concurrency \
             means requests pile up inside the server.",
        );
        for e in Endpoint::ALL {
            let v = self.endpoints[e.index()].in_flight.get();
            let _ = writeln!(w, "blocklab_http_requests_in_flight{{endpoint=\"{}\"}} {v}", e.path());
        }

        help(
            w,
            "blocklab_http_request_duration_seconds",
            "histogram",
            "Time from the request reaching the router to its response being built, by endpoint. \
             Server-side only: time spent queued in the kernel or waiting for a blocked worker to \
             accept is not in it, so compare it with the load generator's latency to see queueing.",
        );
        for e in Endpoint::ALL {
            let s = &self.endpoints[e.index()];
            let count: u64 = s.buckets.iter().map(|b| b.load(Relaxed)).sum();
            if count == 0 {
                continue;
            }
            let mut cumulative = 0;
            for (i, bound) in BUCKETS_US.iter().enumerate() {
                cumulative += s.buckets[i].load(Relaxed);
                let le = *bound as f64 / 1e6;
                let _ = writeln!(
                    w,
                    "blocklab_http_request_duration_seconds_bucket{{endpoint=\"{}\",le=\"{le}\"}} {cumulative}",
                    e.path()
                );
            }
            let path = e.path();
            let sum = s.sum_ns.load(Relaxed) as f64 / 1e9;
            let _ = writeln!(
                w,
                "blocklab_http_request_duration_seconds_bucket{{endpoint=\"{path}\",le=\"+Inf\"}} {count}"
            );
            let _ = writeln!(w, "blocklab_http_request_duration_seconds_sum{{endpoint=\"{path}\"}} {sum}");
            let _ =
                writeln!(w, "blocklab_http_request_duration_seconds_count{{endpoint=\"{path}\"}} {count}");
        }

        help(
            w,
            "blocklab_http_request_duration_max_seconds",
            "gauge",
            "The longest request answered so far, by endpoint, from the same start and end as the \
             histogram's, to the microsecond. Set against the load generator's longest, it says \
             whether a late answer was late in the server or before the server read the request \
             (connect, accept queue) and after it wrote the answer.",
        );
        for e in Endpoint::ALL {
            let s = &self.endpoints[e.index()];
            let max = s.max_us.load(Relaxed);
            if max > 0 {
                let _ = writeln!(
                    w,
                    "blocklab_http_request_duration_max_seconds{{endpoint=\"{}\"}} {}",
                    e.path(),
                    max as f64 / 1e6
                );
            }
        }

        help(
            w,
            "blocklab_db_errors_total",
            "counter",
            "Database reads that failed, by kind (not_found, unavailable, refused, query, malformed). \
             unavailable rising means the database is down or unreachable; refused, that it answers \
             and refuses this server (credentials, database name, protocol).",
        );
        for (i, kind) in DB_ERROR_KINDS.iter().enumerate() {
            let _ = writeln!(
                w,
                "blocklab_db_errors_total{{kind=\"{kind}\"}} {}",
                self.db_errors[i].load(Relaxed)
            );
        }

        gauge_pair(
            w,
            "blocklab_spawn_blocking_in_flight",
            "Blocking reads running on tokio's blocking pool now (/getDataSpawnBlocking). Each holds \
             one blocking-pool thread; the pool grows a thread per concurrent read up to its limit.",
            &self.spawn_blocking_in_flight,
        );
        gauge_pair(
            w,
            "blocklab_actor_pool_mailbox_depth",
            "Jobs sent to the blocking actor pool (/getDataAkka) and not yet started by one of its \
             workers: the router's and the workers' mailboxes together. Growing means the 4 blocking \
             workers cannot keep up and requests queue for them.",
            &self.actors.pool_mailbox,
        );
        help(
            w,
            "blocklab_actor_pool_worker_starts_total",
            "counter",
            "Worker actors started by the pool's supervisor; above the pool size means workers \
             failed and were restarted.",
        );
        let _ = writeln!(
            w,
            "blocklab_actor_pool_worker_starts_total {}",
            self.actors.pool_worker_starts.load(Relaxed)
        );
        gauge_pair(
            w,
            "blocklab_actor_async_mailbox_depth",
            "Messages waiting in the async actor's mailbox (/getDataAkkaAsync). It stays near zero \
             because the actor only starts each read and moves on.",
            &self.actors.async_mailbox,
        );
        gauge_pair(
            w,
            "blocklab_actor_async_reads_in_flight",
            "Reads the async actor has started and that have not completed: how many database \
             round trips overlap.",
            &self.actors.async_reads_in_flight,
        );

        gauge_pair(
            w,
            "blocklab_connections_open",
            "TCP connections the server has accepted and not yet closed, idle keep-alive ones \
             included. Each costs memory whether or not a request is in flight; with \
             --max-connections it stops at the limit and further clients wait in the kernel's \
             accept queue.",
            &self.connections_open,
        );
        help(w, "blocklab_connections_accepted_total", "counter", "Connections accepted since start.");
        let _ =
            writeln!(w, "blocklab_connections_accepted_total {}", self.connections_accepted.load(Relaxed));
        self.capacity.render(w);
        gauge_pair(
            w,
            "blocklab_handler_threads_busy",
            "Request threads running a handler now (models pool and thread; always 0 for reactive \
             and lean, whose handlers run on the async workers). Under pool, equal to the pool \
             size means every thread is taken and new requests queue.",
            &self.handler_threads_busy,
        );
        gauge_pair(
            w,
            "blocklab_handler_queue_depth",
            "Requests waiting for a free pool thread (model pool). Above zero, requests wait \
             before their handler even starts: their latency is queueing, not work.",
            &self.handler_queue,
        );
        help(
            w,
            "blocklab_handler_threads_started_total",
            "counter",
            "OS threads started for one request each (model thread). Its rate is the rate of \
             thread creation the model pays for.",
        );
        let _ = writeln!(
            w,
            "blocklab_handler_threads_started_total {}",
            self.handler_threads_started.load(Relaxed)
        );

        render_runtimes(w, runtimes);
        render_process(w);
        out
    }
}

/// Kinds of database failure, as [`crate::db::GraphError::kind`] names them.
const DB_ERROR_KINDS: [&str; 5] = crate::db::GraphError::KINDS;

fn gauge_pair(w: &mut String, name: &str, text: &str, gauge: &PeakGauge) {
    help(w, name, "gauge", text);
    let _ = writeln!(w, "{name} {}", gauge.get());
    let peak = format!("{name}_peak");
    help(w, &peak, "gauge", &format!("Highest value of {name} since the server started."));
    let _ = writeln!(w, "{peak} {}", gauge.peak());
}

/// CPU time, memory and threads of this process, from /proc ([`crate::proc`]).
fn render_process(w: &mut String) {
    use crate::proc::{self, Pid};
    if let Some(cpu) = proc::cpu_time(Pid::Myself) {
        help(
            w,
            "process_cpu_seconds_total",
            "counter",
            "CPU time this process used, user plus system. Its rate over a run, divided by the \
             cores it may use, is how busy the server kept the CPU.",
        );
        let _ = writeln!(w, "process_cpu_seconds_total {}", cpu.as_secs_f64());
    }
    for (value, name, text) in [
        (
            proc::rss_bytes(Pid::Myself),
            "process_resident_memory_bytes",
            "Resident memory of this process now.",
        ),
        (
            proc::peak_rss_bytes(Pid::Myself),
            "process_resident_memory_peak_bytes",
            "Highest resident memory of this process since start.",
        ),
    ] {
        if let Some(bytes) = value {
            help(w, name, "gauge", text);
            let _ = writeln!(w, "{name} {bytes}");
        }
    }
    if let Some(threads) = proc::threads(Pid::Myself) {
        help(
            w,
            "process_threads",
            "gauge",
            "OS threads of this process now: async workers, pool or request threads, and \
             the fixed ones (main, signal, database clients). Each costs its stack and \
             allocator state in memory.",
        );
        let _ = writeln!(w, "process_threads {threads}");
    }
    if let Some((allocations, reallocations)) = super::allocations::counts() {
        help(
            w,
            "blocklab_allocations_total",
            "counter",
            "Calls to the global allocator for a new block since start (a build with the feature \
             count-allocations only). Its growth over a run divided by the requests answered is \
             allocations per request (bench/allocations.py).",
        );
        let _ = writeln!(w, "blocklab_allocations_total {allocations}");
        help(
            w,
            "blocklab_reallocations_total",
            "counter",
            "Calls to the global allocator to grow or shrink a block since start (count-allocations \
             builds only).",
        );
        let _ = writeln!(w, "blocklab_reallocations_total {reallocations}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_and_counts_every_request() {
        let m = Arc::new(Metrics::default());
        for _ in 0..3 {
            m.start(Endpoint::Test).finish(200);
        }
        m.start(Endpoint::Test).finish(503);
        drop(m.start(Endpoint::Test));
        let text = m.render(&[("db", "embedded".into())], &[]);
        assert!(text.contains("blocklab_http_requests_total{endpoint=\"/test\",code=\"200\"} 3"), "{text}");
        assert!(text.contains("blocklab_http_requests_total{endpoint=\"/test\",code=\"503\"} 1"));
        assert!(text.contains("blocklab_http_requests_total{endpoint=\"/test\",code=\"cancelled\"} 1"));
        assert!(text.contains("blocklab_http_request_duration_seconds_count{endpoint=\"/test\"} 4"));
        assert!(
            text.contains("blocklab_http_request_duration_seconds_bucket{endpoint=\"/test\",le=\"+Inf\"} 4")
        );
        assert!(text.contains("blocklab_http_requests_in_flight{endpoint=\"/test\"} 0"));
        assert_eq!(m.requests(Endpoint::Test), 4);
        // The longest is kept to the microsecond, and only for endpoints answered.
        let max = Endpoint::Test.index();
        m.endpoints[max].max_us.fetch_max(5_412_345, Relaxed);
        let text = m.render(&[], &[]);
        assert!(
            text.contains("blocklab_http_request_duration_max_seconds{endpoint=\"/test\"} 5.412345"),
            "{text}"
        );
        assert!(!text.contains("blocklab_http_request_duration_max_seconds{endpoint=\"/delay\"}"));
    }

    #[test]
    fn every_metric_has_help_and_type() {
        let m = Arc::new(Metrics::default());
        m.start(Endpoint::GetData).finish(200);
        let text = m.render(&[], &[]);
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let base = name.trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count");
            assert!(
                text.contains(&format!("# HELP {base} ")) || text.contains(&format!("# HELP {name} ")),
                "no HELP for {name}"
            );
        }
    }

    #[test]
    fn peak_gauge_keeps_its_maximum() {
        let g = PeakGauge::default();
        g.inc();
        g.inc();
        g.dec();
        g.inc();
        g.dec();
        g.dec();
        assert_eq!((g.get(), g.peak()), (0, 2));
    }
}
