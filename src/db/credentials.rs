//! Credentials in database URLs: percent-encoded into a URL to hand to a
//! client, and redacted from any text that may be printed.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use url::Url;

/// Everything but the URL's unreserved characters is percent-encoded in a
/// user, a password or a graph name we write into a URL; `%` included, which
/// `Url::set_password` would leave as is.
pub const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The variable that holds a Neo4j user when a URL names none (default
/// `neo4j`), read by blocklab and by every peer that reads Neo4j.
pub const NEO4J_USER: &str = "NEO4J_USER";
/// The variable that holds a Neo4j password when a URL has none; unset: no
/// authentication.
pub const NEO4J_PASSWORD: &str = "NEO4J_PASSWORD";

pub fn encode(s: &str) -> String {
    utf8_percent_encode(s, COMPONENT).to_string()
}

/// A user or password from a URL, percent-decoded.
pub fn decode(s: &str, what: &str) -> Result<String, String> {
    percent_decode_str(s)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("the database URL's {what} is not UTF-8 once percent-decoded"))
}

/// `base` (a URL with a host) with `user:password@` set, each percent-encoded.
pub fn with_credentials(base: &str, credentials: Option<&(String, String)>) -> String {
    let mut url = Url::parse(base).expect("a URL built from a parsed host and port");
    if let Some((user, password)) = credentials {
        // Both only fail for URLs without a host, and `base` has one.
        let _ = url.set_username(&encode(user));
        let _ = url.set_password(Some(&encode(password)));
    }
    url.to_string()
}

/// `text` with the user-info part of every URL in it (`scheme://user:pass@`)
/// replaced by `***`, so that a message quoting a database URL never shows a
/// password. The user-info ends at the URL's last `@`, not at its first `/`:
/// a password typed without percent-encoding may hold a `/`, `#` or `?`, and
/// in a quoted URL (`'…'`, as clap quotes a bad value) even a space. A path
/// holding an `@` is hidden too, which costs a reader nothing.
pub fn redact_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let before_scheme =
            head[..at].trim_end_matches(|c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        let url_end = match before_scheme.chars().next_back() {
            Some(quote @ ('\'' | '"')) => tail.find(quote),
            _ => tail.find(|c: char| c == '\'' || c == '"' || c.is_whitespace()),
        }
        .unwrap_or(tail.len());
        match tail[..url_end].rfind('@') {
            Some(userinfo_end) => {
                out.push_str("***");
                rest = &tail[userinfo_end..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}
