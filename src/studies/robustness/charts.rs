//! The sweep's charts, as the seed drew them: one line per target over the
//! number of concurrent requests (log scale) — success rate, minimum and
//! maximum response time — and, what the seed could not show, peak memory
//! and peak OS threads, whose slopes are what a connection and a thread cost.

use plotters::prelude::*;

use super::results::{Step, StepStatus, SweepResults, TargetResult};
use super::seed::{MAX_MARKS, SEED_DELAY_MS, SUCCESS_MARKS, SeedMark};
use super::step::Outcome;
use crate::page::{Chart, DrawError, Family, canvas, color, draw_family_line, draw_legend};

/// One target's line: its name, its family and its points.
type Line = (String, Family, Vec<(f64, f64)>);

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
        // The seed's figures beside this machine's: its success rates always,
        // its response times only when this sweep waited the seed's 5 s.
        let marks: &[SeedMark] = match file {
            "success.svg" => &SUCCESS_MARKS,
            "max.svg" if results.delay_ms == SEED_DELAY_MS => &MAX_MARKS,
            _ => &[],
        };
        let lines: Vec<Line> = results
            .targets
            .iter()
            .map(|t| {
                let points = t
                    .steps
                    .iter()
                    .filter(|s| s.status == StepStatus::Run)
                    .filter_map(|s| Some((s.level as f64, value(s)?)))
                    .collect();
                (t.name.clone(), t.family, points)
            })
            .collect();
        let title = format!("{title} over concurrent requests");
        if let Ok(svg) = lines_chart(&title, y_desc, &lines, marks) {
            charts.push(Chart { file: file.to_string(), title, svg });
        }
    }
    if let Ok(svg) = outcomes_chart(&results.targets) {
        let title = "Served, refused and timed-out requests over concurrent requests".to_string();
        charts.push(Chart { file: "outcomes.svg".to_string(), title, svg });
    }
    if let Ok(svg) = per_request_chart(results) {
        let title = "Memory per in-flight request (KiB), over the levels answered in full".to_string();
        charts.push(Chart { file: "per-request.svg".to_string(), title, svg });
    }
    charts
}

/// One row per target: its KiB per in-flight request, the whole process
/// (cgroup peak) and, for a JVM, its heap.
fn per_request_chart(results: &SweepResults) -> Result<String, DrawError> {
    let rows: Vec<(String, f64, Option<f64>)> = results
        .targets
        .iter()
        .filter_map(|t| {
            let p = t.per_request.as_ref()?;
            Some((t.name.clone(), p.process_kib?.max(0.0), p.heap_kib.map(|h| h.max(0.0))))
        })
        .collect();
    let x_hi = rows.iter().map(|r| r.1.max(r.2.unwrap_or(0.0))).fold(1.0, f64::max) * 1.25;
    let height = 90 + 44 * rows.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, (900, height))?;
        let n = rows.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption("Memory per in-flight request, over the levels answered in full", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(130)
            .build_cartesian_2d(0.0..x_hi, 0.0..n as f64)?;
        let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        chart
            .configure_mesh()
            .x_desc("KiB per concurrent request (slope of peak memory over concurrency)")
            .y_labels(n * 2 + 1)
            .y_label_formatter(&|y: &f64| {
                let i = (n as f64 - y - 0.5).round();
                if (n as f64 - y - 0.5 - i).abs() < 0.01 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .light_line_style(WHITE.mix(0.0))
            .label_style(("sans-serif", 13))
            .draw()?;
        for (i, (_, process, heap)) in rows.iter().enumerate() {
            let top = n as f64 - i as f64 - 0.15;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(0.0, top - 0.35), (*process, top)],
                color(0).filled(),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("{process:.1} process"),
                (*process + x_hi * 0.01, top - 0.1),
                ("sans-serif", 12),
            )))?;
            if let Some(heap) = heap {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(0.0, top - 0.7), (*heap, top - 0.35)],
                    color(1).filled(),
                )))?;
                chart.draw_series(std::iter::once(Text::new(
                    format!("{heap:.1} heap"),
                    (*heap + x_hi * 0.01, top - 0.45),
                    ("sans-serif", 12),
                )))?;
            }
        }
        root.present()?;
    }
    Ok(svg)
}

