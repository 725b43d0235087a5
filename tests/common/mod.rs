//! Helpers shared by the integration tests: start a server on port 0 and
//! talk to it over real TCP with hyper's client.

#![allow(dead_code)]

pub mod nginx;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blocklab::db::{EmbeddedGraph, GraphBackend};
use blocklab::server::{RunningServer, ServeConfig};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// A finished request.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: String,
    pub elapsed: Duration,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// Starts a server over an embedded graph of `nodes` with `latency`.
pub fn embedded_server(config: ServeConfig) -> RunningServer {
    let backend = Arc::new(EmbeddedGraph::load(config.nodes, config.db_latency).unwrap());
    server_with(config, backend)
}

/// Starts a server over any backend.
pub fn server_with(config: ServeConfig, backend: Arc<dyn GraphBackend>) -> RunningServer {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    RunningServer::start(config, backend, listener).unwrap()
}

/// GET `path` on a new connection; the elapsed time includes connecting.
pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    try_get(addr, path).await.unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// As [`get`], returning transport errors instead of panicking.
pub async fn try_get(
    addr: SocketAddr,
    path: &str,
) -> Result<Reply, Box<dyn std::error::Error + Send + Sync>> {
    let started = Instant::now();
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request =
        hyper::Request::get(path).header(hyper::header::HOST, addr.to_string()).body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        elapsed: started.elapsed(),
    })
}

/// GET `path` `n` times at once, each on its own connection; returns the
/// replies and the wall time until the last one finished.
pub async fn get_concurrently(addr: SocketAddr, path: &str, n: usize) -> (Vec<Reply>, Duration) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let path = path.to_string();
            tokio::spawn(async move { get(addr, &path).await })
        })
        .collect();
    let mut replies = Vec::with_capacity(n);
    for task in tasks {
        replies.push(task.await.unwrap());
    }
    (replies, started.elapsed())
}

