//! What `blocklab load` puts on the wire for a user's own service: bodies
//! (`-d`, `--body-file`) with their length and type, `-H` replacing the
//! default fields, the URL's credentials as Basic auth — read back by a
//! server of the test's own that parses every request it gets.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use blocklab::cli::{Cli, Command};
use blocklab::load::{self, LoadPlan, RunResult};
use clap::Parser;

/// One request as the server read it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A keep-alive server that parses each request (head and `Content-Length`
/// body), keeps it, and answers 200; its threads end when the client closes.
struct EchoServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl EchoServer {
    fn start() -> EchoServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(stream, &s));
            }
        });
        EchoServer { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(mut stream: TcpStream, seen: &Mutex<Vec<Seen>>) {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        loop {
            let mut fields = [httparse::EMPTY_HEADER; 64];
            let mut request = httparse::Request::new(&mut fields);
            let Ok(httparse::Status::Complete(head)) = request.parse(&pending) else { break };
            let headers: Vec<(String, String)> = request
                .headers
                .iter()
                .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
                .collect();
            let length: usize = headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                .map_or(0, |(_, v)| v.parse().unwrap());
            if pending.len() < head + length {
                break;
            }
            seen.lock().unwrap().push(Seen {
                method: request.method.unwrap().to_string(),
                path: request.path.unwrap().to_string(),
                headers,
                body: pending[head..head + length].to_vec(),
            });
            pending.drain(..head + length);
            if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
                return;
            }
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
    }
}

fn plan(args: &[&str]) -> Result<LoadPlan, String> {
    let argv = ["blocklab", "load", "-q"].iter().chain(args);
    match Cli::try_parse_from(argv).map_err(|e| e.to_string())?.command {
        Command::Load(l) => l.plan(),
        _ => unreachable!(),
    }
}

fn run(args: &[&str]) -> RunResult {
    let result = load::run(&plan(args).unwrap()).unwrap();
    assert!(result.is_balanced());
    result
}

#[test]
fn a_body_goes_whole_with_its_length_and_type_on_every_keep_alive_request() {
    let server = EchoServer::start();
    let body = r#"{"id":3,"name":"résumé"}"#;
    let r = run(&[
        "-k",
        "-c",
        "2",
        "-n",
        "40",
        "-m",
        "POST",
        "-d",
        body,
        "-T",
        "application/json",
        &server.url("/items?x=1"),
    ]);
    // Framing right: 40 answers and no connection reopened, so every body ended where its length
    // said. (At most 2: on a busy machine one connection can take all 40 before the other starts.)
    assert_eq!(r.stats.ok, 40);
    assert!(
        (1..=2).contains(&r.stats.connections_opened),
        "{} connections for 2",
        r.stats.connections_opened
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 40);
    for s in &seen {
        assert_eq!((s.method.as_str(), s.path.as_str()), ("POST", "/items?x=1"));
        assert_eq!(s.body, body.as_bytes());
        assert_eq!(s.header("content-type"), Some("application/json"));
        assert_eq!(s.header("content-length"), Some(body.len().to_string().as_str()));
    }
}

#[test]
fn a_body_file_of_100_kib_pipelined_arrives_byte_for_byte() {
    let server = EchoServer::start();
    let dir = std::env::temp_dir().join(format!("blocklab-body-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("body.bin");
    let body: Vec<u8> = (0..100 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &body).unwrap();
    let r = run(&[
        "-k",
        "-c",
        "1",
        "-n",
        "12",
        "--pipeline",
        "4",
        "-m",
        "PUT",
        "--body-file",
        file.to_str().unwrap(),
        &server.url("/up"),
    ]);
    assert_eq!(r.stats.ok, 12);
    let seen = server.seen();
    assert_eq!(seen.len(), 12);
    assert!(seen.iter().all(|s| s.body == body && s.method == "PUT"));
    assert_eq!(
        seen[0].header("content-type"),
        Some("application/x-www-form-urlencoded"),
        "curl -d's default"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn headers_replace_the_defaults_and_url_credentials_are_basic_auth() {
    let server = EchoServer::start();
    let url = format!("http://al%40ice:s3cr%3At@{}/private", server.addr);
    let r = run(&[
        "-c",
        "1",
        "-n",
        "3",
        "-H",
        "Host: api.example",
        "-H",
        "user-agent: probe/1",
        "-H",
        "X-Trace: 7",
        &url,
    ]);
    assert_eq!(r.stats.ok, 3);
    let seen = server.seen();
    let s = &seen[0];
    assert_eq!(s.header("host"), Some("api.example"));
    assert_eq!(s.header("user-agent"), Some("probe/1"));
    assert_eq!(s.header("x-trace"), Some("7"));
    assert_eq!(s.header("connection"), Some("close"), "without -k");
    // base64("al@ice:s3cr:t")
    assert_eq!(s.header("authorization"), Some("Basic YWxAaWNlOnMzY3I6dA=="));
    assert_eq!(s.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("host")).count(), 1, "one Host only");
    assert!(s.body.is_empty() && s.header("content-length").is_none());
    // An explicit Authorization wins over the URL's; an empty value removes a default.
    let r = run(&["-c", "1", "-n", "1", "-H", "Authorization: Bearer t", "-H", "User-Agent:", &url]);
    assert_eq!(r.stats.ok, 1);
    let s = server.seen().pop().unwrap();
    assert_eq!(s.header("authorization"), Some("Bearer t"));
    assert_eq!(s.header("user-agent"), None);
    // The password never reaches a report.
    assert!(!plan(&[&url]).unwrap().target.url.contains("s3cr"));
}

#[test]
fn impossible_request_flags_are_refused() {
    for (args, needle) in [
        (&["-d", "x", "--body-file", "/etc/hostname", "http://127.0.0.1:1/"][..], "cannot be used with"),
        (&["--body-file", "/nonexistent/body", "http://127.0.0.1:1/"], "cannot read --body-file"),
        (&["-d", "x", "-H", "Content-Length: 5", "http://127.0.0.1:1/"], "decides how the request is framed"),
        (&["-H", "Transfer-Encoding: chunked", "http://127.0.0.1:1/"], "decides how the request is framed"),
        (&["-T", "bad\nvalue", "http://127.0.0.1:1/"], "--content-type"),
    ] {
        let err = plan(args).unwrap_err();
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = common::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_blocklab")).args([
            "load",
            "--body-file",
            "/nonexistent/body",
            "http://127.0.0.1:1/",
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end().lines().count(), 1);
}
