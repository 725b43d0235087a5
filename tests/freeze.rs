//! `--db-stall freeze:LENGTH` holds, it does not drop: through a real
//! Toxiproxy (the `toxiproxy` peer) in front of a real Neo4j and a real
//! FalkorDB (as `scripts/test` starts them: `NEO4J_URI`, `FALKOR_URL`), the
//! bench's own freeze toxics (`stall_toxics`) are put on the link, a read is
//! sent during the freeze, and it must come back with its own node once the
//! freeze ends: not before (no byte passed), not as a failure (nothing was
//! dropped), not as another node (the connection stayed in step). With
//! `BLOCKLAB_NO_SKIP=1` (scripts/test) a missing database is a failure, not a skip.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blocklab::db::{DbSettings, DbUrl, FalkorGraph, GraphBackend, Neo4jGraph};
use blocklab::harness::target::Targets;
use blocklab::harness::toxiproxy::Toxiproxy;
use blocklab::studies::execution_models::run::stall_toxics;
use blocklab::studies::execution_models::stall::StallSpec;

/// The dataset tests/neo4j.rs seeds (Neo4j Community holds one database).
const NODES: u64 = 1000;
/// The freeze.
const FREEZE: &str = "freeze:3s";
/// When the read is sent, into the freeze.
const SENT_AT: Duration = Duration::from_millis(500);
/// Scheduling on two shared cores.
const MARGIN: Duration = Duration::from_millis(300);

fn backend(url: &str) -> Arc<dyn GraphBackend> {
    // A read's own limit far above the freeze: the freeze must hold it, not fail it.
    let settings = DbSettings { timeout: Duration::from_secs(15), ..DbSettings::default() };
    match url.parse::<DbUrl>().unwrap() {
        DbUrl::Neo4j(target) => Arc::new(Neo4jGraph::new(target, settings).unwrap()),
        DbUrl::Falkor(target) => Arc::new(FalkorGraph::new(target, settings)),
        other => panic!("{url} is not a networked database ({other:?})"),
    }
}

/// A read sent during the freeze gets its own node after it, on `db_url`'s
/// database through a fresh proxy.
async fn a_read_during_the_freeze_gets_its_own_node_after_it(db_url: &str) {
    let seeded = {
        let url = db_url.to_string();
        tokio::task::spawn_blocking(move || backend(&url).seed(NODES, &|_| {}).unwrap()).await.unwrap()
    };
    assert_eq!(seeded.after, NODES);
    let targets = Targets::of_this_checkout(PathBuf::from(env!("CARGO_BIN_EXE_blocklab"))).unwrap();
    let toxiproxy = Toxiproxy::start(&targets, None).unwrap_or_else(|e| panic!("{e}"));
    let upstream = blocklab::harness::toxiproxy::upstream_of(db_url).unwrap();
    let proxy = toxiproxy.proxy("freeze", &upstream).unwrap();
    let client = backend(&proxy.url_for(db_url).unwrap());
    // The connection is open and in use before the freeze.
    assert_eq!(client.read(7).await.unwrap().id, 7);

    let spec = StallSpec::parse(FREEZE).unwrap();
    let toxics = stall_toxics(spec);
    assert_eq!(toxics.len(), 2, "a freeze holds both ways");
    let frozen = Instant::now();
    for toxic in &toxics {
        proxy.add(toxic).unwrap();
    }
    tokio::time::sleep(SENT_AT).await;
    let id = 421;
    let reader = client.clone();
    let read = tokio::spawn(async move {
        let sent = Instant::now();
        (reader.read(id).await, sent.elapsed())
    });
    tokio::time::sleep(spec.length.saturating_sub(SENT_AT)).await;
    assert!(!read.is_finished(), "a read sent during the freeze came back before it ended");
    let thawed = Instant::now();
    for toxic in &toxics {
        proxy.remove(&toxic.name).unwrap();
    }
    let (answer, took) = tokio::time::timeout(Duration::from_secs(10), read).await.unwrap().unwrap();
    let node = answer.unwrap_or_else(|e| panic!("the read sent during the freeze failed: {e}"));
    assert_eq!(node.id, id, "the read sent during the freeze got another node");
    assert!(
        took + MARGIN >= spec.length - SENT_AT,
        "it was held for {took:?}, less than the {:?} of freeze left when it was sent",
        spec.length - SENT_AT
    );
    assert!(
        thawed.elapsed() < Duration::from_secs(2),
        "it came {:?} after the freeze ended: held bytes are delivered when it ends",
        thawed.elapsed()
    );
    // And the connection is in step after it: the next reads are right.
    for id in [3, 999, 500] {
        assert_eq!(client.read(id).await.unwrap().id, id);
    }
    assert!(frozen.elapsed() >= spec.length);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neo4j_a_read_during_a_freeze_gets_its_own_node_after_it() {
    let Some(uri) = common::neo4j_uri() else { return };
    a_read_during_the_freeze_gets_its_own_node_after_it(&uri).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn falkordb_a_read_during_a_freeze_gets_its_own_node_after_it() {
    let Some(url) = common::falkor_url() else { return };
    let url = format!("{}/freeze_{}", url.trim_end_matches('/'), std::process::id());
    a_read_during_the_freeze_gets_its_own_node_after_it(&url).await;
}
