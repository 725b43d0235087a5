//! The figures of a run that thresholds (`--fail-if`) and comparisons
//! (`blocklab load compare`) speak of, read from the JSON document so that
//! a run just made and one read back from a file are judged alike.

use super::report::{LatencySummary, LoadReport};

/// A figure of a run, by the name users write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Completed requests per second.
    Rps,
    /// Share of requests that failed: no response, or a status of 400 and above
    /// (as k6's `http_req_failed`), over the requests that ended.
    Errors,
    /// The same failures, counted.
    ErrorCount,
    /// Mean latency (ms).
    Mean,
    /// Median latency (ms).
    P50,
    /// 90th percentile latency (ms).
    P90,
    /// 95th percentile latency (ms).
    P95,
    /// 99th percentile latency (ms).
    P99,
    /// 99.9th percentile latency (ms).
    P999,
    /// Longest request (ms).
    Max,
}

impl Metric {
    /// The latency figures, in the order reports list them.
    pub const LATENCIES: [Metric; 7] =
        [Metric::Mean, Metric::P50, Metric::P90, Metric::P95, Metric::P99, Metric::P999, Metric::Max];

    /// The name users write (`p99`, `rps`, `errors`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Rps => "rps",
            Metric::Errors | Metric::ErrorCount => "errors",
            Metric::Mean => "mean",
            Metric::P50 => "p50",
            Metric::P90 => "p90",
            Metric::P95 => "p95",
            Metric::P99 => "p99",
            Metric::P999 => "p99.9",
            Metric::Max => "max",
        }
    }

    /// The metric named `name` (the error rate for `errors`).
    pub fn parse(name: &str) -> Result<Metric, String> {
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "rps" => Metric::Rps,
            "errors" => Metric::Errors,
            "mean" => Metric::Mean,
            "p50" | "median" => Metric::P50,
            "p90" => Metric::P90,
            "p95" => Metric::P95,
            "p99" => Metric::P99,
            "p99.9" | "p999" => Metric::P999,
            "max" => Metric::Max,
            other => {
                return Err(format!(
                    "unknown figure '{other}': use rps, errors, mean, p50, p90, p95, p99, p99.9 or max"
                ));
            }
        })
    }

    /// Whether it is a latency (milliseconds).
    pub fn is_latency(self) -> bool {
        Metric::LATENCIES.contains(&self)
    }

    /// Whether a higher value is worse (latency, errors) or better (rps).
    pub fn higher_is_worse(self) -> bool {
        self != Metric::Rps
    }

    /// Its value in `report`: latencies in ms (corrected for coordinated
    /// omission in an open-loop run, as wrk2 reports them), the error rate
    /// as a fraction.
    pub fn of(self, report: &LoadReport) -> f64 {
        let latency: &LatencySummary = report.corrected_latency_ms.as_ref().unwrap_or(&report.latency_ms);
        match self {
            Metric::Rps => report.rps,
            Metric::Errors => {
                let ended = report.completed + report.error_total;
                if ended == 0 { 0.0 } else { failures(report) as f64 / ended as f64 }
            }
            Metric::ErrorCount => failures(report) as f64,
            Metric::Mean => latency.mean,
            Metric::P50 => latency.p50,
            Metric::P90 => latency.p90,
            Metric::P95 => latency.p95,
            Metric::P99 => latency.p99,
            Metric::P999 => latency.p999,
            Metric::Max => latency.max,
        }
    }

    /// `value` as people read it: `12.345 ms`, `0.120%`, `1234.5 req/s`.
    pub fn show(self, value: f64) -> String {
        match self {
            Metric::Rps => format!("{value:.1} req/s"),
            Metric::Errors => format!("{:.3}%", value * 100.0),
            Metric::ErrorCount => format!("{value:.0}"),
            _ => format!("{value:.3} ms"),
        }
    }
}

/// Requests that failed without a response, plus responses of 400 and above.
fn failures(report: &LoadReport) -> u64 {
    let bad_status: u64 = report
        .status_codes
        .iter()
        .filter(|(code, _)| code.parse::<u16>().is_ok_and(|c| c >= 400))
        .map(|(_, n)| n)
        .sum();
    report.error_total + bad_status
}
