//! `blocklab bench --quick` end to end with the real binary: every Test ID ×
//! Run ID row is there with a non-zero RPS, every file is written, and
//! results.json matches its schema.

mod common;

use std::process::Command;

#[test]
fn quick_bench_writes_every_row_and_file() {
    let out = std::env::temp_dir().join(format!("blocklab-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_blocklab"))
            .args(["bench", "--quick", "-n", "1000", "--runs", "2", "--out"])
            .arg(&out),
        std::time::Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains(
        "| Test ID | Run ID | API | RPS | Mean Response Time | Max Response Time | 99 percentile |"
    ));

    for file in ["results.md", "results.json", "results.csv", "report.html"] {
        let len = std::fs::metadata(out.join(file)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 500, "{file} is missing or nearly empty ({len} bytes)");
    }
    for chart in ["rps.svg", "latency.svg", "normalized.svg", "busy.svg"] {
        let svg = std::fs::read_to_string(out.join("charts").join(chart)).unwrap();
        assert!(svg.contains("<svg") && svg.contains("<rect"), "{chart} has no bars");
    }

    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    common::validate_schema("schema/bench-results.json", &results);
    let ids: Vec<u64> =
        results["tests"].as_array().unwrap().iter().map(|t| t["test_id"].as_u64().unwrap()).collect();
    assert_eq!(ids, vec![1, 2, 3, 4, 5, 7, 8, 9]);
    for test in results["tests"].as_array().unwrap() {
        assert_eq!(test["status"], "ok", "{test:#}");
        let runs = test["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "Test ID {}", test["test_id"]);
        for (i, run) in runs.iter().enumerate() {
            assert_eq!(run["run_id"].as_u64(), Some(i as u64 + 1));
            assert!(run["rps"].as_f64().unwrap() > 0.0, "Test ID {} run {}", test["test_id"], i + 1);
            assert_eq!(run["completed"], 1000);
            assert!(out.join(run["load_json"].as_str().unwrap()).exists());
        }
    }

    let markdown = std::fs::read_to_string(out.join("results.md")).unwrap();
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    for (id, api) in [
        (1, "/test"),
        (2, "/getData (Blocking)"),
        (5, "/getDataAkka (Blocking)"),
        (9, "/getDataSpawnBlocking"),
    ] {
        for run in 1..=2 {
            let row = format!("| {id} | {run} | {api} |");
            assert!(markdown.contains(&row), "results.md lacks {row}");
        }
    }
    assert_eq!(csv.lines().count(), 1 + 16, "one CSV row per run");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && !html.contains("src=\"http"), "report.html must be self-contained");
    assert!(html.contains("Reading") && html.contains("Conditions"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bench_under_lean_names_the_model_and_the_read_everywhere() {
    let out = std::env::temp_dir().join(format!("blocklab-bench-lean-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_blocklab"))
            .args(["bench", "--quick", "--model", "lean", "--embedded-read", "cypher"])
            .args(["--apis", "1,2,3,5", "-n", "500", "--runs", "1", "--out"])
            .arg(&out),
        std::time::Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("server: blocklab --model lean (tokio + httparse)"), "{stdout}");
    assert!(stdout.contains("embedded read: cypher"), "{stdout}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    common::validate_schema("schema/bench-results.json", &results);
    let parameters = &results["conditions"]["parameters"];
    assert_eq!(
        (parameters["server_model"].as_str(), parameters["embedded_read"].as_str()),
        (Some("lean"), Some("cypher"))
    );
    for test in results["tests"].as_array().unwrap() {
        assert_eq!(test["status"], "ok", "{test:#}");
        let scraped = &test["runs"][0]["server"];
        assert!(scraped["server_requests"].as_u64().unwrap() >= 500, "lean's /metrics scraped: {test:#}");
    }
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    // The model and the read are the last two columns (the earlier ones kept their places).
    assert!(
        csv.starts_with("target,database,")
            && csv.lines().next().unwrap().ends_with(",server_model,embedded_read"),
        "{csv}"
    );
    assert_eq!(
        csv.lines().skip(1).filter(|l| l.starts_with("blocklab,") && l.ends_with(",lean,cypher")).count(),
        4,
        "{csv}"
    );
    for file in ["results.md", "report.html"] {
        let text = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(text.contains("blocklab --model lean") && text.contains("embedded read: cypher"), "{file}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn timed_runs_last_their_duration_whatever_the_rate() {
    let out = std::env::temp_dir().join(format!("blocklab-bench-timed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_blocklab"))
            .args(["bench", "--quick", "--apis", "1,2", "-c", "20", "-z", "2s", "--runs", "1", "--out"])
            .arg(&out),
        std::time::Duration::from_secs(300),
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("runs of 2 s (-c 20)"), "{stderr}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    common::validate_schema("schema/bench-results.json", &results);
    let parameters = &results["conditions"]["parameters"];
    assert_eq!((parameters["run_s"].as_f64(), parameters["requests"].as_u64()), (Some(2.0), Some(0)));
    for test in results["tests"].as_array().unwrap() {
        assert_eq!(test["status"], "ok", "{test:#}");
        let run = &test["runs"][0];
        // /test answers far more requests in 2 s than /getData does; both runs last 2 s.
        let seconds = run["duration_s"].as_f64().unwrap();
        assert!((1.9..6.0).contains(&seconds), "a 2 s run took {seconds} s: {test:#}");
        assert!(run["rps"].as_f64().unwrap() > 0.0, "{test:#}");
    }
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("blocklab load -k -c 20 -z 2s per run"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_timed_run_that_answers_nothing_is_a_failure_not_a_row_of_zeros() {
    let out = std::env::temp_dir().join(format!("blocklab-bench-silent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    // Every read of the embedded database takes 5 s: nothing is answered in a run of 1 s (on
    // the non-blocking endpoint, so that /metrics still answers after the run).
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_blocklab"))
            .args(["bench", "--quick", "--apis", "3", "-c", "10", "-z", "1s", "--db-latency", "5s", "--out"])
            .arg(&out),
        std::time::Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no request was answered in its run of 1 s: 10 sent, 0 failed, 10 still open"),
        "{stderr}"
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let test = &results["tests"][0];
    assert_eq!(test["status"], "failed", "{test:#}");
    assert!(test["runs"].as_array().unwrap().is_empty(), "no row of zeros: {test:#}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_bench_flags_exit_2_before_anything_starts() {
    for (args, needle) in [
        (vec!["bench", "--apis", "getNothing"], "unknown API"),
        (vec!["bench", "--apis", "6"], "unknown API"),
        (vec!["bench", "-c", "0"], "--concurrency"),
        (vec!["bench", "-n", "10", "-c", "20"], "smaller than -c"),
        (vec!["bench", "-n", "10", "-z", "3s"], "cannot be used with"),
        (vec!["bench", "-z", "0s"], "--duration"),
        (vec!["bench", "--peer-pool", "4"], "--peer-pool sets the pool of a PostgreSQL peer"),
        (vec!["bench", "--db", "neo4j", "--target", "play", "--peer-pool", "4"], "give --db postgres"),
        (vec!["bench", "--runs", "0"], "--runs"),
        (vec!["bench", "--db-latency", "soon"], "--db-latency"),
        (vec!["bench", "--out", "/proc/blocklab-cannot-write-here"], "cannot write into"),
        (vec!["bench", "--target", "tomcat"], "unknown --target 'tomcat'"),
        (
            vec!["bench", "--target", "play"],
            "--target play reads neo4j (its peers/play/peer.toml), not embedded",
        ),
        (vec!["bench", "--db", "postgres", "--target", "blocklab,play"], "--target play reads neo4j"),
        (vec!["bench", "--db-warm", "5s"], "(--db neo4j, --db postgres) only"),
        (vec!["bench", "--db", "neo4j", "--db-cpus", "x"], "'x' is not a CPU number"),
        (vec!["bench", "--db", "postgres", "--db-rtt", "0,,5ms"], "has an empty item"),
        (vec!["bench", "--db", "postgres", "--db-rtt", "2,2ms"], "gives 2ms twice"),
        (vec!["bench", "--db", "postgres", "--db-rtt", "1ms,5"], "gives no unit"),
        (vec!["bench", "--db-rtt", "0,5ms"], "the embedded one simulates it"),
        (vec!["bench", "--model", "pool"], "use --model reactive or --model lean"),
        (vec!["bench", "--model", "actors"], "--model"),
        (vec!["bench", "--db", "falkor://127.0.0.1:1", "--embedded-read", "cypher"], "--db embedded only"),
    ] {
        let out = common::output_within(
            Command::new(env!("CARGO_BIN_EXE_blocklab")).args(&args),
            std::time::Duration::from_secs(30),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// A server wrapper that fails in two ways: Test ID 3 never starts, Test ID 2
/// is killed in the middle of its first run.
const FAULTY_SERVER: &str = r#"#!/bin/sh
case "$BLOCKLAB_BENCH_TEST_ID" in
  3) echo "injected failure: refusing to start" >&2; exit 3 ;;
  2) "$REAL_BLOCKLAB" "$@" & pid=$!
     sleep 1
     echo "injected failure: killing the server mid-run" >&2
     kill -9 $pid
     exit 1 ;;
  *) exec "$REAL_BLOCKLAB" "$@" ;;
esac
"#;

#[test]
fn failed_servers_fail_their_test_only_with_the_reason_everywhere() {
    use std::os::unix::fs::PermissionsExt;
    let out = std::env::temp_dir().join(format!("blocklab-bench-faults-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let script = out.join("faulty-server.sh");
    std::fs::write(&script, FAULTY_SERVER).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let report = out.join("report");
    // /getData at 5 ms per read on one worker takes ~2 s a run, so the kill lands mid-run (--cold:
    // no warm-up before the runs, in which it would land instead).
    let run = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_blocklab"))
            .args([
                "bench",
                "--cold",
                "--apis",
                "1,2,3",
                "-n",
                "400",
                "--db-latency",
                "5ms",
                "--workers",
                "1",
                "--out",
            ])
            .arg(&report)
            .env("BLOCKLAB_SERVER_EXE", &script)
            .env("REAL_BLOCKLAB", env!("CARGO_BIN_EXE_blocklab")),
        std::time::Duration::from_secs(300),
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("2 of 3 tests failed"), "{stderr}");

    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("results.json")).unwrap()).unwrap();
    common::validate_schema("schema/bench-results.json", &results);
    let tests = results["tests"].as_array().unwrap();
    assert_eq!(tests[0]["status"], "ok");
    assert_eq!(tests[0]["runs"].as_array().unwrap().len(), 2, "the others still run");
    assert_eq!(tests[1]["status"], "failed");
    let died = tests[1]["failure"].as_str().unwrap();
    assert!(died.contains("died during the run") && died.contains("killing the server mid-run"), "{died}");
    assert_eq!(tests[2]["status"], "failed");
    let refused = tests[2]["failure"].as_str().unwrap();
    assert!(refused.contains("failed to start") && refused.contains("refusing to start"), "{refused}");
    for file in ["results.md", "report.html"] {
        let text = std::fs::read_to_string(report.join(file)).unwrap();
        assert!(text.contains("refusing to start") && text.contains("killing the server mid-run"), "{file}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn an_interrupted_bench_stops_its_servers_and_writes_partial_results() {
    let out = std::env::temp_dir().join(format!("blocklab-bench-int-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut child = Command::new(env!("CARGO_BIN_EXE_blocklab"))
        .args([
            "bench",
            "--apis",
            "2,3",
            "-n",
            "2000",
            "--db-latency",
            "5ms",
            "--workers",
            "1",
            "--nodes",
            "4321",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "bench did not stop after SIGINT");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["interrupted"], true);
    assert_eq!(results["tests"][0]["status"], "interrupted");
    // The protocol: warmed (not --cold), the warm-up under way when the interrupt came finished
    // and recorded, not counted as a run.
    let protocol = &results["conditions"]["protocol"];
    assert_eq!(
        (protocol["cold"].as_bool(), protocol["paused"].as_bool()),
        (Some(false), Some(true)),
        "{protocol}"
    );
    assert_eq!(protocol["order"][0], "run 1: blocklab", "{protocol}");
    assert!(results["tests"][0]["warm"]["requests"].as_u64().unwrap() > 0, "{:#}", results["tests"][0]);
    assert!(results["tests"][0]["runs"].as_array().unwrap().is_empty());
    assert!(std::fs::read_to_string(out.join("report.html")).unwrap().contains("interrupted"));
    // No server is left behind (--nodes 4321 marks this test's servers).
    let left =
        Command::new("pgrep").args(["-f", "serve --listen 127.0.0.1:0 --nodes 4321"]).output().unwrap();
    assert!(left.stdout.is_empty(), "servers left running: {}", String::from_utf8_lossy(&left.stdout));
    let _ = std::fs::remove_dir_all(&out);
}
