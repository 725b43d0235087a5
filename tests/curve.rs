//! The round-trip curve, small, with the real binary: `blocklab bench
//! --db-rtt 0,5ms` on the shared PostgreSQL (`POSTGRES_URL`, which
//! `scripts/test` starts), blocklab and the python-pg peer, `/getData` and
//! `/getDataAsync`, each measured at both round trips through one
//! Toxiproxy link. Every point has what PostgreSQL says of it (connections
//! by `application_name`, the read's own time), no rate lies above the
//! bound Little's law gives it by more than 10 %, the farther round trip
//! slows the blocking endpoints, and each chart draws each target in its
//! own colour. Its own binary: the bench resets `pg_stat_statements`, which
//! another test reading the cluster at the same time would disturb.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use blocklab::studies::execution_models::curve::{self, ABOVE_BOUND};
use blocklab::studies::execution_models::results::{BenchResults, TestId};
use common::{POSTGRES_NODES, blocklab, output_within, seeded_postgres_url};

/// The distinct `stroke` colours an SVG draws with, black and white aside.
fn colours(svg: &str) -> BTreeSet<String> {
    svg.match_indices("stroke=\"#")
        .map(|(at, _)| svg[at + 8..at + 15].to_ascii_uppercase())
        .filter(|c| c != "#000000" && c != "#FFFFFF")
        .collect()
}

#[test]
fn a_curve_of_two_round_trips_keeps_every_rate_under_its_bound_and_draws_each_target_apart() {
    let Some(url) = seeded_postgres_url() else { return };
    let toxiproxy = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/peers"))
        .args(["check", "toxiproxy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !toxiproxy {
        common::skip("the toxiproxy peer is not built (scripts/peers build toxiproxy)");
        return;
    }
    let out = std::env::temp_dir().join(format!("blocklab-curve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = output_within(
        blocklab()
            .args(["bench", "--db", &url, "--db-rtt", "0,5ms", "--target", "blocklab,python-pg"])
            .args(["--apis", "2,3", "-c", "20", "-z", "2s", "--runs", "1", "--warm", "3s", "--nodes"])
            .arg(POSTGRES_NODES.to_string())
            .arg("--out")
            .arg(&out),
        Duration::from_secs(400),
    );
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    common::validate_schema("schema/bench-results.json", &serde_json::from_str(&text).unwrap());
    let results: BenchResults = serde_json::from_str(&text).unwrap();

    let rtts: Vec<f64> = results.curve.iter().map(|s| s.rtt_ms).collect();
    assert_eq!(rtts, [0.0, 5.0]);
    assert_eq!(results.tests, results.curve[0].tests, "tests is the curve's first round trip");
    for step in &results.curve {
        assert_eq!(step.tests.len(), 4, "2 targets × 2 Test IDs at {} ms", step.rtt_ms);
        for test in &step.tests {
            let who = format!("{} {} at {} ms", test.target, test.api, step.rtt_ms);
            assert_eq!(test.runs.len(), 1, "{who}: {:?}", test.failure);
            let run = &test.runs[0];
            assert!(run.completed > 0 && run.error_total == 0, "{who}: {run:?}");
            assert!(run.db_connections_max.is_some_and(|c| c >= 1), "{who}: {run:?}");
            assert!(run.db_query_ms.is_some_and(|q| q > 0.0 && q < 50.0), "{who}: {run:?}");
        }
    }
    // Five milliseconds away, the link measures at least most of them.
    assert!(curve::least_rtt_ms(&results.curve[1].link) > 4.0, "{:?}", results.curve[1].link);

    let points = curve::points(&results);
    assert_eq!(points.len(), 8);
    for p in &points {
        let bound = p.bound.as_ref().unwrap_or_else(|| panic!("{} {}: no bound", p.test.target, p.test.api));
        assert!(
            p.best.rps <= ABOVE_BOUND * bound.rps,
            "{} {} at {} ms: {} req/s above its bound {} ({})",
            p.test.target,
            p.test.api,
            p.rtt_ms,
            p.best.rps,
            bound.rps,
            bound.by
        );
    }
    // One read in flight at a time (blocklab's one HTTP worker; python-pg's event loop, which waits
    // inside async def): 5 ms away, the blocking endpoint is held to about one read a round trip.
    for target in ["blocklab", "python-pg"] {
        let far = points
            .iter()
            .find(|p| p.test.target == target && p.test.test_id == TestId(2) && p.rtt_ms == 5.0)
            .unwrap();
        let bound = far.bound.as_ref().unwrap();
        assert!(
            bound.rps < 250.0 && far.best.rps < 250.0,
            "{target} /getData at 5 ms: {bound:?} {}",
            far.best.rps
        );
    }

    // The reading names the twins, and the charts draw each target in a colour of its own.
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("## The round-trip curve"), "{md}");
    assert!(md.contains("python-pg: /getData"), "{md}");
    for id in [2, 3] {
        let svg = std::fs::read_to_string(out.join(format!("charts/curve-rate-test{id}.svg"))).unwrap();
        assert!(colours(&svg).len() >= 2, "Test ID {id}: {:?}", colours(&svg));
        assert!(svg.contains("bound (Little"), "Test ID {id}: no bound drawn");
        assert!(out.join(format!("charts/curve-p99-test{id}.svg")).exists());
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("The round-trip curve"));
    let _ = std::fs::remove_dir_all(&out);
}
