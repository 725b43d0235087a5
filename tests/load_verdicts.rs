//! The verdicts a CI job acts on, through the real binary: `--fail-if`
//! exits 1 naming the breached threshold and 0 when none is, and
//! `blocklab load compare` exits 1 on a regression past its limits.

mod common;

use std::process::Output;
use std::time::Duration;

use common::{TestServer, behaviour, blocklab};

fn load(args: &[&str]) -> Output {
    common::output_within(blocklab().args(["load", "-q"]).args(args), Duration::from_secs(60))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn fail_if_names_the_breached_threshold_and_exits_1() {
    // 20 ms per request; every fourth request a 500.
    let server = TestServer::start(behaviour(|n, _| {
        (Duration::from_millis(20), Some(if n % 4 == 0 { 500 } else { 200 }))
    }));
    let url = server.url("/x");
    let out = load(&["-k", "-c", "4", "-n", "40", "--fail-if", "p99>5s,errors>50%,rps<1", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Thresholds (--fail-if)") && !text.contains("BREACHED"), "{text}");

    let out = load(&["-k", "-c", "4", "-n", "40", "--fail-if", "p50>5ms,rps<1", &url]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("threshold breached: p50 = ") && err.contains("> 5.000 ms"), "{err}");
    assert!(!err.contains("rps"), "rps<1 held: {err}");

    // 10 of 40 requests got a 500: 25 %, and a count of 10.
    let out = load(&["-k", "-c", "4", "-n", "40", "--fail-if", "errors>20%", &url]);
    assert!(stderr(&out).contains("errors = 25.000% (> 20.000%)"), "{}", stderr(&out));
    let out = load(&["-k", "-c", "4", "-n", "40", "--fail-if", "errors>=10", &url]);
    assert_eq!(out.status.code(), Some(1));
    let out = load(&["-k", "-c", "4", "-n", "40", "--fail-if", "errors>10", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let out = load(&["--fail-if", "p99>soon", &url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--fail-if"), "{}", stderr(&out));
}

#[test]
fn compare_exits_1_on_a_regression_past_the_limits_only() {
    let fast = TestServer::start(behaviour(|_, _| (Duration::from_millis(2), Some(200))));
    let slow = TestServer::start(behaviour(|_, _| (Duration::from_millis(40), Some(200))));
    let dir = std::env::temp_dir().join(format!("blocklab-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (base, new) = (dir.join("base.json"), dir.join("new.json"));
    for (server, file) in [(&fast, &base), (&slow, &new)] {
        let out = load(&["-k", "-c", "2", "-n", "40", "--json", file.to_str().unwrap(), &server.url("/x")]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let compare = |args: &[&str]| {
        common::output_within(blocklab().args(["load", "compare"]).args(args), Duration::from_secs(30))
    };
    let (b, n) = (base.to_str().unwrap(), new.to_str().unwrap());
    let out = compare(&[b, n]);
    assert_eq!(out.status.code(), Some(0), "no limits, no verdict: {}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    for figure in ["rps", "errors", "p50", "p99", "max"] {
        assert!(table.lines().any(|l| l.starts_with(figure)), "no {figure} row:\n{table}");
    }
    let out = compare(&[b, n, "--max-regression", "p99=10%,rps=5%"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("regression past the limits: rps") && err.contains("p99"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("REGRESSION"));
    // The other way round it is an improvement.
    let out = compare(&[n, b, "--max-regression", "p99=10%,rps=5%,errors=0.1%"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for (args, needle) in [
        (vec![b, n, "--max-regression", "p99=10"], "--max-regression"),
        (vec![b, "/nonexistent.json"], "cannot read"),
        (vec![b, "Cargo.toml"], "is not a blocklab load --json result"),
    ] {
        let out = compare(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
