//! The charts of a bench report, as SVG drawn with plotters: horizontal bars
//! (API names fit on the left), one group of bars per API.

use plotters::prelude::*;

use super::results::{BLOCKLAB, BenchResults, TestRecord};

pub use crate::page::Chart;
use crate::page::{DrawError, Family, canvas, color, draw_family_line, draw_legend, family_marker};

/// A named series of values, one per category (None: no bar), with each
/// value's range over the runs (drawn as a whisker) and the family its
/// target belongs to (drawn as a marker at the bar's end).
struct Series {
    name: String,
    values: Vec<Option<f64>>,
    ranges: Vec<Option<(f64, f64)>>,
    family: Option<Family>,
}

impl Series {
    /// A series with no ranges and no family.
    fn plain(name: &str, values: Vec<Option<f64>>) -> Series {
        Series { name: name.to_string(), ranges: vec![None; values.len()], values, family: None }
    }
}

fn label(t: &TestRecord) -> String {
    format!("{}  {}", t.test_id, t.api)
}

/// Every chart of the report.
pub fn all(results: &BenchResults) -> Vec<Chart> {
    // The per-API charts are blocklab's; the side-by-side chart has every target.
    let tests: Vec<&TestRecord> =
        results.tests.iter().filter(|t| t.target == BLOCKLAB && t.best().is_some()).collect();
    let names: Vec<String> = tests.iter().map(|t| label(t)).collect();
    let best = |f: fn(&super::results::RunRecord) -> f64| -> Vec<Option<f64>> {
        tests.iter().map(|t| t.best().map(f)).collect()
    };
    let mut charts = Vec::new();
    let mut push = |file: &str, title: String, x: &str, series: Vec<Series>, log: bool, max: Option<f64>| {
        if let Ok(svg) = hbars(&title, x, &names, &series, log, max, None) {
            charts.push(Chart { file: file.to_string(), title, svg });
        }
    };
    push(
        "rps.svg",
        "Requests per second per API (best run)".to_string(),
        "requests/s (log scale)",
        vec![Series::plain("RPS", best(|r| r.rps))],
        true,
        None,
    );
    push(
        "latency.svg",
        "Latency percentiles per API (best run)".to_string(),
        "ms (log scale)",
        vec![
            Series::plain("p50", best(|r| r.p50_ms)),
            Series::plain("p99", best(|r| r.p99_ms)),
            Series::plain("p99.9", best(|r| r.p999_ms)),
            Series::plain("max", best(|r| r.max_ms)),
        ],
        true,
        None,
    );
    push(
        "normalized.svg",
        "RPS as a fraction of /test: blocklab beside the seed's Play app".to_string(),
        "fraction of /test",
        vec![
            Series::plain(
                "seed (Play 2.7)",
                tests
                    .iter()
                    .map(|t| results.normalized.iter().find(|n| n.test_id == t.test_id).and_then(|n| n.seed))
                    .collect(),
            ),
            Series::plain(
                "blocklab",
                tests
                    .iter()
                    .map(|t| {
                        results.normalized.iter().find(|n| n.test_id == t.test_id).and_then(|n| n.blocklab)
                    })
                    .collect(),
            ),
        ],
        false,
        Some(1.05),
    );
    push(
        "busy.svg",
        "How busy the server's threads were (best run)".to_string(),
        "busy ratio (1.0 = never idle; blocked counts as busy)",
        vec![
            Series::plain("HTTP workers", best(|r| r.server.http_busy_ratio)),
            Series::plain("actor threads", best(|r| r.server.actor_busy_ratio)),
        ],
        false,
        Some(1.05),
    );
    if let Some(chart) = side_by_side(results) {
        charts.push(chart);
    }
    charts.extend(stalls(results));
    charts
}

