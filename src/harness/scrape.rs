//! Reading the server's own figures: `/metrics` fetched over plain TCP and
//! parsed, and the per-run figures computed from the scrapes taken before,
//! during and after the load.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One `/metrics` scrape: each sample line as `name{labels}` → value.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// When it was taken.
    pub at: Instant,
    samples: HashMap<String, f64>,
}

impl Scrape {
    /// Fetches `/metrics` from `addr` within `timeout`.
    pub fn fetch(addr: SocketAddr, timeout: Duration) -> Result<Scrape, String> {
        let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
        stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        stream.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: blocklab\r\n\r\n")
            .map_err(|e| format!("send: {e}"))?;
        let mut response = String::new();
        stream.read_to_string(&mut response).map_err(|e| format!("read: {e}"))?;
        let at = Instant::now();
        let (head, body) = response.split_once("\r\n\r\n").ok_or("no HTTP response")?;
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            return Err(format!("status: {}", head.lines().next().unwrap_or("")));
        }
        Ok(Scrape::parse(body, at))
    }

    /// Parses Prometheus text.
    pub fn parse(text: &str, at: Instant) -> Scrape {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| {
                let (key, value) = l.rsplit_once(' ')?;
                Some((key.to_string(), value.trim().parse::<f64>().ok()?))
            })
            .collect();
        Scrape { at, samples }
    }

    /// The value of one sample, e.g. `tokio_workers{runtime="http"}`.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.samples.get(key).copied()
    }

    /// The sum of every sample of `name` whose labels contain all of `labels`.
    pub fn sum(&self, name: &str, labels: &[&str]) -> f64 {
        self.samples
            .iter()
            .filter(|(k, _)| {
                k.strip_prefix(name).is_some_and(|rest| rest.starts_with('{') || rest.is_empty())
                    && labels.iter().all(|l| k.contains(l))
            })
            .map(|(_, v)| v)
            .sum()
    }

    /// The labels of `blocklab_info`, as (key, value) pairs.
    pub fn info(&self) -> Vec<(String, String)> {
        let Some(key) = self.samples.keys().find(|k| k.starts_with("blocklab_info{")) else {
            return Vec::new();
        };
        let inner = key.trim_start_matches("blocklab_info{").trim_end_matches('}');
        inner
            .split("\",")
            .filter_map(|pair| {
                let (k, v) = pair.split_once("=\"")?;
                Some((k.to_string(), v.trim_end_matches('"').to_string()))
            })
            .collect()
    }
}

/// What the server's metrics say about one run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerFigures {
    /// HTTP workers' busy time over the run, divided by wall time × workers (0–1).
    /// Near 1 with low throughput means the workers were blocked, not working.
    pub http_busy_ratio: f64,
    /// The same for the actor dispatcher's threads.
    pub actor_busy_ratio: f64,
    /// HTTP worker threads.
    pub http_workers: u64,
    /// Most blocking-pool threads seen on the HTTP runtime.
    pub blocking_threads_max: u64,
    /// Most blocking reads running at once on the blocking pool (peak since the server started).
    pub spawn_blocking_in_flight_max: u64,
    /// Most jobs waiting for the blocking actor pool (peak since the server started).
    pub actor_mailbox_max: u64,
    /// Most messages waiting for the async actor (peak since the server started).
    pub async_mailbox_max: u64,
    /// Most reads in flight from the async actor (peak since the server started).
    pub async_reads_in_flight_max: u64,
    /// Requests the server answered on the endpoint during the run.
    pub server_requests: u64,
    /// Server-side mean latency of the endpoint (ms): router to response.
    pub server_mean_ms: f64,
    /// Upper bound of the histogram bucket holding the endpoint's server-side p99 (ms).
    pub server_p99_ms: f64,
    /// Scrapes that failed during the run (the figures above use the others).
    pub scrape_failures: u64,
    /// Scrapes taken during the run.
    pub scrapes: u64,
}

