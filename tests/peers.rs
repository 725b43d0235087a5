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

use blocklab::harness::peers::{Peer, PeerKind, read_manifests};
use common::{Listening, get};

fn peer(name: &str) -> Listening {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/peers");
    let built = std::process::Command::new(script).args(["check", name]).status().unwrap();
    assert!(built.success(), "{name} is not built: run scripts/peers install && scripts/peers build");
    let mut command = std::process::Command::new(script);
    command.args(["run", name, "--listen", "127.0.0.1:0"]);
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
    let peers = ["go-nethttp", "netty", "spring-web", "spring-web-vt", "spring-webflux", "tomcat"];
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
