//! The `lean` model: the non-blocking server with nothing else, the floor of
//! what a connection costs.
//!
//! One tokio task per connection, holding only its socket, its ticket under
//! `--max-connections` and, only while a request is incomplete or pipelined
//! requests wait behind one being answered, the bytes of those requests. An
//! idle connection holds no buffer: when its socket turns readable, the bytes
//! are read into a scratch buffer of the worker thread and parsed there with
//! `httparse` and the HTTP/1.1 rules the load generator shares
//! ([`crate::http1`]). Responses are pre-encoded at start; only the `Date`
//! header (cached per second per thread) is added to each.
//!
//! HTTP/1.0 and 1.1, keep-alive (1.1 by default, 1.0 when asked), pipelining,
//! GET and HEAD on `/delay`, `/test` and `/metrics`. Anything else gets a
//! correct error: 404 (unknown path), 405 (other method), 413 (a request
//! body), 431 (a head over 16 KiB or over 64 fields), 400 (malformed), 505
//! (another HTTP version), 408 (a started head not complete within
//! `--header-timeout`, 30 s by default); after a
//! malformed head the connection is closed.

use std::cell::RefCell;
use std::future::Future;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::accept::{Admission, Ticket};
use super::config::{ServeConfig, model_info};
use super::delay;
use super::endpoint::Endpoint;
use super::error::AppError;
use super::metrics::Metrics;
use super::model::Model;
use super::observe::SERVER_HEADER;
use super::runtime::RuntimeProbe;
use crate::http1;

/// The longest request head accepted.
const MAX_HEAD: usize = 16 * 1024;
/// The most header fields accepted.
const MAX_HEADERS: usize = 64;

thread_local! {
    /// Where readable bytes are read and parsed; one per worker thread, so an
    /// idle connection holds none.
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; MAX_HEAD]);
    /// Where responses are encoded before they are written.
    static OUT: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(1024));
    /// The `Date` header value and the second it was made for.
    static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// A lean server, ready to serve.
pub struct LeanServer {
    shared: Arc<Shared>,
}

struct Shared {
    metrics: Arc<Metrics>,
    admission: Admission,
    http: RuntimeProbe,
    info: Vec<(&'static str, String)>,
    test: Vec<u8>,
    delay: Vec<u8>,
    /// How long a started request head may take to arrive in full.
    head_timeout: Duration,
}

impl LeanServer {
    /// A server for `config`, whose tasks run on the runtime `http` probes.
    pub fn new(config: &ServeConfig, http: RuntimeProbe) -> LeanServer {
        let metrics = Arc::new(Metrics::default());
        let admission = Admission::new(config.max_connections, metrics.clone());
        let test = prelude(200, "text/plain; charset=utf-8", b"works".len(), "");
        let delay = prelude(200, "application/json", delay::BODY.len(), "");
        let info = model_info(config);
        let head_timeout = config.header_timeout;
        LeanServer { shared: Arc::new(Shared { metrics, admission, http, info, test, delay, head_timeout }) }
    }

