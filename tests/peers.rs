//! The peers (peers/*/peer.toml, built by `scripts/peers build`). Their
//! manifests read alike from bash and from the harness. Every server peer that
//! serves `/delay` (the seed's Spring Web and WebFlux apps, Spring Web on
//! virtual threads, Go's net/http, the bare Tomcat and Netty engines, Python's
//! asyncio and thread-per-request servers, Node.js) starts, prints its
//! `listening on` line, answers `/test` and `/delay`, and stops on SIGTERM;
//! Python's and Node's hold their models (a pool of 200 threads waits in
//! waves, an event loop does not). The Python study-1 peer answers blocklab's
//! node on the real Neo4j `scripts/test` starts, and only its `/getData`
//! blocks its event loop. The README's test command installs and builds them.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use blocklab::harness::peers::{Peer, PeerKind, Runtime, read_manifests};
use common::{
    Listening, get, get_concurrently, loop_held_by_a_frozen_read, neo4j_to_freeze, neo4j_uri, seed_neo4j,
    test_behind_frozen_reads,
};

fn peer(name: &str) -> Listening {
    peer_with(name, &[])
}

/// `scripts/peers run NAME --listen 127.0.0.1:0 ARGS`, once it listens.
fn peer_with(name: &str, args: &[&str]) -> Listening {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/peers");
    let built = std::process::Command::new(script).args(["check", name]).status().unwrap();
    assert!(built.success(), "{name} is not built: run scripts/peers install && scripts/peers build");
    let mut command = std::process::Command::new(script);
    command.args(["run", name, "--listen", "127.0.0.1:0"]).args(args);
    Listening::start(command)
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every peer of the checkout, read by the harness (the contract's rules).
fn manifests() -> Vec<Peer> {
    read_manifests(&repo().join("peers")).unwrap()
}

/// The server peers that serve `path`, by folder name.
fn peers_serving(path: &str) -> Vec<String> {
    manifests().into_iter().filter(|p| p.kind == PeerKind::Server && p.serves(path)).map(|p| p.name).collect()
}

/// The server peers whose manifest lists `/delay`.
fn delay_peers() -> Vec<String> {
    peers_serving("/delay")
}

/// `scripts/peer-manifest ARGS`: its stdout, or its stderr as the error.
fn peer_manifest(args: &[&std::ffi::OsStr]) -> Result<String, String> {
    let out = std::process::Command::new(repo().join("scripts/peer-manifest")).args(args).output().unwrap();
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The manifests are read two ways, by scripts/peer-manifest for bash
/// (scripts/peers) and by the harness: both give every peer's keys the same
/// values, know the same keys, and refuse the same broken manifests, each
/// naming the file and the key.
/// A new runtime is a row of the launcher's table (`Runtime`) and its name
/// in the bash side's reader: the two lists are one.
#[test]
fn the_manifest_reader_knows_the_launchers_runtimes() {
    let script = std::fs::read_to_string(repo().join("scripts/peer-manifest")).unwrap();
    let line = script.lines().find(|l| l.starts_with("RUNTIMES = (")).expect("a RUNTIMES line");
    let bash: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
    let launcher: Vec<String> =
        Runtime::ALL.iter().map(|r| serde_json::to_value(r).unwrap().as_str().unwrap().to_string()).collect();
    assert_eq!(bash, launcher, "scripts/peer-manifest's RUNTIMES and harness/runtime.rs's Runtime::ALL");
}

#[test]
fn bash_and_the_harness_read_the_manifests_alike() {
    let keys = peer_manifest(&["--keys".as_ref()]).unwrap();
    assert_eq!(keys.lines().collect::<Vec<_>>(), Peer::KEYS);
    // Every key of every peer as bash reads it (NAME<TAB>KEY<TAB>VALUE), in one call.
    let peers = manifests();
    let files: Vec<PathBuf> =
        peers.iter().map(|p| repo().join("peers").join(&p.name).join("peer.toml")).collect();
    let args: Vec<&std::ffi::OsStr> =
        std::iter::once("--tsv".as_ref()).chain(files.iter().map(|f| f.as_os_str())).collect();
    let tsv = peer_manifest(&args).unwrap();
    let bash: std::collections::BTreeSet<(String, String, String)> = tsv
        .lines()
        .map(|line| {
            let mut fields = line.splitn(3, '\t').map(String::from);
            (fields.next().unwrap(), fields.next().unwrap(), fields.next().unwrap_or_default())
        })
        .collect();
    let mut harness = std::collections::BTreeSet::new();
    for peer in &peers {
        let word = |v: serde_json::Value| v.as_str().unwrap().to_string();
        let values = [
            ("name", Some(peer.name.clone())),
            ("kind", Some(word(serde_json::to_value(peer.kind).unwrap()))),
            ("runtime", Some(word(serde_json::to_value(peer.runtime).unwrap()))),
            ("stands_for", Some(peer.stands_for.clone())),
            ("versions", Some(peer.versions.clone())),
            ("needs", Some(peer.needs.clone())),
            ("java", peer.java.clone()),
            ("debian", Some(peer.debian.clone())),
            ("uses", Some(peer.uses.clone())),
            ("endpoints", Some(peer.endpoints.clone())),
            ("db_pool", peer.db_pool.clone()),
            ("db", Some(peer.db.clone())),
            ("db_limits", peer.db_limits.clone()),
        ];
        for (key, value) in values {
            // bash sees an absent key as empty, as the harness's defaults are.
            let listed = bash.iter().any(|(n, k, _)| *n == peer.name && k == key);
            if let Some(value) = value.filter(|v| listed || !v.is_empty()) {
                harness.insert((peer.name.clone(), key.to_string(), value));
            }
        }
    }
    assert_eq!(bash, harness);
    let dir = std::env::temp_dir().join(format!("blocklab-peer-manifest-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("web")).unwrap();
    let file = dir.join("web/peer.toml");
    let good =
        "name = \"web\"\nkind = \"server\"\nruntime = \"python\"\nstands_for = \"x\"\nversions = \"1\"\n";
    let cases = [
        (good.to_string(), None),
        (format!("{good}uses = \"a b\"\ndebian = \"c\"\n"), None),
        (format!("{good}threads = \"200\"\n"), Some("threads")),
        (good.replace("runtime = \"python\"\n", ""), Some("runtime")),
        (good.replace("\"python\"", "\"ruby\""), Some("ruby")),
        (good.replace("\"server\"", "\"proxy\""), Some("proxy")),
        (good.replace("\"web\"", "\"api\""), Some("name")),
        (format!("{good}needs = [\"go\"]\n"), Some("needs")),
        (format!("{good}endpoints = \"/test\\n/delay\"\n"), Some("endpoints")),
    ];
    for (text, refused) in cases {
        std::fs::write(&file, &text).unwrap();
        let python = peer_manifest(&[file.as_os_str()]);
        let rust = read_manifests(&dir);
        match refused {
            None => {
                assert!(python.is_ok() && rust.is_ok(), "{text}: {python:?} {rust:?}");
            }
            Some(key) => {
                let python = python.unwrap_err();
                let rust = rust.unwrap_err();
                for err in [&python, &rust] {
                    assert!(err.contains("web/peer.toml") && err.contains(key), "{text}: {err}");
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_seed_stack_and_its_neighbours_are_peers() {
    let names = delay_peers();
    let peers = [
        "go-nethttp",
        "netty",
        "node",
        "python-asyncio",
        "python-threads",
        "spring-web",
        "spring-web-vt",
        "spring-webflux",
        "tomcat",
    ];
    for name in peers {
        assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_server_peer_answers_test_and_delay_and_stops_on_sigterm() {
    for name in delay_peers() {
        let name = name.as_str();
        let mut server = peer(name);
        assert_eq!(get(server.addr, "/test").await.body, "works", "{name}");
        let reply = get(server.addr, "/delay?ms=100").await;
        assert_eq!((reply.status, reply.body.as_str()), (200, r#"{"success":true}"#), "{name}");
        assert_eq!(reply.headers["content-type"], "application/json", "{name}");
        assert!(reply.elapsed >= Duration::from_millis(100), "{name}: answered before the wait");
        assert_eq!(get(server.addr, "/delay?ms=abc").await.status, 400, "{name}");
        server.sigterm();
        // A JVM runs its shutdown hooks and exits with 143 (128 + SIGTERM);
        // Go's default SIGTERM action gives the same status.
        let code = server.exit_within(Duration::from_secs(20));
        assert!(matches!(code, Some(0 | 143)), "{name} exited with {code:?}");
    }
}

/// The thread-per-request peer waits in waves of its pool (200 threads), the
/// event-loop peers hold every request at once: 300 concurrent waits of 2 s
/// take two waves (≥ 4 s) in gunicorn's gthread worker and about one
/// (< 3.5 s) under asyncio and Node.js.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pythons_thread_pool_waits_in_waves_and_the_event_loops_do_not() {
    const CONCURRENT: usize = 300;
    for (name, pooled) in [("python-threads", true), ("python-asyncio", false), ("node", false)] {
        let mut server = peer(name);
        let (replies, wall) = get_concurrently(server.addr, "/delay?ms=2000", CONCURRENT).await;
        assert!(replies.iter().all(|r| r.status == 200), "{name}: not every request succeeded");
        if pooled {
            assert!(
                wall >= Duration::from_secs(4),
                "{name}: {CONCURRENT} waits took {wall:?}, not two waves"
            );
        } else {
            assert!(
                wall < Duration::from_millis(3500),
                "{name}: {CONCURRENT} waits took {wall:?}, not one wave"
            );
        }
        server.sigterm();
        let code = server.exit_within(Duration::from_secs(20));
        assert_eq!(code, Some(0), "{name}");
    }
}

/// The ids the Python study-1 peer reads: those the other Neo4j tests seed.
const NODES: u64 = 1000;

/// Study 1 in Python (peers/python-neo4j) on the real Neo4j: every endpoint
/// answers blocklab's node, bad ids are 400, and the models hold: with Neo4j
/// frozen, one read of `/getData` (the synchronous driver in an `async def`)
/// holds the event loop, so `/test` waits behind it; reads of the async
/// driver and of the synchronous one on FastAPI's thread pool leave it free.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_neo4j_answers_the_node_and_only_get_data_blocks_its_event_loop() {
    let Some(uri) = neo4j_uri() else { return };
    // Before anything else: the model checks freeze it.
    let neo4j = neo4j_to_freeze(&uri);
    seed_neo4j(&uri, NODES);
    let mut server = peer_with("python-neo4j", &["--db", &uri, "--nodes", &NODES.to_string()]);
    let addr = server.addr;
    assert_eq!(get(addr, "/test").await.body, "works");
    for path in ["/getData", "/getDataAsync", "/getDataAsync2", "/getDataSpawnBlocking"] {
        let reply = get(addr, &format!("{path}?id=77")).await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (
                200,
                r#"{"id":77,"name":"resource77","code":"test.lp.content.77","mimeType":"application/pdf","contentType":"Resource","body":"body string"}"#
            ),
            "{path}"
        );
        assert_eq!(reply.headers["content-type"], "application/json", "{path}");
        let random = get(addr, path).await;
        let id = random.json()["id"].as_u64().unwrap_or_else(|| panic!("{path}: {}", random.body));
        assert!((1..=NODES).contains(&id), "{path}: id {id}");
        for bad in ["?id=abc", "?id=0", "?id=1001"] {
            let reply = get(addr, &format!("{path}{bad}")).await;
            assert_eq!(reply.status, 400, "{path}{bad}: {}", reply.body);
            assert!(reply.json()["error"].is_string(), "{path}{bad}: {}", reply.body);
        }
    }
    // One blocking read holds the event loop: nothing else is served.
    assert!(
        loop_held_by_a_frozen_read(addr, neo4j, "/getData").await,
        "/test answered within 1 s every time for 10 s behind a blocking read: it did not hold the event loop"
    );
    for path in ["/getDataAsync", "/getDataAsync2", "/getDataSpawnBlocking"] {
        let behind = test_behind_frozen_reads(addr, neo4j, path, 8).await;
        assert!(
            behind.is_some_and(|t| t < Duration::from_secs(1)),
            "/test took {behind:?} behind 8 reads of {path}: they held the event loop"
        );
    }
    server.sigterm();
    let code = server.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(0), "python-neo4j");
}
