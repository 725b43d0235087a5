//! The seed's own engines as peers (peers/, built by `scripts/peers`): each
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_jvm_peer_answers_test_and_delay_and_stops_on_sigterm() {
    for name in ["tomcat", "netty"] {
        let mut server = peer(name);
        assert_eq!(get(server.addr, "/test").await.body, "works", "{name}");
        let reply = get(server.addr, "/delay?ms=100").await;
        assert_eq!((reply.status, reply.body.as_str()), (200, r#"{"success":true}"#), "{name}");
        assert_eq!(reply.headers["content-type"], "application/json", "{name}");
        assert!(reply.elapsed >= Duration::from_millis(100), "{name}: answered before the wait");
        assert_eq!(get(server.addr, "/delay?ms=abc").await.status, 400, "{name}");
        server.sigterm();
        // The JVM runs its shutdown hooks and exits with 143 (128 + SIGTERM).
        let code = server.exit_within(Duration::from_secs(20));
        assert!(matches!(code, Some(0 | 143)), "{name} exited with {code:?}");
    }
}
