//! The bench reads the server's figures from `/metrics` by name. A real
//! server, scraped through the same code the bench uses: if a metric is
//! renamed, this fails instead of a report silently showing zeros.

mod common;

use std::time::Duration;

use blocklab::harness::scrape::{Scrape, ServerFigures};
use blocklab::server::ServeConfig;
use common::{embedded_server, get_concurrently};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_reads_every_figure_from_a_real_servers_metrics() {
    let server = embedded_server(ServeConfig {
        nodes: 100,
        workers: 1,
        db_latency: Duration::from_millis(5),
        ..ServeConfig::default()
    });
    let addr = server.addr();
    let scrape = move || Scrape::fetch(addr, Duration::from_secs(5)).unwrap();
    let before = tokio::task::spawn_blocking(scrape).await.unwrap();
    // Work for every figure: the actor pool queues (8 blocking asks on 4
    // workers), the blocking pool runs reads, the async actor has reads in flight.
    let (a, b, c) = tokio::join!(
        get_concurrently(addr, "/getDataAkka?id=1", 8),
        get_concurrently(addr, "/getDataSpawnBlocking?id=1", 8),
        get_concurrently(addr, "/getDataAkkaAsync?id=1", 8),
    );
    for (replies, _) in [&a, &b, &c] {
        assert!(replies.iter().all(|r| r.status == 200));
    }
    let after = tokio::task::spawn_blocking(scrape).await.unwrap();

    let f = ServerFigures::between("/getDataSpawnBlocking", &before, &[], &after, 0, 0.0);
    assert_eq!(f.http_workers, 1, "tokio_workers{{runtime=\"http\"}}");
    assert_eq!(f.server_requests, 8, "blocklab_http_requests_total");
    assert!(f.server_mean_ms >= 5.0, "blocklab_http_request_duration_seconds_*: {f:?}");
    assert!(f.server_p99_ms >= 5.0, "the duration histogram's buckets: {f:?}");
    assert!(f.spawn_blocking_in_flight_max >= 1, "blocklab_spawn_blocking_in_flight: {f:?}");
    assert!(f.http_busy_ratio > 0.0, "tokio_worker_busy_seconds_total: {f:?}");
    let f = ServerFigures::between("/getDataAkka", &before, &[], &after, 0, 0.0);
    assert!(f.actor_mailbox_max >= 1, "blocklab_actor_pool_mailbox_depth: {f:?}");
    assert!(f.actor_busy_ratio > 0.0, "tokio_worker_busy_seconds_total{{runtime=\"actors\"}}: {f:?}");
    let f = ServerFigures::between("/getDataAkkaAsync", &before, &[], &after, 0, 0.0);
    assert!(f.async_reads_in_flight_max >= 1, "blocklab_actor_async_reads_in_flight: {f:?}");
    let info: Vec<String> = after.info().into_iter().map(|(k, _)| k).collect();
    for key in ["model", "db", "workers", "nodes"] {
        assert!(info.iter().any(|k| k == key), "blocklab_info lacks {key}: {info:?}");
    }
}
