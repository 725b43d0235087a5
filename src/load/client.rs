//! One HTTP/1.1 client connection over hyper, and the classification of every
//! way a request can fail into an [`ErrorKind`], which the engine counts.
//!
//! Connections are driven on the engine thread's own single-threaded runtime
//! (`spawn_local`): nothing here crosses threads, so nothing needs a lock.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::FutureExt;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How a request failed without a response. Each kind is counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ErrorKind {
    /// Nothing listens on the port (the connection was actively refused).
    #[error("connect refused")]
    ConnectRefused,
    /// The connection was not established within the timeout.
    #[error("connect timeout")]
    ConnectTimeout,
    /// Connecting failed otherwise (unreachable network, no ports left, ...).
    #[error("connect error")]
    ConnectError,
    /// No complete response within the timeout after the request was sent.
    #[error("request timeout")]
    RequestTimeout,
    /// The server reset the connection.
    #[error("connection reset")]
    ConnectionReset,
    /// The connection closed before the response was complete.
    #[error("connection closed early")]
    ClosedEarly,
    /// The response was not valid HTTP.
    #[error("malformed response")]
    Protocol,
    /// This side could not open the connection: out of file descriptors
    /// (EMFILE, ENFILE) or of ephemeral ports (EADDRNOTAVAIL). The load
    /// generator's limit, not the server's failure.
    #[error("load-side limit (descriptors or ports)")]
    LoadSideLimit,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::ConnectError,
        ErrorKind::RequestTimeout,
        ErrorKind::ConnectionReset,
        ErrorKind::ClosedEarly,
        ErrorKind::Protocol,
        ErrorKind::LoadSideLimit,
    ];

    /// The key used in the JSON report.
    pub fn key(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::ConnectError => "connect_error",
            ErrorKind::RequestTimeout => "request_timeout",
            ErrorKind::ConnectionReset => "connection_reset",
            ErrorKind::ClosedEarly => "closed_early",
            ErrorKind::Protocol => "protocol_error",
            ErrorKind::LoadSideLimit => "load_side_limit",
        }
    }

    /// Position in [`ErrorKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What a completed request brought back.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Bytes of the response head (status line and headers, as serialized on the wire).
    pub head_bytes: u64,
    /// Bytes of the body.
    pub body_bytes: u64,
    /// The `Server` header, if asked for and present.
    pub server: Option<String>,
}

/// The hyper task that reads and writes the socket of one connection.
type Driver = http1::Connection<TokioIo<TcpStream>, Empty<Bytes>>;

/// An open connection, ready for one request at a time.
///
/// Its driver is polled by the request itself (in [`Connection::send`])
/// instead of in a task of its own: a response then wakes one task, not two,
/// which is most of what hyper costs per request beyond the parsing.
pub struct Connection {
    sender: SendRequest<Empty<Bytes>>,
    driver: std::pin::Pin<Box<Driver>>,
    closed: bool,
}

/// Why [`Connection::send`] got no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendFailure {
    /// The connection had been closed (by the server, while idle) before the
    /// request went out: nothing was sent, so the caller may reconnect and send it.
    NotSent,
    /// The request failed.
    Failed(ErrorKind),
}

/// Connects to `addr` within `timeout` and starts the HTTP/1.1 connection.
pub async fn connect(addr: SocketAddr, timeout: Duration) -> Result<Connection, ErrorKind> {
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Err(_) => return Err(ErrorKind::ConnectTimeout),
        // EMFILE, ENFILE, EADDRNOTAVAIL: this side's limits.
        Ok(Err(e)) if matches!(e.raw_os_error(), Some(23 | 24 | 99)) => return Err(ErrorKind::LoadSideLimit),
        Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => return Err(ErrorKind::ConnectRefused),
        Ok(Err(e)) if e.kind() == io::ErrorKind::TimedOut => return Err(ErrorKind::ConnectTimeout),
        Ok(Err(_)) => return Err(ErrorKind::ConnectError),
        Ok(Ok(stream)) => stream,
    };
    let _ = stream.set_nodelay(true);
    // writev(false): the request head is copied into one buffer and sent with
    // write(2); for small requests that measured ~10 % less CPU than writev.
    let (sender, driver) = http1::Builder::new()
        .writev(false)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| classify(&e))?;
    Ok(Connection { sender, driver: Box::pin(driver), closed: false })
}

impl Connection {
    /// Whether the connection can take another request. Polls the driver once,
    /// so a close by the server that arrived while idle is noticed here.
    pub fn is_open(&mut self) -> bool {
        if !self.closed && (&mut self.driver).now_or_never().is_some() {
            self.closed = true;
        }
        !self.closed && !self.sender.is_closed()
    }

    /// Sends `request` and reads the whole response, driving the connection meanwhile.
    /// `want_server` copies the `Server` header into the reply (an allocation,
    /// so only asked for until one response has supplied it).
    pub async fn send(
        &mut self,
        request: Request<Empty<Bytes>>,
        want_server: bool,
    ) -> Result<Reply, SendFailure> {
        let Connection { sender, driver, closed } = self;
        let exchange = async {
            sender.ready().await.map_err(|_| SendFailure::NotSent)?;
            let response =
                sender.send_request(request).await.map_err(|e| SendFailure::Failed(classify(&e)))?;
            read_reply(response, want_server).await.map_err(SendFailure::Failed)
        };
        let mut exchange = std::pin::pin!(exchange);
        if !*closed {
            tokio::select! {
                biased;
                reply = &mut exchange => return reply,
                _ = driver.as_mut() => *closed = true,
            }
        }
        // The connection has ended; what it delivered before (or the error) is in the channel.
        exchange.await
    }
}

async fn read_reply(
    response: Response<hyper::body::Incoming>,
    want_server: bool,
) -> Result<Reply, ErrorKind> {
    let status = response.status();
    // hyper hands over the parsed head; its wire size is status line, each
    // "name: value\r\n", and the blank line.
    let reason = status.canonical_reason().map_or(0, str::len);
    let mut head_bytes = (b"HTTP/1.1 200 ".len() + reason + 4) as u64;
    for (name, value) in response.headers() {
        head_bytes += (name.as_str().len() + value.len() + 4) as u64;
    }
    let server = if !want_server {
        None
    } else {
        response.headers().get(hyper::header::SERVER).and_then(|v| v.to_str().ok()).map(str::to_string)
    };
    let mut body = response.into_body();
    let mut body_bytes = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| classify(&e))?;
        if let Some(data) = frame.data_ref() {
            body_bytes += data.len() as u64;
        }
    }
    Ok(Reply { status: status.as_u16(), head_bytes, body_bytes, server })
}

/// Maps a hyper error to the kind of failure it is.
fn classify(e: &hyper::Error) -> ErrorKind {
    if e.is_parse() || e.is_parse_status() || e.is_parse_too_large() {
        return ErrorKind::Protocol;
    }
    if e.is_timeout() {
        return ErrorKind::RequestTimeout;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return match io.kind() {
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe => ErrorKind::ConnectionReset,
                _ => ErrorKind::ClosedEarly,
            };
        }
        source = s.source();
    }
    // Incomplete message, canceled (the connection went away) and the like.
    ErrorKind::ClosedEarly
}