impl ServerFigures {
    /// Computes the figures for `path` from the scrape before the run, the
    /// ones during it, and the one after. `load_s` is how long the load
    /// itself ran: busy ratios are over that time (the scrapes around it
    /// add idle time that is not part of the run).
    pub fn between(
        path: &str,
        before: &Scrape,
        during: &[Scrape],
        after: &Scrape,
        failures: u64,
        load_s: f64,
    ) -> ServerFigures {
        let between = (after.at - before.at).as_secs_f64();
        let wall = if load_s > 0.0 { load_s.min(between) } else { between }.max(1e-9);
        let ratio = |runtime: &str| {
            let label = format!("runtime=\"{runtime}\"");
            let workers = after.get(&format!("tokio_workers{{{label}}}")).unwrap_or(0.0);
            let busy = after.sum("tokio_worker_busy_seconds_total", &[&label])
                - before.sum("tokio_worker_busy_seconds_total", &[&label]);
            if workers > 0.0 { (busy / (wall * workers)).clamp(0.0, 1.0) } else { 0.0 }
        };
        let all: Vec<&Scrape> = std::iter::once(before).chain(during).chain(std::iter::once(after)).collect();
        let max = |key: &str| all.iter().filter_map(|s| s.get(key)).fold(0.0f64, f64::max) as u64;
        // Short runs may fall between two scrapes: the server's own peak gauges
        // (highest since it started, i.e. over this Test ID's runs so far) cover them.
        let peak = |key: &str| max(key).max(after.get(&format!("{key}_peak")).unwrap_or(0.0) as u64);
        let endpoint = format!("endpoint=\"{path}\"");
        let delta = |name: &str| after.sum(name, &[&endpoint]) - before.sum(name, &[&endpoint]);
        let count = delta("blocklab_http_request_duration_seconds_count");
        let sum = delta("blocklab_http_request_duration_seconds_sum");
        ServerFigures {
            http_busy_ratio: ratio("http"),
            actor_busy_ratio: ratio("actors"),
            http_workers: after.get("tokio_workers{runtime=\"http\"}").unwrap_or(0.0) as u64,
            blocking_threads_max: max("tokio_blocking_threads{runtime=\"http\"}"),
            spawn_blocking_in_flight_max: peak("blocklab_spawn_blocking_in_flight"),
            actor_mailbox_max: peak("blocklab_actor_pool_mailbox_depth"),
            async_mailbox_max: peak("blocklab_actor_async_mailbox_depth"),
            async_reads_in_flight_max: peak("blocklab_actor_async_reads_in_flight"),
            server_requests: delta("blocklab_http_requests_total").max(0.0) as u64,
            server_mean_ms: if count > 0.0 { sum / count * 1000.0 } else { 0.0 },
            server_p99_ms: p99_bound(before, after, &endpoint, count),
            scrape_failures: failures,
            scrapes: during.len() as u64,
        }
    }
}

/// The upper bound (ms) of the first bucket whose cumulative count, over the
/// run, reaches 99 % of the run's requests.
fn p99_bound(before: &Scrape, after: &Scrape, endpoint: &str, count: f64) -> f64 {
    if count <= 0.0 {
        return 0.0;
    }
    let prefix = format!("blocklab_http_request_duration_seconds_bucket{{{endpoint},le=\"");
    let mut buckets: Vec<(f64, f64)> = after
        .samples
        .iter()
        .filter_map(|(k, v)| {
            let le = k.strip_prefix(&prefix)?.trim_end_matches("\"}");
            let bound = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((bound, v - before.get(k).unwrap_or(0.0)))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
        .iter()
        .find(|(_, cumulative)| *cumulative >= 0.99 * count)
        .map_or(0.0, |(bound, _)| bound * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"blocklab_info{version="0.1.0",db="embedded",workers="1"} 1
tokio_workers{runtime="http"} 1
tokio_worker_busy_seconds_total{runtime="http",worker="0"} 1.0
blocklab_http_request_duration_seconds_bucket{endpoint="/getData",le="0.001"} 0
blocklab_http_request_duration_seconds_bucket{endpoint="/getData",le="0.0025"} 0
blocklab_http_request_duration_seconds_bucket{endpoint="/getData",le="+Inf"} 0
blocklab_http_request_duration_seconds_sum{endpoint="/getData"} 0
blocklab_http_request_duration_seconds_count{endpoint="/getData"} 0
blocklab_actor_pool_mailbox_depth 0
"#;
    const AFTER: &str = r#"tokio_workers{runtime="http"} 1
tokio_worker_busy_seconds_total{runtime="http",worker="0"} 2.8
blocklab_http_requests_total{endpoint="/getData",code="200"} 100
blocklab_http_request_duration_seconds_bucket{endpoint="/getData",le="0.001"} 10
blocklab_http_request_duration_seconds_bucket{endpoint="/getData",le="0.0025"} 100
blocklab_http_request_duration_seconds_bucket{endpoint="/getData",le="+Inf"} 100
blocklab_http_request_duration_seconds_sum{endpoint="/getData"} 0.15
blocklab_http_request_duration_seconds_count{endpoint="/getData"} 100
blocklab_actor_pool_mailbox_depth 3
"#;

    #[test]
    fn figures_come_from_the_deltas() {
        let t0 = Instant::now();
        let before = Scrape::parse(BEFORE, t0);
        let after = Scrape::parse(AFTER, t0 + Duration::from_secs(2));
        let f = ServerFigures::between("/getData", &before, &[], &after, 0, 0.0);
        assert!((f.http_busy_ratio - 0.9).abs() < 1e-9, "{}", f.http_busy_ratio);
        assert_eq!(f.server_requests, 100);
        assert!((f.server_mean_ms - 1.5).abs() < 1e-9);
        assert!((f.server_p99_ms - 2.5).abs() < 1e-9);
        assert_eq!(f.actor_mailbox_max, 3);
        assert_eq!(before.info()[1], ("db".to_string(), "embedded".to_string()));
        // Over the load's own 1.6 s rather than the 2 s between scrapes.
        let f = ServerFigures::between("/getData", &before, &[], &after, 0, 1.6);
        assert!((f.http_busy_ratio - 1.0).abs() < 1e-9, "{}", f.http_busy_ratio);
    }
}
