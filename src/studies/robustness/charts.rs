//! The sweep's charts, as the seed drew them: one line per target over the
//! number of concurrent requests (log scale) — success rate, minimum and
//! maximum response time — and, what the seed could not show, peak memory
//! and peak OS threads, whose slopes are what a connection and a thread cost.

use plotters::prelude::*;

use super::results::{Step, StepStatus, SweepResults};
use crate::harness::render::Chart;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// A chart's file, title, y axis and the figure of a step it draws.
type ChartSpec = (&'static str, &'static str, &'static str, fn(&Step) -> Option<f64>);

/// Every chart of the sweep.
pub fn all(results: &SweepResults) -> Vec<Chart> {
    let mut charts = Vec::new();
    let specs: [ChartSpec; 5] = [
        ("success.svg", "Success rate", "% of requests 2xx within the timeout", |s| {
            s.success_rate.map(|r| r * 100.0)
        }),
        ("min.svg", "Minimum response time", "ms", |s| s.min_ms),
        ("max.svg", "Maximum response time", "ms", |s| s.max_ms),
        ("memory.svg", "Peak memory of the target (page cache excluded)", "MiB", |s| {
            s.peak_memory_bytes.map(|b| b as f64 / (1u64 << 20) as f64)
        }),
        ("threads.svg", "Peak OS threads of the target", "threads", |s| s.peak_threads.map(|t| t as f64)),
    ];
    for (file, title, y_desc, value) in specs {
        let lines: Vec<(String, Vec<(f64, f64)>)> = results
            .targets
            .iter()
            .map(|t| {
                let points = t
                    .steps
                    .iter()
                    .filter(|s| s.status == StepStatus::Run)
                    .filter_map(|s| Some((s.level as f64, value(s)?)))
                    .collect();
                (t.name.clone(), points)
            })
            .collect();
        let title = format!("{title} over concurrent requests");
        if let Ok(svg) = lines_chart(&title, y_desc, &lines) {
            charts.push(Chart { file, title, svg });
        }
    }
    charts
}

fn lines_chart(
    title: &str,
    y_desc: &str,
    lines: &[(String, Vec<(f64, f64)>)],
) -> Result<String, Box<dyn std::error::Error>> {
    let xs: Vec<f64> = lines.iter().flat_map(|(_, p)| p.iter().map(|(x, _)| *x)).collect();
    let ys: Vec<f64> = lines.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)).collect();
    let x_lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let x_hi = xs.iter().copied().fold(0.0, f64::max);
    let (x_lo, x_hi) = if x_lo.is_finite() && x_hi > x_lo { (x_lo * 0.8, x_hi * 1.25) } else { (1.0, 10.0) };
    let y_hi = ys.iter().copied().fold(0.0, f64::max).max(1.0) * 1.12;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 460)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(70)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("concurrent requests (log scale)")
            .y_desc(y_desc)
            .x_label_formatter(&|x: &f64| round_label(*x))
            .light_line_style(WHITE.mix(0.0))
            .label_style(("sans-serif", 13))
            .draw()?;
        for (i, (name, points)) in lines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 13))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// A log axis label only at 1, 2 and 5 × 10^k: the others crowd each other.
fn round_label(x: f64) -> String {
    let magnitude = 10f64.powf(x.log10().floor());
    let lead = (x / magnitude).round();
    if (x / magnitude - lead).abs() < 0.01 && [1.0, 2.0, 5.0].contains(&lead) {
        format!("{x:.0}")
    } else {
        String::new()
    }
}