/// One timeline per endpoint that met `--db-stall`: answers per second of
/// every target, second by second, the stall shaded.
fn stalls(results: &BenchResults) -> Vec<Chart> {
    let targets = results.target_names();
    // Each endpoint once, however its rounds and targets were interleaved.
    let mut apis: Vec<(super::results::TestId, &str)> = Vec::new();
    for s in &results.stalls {
        if !apis.iter().any(|(id, _)| *id == s.test_id) {
            apis.push((s.test_id, s.api.as_str()));
        }
    }
    let mut charts = Vec::new();
    for (test_id, api) in apis {
        let records: Vec<&super::stall::StallRecord> =
            results.stalls.iter().filter(|s| s.test_id == test_id).collect();
        let title = format!("{api} through the stall ({}): answers per second", records[0].stall);
        if let Ok(svg) = stall_timeline(results, &title, &targets, &records) {
            charts.push(Chart { file: format!("stall-test{test_id}.svg"), title, svg });
        }
    }
    charts
}

fn stall_timeline(
    results: &BenchResults,
    title: &str,
    targets: &[&str],
    records: &[&super::stall::StallRecord],
) -> Result<String, DrawError> {
    let x_hi = records.iter().map(|r| r.seconds.len()).max().unwrap_or(1).max(1) as f64;
    let y_hi = records.iter().flat_map(|r| r.seconds.iter().map(|s| s.rps)).fold(1.0, f64::max) * 1.15;
    let (from, to) = (records[0].starts_s as f64, records[0].ends_s() as f64);
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, (900, 440))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_hi, 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("seconds since the load started (open loop)")
            .y_desc("answers per second")
            .light_line_style(WHITE.mix(0.0))
            .label_style(("sans-serif", 13))
            .draw()?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(from, 0.0), (to, y_hi)],
                RGBColor(0, 0, 0).mix(0.08).filled(),
            )))?
            .label("the stall")
            .legend(|(x, y)| {
                Rectangle::new([(x, y - 5), (x + 18, y + 5)], RGBColor(0, 0, 0).mix(0.15).filled())
            });
        // A series per target and round, each its own colour; a round is
        // named only when its target ran more than one.
        let mut ordered: Vec<&&super::stall::StallRecord> = records.iter().collect();
        ordered.sort_by_key(|r| (targets.iter().position(|t| *t == r.target), r.round));
        for (i, record) in ordered.into_iter().enumerate() {
            let rounds = records.iter().filter(|r| r.target == record.target).count();
            let name = if rounds > 1 {
                format!("{} round {}", record.target, record.round)
            } else {
                record.target.clone()
            };
            let points: Vec<(f64, f64)> =
                record.seconds.iter().map(|s| (s.second as f64 + 0.5, s.rps)).collect();
            draw_family_line(&mut chart, i, results.family(&record.target), &name, &points)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        root.present()?;
    }
    Ok(svg)
}

/// Requests per second per Test ID: every target here beside the seed's
/// published run (best run each).
fn side_by_side(results: &BenchResults) -> Option<Chart> {
    let targets = results.target_names();
    let mut ids: Vec<_> = results.tests.iter().map(|t| (t.test_id, t.api.clone())).collect();
    ids.sort();
    ids.dedup();
    let names: Vec<String> = ids.iter().map(|(id, api)| format!("{id}  {api}")).collect();
    let mut series: Vec<Series> = targets
        .iter()
        .map(|target| Series {
            name: format!(
                "{target} here{}",
                if results.conditions.parameters.runs > 1 { " (whisker: range of runs)" } else { "" }
            ),
            values: ids
                .iter()
                .map(|(id, _)| results.test(target, *id).and_then(TestRecord::best).map(|r| r.rps))
                .collect(),
            ranges: ids
                .iter()
                .map(|(id, _)| {
                    results
                        .test(target, *id)
                        .and_then(|t| t.range(|r| r.rps))
                        .filter(|s| s.runs > 1)
                        .map(|s| (s.min, s.max))
                })
                .collect(),
            family: Some(results.family(target)),
        })
        .collect();
    series.push(Series::plain(
        "seed (Play 2.7, 2019 laptop)",
        ids.iter().map(|(id, _)| results.seed.iter().find(|s| s.test_id == *id).map(|s| s.rps)).collect(),
    ));
    let title = format!("Requests per second: {} here, and the seed's published run", targets.join(", "));
    // A ceiling its own client set is a lower bound of Neo4j's: the line says so, so that a
    // server drawn past it is not read as faster than its database.
    // The highest ceiling any client measured: the database's limit as far as the bench knows it.
    let used = results
        .conditions
        .ceilings
        .iter()
        .filter_map(|c| c.used().map(|u| (c.client, u)))
        .max_by(|a, b| a.1.reads_per_s.total_cmp(&b.1.reads_per_s));
    let ceiling = used.map(|(client, u)| {
        let c = u.reads_per_s;
        let db = results.conditions.database_label();
        let label = if u.bound.as_deref() == Some("client") {
            format!("{db}'s ceiling here: ≥ {c:.0} reads/s (a lower bound: {client} ran out of CPU first)")
        } else {
            format!("{db}'s ceiling here: {c:.0} reads/s ({client}, no HTTP; the higher of before and after)")
        };
        (c, label)
    });
    let svg = hbars(&title, "requests/s (log scale)", &names, &series, true, None, ceiling.as_ref()).ok()?;
    Some(Chart { file: "side_by_side.svg".to_string(), title, svg })
}

