//! What every report page and chart is made of, whatever writes it (a
//! study, `blocklab load --html`): a chart (an SVG document with its file
//! name and title), the pieces of a self-contained HTML page (the style,
//! escaping, SVG inlining), and the charts' one look — the palette, a named
//! line with its legend entry, the legend box.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// A chart: file name, title, SVG text.
#[derive(Debug, Clone)]
pub struct Chart {
    /// File name under `charts/`.
    pub file: String,
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
p.answer { font-size: 1.05rem; margin: .5rem 0; }
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
pub fn charts_html<'a>(charts: impl IntoIterator<Item = &'a Chart>) -> String {
    charts
        .into_iter()
        .map(|chart| {
            format!(
                "<div class=\"chart\" title=\"{}\">{}</div>",
                escape(&chart.title),
                strip_xml_decl(&chart.svg)
            )
        })
        .collect()
}

/// The charts' series colours, in order: Okabe and Ito's colour-blind-safe
/// palette (its yellow left out: it cannot be seen on white), then Paul
/// Tol's "muted" colours that differ from those for readers with any of the
/// three common colour deficiencies. Fourteen, so that no two series of one
/// chart share a colour (study 2 draws a dozen targets); beyond fourteen the
/// colours repeat, and the family's marker and dash still tell them apart.
pub const PALETTE: [RGBColor; 14] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x00, 0x00), // black
    RGBColor(0x88, 0x22, 0x55), // wine
    RGBColor(0x99, 0x99, 0x33), // olive
    RGBColor(0x33, 0x22, 0x88), // indigo
    RGBColor(0x44, 0xAA, 0x99), // teal
    RGBColor(0xAA, 0x44, 0x99), // purple
    RGBColor(0x88, 0x88, 0x88), // grey
    RGBColor(0xDD, 0xCC, 0x77), // sand
];

/// The colour of the `i`th series.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// What a series' target is built on, drawn as its marker and its line's
/// dash so that a reader groups the series at a glance: blocklab's own
/// models, the JVM peers, Go, Python, Node.js, anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// blocklab's own server (Rust): circles, solid lines.
    Blocklab,
    /// A Java virtual machine: squares, dashed lines.
    Jvm,
    /// Go: triangles, dotted lines.
    Go,
    /// Python: diamonds, long dashes.
    Python,
    /// Node.js: hexagons, dash-dot.
    Node,
    /// Anything else (another native server, a service at a URL): pentagons.
    Other,
}

impl Family {
    /// Its line's dash and gap in pixels (`None`: solid).
    fn dash(self) -> Option<(u32, u32)> {
        match self {
            Family::Blocklab => None,
            Family::Jvm => Some((9, 5)),
            Family::Go => Some((2, 4)),
            Family::Python => Some((16, 5)),
            Family::Node => Some((5, 3)),
            Family::Other => Some((6, 9)),
        }
    }

    /// Its marker's shape, around (0, 0) in pixels.
    pub fn shape(self) -> Shape {
        let around = |n: usize, r: f64, turn: f64| -> Vec<(i32, i32)> {
            (0..n)
                .map(|k| {
                    let a = turn + k as f64 * std::f64::consts::TAU / n as f64;
                    ((r * a.cos()).round() as i32, (r * a.sin()).round() as i32)
                })
                .collect()
        };
        use std::f64::consts::FRAC_PI_2;
        match self {
            Family::Blocklab => Shape::Circle,
            Family::Jvm => Shape::Square,
            Family::Go => Shape::Polygon(around(3, 5.5, -FRAC_PI_2)),
            Family::Python => Shape::Polygon(around(4, 5.5, -FRAC_PI_2)),
            Family::Node => Shape::Polygon(around(6, 5.0, 0.0)),
            Family::Other => Shape::Polygon(around(5, 5.5, -FRAC_PI_2)),
        }
    }
}

/// A marker's shape (an SVG `circle`, `rect` or `polygon`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A circle of radius 4.
    Circle,
    /// A square 8 pixels wide.
    Square,
    /// A polygon through these points.
    Polygon(Vec<(i32, i32)>),
}

/// A marker of `family` at an element's anchor, filled with `color` (for a
/// chart that draws its series otherwise, such as bars).
pub fn family_marker<DB: DrawingBackend>(
    family: Family,
    color: RGBColor,
) -> DynElement<'static, DB, (i32, i32)> {
    marker(family, color, (0, 0))
}

/// A marker of `family` centred `at` (pixels, relative to the element's
/// anchor), filled with `color`.
fn marker<DB: DrawingBackend>(
    family: Family,
    color: RGBColor,
    at: (i32, i32),
) -> DynElement<'static, DB, (i32, i32)> {
    match family.shape() {
        Shape::Circle => Circle::new(at, 4, color.filled()).into_dyn(),
        Shape::Square => {
            Rectangle::new([(at.0 - 4, at.1 - 4), (at.0 + 4, at.1 + 4)], color.filled()).into_dyn()
        }
        Shape::Polygon(points) => Polygon::new(
            points.into_iter().map(|(x, y)| (x + at.0, y + at.1)).collect::<Vec<_>>(),
            color.filled(),
        )
        .into_dyn(),
    }
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

/// Draws `points` as the `i`th series of a chart whose series belong to
/// families: its own colour, its family's dash, a marker of its family on
/// every point, and a legend entry showing both.
pub fn draw_family_line<'a, X>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    i: usize,
    family: Family,
    name: &str,
    points: &[(f64, f64)],
) -> Result<(), DrawError>
where
    X: Ranged<ValueType = f64>,
{
    let color = color(i);
    let style = color.stroke_width(2);
    match family.dash() {
        None => {
            chart.draw_series(LineSeries::new(points.iter().copied(), style))?;
        }
        Some((dash, gap)) => {
            chart.draw_series(DashedLineSeries::new(points.iter().copied(), dash, gap, style))?;
        }
    }
    chart
        .draw_series(points.iter().map(|p| EmptyElement::at(*p) + marker(family, color, (0, 0))))?
        .label(name)
        .legend(move |(x, y)| {
            EmptyElement::at((x, y))
                + PathElement::new(vec![(0, 0), (22, 0)], style)
                + marker(family, color, (11, 0))
        });
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