    /// Serves `listener` until `shutdown` resolves, then stops accepting,
    /// closes idle connections and waits up to `grace` for open requests.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>, grace: Duration) {
        let (stop, stopped) = watch::channel(false);
        let shared = &self.shared;
        shared
            .admission
            .accept_until(&listener, shutdown, |stream, _peer, ticket| {
                tokio::spawn(connection(stream, shared.clone(), stopped.clone(), ticket));
            })
            .await;
        drop(listener);
        stop.send_replace(true);
        tracing::info!("stopped accepting; waiting for open requests");
        let deadline = Instant::now() + grace;
        while shared.metrics.connections_open.get() > 0 {
            if Instant::now() >= deadline {
                tracing::warn!(?grace, "requests still open after the grace period; stopping anyway");
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::info!("all connections closed");
    }
}

/// What one parsed request asks for.
#[derive(Debug)]
enum Action {
    Test,
    Delay(Duration),
    Metrics,
    /// An error answer; the connection may go on (the request was well formed).
    Refuse(u16, String),
}

#[derive(Debug)]
struct Request {
    action: Action,
    endpoint: Endpoint,
    head_only: bool,
    /// Whether the connection stays open after the answer.
    keep_alive: bool,
    /// HTTP/1.0 with keep-alive asked for: the answer must confirm it.
    confirm_keep_alive: bool,
}

#[derive(Debug)]
enum Parsed {
    /// A whole request head, and how many bytes it took.
    Request(Request, usize),
    /// More bytes are needed.
    Partial,
    /// Not a request this server can read: answer with this status and close.
    Malformed(u16, String),
}

/// Parses the first request in `bytes`.
fn parse(bytes: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut head = httparse::Request::new(&mut headers);
    let used = match head.parse(bytes) {
        Ok(httparse::Status::Complete(used)) if used <= MAX_HEAD => used,
        Ok(httparse::Status::Partial) if bytes.len() <= MAX_HEAD => return Parsed::Partial,
        Ok(_) => return Parsed::Malformed(431, format!("the request head is over {} KiB", MAX_HEAD / 1024)),
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Malformed(431, format!("more than {MAX_HEADERS} header fields"));
        }
        Err(httparse::Error::Version) => {
            return Parsed::Malformed(505, "only HTTP/1.0 and HTTP/1.1 are served".to_string());
        }
        Err(e) => return Parsed::Malformed(400, format!("malformed request: {e}")),
    };
    let (method, target, version) = (head.method.unwrap_or(""), head.path.unwrap_or(""), head.version);
    let (mut close, mut keep_alive, mut body) = (false, false, false);
    for header in head.headers.iter() {
        if header.name.eq_ignore_ascii_case("connection") {
            let (c, k) = http1::connection_tokens(header.value);
            close |= c;
            keep_alive |= k;
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            body = true;
        } else if header.name.eq_ignore_ascii_case("content-length") {
            match http1::content_length(header.value) {
                Some(0) => {}
                Some(_) => body = true,
                None => return Parsed::Malformed(400, "malformed Content-Length".to_string()),
            }
        }
    }
    if body {
        // The body's bytes would follow the head; without reading them the
        // connection cannot go on, so the answer closes it.
        return Parsed::Malformed(413, "this server takes no request bodies".to_string());
    }
    let http10 = version == Some(0);
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    let endpoint = Endpoint::from_path(path);
    let head_only = method == "HEAD";
    let action = match endpoint {
        _ if method != "GET" && !head_only && endpoint != Endpoint::Other => {
            Action::Refuse(405, format!("method {} is not allowed here; use GET", shown(method)))
        }
        Endpoint::Test => Action::Test,
        Endpoint::Metrics => Action::Metrics,
        Endpoint::Delay => match delay::requested(query) {
            Ok(wait) => Action::Delay(wait),
            Err(e) => Action::Refuse(400, e),
        },
        Endpoint::Other => Action::Refuse(404, format!("no such path: {}", shown(path))),
        _ => Action::Refuse(
            404,
            AppError::NotInModel { path: path.to_string(), model: Model::Lean }.to_string(),
        ),
    };
    let keep = if http10 { keep_alive && !close } else { !close };
    let request =
        Request { action, endpoint, head_only, keep_alive: keep, confirm_keep_alive: http10 && keep };
    Parsed::Request(request, used)
}

/// At most 100 characters of a client's text, for an error message.
fn shown(text: &str) -> String {
    text.chars().take(100).collect()
}

/// What reading the connection gave.
enum Input {
    Request(Request),
    /// The client closed, the connection failed, or the server is stopping.
    Closed,
    /// Answer with this status and close.
    Malformed(u16, String),
}

/// Serves one connection until it closes.
async fn connection(
    mut stream: TcpStream,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
    ticket: Ticket,
) {
    // Bytes of an incomplete head or of pipelined requests; empty (and
    // unallocated) whenever the connection is idle.
    let mut pending = Vec::new();
    loop {
        let request = match next_request(&stream, &mut pending, &mut stopped, shared.head_timeout).await {
            Input::Request(request) => request,
            Input::Closed => break,
            Input::Malformed(status, message) => {
                let timer = shared.metrics.start(Endpoint::Other);
                let _ = send_error(&mut stream, status, &message, false, false, false).await;
                timer.finish(status);
                break;
            }
        };
        let timer = shared.metrics.start(request.endpoint);
        let keep_alive = request.keep_alive && !*stopped.borrow();
        let confirm = request.confirm_keep_alive && keep_alive;
        let (status, sent) = match request.action {
            Action::Test => {
                (200, send(&mut stream, &shared.test, b"works", request.head_only, keep_alive, confirm).await)
            }
            Action::Delay(wait) => {
                tokio::time::sleep(wait).await;
                let keep_alive = keep_alive && !*stopped.borrow();
                let confirm = confirm && keep_alive;
                (
                    200,
                    send(
                        &mut stream,
                        &shared.delay,
                        delay::BODY.as_bytes(),
                        request.head_only,
                        keep_alive,
                        confirm,
                    )
                    .await,
                )
            }
            Action::Metrics => {
                let probes = [&shared.http];
                let text = shared.metrics.render(&shared.info, &probes);
                let head = prelude(200, "text/plain; version=0.0.4; charset=utf-8", text.len(), "");
                (200, send(&mut stream, &head, text.as_bytes(), request.head_only, keep_alive, confirm).await)
            }
            Action::Refuse(status, ref message) => (
                status,
                send_error(&mut stream, status, message, request.head_only, keep_alive, confirm).await,
            ),
        };
        if sent.is_err() {
            // The client went away; the request counts as cancelled.
            drop(timer);
            break;
        }
        timer.finish(status);
        if !keep_alive {
            break;
        }
    }
    let _ = stream.shutdown().await;
    drop(ticket);
}

/// Reads until a whole request head is there (pending bytes first); a head
/// started and not complete within `head_timeout` gets a 408.
async fn next_request(
    stream: &TcpStream,
    pending: &mut Vec<u8>,
    stopped: &mut watch::Receiver<bool>,
    head_timeout: Duration,
) -> Input {
    let mut started: Option<Instant> = None;
    loop {
        if !pending.is_empty() {
            match parse(pending) {
                Parsed::Request(request, used) => {
                    pending.drain(..used);
                    if pending.is_empty() {
                        *pending = Vec::new();
                    }
                    return Input::Request(request);
                }
                Parsed::Malformed(status, message) => return Input::Malformed(status, message),
                Parsed::Partial => {}
            }
        }
        let readable = if pending.is_empty() {
            // Idle: wait for the client or for the server to stop.
            tokio::select! {
                readable = stream.readable() => readable,
                _ = stopped.wait_for(|stop| *stop) => return Input::Closed,
            }
        } else {
            let deadline = *started.get_or_insert_with(Instant::now) + head_timeout;
            match tokio::time::timeout_at(deadline.into(), stream.readable()).await {
                Ok(readable) => readable,
                Err(_) => {
                    return Input::Malformed(408, "the request head did not arrive in time".to_string());
                }
            }
        };
        if readable.is_err() {
            return Input::Closed;
        }
        let step = SCRATCH.with_borrow_mut(|scratch| match stream.try_read(scratch) {
            Ok(0) => Some(Input::Closed),
            Ok(n) if pending.is_empty() => match parse(&scratch[..n]) {
                Parsed::Request(request, used) => {
                    pending.extend_from_slice(&scratch[used..n]);
                    Some(Input::Request(request))
                }
                Parsed::Partial => {
                    pending.extend_from_slice(&scratch[..n]);
                    None
                }
                Parsed::Malformed(status, message) => Some(Input::Malformed(status, message)),
            },
            Ok(n) => {
                pending.extend_from_slice(&scratch[..n]);
                None
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(_) => Some(Input::Closed),
        });
        if let Some(input) = step {
            return input;
        }
        if !pending.is_empty() && started.is_none() {
            started = Some(Instant::now());
        }
    }
}

/// The status line and the fixed headers of a response, up to the `Date`.
fn prelude(status: u16, content_type: &str, length: usize, extra: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {}\r\nserver: {SERVER_HEADER}\r\ncontent-type: {content_type}\r\ncontent-length: {length}\r\n{extra}",
        reason(status)
    )
    .into_bytes()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// Sends a JSON error `{"error": message}`.
async fn send_error(
    stream: &mut TcpStream,
    status: u16,
    message: &str,
    head_only: bool,
    keep_alive: bool,
    confirm: bool,
) -> std::io::Result<()> {
    let body = serde_json::json!({ "error": message }).to_string();
    let allow = if status == 405 { "allow: GET, HEAD\r\n" } else { "" };
    let head = prelude(status, "application/json", body.len(), allow);
    send(stream, &head, body.as_bytes(), head_only, keep_alive, confirm).await
}

/// Writes a response: `prelude`, `Date`, `Connection` when needed, the body
/// unless the request was HEAD. Encoded in the thread's buffer and written
/// at once; only what the socket does not take at once is copied out.
async fn send(
    stream: &mut TcpStream,
    prelude: &[u8],
    body: &[u8],
    head_only: bool,
    keep_alive: bool,
    confirm: bool,
) -> std::io::Result<()> {
    let rest = OUT.with_borrow_mut(|out| {
        out.clear();
        out.extend_from_slice(prelude);
        out.extend_from_slice(b"date: ");
        with_date(|date| out.extend_from_slice(date.as_bytes()));
        out.extend_from_slice(b"\r\n");
        if !keep_alive {
            out.extend_from_slice(b"connection: close\r\n");
        } else if confirm {
            out.extend_from_slice(b"connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !head_only {
            out.extend_from_slice(body);
        }
        match stream.try_write(out) {
            Ok(n) if n == out.len() => Ok(None),
            Ok(n) => Ok(Some(out[n..].to_vec())),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(Some(out.clone())),
            Err(e) => Err(e),
        }
    })?;
    match rest {
        Some(rest) => stream.write_all(&rest).await,
        None => Ok(()),
    }
}

/// Calls `f` with the `Date` header value of this second.
fn with_date(f: impl FnOnce(&str)) {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with_borrow_mut(|(at, text)| {
        if *at != second {
            *at = second;
            *text = httpdate::fmt_http_date(now);
        }
        f(text);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(bytes: &[u8]) -> (Request, usize) {
        match parse(bytes) {
            Parsed::Request(request, used) => (request, used),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection_header() {
        let (r, used) = request(b"GET /test HTTP/1.1\r\nHost: x\r\n\r\nGET /te");
        assert!(matches!(r.action, Action::Test) && r.keep_alive && !r.confirm_keep_alive);
        assert_eq!(used, 31);
        let (r, _) = request(b"GET /test HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(!r.keep_alive);
        let (r, _) = request(b"GET /test HTTP/1.0\r\n\r\n");
        assert!(!r.keep_alive);
        let (r, _) = request(b"GET /test HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(r.keep_alive && r.confirm_keep_alive);
    }

    #[test]
    fn routes_methods_and_bodies() {
        let (r, _) = request(b"HEAD /delay?ms=7 HTTP/1.1\r\n\r\n");
        assert!(matches!(r.action, Action::Delay(d) if d == Duration::from_millis(7)) && r.head_only);
        let (r, _) = request(b"GET /delay?ms=x HTTP/1.1\r\n\r\n");
        assert!(matches!(r.action, Action::Refuse(400, _)));
        let (r, _) = request(b"DELETE /test HTTP/1.1\r\n\r\n");
        assert!(matches!(r.action, Action::Refuse(405, _)));
        let (r, _) = request(b"GET /nope HTTP/1.1\r\n\r\n");
        assert!(matches!(r.action, Action::Refuse(404, _)));
        let (r, _) = request(b"GET /getDataAsync HTTP/1.1\r\n\r\n");
        assert!(matches!(r.action, Action::Refuse(404, ref m) if m.contains("--model reactive serves it")));
        assert!(matches!(
            parse(b"POST /test HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"),
            Parsed::Malformed(413, _)
        ));
        assert!(matches!(parse(b"GET /test HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), Parsed::Request(..)));
    }

    #[test]
    fn malformed_heads_are_refused() {
        assert!(matches!(parse(b"GET /test HTTP/1.1\r\n"), Parsed::Partial));
        assert!(matches!(parse(b"\x00\x01garbage\r\n\r\n"), Parsed::Malformed(400, _)));
        assert!(matches!(parse(b"GET /test HTTP/2.0\r\n\r\n"), Parsed::Malformed(505, _)));
        let big = [b"GET /test HTTP/1.1\r\nX: ".as_slice(), &[b'a'; MAX_HEAD]].concat();
        assert!(matches!(parse(&big), Parsed::Malformed(431, _)));
        let many: Vec<u8> = std::iter::once(b"GET /test HTTP/1.1\r\n".to_vec())
            .chain((0..MAX_HEADERS + 1).map(|i| format!("X{i}: y\r\n").into_bytes()))
            .chain(std::iter::once(b"\r\n".to_vec()))
            .flatten()
            .collect();
        assert!(matches!(parse(&many), Parsed::Malformed(431, _)));
    }
}
