//! The requests a run sends, as they go on the wire: each one's head (the
//! default fields, then `-H`'s, then a `--urls` request's own, each
//! replacing an earlier field of the same name) and its body, encoded once
//! per run and written as is by every connection ([`Wire`]).

use hyper::header::{self, HeaderName, HeaderValue};

use super::plan::{LoadPlan, Target, UrlRequest};

/// Every request of a run, encoded once, laid out round-robin so that any
/// `--pipeline` consecutive requests (wrapping around to the first) are one
/// contiguous slice, written with one call.
pub struct Wire {
    bytes: Vec<u8>,
    /// `offsets[i]..offsets[i + 1]` is the i-th request of the layout.
    offsets: Vec<usize>,
    /// Distinct requests (1 without `--urls`).
    count: usize,
    /// Which requests are HEAD (their responses have no body).
    heads: Vec<bool>,
}

impl Wire {
    /// The requests of `plan`, laid out for its `--pipeline`.
    pub fn new(plan: &LoadPlan) -> Wire {
        let requests = encode_all(plan);
        let count = requests.len();
        let mut bytes = Vec::new();
        let mut offsets = vec![0];
        for i in 0..count + plan.pipeline - 1 {
            bytes.extend_from_slice(&requests[i % count]);
            offsets.push(bytes.len());
        }
        let heads = if plan.urls.is_empty() {
            vec![plan.method == hyper::Method::HEAD]
        } else {
            plan.urls.iter().map(|u| u.method == hyper::Method::HEAD).collect()
        };
        Wire { bytes, offsets, count, heads }
    }

    /// The distinct requests.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Requests `first`, `first + 1`, ... (`n` of them, at most `--pipeline`,
    /// wrapping around), back to back.
    pub fn batch(&self, first: usize, n: usize) -> &[u8] {
        &self.bytes[self.offsets[first]..self.offsets[first + n]]
    }

    /// Whether request `i` is a HEAD.
    pub fn is_head(&self, i: usize) -> bool {
        self.heads[i]
    }
}

/// Every request of `plan`, encoded: the one URL's, or each of `--urls`' in order.
pub fn encode_all(plan: &LoadPlan) -> Vec<Vec<u8>> {
    if plan.urls.is_empty() {
        return vec![encode(plan)];
    }
    plan.urls
        .iter()
        .map(|url| {
            encode_request(
                &url.target,
                &url.method,
                &url_headers(plan, url),
                url.body.as_deref(),
                plan.content_type.as_ref(),
                plan.keep_alive,
            )
        })
        .collect()
}

/// `-H`'s fields, each replaced by a `--urls` request's own field of the same name, then its others.
fn url_headers(plan: &LoadPlan, url: &UrlRequest) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = plan.headers.clone();
    headers.retain(|(name, _)| !url.headers.iter().any(|(own, _)| own == name));
    headers.extend(url.headers.iter().cloned());
    headers
}

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
    encode_request(
        &plan.target,
        &plan.method,
        &plan.headers,
        plan.body.as_deref(),
        plan.content_type.as_ref(),
        plan.keep_alive,
    )
}

/// One request to `target`: the defaults, then `headers` (each replacing a
/// default of its name), then the body.
fn encode_request(
    target: &Target,
    method: &hyper::Method,
    headers: &[(HeaderName, HeaderValue)],
    body: Option<&[u8]>,
    content_type: Option<&HeaderValue>,
    keep_alive: bool,
) -> Vec<u8> {
    let fields = header_fields(target, headers, body, content_type, keep_alive);
    let body = body.unwrap_or_default();
    let mut wire = Vec::with_capacity(256 + body.len());
    wire.extend_from_slice(format!("{method} {} HTTP/1.1\r\n", target.path).as_bytes());
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

/// The header fields of a request to `target`, in order: the defaults, then
/// `headers` (each replacing a default of its name; an empty value removes
/// it), then `Content-Length` with a body.
fn header_fields(
    target: &Target,
    headers: &[(HeaderName, HeaderValue)],
    body: Option<&[u8]>,
    content_type: Option<&HeaderValue>,
    keep_alive: bool,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut fields: Vec<(HeaderName, HeaderValue)> =
        vec![(header::HOST, target.host.clone()), (header::USER_AGENT, HeaderValue::from_static(USER_AGENT))];
    if let Some(auth) = &target.basic_auth {
        fields.push((header::AUTHORIZATION, auth.clone()));
    }
    if body.is_some() || content_type.is_some() {
        let content_type =
            content_type.cloned().unwrap_or_else(|| HeaderValue::from_static(DEFAULT_CONTENT_TYPE));
        fields.push((header::CONTENT_TYPE, content_type));
    }
    if !keep_alive {
        fields.push((header::CONNECTION, HeaderValue::from_static("close")));
    }
    fields.retain(|(name, _)| !headers.iter().any(|(given, _)| given == name));
    fields.extend(headers.iter().filter(|(_, value)| !value.is_empty()).cloned());
    if let Some(body) = body {
        fields.push((header::CONTENT_LENGTH, HeaderValue::from(body.len())));
    }
    fields
}

/// One request of an HTTP/2 run, ready to be sent on a stream: its head
/// (h2 writes the pseudo-headers from the method and the URI) and its body.
pub struct H2Request {
    method: hyper::Method,
    /// `scheme://authority/path?query`: `:scheme`, `:authority` and `:path`.
    uri: http::Uri,
    headers: http::HeaderMap,
    /// The body, shared by every stream that sends it (a reference count, no copy).
    pub body: Option<bytes::Bytes>,
    /// Whether it is a HEAD (its response has no body).
    pub is_head: bool,
}

/// Fields HTTP/2 forbids (RFC 9113 8.2.2): the connection's own business in HTTP/1.1.
const CONNECTION_SPECIFIC: [HeaderName; 5] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
];

