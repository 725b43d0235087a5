//! Admission control (`serve --admission auto`) over real sockets: a server
//! in a small memory cgroup refuses connections past its budget at once
//! (503 with Retry-After), is never killed, and answers `/test` once the
//! crowd is gone; past its descriptor limit it refuses at once instead of
//! leaving clients in the accept queue. A client that opens its
//! connections first and sends their requests later (as the sweep's does)
//! is admitted at what a connection costs with its request in flight, not
//! at what it costs idle. The memory tests need root and the cgroup v1
//! memory controller (as the sweep does); loopback only.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use blocklab::harness::cgroup::{self, MemoryCgroup};
use common::{Listening, metric, raw_exchange};

/// A request that waits 15 s: an admitted connection holds it open (and
/// lean holds its memory until then, even after the client has gone).
const WAIT: &[u8] = b"GET /delay?ms=15000 HTTP/1.1\r\nHost: x\r\n\r\n";

/// Connections opened against a server: those still waiting (admitted) and
/// how many were answered 503 or closed unanswered.
#[derive(Default)]
struct Crowd {
    waiting: Vec<TcpStream>,
    refused: usize,
    closed: usize,
}

impl Crowd {
    /// Opens up to `most` connections, each sending [`WAIT`], in batches,
    /// until `enough` have been refused.
    fn gather(addr: SocketAddr, most: usize, enough: usize) -> Crowd {
        let mut crowd = Crowd::default();
        let mut opened = 0;
        while opened < most && crowd.refused < enough {
            for _ in 0..500.min(most - opened) {
                let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
                stream.write_all(WAIT).unwrap();
                stream.set_nonblocking(true).unwrap();
                crowd.waiting.push(stream);
                opened += 1;
            }
            std::thread::sleep(Duration::from_millis(50));
            crowd.sort();
        }
        // A refusal arrives at once; give a loaded machine a second anyway.
        std::thread::sleep(Duration::from_secs(1));
        crowd.sort();
        crowd
    }

    /// Takes the connections that were answered or closed out of `waiting`.
    fn sort(&mut self) {
        let mut buf = [0u8; 512];
        let mut waiting = Vec::with_capacity(self.waiting.len());
        for mut stream in self.waiting.drain(..) {
            match stream.read(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => waiting.push(stream),
                Ok(n) if n > 0 => {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    assert!(
                        text.starts_with("HTTP/1.1 503 ") && text.contains("retry-after: 1\r\n"),
                        "a waiting request got {text:?}"
                    );
                    self.refused += 1;
                }
                _ => self.closed += 1,
            }
        }
        self.waiting = waiting;
    }
}

/// `/metrics` once the server admits again, and how many 503s asking for it took.
fn metrics_when_admitted(addr: SocketAddr) -> (String, usize) {
    when_admitted(addr, "/metrics")
}

