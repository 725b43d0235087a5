//! The repository's study-1 peers on PostgreSQL, each checked as a user
//! would check their own: `blocklab peers check peers/NAME --db postgres`
//! (a PostgreSQL the check starts, seeds and wipes: the right row for every
//! endpoint it lists, 400 past N, stopped by SIGTERM); then started with
//! `--pool 2` against the shared cluster (`POSTGRES_URL`, which
//! `scripts/test` starts) under 40 concurrent requests, its connections
//! counted in `pg_stat_activity` by its `application_name`. Real drivers,
//! real pools, a real server; none skipped under `BLOCKLAB_NO_SKIP=1`.

mod common;

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{POSTGRES_NODES, blocklab, output_within, seeded_postgres_url};

/// The peers whose manifest says `db = "postgres"`, each tested below.
const PEERS: [&str; 6] = ["spring-jdbc", "spring-jdbc-vt", "spring-r2dbc", "python-pg", "go-pgx", "node-pg"];

/// The rows of the shared cluster.
const NODES: u64 = POSTGRES_NODES;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A manifest key, as `scripts/peer-manifest` prints it.
fn manifest(peer: &str, key: &str) -> String {
    let out = Command::new(repo().join("scripts/peer-manifest"))
        .arg(repo().join("peers").join(peer).join("peer.toml"))
        .arg(key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{peer} {key}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The study-1 endpoints a peer lists.
fn reads(peer: &str) -> Vec<String> {
    manifest(peer, "endpoints").split_whitespace().filter(|e| *e != "/test").map(String::from).collect()
}

#[test]
fn every_postgres_peer_of_the_repository_is_tested_here() {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(repo().join("peers")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("peer.toml")) else { continue };
        let db = text.lines().find_map(|l| l.strip_prefix("db = ")).unwrap_or_default();
        if db.trim_matches('"').split_whitespace().any(|d| d == "postgres") {
            found.push(dir.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    found.sort();
    let mut tested = PEERS.map(String::from).to_vec();
    tested.sort();
    assert_eq!(found, tested, "a PostgreSQL peer without its test here, or a test without its peer");
}

/// `peers check peers/NAME --db postgres`: every endpoint it lists answered
/// its row, 400 past N, and the PostgreSQL it started wiped.
fn passes_the_check(peer: &str) {
    let dir = repo().join("peers").join(peer);
    let mut command = blocklab();
    command.args(["peers", "check"]).arg(&dir).args([
        "--db",
        "postgres",
        "--nodes",
        "200",
        "--ready-within",
        "120s",
        "--stop-within",
        "10s",
    ]);
    let out = output_within(&mut command, Duration::from_secs(600));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{peer}:\n{stdout}{stderr}");
    let endpoints = reads(peer);
    assert!(!endpoints.is_empty(), "{peer} lists no study-1 endpoint");
    for endpoint in &endpoints {
        assert!(
            stdout.contains(&format!("ok    GET {endpoint}?id=")),
            "{peer}: no check of {endpoint}:\n{stdout}"
        );
    }
    assert!(stdout.contains("?id=201: 400"), "{peer}:\n{stdout}");
    assert!(stdout.contains("ok    SIGTERM"), "{peer}:\n{stdout}");
}

/// The most connections `application_name` = `peer` held at once while
/// `during` ran, sampled every 20 ms.
fn most_connections(url: &str, peer: &str, during: impl FnOnce() + Send) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let config: tokio_postgres::Config = url.parse().unwrap();
    let client = runtime.block_on(async {
        let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    });
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            during();
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let mut most = 0;
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            let row =
                runtime
                    .block_on(client.query_one(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                        &[&peer],
                    ))
                    .unwrap();
            most = most.max(row.get::<_, i64>(0));
            std::thread::sleep(Duration::from_millis(20));
        }
        most
    })
}

/// Started with `--pool 2` on the shared cluster, a fresh `peer` for each
/// endpoint it lists (python-pg keeps a pool per driver) serves 40
/// concurrent requests with no more than 2 connections, and with at least one.
fn keeps_to_its_pool(peer: &str) {
    let Some(url) = seeded_postgres_url() else { return };
    let db = url.split_once("://").map(|(_, rest)| format!("postgres://{rest}")).unwrap();
    let mut seen = Vec::new();
    for endpoint in reads(peer) {
        let child = Command::new(repo().join("scripts/peers"))
            .args(["run", peer, "--listen", "127.0.0.1:0", "--db", &db, "--nodes", &NODES.to_string()])
            .args(["--pool", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut server = Stopped(child);
        let mut lines = std::io::BufReader::new(server.0.stdout.take().unwrap()).lines();
        let started = Instant::now();
        let addr = loop {
            let line = lines.next().unwrap_or_else(|| panic!("{peer} ended before its ready line")).unwrap();
            if let Some(addr) = line.strip_prefix("listening on http://") {
                break addr.trim().to_string();
            }
            assert!(started.elapsed() < Duration::from_secs(120), "{peer}: no ready line in 120 s");
        };
        // Drained, so that the peer never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let target = format!("http://{addr}{endpoint}");
        let most = most_connections(&url, peer, || {
            let out = output_within(
                blocklab().args(["load", "-c", "40", "-n", "2000", "--quiet", &target]),
                Duration::from_secs(120),
            );
            assert!(out.status.success(), "{peer} {endpoint}: {}", String::from_utf8_lossy(&out.stderr));
        });
        seen.push(format!("{endpoint}: {most}"));
        assert!((1..=2).contains(&most), "{peer} --pool 2 held {most} connections on {endpoint}");
        drop(server);
    }
    eprintln!("{peer} --pool 2, the most connections at once: {}", seen.join(", "));
}

/// A peer this test started: sent SIGTERM and waited for when the test
/// ends, passed or failed.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let _ = self.0.wait();
    }
}

macro_rules! peer_tests {
    ($($test:ident => $peer:literal),* $(,)?) => {$(
        #[test]
        fn $test() {
            passes_the_check($peer);
            keeps_to_its_pool($peer);
        }
    )*};
}

peer_tests! {
    spring_jdbc_passes_the_check_and_keeps_to_its_pool => "spring-jdbc",
    spring_jdbc_vt_passes_the_check_and_keeps_to_its_pool => "spring-jdbc-vt",
    spring_r2dbc_passes_the_check_and_keeps_to_its_pool => "spring-r2dbc",
    python_pg_passes_the_check_and_keeps_to_its_pool => "python-pg",
    go_pgx_passes_the_check_and_keeps_to_its_pool => "go-pgx",
    node_pg_passes_the_check_and_keeps_to_its_pool => "node-pg",
}