impl H2Request {
    /// The head of a new stream for this request.
    pub fn head(&self) -> http::Request<()> {
        let mut request = http::Request::new(());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = http::Version::HTTP_2;
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// Every request of `plan` for HTTP/2, in the order of [`encode_all`]: the
/// same fields as HTTP/1.1, with `Host` (the URL's, or `-H Host`'s) as
/// `:authority` and the connection-specific fields left out.
pub fn h2_all(plan: &LoadPlan) -> Result<Vec<H2Request>, String> {
    let one = |target: &Target,
               method: &hyper::Method,
               headers: &[(HeaderName, HeaderValue)],
               body: Option<&[u8]>| {
        let fields = header_fields(target, headers, body, plan.content_type.as_ref(), true);
        let mut authority = target.host.clone();
        let mut map = http::HeaderMap::with_capacity(fields.len());
        for (name, value) in fields {
            if name == header::HOST {
                authority = value;
            } else {
                // TE may stay only as "trailers".
                let forbidden =
                    CONNECTION_SPECIFIC.contains(&name) || (name == header::TE && value != "trailers");
                if !forbidden {
                    map.append(name, value);
                }
            }
        }
        let scheme = if target.https { "https" } else { "http" };
        let authority = authority.to_str().map_err(|_| "the Host field is not text".to_string())?;
        let uri = format!("{scheme}://{authority}{}", target.path)
            .parse()
            .map_err(|e| format!("{scheme}://{authority}{}: not a URI for HTTP/2: {e}", target.path))?;
        Ok(H2Request {
            method: method.clone(),
            uri,
            headers: map,
            body: body.map(bytes::Bytes::copy_from_slice),
            is_head: method == hyper::Method::HEAD,
        })
    };
    if plan.urls.is_empty() {
        return Ok(vec![one(&plan.target, &plan.method, &plan.headers, plan.body.as_deref())?]);
    }
    plan.urls
        .iter()
        .map(|url| one(&url.target, &url.method, &url_headers(plan, url), url.body.as_deref()))
        .collect()
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

    #[test]
    fn urls_are_laid_out_round_robin_with_their_own_headers() {
        use crate::load::plan::UrlRequest;
        let mut p = plan("http://127.0.0.1:9000/a");
        p.pipeline = 3;
        p.headers = vec![(HeaderName::from_static("x-all"), HeaderValue::from_static("1"))];
        let url = |path: &str, method: hyper::Method| UrlRequest {
            target: Target::parse(&format!("http://127.0.0.1:9000{path}")).unwrap(),
            method,
            headers: vec![(HeaderName::from_static("x-all"), HeaderValue::from_static("own"))],
            body: None,
        };
        p.urls = vec![url("/a", hyper::Method::GET), url("/b", hyper::Method::HEAD)];
        let wire = Wire::new(&p);
        assert_eq!(wire.count(), 2);
        assert!(!wire.is_head(0) && wire.is_head(1));
        let batch = String::from_utf8(wire.batch(1, 3).to_vec()).unwrap();
        let lines: Vec<&str> = batch.lines().filter(|l| l.contains("HTTP/1.1")).collect();
        assert_eq!(lines, ["HEAD /b HTTP/1.1", "GET /a HTTP/1.1", "HEAD /b HTTP/1.1"]);
        assert!(batch.contains("X-All: own\r\n") && !batch.contains("X-All: 1"));
        p.urls.clear();
        p.pipeline = 2;
        assert_eq!(Wire::new(&p).batch(0, 2), encode(&p).repeat(2));
    }

    #[test]
    fn an_h2_request_has_the_host_as_authority_and_no_connection_fields() {
        let mut p = plan("http://u:p@127.0.0.1:9000/post?x=1");
        p.method = hyper::Method::POST;
        p.body = Some(b"abc".to_vec());
        p.headers = vec![
            (header::HOST, HeaderValue::from_static("api.example")),
            (header::CONNECTION, HeaderValue::from_static("keep-alive")),
            (HeaderName::from_static("x-trace"), HeaderValue::from_static("7")),
        ];
        let requests = h2_all(&p).unwrap();
        let head = requests[0].head();
        assert_eq!(head.uri().to_string(), "http://api.example/post?x=1");
        assert_eq!(head.method(), hyper::Method::POST);
        assert_eq!(head.version(), http::Version::HTTP_2);
        let names: Vec<&str> = head.headers().keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["user-agent", "authorization", "content-type", "x-trace", "content-length"]);
        assert_eq!(head.headers()["content-length"], "3");
        assert_eq!(requests[0].body.as_deref(), Some(&b"abc"[..]));
        assert!(!requests[0].is_head);
    }
}