/// `GET path`'s answer once the server admits it, and the 503s before it:
/// until the crowd's parked requests are over, their memory is still held.
fn when_admitted(addr: SocketAddr, path: &str) -> (String, usize) {
    let started = Instant::now();
    let mut refused = 0;
    let request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n");
    loop {
        let got = raw_exchange(addr, request.as_bytes(), Duration::from_secs(10));
        if got.starts_with("HTTP/1.1 200") {
            return (got, refused);
        }
        assert!(got.starts_with("HTTP/1.1 503"), "{path} got {got:?}");
        refused += 1;
        // Lean notices a parked client gone only when its wait is over.
        assert!(started.elapsed() < Duration::from_secs(40), "still refusing 40 s after the crowd left");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn lean_in_a_small_cgroup_refuses_past_its_budget_and_lives() {
    const CAP: u64 = 12 << 20;
    let cgroup = memory_cgroup("lean", CAP);
    let mut command = common::blocklab();
    command.args(["serve", "--listen", "127.0.0.1:0", "--nodes", "100", "--model", "lean", "--workers", "1"]);
    let server = Listening::start(cgroup.wrap(&command));
    let crowd = Crowd::gather(server.addr, 15_000, 200);
    assert!(
        crowd.refused >= 200,
        "{} refused of {} opened",
        crowd.refused,
        crowd.waiting.len() + crowd.refused
    );
    assert!(crowd.waiting.len() >= 500, "only {} admitted before refusing", crowd.waiting.len());
    assert_eq!(crowd.closed, 0, "connections closed without an answer");
    assert_eq!(cgroup.oom_kills(), 0, "the server was OOM-killed");
    let admitted = crowd.waiting.len();
    drop(crowd.waiting);
    let (text, more) = metrics_when_admitted(server.addr);
    assert_eq!(metric(&text, "blocklab_admission_memory_limit_bytes"), CAP as f64);
    let refused = metric(&text, "blocklab_connections_refused_total{reason=\"memory\"}") as usize;
    assert_eq!(refused, crowd.refused + more, "refusals counted by the server and seen by the client");
    assert!(metric(&text, "blocklab_connections_accepted_total") as usize >= admitted);
    // Alive: /test is answered, at once or after a quick 503 or two while
    // the crowd's parked requests still hold their memory.
    let (got, _) = when_admitted(server.addr, "/test");
    assert!(got.ends_with("works"), "/test after the crowd: {got:?}");
    assert_eq!(cgroup.oom_kills(), 0);
}

/// What a level of `n` connections got when every one was opened first and
/// then every request sent at once, each waiting `ms`: answered 200,
/// refused (503 with Retry-After, at accept or unread), or anything else.
#[derive(Debug, Default)]
struct Level {
    ok: usize,
    refused: usize,
    other: Vec<String>,
}

fn connect_all_then_send(addr: SocketAddr, n: usize, ms: u64) -> Level {
    let mut streams: Vec<TcpStream> =
        (0..n).map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect")).collect();
    std::thread::sleep(Duration::from_millis(500));
    let request = format!("GET /delay?ms={ms} HTTP/1.1\r\nHost: x\r\n\r\n");
    for stream in &mut streams {
        // A refused connection may already be closed: its 503 is read below.
        let _ = stream.write_all(request.as_bytes());
    }
    let mut level = Level::default();
    let mut buf = [0u8; 512];
    for mut stream in streams {
        stream.set_read_timeout(Some(Duration::from_millis(ms) + Duration::from_secs(20))).unwrap();
        match stream.read(&mut buf) {
            Ok(got) if buf[..got].starts_with(b"HTTP/1.1 200 ") => level.ok += 1,
            Ok(got) if buf[..got].starts_with(b"HTTP/1.1 503 ") => {
                assert!(String::from_utf8_lossy(&buf[..got]).contains("retry-after: 1\r\n"));
                level.refused += 1
            }
            Ok(got) => level.other.push(String::from_utf8_lossy(&buf[..got]).into_owned()),
            Err(e) => level.other.push(e.to_string()),
        }
    }
    level
}

/// A memory cgroup of this test's own, named for `what`, capped at `cap`.
fn memory_cgroup(what: &str, cap: u64) -> MemoryCgroup {
    if let Err(why) = cgroup::available() {
        panic!("this test needs a memory cgroup of its own (run as root): {why}");
    }
    MemoryCgroup::create(&format!("blocklab-test-admission-{what}-{}", std::process::id()), Some(cap))
        .expect("a memory cgroup")
}

/// `serve --model reactive` with one HTTP thread in `cgroup`.
fn reactive_in(cgroup: &MemoryCgroup) -> Listening {
    let mut command = common::blocklab();
    command.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--nodes",
        "100",
        "--model",
        "reactive",
        "--workers",
        "1",
    ]);
    Listening::start(cgroup.wrap(&command))
}

#[test]
fn reactive_admits_idle_connections_at_what_they_cost_busy_and_lives() {
    const CAP: u64 = 24 << 20;
    let cgroup = memory_cgroup("busy", CAP);
    let server = reactive_in(&cgroup);
    // A level that fits teaches the budget what a busy connection costs.
    let first = connect_all_then_send(server.addr, 600, 1500);
    assert_eq!((first.ok, first.refused), (600, 0), "a level that fits: {first:?}");
    // Then more than fit: open idle, a connection costs about two thirds
    // of what it costs once its request is in, so admitting on the idle
    // figure took the server past its cap when the requests came.
    let second = connect_all_then_send(server.addr, 3000, 1500);
    assert_eq!(cgroup.oom_kills(), 0, "the server was OOM-killed: {second:?}");
    assert!(
        second.other.is_empty(),
        "neither answered nor refused: {:?}",
        &second.other[..second.other.len().min(5)]
    );
    assert!(second.refused > 0 && second.ok >= 300, "{second:?}");
    let (text, _) = metrics_when_admitted(server.addr);
    let busy = metric(&text, "blocklab_admission_busy_connection_cost_bytes");
    let idle = metric(&text, "blocklab_admission_connection_cost_bytes");
    assert!(busy > 0.0 && idle > 0.0, "costs learned: idle {idle}, busy {busy}");
    let (got, _) = when_admitted(server.addr, "/test");
    assert!(got.starts_with("HTTP/1.1 200"), "/test after the crowd: {got:?}");
    assert_eq!(cgroup.oom_kills(), 0);
}

