//! Each endpoint over real TCP: the right node for `?id=`, the right status and
//! message for every bad input, the headers every response carries, and the
//! failure paths of the actors (timeout, worker panic).

mod common;

use std::sync::Arc;
use std::time::Duration;

use blocklab::db::{Content, EmbeddedGraph, GraphBackend, GraphError, ReadFuture, content_record};
use blocklab::server::{ActorLimits, Endpoint, Model, ServeConfig};
use common::{embedded_server, get, server_with};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn small() -> ServeConfig {
    ServeConfig { nodes: 200, workers: 2, ..ServeConfig::default() }
}

/// The two server stacks that serve study 1: hyper + axum, and lean.
const STACKS: [Model; 2] = [Model::Reactive, Model::Lean];

const DATA: [Endpoint; 7] = Endpoint::DATA;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_data_endpoint_returns_exactly_the_requested_node() {
    for model in STACKS {
        let server = embedded_server(ServeConfig { model, ..small() });
        for endpoint in DATA {
            for id in [1, 42, 200] {
                let reply = get(server.addr(), &format!("{}?id={id}", endpoint.path())).await;
                assert_eq!(reply.status, 200, "{model} {} id={id}: {}", endpoint.path(), reply.body);
                assert_eq!(reply.headers["content-type"], "application/json");
                assert_eq!(
                    reply.json(),
                    serde_json::to_value(content_record(id)).unwrap(),
                    "{model} {}",
                    endpoint.path()
                );
            }
            // Without ?id= the node is random but still a whole, valid node.
            let reply = get(server.addr(), endpoint.path()).await;
            let id = reply.json()["id"].as_i64().unwrap();
            assert!((1..=200).contains(&id));
            assert_eq!(reply.json(), serde_json::to_value(content_record(id)).unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_endpoint_says_works_and_every_response_has_server_and_date() {
    let server = embedded_server(small());
    let reply = get(server.addr(), "/test").await;
    assert_eq!((reply.status, reply.body.as_str()), (200, "works"));
    for path in ["/test", "/getData?id=1", "/getData?id=abc", "/nope", "/metrics"] {
        let reply = get(server.addr(), path).await;
        assert!(reply.headers["server"].to_str().unwrap().starts_with("blocklab/"), "{path}");
        assert!(reply.headers.contains_key("date"), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ids_are_400_with_a_message_that_says_what_is_wrong() {
    for model in STACKS {
        let server = embedded_server(ServeConfig { model, ..small() });
        for endpoint in DATA {
            for (query, expected) in [
                ("id=abc", "id must be an integer from 1 to 200, got 'abc'"),
                ("id=", "id must be an integer from 1 to 200, got ''"),
                ("id=0", "id 0 is out of range: ids run from 1 to 200"),
                ("id=201", "id 201 is out of range: ids run from 1 to 200"),
                ("id=-3", "id -3 is out of range: ids run from 1 to 200"),
                (
                    "id=99999999999999999999",
                    "id must be an integer from 1 to 200, got '99999999999999999999'",
                ),
            ] {
                let reply = get(server.addr(), &format!("{}?{query}", endpoint.path())).await;
                assert_eq!(reply.status, 400, "{model} {} {query}", endpoint.path());
                assert_eq!(reply.json(), serde_json::json!({ "error": expected }));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_are_404_and_other_methods_405() {
    let server = embedded_server(small());
    let reply = get(server.addr(), "/getdata").await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json(), serde_json::json!({ "error": "no such path: /getdata" }));

    let mut stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    stream
        .write_all(b"POST /test HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    assert!(text.starts_with("HTTP/1.1 405"), "{text}");
    assert!(text.contains("use GET"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_replies_that_miss_their_limit_are_503() {
    let config = ServeConfig {
        db_latency: Duration::from_millis(600),
        limits: ActorLimits {
            await_timeout: Duration::from_millis(100),
            ask_timeout: Duration::from_millis(100),
        },
        ..small()
    };
    for model in STACKS {
        let server = embedded_server(ServeConfig { model, ..config.clone() });
        for path in ["/getDataAkka?id=3", "/getDataAkkaAsync?id=3", "/getDataAkkaAsync2?id=3"] {
            let reply = get(server.addr(), path).await;
            assert_eq!(reply.status, 503, "{model} {path}: {}", reply.body);
            assert_eq!(reply.json(), serde_json::json!({ "error": "no reply from the actor within 100ms" }));
            assert!(reply.elapsed < Duration::from_millis(550), "{model} {path} waited {:?}", reply.elapsed);
        }
    }
}

/// A backend whose blocking read panics for one id, as a buggy driver might.
struct PanicsOn {
    id: i64,
    inner: EmbeddedGraph,
}

impl GraphBackend for PanicsOn {
    fn describe(&self) -> String {
        "embedded, panicking on one id".into()
    }
    fn read_blocking(&self, id: i64) -> Result<Content, GraphError> {
        assert_ne!(id, self.id, "driver bug on id {id}");
        self.inner.read_blocking(id)
    }
    fn count(&self) -> Result<u64, GraphError> {
        self.inner.count()
    }
    fn read(&self, id: i64) -> ReadFuture<'_> {
        Box::pin(async move {
            assert_ne!(id, self.id, "driver bug on id {id}");
            self.inner.read(id).await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_worker_is_restarted_and_only_its_request_fails() {
    for model in STACKS {
        a_panicking_read_fails_only_its_request(model).await;
    }
}

async fn a_panicking_read_fails_only_its_request(model: Model) {
    let backend = Arc::new(PanicsOn { id: 13, inner: EmbeddedGraph::load(200, Duration::ZERO).unwrap() });
    let server = server_with(ServeConfig { model, ..small() }, backend);
    let addr = server.addr();

    for round in 0..3 {
        let reply = get(addr, "/getDataAkka?id=13").await;
        assert!(reply.status >= 500, "round {round}: {} {}", reply.status, reply.body);
        assert_eq!(reply.json()["error"], "the actor serving this request failed before replying");
        // Enough requests to go round all 4 workers of the pool twice.
        for id in 1..=8 {
            let reply = get(addr, &format!("/getDataAkka?id={id}")).await;
            assert_eq!(reply.status, 200, "round {round} id {id}: {}", reply.body);
        }
    }
    let metrics = get(addr, "/metrics").await.body;
    let starts: u64 = metric(&metrics, "blocklab_actor_pool_worker_starts_total");
    assert!(starts >= 4 + 3, "the supervisor should have restarted workers: {starts} starts");

    // The same bug on the other paths: a 500 each, and the server carries on.
    for path in
        ["/getData?id=13", "/getDataAsync?id=13", "/getDataSpawnBlocking?id=13", "/getDataAkkaAsync?id=13"]
    {
        let reply = get(addr, path).await;
        assert_eq!(reply.status / 100, 5, "{model} {path}: {}", reply.body);
        assert_eq!(get(addr, &path.replace("13", "12")).await.status, 200, "{model} {path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_expose_requests_latency_runtime_and_actor_figures_with_help() {
    for model in STACKS {
        metrics_of(model).await;
    }
}

async fn metrics_of(model: Model) {
    let server = embedded_server(ServeConfig { model, ..small() });
    for endpoint in DATA {
        assert_eq!(get(server.addr(), &format!("{}?id=5", endpoint.path())).await.status, 200);
    }
    // A server counts a request once its answer is written, so a client that has read the
    // answer may ask before it is counted (a thread preempted between the two): ask again
    // for up to 5 s until every data endpoint's request shows.
    let counted = |text: &str| {
        DATA.iter().all(|e| {
            text.contains(&format!(
                "blocklab_http_requests_total{{endpoint=\"{}\",code=\"200\"}} 1",
                e.path()
            ))
        })
    };
    let mut reply = get(server.addr(), "/metrics").await;
    for _ in 0..50 {
        if counted(&reply.body) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        reply = get(server.addr(), "/metrics").await;
    }
    assert_eq!(reply.status, 200);
    assert!(reply.headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = reply.body;
    for endpoint in DATA {
        let line = format!("blocklab_http_requests_total{{endpoint=\"{}\",code=\"200\"}} 1", endpoint.path());
        assert!(text.contains(&line), "{model}: missing {line}");
        let count =
            format!("blocklab_http_request_duration_seconds_count{{endpoint=\"{}\"}} 1", endpoint.path());
        assert!(text.contains(&count), "missing {count}");
    }
    for name in [
        "tokio_worker_busy_seconds_total",
        "tokio_global_queue_depth",
        "tokio_blocking_threads",
        "tokio_alive_tasks",
        "blocklab_actor_pool_mailbox_depth",
        "blocklab_actor_async_mailbox_depth",
        "process_cpu_seconds_total",
    ] {
        assert!(text.contains(&format!("# HELP {name} ")), "no HELP for {name}");
    }
    for rt in ["http", "actors"] {
        assert!(text.contains(&format!("tokio_workers{{runtime=\"{rt}\"}}")), "no {rt} runtime");
    }
    assert_eq!(metric(&text, "tokio_workers{runtime=\"http\"}"), 2);
    assert_eq!(metric(&text, "tokio_workers{runtime=\"actors\"}"), 4);
    // spawn_blocking ran a read, so the blocking pool has at least one thread.
    assert!(metric(&text, "tokio_blocking_threads{runtime=\"http\"}") >= 1);
    assert_eq!(metric(&text, "blocklab_actor_pool_mailbox_depth"), 0);
    assert!(metric(&text, "blocklab_actor_pool_mailbox_depth_peak") >= 1);
    // Which read of the embedded database ran.
    assert!(
        text.contains(&format!("model=\"{model}\"")) && text.contains("embedded_read=\"index\""),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_1_0_and_1_1_with_and_without_keep_alive() {
    let server = embedded_server(small());
    let addr = server.addr();

    // HTTP/1.0 without keep-alive: one response, then the server closes.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /getData?id=9 HTTP/1.0\r\n\r\n").await.unwrap();
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut text)).await.unwrap().unwrap();
    assert!(text.starts_with("HTTP/1.0 200"), "{text}");
    assert!(text.ends_with(&serde_json::to_string(&content_record(9)).unwrap()), "{text}");

    // HTTP/1.0 with keep-alive (ab -k): two responses on one connection.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    for _ in 0..2 {
        s.write_all(b"GET /test HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").await.unwrap();
        let head = read_response(&mut s).await;
        assert!(head.starts_with("HTTP/1.0 200"), "{head}");
        assert!(head.to_ascii_lowercase().contains("connection: keep-alive"), "{head}");
    }

    // HTTP/1.1 keeps the connection by default, and closes on request.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /test HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
    s.write_all(b"GET /test HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut rest = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut rest)).await.unwrap().unwrap();
    assert!(rest.starts_with("HTTP/1.1 200") && rest.ends_with("works"), "{rest}");
}

/// Reads one response whose body is `works` or JSON with a content-length.
async fn read_response(s: &mut tokio::net::TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).await.unwrap();
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
        })
        .unwrap();
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await.unwrap();
    head + &String::from_utf8(body).unwrap()
}

/// The value of the sample line starting with `name ` (or `name{...} `).
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no sample {name}"))
        .trim()
        .parse::<f64>()
        .unwrap() as u64
}

/// Reads one `/test` response (its body is `works`) from a keep-alive connection.
async fn read_works(stream: &mut tokio::net::TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.ends_with(b"works") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed mid-response: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
}

/// How long the server took to close a connection it stopped hearing from, up to 20 s.
async fn closed_after(stream: &mut tokio::net::TcpStream) -> (Duration, String) {
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection was still open 20 s later");
    (started.elapsed(), String::from_utf8_lossy(&rest).into_owned())
}

/// `--header-timeout` cuts off a client that stops halfway through a head
/// (and, under hyper, an idle keep-alive connection), and never a connection
/// that keeps sending requests, however many timeouts long it lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_timeout_cuts_off_stalled_clients_and_never_a_busy_connection() {
    const REQUEST: &[u8] = b"GET /test HTTP/1.1\r\nhost: blocklab\r\n\r\n";
    let timeout = Duration::from_secs(1);
    let server = embedded_server(ServeConfig { header_timeout: timeout, ..small() });
    let addr = server.addr();
    let busy = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let started = std::time::Instant::now();
        let mut answered = 0;
        while started.elapsed() < timeout * 3 {
            stream.write_all(REQUEST).await.unwrap();
            read_works(&mut stream).await;
            answered += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Then idle: hyper closes a keep-alive connection after the timeout.
        (answered, closed_after(&mut stream).await.0)
    };
    let stalled = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"GET /test HTTP/1.1\r\nhost:").await.unwrap();
        closed_after(&mut stream).await.0
    };
    let ((answered, idle_closed), stalled_closed) = tokio::join!(busy, stalled);
    assert!(answered >= 10, "only {answered} requests answered in 3 timeouts");
    // The timer starts when the server starts reading, a little before the
    // client starts counting: hence the 200 ms of room below the timeout.
    for (what, closed) in [("idle", idle_closed), ("stalled", stalled_closed)] {
        assert!(closed >= timeout - Duration::from_millis(200), "{what} connection closed after {closed:?}");
    }

    // lean answers a started head 408 after the same timeout.
    let lean = embedded_server(ServeConfig { header_timeout: timeout, model: Model::Lean, ..small() });
    let mut stream = tokio::net::TcpStream::connect(lean.addr()).await.unwrap();
    stream.write_all(b"GET /test HTTP/1.1\r\nhost:").await.unwrap();
    let (closed, answer) = closed_after(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(closed >= timeout - Duration::from_millis(200), "lean closed after {closed:?}");
}
