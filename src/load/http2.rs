//! `--h2`: one HTTP/2 connection of the engine on the `h2` crate (hyper's
//! own HTTP/2): the handshake over a connected [`client::Stream`], one
//! request on a stream of its own ([`Session::exchange`]), and how an h2
//! failure is classified into an [`ErrorKind`].
//!
//! h2 does the framing, HPACK and flow control; the engine decides how many
//! streams are open at once (`--streams`) and when each request goes out.
//! h2's connection future, which reads and writes the frames, must be polled
//! for any stream to progress: the engine's connection task polls it itself
//! ([`Session::drive`]) beside its streams, so that responses read and the
//! requests they make room for are written in one wake-up of one task, as
//! h2load does, not handed between two tasks. A session replaced while
//! streams are still open on it (after a GOAWAY) is handed to a task of its
//! own to finish them ([`Session::retire`]).

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::client::{self, ErrorKind, Reply};
use super::request::H2Request;

/// An open HTTP/2 connection: the handle that opens streams and the task
/// that drives the connection.
pub struct Session {
    streams: Streams,
    /// h2's connection future; `None` once it has ended.
    connection: Option<Pin<Box<h2::client::Connection<Sniffed, Bytes>>>>,
}

/// How an exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The server did not take the request: no stream could be opened (a
    /// GOAWAY came first, the connection is over), or the server refused the
    /// stream (GOAWAY with a lower last stream id, REFUSED_STREAM). Safe to
    /// send again on a new connection (RFC 9113 8.7); the session takes no more.
    Unprocessed(ErrorKind),
    /// The request failed after the server may have taken it.
    Failed(ErrorKind),
}

/// What opens streams on a [`Session`]: a handle, cloned for each request
/// so that its exchange borrows nothing from the connection loop.
#[derive(Clone)]
pub struct Streams {
    send: SendRequest<Bytes>,
    /// The server answered the preface in HTTP/1: it does not speak h2c.
    answered_http1: Rc<Cell<bool>>,
    /// A stream could not be opened or was refused: the server is going away.
    going_away: Rc<Cell<bool>>,
}

impl Session {
    /// The HTTP/2 handshake over `stream` (the client preface and SETTINGS;
    /// h2 does not wait for the server's).
    pub async fn open(stream: client::Stream) -> Result<Session, ErrorKind> {
        let answered_http1 = Rc::new(Cell::new(false));
        let io = Sniffed { stream, first: true, answered_http1: answered_http1.clone() };
        let (send, connection) = h2::client::Builder::new()
            // The server's pushes would only be refused.
            .enable_push(false)
            // Bodies are counted and dropped at once: a window large enough that a
            // large response is not held back by WINDOW_UPDATE round trips (h2load's is 1 GiB).
            .initial_window_size(1 << 24)
            .initial_connection_window_size(1 << 30)
            .handshake::<_, Bytes>(io)
            .await
            .map_err(|e| kind(&e, answered_http1.get()))?;
        let going_away = Rc::new(Cell::new(false));
        Ok(Session {
            streams: Streams { send, answered_http1, going_away },
            connection: Some(Box::pin(connection)),
        })
    }

    /// Whether the connection takes no more requests (an error, a GOAWAY,
    /// the server's close): the next request needs a new one. Streams still
    /// open on it go on to their end; the connection closes after them.
    pub fn is_closed(&self) -> bool {
        self.connection.is_none() || self.streams.going_away.get()
    }

    /// Reads and writes the connection's frames until it ends (at once when
    /// it has; for a connection in use, only when the server ends it: poll
    /// it beside the streams, with `select!`). Its result reaches the
    /// streams as theirs; nothing to keep here.
    pub async fn drive(&mut self) {
        if let Some(connection) = self.connection.as_mut() {
            let _ = connection.await;
            self.connection = None;
        }
    }

    /// Hands the connection to a task of its own on this thread's
    /// [`tokio::task::LocalSet`], to finish the streams still open on it; it
    /// ends once they and every handle to it are gone.
    pub fn retire(self) {
        if let Some(connection) = self.connection {
            tokio::task::spawn_local(async move {
                let _ = connection.await;
            });
        }
    }

