//! `blocklab peers check DIR` on peer folders a user could have written,
//! built by the test in a temporary folder outside the checkout (Python
//! scripts of the standard library: nothing to install): one that keeps the
//! contract passes; each broken one fails (exit status 1) with the message
//! that names what is wrong and how to fix it. Real processes throughout.

mod common;
#[path = "common/own_peer.rs"]
mod own_peer;

use std::time::Duration;

use common::{blocklab, output_within};
use own_peer::OwnPeer;

/// `blocklab peers check DIR ARGS`, a 2 s bound on the stop, 30 s on the
/// start (Python starts in a fraction of a second on an idle machine, but
/// the tests share it): (exit status, stdout, stderr).
fn check(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    check_within(dir, "30s", args)
}

/// As [`check`], the start bounded by `ready`.
fn check_within(dir: &std::path::Path, ready: &str, args: &[&str]) -> (Option<i32>, String, String) {
    check_bounded(dir, ready, args, Duration::from_secs(60))
}

/// As [`check_within`], the whole check bounded by `all`.
fn check_bounded(
    dir: &std::path::Path,
    ready: &str,
    args: &[&str],
    all: Duration,
) -> (Option<i32>, String, String) {
    let mut command = blocklab();
    command
        .args(["peers", "check"])
        .arg(dir)
        .args(["--ready-within", ready, "--stop-within", "2s"])
        .args(args);
    let out = output_within(&mut command, all);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_peer_that_keeps_the_contract_passes() {
    let peer = OwnPeer::new("check-good", "/test /delay", &[], "");
    let (status, out, err) = check(&peer.dir(), &[]);
    assert_eq!(status, Some(0), "{out}{err}");
    for line in [
        "ok    build: into ",
        "ok    ready: `listening on http://127.0.0.1:",
        "ok    GET /test: 200 works",
        "ok    GET /delay?ms=100: 200 {\"success\":true} after ",
        "ok    GET /delay?ms=abc, ms=-1, ms=600001: 400 each",
        "ok    SIGTERM: exited after ",
    ] {
        assert!(out.contains(line), "no `{line}` in:\n{out}");
    }
    assert!(out.contains(&format!("{}: all 7 checks passed", peer.name)), "{out}");
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".local/peers").join(&peer.name);
    assert!(built.join(".built").is_file(), "its build goes under the checkout's .local/peers/");
}

#[test]
fn a_repository_peer_checked_by_its_folder_passes() {
    // The repository's own folder, named again: the same peer, not a clash (scripts/peers read it
    // twice and stopped, silently, until it learnt not to).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/python-asyncio");
    let (status, out, err) = check(&dir, &[]);
    assert_eq!(status, Some(0), "{out}{err}");
    assert!(out.contains("python-asyncio: all 7 checks passed"), "{out}");
}

#[test]
fn a_folder_without_peer_toml_is_told_what_to_write() {
    let peer = OwnPeer::new("check-empty", "/test /delay", &[], "");
    std::fs::remove_file(peer.dir().join("peer.toml")).unwrap();
    let (status, out, err) = check(&peer.dir(), &[]);
    assert_eq!(status, Some(1), "{out}{err}");
    assert!(out.contains("FAIL  no peer.toml in "), "{out}");
    assert!(out.contains(&format!(
        "fix: write one (peers/README.md has the contract), e.g. name = \"{}\"",
        peer.name
    )));
    assert!(err.contains("1 of 1 checks failed"), "{err}");
}

#[test]
fn an_unknown_key_is_named_with_the_keys_there_are() {
    let peer = OwnPeer::new("check-key", "/test /delay", &[], "port = \"8080\"\n");
    let (status, out, err) = check(&peer.dir(), &[]);
    assert_eq!(status, Some(1), "{out}{err}");
    assert!(out.contains("FAIL  peer.toml: ") && out.contains("unknown field `port`"), "{out}");
    assert!(out.contains("fix: every value a one-line string; the keys are: name, kind, runtime"), "{out}");
}

#[test]
fn a_run_that_never_prints_its_ready_line_fails_within_the_bound() {
    let quiet = [("# READY", "print('starting', flush=True)")];
    let peer = OwnPeer::new("check-quiet", "/test /delay", &quiet, "");
    let (status, out, err) = check_within(&peer.dir(), "3s", &[]);
    assert_eq!(status, Some(1), "{out}{err}");
    assert!(out.contains("FAIL  no ready line within 3s"), "{out}");
    assert!(out.contains("fix: print `listening on http://HOST:PORT` on stdout, flushed"), "{out}");
}

