//! One HTTP/1.1 client connection on blocklab's own wire ([`crate::http1`]),
//! over plain TCP or TLS ([`Stream`]; the handshake is [`super::tls`]'s), and
//! the classification of every way a request can fail into an
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

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

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
    /// TLS: the certificate chain does not lead to a trusted root (a
    /// self-signed certificate, or a private CA not given with `--cacert`).
    #[error("TLS: unknown issuer")]
    TlsUnknownIssuer,
    /// TLS: the certificate is not for the URL's host.
    #[error("TLS: certificate not valid for the name")]
    TlsNameMismatch,
    /// TLS: the certificate has expired.
    #[error("TLS: certificate expired")]
    TlsExpired,
    /// TLS: the certificate is refused for another reason (not valid yet,
    /// revoked, a bad signature, an unsupported algorithm).
    #[error("TLS: bad certificate")]
    TlsBadCertificate,
    /// TLS: the handshake broke off: the server does not speak TLS (a
    /// plaintext server on an `https://` URL), closed the connection during
    /// it, sent an alert, or offered nothing this client accepts.
    #[error("TLS: protocol error or not TLS")]
    TlsProtocol,
    /// TLS: the handshake did not finish within the timeout.
    #[error("TLS: handshake timeout")]
    TlsHandshakeTimeout,
    /// `--h2`: the server does not speak HTTP/2 here: over TLS it did not
    /// agree to ALPN `h2`; over `http://` it answered the HTTP/2 preface in HTTP/1.
    #[error("HTTP/2 refused by the server")]
    H2Refused,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 15] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::ConnectError,
        ErrorKind::RequestTimeout,
        ErrorKind::ConnectionReset,
        ErrorKind::ClosedEarly,
        ErrorKind::Protocol,
        ErrorKind::LoadSideLimit,
        ErrorKind::TlsUnknownIssuer,
        ErrorKind::TlsNameMismatch,
        ErrorKind::TlsExpired,
        ErrorKind::TlsBadCertificate,
        ErrorKind::TlsProtocol,
        ErrorKind::TlsHandshakeTimeout,
        ErrorKind::H2Refused,
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
            ErrorKind::TlsUnknownIssuer => "tls_unknown_issuer",
            ErrorKind::TlsNameMismatch => "tls_name_mismatch",
            ErrorKind::TlsExpired => "tls_expired",
            ErrorKind::TlsBadCertificate => "tls_bad_certificate",
            ErrorKind::TlsProtocol => "tls_protocol_error",
            ErrorKind::TlsHandshakeTimeout => "tls_handshake_timeout",
            ErrorKind::H2Refused => "h2_refused",
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

/// The socket of a connection: plain TCP, or TLS over it. An enum, not a
/// type parameter, so one engine serves both; the plaintext path pays one
/// predictable branch per read and write.
pub enum Stream {
    /// `http://`.
    Plain(TcpStream),
    /// `https://` (boxed: rustls' state is large, and most runs are plaintext).
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_write(cx, buf),
        }
    }

    // HTTP/2 (h2) writes a frame head and its payload as one writev when the stream takes it.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(tcp) => tcp.is_write_vectored(),
            Stream::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            // A TCP socket has nothing buffered on this side.
            Stream::Plain(_) => Poll::Ready(Ok(())),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_shutdown(cx),
        }
    }
}

/// An open connection: its socket and the buffer responses are read into.
pub struct Connection {
    stream: Stream,
    buf: Vec<u8>,
    /// Bytes `buf[start..end]` were read and not consumed yet (the start of
    /// the next response, when the server answered ahead).
    start: usize,
    end: usize,
    /// The server ended the connection, or a response said it would.
    closed: bool,
}

/// Connects to `addr` within `timeout`.
pub async fn connect(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, ErrorKind> {
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
    Ok(stream)
}

impl Connection {
    /// A connection over `stream`, connected (and through its handshake, for TLS).
    pub fn new(stream: Stream) -> Connection {
        Connection { stream, buf: vec![0; BUFFER], start: 0, end: 0, closed: false }
    }

    /// Whether the connection can take another request. A close (or any
    /// byte) from the server while the connection was idle is noticed here,
    /// without a system call unless the socket was reported readable.
    pub fn is_open(&mut self) -> bool {
        if self.closed || self.start != self.end {
            // Bytes nobody asked for: the connection is out of step.
            return false;
        }
        let mut probe = [0u8; 1];
        let open = match &mut self.stream {
            Stream::Plain(tcp) => {
                matches!(tcp.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
            // Not the socket itself: TLS records that carry no data (a TLS 1.3 session
            // ticket) may arrive while idle and are taken in here. One poll with a waker
            // that does nothing: the next real read registers the task's own.
            Stream::Tls(tls) => {
                let mut buf = ReadBuf::new(&mut probe);
                let mut cx = Context::from_waker(std::task::Waker::noop());
                Pin::new(&mut **tls).poll_read(&mut cx, &mut buf).is_pending()
            }
        };
        if !open {
            self.closed = true;
        }
        open
    }

    /// Whether the server ended the connection or said it would.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Writes `request` (one or more encoded requests) as is (for TLS, all
    /// of it encrypted and handed to the socket).
    pub async fn write(&mut self, request: &[u8]) -> Result<(), ErrorKind> {
        let written = match self.stream.write_all(request).await {
            Ok(()) => self.stream.flush().await,
            Err(e) => Err(e),
        };
        written.map_err(|e| {
            self.closed = true;
            io_kind(&e)
        })
    }

    /// The TLS stream, for what its handshake negotiated.
    pub fn tls(&self) -> Option<&TlsStream<TcpStream>> {
        match &self.stream {
            Stream::Plain(_) => None,
            Stream::Tls(tls) => Some(tls),
        }
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
                // A TLS server that closed without its close_notify: the body still ended at the close.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(data),
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
pub(crate) fn io_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe => {
            ErrorKind::ConnectionReset
        }
        _ => ErrorKind::ClosedEarly,
    }
}
