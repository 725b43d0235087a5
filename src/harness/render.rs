//! What every study's report is made of, whatever the study: a chart (an
//! SVG document with its file name and title), and the pieces of a
//! self-contained HTML page (the style, escaping, SVG inlining).

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

/// `index.html` of several studies run into one folder: a page that leads to
/// each study's `FOLDER/report.html`, with the reading of its
/// `FOLDER/results.md`. `studies` are (folder, title, one line about it).
pub fn index(dir: &std::path::Path, studies: &[(&str, &str, &str)]) -> String {
    let mut body = String::from("<h1>blocklab — the studies</h1>");
    body += "<p class=\"sub\">What blocking calls, thread pools and actors do to a web service, measured on this machine.</p>";
    for &(folder, title, about) in studies {
        body += &format!(
            "<h2><a href=\"{folder}/report.html\">{}</a></h2><p>{}</p>",
            escape(title),
            escape(about)
        );
        match std::fs::read_to_string(dir.join(folder).join("results.md")) {
            Ok(md) => {
                let reading: Vec<&str> = md
                    .split("## Reading")
                    .nth(1)
                    .unwrap_or("")
                    .lines()
                    .take_while(|l| !l.starts_with("## "))
                    .filter_map(|l| l.strip_prefix("- "))
                    .collect();
                body += "<ul class=\"reading\">";
                for line in reading {
                    body += &format!("<li>{}</li>", escape(line));
                }
                body += "</ul>";
            }
            Err(_) => {
                body += "<p class=\"fail\">This study wrote no results (it failed or was interrupted before the end).</p>"
            }
        }
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>blocklab</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{STYLE}</style></head>\
         <body>{body}</body></html>\n"
    )
}
