//! Every server peer that serves `/delay` (peers/*/peer.toml, built by
//! `scripts/peers build`: the seed's Spring Web and WebFlux apps, Spring Web on
//! virtual threads, Go's net/http, the bare Tomcat and Netty engines): each
//! starts, prints its `listening on` line, answers `/test` and `/delay`, and
//! stops on SIGTERM. The README's test command installs and builds them.

mod common;

use std::time::Duration;

use common::{Listening, get};

fn peer(name: &str) -> Listening {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/peers");
    let built = std::process::Command::new(script).args(["check", name]).status().unwrap();
    assert!(built.success(), "{name} is not built: run scripts/peers install && scripts/peers build");
    let mut command = std::process::Command::new(script);
    command.args(["run", name, "--listen", "127.0.0.1:0"]);
    Listening::start(command)
}

/// `key = "value"` from a peer.toml (the flat form peers/README.md fixes).
fn manifest_value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// The server peers whose manifest lists `/delay`, by folder name.
fn delay_peers() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/peers");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let text = std::fs::read_to_string(path.join("peer.toml")).ok()?;
            let serves_delay = manifest_value(&text, "endpoints")?.split_whitespace().any(|e| e == "/delay");
            (manifest_value(&text, "kind")? == "server" && serves_delay)
                .then(|| manifest_value(&text, "name"))?
        })
        .collect();
    names.sort();
    names
}

#[test]
fn the_seed_stack_and_its_neighbours_are_peers() {
    let names = delay_peers();
    for name in ["go-nethttp", "netty", "spring-web", "spring-web-vt", "spring-webflux", "tomcat"] {
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
