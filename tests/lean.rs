//! The lean model's HTTP/1.x over a real socket: keep-alive, HTTP/1.0,
//! pipelining, HEAD, and every kind of bad or slow client answered correctly
//! or closed cleanly, with the server still serving afterwards. A property
//! test sends arbitrary bytes.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{Listening, raw_exchange};
use proptest::prelude::*;

const WAIT: Duration = Duration::from_millis(700);

fn lean() -> Listening {
    Listening::serve(&["--model", "lean", "--workers", "1"])
}

fn still_serves(addr: SocketAddr) {
    let got = raw_exchange(addr, b"GET /test HTTP/1.1\r\nConnection: close\r\n\r\n", Duration::from_secs(10));
    assert!(got.starts_with("HTTP/1.1 200 OK") && got.ends_with("works"), "after that, /test got {got:?}");
}

#[test]
fn keep_alive_http10_pipelining_and_head() {
    let server = lean();
    // HTTP/1.1 keep-alive: two requests, one connection, still open after.
    let got = raw_exchange(server.addr, b"GET /test HTTP/1.1\r\n\r\nGET /delay?ms=1 HTTP/1.1\r\n\r\n", WAIT);
    assert_eq!(got.matches("HTTP/1.1 200 OK").count(), 2, "{got}");
    assert!(!got.contains("connection: close"), "{got}");
    // Pipelined, answered in order although the first waits longest.
    let got = raw_exchange(
        server.addr,
        b"GET /delay?ms=150 HTTP/1.1\r\n\r\nGET /test HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\nConnection: close\r\n\r\n",
        Duration::from_secs(5),
    );
    let (first, second, third) = (
        got.find("{\"success\":true}").unwrap(),
        got.find("works").unwrap(),
        got.find("404 Not Found").unwrap(),
    );
    assert!(first < second && second < third, "out of order: {got}");
    assert!(got.ends_with("\"}") && got.contains("connection: close"), "{got}");
    // HTTP/1.0: closed after the answer unless keep-alive is asked.
    let got = raw_exchange(server.addr, b"GET /test HTTP/1.0\r\n\r\n", Duration::from_secs(5));
    assert!(got.contains("connection: close") && got.ends_with("works"), "{got}");
    let got = raw_exchange(server.addr, b"GET /test HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", WAIT);
    assert!(got.contains("connection: keep-alive") && got.ends_with("works"), "{got}");
    // HEAD: the headers of GET, no body.
    let got = raw_exchange(server.addr, b"HEAD /delay?ms=0 HTTP/1.1\r\nConnection: close\r\n\r\n", WAIT);
    assert!(got.contains("content-length: 16") && got.ends_with("\r\n\r\n"), "{got:?}");
}

#[test]
fn bad_requests_get_the_right_status_and_a_clean_close() {
    let server = lean();
    for (request, status) in [
        (b"BLAH\r\n\r\n".to_vec(), "400 Bad Request"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(), "400 Bad Request"),
        (b"GET /test HTTP/2.0\r\n\r\n".to_vec(), "505 HTTP Version Not Supported"),
        (b"POST /delay HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello".to_vec(), "413 Content Too Large"),
        ([b"GET /test HTTP/1.1\r\nX-Big: ".as_slice(), &[b'a'; 20_000], b"\r\n\r\n"].concat(), "431"),
    ] {
        let got = raw_exchange(server.addr, &request, Duration::from_secs(5));
        assert!(got.starts_with(&format!("HTTP/1.1 {status}")), "{request:?}: {got:?}");
        assert!(got.contains("connection: close"), "{got}");
    }
    let got = raw_exchange(server.addr, b"PUT /test HTTP/1.1\r\nConnection: close\r\n\r\n", WAIT);
    assert!(got.starts_with("HTTP/1.1 405") && got.contains("allow: GET, HEAD"), "{got}");
    still_serves(server.addr);
}