fn hbars(
    title: &str,
    x_desc: &str,
    categories: &[String],
    series: &[Series],
    log: bool,
    max: Option<f64>,
    line: Option<&(f64, String)>,
) -> Result<String, DrawError> {
    let n = categories.len().max(1);
    let keys = series.len() + usize::from(line.is_some());
    let legend = if keys > 1 { 18 * keys + 20 } else { 0 };
    let height = (110 + n * (14 * series.len() + 22) + legend) as u32;
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, (900, height))?;
        let values: Vec<f64> = series
            .iter()
            .flat_map(|s| s.values.iter().flatten().copied())
            .chain(line.map(|(x, _)| *x))
            .collect();
        let hi =
            max.unwrap_or_else(|| values.iter().copied().fold(0.0, f64::max) * if log { 3.0 } else { 1.1 });
        let lo = if log {
            values.iter().copied().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min) / 3.0
        } else {
            0.0
        };
        let (lo, hi) =
            if !lo.is_finite() || hi <= lo { (if log { 0.1 } else { 0.0 }, 1.0) } else { (lo, hi) };
        let mut builder = ChartBuilder::on(&root);
        builder.caption(title, ("sans-serif", 20)).margin(12).x_label_area_size(40).y_label_area_size(190);
        // Several series get a legend: an empty band at the bottom keeps it off the bars.
        let legend_band = if keys > 1 { 0.35 * keys as f64 + 0.3 } else { 0.0 };
        let y_range = (-0.5f64 - legend_band)..(n as f64 - 0.5);
        let names = categories.to_vec();
        let y_fmt = move |y: &f64| {
            let i = y.round();
            if (y - i).abs() < 0.01 && i >= 0.0 && (i as usize) < names.len() {
                names[names.len() - 1 - i as usize].clone()
            } else {
                String::new()
            }
        };
        let group = 0.8 / series.len() as f64;
        // Categories are drawn top to bottom: category i sits at y = n-1-i.
        let bar = |i: usize, j: usize| {
            let center = (n - 1 - i) as f64;
            let top = center + 0.4 - j as f64 * group;
            (top - group * 0.9, top)
        };
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .x_label_formatter(&|x: &f64| format!("{}", (x * 1000.0).round() / 1000.0))
                    .y_labels(n * 5 + 5)
                    .y_label_formatter(&y_fmt)
                    .disable_y_mesh()
                    .label_style(("sans-serif", 13))
                    .draw()?;
                for (j, s) in series.iter().enumerate() {
                    let color = color(j);
                    let bars = s.values.iter().enumerate().filter_map(|(i, v)| {
                        let v = (*v)?;
                        let (y0, y1) = bar(i, j);
                        Some(Rectangle::new([(lo, y0), (v.max(lo), y1)], color.filled()))
                    });
                    chart
                        .draw_series(bars)?
                        .label(s.name.clone())
                        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
                    // The range over the runs: a black whisker with end ticks across the bar.
                    let spans = s.ranges.iter().enumerate().filter_map(|(i, r)| {
                        let (min, max) = (*r)?;
                        let (y0, y1) = bar(i, j);
                        let y = (y0 + y1) / 2.0;
                        let tick = group * 0.35;
                        Some([
                            PathElement::new(vec![(min.max(lo), y), (max.max(lo), y)], BLACK.stroke_width(2)),
                            PathElement::new(
                                vec![(min.max(lo), y - tick), (min.max(lo), y + tick)],
                                BLACK.stroke_width(2),
                            ),
                            PathElement::new(
                                vec![(max.max(lo), y - tick), (max.max(lo), y + tick)],
                                BLACK.stroke_width(2),
                            ),
                        ])
                    });
                    chart.draw_series(spans.flatten())?;
                    if let Some(family) = s.family {
                        let markers = s.values.iter().enumerate().filter_map(|(i, v)| {
                            let (y0, y1) = bar(i, j);
                            Some(
                                EmptyElement::at(((*v)?.max(lo), (y0 + y1) / 2.0))
                                    + family_marker(family, color),
                            )
                        });
                        chart.draw_series(markers)?;
                    }
                    let texts = s.values.iter().enumerate().filter_map(|(i, v)| {
                        let v = (*v)?;
                        let (y0, y1) = bar(i, j);
                        Some(Text::new(
                            format_value(v),
                            (v.max(lo), (y0 + y1) / 2.0),
                            ("sans-serif", 11).into_font(),
                        ))
                    });
                    chart.draw_series(texts)?;
                }
                // A limit every bar is read against (a dashed vertical line).
                if let Some((x, label)) = line {
                    let x = (*x).max(lo);
                    let dashes = (0..n * 6).map(|k| {
                        let y0 = -0.5 + k as f64 / 6.0;
                        PathElement::new(vec![(x, y0), (x, y0 + 1.0 / 12.0)], BLACK.stroke_width(2))
                    });
                    chart
                        .draw_series(dashes)?
                        .label(label.clone())
                        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK.stroke_width(2)));
                }
                if keys > 1 {
                    draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
                }
            }};
        }
        if log {
            draw!(builder.build_cartesian_2d((lo..hi).log_scale(), y_range)?);
        } else {
            draw!(builder.build_cartesian_2d(lo..hi, y_range)?);
        }
        root.present()?;
    }
    Ok(svg)
}

