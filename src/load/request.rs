//! The request a run sends, as it goes on the wire: its head (the default
//! fields, then `-H`'s, which replace a default of the same name) and its
//! body, encoded once per run and written as is by every connection.

use hyper::header::{self, HeaderName, HeaderValue};

use super::plan::LoadPlan;

/// The `User-Agent` sent unless `-H` replaces it.
pub const USER_AGENT: &str = concat!("blocklab-load/", env!("CARGO_PKG_VERSION"));

/// The `Content-Type` of a body when `-T` does not give one (as curl's `-d`).
pub const DEFAULT_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// The request `plan` describes: head and body, ready for `write(2)`.
///
/// The defaults are `Host` (the URL's authority), `User-Agent`,
/// `Authorization` (from the URL's credentials), `Content-Type` and
/// `Content-Length` (with a body) and `Connection: close` (without
/// keep-alive). A `-H` field of the same name replaces its default; one with
/// an empty value (`-H 'User-Agent:'`) removes it, as curl does.
pub fn encode(plan: &LoadPlan) -> Vec<u8> {
    let mut fields: Vec<(HeaderName, HeaderValue)> = vec![
        (header::HOST, plan.target.host.clone()),
        (header::USER_AGENT, HeaderValue::from_static(USER_AGENT)),
    ];
    if let Some(auth) = &plan.target.basic_auth {
        fields.push((header::AUTHORIZATION, auth.clone()));
    }
    if plan.body.is_some() || plan.content_type.is_some() {
        let content_type =
            plan.content_type.clone().unwrap_or_else(|| HeaderValue::from_static(DEFAULT_CONTENT_TYPE));
        fields.push((header::CONTENT_TYPE, content_type));
    }
    if !plan.keep_alive {
        fields.push((header::CONNECTION, HeaderValue::from_static("close")));
    }
    fields.retain(|(name, _)| !plan.headers.iter().any(|(given, _)| given == name));
    fields.extend(plan.headers.iter().filter(|(_, value)| !value.is_empty()).cloned());
    if let Some(body) = &plan.body {
        fields.push((header::CONTENT_LENGTH, HeaderValue::from(body.len())));
    }

    let body = plan.body.as_deref().unwrap_or_default();
    let mut wire = Vec::with_capacity(256 + body.len());
    wire.extend_from_slice(format!("{} {} HTTP/1.1\r\n", plan.method, plan.target.path).as_bytes());
    for (name, value) in &fields {
        // Canonical capitals for the defaults, as other clients send them; -H's as given.
        wire.extend_from_slice(canonical(name).as_bytes());
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(value.as_bytes());
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"\r\n");
    wire.extend_from_slice(body);
    wire
}

/// `content-type` → `Content-Type`: field names are case-insensitive, but
/// some servers and proxies in the wild are not.
fn canonical(name: &HeaderName) -> String {
    let mut out = String::with_capacity(name.as_str().len());
    let mut upper = true;
    for c in name.as_str().chars() {
        out.push(if upper { c.to_ascii_uppercase() } else { c });
        upper = c == '-';
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Stop;

    fn plan(url: &str) -> LoadPlan {
        LoadPlan::new(url, 1, Stop::Requests(1)).unwrap()
    }

    fn text(plan: &LoadPlan) -> String {
        String::from_utf8(encode(plan)).unwrap()
    }

    #[test]
    fn a_get_has_host_and_user_agent_only() {
        let p = plan("http://127.0.0.1:9000/test?x=1");
        assert_eq!(
            text(&p),
            format!("GET /test?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nUser-Agent: {USER_AGENT}\r\n\r\n")
        );
    }

    #[test]
    fn a_body_brings_its_length_and_type_and_headers_replace_defaults() {
        let mut p = plan("http://u:p@localhost/post");
        p.method = hyper::Method::POST;
        p.keep_alive = false;
        p.body = Some(b"{\"a\":1}".to_vec());
        p.content_type = Some(HeaderValue::from_static("application/json"));
        p.headers = vec![
            (header::HOST, HeaderValue::from_static("example.com")),
            (header::USER_AGENT, HeaderValue::from_static("")),
            (HeaderName::from_static("x-trace"), HeaderValue::from_static("7")),
        ];
        assert_eq!(
            text(&p),
            "POST /post HTTP/1.1\r\nAuthorization: Basic dTpw\r\nContent-Type: application/json\r\n\
             Connection: close\r\nHost: example.com\r\nX-Trace: 7\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
        );
        p.content_type = None;
        p.body = Some(Vec::new());
        assert!(text(&p).contains("Content-Type: application/x-www-form-urlencoded\r\n"));
        assert!(text(&p).ends_with("Content-Length: 0\r\n\r\n"));
    }
}
