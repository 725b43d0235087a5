//! The seed's Play 2.7 + Akka app (peers/play) on the real Neo4j that
//! `scripts/test` starts (`NEO4J_URI`): every endpoint answers the node blocklab
//! answers, bad ids are 400, and the execution models hold as the seed built
//! them: with Neo4j frozen (SIGSTOP), blocking reads take all of Play's
//! default-dispatcher threads so that even `/test` waits behind them, while
//! the same number of async reads leave it free. Without `NEO4J_URI` the
//! test skips, saying so (under `scripts/test`, `BLOCKLAB_NO_SKIP=1`, it
//! fails); a Neo4j it cannot freeze is always a failure.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Listening, get, neo4j_to_freeze, neo4j_uri, seed_neo4j, test_behind_frozen_reads};

const NODES: u64 = 1000;

/// Reads in flight while Neo4j is frozen: more than Play's default dispatcher
/// has threads here (the seed's fork-join: parallelism-min 4, factor 1).
const IN_FLIGHT: usize = 16;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn play(uri: &str) -> Listening {
    let script = repo().join("scripts/peers");
    let built = std::process::Command::new(&script).args(["check", "play"]).status().unwrap();
    assert!(built.success(), "play is not built: run scripts/peers build play");
    let mut command = std::process::Command::new(script);
    command.args(["run", "play", "--listen", "127.0.0.1:0", "--db", uri, "--nodes", &NODES.to_string()]);
    Listening::start(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plays_endpoints_answer_blocklabs_node_and_its_models_hold() {
    let Some(uri) = neo4j_uri() else { return };
    // Before anything else: the model checks freeze it.
    let neo4j = neo4j_to_freeze(&uri);
    seed_neo4j(&uri, NODES);
    let mut server = play(&uri);
    let addr = server.addr;

    assert_eq!(get(addr, "/test").await.body, "works");
    let paths = [
        "/getData",
        "/getDataAsync",
        "/getDataAsync2",
        "/getDataAkka",
        "/getDataAkkaAsync",
        "/getDataAkkaAsync2",
    ];
    for path in paths {
        let reply = get(addr, &format!("{path}?id=77")).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        assert_eq!(
            reply.body,
            r#"{"id":77,"name":"resource77","code":"test.lp.content.77","mimeType":"application/pdf","contentType":"Resource","body":"body string"}"#,
            "{path}"
        );
        assert_eq!(reply.headers["content-type"], "application/json", "{path}");
        // A random id in 1..=NODES when none is given, as blocklab.
        let random = get(addr, path).await;
        let id = random.json()["id"].as_u64().unwrap_or_else(|| panic!("{path}: {}", random.body));
        assert!((1..=NODES).contains(&id), "{path}: id {id}");
        for bad in ["?id=abc", "?id=0", "?id=1001"] {
            let reply = get(addr, &format!("{path}{bad}")).await;
            assert_eq!(reply.status, 400, "{path}{bad}: {}", reply.body);
            assert!(reply.json()["error"].is_string(), "{path}{bad}: {}", reply.body);
        }
    }

    // The seed's /getData blocks a dispatcher thread per read: with more
    // reads waiting than threads, /test queues behind them.
    let behind_blocking = test_behind_frozen_reads(addr, neo4j, "/getData", IN_FLIGHT).await;
    assert!(
        behind_blocking.is_none_or(|t| t >= Duration::from_secs(1)),
        "/test answered in {behind_blocking:?} behind {IN_FLIGHT} blocking reads: they did not hold the dispatcher"
    );
    // The async reads hold no thread while they wait.
    for path in ["/getDataAsync", "/getDataAkkaAsync"] {
        let behind_async = test_behind_frozen_reads(addr, neo4j, path, IN_FLIGHT).await;
        assert!(
            behind_async.is_some_and(|t| t < Duration::from_secs(1)),
            "/test took {behind_async:?} behind {IN_FLIGHT} reads of {path}: they held the dispatcher"
        );
    }

    server.sigterm();
    let code = server.exit_within(Duration::from_secs(20));
    assert!(matches!(code, Some(0 | 143)), "play exited with {code:?}");
}
