//! The real `blocklab` binary: start on port 0, read the `listening on` line,
//! talk to it over TCP, stop it with SIGTERM; and bad flags exit with 2.

mod common;

use std::time::{Duration, Instant};

use common::{Listening, blocklab};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prints_its_address_answers_and_stops_on_sigterm() {
    let mut server = Listening::serve(&["--db-latency", "1ms"]);
    let addr = server.addr;
    assert_eq!(common::get(addr, "/test").await.body, "works");
    let reply = common::get(addr, "/getDataAkka?id=77").await;
    assert_eq!(reply.json()["code"], "test.lp.content.77");

    server.sigterm();
    assert_eq!(server.exit_within(Duration::from_secs(10)), Some(0));
    assert!(std::net::TcpStream::connect(addr).is_err(), "still accepting after exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_in_flight_requests_finish() {
    let mut server = Listening::serve(&["--db-latency", "400ms"]);
    let addr = server.addr;
    let in_flight = tokio::spawn(common::get_concurrently(addr, "/getDataAsync?id=5", 3));
    tokio::time::sleep(Duration::from_millis(150)).await;
    server.sigterm();
    let (replies, _) = in_flight.await.unwrap();
    assert!(replies.iter().all(|r| r.status == 200), "in-flight requests were cut off");
    assert_eq!(server.exit_within(Duration::from_secs(10)), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_a_bounded_time_for_slow_requests() {
    let mut server = Listening::serve(&["--db-latency", "30s", "--shutdown-timeout", "200ms"]);
    let addr = server.addr;
    let _stuck = tokio::spawn(common::try_get(addr, "/getDataAsync?id=5"));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = Instant::now();
    server.sigterm();
    assert_eq!(server.exit_within(Duration::from_secs(5)), Some(0));
    assert!(started.elapsed() < Duration::from_secs(4), "shutdown took {:?}", started.elapsed());
}

#[test]
fn bad_flags_give_one_line_and_exit_status_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    for (args, needle) in [
        (vec!["serve", "--nodes", "0"], "--nodes"),
        (vec!["serve", "--db-latency", "soon"], "--db-latency"),
        (vec!["serve", "--workers", "x"], "--workers"),
        (vec!["serve", "--db", "mysql://neo4j:secret@h:7687"], "unsupported database scheme"),
        (vec!["serve", "--db", "falkor://neo4j:secret@h:notaport"], "invalid port number"),
        (vec!["serve", "--listen", &taken], "in use"),
        (vec!["serve", "--bogus"], "--bogus"),
        (vec!["fly"], "fly"),
        (vec![], "command"),
    ] {
        let out = common::output_within(blocklab().args(&args), std::time::Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: more than one line: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("secret"), "{args:?} echoed a credential: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn help_shows_the_endpoints_and_examples() {
    let out = common::output_within(blocklab().args(["serve", "--help"]), std::time::Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in ["--db-latency", "--workers", "/getDataSpawnBlocking", "Examples:"] {
        assert!(help.contains(needle), "help lacks {needle}");
    }
}
