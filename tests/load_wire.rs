//! `blocklab load`'s own HTTP/1.1 wire against misbehaving servers of the
//! test's own, written byte by byte: every way a response can go wrong is
//! classified as its kind, every way a body can be delimited is read, and
//! no input makes the parser panic.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use blocklab::cli::{Cli, Command};
use blocklab::http1::{self, Chunked, Framing};
use blocklab::load::{self, ErrorKind, RunResult};
use clap::Parser;
use proptest::prelude::*;

/// What the server does after reading one request head.
#[derive(Clone)]
enum Then {
    /// Write these bytes and wait for the next request on the connection.
    Answer(Vec<u8>),
    /// Write these bytes and close.
    AnswerAndClose(Vec<u8>),
    /// Write these bytes, then keep writing filler until the client goes away.
    Endless(Vec<u8>),
    /// Write these bytes, then stay silent until the client goes away.
    Silent(Vec<u8>),
}

/// A TCP server answering each request head with a script; stopped on drop.
struct RawServer {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    /// The most whole request heads one read brought (more than 1: pipelined).
    most_per_read: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RawServer {
    fn start(script: impl Fn(u64) -> Then + Send + Sync + 'static) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (requests, most_per_read, stop) =
            (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let script = Arc::new(script);
        let (r, m, s) = (requests.clone(), most_per_read.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (script, r, m, s) = (script.clone(), r.clone(), m.clone(), s.clone());
                        std::thread::spawn(move || serve(stream, &*script, &r, &m, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        RawServer { addr, requests, most_per_read, stop, thread: Some(thread) }
    }

    fn url(&self) -> String {
        format!("http://{}/x", self.addr)
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(
    mut stream: TcpStream,
    script: &dyn Fn(u64) -> Then,
    requests: &AtomicU64,
    most: &AtomicU64,
    stop: &AtomicBool,
) {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = stream.set_nodelay(true);
    let mut pending = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        let mut heads = 0;
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            heads += 1;
            let then = script(requests.fetch_add(1, Relaxed));
            let done = match then {
                Then::Answer(bytes) => stream.write_all(&bytes).is_err(),
                Then::AnswerAndClose(bytes) => {
                    let _ = stream.write_all(&bytes);
                    true
                }
                Then::Endless(bytes) => {
                    let _ = stream.write_all(&bytes);
                    let filler = [b'x'; 4096];
                    let started = Instant::now();
                    while !stop.load(Relaxed) && started.elapsed() < Duration::from_secs(20) {
                        if stream.write_all(&filler).is_err() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    true
                }
                Then::Silent(bytes) => {
                    let _ = stream.write_all(&bytes);
                    // Until the client closes (read returns) or 10 s.
                    let _ = stream.read(&mut buf);
                    true
                }
            };
            if done {
                return;
            }
        }
        most.fetch_max(heads, Relaxed);
    }
}

fn run(args: &[&str]) -> RunResult {
    let argv = ["blocklab", "load", "-q"].iter().chain(args);
    let plan = match Cli::try_parse_from(argv).unwrap().command {
        Command::Load(l) => l.plan().unwrap(),
        _ => unreachable!(),
    };
    let result = load::run(&plan).unwrap();
    assert!(result.is_balanced(), "sent != completed + errors + in flight");
    result
}

fn errors(result: &RunResult, kind: ErrorKind) -> u64 {
    result.stats.errors[kind.index()]
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

#[test]
fn garbage_instead_of_a_status_line_is_a_protocol_error() {
    let server = RawServer::start(|_| Then::AnswerAndClose(b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec()));
    let r = run(&["-k", "-c", "2", "-n", "6", &server.url()]);
    assert_eq!((errors(&r, ErrorKind::Protocol), r.stats.completed), (6, 0));
}

#[test]
fn a_close_before_the_response_or_mid_body_is_closed_early() {
    let server = RawServer::start(|n| match n % 2 {
        0 => Then::AnswerAndClose(Vec::new()),
        _ => Then::AnswerAndClose(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this".to_vec()),
    });
    let r = run(&["-k", "-c", "1", "-n", "6", &server.url()]);
    assert_eq!((errors(&r, ErrorKind::ClosedEarly), r.stats.completed), (6, 0));
    // A head cut off mid-line is closed early too, not malformed.
    let server = RawServer::start(|_| Then::AnswerAndClose(b"HTTP/1.1 200 OK\r\nContent-Le".to_vec()));
    let r = run(&["-k", "-c", "1", "-n", "3", &server.url()]);
    assert_eq!(errors(&r, ErrorKind::ClosedEarly), 3);
}

#[test]
fn chunked_bodies_with_extensions_and_trailers_are_read_whole_on_one_connection() {
    let server = RawServer::start(|_| {
        Then::Answer(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: y\r\n\r\n"
                .to_vec(),
        )
    });
    let r = run(&["-k", "-c", "2", "-n", "50", &server.url()]);
    assert_eq!(r.stats.ok, 50);
    // None reopened (at most 2: one connection can take all 50 before the other starts).
    assert!(
        (1..=2).contains(&r.stats.connections_opened),
        "{} connections for 2",
        r.stats.connections_opened
    );
    assert_eq!(r.stats.body_bytes, 50 * 11, "chunk data only");
    let server = RawServer::start(|_| {
        Then::Answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec())
    });
    let r = run(&["-k", "-c", "1", "-n", "3", &server.url()]);
    assert_eq!(errors(&r, ErrorKind::Protocol), 3, "a bad chunk size is malformed");
}

#[test]
fn an_endless_body_and_a_response_that_never_comes_time_out() {
    let server = RawServer::start(|n| match n % 3 {
        0 => Then::Endless(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n".to_vec()),
        1 => Then::Endless(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100000000\r\n".to_vec()),
        _ => Then::Silent(Vec::new()),
    });
    let started = Instant::now();
    let r = run(&["-k", "-c", "3", "-n", "3", "--timeout", "500ms", &server.url()]);
    assert_eq!(errors(&r, ErrorKind::RequestTimeout), 3);
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}

#[test]
fn a_two_megabyte_head_is_a_protocol_error() {
    let mut head = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
    head.extend(std::iter::repeat_n(b'a', 2 << 20));
    head.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
    let server = RawServer::start(move |_| Then::AnswerAndClose(head.clone()));
    let r = run(&["-k", "-c", "1", "-n", "2", &server.url()]);
    assert_eq!(errors(&r, ErrorKind::Protocol), 2);
}

#[test]
fn interim_responses_are_skipped_and_statuses_without_bodies_keep_the_connection() {
    let server = RawServer::start(|n| {
        Then::Answer(match n % 4 {
            0 => b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
            1 => b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n".to_vec(),
            2 => b"HTTP/1.1 304 Not Modified\r\n\r\n".to_vec(),
            _ => b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy".to_vec(),
        })
    });
    let r = run(&["-k", "-c", "1", "-n", "40", &server.url()]);
    let status = |code: usize| r.stats.statuses[code];
    assert_eq!((status(200), status(204), status(304), status(503)), (10, 10, 10, 10));
    assert_eq!(
        (status(100), r.stats.connections_opened),
        (0, 1),
        "1xx are not final; one connection throughout"
    );
    assert_eq!(r.stats.body_bytes, 10 * 5 + 10 * 4);
}

#[test]
fn head_requests_read_no_body_whatever_the_length_says() {
    let server = RawServer::start(|_| Then::Answer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_vec()));
    let r = run(&["-k", "-m", "HEAD", "-c", "1", "-n", "20", &server.url()]);
    assert_eq!((r.stats.ok, r.stats.connections_opened, r.stats.body_bytes), (20, 1, 0));
}

#[test]
fn connection_close_http10_and_close_delimited_bodies_end_the_connection() {
    let server = RawServer::start(|n| match n % 3 {
        0 => Then::Answer(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello".to_vec()),
        1 => Then::Answer(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec()),
        _ => Then::AnswerAndClose(b"HTTP/1.1 200 OK\r\n\r\nhello, until the close".to_vec()),
    });
    let r = run(&["-k", "-c", "1", "-n", "30", &server.url()]);
    assert_eq!((r.stats.ok, r.stats.connections_opened), (30, 30), "a new connection after each");
    assert_eq!(r.stats.body_bytes, 20 * 5 + 10 * 22);
    // HTTP/1.0 with keep-alive confirmed stays open.
    let server = RawServer::start(|_| {
        Then::Answer(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok".to_vec())
    });
    let r = run(&["-k", "-c", "1", "-n", "10", &server.url()]);
    assert_eq!((r.stats.ok, r.stats.connections_opened), (10, 1));
}

#[test]
fn pipelining_writes_the_batch_at_once_and_counts_every_response() {
    let server = RawServer::start(|_| Then::Answer(OK.to_vec()));
    let r = run(&["-k", "-c", "2", "-n", "80", "--pipeline", "8", &server.url()]);
    assert_eq!((r.stats.ok, server.requests.load(Relaxed)), (80, 80));
    assert!(
        (1..=2).contains(&r.stats.connections_opened),
        "{} connections for 2",
        r.stats.connections_opened
    );
    assert!(server.most_per_read.load(Relaxed) > 1, "the server never saw two requests in one read");
    assert_eq!(r.stats.latency.len(), 80, "a latency per request");
    // Without --pipeline, one request at a time.
    let server = RawServer::start(|_| Then::Answer(OK.to_vec()));
    run(&["-k", "-c", "1", "-n", "20", &server.url()]);
    assert_eq!(server.most_per_read.load(Relaxed), 1);
    // A server that closes mid-batch: the unanswered requests of the batch fail, each counted once.
    let server = RawServer::start(|n| {
        if n % 4 == 3 { Then::AnswerAndClose(Vec::new()) } else { Then::Answer(OK.to_vec()) }
    });
    let r = run(&["-k", "-c", "1", "-n", "40", "--pipeline", "4", &server.url()]);
    assert_eq!(r.stats.ok + errors(&r, ErrorKind::ClosedEarly), 40);
    assert!(r.stats.ok >= 30, "{} ok", r.stats.ok);
}

/// A valid response: head, and a body delimited by Content-Length or chunked.
fn valid_response() -> impl Strategy<Value = (Vec<u8>, usize, u64)> {
    (any::<bool>(), proptest::collection::vec(1usize..40, 0..5), "[a-z]{0,12}").prop_map(
        |(chunked, chunks, extra)| {
            let body: u64 = chunks.iter().sum::<usize>() as u64;
            let mut wire = format!("HTTP/1.1 200 OK\r\nX-Extra: {extra}\r\n").into_bytes();
            if chunked {
                wire.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            } else {
                wire.extend_from_slice(format!("Content-Length: {body}\r\n\r\n").as_bytes());
            }
            let head_len = wire.len();
            for size in &chunks {
                if chunked {
                    wire.extend_from_slice(format!("{size:x}\r\n").as_bytes());
                }
                wire.extend(std::iter::repeat_n(b'b', *size));
                if chunked {
                    wire.extend_from_slice(b"\r\n");
                }
            }
            if chunked {
                wire.extend_from_slice(b"0\r\n\r\n");
            }
            (wire, head_len, body)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic the head parser or the chunked decoder.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = http1::parse_response(&bytes, 512, false, true);
        let mut prefixed = b"HTTP/1.1 200 OK\r\n".to_vec();
        prefixed.extend_from_slice(&bytes);
        let _ = http1::parse_response(&prefixed, 512, false, true);
        let _ = Chunked::default().feed(&bytes);
    }

    /// Any split of a valid response: the head is complete exactly when all
    /// its bytes are there, and the body decodes to the same length.
    #[test]
    fn split_responses_parse_the_same((wire, head_len, body) in valid_response(), cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6)) {
        for k in 0..wire.len() {
            let parsed = http1::parse_response(&wire[..k], 64 * 1024, false, false).unwrap();
            prop_assert_eq!(parsed.is_some(), k >= head_len);
        }
        let head = http1::parse_response(&wire, 64 * 1024, false, false).unwrap().unwrap();
        prop_assert_eq!(head.len, head_len);
        let mut points: Vec<usize> = cuts.iter().map(|i| head_len + i.index(wire.len() - head_len + 1)).collect();
        points.push(wire.len());
        points.sort_unstable();
        match head.framing {
            Framing::Length(n) => prop_assert_eq!(n, body),
            Framing::Chunked => {
                let (mut chunked, mut pending, mut data, mut from) = (Chunked::default(), Vec::new(), 0, head_len);
                for to in points {
                    pending.extend_from_slice(&wire[from..to]);
                    from = to;
                    let fed = chunked.feed(&pending).unwrap();
                    data += fed.data;
                    pending.drain(..fed.consumed);
                }
                prop_assert_eq!((chunked, data, pending.len()), (Chunked::Done, body, 0));
            }
            other => prop_assert!(false, "framing {:?}", other),
        }
    }
}

/// A real connection reads valid responses however the server splits them
/// into writes (with pauses between, so they arrive as separate reads).
#[test]
fn the_client_reads_responses_split_anywhere() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config { cases: 12, ..Config::default() });
    runner
        .run(&(valid_response(), proptest::collection::vec(1usize..64, 1..6)), |((wire, _, body), pieces)| {
            // A server of its own: the scripted one writes each answer at once.
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let writer = std::thread::spawn(move || {
                let (mut stream, _) = listener.accept().unwrap();
                stream.set_nodelay(true).unwrap();
                let mut head = [0u8; 1024];
                let _ = stream.read(&mut head);
                let mut at = 0;
                for piece in pieces.iter().cycle() {
                    if at >= wire.len() {
                        break;
                    }
                    let to = (at + piece).min(wire.len());
                    stream.write_all(&wire[at..to]).unwrap();
                    at = to;
                    std::thread::sleep(Duration::from_millis(1));
                }
                let _ = stream.read(&mut head);
            });
            let r = run(&["-k", "-c", "1", "-n", "1", "--timeout", "5s", &format!("http://{addr}/")]);
            writer.join().unwrap();
            prop_assert_eq!((r.stats.ok, r.stats.body_bytes), (1, body));
            Ok(())
        })
        .unwrap();
}
