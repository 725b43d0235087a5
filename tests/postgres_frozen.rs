//! Each ecosystem's PostgreSQL stack in front of a frozen link: a real peer
//! (`scripts/peers run NAME --pool 2`) reads the shared cluster
//! (`POSTGRES_URL`, which `scripts/test` starts) through a real Toxiproxy,
//! the link freezes for 3 s (the bench's own `freeze` toxics: no byte passes
//! either way, none is dropped), four reads are sent into the freeze, twice
//! the pool, and `/test` is sent beside them. What each stack does is its
//! own, and asserted as measured:
//!
//! - python-pg `/getData` (psycopg called inside `async def`): the one
//!   event loop waits in the driver, so `/test` gets no answer until the
//!   link thaws;
//! - spring-jdbc `/getData` (JdbcTemplate on Tomcat's 200 threads, HikariCP
//!   2): two request threads wait on their sockets (pgjdbc's `socketTimeout`
//!   is 0: no limit) and two in HikariCP for a connection (its
//!   `connectionTimeout`, 30 s, is longer than the freeze), while `/test`
//!   answers on another thread;
//! - go-pgx and node-pg, non-blocking only (Go parks goroutines, Node awaits
//!   on its loop): `/test` answers during the freeze.
//!
//! In every case the reads are held, not failed: none answers before the
//! thaw, and each answers its own row after it. The freeze (3 s) is shorter
//! than HikariCP's 5 s `validationTimeout`, which would otherwise replace a
//! connection that idled past 500 ms before lending it.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use blocklab::harness::target::Targets;
use blocklab::harness::toxiproxy::{Toxiproxy, upstream_of};
use blocklab::studies::execution_models::run::stall_toxics;
use blocklab::studies::execution_models::stall::StallSpec;
use common::{Listening, POSTGRES_NODES, get, seeded_postgres_url};

/// The freeze.
const FREEZE: &str = "freeze:3s";
/// Reads sent into the freeze: twice each peer's pool.
const READS: u64 = 4;

/// How `/test` fared beside the reads held by the freeze.
#[derive(Debug, PartialEq)]
enum Beside {
    /// Answered, in this long.
    Answered(Duration),
    /// Not answered within 1 s, probed every 250 ms over the freeze.
    Held,
}

