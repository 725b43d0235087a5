//! The properties blocklab's two HTTP/1.1 parsers keep whatever bytes
//! arrive and however the reads split them: the response parser `blocklab
//! load` reads with ([`crate::http1`]) and the request parser of the `lean`
//! server model ([`crate::server::lean::read_head`]). The fuzz targets in
//! `fuzz/` run [`check_response`] and [`check_request`] on every input they
//! make up; `tests/fuzz_corpus.rs` runs them on every file kept in the
//! repository (`fuzz/seeds/`, `fuzz/corpus/`), so `cargo test` replays what
//! the fuzzer found without the fuzzer. A broken property panics, naming the property and the input:
//! that is how a fuzz target reports a finding.
//!
//! Each check reads its input the way the real reader reads a connection
//! (the bytes appended to one buffer as reads arrive, the parser run on what
//! is not consumed yet, a response's body skipped as its framing says,
//! pipelined messages one after the other, nothing more after one that
//! closes the connection), once whole and again split into other reads, and
//! asks that:
//!
//! * the same messages come out, however the bytes were split (one byte at a
//!   time tries every boundary);
//! * a head's length lies within the input, and the head reads the same
//!   without the bytes after it;
//! * a body is consumed exactly: a `Content-Length` body to its last byte, a
//!   chunked one to the end of its trailers, and the next message is read
//!   from the byte after it;
//! * a chunked reader that stops for more input has nothing complete left;
//! * what is buffered while waiting for more stays under the reader's limit;
//! * RFC 9112's rules on framing, keep-alive and request bodies hold, checked
//!   against the header fields read again here on their own.

use std::fmt::Debug;

use crate::http1::{self, Chunked, Framing, ResponseHead, WireError};
use crate::load::client::MAX_HEAD as MAX_RESPONSE_HEAD;
use crate::server::lean::{
    self, HeadReading, MAX_HEAD as MAX_REQUEST_HEAD, MAX_HEADERS as MAX_REQUEST_HEADERS,
};

/// Inputs up to this long are also read one byte at a time.
const EVERY_BOUNDARY_UP_TO: usize = 1024;
/// The most a chunked body's reader keeps while it waits for the rest of a
/// chunk-size line or of the trailers ([`Chunked::feed`]).
const MAX_CHUNKED_PENDING: usize = 64 * 1024;
/// Lean's data endpoints draw an id at random when none is asked for; with
/// one node that draw always gives 1, so two readings can be compared.
const NODES: u64 = 1;

/// Checks what `blocklab load` makes of `input` as the bytes a server sent
/// on one connection, under each way of reading it (a GET with the real head
/// limit and the `Server` field asked for, a HEAD, a GET under a 64-byte
/// head limit so that the limit's edge is fuzzed too). Panics on a broken
/// property.
pub fn check_response(input: &[u8]) {
    for (to_head, max_head, want_server) in
        [(false, MAX_RESPONSE_HEAD, true), (true, MAX_RESPONSE_HEAD, false), (false, 64, false)]
    {
        let read =
            |sizes: &[usize]| read_in(ResponseReader::new(to_head, max_head, want_server), input, sizes);
        let whole = read(&[input.len()]);
        for sizes in splits(input) {
            let split = read(&sizes);
            if split != whole {
                broken(
                    input,
                    &format!(
                        "{} (HEAD: {to_head}, head limit {max_head}) gave {split:?}, whole {whole:?}",
                        reads(&sizes)
                    ),
                );
            }
        }
    }
}

/// Checks what the `lean` server makes of `input` as the bytes a client sent
/// on one connection. Panics on a broken property.
pub fn check_request(input: &[u8]) {
    let read = |sizes: &[usize]| read_in(RequestReader::default(), input, sizes);
    let whole = read(&[input.len()]);
    for sizes in splits(input) {
        let split = read(&sizes);
        if split != whole {
            broken(input, &format!("{} gave {split:?}, whole {whole:?}", reads(&sizes)));
        }
    }
}

