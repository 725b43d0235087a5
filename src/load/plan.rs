//! The validated plan of a load run: everything the engine needs, checked
//! once, so the engine never meets a bad value.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use hyper::header::{HeaderName, HeaderValue};

pub use super::schedule::{ConnectionStages, RateSchedule};
use super::tls::{TlsClient, Trust};

/// Where the load goes.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given, its password replaced by `***`, for reports.
    pub url: String,
    /// The address connected to (the first the host resolves to).
    pub addr: SocketAddr,
    /// The `Host` header: the URL's host, and its port when the URL names one.
    pub host: HeaderValue,
    /// The host name alone, for reports.
    pub hostname: String,
    /// The request target: path and query.
    pub path: String,
    /// `Authorization: Basic …` from the URL's credentials (`http://user:pass@host/`).
    pub basic_auth: Option<HeaderValue>,
    /// `https://`: connections go through TLS.
    pub https: bool,
}

impl Target {
    /// Parses and resolves an `http://` or `https://` URL.
    pub fn parse(url: &str) -> Result<Target, String> {
        Target::parse_with(url, true)
    }

    /// Parses an `http://` URL without resolving its host (the address is
    /// `0.0.0.0` with the URL's port): for reports of runs made elsewhere.
    pub fn unresolved(url: &str) -> Result<Target, String> {
        Target::parse_with(url, false)
    }

    fn parse_with(url: &str, resolve: bool) -> Result<Target, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("malformed URL '{url}': {e}"))?;
        let https = match parsed.scheme() {
            "http" => false,
            "https" => true,
            other => return Err(format!("unsupported scheme '{other}': use an http:// or https:// URL")),
        };
        let host = parsed
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("malformed URL '{url}': no host"))?;
        let port = parsed.port_or_known_default().unwrap_or(if https { 443 } else { 80 });
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addr = if resolve {
            (bare, port)
                .to_socket_addrs()
                .map_err(|e| format!("cannot resolve '{bare}': {e}"))?
                .next()
                .ok_or_else(|| format!("'{bare}' resolves to no address"))?
        } else {
            SocketAddr::from(([0, 0, 0, 0], port))
        };
        let authority = match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        let path = match parsed.query() {
            Some(query) => format!("{}?{query}", parsed.path()),
            None => parsed.path().to_string(),
        };
        // RFC 7617: user-id ":" password, base64; the URL carries them percent-encoded.
        let basic_auth = if parsed.username().is_empty() && parsed.password().is_none() {
            None
        } else {
            use base64::Engine;
            let decode = |s: &str| percent_encoding::percent_decode_str(s).collect::<Vec<u8>>();
            let mut pair = decode(parsed.username());
            pair.push(b':');
            pair.extend(decode(parsed.password().unwrap_or("")));
            let value = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
            Some(HeaderValue::try_from(value).map_err(|e| format!("bad credentials: {e}"))?)
        };
        let mut shown = parsed.clone();
        if parsed.password().is_some() {
            let _ = shown.set_password(Some("***"));
        }
        Ok(Target {
            url: if basic_auth.is_some() { shown.to_string() } else { url.to_string() },
            addr,
            host: HeaderValue::from_str(&authority).map_err(|e| format!("bad host: {e}"))?,
            hostname: bare.to_string(),
            path,
            basic_auth,
            https,
        })
    }

    /// Whether requests to `self` and `other` can share connections: the
    /// same scheme, host and port.
    pub fn same_origin(&self, other: &Target) -> bool {
        self.https == other.https
            && self.hostname.eq_ignore_ascii_case(&other.hostname)
            && self.addr.port() == other.addr.port()
    }

    /// `scheme://host:port`, for messages.
    pub fn origin(&self) -> String {
        let host =
            if self.hostname.contains(':') { format!("[{}]", self.hostname) } else { self.hostname.clone() };
        format!("{}://{host}:{}", if self.https { "https" } else { "http" }, self.addr.port())
    }
}

/// One request of a `--urls` run: its URL, method, own headers and body.
#[derive(Debug, Clone)]
pub struct UrlRequest {
    /// Its URL (path, `Host`, credentials); the same origin as the plan's target.
    pub target: Target,
    /// Its method.
    pub method: hyper::Method,
    /// Its own header fields; they replace `-H` fields and defaults of the same name.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Its body.
    pub body: Option<Vec<u8>>,
}

/// When the run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After exactly this many requests have ended.
    Requests(u64),
    /// At this time after the start; requests still open then are counted as in flight.
    Duration(Duration),
}

