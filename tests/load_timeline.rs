//! What a run shows over time, through the real binary: the per-second
//! timeline in the JSON adds up to the run's totals, a plain progress line
//! comes every few seconds when stderr is not a terminal, and `--html`
//! writes one self-contained page with the charts.

mod common;

use std::time::Duration;

use common::{TestServer, behaviour, blocklab};

#[test]
fn the_timeline_adds_up_to_the_totals_second_by_second() {
    // 2 ms per request; every tenth request a 503, every 25th closed without an answer.
    let server = TestServer::start(behaviour(|n, _| {
        let status = match n {
            n if n % 25 == 0 => None,
            n if n % 10 == 0 => Some(503),
            _ => Some(200),
        };
        (Duration::from_millis(2), status)
    }));
    let dir = std::env::temp_dir().join(format!("blocklab-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, html) = (dir.join("run.json"), dir.join("run.html"));
    let out = common::output_within(
        blocklab()
            .args(["load", "-k", "-c", "4", "-z", "6s", "--rate", "200"])
            .args(["--json", json.to_str().unwrap(), "--html", html.to_str().unwrap()])
            .arg(server.url("/t")),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Off a terminal: a plain progress line at 5 s.
    assert!(
        stderr.lines().any(|l| l.starts_with("blocklab load:") && l.contains("5 s") && l.contains("req/s")),
        "{stderr}"
    );

    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    common::validate_schema("schema/load-result.json", &doc);
    let timeline = doc["timeline"].as_array().unwrap();
    assert!((6..=7).contains(&timeline.len()), "{} rows", timeline.len());
    let sum = |key: &str| timeline.iter().map(|s| s[key].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("requests"), doc["completed"].as_u64().unwrap());
    assert_eq!(sum("status_4xx_5xx"), doc["status_codes"]["503"].as_u64().unwrap());
    let errors: u64 = timeline
        .iter()
        .flat_map(|s| s["errors"].as_object().unwrap().values())
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(errors, doc["error_total"].as_u64().unwrap());
    assert!(errors > 0);
    for (i, s) in timeline[..5].iter().enumerate() {
        assert_eq!(s["second"], i as u64);
        let n = s["requests"].as_u64().unwrap()
            + s["errors"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum::<u64>();
        // 200 due per second; generous for a busy machine.
        assert!((100..=300).contains(&n), "second {i}: {n} requests");
        assert!(s["p50_ms"].as_f64().unwrap() >= 1.9, "{s}");
        assert!(s["corrected_p99_ms"].as_f64().unwrap() >= s["p50_ms"].as_f64().unwrap());
        assert!((1..=4).contains(&s["connections"].as_u64().unwrap()), "{s}");
    }

    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg").count(), 4, "distribution, throughput, latency, connections");
    for needle in
        ["Latency by percentile", "Throughput and errors per second", "Complete requests:", "<style>"]
    {
        assert!(page.contains(needle), "no '{needle}' in the page");
    }
    assert!(!page.contains("src=\"http"), "self-contained");
    let _ = std::fs::remove_dir_all(&dir);
}
