//! `--fail-if 'p99>50ms,errors>0.1%,rps<1000'`: conditions on a run's
//! figures that, when any holds, make `blocklab load` exit 1 naming it — so
//! that a CI job fails on a slow or failing service.

use super::metric::Metric;
use super::report::LoadReport;

/// How a figure is compared with its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `>`
    Above,
    /// `>=`
    AtLeast,
    /// `<`
    Below,
    /// `<=`
    AtMost,
}

impl Comparison {
    fn symbol(self) -> &'static str {
        match self {
            Comparison::Above => ">",
            Comparison::AtLeast => ">=",
            Comparison::Below => "<",
            Comparison::AtMost => "<=",
        }
    }

    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Comparison::Above => value > limit,
            Comparison::AtLeast => value >= limit,
            Comparison::Below => value < limit,
            Comparison::AtMost => value <= limit,
        }
    }
}

/// One condition that fails the run when it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The figure.
    pub metric: Metric,
    /// How it is compared.
    pub comparison: Comparison,
    /// The limit, in the figure's unit (ms, req/s, a fraction, a count).
    pub limit: f64,
    /// As written, for messages.
    pub written: String,
}

impl Threshold {
    /// The figure's value in `report`, when the condition holds.
    pub fn breached(&self, report: &LoadReport) -> Option<f64> {
        let value = self.metric.of(report);
        self.comparison.holds(value, self.limit).then_some(value)
    }
}

/// Parses a comma-separated list: `p99>50ms,errors>0.1%,rps<1000`.
///
/// Latencies take `us`, `ms` (the default) or `s`; `errors` takes a
/// percentage (`0.1%`, the share of requests that failed) or a count (`10`).
pub fn parse(list: &str) -> Result<Vec<Threshold>, String> {
    let mut thresholds = Vec::new();
    for written in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let at = written
            .find(['<', '>'])
            .ok_or_else(|| format!("'{written}' is not FIGURE>LIMIT or FIGURE<LIMIT (e.g. p99>50ms)"))?;
        let (name, rest) = written.split_at(at);
        let (comparison, limit) = match rest.as_bytes() {
            [b'>', b'=', ..] => (Comparison::AtLeast, &rest[2..]),
            [b'<', b'=', ..] => (Comparison::AtMost, &rest[2..]),
            [b'>', ..] => (Comparison::Above, &rest[1..]),
            _ => (Comparison::Below, &rest[1..]),
        };
        let mut metric = Metric::parse(name)?;
        let limit = limit.trim();
        let value = if metric.is_latency() {
            milliseconds(limit)
                .ok_or_else(|| format!("'{written}': '{limit}' is not a duration like 50ms"))?
        } else if metric == Metric::Errors {
            match limit.strip_suffix('%') {
                Some(percent) => number(percent).map(|p| p / 100.0),
                None => {
                    metric = Metric::ErrorCount;
                    number(limit)
                }
            }
            .ok_or_else(|| format!("'{written}': '{limit}' is not a percentage like 0.1% or a count"))?
        } else {
            number(limit).ok_or_else(|| format!("'{written}': '{limit}' is not a number"))?
        };
        thresholds.push(Threshold { metric, comparison, limit: value, written: written.to_string() });
    }
    if thresholds.is_empty() {
        return Err("no threshold given (e.g. --fail-if 'p99>50ms,errors>0.1%')".to_string());
    }
    Ok(thresholds)
}

fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)
}

/// `50ms`, `2s`, `800us`, `12.5` (ms) in milliseconds.
fn milliseconds(s: &str) -> Option<f64> {
    let (digits, scale) = if let Some(d) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (d, 0.001)
    } else if let Some(d) = s.strip_suffix("ms") {
        (d, 1.0)
    } else if let Some(d) = s.strip_suffix('s') {
        (d, 1000.0)
    } else {
        (s, 1.0)
    };
    number(digits).map(|v| v * scale)
}

/// Each threshold's line for the summary, and the message naming the
/// breached ones (`None` when all passed).
pub fn judge(thresholds: &[Threshold], report: &LoadReport) -> (String, Option<String>) {
    let mut text = String::from("\nThresholds (--fail-if)\n");
    let mut breached = Vec::new();
    for t in thresholds {
        let value = t.metric.of(report);
        let failed = t.breached(report).is_some();
        text += &format!(
            "  {:<24} {:>16}   {}\n",
            t.written,
            t.metric.show(value),
            if failed { "BREACHED" } else { "ok" }
        );
        if failed {
            breached.push(format!(
                "{} = {} ({} {})",
                t.metric.name(),
                t.metric.show(value),
                t.comparison.symbol(),
                t.metric.show(t.limit)
            ));
        }
    }
    let message = (!breached.is_empty()).then(|| format!("threshold breached: {}", breached.join("; ")));
    (text, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_with_units() {
        let t = parse("p99>50ms, errors>0.1%,rps<1000,max>=2s,p50<=800us,errors>3").unwrap();
        let got: Vec<_> = t.iter().map(|t| (t.metric, t.comparison, t.limit)).collect();
        assert_eq!(
            got,
            vec![
                (Metric::P99, Comparison::Above, 50.0),
                (Metric::Errors, Comparison::Above, 0.001),
                (Metric::Rps, Comparison::Below, 1000.0),
                (Metric::Max, Comparison::AtLeast, 2000.0),
                (Metric::P50, Comparison::AtMost, 0.8),
                (Metric::ErrorCount, Comparison::Above, 3.0),
            ]
        );
        for bad in ["", "p99", "p98>1ms", "p99>fast", "errors>x%", "rps<-1", "p99=5ms"] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
