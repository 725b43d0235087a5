//! `blocklab load --urls FILE` against a server of the test's own that
//! counts requests per path: every request of the file is sent, in turn on
//! each connection, with its own method, headers and body; the per-URL
//! figures are what the server saw; URLs of another origin are a usage error.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use blocklab::cli::{Cli, Command};
use blocklab::load::{self, LoadPlan, RunResult};
use clap::Parser;
use common::blocklab;

/// What the server saw: requests per "METHOD path", and the bodies' lengths per path.
type Seen = Arc<Mutex<BTreeMap<String, (u64, u64)>>>;

/// A keep-alive HTTP/1.1 server on its own runtime that counts requests per
/// method and path; `/slow` answers after 20 ms, `/missing` with 404.
fn counting_server() -> (SocketAddr, Seen) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let counts = seen.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(serve(stream, counts.clone()));
            }
        });
    });
    (addr, seen)
}

async fn serve(mut stream: tokio::net::TcpStream, seen: Seen) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // One whole request (head and Content-Length body) at the front of buf.
        let (line, head, body) = loop {
            let mut fields = [httparse::EMPTY_HEADER; 32];
            let mut request = httparse::Request::new(&mut fields);
            if let Ok(httparse::Status::Complete(head)) = request.parse(&buf) {
                let length = request
                    .headers
                    .iter()
                    .find(|f| f.name.eq_ignore_ascii_case("content-length"))
                    .map_or(0, |f| std::str::from_utf8(f.value).unwrap().parse::<usize>().unwrap());
                if buf.len() >= head + length {
                    break (format!("{} {}", request.method.unwrap(), request.path.unwrap()), head, length);
                }
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        buf.drain(..head + body);
        {
            let mut seen = seen.lock().unwrap();
            let entry = seen.entry(line.clone()).or_default();
            entry.0 += 1;
            entry.1 += body as u64;
        }
        let status = if line.contains("/missing") { "404 Not Found" } else { "200 OK" };
        if line.contains("/slow") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\nok");
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn plan(args: &[&str]) -> LoadPlan {
    let argv = ["blocklab", "load", "-q"].iter().chain(args);
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Load(l) => l.plan().unwrap(),
        _ => unreachable!(),
    }
}

fn run(plan: &LoadPlan) -> RunResult {
    let result = load::run(plan).unwrap();
    assert!(result.is_balanced(), "sent != completed + errors + in flight");
    result
}

/// A directory of the test's own with a targets file (and a body file) for `addr`.
fn targets(name: &str, addr: SocketAddr) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("blocklab-load-urls-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("item.json"), "{\"id\":3}").unwrap();
    let file = dir.join("targets.txt");
    std::fs::write(
        &file,
        format!(
            "# four requests\nGET http://{addr}/fast\n\nGET http://{addr}/slow?x=1\nX-Trace: 7\n\n\
             POST http://{addr}/items\nContent-Type: application/json\n@item.json\n\nGET http://{addr}/missing\n"
        ),
    )
    .unwrap();
    file
}

#[test]
fn every_url_gets_its_turn_and_its_own_figures() {
    let (addr, seen) = counting_server();
    let file = targets("turns", addr);
    // One connection: an exact rotation, 4 × 25 + 2.
    let one = plan(&["-k", "-c", "1", "-n", "102", "--urls", file.to_str().unwrap()]);
    let result = run(&one);
    let report = load::report::LoadReport::new(&one, &result);
    let by_url: Vec<(String, u64)> =
        report.urls.iter().map(|u| (format!("{} {}", u.method, u.url), u.requests)).collect();
    assert_eq!(
        by_url,
        vec![
            (format!("GET http://{addr}/fast"), 26),
            (format!("GET http://{addr}/slow?x=1"), 26),
            (format!("POST http://{addr}/items"), 25),
            (format!("GET http://{addr}/missing"), 25),
        ]
    );
    let seen_now = seen.lock().unwrap().clone();
    assert_eq!(seen_now["GET /fast"].0, 26);
    assert_eq!(seen_now["GET /slow?x=1"].0, 26);
    // The body file, sent with every POST.
    assert_eq!(seen_now["POST /items"], (25, 25 * 8));
    assert_eq!((report.urls[3].status_4xx_5xx, report.urls[0].status_4xx_5xx), (25, 0));
    // Each URL's latency is its own: only /slow waits 20 ms. (A median, not a p99: one
    // /fast request delayed by a busy machine must not fail the test.)
    assert!(report.urls[1].p50_ms >= 19.0, "{:?}", report.urls[1]);
    assert!(report.urls[0].p50_ms < 19.0, "{:?}", report.urls[0]);
    let rps: f64 = report.urls.iter().map(|u| u.rps).sum();
    assert!((rps - report.rps).abs() < 1e-6 * report.rps.max(1.0), "{rps} vs {}", report.rps);

    // Several connections, pipelined: still every request counted under its own URL.
    seen.lock().unwrap().clear();
    let many = plan(&["-k", "-c", "3", "-n", "600", "--pipeline", "3", "--urls", file.to_str().unwrap()]);
    let result = run(&many);
    let report = load::report::LoadReport::new(&many, &result);
    let seen_now = seen.lock().unwrap().clone();
    for (u, path) in report.urls.iter().zip(["GET /fast", "GET /slow?x=1", "POST /items", "GET /missing"]) {
        assert_eq!(u.requests, seen_now[path].0, "{path}");
        assert!(u.requests.abs_diff(150) <= 9, "{path}: {}", u.requests);
    }
    assert_eq!(report.urls.iter().map(|u| u.requests).sum::<u64>(), 600);
    assert!(report.urls[1].p50_ms >= 19.0);
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

#[test]
fn the_binary_reports_per_url_and_refuses_another_origin() {
    let (addr, _) = counting_server();
    let file = targets("binary", addr);
    let json = file.with_file_name("result.json");
    let out = common::output_within(
        blocklab()
            .args(["load", "-q", "-k", "-c", "1", "-n", "40", "--json"])
            .arg(&json)
            .arg("--urls")
            .arg(&file),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("Per URL") && stdout.contains("POST /items") && stdout.contains("GET /slow?x=1"),
        "{stdout}"
    );
    let document: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    common::validate_schema("schema/load-result.json", &document);
    assert_eq!(document["urls"].as_array().unwrap().len(), 4);
    assert_eq!(document["urls"][2]["requests"], 10);

    let mixed = file.with_file_name("mixed.txt");
    std::fs::write(&mixed, format!("GET http://{addr}/a\n\nGET https://{addr}/b\n")).unwrap();
    let out = common::output_within(
        blocklab().args(["load", "-n", "2", "-c", "1", "--urls"]).arg(&mixed),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("line 3") && stderr.contains("share the scheme, host and port"), "{stderr}");
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}