/// Panics with the property broken and the input, escaped.
fn broken(input: &[u8], what: &str) -> ! {
    let shown: String = input.escape_ascii().to_string().chars().take(600).collect();
    panic!("{what}\ninput ({} bytes): b\"{shown}\"", input.len());
}

/// Reads of `sizes`, in a few words.
fn reads(sizes: &[usize]) -> String {
    if sizes.iter().all(|size| *size == 1) {
        return "reads of one byte each".into();
    }
    let shown: Vec<String> = sizes.iter().take(20).map(usize::to_string).collect();
    format!("reads of {}{} bytes", shown.join(", "), if sizes.len() > 20 { ", ..." } else { "" })
}

/// The ways a check splits an input into reads besides reading it whole:
/// one byte at a time while the input is short enough to afford it, and
/// reads of pseudo-random sizes drawn from the input itself, so that a
/// finding replays the same.
fn splits(input: &[u8]) -> Vec<Vec<usize>> {
    let mut all = Vec::new();
    if input.len() <= EVERY_BOUNDARY_UP_TO {
        all.push(vec![1; input.len()]);
    }
    // FNV-1a of the input seeds an xorshift generator.
    let mut state =
        input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
    for most in [7, 300] {
        let (mut sizes, mut left) = (Vec::new(), input.len());
        while left > 0 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let size = (1 + state % most).min(left as u64) as usize;
            sizes.push(size);
            left -= size;
        }
        all.push(sizes);
    }
    all
}

/// A reader of one connection's bytes as they arrive.
trait ConnectionReader {
    /// What it reads: messages, and how the input ended.
    type Read: PartialEq + Debug;
    /// Takes one read's bytes and reads what messages it can.
    fn read(&mut self, input: &[u8], bytes: &[u8]);
    /// The peer closed the connection: everything read.
    fn close(self, input: &[u8]) -> Vec<Self::Read>;
}

/// Reads `input` in reads of `sizes`.
fn read_in<R: ConnectionReader>(mut reader: R, input: &[u8], sizes: &[usize]) -> Vec<R::Read> {
    let mut at = 0;
    for size in sizes {
        reader.read(input, &input[at..at + size]);
        at += size;
    }
    reader.close(input)
}

/// What `blocklab load` reads from a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ResponseRead {
    /// A whole response.
    Response {
        /// Its status.
        status: u16,
        /// Bytes of its head, interim heads included.
        head_bytes: u64,
        /// Bytes of its body (chunk data only, for a chunked one).
        body_bytes: u64,
        /// How its body was delimited.
        framing: Framing,
        /// Whether the connection ended with it.
        close: bool,
    },
    /// Not HTTP: the reader gave the connection up (a protocol error).
    Refused(WireError),
    /// The input ended inside a response (closed early).
    ClosedEarly,
}

/// Where a response reader is.
enum ResponseAt {
    /// Reading a head, after interim heads of this many bytes.
    Head(u64),
    /// Reading the body of this head.
    Body(ResponseHead, u64, Body),
}

/// A body being read.
enum Body {
    /// Bytes still to come.
    Length(u64),
    /// The chunked decoder, and the data bytes so far.
    Chunked(Chunked, u64),
    /// The bytes so far; the body ends with the connection.
    UntilClose(u64),
}

/// `load::client::Connection::read_response` over a byte buffer instead of
/// a socket, one response after another.
struct ResponseReader {
    to_head: bool,
    max_head: usize,
    want_server: bool,
    buf: Vec<u8>,
    /// Bytes before this one are consumed.
    start: usize,
    at: ResponseAt,
    reads: Vec<ResponseRead>,
    /// Nothing more is read: a response closed the connection or was refused.
    stopped: bool,
}

impl ResponseReader {
    fn new(to_head: bool, max_head: usize, want_server: bool) -> ResponseReader {
        ResponseReader {
            to_head,
            max_head,
            want_server,
            buf: Vec::new(),
            start: 0,
            at: ResponseAt::Head(0),
            reads: Vec::new(),
            stopped: false,
        }
    }