/// A whole load run, validated.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Where to send.
    pub target: Target,
    /// The request method.
    pub method: hyper::Method,
    /// Extra request headers (`-H`); one named as a default (`Host`,
    /// `User-Agent`, `Content-Type`, `Authorization`, `Connection`) replaces it.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The request body (`-d`, `--body-file`), sent with its `Content-Length`.
    pub body: Option<Vec<u8>>,
    /// `-T`: the body's `Content-Type`.
    pub content_type: Option<HeaderValue>,
    /// `--urls`: the requests each connection sends in turn (their method,
    /// headers and bodies replace `method`, `body` and add to `headers`);
    /// empty for a run of the one URL in `target`.
    pub urls: Vec<UrlRequest>,
    /// `https://`: the TLS configuration every connection shares.
    pub tls: Option<TlsClient>,
    /// Concurrent connections, each with one request in flight at a time.
    pub connections: usize,
    /// When to stop.
    pub stop: Stop,
    /// Reuse connections (`-k`); otherwise one connection per request.
    pub keep_alive: bool,
    /// Open loop: total requests per second, constant or in stages.
    pub rate: Option<RateSchedule>,
    /// Closed loop: the connection count in stages (`connections` is their most).
    pub connection_stages: Option<ConnectionStages>,
    /// Limit for connecting, and for each request from send to last body byte.
    pub timeout: Duration,
    /// Engine threads (at most `connections`).
    pub threads: usize,
    /// Requests in flight per connection (`--pipeline`; 1 = no pipelining).
    pub pipeline: usize,
    /// What is shown on stderr while the run goes.
    pub progress: Progress,
    /// `--h2`: HTTP/2 (h2c with prior knowledge over `http://`, ALPN `h2` over `https://`).
    pub h2: bool,
    /// `--streams`: HTTP/2 requests in flight per connection (1 without `--h2`).
    pub streams: usize,
    /// `--busy-poll`: the engine threads never sleep in epoll.
    pub busy_poll: bool,
}

/// What a run shows on stderr while it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Nothing (`--quiet`, tests, the studies).
    Silent,
    /// A live bar, redrawn (a terminal).
    Bar,
    /// A plain line every few seconds (a log file, CI).
    Lines,
}

impl LoadPlan {
    /// A closed-loop, keep-alive plan of `requests` over `connections` to
    /// `url`, one thread, no progress bar: the shape tests and the experiment
    /// runner start from.
    /// An `https://` URL trusts the platform's roots.
    pub fn new(url: &str, connections: usize, stop: Stop) -> Result<LoadPlan, String> {
        LoadPlan::trusting(url, connections, stop, &Trust::Platform)
    }

    /// [`LoadPlan::new`], an `https://` URL trusting `trust`.
    pub fn trusting(url: &str, connections: usize, stop: Stop, trust: &Trust) -> Result<LoadPlan, String> {
        let target = Target::parse(url)?;
        let tls =
            if target.https { Some(TlsClient::new(&target.hostname, trust, connections)?) } else { None };
        Ok(LoadPlan {
            target,
            method: hyper::Method::GET,
            headers: Vec::new(),
            body: None,
            content_type: None,
            urls: Vec::new(),
            tls,
            connections,
            stop,
            keep_alive: true,
            rate: None,
            connection_stages: None,
            timeout: Duration::from_secs(30),
            threads: 1,
            pipeline: 1,
            progress: Progress::Silent,
            h2: false,
            streams: 1,
            busy_poll: false,
        })
    }

    /// Makes this an HTTP/2 run of `streams` concurrent streams per
    /// connection: TLS offers ALPN `h2` alone, and connections are kept (an
    /// HTTP/2 connection carries every request, as h2load's do).
    pub fn use_h2(&mut self, streams: usize) {
        self.h2 = true;
        self.streams = streams;
        self.keep_alive = true;
        self.tls = self.tls.as_ref().map(TlsClient::offering_h2);
    }

