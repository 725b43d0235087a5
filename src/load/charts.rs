//! The charts of one run's page (`--html`): the latency distribution
//! (percentile spectrum, as HdrHistogram plots it) and the timeline —
//! throughput and errors, p50 and p99, connections open — second by second.
//! Drawn with plotters into SVG in the studies' look ([`crate::page`]: the
//! same palette, lines, legend and fonts).

use plotters::prelude::*;

use super::report::{LoadReport, decode_histogram};
use crate::page::{Chart, DrawError, canvas, draw_legend, draw_line};

/// A named line of (x, y) points.
type Line = (String, Vec<(f64, f64)>);

/// Every chart of the run's page (a chart that cannot be drawn is left out).
pub fn all(report: &LoadReport) -> Vec<Chart> {
    let mut charts = Vec::new();
    let mut push = |file: &'static str, title: &str, svg: Result<String, DrawError>| {
        if let Ok(svg) = svg {
            charts.push(Chart { file: file.to_string(), title: title.to_string(), svg });
        }
    };
    push("latency-distribution.svg", "Latency by percentile", distribution(report));
    let t = &report.timeline;
    let per_s = |v: u64, len: f64| if len > 0.0 { v as f64 / len } else { 0.0 };
    let x = |s: &super::outcome::Second| s.second as f64 + s.length_s;
    let throughput = vec![
        ("responses/s".to_string(), t.iter().map(|s| (x(s), per_s(s.requests, s.length_s))).collect()),
        (
            "errors/s (no response, or status >= 400)".to_string(),
            t.iter()
                .map(|s| (x(s), per_s(s.errors.values().sum::<u64>() + s.status_4xx_5xx, s.length_s)))
                .collect(),
        ),
    ];
    push("timeline-throughput.svg", "Throughput and errors per second", {
        line_chart(
            "Throughput and errors per second",
            "seconds since the start",
            "per second",
            &throughput,
            &plain,
        )
    });
    let mut latency: Vec<Line> = vec![
        ("p50".to_string(), t.iter().map(|s| (x(s), s.p50_ms)).collect()),
        ("p99".to_string(), t.iter().map(|s| (x(s), s.p99_ms)).collect()),
    ];
    if t.iter().any(|s| s.corrected_p99_ms.is_some()) {
        latency.push((
            "p99 corrected (from the due time)".to_string(),
            t.iter().map(|s| (x(s), s.corrected_p99_ms.unwrap_or(0.0))).collect(),
        ));
    }
    push("timeline-latency.svg", "Latency per second", {
        line_chart("Latency per second", "seconds since the start", "ms", &latency, &plain)
    });
    let connections = vec![("open".to_string(), t.iter().map(|s| (x(s), s.connections as f64)).collect())];
    push("timeline-connections.svg", "Connections open", {
        line_chart("Connections open", "seconds since the start", "connections", &connections, &plain)
    });
    charts
}

fn plain(x: &f64) -> String {
    format!("{x}")
}

/// Percentile spectrum: x is log10(1 / (1 - q)), so 90 %, 99 %, 99.9 % are evenly spaced.
fn distribution(report: &LoadReport) -> Result<String, DrawError> {
    let mut lines: Vec<Line> = Vec::new();
    let encoded =
        [("measured", Some(&report.histograms.latency)), ("corrected", report.histograms.corrected.as_ref())];
    for (name, text) in encoded {
        let Some(text) = text else { continue };
        let h = decode_histogram(text)?;
        if h.is_empty() {
            continue;
        }
        let points = (0..=50)
            .map(|k| {
                let x = f64::from(k) / 10.0;
                let q = 1.0 - 10f64.powf(-x);
                (x, h.value_at_quantile(q) as f64 / 1000.0)
            })
            .collect();
        lines.push((name.to_string(), points));
    }
    if lines.is_empty() {
        return Err("no latencies".into());
    }
    let label = |x: &f64| {
        let q = 100.0 * (1.0 - 10f64.powf(-x));
        if (x - x.round()).abs() < 1e-9 {
            format!("{}%", (q * 1000.0).round() / 1000.0)
        } else {
            String::new()
        }
    };
    line_chart("Latency by percentile", "percentile", "ms", &lines, &label)
}

fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    x_label: &dyn Fn(&f64) -> String,
) -> Result<String, DrawError> {
    let points = || lines.iter().flat_map(|(_, p)| p.iter());
    let x_hi = points().map(|p| p.0).fold(0.0, f64::max).max(1.0);
    let y_hi = points().map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.12;
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, (900, 420))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_hi, 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(x_label)
            .light_line_style(WHITE.mix(0.0))
            .label_style(("sans-serif", 13))
            .draw()?;
        for (i, (name, points)) in lines.iter().enumerate() {
            draw_line(&mut chart, i, name, points)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present()?;
    }
    Ok(svg)
}