    /// A whole response was read.
    fn done(&mut self, head: &ResponseHead, head_bytes: u64, body_bytes: u64) {
        let ResponseHead { status, framing, close, .. } = *head;
        self.reads.push(ResponseRead::Response { status, head_bytes, body_bytes, framing, close });
        self.stopped = close;
        self.at = ResponseAt::Head(0);
    }

    /// Checks a head parsed from `rest`, the bytes not consumed before it.
    fn check_head(&self, input: &[u8], rest: &[u8], head: &ResponseHead) {
        if head.len == 0 || head.len > rest.len() || head.len > self.max_head {
            broken(input, &format!("a head of {} bytes read from {} bytes", head.len, rest.len()));
        }
        let alone = http1::parse_response(&rest[..head.len], self.max_head, self.to_head, self.want_server);
        if alone != Ok(Some(head.clone())) {
            broken(input, &format!("the head reads {alone:?} alone, {head:?} with the bytes after it"));
        }
        if let Err(rule) = response_rules(&rest[..head.len], head, self.to_head) {
            broken(input, &format!("{rule}: {head:?}"));
        }
    }
}

impl ConnectionReader for ResponseReader {
    type Read = ResponseRead;

    fn read(&mut self, input: &[u8], bytes: &[u8]) {
        if self.stopped {
            return;
        }
        self.buf.extend_from_slice(bytes);
        while !self.stopped {
            let rest = &self.buf[self.start..];
            match std::mem::replace(&mut self.at, ResponseAt::Head(0)) {
                ResponseAt::Head(before) => {
                    match http1::parse_response(rest, self.max_head, self.to_head, self.want_server) {
                        Ok(None) => {
                            if rest.len() > self.max_head {
                                broken(
                                    input,
                                    &format!("{} bytes of a head kept, over the limit", rest.len()),
                                );
                            }
                            self.at = ResponseAt::Head(before);
                            return;
                        }
                        Err(e) => {
                            self.reads.push(ResponseRead::Refused(e));
                            self.stopped = true;
                        }
                        Ok(Some(head)) => {
                            self.check_head(input, rest, &head);
                            self.start += head.len;
                            let head_bytes = before + head.len as u64;
                            if head.is_interim() {
                                self.at = ResponseAt::Head(head_bytes);
                                continue;
                            }
                            let body = match head.framing {
                                Framing::None => {
                                    self.done(&head, head_bytes, 0);
                                    continue;
                                }
                                Framing::Length(n) => Body::Length(n),
                                Framing::Chunked => Body::Chunked(Chunked::default(), 0),
                                Framing::UntilClose => Body::UntilClose(0),
                            };
                            self.at = ResponseAt::Body(head, head_bytes, body);
                        }
                    }
                }
                ResponseAt::Body(head, head_bytes, Body::Length(left)) => {
                    let take = left.min(rest.len() as u64);
                    self.start += take as usize;
                    if take == left {
                        let Framing::Length(n) = head.framing else { unreachable!("a Length body") };
                        self.done(&head, head_bytes, n);
                    } else {
                        self.at = ResponseAt::Body(head, head_bytes, Body::Length(left - take));
                        return;
                    }
                }
                ResponseAt::Body(head, head_bytes, Body::Chunked(mut chunked, data)) => {
                    let fed = match chunked.feed(rest) {
                        Ok(fed) => fed,
                        Err(e) => {
                            self.reads.push(ResponseRead::Refused(e));
                            self.stopped = true;
                            continue;
                        }
                    };
                    if fed.consumed > rest.len() || fed.data > fed.consumed as u64 {
                        broken(input, &format!("{fed:?} from {} bytes", rest.len()));
                    }
                    self.start += fed.consumed;
                    if chunked == Chunked::Done {
                        self.done(&head, head_bytes, data + fed.data);
                        continue;
                    }
                    // It stopped for more input: what is left must be an
                    // incomplete piece, under the limit.
                    let left = &self.buf[self.start..];
                    let mut again = chunked;
                    let fed_again = again.feed(left);
                    if fed_again.as_ref().map(|f| f.consumed) != Ok(0) || again != chunked {
                        broken(
                            input,
                            &format!(
                                "the chunked reader stopped at {chunked:?} with {fed_again:?} still to read"
                            ),
                        );
                    }
                    if left.len() > MAX_CHUNKED_PENDING {
                        broken(
                            input,
                            &format!("{} bytes of a chunked body kept, over the limit", left.len()),
                        );
                    }
                    self.at = ResponseAt::Body(head, head_bytes, Body::Chunked(chunked, data + fed.data));
                    return;
                }
                ResponseAt::Body(head, head_bytes, Body::UntilClose(data)) => {
                    let data = data + rest.len() as u64;
                    self.start = self.buf.len();
                    self.at = ResponseAt::Body(head, head_bytes, Body::UntilClose(data));
                    return;
                }
            }
        }
    }