/// How each level's requests ended, one panel per kind, one line per
/// target in the same colours and markers as the other charts: served (2xx
/// within the timeout), refused (a 503 or a close before the request: a
/// server that degrades), timed out (no answer, or no connection, within
/// the timeout: a server that hangs or is gone).
fn outcomes_chart(targets: &[TargetResult]) -> Result<String, DrawError> {
    type Count = fn(&super::step::StepLoad) -> usize;
    let panels: [(&str, Count); 3] = [
        ("Served (2xx within the timeout)", |l| l.count(Outcome::Ok)),
        ("Refused (503, or closed before the request)", |l| l.count(Outcome::Refused)),
        ("Timed out (no answer or no connection in time)", super::step::StepLoad::timed_out),
    ];
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, (900, 1440))?;
        for (area, (title, count)) in root.split_evenly((3, 1)).iter().zip(panels) {
            let lines: Vec<Line> = targets
                .iter()
                .map(|t| {
                    let points = t
                        .steps
                        .iter()
                        .filter_map(|s| Some((s.level as f64, count(s.load.as_ref()?) as f64)))
                        .collect();
                    (t.name.clone(), t.family, points)
                })
                .collect();
            draw_lines(area, title, "requests", &lines, &[])?;
        }
        root.present()?;
    }
    Ok(svg)
}

fn lines_chart(title: &str, y_desc: &str, lines: &[Line], marks: &[SeedMark]) -> Result<String, DrawError> {
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, (900, 520))?;
        draw_lines(&root, title, y_desc, lines, marks)?;
        root.present()?;
    }
    Ok(svg)
}