#[test]
fn reactive_refuses_requests_past_its_line_when_admitted_connections_grow_more_than_projected() {
    const CAP: u64 = 24 << 20;
    let cgroup = memory_cgroup("line", CAP);
    let server = reactive_in(&cgroup);
    // A fresh process has learned no request's cost: it admits the idle
    // connections of its first burst at what they cost idle, and their
    // requests then take more than the budget's reserve holds.
    // Without the line the server was OOM-killed here (measured).
    let level = connect_all_then_send(server.addr, 3000, 1500);
    let counts = format!("{} answered, {} refused, {} other", level.ok, level.refused, level.other.len());
    assert_eq!(cgroup.oom_kills(), 0, "the server was OOM-killed: {counts}");
    assert!(
        level.other.is_empty(),
        "neither answered nor refused: {:?}",
        &level.other[..level.other.len().min(5)]
    );
    let (text, _) = metrics_when_admitted(server.addr);
    let at_request = metric(&text, "blocklab_connections_refused_total{reason=\"memory_at_request\"}");
    let at_accept = metric(&text, "blocklab_connections_refused_total{reason=\"memory\"}");
    assert!(at_request > 0.0, "no request met the line: {counts}, {at_accept} refused at accept");
    // The line refuses the excess, not every request: 434–717 of 3000 were
    // answered on a quiet machine, 233 under the whole test command's load.
    assert!(level.ok >= 100, "{counts}");
    let (got, _) = when_admitted(server.addr, "/test");
    assert!(got.starts_with("HTTP/1.1 200"), "/test after the crowd: {got:?}");
    assert_eq!(cgroup.oom_kills(), 0);
}

#[test]
fn reactive_returns_a_levels_memory_once_the_level_is_over() {
    const CAP: u64 = 64 << 20;
    let cgroup = memory_cgroup("purge", CAP);
    let server = reactive_in(&cgroup);
    let live = || cgroup::usage_less_cache(cgroup.path()).expect("the cgroup's memory.stat");
    let before = live();
    // The level's highest live memory, sampled while it runs.
    let running = std::sync::atomic::AtomicBool::new(true);
    let (level, highest) = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut highest = 0;
            while running.load(std::sync::atomic::Ordering::Relaxed) {
                highest = highest.max(live());
                std::thread::sleep(Duration::from_millis(20));
            }
            highest
        });
        let level = connect_all_then_send(server.addr, 1000, 1000);
        running.store(false, std::sync::atomic::Ordering::Relaxed);
        (level, sampler.join().unwrap())
    });
    assert_eq!((level.ok, level.refused), (1000, 0), "a level that fits: {} other", level.other.len());
    // Every connection is closed; give the server a moment to see it.
    std::thread::sleep(Duration::from_secs(1));
    let after = live();
    let (held, kept) = (highest.saturating_sub(before), after.saturating_sub(before));
    // Kept, freed memory is charged and admission reads it as in use. Here
    // reactive kept 5.8 of the 17.6 MiB a level of 1000 held with
    // mimalloc's purge delay at 10 ms (its default), and 0.7 of 17.0 MiB
    // with freed memory returned at once.
    assert!(kept * 8 <= held, "the level held {held} B over the idle {before} B and kept {kept} B");
}

#[test]
fn past_the_descriptor_limit_connections_are_refused_at_once() {
    // 64 descriptors: about 20 for the server itself, the rest for clients.
    let mut command = std::process::Command::new("sh");
    command.env("RUST_LOG", "warn").args([
        "-c",
        "ulimit -n 64 && exec \"$@\"",
        "sh",
        env!("CARGO_BIN_EXE_blocklab"),
    ]);
    command.args(["serve", "--listen", "127.0.0.1:0", "--nodes", "100", "--model", "lean", "--workers", "1"]);
    let server = Listening::start(command);
    let crowd = Crowd::gather(server.addr, 120, 20);
    assert!(crowd.refused >= 20, "{} refused", crowd.refused);
    assert!(crowd.waiting.len() >= 20, "only {} admitted", crowd.waiting.len());
    assert_eq!(crowd.closed, 0, "connections closed without an answer");
    drop(crowd.waiting);
    let (text, more) = metrics_when_admitted(server.addr);
    let refused = metric(&text, "blocklab_connections_refused_total{reason=\"descriptors\"}") as usize;
    assert_eq!(refused, crowd.refused + more);
    let (got, _) = when_admitted(server.addr, "/test");
    assert!(got.ends_with("works"), "{got:?}");
}