    fn close(mut self, _input: &[u8]) -> Vec<ResponseRead> {
        if !self.stopped {
            match std::mem::replace(&mut self.at, ResponseAt::Head(0)) {
                ResponseAt::Head(0) if self.start == self.buf.len() => {}
                ResponseAt::Body(head, head_bytes, Body::UntilClose(data)) => {
                    self.done(&head, head_bytes, data)
                }
                _ => self.reads.push(ResponseRead::ClosedEarly),
            }
        }
        self.reads
    }
}

/// What the `lean` server reads from a connection.
#[derive(Debug, PartialEq)]
enum RequestRead {
    /// A request head read (and answered), or a malformed one (answered
    /// with its error, then the connection closed).
    Head(HeadReading),
    /// The client closed with part of a head sent.
    Incomplete,
}

/// Lean's connection loop (`next_request`) over a byte buffer instead of a
/// socket: bytes wait in `pending` until a whole head is there.
#[derive(Default)]
struct RequestReader {
    pending: Vec<u8>,
    reads: Vec<RequestRead>,
    /// The connection closes after the last answer.
    stopped: bool,
}

impl ConnectionReader for RequestReader {
    type Read = RequestRead;

    fn read(&mut self, input: &[u8], bytes: &[u8]) {
        if self.stopped {
            return;
        }
        self.pending.extend_from_slice(bytes);
        while !self.pending.is_empty() {
            let reading = lean::read_head(&self.pending, NODES);
            if reading.is_partial() {
                if self.pending.len() > MAX_REQUEST_HEAD {
                    broken(input, &format!("{} bytes of a head kept, over the limit", self.pending.len()));
                }
                return;
            }
            if let Some(len) = reading.head_len() {
                if len == 0 || len > self.pending.len() || len > MAX_REQUEST_HEAD {
                    broken(input, &format!("a head of {len} bytes read from {} bytes", self.pending.len()));
                }
                let head = &self.pending[..len];
                let alone = lean::read_head(head, NODES);
                if alone != reading {
                    broken(
                        input,
                        &format!("the head reads {alone:?} alone, {reading:?} with the bytes after it"),
                    );
                }
                if let Err(rule) = request_rules(head, &reading) {
                    broken(input, &format!("{rule}: {reading:?}"));
                }
                self.pending.drain(..len);
            }
            self.stopped = !reading.keeps_alive();
            self.reads.push(RequestRead::Head(reading));
            if self.stopped {
                return;
            }
        }
    }

    fn close(mut self, _input: &[u8]) -> Vec<RequestRead> {
        if !self.stopped && !self.pending.is_empty() {
            self.reads.push(RequestRead::Incomplete);
        }
        self.reads
    }
}

/// The header fields that frame a message and keep its connection, read
/// here on their own (tokenized by `httparse`, interpreted as RFC 9110 and
/// 9112 say).
#[derive(Debug, Default)]
struct Fields {
    http10: bool,
    /// A `close` token in a `Connection` field.
    close: bool,
    /// A `keep-alive` token in a `Connection` field.
    keep_alive: bool,
    /// Every `Content-Length` value (`None`: not a number).
    lengths: Vec<Option<u64>>,
    /// The codings of every `Transfer-Encoding` field, in order.
    codings: Option<Vec<String>>,
}