/// One line per target over the levels (log scale) on `area`, with the
/// seed's `marks` beside them.
fn draw_lines(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    y_desc: &str,
    lines: &[Line],
    marks: &[SeedMark],
) -> Result<(), DrawError> {
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|(x, _)| *x))
        .chain(marks.iter().map(|m| m.level))
        .collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|(_, y)| *y))
        .chain(marks.iter().map(|m| m.value))
        .collect();
    let x_lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let x_hi = xs.iter().copied().fold(0.0, f64::max);
    let (x_lo, x_hi) = if x_lo.is_finite() && x_hi > x_lo { (x_lo * 0.8, x_hi * 1.25) } else { (1.0, 10.0) };
    let y_hi = ys.iter().copied().fold(0.0, f64::max).max(1.0) * 1.12;
    {
        let mut chart = ChartBuilder::on(area)
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
        for (i, (name, family, points)) in lines.iter().enumerate() {
            draw_family_line(&mut chart, i, *family, name, points)?;
        }
        // The seed's figures: black diamonds, labelled; two at one level are a range.
        for pair in marks.windows(2).filter(|w| w[0].level == w[1].level) {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(pair[0].level, pair[0].value), (pair[1].level, pair[1].value)],
                BLACK.stroke_width(2),
            )))?;
        }
        if !marks.is_empty() {
            chart
                .draw_series(marks.iter().map(|m| {
                    EmptyElement::at((m.level, m.value))
                        + Polygon::new(vec![(0, -6), (6, 0), (0, 6), (-6, 0)], BLACK.filled())
                        + Text::new(m.label, (8, -14), ("sans-serif", 12))
                }))?
                .label("the seed's figures")
                .legend(|(x, y)| {
                    Polygon::new(
                        vec![(x + 9, y - 5), (x + 14, y), (x + 9, y + 5), (x + 4, y)],
                        BLACK.filled(),
                    )
                });
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{PALETTE, Shape};

    /// The fill colours of the SVG's elements of `tag` (`circle`, `polygon`)
    /// with `vertices` points (polygons only), as `#RRGGBB`.
    fn fills(svg: &str, tag: &str, vertices: Option<usize>) -> Vec<String> {
        svg.split('<')
            .filter(|e| e.starts_with(&format!("{tag} ")))
            .filter(|e| {
                vertices.is_none_or(|n| {
                    let points = e.split("points=\"").nth(1).and_then(|p| p.split('"').next()).unwrap_or("");
                    points.split_whitespace().count() == n
                })
            })
            .filter_map(|e| e.split("fill=\"").nth(1).and_then(|f| f.split('"').next()).map(str::to_string))
            .collect()
    }

    /// The SVG element a family's marker is drawn as, and its vertices.
    fn element(family: Family) -> (&'static str, Option<usize>) {
        match family.shape() {
            Shape::Circle => ("circle", None),
            Shape::Square => ("rect", None),
            Shape::Polygon(points) => ("polygon", Some(points.len())),
        }
    }

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    #[test]
    fn the_outcomes_chart_draws_each_target_in_three_panels() {
        use crate::studies::robustness::results::StepStatus;
        use crate::studies::robustness::step::StepLoad;
        let step = |level: usize, ok: usize, refused: usize, timeout: usize| Step {
            load: Some(StepLoad {
                outcomes: [("ok", ok), ("refused", refused), ("timeout", timeout)]
                    .into_iter()
                    .filter(|(_, n)| *n > 0)
                    .collect(),
                ..StepLoad::default()
            }),
            ..Step::not_run(level, StepStatus::Run)
        };
        let target = |name: &str, family: Family, steps: Vec<Step>| TargetResult {
            steps,
            ..TargetResult::new(name, family)
        };
        let targets = [
            target("lean", Family::Blocklab, vec![step(1000, 1000, 0, 0), step(50_000, 30_000, 20_000, 0)]),
            // A level not run draws no point.
            target(
                "go",
                Family::Go,
                vec![step(1000, 1000, 0, 0), Step::not_run(50_000, StepStatus::NotRunDown)],
            ),
        ];
        let svg = outcomes_chart(&targets).expect("drawn");
        for (i, (family, points)) in [(Family::Blocklab, 2), (Family::Go, 1)].into_iter().enumerate() {
            let colour = hex(PALETTE[i]);
            let (tag, vertices) = element(family);
            let markers = fills(&svg, tag, vertices).iter().filter(|f| **f == colour).count();
            // Its points and a legend entry in each of the three panels.
            assert_eq!(markers, 3 * (points + 1), "{family:?}: {markers} {tag} markers in {colour}");
        }
        for panel in ["Served", "Refused", "Timed out"] {
            assert!(svg.contains(panel), "no {panel} panel");
        }
    }

    #[test]
    fn every_series_has_its_own_colour_and_its_familys_marker() {
        // A study-2 sweep's dozen targets: four blocklab models, six JVM peers, Go, one other.
        let families = [
            Family::Blocklab,
            Family::Blocklab,
            Family::Blocklab,
            Family::Blocklab,
            Family::Jvm,
            Family::Jvm,
            Family::Jvm,
            Family::Jvm,
            Family::Jvm,
            Family::Jvm,
            Family::Go,
            Family::Other,
        ];
        let lines: Vec<Line> = families
            .iter()
            .enumerate()
            .map(|(i, f)| (format!("target-{i}"), *f, vec![(100.0, i as f64), (1000.0, i as f64 + 1.0)]))
            .collect();
        let svg = lines_chart("t", "y", &lines, &[]).expect("drawn");
        let colours: Vec<String> = (0..lines.len()).map(|i| hex(PALETTE[i])).collect();
        let mut distinct = colours.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), lines.len(), "two series share a colour");
        for (i, family) in families.iter().enumerate() {
            let colour = &colours[i];
            assert!(svg.contains(&format!("stroke=\"{colour}\"")), "series {i} draws no line in {colour}");
            let (tag, vertices) = element(*family);
            // Two points and a legend entry: three markers of its shape, in its colour.
            let markers = fills(&svg, tag, vertices).iter().filter(|f| *f == colour).count();
            assert_eq!(markers, 3, "series {i} ({family:?}) has {markers} {tag} markers in {colour}");
            // And no marker of another family's shape in its colour.
            let all =
                [Family::Blocklab, Family::Jvm, Family::Go, Family::Python, Family::Node, Family::Other];
            for other in all.iter().filter(|o| *o != family) {
                let (tag, vertices) = element(*other);
                let wrong = fills(&svg, tag, vertices).iter().filter(|f| *f == colour).count();
                assert_eq!(wrong, 0, "series {i} ({family:?}) also has {other:?} markers");
            }
        }
    }
}
