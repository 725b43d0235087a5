//! How a run is reported: an ab-style text summary for people and a
//! versioned JSON document for programs (`schema/load-result.json`, checked
//! by a test).
//!
//! Where a figure has ab's name it has ab's meaning, with one exception that
//! is said on the line itself: ab's "Time per request" is derived from
//! throughput (concurrency × time / requests); blocklab prints the *measured*
//! mean latency first and the throughput-derived figure second.

use std::collections::BTreeMap;
use std::fmt::Write;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::client::ErrorKind;
use super::outcome::{RunResult, Second};
use super::plan::{LoadPlan, Stop};

/// The version of the JSON document's shape; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 5;

/// Percentiles reported, as (label, quantile).
const PERCENTILES: [(&str, f64); 10] = [
    ("50%", 0.50),
    ("66%", 0.66),
    ("75%", 0.75),
    ("80%", 0.80),
    ("90%", 0.90),
    ("95%", 0.95),
    ("98%", 0.98),
    ("99%", 0.99),
    ("99.9%", 0.999),
    ("99.99%", 0.9999),
];

/// Summary of one latency histogram, in milliseconds.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct LatencySummary {
    /// Samples in the histogram.
    pub count: u64,
    /// Shortest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// Median.
    pub p50: f64,
    /// 66th percentile.
    pub p66: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 80th percentile.
    pub p80: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 98th percentile.
    pub p98: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile.
    pub p9999: f64,
    /// Longest.
    pub max: f64,
}

impl LatencySummary {
    /// Summarizes a histogram of microseconds.
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        let ms = |us: u64| us as f64 / 1000.0;
        if h.is_empty() {
            return LatencySummary::default();
        }
        let q = |quantile: f64| ms(h.value_at_quantile(quantile));
        LatencySummary {
            count: h.len(),
            min: ms(h.min()),
            mean: h.mean() / 1000.0,
            stdev: h.stdev() / 1000.0,
            p50: q(0.50),
            p66: q(0.66),
            p75: q(0.75),
            p80: q(0.80),
            p90: q(0.90),
            p95: q(0.95),
            p98: q(0.98),
            p99: q(0.99),
            p999: q(0.999),
            p9999: q(0.9999),
            max: ms(h.max()),
        }
    }

    fn percentile(&self, index: usize) -> f64 {
        [
            self.p50, self.p66, self.p75, self.p80, self.p90, self.p95, self.p98, self.p99, self.p999,
            self.p9999,
        ][index]
    }
}

/// Open-loop schedule keeping.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Schedule {
    /// Requests per second asked for (the mean over the stages, with stages).
    pub target_rate: f64,
    /// `--rate` in stages: the start rate, then each stage's rate at its end
    /// and its length; empty for a constant rate.
    #[serde(default)]
    pub stages: Vec<StageReport>,
    /// Requests that ended per second.
    pub achieved_rate: f64,
    /// Requests due before the deadline that were never sent.
    pub backlog: u64,
    /// Requests sent more than 1 ms after they were due.
    pub late_sends: u64,
    /// Largest delay of a send behind its due time (ms).
    pub max_send_lag_ms: f64,
}

/// A point of `--connections` in stages: the count reached `at_s` seconds into the run.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct ConnectionPoint {
    /// Seconds since the start.
    pub at_s: f64,
    /// Connections then.
    pub connections: f64,
}

/// A point of `--rate` in stages: the rate reached `at_s` seconds into the run.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct StageReport {
    /// Seconds since the start.
    pub at_s: f64,
    /// Requests per second then.
    pub rate: f64,
}