fn format_value(v: f64) -> String {
    if v >= 100.0 {
        format!(" {v:.0}")
    } else if v >= 10.0 {
        format!(" {v:.1}")
    } else {
        format!(" {v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PALETTE;

    #[test]
    fn bars_carry_their_familys_marker_their_own_colour_and_the_runs_range() {
        let series = [
            Series {
                name: "blocklab here".into(),
                values: vec![Some(4540.0)],
                ranges: vec![Some((4431.0, 4540.0))],
                family: Some(Family::Blocklab),
            },
            Series {
                name: "play here".into(),
                values: vec![Some(4080.0)],
                ranges: vec![Some((3990.0, 4080.0))],
                family: Some(Family::Jvm),
            },
        ];
        let svg =
            hbars("t", "x", &["3  /getDataAsync".to_string()], &series, true, None, None).expect("drawn");
        let hex = |i: usize| format!("#{:02X}{:02X}{:02X}", PALETTE[i].0, PALETTE[i].1, PALETTE[i].2);
        assert_ne!(hex(0), hex(1));
        // blocklab: a circle in its colour; play (a JVM): a square (a small rect) in its own.
        let circles =
            svg.split("<circle").skip(1).filter(|e| e.contains(&format!("fill=\"{}\"", hex(0)))).count();
        assert_eq!(circles, 1, "{svg}");
        let squares = svg
            .split("<rect")
            .skip(1)
            .filter(|e| e.contains(&format!("fill=\"{}\"", hex(1))) && e.contains("width=\"8\""))
            .count();
        assert_eq!(squares, 1, "{svg}");
        // Each range is a black whisker with two end ticks: three black paths per bar.
        let black = svg.split("<polyline").skip(1).filter(|e| e.contains("stroke=\"#000000\"")).count();
        assert!(black >= 6, "{black} black paths:\n{svg}");
    }
}