/// How a [`TestServer`] answers request number `n` (0-based), `since` its start.
pub type Behaviour = Arc<
    dyn Fn(u64, Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<u16>> + Send>>
        + Send
        + Sync,
>;

/// A tiny hyper server with a scripted behaviour, on its own runtime. The
/// behaviour returns the status to answer with, or `None` to close the
/// connection without answering.
pub struct TestServer {
    pub addr: SocketAddr,
    pub requests: Arc<std::sync::atomic::AtomicU64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    pub fn start(behaviour: Behaviour) -> TestServer {
        use hyper::service::service_fn;
        use std::sync::atomic::Ordering::Relaxed;

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = requests.clone();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let started = Instant::now();
                loop {
                    let (stream, _) = tokio::select! {
                        accepted = listener.accept() => accepted.unwrap(),
                        _ = &mut stopped => break,
                    };
                    let (behaviour, counter) = (behaviour.clone(), counter.clone());
                    tokio::spawn(async move {
                        let service = service_fn(move |_request: hyper::Request<hyper::body::Incoming>| {
                            let n = counter.fetch_add(1, Relaxed);
                            let answer = behaviour(n, started.elapsed());
                            async move {
                                match answer.await {
                                    Some(status) => Ok(hyper::Response::builder()
                                        .status(status)
                                        .header("server", "test-server")
                                        .body(http_body_util::Full::new(Bytes::from_static(b"hello")))
                                        .unwrap()),
                                    None => Err("close without answering"),
                                }
                            }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
            runtime.shutdown_background();
        });
        TestServer { addr, requests, stop: Some(stop), thread: Some(thread) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A behaviour from a synchronous rule plus an optional delay.
pub fn behaviour(
    rule: impl Fn(u64, Duration) -> (Duration, Option<u16>) + Send + Sync + 'static,
) -> Behaviour {
    Arc::new(move |n, since| {
        let (delay, status) = rule(n, since);
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            status
        })
    })
}

/// Runs `command` to completion like `Command::output`, but kills it and
/// fails the test if it runs longer than `limit`: a test must never hang.
pub fn output_within(command: &mut std::process::Command, limit: Duration) -> std::process::Output {
    use std::process::Stdio;
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut buf);
        buf
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output { status, stdout: out_reader.join().unwrap(), stderr: err_reader.join().unwrap() }
}

/// The `blocklab` binary under test, logging warnings only.
pub fn blocklab() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_blocklab"));
    cmd.env("RUST_LOG", "warn");
    cmd
}

/// A server process that printed `listening on http://ADDR`; killed on drop,
/// so a failing test leaves nothing behind.
pub struct Listening {
    pub child: std::process::Child,
    pub addr: SocketAddr,
}

impl Listening {
    /// Starts `command` and waits (at most 60 s) for its `listening on` line.
    pub fn start(mut command: std::process::Command) -> Listening {
        use std::process::Stdio;
        let child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        Listening::start_child(child)
    }

    /// As [`Listening::start`], for a child already started with its stdout piped.
    pub fn start_child(mut child: std::process::Child) -> Listening {
        use std::io::BufRead;
        let stdout = child.stdout.take().unwrap();
        let (line_tx, line_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = std::io::BufReader::new(stdout);
            let mut line = String::new();
            let _ = stdout.read_line(&mut line);
            let _ = line_tx.send(line);
            // Keep draining, so the child never blocks on a full pipe.
            let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        });
        let line = match line_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("no 'listening on' line within 60 s from pid {}", child.id());
            }
        };
        let Some(addr) = line.trim().strip_prefix("listening on http://") else {
            let _ = child.kill();
            panic!("pid {} printed {line:?}", child.id());
        };
        let addr: SocketAddr = addr.parse().unwrap();
        assert_ne!(addr.port(), 0);
        Listening { child, addr }
    }

    /// `blocklab serve` on port 0 with a small dataset and `args`.
    pub fn serve(args: &[&str]) -> Listening {
        let mut command = blocklab();
        command.args(["serve", "--listen", "127.0.0.1:0", "--nodes", "100"]).args(args);
        Listening::start(command)
    }

    /// The process's OS threads now, from /proc.
    pub fn threads(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        blocklab::proc::threads_in_status(&status).unwrap()
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit (at most `limit`) and returns its exit code.
    pub fn exit_within(&mut self, limit: Duration) -> Option<i32> {
        let started = Instant::now();
        loop {
            if let Some(exit) = self.child.try_wait().unwrap() {
                return exit.code();
            }
            if started.elapsed() > limit {
                let _ = self.child.kill();
                panic!("did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Samples a process's OS thread count every 10 ms until dropped; `peak`
/// is the highest seen.
pub struct ThreadSampler {
    peak: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ThreadSampler {
    pub fn start(pid: u32) -> ThreadSampler {
        use std::sync::atomic::Ordering::Relaxed;
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Relaxed) {
                if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    && let Some(n) = blocklab::proc::threads_in_status(&status)
                {
                    p.fetch_max(n, Relaxed);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        ThreadSampler { peak, stop, thread: Some(thread) }
    }

    /// Stops sampling and returns the peak.
    pub fn peak(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Sends raw bytes on a new blocking connection and reads until the server
/// closes it or `wait` passes without a byte; returns what came back.
pub fn raw_exchange(addr: SocketAddr, bytes: &[u8], wait: Duration) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(wait)).unwrap();
    let _ = stream.write_all(bytes);
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// The value of the sample `name` (exact, labels included) in a Prometheus text.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no sample {name} in:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Fails the test unless `document` matches the JSON schema at `schema_path`
/// (relative to the crate root).
pub fn validate_schema(schema_path: &str, document: &serde_json::Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(schema_path);
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let location = schema["$id"].as_str().unwrap().to_string();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource(&location, schema).unwrap();
    let index = compiler.compile(&location, &mut schemas).unwrap();
    if let Err(e) = schemas.validate(document, index) {
        panic!("the document does not match {schema_path}: {e:#}");
    }
}

/// The variable `scripts/test` sets: with it (or with `CI=true`, as a CI
/// sets it) a test that cannot run fails instead of skipping, so that a run
/// that passes has run every test.
pub const NO_SKIP_VAR: &str = "BLOCKLAB_NO_SKIP";

/// Whether a test that cannot run must fail ([`NO_SKIP_VAR`]=1 or `CI=true`).
pub fn no_skip() -> bool {
    std::env::var(NO_SKIP_VAR).is_ok_and(|v| v == "1") || std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A test that cannot run, for the reason `why`: under [`no_skip`] a
/// failure; otherwise `skipped: WHY` on stderr, and the caller returns.
pub fn skip(why: &str) {
    assert!(
        !no_skip(),
        "{why}; the tests may not skip under {NO_SKIP_VAR}=1 or CI=true (scripts/test sets it)"
    );
    eprintln!("skipped: {why}");
}

/// The Neo4j server the database tests use (`NEO4J_URI`, which `scripts/test`
/// sets after starting one with `scripts/neo4j`), or None ([`skip`]).
pub fn neo4j_uri() -> Option<String> {
    database_from_env("NEO4J_URI", "Neo4j", "scripts/neo4j")
}

/// The PostgreSQL the database tests use (`POSTGRES_URL`, which `scripts/test`
/// sets after starting one with `scripts/postgres`), as [`neo4j_uri`].
pub fn postgres_url() -> Option<String> {
    database_from_env("POSTGRES_URL", "PostgreSQL", "scripts/postgres")
}

/// The rows the PostgreSQL tests seed the shared cluster with (one count for all).
pub const POSTGRES_NODES: u64 = 1000;

/// The shared cluster ([`postgres_url`]), seeded with [`POSTGRES_NODES`]
/// rows by `blocklab seed` once per test binary.
pub fn seeded_postgres_url() -> Option<String> {
    static SEED: std::sync::Once = std::sync::Once::new();
    let url = postgres_url()?;
    SEED.call_once(|| {
        let out = output_within(
            blocklab().args(["seed", "--db", &url, "--nodes", &POSTGRES_NODES.to_string()]),
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "seed: {}", String::from_utf8_lossy(&out.stderr));
    });
    Some(url)
}

/// The URL in `var`, or None (skip) outside CI; with `CI=true` a missing one
/// is a failure: `scripts/test` starts `name` with `script` and sets it.
fn database_from_env(var: &str, name: &str, script: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(uri) if !uri.is_empty() => Some(uri),
        _ => {
            skip(&format!("{var} is not set (scripts/test starts {name} with {script} and sets it)"));
            None
        }
    }
}

/// The FalkorDB server the database tests use (`FALKOR_URL`, which
/// `scripts/test` sets after starting one with `scripts/falkordb`), or None ([`skip`]).
pub fn falkor_url() -> Option<String> {
    match std::env::var("FALKOR_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skip("FALKOR_URL is not set (scripts/test starts FalkorDB with scripts/falkordb and sets it)");
            None
        }
    }
}

/// Seeds the Neo4j at `uri` with `nodes` Content nodes (`blocklab seed`; the
/// tests of one Neo4j all use one number, since seeding to N deletes the nodes above N).
pub fn seed_neo4j(uri: &str, nodes: u64) {
    let output = output_within(
        blocklab().args(["seed", "--db", uri, "--nodes", &nodes.to_string()]),
        Duration::from_secs(120),
    );
    assert!(output.status.success(), "seed failed: {}", String::from_utf8_lossy(&output.stderr));
}

/// The pid of the Neo4j that `scripts/neo4j start PORT` runs for `uri` (its
/// pid file in `.local/neo4j/PORT/`), for a test that freezes it to check an
/// execution model: a failure, never a skip, when `uri` is not such a Neo4j
/// (the model checks are the test's point).
pub fn neo4j_to_freeze(uri: &str) -> u32 {
    let port = uri.rsplit(':').next().unwrap_or_default().trim_end_matches('/');
    let pidfile =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".local/neo4j").join(port).join("pid");
    let pid = std::fs::read_to_string(&pidfile).ok().and_then(|text| text.trim().parse::<u32>().ok());
    match pid {
        Some(pid) if std::path::Path::new(&format!("/proc/{pid}")).exists() => pid,
        _ => panic!(
            "{uri} is not a Neo4j that scripts/neo4j started (no live pid in {}), so the model checks \
             cannot freeze it: start one with scripts/neo4j start PORT and set NEO4J_URI to it",
            pidfile.display()
        ),
    }
}

fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill").args([name, &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill {name} {pid} failed");
}

/// A process (a Neo4j) frozen with SIGSTOP for as long as this lives; SIGCONT
/// on drop, so that a failing assertion never leaves a shared database stopped.
pub struct Frozen(u32);

impl Frozen {
    pub fn new(pid: u32) -> Frozen {
        signal(pid, "-STOP");
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

/// `blocklab load ARGS` as the command line parses it (quiet: tests read the result, not the progress).
pub fn load_plan(args: &[&str]) -> blocklab::load::LoadPlan {
    use clap::Parser;
    let argv = ["blocklab", "load", "-q"].iter().chain(args);
    match blocklab::cli::Cli::try_parse_from(argv).unwrap().command {
        blocklab::cli::Command::Load(l) => l.plan().unwrap(),
        _ => unreachable!(),
    }
}

/// Runs `blocklab load ARGS` and checks every request is accounted for.
pub fn load_run(args: &[&str]) -> blocklab::load::RunResult {
    let result = blocklab::load::run(&load_plan(args)).unwrap();
    assert!(result.is_balanced(), "sent != completed + errors + in flight");
    result
}

/// Checks a run of `--connections 4:2s,4:1s,0:1s` against its ramp: the
/// connections open at each second's end (about 2 at 1 s, 4 at 2 s and 3 s),
/// fewer requests in the first second than in the third, and each
/// connection opened once (kept while in the level).
pub fn assert_follows_the_four_connection_ramp(r: &blocklab::load::RunResult) {
    let open: Vec<u64> = r.timeline.iter().map(|s| s.connections).collect();
    let done: Vec<u64> = r.timeline.iter().map(|s| s.requests).collect();
    assert!((1..=3).contains(&open[0]), "connections open at each second's end {open:?}");
    assert_eq!((open[1], open[2]), (4, 4), "connections open at each second's end {open:?}");
    assert!(done[0] * 2 < done[2], "requests per second {done:?}");
    assert_eq!(r.stats.connections_opened, 4, "each connection opened once, kept alive while in the level");
}

/// How many errors of `kind` a run counted.
pub fn load_errors(result: &blocklab::load::RunResult, kind: blocklab::load::ErrorKind) -> u64 {
    result.stats.errors[kind.index()]
}

/// Whether one read of `path`, sent while Neo4j is frozen (SIGSTOP), comes
/// to hold the server's event loop: `/test` is sent every 250 ms for up to
/// 10 s after the read, and one that gets no answer within 1 s means the
/// loop is held. Probing until then, rather than once after a fixed sleep,
/// does not depend on how soon a busy machine lets the server reach the
/// read. Then Neo4j is thawed and the read must answer its node.
pub async fn loop_held_by_a_frozen_read(addr: SocketAddr, neo4j: u32, path: &str) -> bool {
    let frozen = Frozen::new(neo4j);
    let url = format!("{path}?id=1");
    let read = tokio::spawn(async move { get(addr, &url).await });
    let mut held = false;
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let probe = tokio::spawn(async move { get(addr, "/test").await });
        if tokio::time::timeout(Duration::from_secs(1), probe).await.is_err() {
            held = true;
            break;
        }
    }
    drop(frozen);
    let reply = tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .unwrap_or_else(|_| panic!("{path}: no answer 30 s after Neo4j was thawed"))
        .unwrap();
    assert_eq!(reply.status, 200, "{path}?id=1: {}", reply.body);
    assert_eq!(reply.json()["id"], 1, "{path}?id=1: {}", reply.body);
    held
}

/// Reads of `path` sent while Neo4j is frozen (SIGSTOP), and how long `/test`
/// took to answer meanwhile (None: not within 2 s); then Neo4j is thawed and
/// every read must answer its node.
pub async fn test_behind_frozen_reads(
    addr: SocketAddr,
    neo4j: u32,
    path: &str,
    reads: usize,
) -> Option<Duration> {
    let frozen = Frozen::new(neo4j);
    let reads: Vec<_> = (1..=reads)
        .map(|id| {
            let url = format!("{path}?id={id}");
            tokio::spawn(async move { (id, get(addr, &url).await) })
        })
        .collect();
    // Let every read reach the server and wait on Neo4j.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let test = tokio::spawn(async move { get(addr, "/test").await });
    let test_elapsed = match tokio::time::timeout(Duration::from_secs(2), async {
        while !test.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    {
        Ok(()) => Some(test.await.unwrap().elapsed),
        Err(_) => None,
    };
    drop(frozen);
    for read in reads {
        let (id, reply) = tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .unwrap_or_else(|_| panic!("{path}: no answer 30 s after Neo4j was thawed"))
            .unwrap();
        assert_eq!(reply.status, 200, "{path}?id={id}: {}", reply.body);
        assert_eq!(reply.json()["id"], id as u64, "{path}?id={id}: {}", reply.body);
    }
    test_elapsed
}
