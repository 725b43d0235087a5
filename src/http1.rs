//! The HTTP/1.1 wire both sides of blocklab speak without a framework: the
//! `lean` server model reads requests with it, `blocklab load` reads
//! responses. Parsing is `httparse` (the parser hyper itself uses); what is
//! here is what HTTP/1.1 says around it (RFC 9112): which header fields
//! decide whether a connection stays open, how a message body is delimited,
//! and the chunked transfer coding.
//!
//! Nothing here allocates per message or does I/O: the callers own their
//! buffers and sockets.

/// The most header fields a response may carry.
pub const MAX_RESPONSE_HEADERS: usize = 100;

/// What a `Connection` field value says: (`close`, `keep-alive`). The value
/// is a comma-separated list of tokens, compared without case.
pub fn connection_tokens(value: &[u8]) -> (bool, bool) {
    let (mut close, mut keep_alive) = (false, false);
    for token in value.split(|b| *b == b',') {
        let token = token.trim_ascii();
        close |= token.eq_ignore_ascii_case(b"close");
        keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
    }
    (close, keep_alive)
}

/// A `Content-Length` value: digits only (surrounding blanks allowed).
pub fn content_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Whether a `Transfer-Encoding` value ends with `chunked` (the only coding
/// that delimits a body; RFC 9112 §6.3): `None` when it names no coding.
/// Empty list elements are ignored (RFC 9110 §5.6.1: `chunked,` is chunked).
pub fn is_chunked(value: &[u8]) -> Option<bool> {
    let last = value.split(|b| *b == b',').map(<[u8]>::trim_ascii).rfind(|coding| !coding.is_empty())?;
    Some(last.eq_ignore_ascii_case(b"chunked"))
}

/// How a response's body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body: a response to HEAD, a 1xx, 204 or 304.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
    /// Everything until the server closes the connection.
    UntilClose,
}

/// The head of a response, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// Bytes of the head on the wire, the blank line included.
    pub len: usize,
    /// How the body that follows is delimited.
    pub framing: Framing,
    /// Whether the connection ends after this response (`Connection: close`,
    /// HTTP/1.0 without keep-alive, or a body delimited by the close).
    pub close: bool,
    /// The `Server` field, when asked for and present.
    pub server: Option<String>,
}

impl ResponseHead {
    /// An interim response (1xx other than 101): the final one follows it.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}

/// Why a response could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Not HTTP/1.x: a bad status line, header or chunk.
    #[error("malformed response: {0}")]
    Malformed(&'static str),
    /// The head is longer than the reader takes.
    #[error("response head over {0} bytes")]
    HeadTooLarge(usize),
}

/// Parses the response head at the start of `bytes`: `Ok(None)` when more
/// bytes are needed. `to_head` says the request was a HEAD (no body follows
/// whatever the fields say); `want_server` copies the `Server` field.
pub fn parse_response(
    bytes: &[u8],
    max_head: usize,
    to_head: bool,
    want_server: bool,
) -> Result<Option<ResponseHead>, WireError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut response = httparse::Response::new(&mut fields);
    // Only the first `max_head` bytes are parsed, so that the verdict on a
    // head past the limit does not depend on how many bytes had arrived.
    let len = match response.parse(&bytes[..bytes.len().min(max_head)]) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if bytes.len() <= max_head => return Ok(None),
        Ok(httparse::Status::Partial) => return Err(WireError::HeadTooLarge(max_head)),
        Err(httparse::Error::TooManyHeaders) => return Err(WireError::Malformed("too many header fields")),
        Err(httparse::Error::Version) => return Err(WireError::Malformed("not an HTTP/1.x status line")),
        Err(httparse::Error::Status) => return Err(WireError::Malformed("bad status code")),
        Err(_) => return Err(WireError::Malformed("bad status line or header field")),
    };
    let status = response.code.ok_or(WireError::Malformed("no status code"))?;
    let http10 = response.version == Some(0);
    let (mut close, mut keep_alive) = (false, false);
    // Some(whether chunked is the final coding) once a Transfer-Encoding
    // field is seen; several fields are one list, so the last coding named
    // in the last of them is the final one (RFC 9110 §5.3).
    let mut chunked: Option<bool> = None;
    let mut length: Option<u64> = None;
    let mut server = None;
    for field in response.headers.iter() {
        let name = field.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = content_length(field.value).ok_or(WireError::Malformed("bad Content-Length"))?;
            if length.is_some_and(|seen| seen != n) {
                return Err(WireError::Malformed("conflicting Content-Length fields"));
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = is_chunked(field.value).or(chunked).or(Some(false));
        } else if name.eq_ignore_ascii_case(b"connection") {
            let (c, k) = connection_tokens(field.value);
            close |= c;
            keep_alive |= k;
        } else if want_server && name.eq_ignore_ascii_case(b"server") {
            server = Some(String::from_utf8_lossy(field.value).into_owned());
        }
    }
    let no_body = to_head || (100..200).contains(&status) || status == 204 || status == 304;
    let framing = if no_body {
        Framing::None
    } else if let Some(chunked) = chunked {
        // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3 rule 3);
        // a coding other than chunked last: the body runs until the close
        // (rule 4).
        if chunked {
            Framing::Chunked
        } else {
            close = true;
            Framing::UntilClose
        }
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        close = true;
        Framing::UntilClose
    };
    let close = close || status == 101 || (http10 && !keep_alive);
    Ok(Some(ResponseHead { status, len, framing, close, server }))
}

