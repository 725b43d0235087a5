//! The real `blocklab load` binary: its JSON matches the schema in the repo,
//! its text has ab's figures, and its exit status says whether anything
//! succeeded.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{TestServer, behaviour};

fn blocklab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_blocklab"))
}

fn validate(schema_path: &str, document: &serde_json::Value) {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let location = "https://blocklab.invalid/schema/load-result.json";
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource(location, schema).unwrap();
    let index = compiler.compile(location, &mut schemas).unwrap();
    if let Err(e) = schemas.validate(document, index) {
        panic!("output does not match {schema_path}: {e:#}\n{document:#}");
    }
}

#[test]
fn json_output_matches_the_schema_closed_and_open_loop() {
    let server = TestServer::start(behaviour(|n, _| {
        (Duration::from_millis(1), Some(if n % 10 == 0 { 503 } else { 200 }))
    }));
    let dir = std::env::temp_dir().join(format!("blocklab-load-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, extra) in [("closed", vec!["-n", "200"]), ("open", vec!["-z", "1s", "--rate", "300"])] {
        let file = dir.join(format!("{name}.json"));
        let out = common::output_within(
            blocklab()
                .args(["load", "-k", "-c", "4", "--json", file.to_str().unwrap()])
                .args(&extra)
                .arg(server.url("/doc")),
            std::time::Duration::from_secs(60),
        );
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let document: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        validate("schema/load-result.json", &document);
        assert_eq!(document["mode"], name);
        assert_eq!(document["balanced"], true);
        assert!(document["status_codes"]["503"].as_u64().unwrap() > 0);
        if name == "open" {
            assert!(document["corrected_latency_ms"]["p99"].as_f64().unwrap() > 0.0);
            assert!(document["schedule"]["target_rate"].as_f64().unwrap() == 300.0);
        } else {
            assert!(document["corrected_latency_ms"].is_null());
            assert_eq!(document["completed"], 200);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        for needle in [
            "Complete requests:",
            "Failed requests:",
            "Requests per second:",
            "Non-2xx responses:",
            "Percentage of the requests served within a certain time (ms)",
            "(longest request)",
        ] {
            assert!(text.contains(needle), "{name}: no '{needle}' in\n{text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unreachable_target_completes_counts_and_exits_1() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = common::output_within(
        blocklab().args(["load", "-c", "2", "-n", "10", &format!("http://127.0.0.1:{port}/")]),
        std::time::Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Failed requests:        10"), "{text}");
    assert!(text.contains("connect refused: 10"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no request succeeded"));
}

#[test]
fn bad_load_flags_give_one_line_and_exit_2() {
    for (args, needle) in [
        (vec!["load", "not a url"], "malformed URL"),
        (vec!["load", "--cacert", "/nonexistent/ca.pem", "https://127.0.0.1/"], "cannot read --cacert"),
        (vec!["load", "--urls", "/nonexistent/targets.txt"], "cannot read --urls"),
        (vec!["load", "ftp://127.0.0.1/"], "unsupported scheme"),
        (vec!["load", "-c", "0", "http://127.0.0.1:1/"], "-c"),
        (vec!["load", "-c", "10", "-n", "5", "http://127.0.0.1:1/"], "smaller than -c"),
        (vec!["load", "-n", "5", "-z", "1s", "http://127.0.0.1:1/"], "cannot be used with"),
        (vec!["load", "--rate", "0", "http://127.0.0.1:1/"], "--rate"),
        (vec!["load", "--rate", "-1", "http://127.0.0.1:1/"], "--rate"),
        (vec!["load", "-z", "forever", "http://127.0.0.1:1/"], "--duration"),
        (vec!["load", "--timeout", "x", "http://127.0.0.1:1/"], "--timeout"),
        (
            vec!["load", "--json", "/nonexistent/dir/x.json", "-n", "1", "-c", "1", "http://127.0.0.1:1/"],
            "cannot write",
        ),
    ] {
        let out = common::output_within(blocklab().args(&args), std::time::Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} printed: {}", String::from_utf8_lossy(&out.stdout));
    }
}

/// Runs `blocklab load ARGS --json FILE` and returns the document.
fn run_json(args: &[&str], file: &std::path::Path) -> serde_json::Value {
    let out = common::output_within(
        blocklab().args(["load", "-q", "--json", file.to_str().unwrap()]).args(args),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

#[test]
fn merge_sums_simultaneous_runs_and_adds_their_histograms_losslessly() {
    let server = TestServer::start(behaviour(|n, _| {
        (Duration::from_millis(1 + n % 7), Some(if n % 10 == 0 { 503 } else { 200 }))
    }));
    let dir = std::env::temp_dir().join(format!("blocklab-load-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = server.url("/m");
    // Three agents at once, as three machines would.
    let agents: Vec<_> = (0..3)
        .map(|i| {
            let (url, file) = (url.clone(), dir.join(format!("agent{i}.json")));
            std::thread::spawn(move || run_json(&["-k", "-c", "2", "-n", "150", &url], &file))
        })
        .collect();
    let docs: Vec<serde_json::Value> = agents.into_iter().map(|a| a.join().unwrap()).collect();
    let merged_file = dir.join("merged.json");
    let mut command = blocklab();
    command.args(["load", "merge"]);
    for i in 0..3 {
        command.arg(dir.join(format!("agent{i}.json")));
    }
    let out = common::output_within(command.arg("--json").arg(&merged_file), Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("merged 3 runs") && text.contains("their time spans overlap"), "{text}");
    assert!(text.contains("Complete requests:      450"), "{text}");
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&merged_file).unwrap()).unwrap();
    validate("schema/load-result.json", &merged);
    let sum = |key: &str| docs.iter().map(|d| d[key].as_u64().unwrap()).sum::<u64>();
    for key in [
        "sent",
        "completed",
        "ok",
        "non_2xx",
        "connections_opened",
        "bytes_head",
        "bytes_body",
        "connections",
    ] {
        assert_eq!(merged[key].as_u64().unwrap(), sum(key), "{key}");
    }
    assert_eq!(
        merged["status_codes"]["503"].as_u64().unwrap(),
        docs.iter().map(|d| d["status_codes"]["503"].as_u64().unwrap_or(0)).sum::<u64>()
    );
    // Lossless: the merged histogram is the sum of the three, sample for sample.
    let decode = |d: &serde_json::Value| {
        blocklab::load::report::decode_histogram(d["histograms"]["latency"].as_str().unwrap()).unwrap()
    };
    let mut added = decode(&docs[0]);
    for d in &docs[1..] {
        added.add(decode(d)).unwrap();
    }
    let merged_h = decode(&merged);
    assert_eq!(merged_h.len(), 450);
    for q in [0.5, 0.9, 0.99, 1.0] {
        assert_eq!(merged_h.value_at_quantile(q), added.value_at_quantile(q), "q {q}");
    }
    assert_eq!(merged["latency_ms"]["p99"].as_f64().unwrap(), added.value_at_quantile(0.99) as f64 / 1000.0);

    // Runs one after the other are said not to overlap, and their gap is not time under load.
    std::thread::sleep(Duration::from_millis(300));
    run_json(&["-k", "-c", "2", "-n", "100", &url], &dir.join("later.json"));
    let out = common::output_within(
        blocklab().args(["load", "merge"]).arg(dir.join("agent0.json")).arg(dir.join("later.json")),
        Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("DO NOT OVERLAP"), "{text}");

    // Not one load, or not a result: one line, exit 2.
    let other = TestServer::start(behaviour(|_, _| (Duration::ZERO, Some(200))));
    run_json(&["-k", "-c", "1", "-n", "10", &other.url("/m")], &dir.join("other.json"));
    std::fs::write(dir.join("junk.json"), "{\"not\": 1}").unwrap();
    for bad in ["other.json", "junk.json", "missing.json"] {
        let out = common::output_within(
            blocklab().args(["load", "merge"]).arg(dir.join("agent0.json")).arg(dir.join(bad)),
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!((out.status.code(), stderr.trim_end().lines().count()), (Some(2), 1), "{bad}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// PyPI's `hdrhistogram`, installed into the git-ignored `.local/pyhdr` (as
/// scripts/falkordb installs FalkorDB); None after [`common::skip`] when pip
/// cannot install it.
fn python_hdrhistogram() -> Option<std::path::PathBuf> {
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".local/pyhdr");
    if !target.join("hdrh/log.py").exists() {
        let out = common::output_within(
            Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--root-user-action=ignore",
                ])
                .args(["--target"])
                .arg(&target)
                .arg("hdrhistogram==0.10.8"),
            Duration::from_secs(300),
        );
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr).into_owned();
            common::skip(&format!("pip could not install hdrhistogram: {}", why.trim_end()));
            return None;
        }
    }
    Some(target)
}

#[test]
fn the_hdr_log_reads_back_in_pythons_hdrhistogram_with_the_same_percentiles() {
    let Some(pythonpath) = python_hdrhistogram() else { return };
    let server =
        TestServer::start(behaviour(|n, _| (Duration::from_micros(200 + (n % 13) * 150), Some(200))));
    let dir = std::env::temp_dir().join(format!("blocklab-hdr-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("run.hlog");
    let out = common::output_within(
        blocklab()
            .args([
                "load",
                "-q",
                "-k",
                "-c",
                "4",
                "--threads",
                "2",
                "-z",
                "2500ms",
                "--rate",
                "400",
                "--hdr-log",
            ])
            .arg(&log)
            .arg("--json")
            .arg(dir.join("run.json"))
            .arg(server.url("/h")),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let script = r#"
import sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600000000, 3))
totals, intervals = {}, 0
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    intervals += 1
    totals.setdefault(h.get_tag(), HdrHistogram(1, 3600000000, 3)).add(h)
for tag in ("measured", "corrected"):
    t = totals[tag]
    print(tag, t.get_total_count(), *[t.get_value_at_percentile(p) for p in (50, 90, 99, 100)])
print("intervals", intervals)
"#;
    let py = common::output_within(
        Command::new("python3").env("PYTHONPATH", &pythonpath).args(["-c", script]).arg(&log),
        Duration::from_secs(60),
    );
    let printed = String::from_utf8_lossy(&py.stdout);
    assert!(py.status.success(), "{}{}", printed, String::from_utf8_lossy(&py.stderr));
    let decode = |key: &str| {
        blocklab::load::report::decode_histogram(doc["histograms"][key].as_str().unwrap()).unwrap()
    };
    for (tag, ours) in [("measured", decode("latency")), ("corrected", decode("corrected"))] {
        let line = printed.lines().find(|l| l.starts_with(tag)).unwrap_or_else(|| panic!("{printed}"));
        let figures: Vec<u64> = line.split_whitespace().skip(1).map(|v| v.parse().unwrap()).collect();
        assert_eq!(figures[0], doc["completed"].as_u64().unwrap(), "{tag}: every sample is in the log");
        for (p, theirs) in [50.0, 90.0, 99.0, 100.0].into_iter().zip(&figures[1..]) {
            // The same value, to the histogram's precision (its equivalent-value range), with
            // Python's rounding of the rank (Rust's value_at_quantile rounds it up instead).
            let rank = ((p / 100.0 * ours.len() as f64 + 0.5) as u64).max(1);
            let mut seen = 0;
            let mine = ours
                .iter_recorded()
                .find(|v| {
                    seen += v.count_since_last_iteration();
                    seen >= rank
                })
                .map(|v| v.value_iterated_to())
                .unwrap();
            assert!(ours.equivalent(mine, *theirs), "{tag} p{p}: python {theirs} µs, blocklab {mine} µs");
        }
    }
    let intervals: u64 = printed.lines().last().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(
        (5..=8).contains(&intervals),
        "{intervals} intervals (two tags, one per second of 2.5 s):\n{printed}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
