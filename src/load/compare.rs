//! `blocklab load compare BASE.json NEW.json`: two runs side by side
//! (throughput, latency percentiles, errors), the change of each, and with
//! `--max-regression p99=10%,rps=5%` the verdict a CI job fails on.

use std::fmt::Write;

use super::metric::Metric;
use super::report::LoadReport;

/// How far a figure may get worse before it is a regression.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// The figure.
    pub metric: Metric,
    /// Latencies and rps: the largest relative change for the worse (0.10 =
    /// 10 %). Errors: the largest rise of the error rate, in absolute terms
    /// (0.001 = 0.1 percentage point).
    pub allowed: f64,
}

/// Parses `p99=10%,rps=5%,errors=0.1%`.
pub fn parse_limits(list: &str) -> Result<Vec<Limit>, String> {
    let mut limits = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) =
            item.split_once('=').ok_or_else(|| format!("'{item}' is not FIGURE=PERCENT (e.g. p99=10%)"))?;
        let metric = Metric::parse(name)?;
        let allowed = value
            .trim()
            .strip_suffix('%')
            .and_then(|p| p.trim().parse::<f64>().ok())
            .filter(|p| p.is_finite() && *p >= 0.0)
            .ok_or_else(|| format!("'{item}': '{value}' is not a percentage like 10%"))?;
        limits.push(Limit { metric, allowed: allowed / 100.0 });
    }
    if limits.is_empty() {
        return Err("no limit given (e.g. --max-regression p99=10%,rps=5%)".to_string());
    }
    Ok(limits)
}

/// How much worse `new` is than `base` for `metric`, in the unit its limit
/// uses: relative for latencies and rps, absolute for the error rate.
/// Negative when it got better.
pub fn worsening(metric: Metric, base: f64, new: f64) -> f64 {
    if metric == Metric::Errors {
        return new - base;
    }
    let change = if base == 0.0 { if new == 0.0 { 0.0 } else { f64::INFINITY } } else { (new - base) / base };
    if metric.higher_is_worse() { change } else { -change }
}

/// The side-by-side table and, when a limit is passed, the message naming
/// every regression.
pub fn compare(
    (base_name, base): (&str, &LoadReport),
    (new_name, new): (&str, &LoadReport),
    limits: &[Limit],
) -> (String, Option<String>) {
    let mut out = String::new();
    let w = &mut out;
    for (label, name, run) in [("base:", base_name, base), ("new: ", new_name, new)] {
        let _ = writeln!(
            w,
            "{label} {name} ({}, {} {}, {} loop, {}, -c {}{})",
            run.started_at,
            run.method,
            run.url,
            run.mode,
            run.protocol,
            run.connections,
            if run.streams > 1 { format!(" x {} streams", run.streams) } else { String::new() }
        );
    }
    if base.url != new.url
        || base.mode != new.mode
        || base.connections != new.connections
        || base.protocol != new.protocol
        || base.streams != new.streams
    {
        let _ = writeln!(
            w,
            "NOTE: the two runs differ in URL, loop, protocol, connections or streams; the comparison may not be \
             like for like"
        );
    }
    let latency = if base.corrected_latency_ms.is_some() || new.corrected_latency_ms.is_some() {
        "latency (ms, corrected in open loop)"
    } else {
        "latency (ms)"
    };
    let _ = writeln!(w, "\n{:<10}{:>18}{:>18}{:>10}   limit", "figure", "base", "new", "change");
    let mut regressions = Vec::new();
    let figures = [Metric::Rps, Metric::Errors].into_iter().chain(Metric::LATENCIES);
    for metric in figures {
        let (b, n) = (metric.of(base), metric.of(new));
        let change = if metric == Metric::Errors {
            format!("{:+.3}pp", (n - b) * 100.0)
        } else if b == 0.0 {
            "-".to_string()
        } else {
            format!("{:+.1}%", (n - b) / b * 100.0)
        };
        let limit = limits.iter().find(|l| l.metric == metric);
        let verdict = match limit {
            None => String::new(),
            Some(l) => {
                let worse = worsening(metric, b, n);
                let shown = if metric == Metric::Errors {
                    format!("+{:.3}pp", l.allowed * 100.0)
                } else {
                    format!("{:.1}% worse", l.allowed * 100.0)
                };
                if worse > l.allowed {
                    regressions.push(format!(
                        "{} {} -> {} ({change}, limit {shown})",
                        metric.name(),
                        metric.show(b),
                        metric.show(n)
                    ));
                    format!("{shown}  REGRESSION")
                } else {
                    format!("{shown}  ok")
                }
            }
        };
        let _ = writeln!(
            w,
            "{:<10}{:>18}{:>18}{:>10}   {verdict}",
            metric.name(),
            metric.show(b),
            metric.show(n),
            change
        );
    }
    let _ = writeln!(
        w,
        "\n(errors: the share of requests with no response or a status >= 400; {latency}; pp = percentage points)"
    );
    let message =
        (!regressions.is_empty()).then(|| format!("regression past the limits: {}", regressions.join("; ")));
    (out, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_and_worsening_points_the_right_way() {
        let l = parse_limits("p99=10%, rps=5%,errors=0.1%").unwrap();
        assert_eq!(l[0], Limit { metric: Metric::P99, allowed: 0.10 });
        assert!((l[2].allowed - 0.001).abs() < 1e-12);
        for bad in ["", "p99", "p99=10", "p99=-1%", "speed=5%"] {
            assert!(parse_limits(bad).is_err(), "{bad} was accepted");
        }
        assert!((worsening(Metric::P99, 10.0, 12.0) - 0.2).abs() < 1e-9);
        assert!((worsening(Metric::Rps, 1000.0, 900.0) - 0.1).abs() < 1e-9);
        assert!(worsening(Metric::Rps, 1000.0, 1100.0) < 0.0);
        assert!((worsening(Metric::Errors, 0.01, 0.02) - 0.01).abs() < 1e-12);
    }
}
