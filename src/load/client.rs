//! One HTTP/1.1 client connection on blocklab's own wire ([`crate::http1`]),
//! and the classification of every way a request can fail into an
//! [`ErrorKind`], which the engine counts.
//!
//! The request is encoded once per run and written as is; responses are
//! read into the connection's one buffer, reused for its whole life, and
//! parsed there with `httparse`. Bodies are counted, not kept. Connections
//! are driven on the engine thread's own single-threaded runtime: nothing
//! here crosses threads.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http1::{self, Chunked, Framing, WireError};

/// The buffer a connection starts with; it grows (doubling) for a longer head.
const BUFFER: usize = 4 * 1024;
/// The longest response head read; a longer one is a protocol error.
pub const MAX_HEAD: usize = 256 * 1024;

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
    /// Bytes of the response head on the wire (interim 1xx heads included).
    pub head_bytes: u64,
    /// Bytes of the body (chunk data only, for a chunked body).
    pub body_bytes: u64,
    /// The `Server` header, if asked for and present.
    pub server: Option<String>,
}

/// An open connection: its socket and the buffer responses are read into.
pub struct Connection {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes `buf[start..end]` were read and not consumed yet (the start of
    /// the next response, when the server answered ahead).
    start: usize,
    end: usize,
    /// The server ended the connection, or a response said it would.
    closed: bool,
}

/// Connects to `addr` within `timeout`.
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
    Ok(Connection { stream, buf: vec![0; BUFFER], start: 0, end: 0, closed: false })
}

impl Connection {
    /// Whether the connection can take another request. A close (or any
    /// byte) from the server while the connection was idle is noticed here,
    /// without a system call unless the socket was reported readable.
    pub fn is_open(&mut self) -> bool {
        if self.closed || self.start != self.end {
            // Bytes nobody asked for: the connection is out of step.
            return false;
        }
        let mut probe = [0u8; 1];
        match self.stream.try_read(&mut probe) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => true,
            _ => {
                self.closed = true;
                false
            }
        }
    }

    /// Whether the server ended the connection or said it would.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Writes `request` (one or more encoded requests) as is.
    pub async fn write(&mut self, request: &[u8]) -> Result<(), ErrorKind> {
        self.stream.write_all(request).await.map_err(|e| {
            self.closed = true;
            io_kind(&e)
        })
    }

    /// Reads one whole response: interim 1xx heads, the final head, its body.
    pub async fn read_response(&mut self, to_head: bool, want_server: bool) -> Result<Reply, ErrorKind> {
        let mut head_bytes = 0u64;
        let head = loop {
            let head = self.read_head(to_head, want_server).await?;
            head_bytes += head.len as u64;
            if !head.is_interim() {
                break head;
            }
        };
        let body_bytes = match head.framing {
            Framing::None => 0,
            Framing::Length(n) => self.skip(n).await?,
            Framing::Chunked => self.skip_chunked().await?,
            Framing::UntilClose => self.skip_to_close().await?,
        };
        if head.close {
            self.closed = true;
        }
        Ok(Reply { status: head.status, head_bytes, body_bytes, server: head.server })
    }

    async fn read_head(
        &mut self,
        to_head: bool,
        want_server: bool,
    ) -> Result<http1::ResponseHead, ErrorKind> {
        loop {
            match http1::parse_response(&self.buf[self.start..self.end], MAX_HEAD, to_head, want_server) {
                Ok(Some(head)) => {
                    self.start += head.len;
                    return Ok(head);
                }
                Ok(None) => self.fill().await?,
                Err(WireError::Malformed(_) | WireError::HeadTooLarge(_)) => {
                    self.closed = true;
                    return Err(ErrorKind::Protocol);
                }
            }
        }
    }

    /// Consumes `n` body bytes.
    async fn skip(&mut self, n: u64) -> Result<u64, ErrorKind> {
        let mut left = n;
        loop {
            let take = left.min((self.end - self.start) as u64);
            self.start += take as usize;
            left -= take;
            if left == 0 {
                return Ok(n);
            }
            self.fill().await?;
        }
    }

    async fn skip_chunked(&mut self) -> Result<u64, ErrorKind> {
        let mut chunked = Chunked::default();
        let mut data = 0;
        loop {
            let fed = chunked.feed(&self.buf[self.start..self.end]).map_err(|_| {
                self.closed = true;
                ErrorKind::Protocol
            })?;
            self.start += fed.consumed;
            data += fed.data;
            if chunked == Chunked::Done {
                return Ok(data);
            }
            self.fill().await?;
        }
    }

    async fn skip_to_close(&mut self) -> Result<u64, ErrorKind> {
        let mut data = (self.end - self.start) as u64;
        self.closed = true;
        loop {
            self.start = 0;
            self.end = 0;
            match self.stream.read(&mut self.buf).await {
                Ok(0) => return Ok(data),
                Ok(n) => data += n as u64,
                Err(e) => return Err(io_kind(&e)),
            }
        }
    }

    /// Reads more bytes after `buf[start..end]`, making room first: moves
    /// the unconsumed bytes to the front, or grows the buffer when they fill it.
    async fn fill(&mut self) -> Result<(), ErrorKind> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else {
                // A head longer than the buffer (MAX_HEAD bounds it).
                let len = (self.buf.len() * 2).min(MAX_HEAD + 1);
                if len == self.buf.len() {
                    self.closed = true;
                    return Err(ErrorKind::Protocol);
                }
                self.buf.resize(len, 0);
            }
        }
        match self.stream.read(&mut self.buf[self.end..]).await {
            Ok(0) => {
                self.closed = true;
                Err(ErrorKind::ClosedEarly)
            }
            Ok(n) => {
                self.end += n;
                Ok(())
            }
            Err(e) => {
                self.closed = true;
                Err(io_kind(&e))
            }
        }
    }
}

/// Maps a socket error during an exchange to the kind of failure it is.
fn io_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe => {
            ErrorKind::ConnectionReset
        }
        _ => ErrorKind::ClosedEarly,
    }
}