impl Fields {
    fn of(version: Option<u8>, headers: &[httparse::Header<'_>]) -> Fields {
        let mut fields = Fields { http10: version == Some(0), ..Fields::default() };
        for header in headers {
            let name = header.name.to_ascii_lowercase();
            // A list field: elements separated by commas, optional white
            // space around them, empty elements ignored (RFC 9110 §5.6.1).
            let elements = || {
                header
                    .value
                    .split(|b| *b == b',')
                    .map(|e| e.trim_ascii_start().trim_ascii_end())
                    .filter(|e| !e.is_empty())
                    .map(|e| String::from_utf8_lossy(e).to_ascii_lowercase())
            };
            match name.as_str() {
                "connection" => {
                    for token in elements() {
                        fields.close |= token == "close";
                        fields.keep_alive |= token == "keep-alive";
                    }
                }
                "content-length" => {
                    let value = std::str::from_utf8(header.value).ok().map(|v| v.trim_matches([' ', '\t']));
                    let digits = value.filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
                    fields.lengths.push(digits.and_then(|v| v.parse().ok()));
                }
                "transfer-encoding" => fields.codings.get_or_insert_with(Vec::new).extend(elements()),
                _ => {}
            }
        }
        fields
    }
}

/// RFC 9112's rules for a response head `head` read from `bytes`: `Err`
/// names the rule broken.
fn response_rules(bytes: &[u8], head: &ResponseHead, to_head: bool) -> Result<(), String> {
    let mut headers = [httparse::EMPTY_HEADER; http1::MAX_RESPONSE_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    if !matches!(response.parse(bytes), Ok(httparse::Status::Complete(len)) if len == bytes.len()) {
        return Err("the head is not a whole head on its own".into());
    }
    if response.code != Some(head.status) {
        return Err(format!("status {:?} on the wire", response.code));
    }
    let fields = Fields::of(response.version, response.headers);
    if fields.lengths.iter().any(|n| n.is_none() || *n != fields.lengths[0]) {
        return Err("a head read with a bad or conflicting Content-Length".into());
    }
    let status = head.status;
    let framing = if to_head || (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::None
    } else if let Some(codings) = &fields.codings {
        // Transfer-Encoding overrides Content-Length; only a final chunked
        // delimits the body (§6.3 rules 3 and 4).
        if codings.last().is_some_and(|c| c == "chunked") { Framing::Chunked } else { Framing::UntilClose }
    } else if let Some(Some(n)) = fields.lengths.first() {
        Framing::Length(*n)
    } else {
        Framing::UntilClose
    };
    if head.framing != framing {
        return Err(format!("framing {framing:?} by RFC 9112 §6.3"));
    }
    let close = fields.close
        || (fields.http10 && !fields.keep_alive)
        || status == 101
        || framing == Framing::UntilClose;
    if head.close != close {
        return Err(format!("close {close} by RFC 9112 §9.3 and §6.3"));
    }
    Ok(())
}

/// RFC 9112's rules for what lean read from the request head `bytes`: `Err`
/// names the rule broken.
fn request_rules(bytes: &[u8], reading: &HeadReading) -> Result<(), String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_REQUEST_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    if !matches!(request.parse(bytes), Ok(httparse::Status::Complete(len)) if len == bytes.len()) {
        return Err("the head is not a whole head on its own".into());
    }
    let fields = Fields::of(request.version, request.headers);
    // A request that announces a body is never read as one more request:
    // its body would be read as the next head (request smuggling).
    let body = fields.codings.is_some() || fields.lengths.iter().any(|n| *n != Some(0));
    if body {
        return Err("a request with a body read as a request".into());
    }
    let keep_alive = !fields.close && (!fields.http10 || fields.keep_alive);
    if reading.keeps_alive() != keep_alive {
        return Err(format!("keep-alive {keep_alive} by RFC 9112 §9.3"));
    }
    if reading.head_only() != (request.method == Some("HEAD")) {
        return Err("the body left out unless the method is HEAD".into());
    }
    Ok(())
}
