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

/// A table of a report, built once as data and rendered as Markdown
/// (`results.md`, stdout) or HTML (`report.html`). A cell holds a figure,
/// with its range where there is one; what explains a figure goes to the
/// reading, not into its cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows, one cell per header.
    pub rows: Vec<Vec<String>>,
}

/// The most columns a table of a report has: at the width `scripts/screenshots`
/// renders a page (1,100 px of text), eleven or more run off it or wrap
/// each cell into a column of short lines.
pub const MAX_COLUMNS: usize = 10;

/// One column of a table: its header and its cells, top to bottom.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Its header.
    pub header: String,
    /// Its cells.
    pub cells: Vec<String>,
}

impl Column {
    /// A column named `header` holding `cells`.
    pub fn new(header: impl Into<String>, cells: Vec<String>) -> Column {
        Column { header: header.into(), cells }
    }
}

impl Table {
    /// GitHub-flavoured Markdown.
    pub fn markdown(&self) -> String {
        let mut out = format!("| {} |\n", self.headers.join(" | "));
        out += &format!("|{}\n", "---|".repeat(self.headers.len()));
        for row in &self.rows {
            out += &format!("| {} |\n", row.join(" | "));
        }
        out
    }

    /// An HTML `<table>`, every header and cell escaped. A column of
    /// figures is aligned right, so that their digits line up; a column with
    /// any words in it (an API, a target, a verdict) left, as text is read.
    pub fn html(&self) -> String {
        let text: Vec<bool> = (0..self.headers.len())
            .map(|c| self.rows.iter().any(|row| row.get(c).is_some_and(|cell| !is_figure(cell))))
            .collect();
        let class = |c: usize| if text.get(c) == Some(&true) { " class=\"text\"" } else { "" };
        let mut out = String::from("<table><thead><tr>");
        for (c, h) in self.headers.iter().enumerate() {
            out += &format!("<th{}>{}</th>", class(c), escape(h));
        }
        out += "</tr></thead><tbody>";
        for row in &self.rows {
            out += "<tr>";
            for (c, cell) in row.iter().enumerate() {
                out += &format!("<td{}>{}</td>", class(c), escape(cell));
            }
            out += "</tr>";
        }
        out + "</tbody></table>"
    }

    /// Tables of at most [`MAX_COLUMNS`] columns: each begins with the `keys`
    /// columns (what a row is: a Test ID, a target), then takes the `groups`
    /// in order, whole, while they fit; a group that fits in no table of its
    /// own is cut into as many as it needs. Groups keep together what is read
    /// together (the seed's figure beside the targets', a target's two CPU
    /// figures), and one table comes out when everything fits in one.
    pub fn packed(keys: &[Column], groups: Vec<Vec<Column>>) -> Vec<Table> {
        let room = MAX_COLUMNS.saturating_sub(keys.len()).max(1);
        let mut tables: Vec<Vec<Column>> = Vec::new();
        let mut current: Vec<Column> = Vec::new();
        for group in groups.into_iter().filter(|g| !g.is_empty()) {
            if current.len() + group.len() > room && !current.is_empty() {
                tables.push(std::mem::take(&mut current));
            }
            for column in group {
                if current.len() == room {
                    tables.push(std::mem::take(&mut current));
                }
                current.push(column);
            }
        }
        if !current.is_empty() {
            tables.push(current);
        }
        let rows = keys.first().map_or(0, |k| k.cells.len());
        tables
            .into_iter()
            .map(|columns| {
                let all: Vec<&Column> = keys.iter().chain(&columns).collect();
                Table {
                    headers: all.iter().map(|c| c.header.clone()).collect(),
                    rows: (0..rows)
                        .map(|r| all.iter().map(|c| c.cells.get(r).cloned().unwrap_or_default()).collect())
                        .collect(),
                }
            })
            .collect()
    }
}

/// Whether a cell holds a figure (with its range, sign or unit of %) or a
/// dash, rather than words.
pub fn is_figure(cell: &str) -> bool {
    cell.chars().all(|c| c.is_ascii_digit() || " .,()–+-—%".contains(c))
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
th { background: #f6f8fa; } th.text, td.text { text-align: left; }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(prefix: &str, n: usize) -> Vec<Column> {
        (0..n).map(|i| Column::new(format!("{prefix}{i}"), vec![format!("{i}")])).collect()
    }

    #[test]
    fn tables_are_packed_by_whole_groups_within_the_page() {
        let keys = columns("key", 2);
        // Two groups of 4 fit beside the keys in one table of 10.
        let one = Table::packed(&keys, vec![columns("a", 4), columns("b", 4)]);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].headers, ["key0", "key1", "a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"]);
        // A group that does not fit beside the first starts a table of its own, keys first.
        let two = Table::packed(&keys, vec![columns("a", 5), columns("b", 4)]);
        assert_eq!(two.iter().map(|t| t.headers.len()).collect::<Vec<_>>(), [7, 6]);
        assert_eq!(two[1].headers[..3], ["key0", "key1", "b0"]);
        assert_eq!(two[1].rows, [["0", "1", "0", "1", "2", "3"]]);
        // A group wider than a page is cut.
        let cut = Table::packed(&keys, vec![columns("a", 19)]);
        assert_eq!(cut.iter().map(|t| t.headers.len()).collect::<Vec<_>>(), [10, 10, 5]);
        assert!(cut.iter().all(|t| t.headers.len() <= MAX_COLUMNS));
    }

    #[test]
    fn a_table_renders_as_markdown_and_as_escaped_html() {
        let t = Table {
            headers: vec!["Test ID".into(), "API".into()],
            rows: vec![vec!["1".into(), "/test".into()], vec!["2".into(), "<b>".into()]],
        };
        assert_eq!(t.markdown(), "| Test ID | API |\n|---|---|\n| 1 | /test |\n| 2 | <b> |\n");
        assert_eq!(
            t.html(),
            "<table><thead><tr><th>Test ID</th><th class=\"text\">API</th></tr></thead><tbody><tr><td>1</td>\
             <td class=\"text\">/test</td></tr><tr><td>2</td><td class=\"text\">&lt;b&gt;</td></tr></tbody></table>"
        );
    }
}
