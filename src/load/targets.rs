//! `--urls FILE`: several requests for one run, in vegeta's text targets
//! format: a request line `METHOD URL`, then under it its own header lines
//! `Name: value` and optionally `@FILE`, its body (a path relative to the
//! targets file), and a blank line before the next request. Lines starting
//! with `#` are comments.
//!
//! ```text
//! GET http://127.0.0.1:9000/test
//!
//! POST http://127.0.0.1:9000/items
//! Content-Type: application/json
//! @item.json
//! ```
//!
//! Each connection sends them in turn (round-robin), each encoded once per
//! run; all must go to one scheme, host and port, since they share the
//! connections.

use std::path::Path;

use hyper::header::{HeaderName, HeaderValue};

/// One request of a targets file, as written (its URL not parsed yet).
#[derive(Debug, Clone, PartialEq)]
pub struct TargetLine {
    /// Line number of its request line (1-based), for messages.
    pub line: usize,
    /// The method.
    pub method: hyper::Method,
    /// The URL as written.
    pub url: String,
    /// Its own header lines.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Its body, read from its `@FILE`.
    pub body: Option<Vec<u8>>,
}

/// The requests of the targets file at `path`.
pub fn read(path: &Path) -> Result<Vec<TargetLine>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read --urls {}: {e}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let targets = parse(&text, |file| {
        std::fs::read(base.join(file)).map_err(|e| format!("cannot read body file {file}: {e}"))
    })
    .map_err(|e| format!("--urls {}: {e}", path.display()))?;
    if targets.is_empty() {
        return Err(format!("--urls {}: no request in it", path.display()));
    }
    Ok(targets)
}

/// The requests in `text`; `body` reads a body file named by an `@FILE` line.
pub fn parse(
    text: &str,
    mut body: impl FnMut(&str) -> Result<Vec<u8>, String>,
) -> Result<Vec<TargetLine>, String> {
    let mut targets: Vec<TargetLine> = Vec::new();
    // Whether the lines that follow belong to the last request (no blank line since).
    let mut in_request = false;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.trim();
        if line.is_empty() {
            in_request = false;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let at = |what: String| format!("line {number}: {what}");
        if !in_request {
            let (method, url) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| at(format!("'{line}' is not 'METHOD URL'")))?;
            let method = method.parse().map_err(|_| at(format!("invalid method '{method}'")))?;
            targets.push(TargetLine {
                line: number,
                method,
                url: url.trim().to_string(),
                headers: Vec::new(),
                body: None,
            });
            in_request = true;
            continue;
        }
        let target = targets.last_mut().expect("in a request");
        if let Some(file) = line.strip_prefix('@') {
            if target.body.is_some() {
                return Err(at("a second body file for one request".to_string()));
            }
            target.body = Some(body(file.trim()).map_err(at)?);
        } else {
            let (name, value) =
                line.split_once(':').ok_or_else(|| at(format!("'{line}' is not 'Name: value'")))?;
            let name =
                HeaderName::try_from(name.trim()).map_err(|_| at(format!("invalid header name '{name}'")))?;
            let value = HeaderValue::try_from(value.trim())
                .map_err(|_| at(format!("invalid header value in '{line}'")))?;
            target.headers.push((name, value));
        }
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vegeta_targets_are_read_with_their_headers_and_bodies() {
        let text = "# two requests\nGET http://h:1/a?x=1\nX-Account: 7\n\n\n  POST   http://h:1/b  \n\
                    Content-Type: application/json\n@item.json\nX-After: 1\n\nHEAD http://h:1/c\n";
        let targets = parse(text, |file| Ok(format!("<{file}>").into_bytes())).unwrap();
        assert_eq!(targets.len(), 3);
        assert_eq!(
            (targets[0].method.as_str(), targets[0].url.as_str(), targets[0].line),
            ("GET", "http://h:1/a?x=1", 2)
        );
        assert_eq!(
            targets[0].headers,
            vec![(HeaderName::from_static("x-account"), HeaderValue::from_static("7"))]
        );
        assert_eq!((targets[1].method.as_str(), targets[1].url.as_str()), ("POST", "http://h:1/b"));
        assert_eq!(targets[1].body.as_deref(), Some(&b"<item.json>"[..]));
        assert_eq!(targets[1].headers.len(), 2);
        assert_eq!((targets[2].method.as_str(), targets[2].body.is_none()), ("HEAD", true));
    }

    #[test]
    fn mistakes_are_named_with_their_line() {
        let ok = |_: &str| Ok(Vec::new());
        assert!(parse("http://h/a\n", ok).unwrap_err().starts_with("line 1:"));
        assert!(parse("GET http://h/a\nnot a header\n", ok).unwrap_err().starts_with("line 2:"));
        assert!(parse("GET http://h/a\n@a\n@b\n", ok).unwrap_err().contains("second body"));
        assert!(
            parse("GET http://h/a\n@missing\n", |_| Err("gone".into())).unwrap_err().contains("line 2: gone")
        );
        assert!(parse("G(T http://h/a\n", ok).unwrap_err().contains("invalid method"));
    }
}
