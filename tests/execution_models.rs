//! What each execution model does to concurrency, on one HTTP worker with a
//! 50 ms simulated round trip. These assert semantics with generous margins
//! (serialized ≈ 8 × 50 ms, overlapped ≈ 1 × 50 ms), never speed.

mod common;

use std::time::Duration;

use blocklab::server::ServeConfig;
use common::{embedded_server, get, get_concurrently};

const LATENCY: Duration = Duration::from_millis(50);
const N: usize = 8;

fn one_worker() -> ServeConfig {
    ServeConfig { nodes: 100, workers: 1, db_latency: LATENCY, ..ServeConfig::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blocking_reads_on_the_worker_are_serialized() {
    let server = embedded_server(one_worker());
    let (replies, wall) = get_concurrently(server.addr(), "/getData?id=1", N).await;
    assert!(replies.iter().all(|r| r.status == 200));
    // Serialized: ≈ 8 × 50 ms = 400 ms. Overlapped would be ≈ 50 ms.
    assert!(wall >= LATENCY * (N as u32) * 3 / 4, "8 blocking reads took only {wall:?}: they overlapped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn non_blocking_models_overlap() {
    let server = embedded_server(one_worker());
    for path in ["/getDataAsync?id=1", "/getDataSpawnBlocking?id=1", "/getDataAkkaAsync?id=1"] {
        let (replies, wall) = get_concurrently(server.addr(), path, N).await;
        assert!(replies.iter().all(|r| r.status == 200), "{path}");
        // Overlapped: ≈ 50 ms. Serialized would be ≈ 400 ms.
        assert!(wall < LATENCY * 4, "{path}: 8 reads took {wall:?}: they did not overlap");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_sequential_reads_take_two_round_trips() {
    let server = embedded_server(one_worker());
    for path in ["/getDataAsync2?id=1", "/getDataAkkaAsync2?id=1"] {
        let reply = get(server.addr(), path).await;
        assert_eq!(reply.status, 200);
        assert!(reply.elapsed >= LATENCY * 2, "{path}: {:?} is less than two round trips", reply.elapsed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_waits_behind_blocking_reads_but_not_behind_async_ones() {
    let server = embedded_server(one_worker());
    let addr = server.addr();

    let blocking = tokio::spawn(get_concurrently(addr, "/getData?id=1", N));
    tokio::time::sleep(Duration::from_millis(20)).await;
    let behind_blocking = get(addr, "/test").await;
    blocking.await.unwrap();
    // The only worker is inside a 50 ms sleep after another: /test waits its turn.
    assert!(
        behind_blocking.elapsed >= LATENCY * 2,
        "/test answered in {:?} while the only worker was blocked",
        behind_blocking.elapsed
    );

    let non_blocking = tokio::spawn(get_concurrently(addr, "/getDataAsync?id=1", N));
    tokio::time::sleep(Duration::from_millis(20)).await;
    let beside_async = get(addr, "/test").await;
    non_blocking.await.unwrap();
    // Behind the blocked worker it would wait at least 2 × LATENCY; beside
    // non-blocking reads it waits for none of them (LATENCY is margin for a busy machine).
    assert!(
        beside_async.elapsed < LATENCY,
        "/test took {:?} beside non-blocking reads",
        beside_async.elapsed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blocking_actor_pool_with_one_http_worker_does_not_deadlock() {
    let server = embedded_server(one_worker());
    let (replies, wall) = tokio::time::timeout(
        Duration::from_secs(10),
        get_concurrently(server.addr(), "/getDataAkka?id=1", N),
    )
    .await
    .expect("/getDataAkka deadlocked with one HTTP worker");
    assert!(
        replies.iter().all(|r| r.status == 200),
        "{:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    // The handler blocks the only HTTP worker per request, so they queue as /getData does.
    assert!(wall >= LATENCY * (N as u32) * 3 / 4, "{wall:?}");
}