#[test]
fn a_slow_client_is_served_and_a_vanishing_one_costs_nothing() {
    let server = lean();
    let mut slow = TcpStream::connect(server.addr).unwrap();
    for part in [&b"GET /te"[..], b"st HTTP/1.1\r\nHo", b"st: x\r\nConnection: close\r\n", b"\r\n"] {
        slow.write_all(part).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut got = String::new();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    slow.read_to_string(&mut got).unwrap();
    assert!(got.starts_with("HTTP/1.1 200") && got.ends_with("works"), "{got}");

    // Gone mid-head, and gone while its /delay waits.
    let mut gone = TcpStream::connect(server.addr).unwrap();
    gone.write_all(b"GET /delay?ms=10 HTTP/1.1\r\nHo").unwrap();
    drop(gone);
    let mut gone = TcpStream::connect(server.addr).unwrap();
    gone.write_all(b"GET /delay?ms=100 HTTP/1.1\r\n\r\n").unwrap();
    drop(gone);
    still_serves(server.addr);
    // Both close within a few hundred milliseconds; a loaded machine gets 5 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = raw_exchange(server.addr, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n", WAIT);
        if metrics.contains("blocklab_connections_open 1\n") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "connections leaked:\n{metrics}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Any bytes, in any split, after a valid request line or not: the server
/// answers or closes, and goes on serving, under every model.
#[test]
fn arbitrary_bytes_never_break_the_server() {
    for model in ["lean", "reactive", "pool", "thread"] {
        arbitrary_bytes_never_break(Listening::serve(&["--model", model, "--workers", "1"]));
    }
}

/// A valid request cut at arbitrary points, each piece its own write with a
/// pause between: every model reassembles it and answers 200, and the
/// process stays up.
#[test]
fn valid_requests_split_anywhere_are_answered() {
    use proptest::test_runner::{Config, TestRunner};
    const REQUEST: &[u8] =
        b"GET /test HTTP/1.1\r\nHost: blocklab\r\nUser-Agent: split/1\r\nConnection: close\r\n\r\n";
    for model in ["lean", "reactive", "pool", "thread"] {
        let mut server = Listening::serve(&["--model", model, "--workers", "1"]);
        let strategy = prop::collection::vec(1..REQUEST.len(), 1..6);
        let mut runner = TestRunner::new(Config { cases: 12, ..Config::default() });
        runner
            .run(&strategy, |mut cuts| {
                cuts.sort_unstable();
                cuts.dedup();
                let mut stream = TcpStream::connect(server.addr).unwrap();
                stream.set_nodelay(true).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut from = 0;
                for to in cuts.into_iter().chain([REQUEST.len()]) {
                    stream.write_all(&REQUEST[from..to]).unwrap();
                    from = to;
                    std::thread::sleep(Duration::from_millis(2));
                }
                let mut got = Vec::new();
                let _ = stream.read_to_end(&mut got);
                let got = String::from_utf8_lossy(&got);
                prop_assert!(
                    got.starts_with("HTTP/1.1 200 OK") && got.ends_with("works"),
                    "{model}: {got:?}"
                );
                Ok(())
            })
            .unwrap();
        assert!(server.child.try_wait().unwrap().is_none(), "{model} exited");
    }
}

fn arbitrary_bytes_never_break(server: Listening) {
    use proptest::test_runner::{Config, TestRunner};
    let strategy = (prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..4), any::<bool>());
    let mut runner = TestRunner::new(Config { cases: 32, ..Config::default() });
    let result = runner.run(&strategy, |(chunks, valid_prefix)| {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        if valid_prefix {
            let _ = stream.write_all(b"GET /test HTTP/1.1\r\n");
        }
        for chunk in &chunks {
            let _ = stream.write_all(chunk);
        }
        let mut buf = [0u8; 4096];
        let _ = stream.read(&mut buf);
        drop(stream);
        still_serves(server.addr);
        Ok(())
    });
    result.unwrap();
}

/// The `http` runtime's tasks alive now, and `/delay` requests in flight,
/// read from `/metrics` (whose own connection is one of the tasks).
fn tasks_and_delays(addr: SocketAddr) -> (f64, f64) {
    let text =
        raw_exchange(addr, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n", Duration::from_secs(10));
    (
        common::metric(&text, "tokio_alive_tasks{runtime=\"http\"}"),
        common::metric(&text, "blocklab_http_requests_in_flight{endpoint=\"/delay\"}"),
    )
}

/// Reads from `stream` until what came ends with `end`.
fn read_until(stream: &mut TcpStream, end: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(end.as_bytes()) {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Under lean an idle connection and a `/delay` waiting out its time hold
/// no task: 300 of each leave the runtime's task count where it was, and
/// each is answered in time and goes on serving its connection.
#[test]
fn idle_connections_and_waiting_delays_hold_no_task() {
    const N: usize = 300;
    let server = lean();
    let (base, _) = tasks_and_delays(server.addr);
    let mut conns: Vec<TcpStream> = (0..N).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let (idle, _) = tasks_and_delays(server.addr);
    assert!(idle <= base + 5.0, "{N} idle connections: {base} tasks became {idle}");
    let sent = std::time::Instant::now();
    for conn in &mut conns {
        conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        conn.write_all(b"GET /delay?ms=1500 HTTP/1.1\r\n\r\n").unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    let (waiting, delays) = tasks_and_delays(server.addr);
    assert_eq!(delays, N as f64, "not every /delay was in flight");
    assert!(waiting <= base + 5.0, "{N} waiting /delay requests: {base} tasks became {waiting}");
    for conn in &mut conns {
        let got = read_until(conn, r#"{"success":true}"#);
        assert!(got.starts_with("HTTP/1.1 200 OK") && got.ends_with(r#"{"success":true}"#), "{got:?}");
    }
    assert!(sent.elapsed() >= Duration::from_millis(1500), "answered before the wait");
    // Back in the idle lot, each connection answers its next request.
    for conn in &mut conns {
        conn.write_all(b"GET /test HTTP/1.1\r\n\r\n").unwrap();
        assert!(read_until(conn, "works").ends_with("works"));
    }
    let (after, delays) = tasks_and_delays(server.addr);
    assert_eq!(delays, 0.0);
    // Served connections may keep their task until they go quiet.
    assert!(after <= base + N as f64 + 5.0, "{after} tasks after");
    drop(conns);
    still_serves(server.addr);
}

/// SIGTERM under lean: connections waiting in the idle lot are closed at
/// once, `/delay`s waiting in the heap are answered (with `connection:
/// close`), and the server exits by itself.
#[test]
fn sigterm_closes_idle_connections_and_answers_waiting_delays() {
    let mut server = lean();
    let mut idle: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
    let mut waiting: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
    for conn in &mut waiting {
        conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        conn.write_all(b"GET /delay?ms=800 HTTP/1.1\r\n\r\n").unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    server.sigterm();
    for conn in &mut idle {
        conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 64];
        // The end of the stream (or a reset): nothing was answered.
        assert!(matches!(conn.read(&mut buf), Ok(0) | Err(_)), "an idle connection got bytes at stop");
    }
    for conn in &mut waiting {
        let got = read_until(conn, r#"{"success":true}"#);
        assert!(got.starts_with("HTTP/1.1 200 OK") && got.contains("connection: close"), "{got:?}");
    }
    assert_eq!(server.exit_within(Duration::from_secs(10)), Some(0));
}

/// The pids whose parent is `parent`, from /proc.
fn children_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid …: the command may hold spaces, so after its ')'.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
        if ppid == Some(parent) {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` is running (not gone, not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// `/metrics` on a new connection (the kernel picks the worker).
fn metrics_once(addr: SocketAddr) -> String {
    raw_exchange(addr, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n", Duration::from_secs(10))
}

#[test]
fn two_worker_processes_share_one_port_and_stop_together() {
    let mut server = Listening::serve(&["--model", "lean", "--workers", "1", "--processes", "2"]);
    let workers = children_of(server.child.id());
    assert_eq!(workers.len(), 2, "the supervisor should have two workers: {workers:?}");
    // The kernel hashes each new connection to one worker: within 200
    // connections both answer (the odds that one never does: 2^-199).
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let text = metrics_once(server.addr);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("processes=\"2\"") && text.contains("blocklab_worker_processes 2"), "{text}");
        if let Some(at) = text.find("worker_process=\"") {
            seen.insert(text[at + 16..at + 19].to_string());
        }
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["1/2", "2/2"]);
    still_serves(server.addr);
    // SIGTERM to the supervisor stops every worker, and it exits cleanly.
    server.sigterm();
    assert_eq!(server.exit_within(Duration::from_secs(30)), Some(0));
    for pid in workers {
        assert!(!running(pid), "worker {pid} outlived its supervisor");
    }
}

#[test]
fn a_worker_that_dies_is_reported_and_not_restarted() {
    use std::io::BufRead;
    let mut command = common::blocklab();
    command.args(["serve", "--listen", "127.0.0.1:0", "--nodes", "100", "--model", "lean", "--workers", "1"]);
    command.args(["--processes", "2"]).stderr(std::process::Stdio::piped());
    let mut child = command.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (line_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = line_tx.send(line);
        }
    });
    let mut server = Listening::start_child(child);
    let workers = children_of(server.child.id());
    assert_eq!(workers.len(), 2, "{workers:?}");
    let status =
        std::process::Command::new("kill").args(["-KILL", &workers[0].to_string()]).status().unwrap();
    assert!(status.success());
    // The supervisor says so on stderr, and tells the survivor.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let said = std::iter::from_fn(|| {
        lines.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())).ok()
    })
    .find(|line| line.contains("died"))
    .expect("the supervisor did not report the dead worker within 10 s");
    assert!(said.contains(&format!("pid {}", workers[0])) && said.contains("1 of 2 workers left"), "{said}");
    let mut text = String::new();
    for _ in 0..100 {
        text = metrics_once(server.addr);
        if text.contains("blocklab_worker_processes_lost_total 1") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(text.contains("blocklab_worker_processes_lost_total 1"), "{text}");
    assert!(text.contains("blocklab_worker_processes 1\n"), "{text}");
    // Every new connection goes to the survivor; nothing was restarted.
    for _ in 0..20 {
        still_serves(server.addr);
    }
    assert_eq!(children_of(server.child.id()), [workers[1]]);
    server.sigterm();
    assert_eq!(server.exit_within(Duration::from_secs(30)), Some(0));
    assert!(!running(workers[1]));
}
