//! Tried as a new user would: a server of one's own, in a peer folder outside
//! the checkout (a temporary folder the test writes), swept under a memory cap
//! with `blocklab sweep --peers DIR --targets NAME`. It is built into the
//! checkout's `.local/peers/` at the start, capped as its runtime says
//! (Python: the whole process), and its death is detected and named, its
//! memory per request reported. A name that clashes with the checkout's peers
//! is a one-line usage error.

mod common;
#[path = "common/own_peer.rs"]
mod own_peer;

use std::time::Duration;

use common::{blocklab, output_within};
use own_peer::OwnPeer;

/// Each `/delay` holds 1 MiB while it waits: 60 at once cannot fit in 48 MiB.
#[test]
fn an_own_peer_outside_the_checkout_is_swept_and_its_death_named() {
    let peer = OwnPeer::new("own-server", "/test /delay", &[("HOLD = 0", "HOLD = 1 << 20")], "");
    let out_dir = peer.parent.join("results");
    let tag = format!("blocklab-own-peer-test-{}", std::process::id());
    let mut command = blocklab();
    command
        .args(["sweep", "--peers"])
        .arg(&peer.parent)
        .args(["--targets", &peer.name, "--levels", "5,15,60", "--delay", "500ms", "--timeout", "10s"])
        .args(["--memory", "48MiB", "--out"])
        .arg(&out_dir)
        .env("BLOCKLAB_TEST_TAG", &tag);
    let out = output_within(&mut command, Duration::from_secs(180));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("peer {}: built", peer.name)), "built at the start: {stderr}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap()).unwrap();
    let target = &results["targets"][0];
    assert_eq!(target["name"], peer.name.as_str(), "{target:#}");
    assert_eq!(target["cap_bytes"], 48 << 20, "Python is capped as a whole process: {target:#}");
    assert_eq!(target["died"]["how"], "oom_killed", "{target:#}");
    assert_eq!(target["died"]["level"], 60, "{target:#}");
    assert_eq!(target["highest_full_success"], 15, "{target:#}");
    let kib = target["per_request"]["process_kib"].as_f64().unwrap_or_else(|| panic!("{target:#}"));
    assert!((512.0..4096.0).contains(&kib), "1 MiB held a request, {kib} KiB measured: {target:#}");
    let md = std::fs::read_to_string(out_dir.join("results.md")).unwrap();
    assert!(md.contains(&format!("{} was OOM-killed at 60 concurrent requests", peer.name)), "{md}");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&environ).contains(&tag), "left behind: {:?}", entry.file_name());
    }
}

#[test]
fn an_own_peer_named_as_a_checkout_peer_is_a_usage_error() {
    let peer = OwnPeer::new("own-clash", "/test /delay", &[], "");
    let clash = peer.parent.join("python-asyncio");
    std::fs::rename(peer.dir(), &clash).unwrap();
    let manifest = std::fs::read_to_string(clash.join("peer.toml")).unwrap();
    std::fs::write(clash.join("peer.toml"), manifest.replace(&peer.name, "python-asyncio")).unwrap();
    let mut command = blocklab();
    command.args(["sweep", "--targets", "python-asyncio", "--levels", "5"]).env("BLOCKLAB_PEER_DIRS", &clash);
    let out = output_within(&mut command, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("the peer 'python-asyncio' of ") && stderr.contains("clashes"), "{stderr}");
    // scripts/peers reads the same folders, and refuses the same clash.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/peers");
    let mut command = std::process::Command::new(script);
    command.arg("list").env("BLOCKLAB_PEER_DIRS", &clash);
    let out = output_within(&mut command, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the peer 'python-asyncio' of ") && stderr.contains("rename the folder"),
        "{stderr}"
    );
    let mut command = blocklab();
    command.args(["sweep", "--peers", "/nonexistent/blocklab-peers", "--levels", "5"]);
    let out = output_within(&mut command, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/blocklab-peers: no such folder"));
}
