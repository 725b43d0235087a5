//! What each execution model does to concurrency, on one HTTP worker with a
//! 50 ms simulated round trip, under both server stacks that serve study 1
//! (reactive: hyper + axum; lean). These assert semantics with generous
//! margins (serialized ≈ 8 × 50 ms, overlapped ≈ 1 × 50 ms), never speed.

mod common;

use std::time::Duration;

use blocklab::server::{Model, ServeConfig};
use common::{embedded_server, get, get_concurrently};

const LATENCY: Duration = Duration::from_millis(50);
const N: usize = 8;
const STACKS: [Model; 2] = [Model::Reactive, Model::Lean];

fn one_worker(model: Model) -> ServeConfig {
    ServeConfig { nodes: 100, workers: 1, db_latency: LATENCY, model, ..ServeConfig::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blocking_reads_on_the_worker_are_serialized() {
    for model in STACKS {
        let server = embedded_server(one_worker(model));
        let (replies, wall) = get_concurrently(server.addr(), "/getData?id=1", N).await;
        assert!(replies.iter().all(|r| r.status == 200), "{model}");
        // Serialized: ≈ 8 × 50 ms = 400 ms. Overlapped would be ≈ 50 ms.
        assert!(
            wall >= LATENCY * (N as u32) * 3 / 4,
            "{model}: 8 blocking reads took only {wall:?}: they overlapped"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn non_blocking_models_overlap() {
    for model in STACKS {
        let server = embedded_server(one_worker(model));
        for path in ["/getDataAsync?id=1", "/getDataSpawnBlocking?id=1", "/getDataAkkaAsync?id=1"] {
            let (replies, wall) = get_concurrently(server.addr(), path, N).await;
            assert!(replies.iter().all(|r| r.status == 200), "{path}");
            // Overlapped: ≈ 50 ms. Serialized would be ≈ 400 ms.
            assert!(wall < LATENCY * 4, "{model} {path}: 8 reads took {wall:?}: they did not overlap");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_sequential_reads_take_two_round_trips() {
    for model in STACKS {
        let server = embedded_server(one_worker(model));
        for path in ["/getDataAsync2?id=1", "/getDataAkkaAsync2?id=1"] {
            let reply = get(server.addr(), path).await;
            assert_eq!(reply.status, 200);
            assert!(
                reply.elapsed >= LATENCY * 2,
                "{model} {path}: {:?} is less than two round trips",
                reply.elapsed
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_waits_behind_blocking_reads_but_not_behind_async_ones() {
    for model in STACKS {
        let server = embedded_server(one_worker(model));
        let addr = server.addr();

        let blocking = tokio::spawn(get_concurrently(addr, "/getData?id=1", N));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let behind_blocking = get(addr, "/test").await;
        blocking.await.unwrap();
        // The only worker is inside a 50 ms sleep after another: /test waits its turn.
        assert!(
            behind_blocking.elapsed >= LATENCY * 2,
            "{model}: /test answered in {:?} while the only worker was blocked",
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
            "{model}: /test took {:?} beside non-blocking reads",
            beside_async.elapsed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blocking_actor_pool_with_one_http_worker_does_not_deadlock() {
    for model in STACKS {
        let server = embedded_server(one_worker(model));
        let (replies, wall) = tokio::time::timeout(
            Duration::from_secs(10),
            get_concurrently(server.addr(), "/getDataAkka?id=1", N),
        )
        .await
        .unwrap_or_else(|_| panic!("{model}: /getDataAkka deadlocked with one HTTP worker"));
        assert!(
            replies.iter().all(|r| r.status == 200),
            "{:?}",
            replies.iter().map(|r| r.status).collect::<Vec<_>>()
        );
        // The handler blocks the only HTTP worker per request, so they queue as /getData does.
        assert!(wall >= LATENCY * (N as u32) * 3 / 4, "{model}: {wall:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_blocking_actor_pool_is_four_wide() {
    // Enough HTTP workers that the handlers blocked on replies are not the
    // limit: 12 blocking reads then take 3 rounds of the pool's 4 actors.
    const ASKS: usize = 12;
    for model in STACKS {
        let server = embedded_server(ServeConfig { workers: ASKS + 2, ..one_worker(model) });
        let (replies, wall) = get_concurrently(server.addr(), "/getDataAkka?id=1", ASKS).await;
        assert!(replies.iter().all(|r| r.status == 200), "{model}");
        // 4 wide: ≈ 3 × 50 ms. One wide would be 12 × 50 ms, unbounded 1 × 50 ms.
        assert!(wall >= LATENCY * 5 / 2, "{model}: 12 asks took only {wall:?}: wider than 4");
        assert!(wall < LATENCY * 8, "{model}: 12 asks took {wall:?}: narrower than 4");
    }
}
