//! Allocations per `/test` request, counted by the bench build's global
//! allocator (issue 21): at most 8 under `reactive` (hyper + axum), none
//! under `lean`. The counter exists only in that build, so this file is
//! empty in any other:
//!
//! ```sh
//! cargo test --release --features count-allocations --test allocations \
//!     --target-dir target/count-allocations
//! ```
//!
//! The count is of the whole process, so the client here allocates nothing
//! while it counts: a blocking socket, one request written from a constant,
//! answers read into a buffer on the stack. `bench/allocations.py` gives the
//! same figure for every endpoint, over a real load generator.

#![cfg(feature = "count-allocations")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use blocklab::db::EmbeddedGraph;
use blocklab::server::allocations::counts;
use blocklab::server::{Model, RunningServer, ServeConfig};

const REQUEST: &[u8] = b"GET /test HTTP/1.1\r\nHost: x\r\n\r\n";

/// Sends `n` requests for `/test`, one after the other on `stream`, and
/// reads each whole answer.
fn exchange(stream: &mut TcpStream, n: usize) {
    let mut buf = [0u8; 1024];
    for _ in 0..n {
        stream.write_all(REQUEST).unwrap();
        let mut filled = 0;
        while !buf[..filled].ends_with(b"\r\n\r\nworks") {
            let read = stream.read(&mut buf[filled..]).unwrap();
            assert!(read > 0, "the server closed the connection");
            filled += read;
        }
    }
}

/// Allocations per request on one keep-alive connection to a `model`
/// server: the growth over `counted` requests after `warm` ones.
fn per_request(model: Model) -> f64 {
    let config = ServeConfig { model, nodes: 100, workers: 1, ..ServeConfig::default() };
    let backend = Arc::new(EmbeddedGraph::load(config.nodes, config.db_latency).unwrap());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = RunningServer::start(config, backend, listener).unwrap();
    let addr: SocketAddr = server.addr();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    // The connection's own allocations (its task, its first buffers) and
    // each first time a thread takes a path stay out of the count.
    exchange(&mut stream, 2_000);
    let counted = 10_000;
    let (before, _) = counts().expect("this build counts allocations");
    exchange(&mut stream, counted);
    let (after, _) = counts().unwrap();
    drop(stream);
    server.stop().unwrap();
    (after - before) as f64 / counted as f64
}

#[test]
fn test_allocates_at_most_8_times_per_request_under_reactive_and_never_under_lean() {
    let reactive = per_request(Model::Reactive);
    let lean = per_request(Model::Lean);
    println!("allocations per /test request: reactive {reactive:.2}, lean {lean:.2}");
    assert!(reactive <= 8.0, "reactive: {reactive:.2} allocations per /test request, the goal is 8 at most");
    // Less than one in a hundred requests: what the runtime does now and
    // then, not the request.
    assert!(lean < 0.01, "lean: {lean:.2} allocations per /test request, the goal is none");
}
