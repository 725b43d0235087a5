//! What every report page and chart is made of, whatever writes it (a
//! study, `blocklab load --html`): a chart (an SVG document with its file
//! name and title), the pieces of a self-contained HTML page (the style,
//! escaping, SVG inlining), and the charts' one look — the palette, a named
//! line with its legend entry, the legend box.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// A chart: file name, title, SVG text.
pub struct Chart {
    /// File name under `charts/`.
    pub file: &'static str,
    /// Title.
    pub title: String,
    /// The SVG document.
    pub svg: String,
}

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The one style sheet of every report page.
pub const STYLE: &str = "
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #1b1f24; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.7rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #d0d7de; }
.sub { color: #57606a; margin-top: 0; }
table { border-collapse: collapse; margin: .8rem 0; font-size: .88rem; }
th, td { border: 1px solid #d0d7de; padding: .28rem .55rem; text-align: right; }
th { background: #f6f8fa; } td:nth-child(3), th:nth-child(3) { text-align: left; }
.normalized td:nth-child(2), .normalized th:nth-child(2) { text-align: left; }
.normalized td:nth-child(3) { text-align: right; }
ul.reading li { margin: .35rem 0; }
.warn { background: #fff8c5; border: 1px solid #d4a72c; padding: .5rem .8rem; border-radius: 6px; }
.fail { background: #ffebe9; border: 1px solid #cf222e; padding: .5rem .8rem; border-radius: 6px; }
.chart { margin: 1rem 0; } .chart svg { max-width: 100%; height: auto; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; } dt { font-weight: 600; }
.glossary td { text-align: left; }
";

/// An SVG document without its XML declaration, to inline in a page.
pub fn strip_xml_decl(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

/// The charts as page blocks: each SVG inline in a titled `div.chart`.
pub fn charts_html(charts: &[Chart]) -> String {
    charts
        .iter()
        .map(|chart| {
            format!(
                "<div class=\"chart\" title=\"{}\">{}</div>",
                escape(&chart.title),
                strip_xml_decl(&chart.svg)
            )
        })
        .collect()
}

/// The charts' series colours, in order.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The colour of the `i`th series.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// A chart's drawing error.
pub type DrawError = Box<dyn std::error::Error>;

/// Draws `points` as a line named `name` in the `i`th colour, with its legend entry.
pub fn draw_line<'a, X>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    i: usize,
    name: &str,
    points: &[(f64, f64)],
) -> Result<(), DrawError>
where
    X: Ranged<ValueType = f64>,
{
    let color = color(i);
    chart
        .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    Ok(())
}

/// Draws the legend box of every named series, at `position`.
pub fn draw_legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> Result<(), DrawError> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 13))
        .draw()?;
    Ok(())
}

/// A white canvas of `size` pixels drawing into `svg`.
pub fn canvas(svg: &mut String, size: (u32, u32)) -> Result<DrawingArea<SVGBackend<'_>, Shift>, DrawError> {
    let root = SVGBackend::with_string(svg, size).into_drawing_area();
    root.fill(&WHITE)?;
    Ok(root)
}
