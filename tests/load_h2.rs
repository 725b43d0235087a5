//! `blocklab load --h2` against real servers: nginx speaking h2c (HTTP/2
//! over plain TCP, prior knowledge) and h2 over TLS with a certificate made
//! here, nginx without HTTP/2 (refused, counted, never waited for), and a
//! server of the test's own on the h2 crate's server side that records how
//! many streams were open at once and what each request carried.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blocklab::cli::Cli;
use blocklab::load::{self, ErrorKind};
use clap::Parser;

use common::nginx::{Ca, Nginx, TempDir, VALID};
use common::{load_errors as errors, load_plan as plan, load_run as run};

#[test]
fn h2c_and_h2_over_tls_against_nginx() {
    let Some(h2c) = Nginx::start_with("h2c", None, true, 100_000) else { return };
    let url = h2c.plain_url();
    let result = run(&["--h2", "-c", "2", "--streams", "8", "-n", "400", &url]);
    let s = &result.stats;
    assert_eq!((s.ok, s.error_total()), (400, 0), "{:?}", s.errors);
    assert_eq!(s.connections_opened, 2, "one connection each, every request on it");
    assert_eq!(s.body_bytes, 400 * "works".len() as u64);
    assert_eq!(s.server.as_deref().map(|v| v.starts_with("nginx")), Some(true), "{:?}", s.server);

    // The JSON says which protocol ran, and matches its schema.
    let args = ["--h2", "-c", "2", "--streams", "8", "-n", "400", &url];
    let report = load::report::LoadReport::new(&plan(&args), &result);
    assert_eq!((report.protocol.as_str(), report.streams), ("h2c", 8));
    common::validate_schema("schema/load-result.json", &serde_json::to_value(&report).unwrap());
    let text = load::report::text(&plan(&args), &result, &report);
    assert!(text.contains("HTTP/2 (h2c), up to 8 concurrent streams each"), "{text}");

    // Open loop: the schedule is kept over the streams, and measured from each due time too.
    let open = run(&["--h2", "-c", "2", "--streams", "4", "-z", "1s", "--rate", "200", &url]);
    let s = &open.stats;
    assert_eq!(s.error_total(), 0, "{:?}", s.errors);
    assert!((150..=201).contains(&s.completed), "{} completed at 200/s for 1 s", s.completed);
    assert_eq!(s.corrected.as_ref().map(|h| h.len()), Some(s.completed));

    // Over TLS: ALPN h2, the certificate checked against the test's own CA.
    let ca = Ca::new();
    let dir = TempDir::new("h2-roots");
    let roots = dir.write("ca.pem", &ca.pem());
    let Some(tls) = Nginx::start_with("h2-tls", Some(ca.server(&["127.0.0.1"], VALID)), true, 100_000) else {
        return;
    };
    let url = tls.url("127.0.0.1");
    let cacert = roots.to_str().unwrap();
    let args = ["--h2", "-c", "2", "--streams", "4", "-n", "200", "--cacert", cacert, &url];
    let result = run(&args);
    let s = &result.stats;
    assert_eq!((s.ok, s.error_total()), (200, 0), "{:?} {:?}", s.errors, s.tls_first_error);
    assert_eq!(s.handshake.len(), 2, "one handshake per connection");
    assert!(s.tls_session.as_deref().is_some_and(|t| t.contains("ALPN h2")), "{:?}", s.tls_session);
    let report = load::report::LoadReport::new(&plan(&args), &result);
    assert_eq!(report.protocol, "h2");
}

#[test]
fn a_goaway_moves_the_requests_the_server_did_not_take_to_a_new_connection() {
    // nginx ends each connection after 50 requests with a GOAWAY; the streams above its
    // last stream id, and the requests after it, go out again on a new connection.
    let Some(nginx) = Nginx::start_with("h2c-goaway", None, true, 50) else { return };
    let result = run(&["--h2", "-c", "2", "--streams", "8", "-n", "400", &nginx.plain_url()]);
    let s = &result.stats;
    assert_eq!((s.ok, s.error_total()), (400, 0), "{:?}", s.errors);
    assert!(s.connections_opened >= 8, "{} connections for 400 requests, 50 each", s.connections_opened);
}

#[test]
fn a_server_without_http2_is_counted_as_refused_not_waited_for() {
    let ca = Ca::new();
    let cases = [
        ("h1-plain", Nginx::start_with("h1-plain", None, false, 100_000)),
        ("h1-tls", Nginx::start_with("h1-tls", Some(ca.server(&["127.0.0.1"], VALID)), false, 100_000)),
    ];
    for (name, nginx) in cases {
        let Some(nginx) = nginx else { return };
        let url = if name == "h1-plain" { nginx.plain_url() } else { nginx.url("127.0.0.1") };
        let started = Instant::now();
        let result = run(&["--h2", "-c", "2", "-n", "6", "--timeout", "30s", "--insecure", &url]);
        assert_eq!(errors(&result, ErrorKind::H2Refused), 6, "{name}: {:?}", result.stats.errors);
        assert!(started.elapsed() < Duration::from_secs(15), "{name}: no waiting for the timeout");
        // Without --h2 the same server answers.
        assert_eq!(run(&["-k", "-c", "1", "-n", "3", "--insecure", &url]).stats.ok, 3, "{name}");
    }
}