/// Reads a chunked body as it arrives: chunk sizes (with extensions), data,
/// and the trailer section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Chunked {
    /// Expecting a chunk-size line.
    #[default]
    Size,
    /// Inside a chunk's data, this many bytes to go.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer fields, then a blank line.
    Trailers,
    /// The body has ended.
    Done,
}

/// What [`Chunked::feed`] did with the bytes it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    /// Bytes consumed from the start of the input.
    pub consumed: usize,
    /// Of those, bytes of chunk data (the body proper).
    pub data: u64,
}

impl Chunked {
    /// Consumes what it can of `bytes`. When it returns with the state not
    /// [`Chunked::Done`], the bytes after `consumed` are an incomplete piece
    /// that needs more input after it.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Fed, WireError> {
        let mut fed = Fed { consumed: 0, data: 0 };
        loop {
            let rest = &bytes[fed.consumed..];
            match *self {
                Chunked::Done => return Ok(fed),
                Chunked::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((used, 0))) => {
                        fed.consumed += used;
                        *self = Chunked::Trailers;
                    }
                    Ok(httparse::Status::Complete((used, size))) => {
                        fed.consumed += used;
                        *self = Chunked::Data(size);
                    }
                    Ok(httparse::Status::Partial) if rest.len() < 1024 => return Ok(fed),
                    Ok(httparse::Status::Partial) => {
                        return Err(WireError::Malformed("chunk-size line too long"));
                    }
                    Err(_) => return Err(WireError::Malformed("bad chunk size")),
                },
                Chunked::Data(left) => {
                    if rest.is_empty() {
                        return Ok(fed);
                    }
                    let take = left.min(rest.len() as u64);
                    fed.consumed += take as usize;
                    fed.data += take;
                    *self = if take == left { Chunked::DataEnd } else { Chunked::Data(left - take) };
                }
                Chunked::DataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        fed.consumed += 2;
                        *self = Chunked::Size;
                    }
                    [] | [b'\r'] => return Ok(fed),
                    _ => return Err(WireError::Malformed("chunk data not followed by CRLF")),
                },
                Chunked::Trailers => {
                    let mut fields = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
                    match httparse::parse_headers(rest, &mut fields) {
                        Ok(httparse::Status::Complete((used, _))) => {
                            fed.consumed += used;
                            *self = Chunked::Done;
                        }
                        Ok(httparse::Status::Partial) if rest.len() < 64 * 1024 => return Ok(fed),
                        Ok(httparse::Status::Partial) => {
                            return Err(WireError::Malformed("trailers too long"));
                        }
                        Err(_) => return Err(WireError::Malformed("bad trailer field")),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(bytes: &str) -> ResponseHead {
        parse_response(bytes.as_bytes(), 64 * 1024, false, true).unwrap().unwrap()
    }

    #[test]
    fn framing_follows_the_rfc() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x/1\r\n\r\nworks");
        assert_eq!((h.status, h.len, h.framing, h.close), (200, 51, Framing::Length(5), false));
        assert_eq!(h.server.as_deref(), Some("x/1"));
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 9\r\n\r\n");
        assert_eq!(h.framing, Framing::Chunked);
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        for status in [100, 103, 204, 304] {
            assert_eq!(
                head(&format!("HTTP/1.1 {status} X\r\nContent-Length: 3\r\n\r\n")).framing,
                Framing::None
            );
        }
        assert!(head("HTTP/1.1 100 Continue\r\n\r\n").is_interim());
        assert!(!head("HTTP/1.1 101 Switching\r\n\r\n").is_interim());
        let to_head = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 1024, true, false);
        assert_eq!(to_head.unwrap().unwrap().framing, Framing::None);
        assert!(head("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n").close);
        assert!(head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").close);
        assert!(!head("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n").close);
    }

    #[test]
    fn transfer_encoding_fields_are_one_list_and_override_the_length() {
        // Found by the framing property (fuzz/seeds/response/finding-te-*),
        // on inputs written to probe it: with a coding other than
        // chunked last, a Content-Length beside it framed the body (rule 4
        // says: until the close); a second field that ended the list with
        // chunked still closed the connection; `chunked,` was not chunked.
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 4\r\n\r\n");
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!((h.framing, h.close), (Framing::Chunked, false));
        let h = head(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n",
        );
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, \r\nTransfer-Encoding:\r\n\r\n");
        assert_eq!((h.framing, h.close), (Framing::Chunked, false));
    }

    #[test]
    fn bad_heads_are_errors_and_partial_heads_ask_for_more() {
        assert_eq!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Le", 1024, false, false), Ok(None));
        for bad in [
            "garbage\r\n\r\n",
            "HTTP/2 200 OK\r\n\r\n",
            "HTTP/1.1 2x0 OK\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        ] {
            assert!(
                matches!(parse_response(bad.as_bytes(), 1024, false, false), Err(WireError::Malformed(_))),
                "{bad}"
            );
        }
        let long = format!("HTTP/1.1 200 OK\r\nX: {}\r\n", "a".repeat(2000));
        assert_eq!(parse_response(long.as_bytes(), 1024, false, false), Err(WireError::HeadTooLarge(1024)));
    }

    #[test]
    fn a_head_past_the_limit_is_too_large_however_it_arrives() {
        // Fuzz finding (fuzz/seeds/response/finding-head-limit-split): a bad byte past
        // the limit made the head malformed when the bytes came at once and
        // too large when they came in pieces.
        let head =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\rc3\r\n\r\n";
        for end in 65..=head.len() {
            assert_eq!(
                parse_response(&head[..end], 64, false, false),
                Err(WireError::HeadTooLarge(64)),
                "{end}"
            );
        }
        assert_eq!(parse_response(&head[..64], 64, false, false), Ok(None));
        crate::wire_properties::check_response(head);
    }

    #[test]
    fn chunked_bodies_with_extensions_and_trailers() {
        let body = b"5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nExpires: never\r\n\r\nNEXT";
        let mut whole = Chunked::default();
        let fed = whole.feed(body).unwrap();
        assert_eq!((whole, fed.data, &body[fed.consumed..]), (Chunked::Done, 11, &b"NEXT"[..]));
        // The same body one byte at a time, as a slow server would send it.
        let mut slow = Chunked::default();
        let (mut pending, mut data) = (Vec::new(), 0);
        for byte in body {
            pending.push(*byte);
            let fed = slow.feed(&pending).unwrap();
            data += fed.data;
            pending.drain(..fed.consumed);
        }
        assert_eq!((slow, data, pending.as_slice()), (Chunked::Done, 11, &b"NEXT"[..]));
        assert!(Chunked::default().feed(b"zz\r\n").is_err());
        assert!(Chunked::default().feed(b"2\r\nabX\r\n").is_err());
    }
}