#[test]
fn a_delay_that_answers_at_once_fails() {
    let hasty = [("# WAIT", "pass")];
    let peer = OwnPeer::new("check-hasty", "/test /delay", &hasty, "");
    let (status, out, err) = check(&peer.dir(), &[]);
    assert_eq!(status, Some(1), "{out}{err}");
    assert!(out.contains("FAIL  GET /delay?ms=100 answered after "), "{out}");
    assert!(
        out.contains("sooner than the 100 ms asked") && out.contains("fix: wait ms milliseconds"),
        "{out}"
    );
    assert!(out.contains("ok    GET /test: 200 works"), "the other checks still run: {out}");
}

#[test]
fn a_server_that_ignores_sigterm_fails_and_is_killed() {
    let deaf = [("# SIGTERM", "signal.signal(signal.SIGTERM, signal.SIG_IGN)")];
    let peer = OwnPeer::new("check-deaf", "/test /delay", &deaf, "");
    let (status, out, err) = check(&peer.dir(), &[]);
    assert_eq!(status, Some(1), "{out}{err}");
    assert!(out.contains("FAIL  SIGTERM: still running 2s after it (then killed"), "{out}");
    assert!(out.contains("fix: exit on SIGTERM"), "{out}");
    // Killed by its pid: no server.py of this peer is left.
    let left = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(&*peer.dir().to_string_lossy())
    });
    assert!(!left, "the deaf server was left running");
}

/// A study-1 peer is started with `--db URL --nodes N` and asked for a node
/// of each endpoint it lists: one that answers another node fails, naming
/// the node asked for; an id past N must be a 400.
#[test]
fn a_study_1_peer_must_answer_the_node_asked_for() {
    let db = ["--db", "bolt://127.0.0.1:7687", "--nodes", "1000"];
    let right = OwnPeer::new("check-reads", "/test /getDataAsync", &[], "");
    let (status, out, err) = check(&right.dir(), &db);
    assert_eq!(status, Some(0), "{out}{err}");
    assert!(
        out.contains("ok    GET /getDataAsync?id=") && out.contains("ok    GET /getDataAsync?id=1001: 400")
    );
    let wrong = OwnPeer::new("check-wrong-node", "/test /getDataAsync", &[("# NODE", "node = 1")], "");
    let (status, out, err) = check(&wrong.dir(), &db);
    assert_eq!(status, Some(1), "{out}{err}");
    let line =
        out.lines().find(|l| l.contains("FAIL  GET /getDataAsync?id=")).unwrap_or_else(|| panic!("{out}"));
    let asked = line.split("?id=").nth(1).unwrap().split(' ').next().unwrap();
    assert!(line.ends_with(&format!(", not node {asked}")), "{line}");
    let (status, out, _) = check(&right.dir(), &[]);
    assert_eq!(status, Some(1));
    assert!(out.contains("serves study 1's endpoints and no --db was given"), "{out}");
}

/// `--db neo4j`: the check starts the `neo4j` database peer, seeds it,
/// checks the repository's Python study-1 peer against it (each endpoint the
/// node asked for, read through the real driver), then stops and wipes it.
#[test]
fn a_study_1_peer_is_checked_against_a_neo4j_the_check_starts_and_wipes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/python-neo4j");
    let (status, out, err) =
        check_bounded(&dir, "60s", &["--db", "neo4j", "--nodes", "200"], Duration::from_secs(240));
    assert_eq!(status, Some(0), "{out}{err}");
    let line = out.lines().find(|l| l.contains("ok    database: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("seeded with 200 nodes"), "{line}");
    for endpoint in ["/getData", "/getDataAsync", "/getDataAsync2", "/getDataSpawnBlocking"] {
        assert!(out.contains(&format!("ok    GET {endpoint}?id=")), "no check of {endpoint}:\n{out}");
    }
    assert!(out.contains("?id=201: 400"), "{out}");
    let port = line.split("bolt://127.0.0.1:").nth(1).and_then(|r| r.split([',', ' ']).next()).unwrap();
    let store = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".local/neo4j").join(port);
    assert!(!store.exists(), "{} was not wiped", store.display());
}

#[test]
fn a_name_that_clashes_with_a_repository_peer_is_a_usage_error() {
    let peer = OwnPeer::new("check-clash", "/test /delay", &[], "");
    let clash = peer.parent.join("node");
    std::fs::rename(peer.dir(), &clash).unwrap();
    let manifest = std::fs::read_to_string(clash.join("peer.toml")).unwrap();
    std::fs::write(clash.join("peer.toml"), manifest.replace(&peer.name, "node")).unwrap();
    let (status, out, err) = check(&clash, &[]);
    assert_eq!(status, Some(2), "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("the peer 'node' of ") && err.contains("rename the folder and its name key"),
        "{err}"
    );
    let (status, _, err) = check(&peer.parent.join("nowhere"), &[]);
    assert_eq!(status, Some(2));
    assert!(err.contains("no such folder"), "{err}");
}