/// `peer` started with `--pool 2` through a fresh link to the shared
/// cluster; [`READS`] reads of `path` sent into a freeze of the link, and
/// `/test` beside them. Returns how `/test` fared; asserts that every read
/// was held through the freeze and answered its own row after it.
async fn through_a_frozen_link(peer: &str, path: &str) -> Option<Beside> {
    // One at a time: a JVM starting beside another test's probes would slow its /test.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    let url = seeded_postgres_url()?;
    let targets = Targets::of_this_checkout(PathBuf::from(env!("CARGO_BIN_EXE_blocklab"))).unwrap();
    let toxiproxy = Toxiproxy::start(&targets, None).unwrap_or_else(|e| panic!("{e}"));
    let proxy = toxiproxy.proxy("frozen", &upstream_of(&url).unwrap()).unwrap();
    let db = proxy.url_for(&url).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/peers");
    let built = std::process::Command::new(script).args(["check", peer]).status().unwrap();
    assert!(built.success(), "{peer} is not built: run scripts/peers build {peer}");
    let mut command = std::process::Command::new(script);
    command.args([
        "run",
        peer,
        "--listen",
        "127.0.0.1:0",
        "--db",
        &db,
        "--nodes",
        &POSTGRES_NODES.to_string(),
    ]);
    command.args(["--pool", "2"]);
    let server = Listening::start(command);
    let addr = server.addr;
    // Its pool open before the freeze: as many reads at once as will meet it (a pool opens
    // connections on demand, and one opened into the freeze fails at the driver's connect
    // timeout instead: 3 s in go-pgx and node-pg, measured).
    let warm: Vec<_> = (1..=READS)
        .map(|id| {
            let url = format!("{path}?id={id}");
            tokio::spawn(async move { (id, get(addr, &url).await) })
        })
        .collect();
    for read in warm {
        let (id, reply) = read.await.unwrap();
        assert_eq!(reply.json()["id"], id, "{peer} {path}: {}", reply.body);
    }

    let spec = StallSpec::parse(FREEZE).unwrap();
    let toxics = stall_toxics(spec);
    for toxic in &toxics {
        proxy.add(toxic).unwrap();
    }
    let frozen = Instant::now();
    let reads: Vec<_> = (1..=READS)
        .map(|i| {
            let url = format!("{path}?id={}", 100 + i);
            tokio::spawn(async move { get(addr, &url).await })
        })
        .collect();
    let beside = probe_test(addr, frozen + spec.length - Duration::from_millis(500)).await;
    tokio::time::sleep((frozen + spec.length).saturating_duration_since(Instant::now())).await;
    let done_in_freeze = reads.iter().filter(|r| r.is_finished()).count();
    for toxic in &toxics {
        proxy.remove(&toxic.name).unwrap();
    }
    assert_eq!(done_in_freeze, 0, "{peer} {path}: {done_in_freeze} reads answered while no byte could pass");
    for (i, read) in (1..=READS).zip(reads) {
        let reply = tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .unwrap_or_else(|_| {
                panic!("{peer} {path}: a read held by the freeze had no answer 20 s after it")
            })
            .unwrap();
        assert_eq!(reply.status, 200, "{peer} {path}: {}", reply.body);
        assert_eq!(reply.json()["id"], 100 + i, "{peer} {path}: {}", reply.body);
    }
    eprintln!("{peer} {path}: /test beside {READS} frozen reads: {beside:?}");
    drop(server);
    Some(beside)
}

/// `/test` sent every 250 ms until one gets no answer within 1 s (Held) or
/// `until`; the slowest answer otherwise.
async fn probe_test(addr: SocketAddr, until: Instant) -> Beside {
    let mut slowest = Duration::ZERO;
    tokio::time::sleep(Duration::from_millis(250)).await;
    while Instant::now() < until {
        let probe = tokio::spawn(async move { get(addr, "/test").await });
        match tokio::time::timeout(Duration::from_secs(1), probe).await {
            Err(_) => return Beside::Held,
            Ok(reply) => {
                let reply = reply.unwrap();
                assert_eq!(reply.body, "works");
                slowest = slowest.max(reply.elapsed);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Beside::Answered(slowest)
}

fn answered_within_a_second(beside: &Beside) -> bool {
    matches!(beside, Beside::Answered(t) if *t < Duration::from_secs(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_pg_psycopg_inside_async_def_holds_the_event_loop_through_a_frozen_link() {
    let Some(beside) = through_a_frozen_link("python-pg", "/getData").await else { return };
    assert_eq!(beside, Beside::Held, "/test answered while psycopg waited inside async def");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_pg_asyncpg_keeps_its_event_loop_through_a_frozen_link() {
    let Some(beside) = through_a_frozen_link("python-pg", "/getDataAsync").await else { return };
    assert!(answered_within_a_second(&beside), "/test beside asyncpg's frozen reads: {beside:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spring_jdbc_holds_request_threads_and_still_answers_on_others_through_a_frozen_link() {
    let Some(beside) = through_a_frozen_link("spring-jdbc", "/getData").await else { return };
    assert!(answered_within_a_second(&beside), "/test beside JDBC's frozen reads: {beside:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_pgx_parks_its_goroutines_through_a_frozen_link() {
    let Some(beside) = through_a_frozen_link("go-pgx", "/getDataAsync").await else { return };
    assert!(answered_within_a_second(&beside), "/test beside pgx's frozen reads: {beside:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pg_keeps_its_event_loop_through_a_frozen_link() {
    let Some(beside) = through_a_frozen_link("node-pg", "/getDataAsync").await else { return };
    assert!(answered_within_a_second(&beside), "/test beside node-postgres's frozen reads: {beside:?}");
}