    /// A handle to open streams with.
    pub fn streams(&self) -> Streams {
        self.streams.clone()
    }
}

impl Streams {
    /// Sends `request` on a new stream (waiting for one when the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS are all open) and reads the whole
    /// response, giving the body's flow-control window back as it arrives.
    /// Several exchanges of one session run at once.
    pub async fn exchange(self, request: &H2Request, want_server: bool) -> Result<Reply, Failure> {
        let unopened = |e: h2::Error| {
            self.going_away.set(true);
            Failure::Unprocessed(kind(&e, self.answered_http1.get()))
        };
        let refused = |e: h2::Error| kind(&e, self.answered_http1.get());
        let mut send = self.send.ready().await.map_err(unopened)?;
        let end_of_stream = request.body.is_none();
        let (response, mut body_out) = send.send_request(request.head(), end_of_stream).map_err(unopened)?;
        if let Some(body) = &request.body {
            // h2 holds what the stream's window does not take yet and sends it as WINDOW_UPDATEs come.
            body_out.send_data(body.clone(), true).map_err(|e| Failure::Failed(refused(e)))?;
        }
        let response = match response.await {
            Ok(response) => response,
            Err(e) if is_unprocessed(&e) && !self.answered_http1.get() => return Err(unopened(e)),
            Err(e) => return Err(Failure::Failed(refused(e))),
        };
        let refused = |e: h2::Error| Failure::Failed(refused(e));
        let status = response.status().as_u16();
        let server = if want_server {
            response.headers().get(http::header::SERVER).and_then(|v| v.to_str().ok()).map(str::to_string)
        } else {
            None
        };
        let mut body = response.into_body();
        let mut body_bytes = 0u64;
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(refused)?;
            body_bytes += chunk.len() as u64;
            // Counted, not kept: the window opens again at once.
            body.flow_control().release_capacity(chunk.len()).map_err(refused)?;
        }
        // The head is HPACK-compressed, its bytes on the wire are h2's business: not counted.
        Ok(Reply { status, head_bytes: 0, body_bytes, server })
    }
}

/// Whether the server said it did not process the stream: above the last
/// stream id of its GOAWAY, or reset with REFUSED_STREAM.
fn is_unprocessed(e: &h2::Error) -> bool {
    e.is_remote() && (e.is_go_away() || (e.is_reset() && e.reason() == Some(h2::Reason::REFUSED_STREAM)))
}

/// The kind of an h2 failure; `answered_http1`: the server's first bytes
/// were an HTTP/1 response (to the h2c preface).
fn kind(e: &h2::Error, answered_http1: bool) -> ErrorKind {
    if answered_http1 {
        return ErrorKind::H2Refused;
    }
    if let Some(io) = e.get_io() {
        return client::io_kind(io);
    }
    if e.is_go_away() || (e.is_reset() && e.is_remote()) {
        // The server ended the connection (GOAWAY) or this stream (RST_STREAM).
        return match e.reason() {
            Some(h2::Reason::HTTP_1_1_REQUIRED) => ErrorKind::H2Refused,
            Some(h2::Reason::NO_ERROR | h2::Reason::REFUSED_STREAM) => ErrorKind::ClosedEarly,
            _ => ErrorKind::ConnectionReset,
        };
    }
    ErrorKind::Protocol
}

/// The connection's socket, watched for an HTTP/1 answer in its first bytes.
struct Sniffed {
    stream: client::Stream,
    first: bool,
    answered_http1: Rc<Cell<bool>>,
}

impl AsyncRead for Sniffed {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if this.first && buf.filled().len() > before {
            this.first = false;
            let got = &buf.filled()[before..];
            let http1 = b"HTTP/1.";
            if got.len() >= 5 && http1.starts_with(&got[..got.len().min(http1.len())]) {
                this.answered_http1.set(true);
            }
        }
        polled
    }
}

impl AsyncWrite for Sniffed {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http1_answer_is_h2_refused_and_other_failures_a_protocol_error() {
        let error = h2::Error::from(h2::Reason::FRAME_SIZE_ERROR);
        assert_eq!(kind(&error, true), ErrorKind::H2Refused);
        assert_eq!(kind(&error, false), ErrorKind::Protocol);
    }
}