/// `https://`: the TLS handshakes of a run.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct TlsReport {
    /// How certificates were checked: the platform's roots, `--cacert FILE`, or none (`--insecure`).
    pub trust: String,
    /// What the first handshake negotiated: version, cipher suite, ALPN.
    pub session: Option<String>,
    /// Why the first failed handshake failed, in rustls' words (the kinds
    /// and counts are in `errors`); null when none failed.
    pub first_error: Option<String>,
    /// Handshakes that succeeded: one per connection opened with keep-alive,
    /// one per request without it.
    pub handshakes: u64,
    /// Of those, the ones that resumed an earlier session (no certificate
    /// sent or checked): cheaper for both sides.
    pub resumed: u64,
    /// Time of each handshake, from the established TCP connection to its
    /// end (ms); not part of `connect_ms`, part of a request's latency when
    /// the request opened the connection.
    pub handshake_ms: LatencySummary,
}

/// `--urls`: what one request of the file got.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct UrlReport {
    /// Its method.
    pub method: String,
    /// Its URL (a password replaced by `***`).
    pub url: String,
    /// Requests that got a whole response, any status.
    pub requests: u64,
    /// Of those, responses with a status of 400 and above.
    pub status_4xx_5xx: u64,
    /// Requests that failed without a response (any kind; the kinds are in `errors`, for all URLs).
    pub errors: u64,
    /// Its completed requests per second of the run.
    pub rps: f64,
    /// Median latency (ms).
    pub p50_ms: f64,
    /// 99th percentile latency (ms).
    pub p99_ms: f64,
}

/// The JSON document `--json FILE` writes (see `schema/load-result.json`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct LoadReport {
    /// Always `blocklab/load-result`.
    pub schema: String,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// blocklab's version.
    pub tool_version: String,
    /// The target URL.
    pub url: String,
    /// The request method.
    pub method: String,
    /// `closed` or `open`.
    pub mode: String,
    /// Concurrent connections.
    pub connections: usize,
    /// Engine threads.
    pub threads: usize,
    /// Requests written at once per connection (`--pipeline`).
    pub pipeline: usize,
    /// Whether connections were reused.
    pub keep_alive: bool,
    /// The protocol that ran: `http/1.1`, `h2c` (HTTP/2 over plain TCP) or
    /// `h2` (over TLS); documents before schema_version 5 were all `http/1.1`.
    #[serde(default = "http1")]
    pub protocol: String,
    /// HTTP/2 streams in flight per connection (`--streams`); 1 for HTTP/1.1.
    #[serde(default = "one")]
    pub streams: usize,
    /// `-n`, when given.
    pub requests_planned: Option<u64>,
    /// `-z` in seconds, when given.
    pub duration_planned_s: Option<f64>,
    /// Per-request timeout (s).
    pub timeout_s: f64,
    /// Start, RFC 3339 UTC.
    pub started_at: String,
    /// Wall time of the run (s).
    pub duration_s: f64,
    /// Requests started.
    pub sent: u64,
    /// Requests with a whole response (any status).
    pub completed: u64,
    /// Completed with 2xx or 3xx.
    pub ok: u64,
    /// Failed requests without a response, by kind (all kinds present).
    pub errors: BTreeMap<String, u64>,
    /// Sum of `errors`.
    pub error_total: u64,
    /// Requests still open at the `-z` deadline.
    pub in_flight_at_deadline: u64,
    /// Whether sent = completed + error_total + in_flight_at_deadline.
    pub balanced: bool,
    /// Completed responses by status code.
    pub status_codes: BTreeMap<String, u64>,
    /// Completed responses whose status is not 2xx (ab's "Non-2xx responses").
    pub non_2xx: u64,
    /// Completed requests per second.
    pub rps: f64,
    /// Latency from the actual send (ms).
    pub latency_ms: LatencySummary,
    /// Open loop only: latency from the due time (ms), corrected for coordinated omission.
    pub corrected_latency_ms: Option<LatencySummary>,
    /// Connections opened.
    pub connections_opened: u64,
    /// Time to open each connection (ms): the TCP connection alone.
    pub connect_ms: LatencySummary,
    /// `https://`: the TLS handshakes; null for `http://`.
    #[serde(default)]
    pub tls: Option<TlsReport>,
    /// `--urls`: per request of the file, in its order; empty for one URL.
    #[serde(default)]
    pub urls: Vec<UrlReport>,
    /// Response bytes received: heads and bodies.
    pub bytes_head: u64,
    /// Response body bytes received.
    pub bytes_body: u64,
    /// Open loop only: how well the schedule was kept.
    pub schedule: Option<Schedule>,
    /// The `Server` header of the first response that had one.
    pub server: Option<String>,
    /// Body bytes of the first 2xx/3xx response.
    pub document_length: Option<u64>,
    /// `--connections` in stages: the points the connection count ramps
    /// linearly between (the start, then each stage's end); null otherwise.
    #[serde(default)]
    pub connection_stages: Option<Vec<ConnectionPoint>>,
    /// The histograms themselves, so that runs merge losslessly
    /// (`blocklab load merge`).
    pub histograms: EncodedHistograms,
    /// The run second by second (empty for a merged result, and in
    /// documents of schema_version 2).
    #[serde(default)]
    pub timeline: Vec<Second>,
}

