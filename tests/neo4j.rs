//! Against a real Neo4j server, when `NEO4J_URI` names one (bolt://HOST:PORT,
//! with `NEO4J_USER` / `NEO4J_PASSWORD`): seeding and every endpoint through
//! neo4rs. No Neo4j server can be installed on the project's machines, so
//! the test that needs one is `#[ignore]`d — reported as skipped by the test
//! run — and `scripts/test` runs it when `NEO4J_URI` is set.

mod common;

use std::sync::Arc;
use std::time::Duration;

use blocklab::graph::{DbSettings, DbUrl, GraphBackend, Neo4jGraph, content_record};
use blocklab::server::{Endpoint, ServeConfig};
use common::{get, server_with};

fn neo4j_uri() -> String {
    std::env::var("NEO4J_URI").expect("this test runs only with NEO4J_URI set (scripts/test does that)")
}

fn backend(uri: &str) -> Arc<dyn GraphBackend> {
    let DbUrl::Neo4j(target) = uri.parse::<DbUrl>().unwrap() else {
        panic!("{uri} is not bolt:// or neo4j://")
    };
    let settings = DbSettings { timeout: Duration::from_secs(30), ..DbSettings::default() };
    Arc::new(Neo4jGraph::new(target, settings).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Neo4j server: set NEO4J_URI"]
async fn seeds_and_serves_every_endpoint_from_neo4j() {
    let uri = neo4j_uri();
    let graph = backend(&uri);
    let seeding = graph.clone();
    let report = tokio::task::spawn_blocking(move || seeding.seed(300, &|_| {})).await.unwrap().unwrap();
    assert_eq!(report.after, 300);
    let again = graph.clone();
    let report = tokio::task::spawn_blocking(move || again.seed(300, &|_| {})).await.unwrap().unwrap();
    assert_eq!((report.before, report.after), (300, 300), "seeding twice leaves N nodes");

    let config = ServeConfig { nodes: 300, workers: 2, db: uri.parse().unwrap(), ..ServeConfig::default() };
    let server = server_with(config, graph);
    for endpoint in Endpoint::DATA {
        let reply = get(server.addr(), &format!("{}?id=77", endpoint.path())).await;
        assert_eq!(reply.status, 200, "{}: {}", endpoint.path(), reply.body);
        assert_eq!(reply.json(), serde_json::to_value(content_record(77)).unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bolt_server_that_is_down_gives_503_within_the_timeout() {
    // Needs no Neo4j: nothing listens on this port.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let uri = format!("bolt://neo4j:pw@127.0.0.1:{port}");
    let DbUrl::Neo4j(target) = uri.parse::<DbUrl>().unwrap() else { unreachable!() };
    let settings = DbSettings { timeout: Duration::from_millis(500), ..DbSettings::default() };
    let graph: Arc<dyn GraphBackend> = Arc::new(Neo4jGraph::new(target, settings).unwrap());
    let config = ServeConfig { nodes: 10, workers: 1, db: uri.parse().unwrap(), ..ServeConfig::default() };
    let server = server_with(config, graph);
    for path in ["/getData?id=1", "/getDataAsync?id=1", "/getDataSpawnBlocking?id=1"] {
        let reply = get(server.addr(), path).await;
        assert_eq!(reply.status, 503, "{path}: {}", reply.body);
        assert!(reply.elapsed < Duration::from_secs(2), "{path} took {:?}", reply.elapsed);
        assert!(!reply.body.contains("pw@"), "{}", reply.body);
    }
}