    /// `http/1.1`, `h2c` (HTTP/2 over plain TCP) or `h2` (over TLS), for reports.
    pub fn protocol(&self) -> &'static str {
        match (self.h2, self.target.https) {
            (false, _) => "http/1.1",
            (true, false) => "h2c",
            (true, true) => "h2",
        }
    }

    /// Checks the combinations the flags alone cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.connections == 0 {
            return Err("-c must be at least 1".to_string());
        }
        if let Stop::Requests(n) = self.stop
            && n < self.connections as u64
        {
            return Err(format!(
                "-n {n} is smaller than -c {}: every connection needs a request",
                self.connections
            ));
        }
        if let Stop::Duration(d) = self.stop
            && d.is_zero()
        {
            return Err("-z must be more than zero".to_string());
        }
        if let Some(rate) = &self.rate
            && rate.stages.is_empty()
            && !(rate.start.is_finite() && rate.start > 0.0)
        {
            return Err(format!(
                "--rate must be a positive number of requests per second, got {}",
                rate.start
            ));
        }
        if self.timeout.is_zero() {
            return Err("--timeout must be more than zero".to_string());
        }
        if self.threads == 0 {
            return Err("--threads must be at least 1".to_string());
        }
        if self.pipeline == 0 {
            return Err("--pipeline must be at least 1".to_string());
        }
        if self.pipeline > 1 && self.rate.is_some() {
            return Err("--pipeline applies to the closed loop only (without --rate): an open loop sends each request when it is due".to_string());
        }
        if let Some((name, _)) = self.headers.iter().find(|(name, _)| {
            name == hyper::header::CONTENT_LENGTH || name == hyper::header::TRANSFER_ENCODING
        }) {
            return Err(format!("-H {name}: the body (-d, --body-file) decides how the request is framed"));
        }
        if self.connection_stages.is_some() && self.rate.is_some() {
            return Err(
                "--connections in stages is for the closed loop: with --rate, the rate sets the load"
                    .to_string(),
            );
        }
        if self.target.https != self.tls.is_some() {
            return Err("an https:// URL needs its TLS configuration, an http:// URL none".to_string());
        }
        if let Some(other) = self.urls.iter().find(|u| !u.target.same_origin(&self.target)) {
            return Err(format!(
                "--urls: every URL must go to {} (they share the connections); {} does not",
                self.target.origin(),
                other.target.url
            ));
        }
        if self.streams == 0 {
            return Err("--streams must be at least 1".to_string());
        }
        if self.streams > 1 && !self.h2 {
            return Err(
                "--streams needs --h2: concurrent streams are HTTP/2's (HTTP/1.1 has --pipeline)".to_string()
            );
        }
        if self.h2 && self.pipeline > 1 {
            return Err(
                "--pipeline is HTTP/1.1's: with --h2, --streams N keeps N requests in flight per connection"
                    .to_string(),
            );
        }
        if self.pipeline > 1 && !self.keep_alive {
            return Err("--pipeline needs keep-alive (-k): pipelined requests share a connection".to_string());
        }
        Ok(())
    }

    /// `closed` or `open`, for reports.
    pub fn mode(&self) -> &'static str {
        if self.rate.is_some() { "open" } else { "closed" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        let t = Target::parse("http://127.0.0.1:9000/getData?id=3").unwrap();
        assert_eq!(t.addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(t.path, "/getData?id=3");
        assert_eq!(t.host, "127.0.0.1:9000");
        assert_eq!(Target::parse("http://127.0.0.1:8080").unwrap().path, "/");
        assert_eq!(Target::parse("http://localhost/").unwrap().host, "localhost");
        assert!(t.basic_auth.is_none());
        let t = Target::parse("http://ali%20ce:s%3Acret@127.0.0.1:9000/x").unwrap();
        // base64("ali ce:s:cret")
        assert_eq!(t.basic_auth.unwrap(), "Basic YWxpIGNlOnM6Y3JldA==");
        assert_eq!(t.url, "http://ali%20ce:***@127.0.0.1:9000/x");
        assert_eq!(t.host, "127.0.0.1:9000");
        assert_eq!(Target::parse("http://bob@127.0.0.1/").unwrap().basic_auth.unwrap(), "Basic Ym9iOg==");
        let t = Target::parse("https://127.0.0.1/x").unwrap();
        assert!(t.https);
        assert_eq!((t.addr.port(), t.origin()), (443, "https://127.0.0.1:443".to_string()));
        assert!(t.same_origin(&Target::parse("https://127.0.0.1:443/y?z").unwrap()));
        assert!(!t.same_origin(&Target::parse("http://127.0.0.1:443/x").unwrap()));
        assert!(!t.same_origin(&Target::parse("https://127.0.0.1:8443/x").unwrap()));
        assert!(Target::parse("ftp://x/").unwrap_err().contains("unsupported scheme"));
        assert!(Target::parse("127.0.0.1:9000/x").is_err());
        assert!(Target::parse("http://").is_err());
        assert!(Target::parse("not a url").is_err());
    }

    #[test]
    fn combinations_are_checked() {
        let plan = |c, stop| LoadPlan::new("http://127.0.0.1:1/", c, stop).unwrap();
        assert!(plan(0, Stop::Requests(10)).validate().is_err());
        assert!(plan(10, Stop::Requests(9)).validate().is_err());
        assert!(plan(10, Stop::Requests(10)).validate().is_ok());
        assert!(plan(1, Stop::Duration(Duration::ZERO)).validate().is_err());
        let mut p = plan(1, Stop::Requests(1));
        p.rate = Some(RateSchedule::constant(0.0));
        assert!(p.validate().is_err());
        p.rate = Some(RateSchedule::constant(-5.0));
        assert!(p.validate().is_err());
    }
}