fn http1() -> String {
    "http/1.1".to_string()
}

fn one() -> usize {
    1
}

/// Histograms of microseconds in HdrHistogram's V2 deflate encoding, base64:
/// the form Java's `HistogramLogWriter` writes and every HdrHistogram
/// implementation reads.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct EncodedHistograms {
    /// Latency from the actual send.
    pub latency: String,
    /// Open loop: latency from the due time.
    pub corrected: Option<String>,
    /// Time to connect.
    pub connect: String,
    /// `https://`: time of each TLS handshake.
    #[serde(default)]
    pub handshake: Option<String>,
}

/// `h` in the V2 deflate encoding, base64.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    use base64::Engine;
    use hdrhistogram::serialization::Serializer;
    let mut bytes = Vec::new();
    hdrhistogram::serialization::V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("a histogram always encodes into memory");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The histogram [`encode_histogram`] wrote.
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| format!("not an HdrHistogram: {e:?}"))
}

impl LoadReport {
    /// The document for `result` of `plan`.
    pub fn new(plan: &LoadPlan, result: &RunResult) -> LoadReport {
        let s = &result.stats;
        let errors = ErrorKind::ALL.iter().map(|k| (k.key().to_string(), s.errors[k.index()])).collect();
        let status_codes = s
            .statuses
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (code.to_string(), *n))
            .collect();
        let non_2xx = s
            .statuses
            .iter()
            .enumerate()
            .filter(|(code, _)| !(200..300).contains(code))
            .map(|(_, n)| n)
            .sum();
        LoadReport {
            schema: "blocklab/load-result".to_string(),
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            url: plan.target.url.clone(),
            method: plan.method.to_string(),
            mode: plan.mode().to_string(),
            connections: plan.connections,
            threads: result.threads,
            pipeline: plan.pipeline,
            keep_alive: plan.keep_alive,
            protocol: plan.protocol().to_string(),
            streams: plan.streams,
            requests_planned: match plan.stop {
                Stop::Requests(n) => Some(n),
                Stop::Duration(_) => None,
            },
            duration_planned_s: match plan.stop {
                Stop::Duration(d) => Some(d.as_secs_f64()),
                Stop::Requests(_) => None,
            },
            timeout_s: plan.timeout.as_secs_f64(),
            started_at: humantime::format_rfc3339_millis(result.started_at).to_string(),
            duration_s: result.duration.as_secs_f64(),
            sent: s.sent,
            completed: s.completed,
            ok: s.ok,
            errors,
            error_total: s.error_total(),
            in_flight_at_deadline: s.in_flight_at_deadline,
            balanced: result.is_balanced(),
            status_codes,
            non_2xx,
            rps: result.rps(),
            latency_ms: LatencySummary::of(&s.latency),
            corrected_latency_ms: s.corrected.as_ref().map(LatencySummary::of),
            connections_opened: s.connections_opened,
            connect_ms: LatencySummary::of(&s.connect),
            tls: plan.target.https.then(|| TlsReport {
                trust: plan.tls.as_ref().map_or_else(|| "(as in each run)".to_string(), |t| t.trust.clone()),
                session: s.tls_session.clone(),
                first_error: s.tls_first_error.clone(),
                handshakes: s.handshake.len(),
                resumed: s.resumed,
                handshake_ms: LatencySummary::of(&s.handshake),
            }),
            urls: plan
                .urls
                .iter()
                .zip(&s.urls)
                .map(|(url, u)| UrlReport {
                    method: url.method.to_string(),
                    url: url.target.url.clone(),
                    requests: u.completed,
                    status_4xx_5xx: u.bad_status,
                    errors: u.errors,
                    rps: u.completed as f64 / result.duration.as_secs_f64().max(1e-9),
                    p50_ms: LatencySummary::of(&u.latency).p50,
                    p99_ms: LatencySummary::of(&u.latency).p99,
                })
                .collect(),
            bytes_head: s.head_bytes,
            bytes_body: s.body_bytes,
            schedule: plan.rate.as_ref().map(|rate| Schedule {
                target_rate: rate.mean(),
                stages: stage_points(rate),
                achieved_rate: result.achieved_rate(),
                backlog: s.backlog,
                late_sends: s.late_sends,
                max_send_lag_ms: s.max_send_lag.as_secs_f64() * 1000.0,
            }),
            server: s.server.clone(),
            document_length: s.document_length,
            histograms: EncodedHistograms {
                latency: encode_histogram(&s.latency),
                corrected: s.corrected.as_ref().map(encode_histogram),
                connect: encode_histogram(&s.connect),
                handshake: plan.target.https.then(|| encode_histogram(&s.handshake)),
            },
            timeline: result.timeline.clone(),
            connection_stages: plan.connection_stages.as_ref().map(|stages| {
                stages
                    .points()
                    .into_iter()
                    .map(|(at_s, connections)| ConnectionPoint { at_s, connections })
                    .collect()
            }),
        }
    }
}

