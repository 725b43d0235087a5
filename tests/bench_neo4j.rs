//! `blocklab bench --db neo4j --target blocklab,play`, small, with the real
//! binary: the bench starts its own Neo4j 5.26 (scripts/neo4j), seeds and
//! warms it, runs blocklab and the seed's Play app on it, and wipes it. The
//! outputs name both targets and the database with its version, every run
//! has the database's CPU figures, a Test ID Play lacks is "not served by
//! play", and no Neo4j is left running afterwards. Needs Java and Maven and
//! the peers built (`scripts/peers build play neo4j`; scripts/test builds
//! them): skipped with a message, and a failure under `scripts/test`
//! (`BLOCKLAB_NO_SKIP=1`).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Whether the peers this test needs are built; false after [`common::skip`].
fn peers_built() -> bool {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let built = ["neo4j", "play"].iter().all(|name| {
        Command::new(root.join("scripts/peers"))
            .args(["check", name])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !built {
        common::skip("the neo4j and play peers are not built (scripts/peers build play neo4j)");
    }
    built
}

#[test]
fn a_managed_neo4j_runs_blocklab_and_play_side_by_side_and_is_gone_after() {
    if !peers_built() {
        return;
    }
    let out = std::env::temp_dir().join(format!("blocklab-bench-neo4j-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_blocklab"))
            .args(["bench", "--db", "neo4j", "--target", "blocklab,play", "--quick", "--apis", "1,3,9"])
            .args(["--runs", "1", "-c", "20", "-n", "400", "--nodes", "200", "--db-warm", "2s", "--out"])
            .arg(&out),
        Duration::from_secs(600),
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("warming the database until its CPU per read stops falling")
            && stderr.contains("at most 2s"),
        "{stderr}"
    );
    assert!(stdout.starts_with("A first look (--quick)"), "a --quick run says so first:\n{stdout}");
    assert!(stdout.contains("| Target | Test ID |") && stdout.contains("| play |"), "{stdout}");
    assert!(stdout.contains("Neo4j Community 5.26"), "{stdout}");

    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    common::validate_schema("schema/bench-results.json", &results);
    let database = results["conditions"]["database_name"].as_str().unwrap().to_string();
    assert!(
        database.contains("Neo4j Community 5.26") && database.contains("started by the bench"),
        "{database}"
    );
    let cells: Vec<(String, u64, String)> = results["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["target"].as_str().unwrap().into(),
                t["test_id"].as_u64().unwrap(),
                t["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected = [("blocklab", 1, "ok"), ("blocklab", 3, "ok"), ("blocklab", 9, "ok")].into_iter().chain([
        ("play", 1, "ok"),
        ("play", 3, "ok"),
        ("play", 9, "not served"),
    ]);
    assert_eq!(cells, expected.map(|(t, i, s)| (t.to_string(), i, s.to_string())).collect::<Vec<_>>());
    for test in results["tests"].as_array().unwrap() {
        for r in test["runs"].as_array().unwrap() {
            assert_eq!(r["completed"], 400, "{test:#}");
            assert!(r["db_cpu_s"].as_f64().is_some(), "no database CPU: {test:#}");
            assert!(r["server_threads_max"].as_u64().unwrap() >= 1, "{test:#}");
        }
        if test["target"] == "play" && test["status"] == "ok" {
            let jvm = &test["runs"][0]["jvm"];
            assert!(
                jvm["heap_peak_mib"].as_f64().unwrap() > 1.0,
                "Play's heap from its perf counters: {test:#}"
            );
            assert!(jvm["gc_pause_ms"].as_f64().is_some(), "{test:#}");
        } else {
            assert!(test["runs"][0]["jvm"].is_null(), "blocklab is no JVM: {test:#}");
        }
        if test["test_id"] == 3 {
            let db_us = test["runs"][0]["db_cpu_per_request_us"].as_f64().unwrap();
            assert!(db_us > 0.0, "a database read costs the database CPU: {test:#}");
            assert!(test["runs"][0]["server_cpu_per_request_us"].as_f64().unwrap() > 0.0, "{test:#}");
        }
    }

    // Neo4j's own ceiling, measured through the Java driver (peers/neo4j-ceiling) after the warm-up.
    let ceilings = results["conditions"]["ceilings"].as_array().unwrap();
    let java = ceilings.iter().find(|c| c["client"] == "java_driver").expect("the Java driver's ceiling");
    // And with blocklab's own client (blocklab db-ceiling), against which blocklab's shares are taken.
    let own = ceilings.iter().find(|c| c["client"] == "blocklab").expect("blocklab's own client's ceiling");
    assert!(own["before"]["reads_per_s"].as_f64().unwrap() > 0.0, "{own:#}\n{stderr}");
    assert_eq!(own["before"]["wrong_answers"], 0, "{own:#}");
    assert_eq!(results["conditions"]["ceiling_clients"]["blocklab"], "blocklab");
    assert_eq!(results["conditions"]["ceiling_clients"]["play"], "java_driver");
    let ceiling = &java["before"];
    assert!(ceiling["reads_per_s"].as_f64().unwrap() > 0.0, "{ceiling:#}\n{stderr}");
    assert_eq!(ceiling["wrong_answers"], 0, "{ceiling:#}");
    assert!(ceiling["db_cpu_per_query_us"].as_f64().unwrap() > 0.0, "{ceiling:#}");
    // Measured again after the matrix, the two bracketing it; and what set it.
    let after = &java["after"];
    assert!(after["reads_per_s"].as_f64().unwrap() > 0.0, "{after:#}\n{stderr}");
    assert!(ceiling["bound"].is_string(), "{ceiling:#}");
    let warm = &results["conditions"]["warm_up"];
    assert!(!warm["cpu_per_read_us"].as_array().unwrap().is_empty(), "{warm:#}");
    assert_eq!(warm["max_s"], 2.0, "{warm:#}");
    let chart = std::fs::read_to_string(out.join("charts/side_by_side.svg")).unwrap();
    assert!(
        chart.contains("Neo4j&apos;s ceiling here") || chart.contains("Neo4j's ceiling here"),
        "no ceiling line"
    );

    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(csv.starts_with("target,database,test_id,"), "{csv}");
    assert_eq!(csv.lines().count(), 1 + 5, "one CSV row per run (play has no Test ID 9)");
    assert!(csv.lines().skip(1).all(|l| l.contains("Neo4j Community 5.26")), "{csv}");
    let markdown = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(
        markdown.contains("not served by play") && markdown.contains("| blocklab ÷ play |"),
        "{markdown}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Side by side") && html.contains(&database));
    assert!(out.join("charts/side_by_side.svg").exists());

    // No Neo4j left: its process is gone and its store wiped.
    let pid: u32 = database.split("pid ").nth(1).and_then(|s| s.split(',').next()).unwrap().parse().unwrap();
    assert!(!PathBuf::from(format!("/proc/{pid}")).exists(), "Neo4j (pid {pid}) is still running");
    let port = database.split("127.0.0.1:").nth(1).and_then(|s| s.split(',').next()).unwrap();
    let store = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(".local/neo4j/{port}"));
    assert!(!store.exists(), "{} was not wiped", store.display());
    let _ = std::fs::remove_dir_all(&out);
}