/// What the test's own HTTP/2 server saw.
#[derive(Default)]
struct Seen {
    /// Streams open now, and the most at once.
    open: usize,
    most_open: usize,
    /// Each request: method, URI, body, whether a Connection field came.
    requests: Vec<(String, String, Vec<u8>, bool)>,
}

/// An HTTP/2 server (h2c) on the h2 crate: every request is held `hold`,
/// then answered `200 ok`.
fn h2_server(runtime: &tokio::runtime::Runtime, hold: Duration) -> (std::net::SocketAddr, Arc<Mutex<Seen>>) {
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shared = seen.clone();
    runtime.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let seen = shared.clone();
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(tcp).await else { return };
                while let Some(Ok((request, mut respond))) = connection.accept().await {
                    let seen = seen.clone();
                    tokio::spawn(async move {
                        {
                            let mut s = seen.lock().unwrap();
                            s.open += 1;
                            s.most_open = s.most_open.max(s.open);
                        }
                        let (head, mut body) = request.into_parts();
                        let mut data = Vec::new();
                        while let Some(Ok(chunk)) = body.data().await {
                            let _ = body.flow_control().release_capacity(chunk.len());
                            data.extend_from_slice(&chunk);
                        }
                        tokio::time::sleep(hold).await;
                        {
                            let mut s = seen.lock().unwrap();
                            s.open -= 1;
                            let connection = head.headers.contains_key(http::header::CONNECTION);
                            s.requests.push((
                                head.method.to_string(),
                                head.uri.to_string(),
                                data,
                                connection,
                            ));
                        }
                        let Ok(mut send) = respond.send_response(http::Response::new(()), false) else {
                            return;
                        };
                        let _ = send.send_data(bytes::Bytes::from_static(b"ok"), true);
                    });
                }
            });
        }
    });
    (addr, seen)
}

#[test]
fn streams_are_really_concurrent_and_a_post_body_arrives() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (addr, seen) = h2_server(&runtime, Duration::from_millis(100));
    let url = format!("http://{addr}/items?x=1");
    let result = run(&[
        "--h2",
        "-c",
        "2",
        "--streams",
        "8",
        "-n",
        "64",
        "-m",
        "POST",
        "-d",
        "hello",
        "-H",
        "Host: api.example",
        "-H",
        "Connection: keep-alive",
        &url,
    ]);
    assert_eq!((result.stats.ok, result.stats.error_total()), (64, 0), "{:?}", result.stats.errors);
    assert_eq!(result.stats.connections_opened, 2);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.most_open, 16, "2 connections x 8 streams in flight at once");
    assert_eq!(seen.requests.len(), 64);
    for (method, uri, body, connection) in &seen.requests {
        assert_eq!((method.as_str(), uri.as_str()), ("POST", "http://api.example/items?x=1"));
        assert_eq!(body, b"hello");
        assert!(!connection, "Connection is HTTP/1.1's, not sent over HTTP/2");
    }
}

#[test]
fn h2_connections_in_stages_open_and_close_with_the_ramp() {
    // 0 → 4 connections over 2 s, 4 for 1 s, down to 0 over 1 s; 2 streams each, ~5 ms a request.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (addr, seen) = h2_server(&runtime, Duration::from_millis(5));
    let url = format!("http://{addr}/");
    let r = run(&["--h2", "--streams", "2", "--connections", "4:2s,4:1s,0:1s", &url]);
    assert_eq!(r.stats.error_total(), 0, "{:?}", r.stats.errors);
    common::assert_follows_the_four_connection_ramp(&r);
    assert!(seen.lock().unwrap().most_open <= 8, "at most 4 connections x 2 streams");
}

#[test]
fn a_stalled_h2_server_times_out_per_stream_and_the_deadline_counts_in_flight() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (addr, _) = h2_server(&runtime, Duration::from_secs(3600));
    let url = format!("http://{addr}/");
    let started = Instant::now();
    let result = run(&["--h2", "-c", "1", "--streams", "4", "-n", "4", "--timeout", "300ms", &url]);
    assert_eq!(errors(&result, ErrorKind::RequestTimeout), 4, "{:?}", result.stats.errors);
    let result = run(&["--h2", "-c", "1", "--streams", "4", "-z", "300ms", &url]);
    assert_eq!(result.stats.in_flight_at_deadline, 4, "{:?}", result.stats.errors);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[test]
fn streams_need_h2_and_h2_has_no_pipeline() {
    let plan_of = |extra: &[&str]| {
        let args = ["blocklab", "load"].iter().chain(extra).copied().collect::<Vec<_>>();
        match Cli::try_parse_from(args).map_err(|e| e.to_string())?.command {
            blocklab::cli::Command::Load(l) => l.plan().map(|_| ()),
            _ => unreachable!(),
        }
    };
    assert!(plan_of(&["--streams", "4", "http://127.0.0.1:1/"]).is_err());
    let e = plan_of(&["--h2", "--pipeline", "2", "-k", "http://127.0.0.1:1/"]).unwrap_err();
    assert!(e.contains("--streams"), "{e}");
    assert!(plan_of(&["--h2", "--streams", "16", "http://127.0.0.1:1/"]).is_ok());
}