/// The path and query of `url`, for the per-URL table (the origin is the same for all).
fn path_of(url: &str) -> String {
    url::Url::parse(url).map_or_else(
        |_| url.to_string(),
        |u| match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        },
    )
}

fn stage_points(rate: &super::plan::RateSchedule) -> Vec<StageReport> {
    if rate.stages.is_empty() {
        return Vec::new();
    }
    let mut at = 0.0;
    let mut points = vec![StageReport { at_s: 0.0, rate: rate.start }];
    for stage in &rate.stages {
        at += stage.duration.as_secs_f64();
        points.push(StageReport { at_s: at, rate: stage.target });
    }
    points
}

/// The ab-style text summary.
pub fn text(plan: &LoadPlan, result: &RunResult, report: &LoadReport) -> String {
    let s = &result.stats;
    let mut out = String::new();
    let w = &mut out;
    let secs = result.duration.as_secs_f64();
    let _ = writeln!(
        w,
        "blocklab load {}: {} loop, {} connections, {}{}, {} thread{}\n",
        report.tool_version,
        report.mode,
        plan.connections,
        if plan.h2 {
            format!("HTTP/2 ({})", plan.protocol())
        } else if plan.keep_alive {
            "keep-alive".to_string()
        } else {
            "a new connection per request".to_string()
        },
        if plan.pipeline > 1 {
            format!(", {} pipelined requests each", plan.pipeline)
        } else if plan.h2 {
            format!(
                ", up to {} concurrent stream{} each",
                plan.streams,
                if plan.streams == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        },
        result.threads,
        if result.threads == 1 { "" } else { "s" },
    );
    let _ = writeln!(w, "Server Software:        {}", s.server.as_deref().unwrap_or("(none)"));
    let _ = writeln!(w, "Server Hostname:        {}", plan.target.hostname);
    let _ = writeln!(w, "Server Port:            {}", plan.target.addr.port());
    if let Some(tls) = &report.tls {
        let _ = writeln!(
            w,
            "TLS:                    {}",
            tls.session.as_deref().unwrap_or("(no handshake succeeded)")
        );
        let _ = writeln!(w, "Certificates checked:   {}", tls.trust);
    }
    let _ = writeln!(w);
    if report.urls.is_empty() {
        let _ = writeln!(w, "Document Path:          {}", plan.target.path);
    } else {
        let _ = writeln!(
            w,
            "Document Paths:         {} URLs, in turn on every connection (per URL below)",
            report.urls.len()
        );
    }
    match s.document_length {
        Some(len) => {
            let _ = writeln!(w, "Document Length:        {len} bytes\n");
        }
        None => {
            let _ = writeln!(w, "Document Length:        (no successful response)\n");
        }
    }
    let _ = writeln!(w, "Concurrency Level:      {}", plan.connections);
    if let Some(stages) = &report.connection_stages {
        let points: Vec<String> =
            stages.iter().map(|p| format!("{:.0} at {:.0} s", p.connections, p.at_s)).collect();
        let _ = writeln!(
            w,
            "Connection stages:      {} (linear between; the most is the level above)",
            points.join(" → ")
        );
    }
    let _ = writeln!(w, "Time taken for tests:   {secs:.3} seconds");
    let _ = writeln!(w, "Complete requests:      {}", s.completed);
    let _ = writeln!(w, "Failed requests:        {}", s.error_total());
    let kinds: Vec<String> = ErrorKind::ALL
        .iter()
        .filter(|k| s.errors[k.index()] > 0)
        .map(|k| format!("{}: {}", k, s.errors[k.index()]))
        .collect();
    if !kinds.is_empty() {
        let _ = writeln!(w, "   ({})", kinds.join(", "));
    }
    if let Some(reason) = report.tls.as_ref().and_then(|t| t.first_error.as_ref()) {
        let _ = writeln!(w, "   (the first TLS failure: {reason})");
    }
    if s.in_flight_at_deadline > 0 || matches!(plan.stop, Stop::Duration(_)) {
        let _ = writeln!(w, "In flight at deadline:  {}", s.in_flight_at_deadline);
    }
    let _ = writeln!(
        w,
        "Requests sent:          {} = {} complete + {} failed + {} in flight{}",
        s.sent,
        s.completed,
        s.error_total(),
        s.in_flight_at_deadline,
        if result.is_balanced() { "" } else { "  (DOES NOT ADD UP: this is a bug, please report it)" },
    );
    if report.non_2xx > 0 {
        let codes: Vec<String> = report
            .status_codes
            .iter()
            .filter(|(code, _)| !code.starts_with('2'))
            .map(|(code, n)| format!("{code}: {n}"))
            .collect();
        let _ = writeln!(w, "Non-2xx responses:      {}   ({})", report.non_2xx, codes.join(", "));
    }
    let _ = writeln!(w, "Connections opened:     {}", s.connections_opened);
    if let Some(tls) = &report.tls {
        let _ = writeln!(
            w,
            "TLS handshakes:         {} ({} resumed), p50 {:.3} ms, p99 {:.3} ms",
            tls.handshakes, tls.resumed, tls.handshake_ms.p50, tls.handshake_ms.p99
        );
    }
    let total = s.head_bytes + s.body_bytes;
    let _ = writeln!(w, "Total transferred:      {total} bytes");
    let _ = writeln!(w, "HTML transferred:       {} bytes", s.body_bytes);
    let _ = writeln!(w, "Requests per second:    {:.2} [#/sec] (mean)", result.rps());
    let latency = &report.latency_ms;
    let _ =
        writeln!(w, "Time per request:       {:.3} [ms] (mean latency, measured per request)", latency.mean);
    let per = if s.completed > 0 { secs * 1000.0 / s.completed as f64 } else { 0.0 };
    let _ =
        writeln!(w, "Time per request:       {per:.3} [ms] (mean, across all concurrent requests: 1 / rate)");
    let _ = writeln!(
        w,
        "Transfer rate:          {:.2} [Kbytes/sec] received",
        total as f64 / 1024.0 / secs.max(1e-9)
    );

    if let Some(schedule) = &report.schedule {
        let _ = writeln!(w);
        if schedule.stages.is_empty() {
            let _ = writeln!(w, "Target rate:            {:.2} [#/sec]", schedule.target_rate);
        } else {
            let points: Vec<String> =
                schedule.stages.iter().map(|p| format!("{:.0}/s at {:.0} s", p.rate, p.at_s)).collect();
            let _ = writeln!(
                w,
                "Target rate:            {:.2} [#/sec] (mean; stages, linear between: {})",
                schedule.target_rate,
                points.join(" → ")
            );
        }
        let _ = writeln!(w, "Achieved rate:          {:.2} [#/sec]", schedule.achieved_rate);
        let kept = schedule.backlog == 0 && schedule.achieved_rate >= 0.95 * schedule.target_rate;
        if kept {
            let _ = writeln!(
                w,
                "Schedule:               kept ({} sends more than 1 ms late, max lag {:.3} ms)",
                schedule.late_sends, schedule.max_send_lag_ms
            );
        } else {
            let _ = writeln!(
                w,
                "Schedule:               NOT KEPT: {} requests were due but never sent (backlog), {} were sent \
                 more than 1 ms late, max lag {:.3} ms; the connections could not sustain the rate",
                schedule.backlog, schedule.late_sends, schedule.max_send_lag_ms
            );
        }
    }

    let _ = writeln!(w, "\nLatency (ms)        min      mean    [+/-sd]    median       max");
    let row = |w: &mut String, name: &str, l: &LatencySummary| {
        let _ = writeln!(
            w,
            "{name:<12}{:>11.3}{:>10.3}{:>11.3}{:>10.3}{:>10.3}",
            l.min, l.mean, l.stdev, l.p50, l.max
        );
    };
    row(w, "Request:", latency);
    if let Some(corrected) = &report.corrected_latency_ms {
        row(w, "Corrected:", corrected);
    }
    if s.connections_opened > 0 {
        row(w, "Connect:", &report.connect_ms);
    }
    if let Some(tls) = report.tls.as_ref().filter(|t| t.handshakes > 0) {
        row(w, "Handshake:", &tls.handshake_ms);
    }
    if !report.urls.is_empty() {
        let _ =
            writeln!(w, "\nPer URL   requests  4xx/5xx   errors        rps   p50 (ms)   p99 (ms)  request");
        for u in &report.urls {
            let _ = writeln!(
                w,
                "{:>18}{:>9}{:>9}{:>11.1}{:>11.3}{:>11.3}  {} {}",
                u.requests,
                u.status_4xx_5xx,
                u.errors,
                u.rps,
                u.p50_ms,
                u.p99_ms,
                u.method,
                path_of(&u.url)
            );
        }
    }

    let _ = writeln!(w, "\nPercentage of the requests served within a certain time (ms)");
    match &report.corrected_latency_ms {
        None => {
            for (i, (label, _)) in PERCENTILES.iter().enumerate() {
                let _ = writeln!(w, "  {label:>6}  {:>10.3}", latency.percentile(i));
            }
            let _ = writeln!(w, "  {:>6}  {:>10.3} (longest request)", "100%", latency.max);
        }
        Some(corrected) => {
            let _ = writeln!(w, "          {:>10}  {:>10}", "measured", "corrected");
            for (i, (label, _)) in PERCENTILES.iter().enumerate() {
                let _ = writeln!(
                    w,
                    "  {label:>6}  {:>10.3}  {:>10.3}",
                    latency.percentile(i),
                    corrected.percentile(i)
                );
            }
            let _ = writeln!(
                w,
                "  {:>6}  {:>10.3}  {:>10.3} (longest request)",
                "100%", latency.max, corrected.max
            );
            let _ = writeln!(
                w,
                "  (measured: from the actual send; corrected: from when the request was due, \
                 which counts the time a stalled server held the load back)"
            );
        }
    }
    out
}
