//! Against a real FalkorDB server (started by `scripts/test`, which sets
//! `FALKOR_URL`): seeding, every endpoint through the real blocking and async
//! clients, and the resilience of the service when the database is down at
//! start, dies under load and comes back. Without `FALKOR_URL` the tests
//! skip, saying so; under `scripts/test` (`BLOCKLAB_NO_SKIP=1`) that is a failure.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blocklab::db::{DbSettings, DbUrl, FalkorGraph, GraphBackend, content_record};
use blocklab::server::{Endpoint, ServeConfig};
use common::{falkor_url, get, server_with, try_get};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn blocklab() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_blocklab"));
    c.env("RUST_LOG", "warn");
    c
}

/// A graph of this test's own, so tests do not see each other's data.
fn graph_url(base: &str, name: &str) -> String {
    format!("{}/{name}_{}", base.trim_end_matches('/'), std::process::id())
}

fn seed(url: &str, nodes: u64) -> String {
    let out = common::output_within(
        blocklab().args(["seed", "--db", url, "--nodes", &nodes.to_string()]),
        std::time::Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "seed {url}: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn backend(url: &str, timeout: Duration) -> Arc<dyn GraphBackend> {
    let DbUrl::Falkor(target) = url.parse::<DbUrl>().unwrap() else { panic!("{url} is not falkor://") };
    Arc::new(FalkorGraph::new(target, DbSettings { timeout, ..DbSettings::default() }))
}

const DATA: [Endpoint; 7] = Endpoint::DATA;

#[test]
fn seeding_is_idempotent_and_exact() {
    let Some(base) = falkor_url() else { return };
    let url = graph_url(&base, "seed");
    assert!(seed(&url, 600).contains(": 600 Content nodes (was 0)"));
    assert!(seed(&url, 600).contains(": 600 Content nodes (was 600)"), "running it twice leaves N nodes");
    assert!(seed(&url, 500).contains(": 500 Content nodes (was 600)"), "nodes beyond N are removed");
    let graph = backend(&url, Duration::from_secs(2));
    assert_eq!(graph.count().unwrap(), 500);
    assert_eq!(graph.read_blocking(500).unwrap(), content_record(500));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_reads_the_node_through_the_real_clients() {
    let Some(base) = falkor_url() else { return };
    let url = graph_url(&base, "endpoints");
    seed(&url, 300);
    let config = ServeConfig { nodes: 300, workers: 2, db: url.parse().unwrap(), ..ServeConfig::default() };
    let server = server_with(config, backend(&url, Duration::from_secs(2)));
    for endpoint in DATA {
        for id in [1, 150, 300] {
            let reply = get(server.addr(), &format!("{}?id={id}", endpoint.path())).await;
            assert_eq!(reply.status, 200, "{} {id}: {}", endpoint.path(), reply.body);
            assert_eq!(reply.json(), serde_json::to_value(content_record(id)).unwrap());
        }
    }
    let metrics = get(server.addr(), "/metrics").await.body;
    assert!(
        metrics.contains("db_pool=\"16\"") && metrics.contains("db_async_connections=\"128\""),
        "pool sizes in /metrics"
    );
}

#[test]
fn serve_refuses_a_missing_dataset_and_says_how_to_seed_it() {
    let Some(base) = falkor_url() else { return };
    let url = graph_url(&base, "empty");
    let out = common::output_within(
        blocklab().args(["serve", "--listen", "127.0.0.1:0", "--db", &url, "--nodes", "100"]),
        std::time::Duration::from_secs(300),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("blocklab seed --db {url} --nodes 100")), "{stderr}");
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_with_the_database_down_and_answers_503_quickly() {
    if falkor_url().is_none() {
        return;
    }
    let url = format!("falkor://127.0.0.1:{}", dead_port());
    let config = ServeConfig { nodes: 100, workers: 2, db: url.parse().unwrap(), ..ServeConfig::default() };
    let server = server_with(config, backend(&url, Duration::from_secs(2)));
    assert_eq!(get(server.addr(), "/test").await.body, "works");
    for endpoint in DATA {
        let reply = get(server.addr(), &format!("{}?id=1", endpoint.path())).await;
        assert_eq!(reply.status, 503, "{}: {}", endpoint.path(), reply.body);
        assert!(
            reply.json()["error"].as_str().unwrap().starts_with("database unavailable"),
            "{}",
            reply.body
        );
        assert!(reply.elapsed < Duration::from_millis(700), "{} took {:?}", endpoint.path(), reply.elapsed);
    }
}

/// One FalkorDB of the test's own, which it may stop and start.
struct OwnFalkor {
    port: u16,
}

impl OwnFalkor {
    fn start(port: u16) -> OwnFalkor {
        let out = common::output_within(
            Command::new(repo().join("scripts/falkordb")).args(["start", &port.to_string()]),
            std::time::Duration::from_secs(300),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        OwnFalkor { port }
    }

    fn stop(&self) {
        let out = common::output_within(
            Command::new(repo().join("scripts/falkordb")).args(["stop", &self.port.to_string()]),
            std::time::Duration::from_secs(300),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    fn url(&self) -> String {
        format!("falkor://127.0.0.1:{}", self.port)
    }
}

impl Drop for OwnFalkor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a client saw for one request.
struct Seen {
    at: Instant,
    path: &'static str,
    status: Option<u16>,
    took: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn survives_the_database_dying_under_load_and_recovers_by_itself() {
    if falkor_url().is_none() {
        return;
    }
    let falkor = OwnFalkor::start(dead_port());
    seed(&falkor.url(), 200);
    let timeout = Duration::from_secs(2);
    let config =
        ServeConfig { nodes: 200, workers: 2, db: falkor.url().parse().unwrap(), ..ServeConfig::default() };
    let server = server_with(config, backend(&falkor.url(), timeout));
    let addr: SocketAddr = server.addr();

    // Load: 4 clients per model, each sending request after request.
    let paths =
        ["/getData?id=7", "/getDataAsync?id=7", "/getDataSpawnBlocking?id=7", "/getDataAkkaAsync?id=7"];
    let stop_at = Instant::now() + Duration::from_secs(7);
    let mut clients = Vec::new();
    for path in paths {
        for _ in 0..4 {
            clients.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                while Instant::now() < stop_at {
                    let started = Instant::now();
                    let reply = tokio::time::timeout(Duration::from_secs(10), try_get(addr, path)).await;
                    let status = match reply {
                        Ok(Ok(r)) => Some(r.status),
                        _ => None,
                    };
                    seen.push(Seen { at: started, path, status, took: started.elapsed() });
                }
                seen
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    falkor.stop();
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let _falkor = OwnFalkor::start(falkor.port);
    std::mem::forget(falkor); // the new handle owns the port now
    seed(&_falkor.url(), 200); // persistence is off: the restarted server is empty
    let back = Instant::now();

    let mut seen = Vec::new();
    for client in clients {
        seen.extend(client.await.unwrap());
    }
    let unanswered = seen.iter().filter(|s| s.status.is_none()).count();
    assert_eq!(unanswered, 0, "{unanswered} of {} requests got no HTTP answer", seen.len());
    let slowest = seen.iter().map(|s| s.took).max().unwrap();
    assert!(slowest < timeout + Duration::from_secs(1), "a request waited {slowest:?}");
    for path in paths {
        let mine: Vec<&Seen> = seen.iter().filter(|s| s.path == path).collect();
        assert!(
            mine.iter().any(|s| s.at < stopped && s.status == Some(200)),
            "{path}: no 200 before the outage"
        );
        assert!(
            mine.iter().any(|s| s.at > stopped && s.at < back && s.status == Some(503)),
            "{path}: no 503 during the outage"
        );
        let recovered = mine.iter().filter(|s| s.at > back && s.status == Some(200)).map(|s| s.at).min();
        let recovered = recovered.unwrap_or_else(|| panic!("{path}: never recovered"));
        assert!(
            recovered - back < Duration::from_millis(1500),
            "{path}: recovered only after {:?}",
            recovered - back
        );
        let last = mine.iter().max_by_key(|s| s.at).unwrap();
        assert_eq!(last.status, Some(200), "{path}: still failing at the end");
    }
    let count = |status| seen.iter().filter(|s| s.status == Some(status)).count();
    eprintln!("{} requests: {} × 200, {} × 503; slowest {slowest:?}", seen.len(), count(200), count(503));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_appear_in_logs_metrics_or_errors() {
    let Some(base) = falkor_url() else { return };
    let port = base.rsplit(':').next().unwrap().trim_end_matches('/').to_string();
    let url = format!("falkor://dbuser7:s3cretpw@127.0.0.1:{port}/creds");
    let mut child = blocklab()
        .args(["serve", "--listen", "127.0.0.1:0", "--nodes", "10", "--db", &url])
        .env("RUST_LOG", "debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let addr: SocketAddr =
        line.trim().strip_prefix("listening on http://").expect("listening line").parse().unwrap();
    let mut seen = line.clone();
    for path in ["/getData?id=1", "/getDataAsync?id=1", "/getDataAkka?id=1", "/metrics", "/nope"] {
        seen += &get(addr, path).await.body;
    }
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    seen += &String::from_utf8_lossy(&out.stderr);
    assert!(seen.contains("falkor://127.0.0.1"), "the address should appear, without credentials");
    assert!(!seen.contains("s3cretpw"), "the password leaked:\n{seen}");
    assert!(!seen.contains("dbuser7"), "the user leaked:\n{seen}");
}

#[test]
fn bench_against_falkordb_writes_the_full_report() {
    let Some(base) = falkor_url() else { return };
    let url = graph_url(&base, "bench");
    seed(&url, 1000);
    let out_dir = std::env::temp_dir().join(format!("blocklab-bench-falkor-{}", std::process::id()));
    let run = common::output_within(
        blocklab()
            .args([
                "bench", "--quick", "-n", "400", "--apis", "1,2,3,9", "--nodes", "1000", "--db", &url,
                "--out",
            ])
            .arg(&out_dir),
        std::time::Duration::from_secs(300),
    );
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap()).unwrap();
    assert!(results["conditions"]["database"].as_str().unwrap().starts_with("falkor://127.0.0.1"));
    for test in results["tests"].as_array().unwrap() {
        assert_eq!(test["status"], "ok", "{test:#}");
        for run in test["runs"].as_array().unwrap() {
            assert_eq!(run["ok"], 400, "{run:#}");
        }
    }
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("real network round trips"), "the report states the database");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn bench_passes_credentials_to_its_servers_without_writing_them_anywhere() {
    let Some(base) = falkor_url() else { return };
    let port = base.rsplit(':').next().unwrap().trim_end_matches('/').to_string();
    let url = format!("falkor://dbuser9:pa55word9@127.0.0.1:{port}/creds_bench");
    let out_dir = std::env::temp_dir().join(format!("blocklab-bench-creds-{}", std::process::id()));
    let run = common::output_within(
        blocklab()
            .args(["bench", "--quick", "-n", "300", "--apis", "1,3", "--nodes", "10", "--db", &url, "--out"])
            .arg(&out_dir),
        Duration::from_secs(300),
    );
    let mut everything =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    for entry in walk(&out_dir) {
        everything += &std::fs::read_to_string(entry).unwrap_or_default();
    }
    assert!(everything.contains("falkor://127.0.0.1"), "the database is named in the outputs");
    assert!(!everything.contains("pa55word9") && !everything.contains("dbuser9"), "credentials leaked");
    // The servers did get them: FalkorDB has no password, so AUTH is refused and reads answer 503.
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["tests"][1]["runs"][0]["ok"], 0, "reads authenticated without the password?");
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// One command to a Redis-protocol server on 127.0.0.1:`port`, after
/// `AUTH password` when given; returns the command's reply line.
fn redis_command(port: u16, password: Option<&str>, args: &[&str]) -> String {
    use std::io::{BufRead, Write};
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut send = |args: &[&str]| {
        let mut wire = format!("*{}\r\n", args.len());
        for arg in args {
            wire += &format!("${}\r\n{arg}\r\n", arg.len());
        }
        (&stream).write_all(wire.as_bytes()).unwrap();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    };
    if let Some(password) = password {
        assert_eq!(send(&["AUTH", password]), "+OK");
    }
    send(args)
}

/// `serve` answers `/getData` and `/getDataAsync` from the database `url` names.
fn serve_reads_through(url: &str) {
    let server = common::Listening::serve(&["--db", url]);
    for path in ["/getData?id=3", "/getDataAsync?id=3"] {
        let reply = common::raw_exchange(
            server.addr,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            Duration::from_secs(10),
        );
        assert!(reply.starts_with("HTTP/1.1 200"), "{path}: {reply}");
        assert!(reply.contains("resource3"), "{path}: {reply}");
    }
}

/// A password with each character a URL reserves, set on a real FalkorDB
/// (`CONFIG SET requirepass`), reaches it through `seed`, `serve` and `bench`
/// when percent-encoded in `--db`; a wrong one is refused, and none leaks.
#[test]
fn passwords_with_reserved_characters_reach_the_database() {
    if falkor_url().is_none() {
        return;
    }
    let falkor = OwnFalkor::start(dead_port());
    let url = |encoded: &str| format!("falkor://default:{encoded}@127.0.0.1:{}/auth", falkor.port);
    let mut current: Option<&str> = None;
    for (password, encoded) in [
        ("p@ss", "p%40ss"),
        ("p:ss", "p%3Ass"),
        ("p/ss", "p%2Fss"),
        ("p#ss", "p%23ss"),
        ("p%ss", "p%25ss"),
        ("p ss", "p%20ss"),
        ("a@:/#% z", "a%40%3A%2F%23%25%20z"),
    ] {
        assert_eq!(redis_command(falkor.port, current, &["CONFIG", "SET", "requirepass", password]), "+OK");
        current = Some(password);
        assert!(seed(&url(encoded), 100).contains(": 100 Content nodes"), "seed with {password:?}");
        serve_reads_through(&url(encoded));
    }
    // The password is checked: a wrong one fails seed with an authentication error that does not quote it.
    let wrong = common::output_within(
        blocklab().args(["seed", "--db", &url("a%40%3A%2F%23%25%20y"), "--nodes", "20"]),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert_ne!(wrong.status.code(), Some(0), "seed with a wrong password succeeded");
    assert!(!stderr.contains("a@:/#% y") && !stderr.contains("%20y"), "{stderr}");

    let out_dir = std::env::temp_dir().join(format!("blocklab-bench-auth-{}", std::process::id()));
    let run = common::output_within(
        blocklab()
            .args(["bench", "--quick", "-n", "200", "--apis", "1,3", "--nodes", "100", "--db"])
            .arg(url("a%40%3A%2F%23%25%20z"))
            .arg("--out")
            .arg(&out_dir),
        Duration::from_secs(300),
    );
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap()).unwrap();
    for test in results["tests"].as_array().unwrap() {
        assert_eq!(test["runs"][0]["ok"], 200, "{test:#}");
    }
    let mut everything =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    for entry in walk(&out_dir) {
        everything += &std::fs::read_to_string(entry).unwrap_or_default();
    }
    assert!(!everything.contains("a@:/#% z") && !everything.contains("%20z"), "the password leaked");
    let _ = std::fs::remove_dir_all(&out_dir);
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() { files.extend(walk(&path)) } else { files.push(path) }
    }
    files
}
