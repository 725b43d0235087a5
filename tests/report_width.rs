//! Every table of the three pages a reader opens — the main job's
//! `index.html`, the bench's `report.html` and the sweep's `report.html` —
//! has at most ten columns (`page::MAX_COLUMNS`): a wider one runs off the
//! page at the width `scripts/screenshots` renders. So do the tables of each
//! `results.md`. Each page comes from a real run of the binary (a quick
//! bench on the embedded database, a quick sweep of two server models); the
//! bench's results are then widened in process to three targets with both
//! ceilings, two stall rounds and the link's faults, the widest report the
//! main job writes, and rendered again, and the index is rendered from them.
//! The columns are counted cell by cell, row by row, from the HTML itself.

mod common;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use blocklab::page::MAX_COLUMNS;
use blocklab::studies::execution_models::{charts, reading, report, results::BenchResults};

/// Each row of each `<table>` of `html` as (table number, cells in the row,
/// the row's start): a cell is a `<th>` or a `<td>`.
fn rows(html: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    for (number, table) in html.split("<table").skip(1).enumerate() {
        let table = table.split("</table>").next().unwrap_or("");
        for row in table.split("<tr").skip(1) {
            let row = row.split("</tr>").next().unwrap_or("");
            let cells = ["<th>", "<th ", "<td>", "<td "].iter().map(|tag| row.matches(tag).count()).sum();
            out.push((number, cells, row.chars().take(200).collect()));
        }
    }
    out
}

/// Each line of a Markdown table in `md` with its number of cells.
fn markdown_rows(md: &str) -> Vec<(usize, String)> {
    md.lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .map(|l| (l.trim_matches('|').split('|').count(), l.chars().take(200).collect()))
        .collect()
}

/// Panics, naming each row too wide, unless every table of `html` (and of
/// `md`, when given) has at most [`MAX_COLUMNS`] columns; returns how many
/// tables it checked.
fn assert_fits(what: &str, html: &str, md: Option<&str>) -> usize {
    let rows = rows(html);
    assert!(!rows.is_empty() || !html.contains("<table"), "{what}: tables with no rows");
    let wide: Vec<String> = rows
        .iter()
        .filter(|(_, cells, _)| *cells > MAX_COLUMNS)
        .map(|(n, cells, row)| format!("table {n}: {cells} columns: {row}"))
        .chain(
            markdown_rows(md.unwrap_or(""))
                .into_iter()
                .filter(|(cells, _)| *cells > MAX_COLUMNS)
                .map(|(cells, line)| format!("results.md, {cells} columns: {line}")),
        )
        .collect();
    assert!(wide.is_empty(), "{what}: wider than {MAX_COLUMNS} columns:\n{}", wide.join("\n"));
    rows.iter().map(|(n, ..)| n + 1).max().unwrap_or(0)
}

#[test]
fn the_counter_finds_a_table_of_eleven_columns() {
    let cells = |tag: &str| (0..11).map(|i| format!("<{tag}>{i}</{tag}>")).collect::<String>();
    let html = format!(
        "<table><thead><tr>{}</tr></thead><tbody><tr>{}</tr></tbody></table><table><tr><td>a</td></tr></table>",
        cells("th"),
        cells("td")
    );
    assert_eq!(rows(&html).iter().map(|(n, c, _)| (*n, *c)).collect::<Vec<_>>(), [(0, 11), (0, 11), (1, 1)]);
    let too_wide = std::panic::catch_unwind(|| assert_fits("eleven", &html, None));
    let message = too_wide.expect_err("eleven columns must not pass");
    let message = message.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("table 0: 11 columns"), "{message}");
    let md = "| a | b | c | d | e | f | g | h | i | j | k |\n|---|\n| 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 11 |\n";
    assert!(std::panic::catch_unwind(|| assert_fits("eleven in markdown", "", Some(md))).is_err());
    assert_eq!(assert_fits("ten", &html.replace("<th>10</th>", "").replace("<td>10</td>", ""), None), 2);
}

#[test]
fn every_table_of_the_index_and_both_reports_fits_the_page() {
    let dir = std::env::temp_dir().join(format!("blocklab-report-width-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    // The bench, run for real: one target, two runs.
    let bench = dir.join("bench");
    let run = common::output_within(
        common::blocklab().args(["bench", "--quick", "-n", "400", "--runs", "2", "--out"]).arg(&bench),
        Duration::from_secs(300),
    );
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_fits("bench stdout", "", Some(&stdout));
    let tables =
        assert_fits("bench report.html", &read(&bench, "report.html"), Some(&read(&bench, "results.md")));
    assert!(tables >= 8, "the seed's table, the side by side's three, the per-run three…: {tables}");

    // The same run widened to the main job's three targets, with every section a run can have.
    let json: Value = serde_json::from_str(&read(&bench, "results.json")).unwrap();
    let wide: BenchResults = serde_json::from_value(widened(json)).expect("the widened results read back");
    let main_job = dir.join("main-job");
    report::write_all(&wide, &main_job.join("bench")).unwrap();
    let html = read(&main_job.join("bench"), "report.html");
    let tables =
        assert_fits("three targets' report.html", &html, Some(&read(&main_job.join("bench"), "results.md")));
    assert!(tables >= 17, "each question's table, the ceilings', the stalls' and the faults' two: {tables}");
    for (section, header) in [
        ("Requests per second", "<th>python-neo4j req/s</th>"),
        ("Latency", "<th>play p99 ms</th>"),
        ("CPU per request", "<th>database µs/req under play</th>"),
        ("Shares of each driver's ceiling", "<th>play ÷ its driver's ceiling</th>"),
    ] {
        assert!(html.contains(header), "{section}: no {header}");
    }
    assert!(
        html.contains("<th>recovered after s</th>") && html.contains("<th>round</th>"),
        "the stall's tables"
    );

    // The sweep, run for real: two server models, three levels.
    let sweep = main_job.join("sweep");
    let run = common::output_within(
        common::blocklab().args(["sweep", "--quick", "--targets", "lean,pool", "--out"]).arg(&sweep),
        Duration::from_secs(300),
    );
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let sweep_md = read(&sweep, "results.md");
    let tables = assert_fits("sweep report.html", &read(&sweep, "report.html"), Some(&sweep_md));
    assert!(tables >= 5, "where each stopped coping, memory, the per-level three: {tables}");

    // The index of the main job, from both studies' answers and charts.
    let sweep_reading: Vec<String> = sweep_md
        .lines()
        .skip_while(|l| *l != "## Reading")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("- ").map(str::to_string))
        .collect();
    let sections = [
        blocklab::harness::render::IndexSection {
            folder: "bench".to_string(),
            title: "Study 1".to_string(),
            about: "The seed's endpoints.".to_string(),
            answer: reading::answer(&wide),
            chart: charts::all(&wide).into_iter().find(|c| c.file == "side_by_side.svg"),
            ran: vec!["blocklab, play and python-neo4j".to_string()],
            ..Default::default()
        },
        blocklab::harness::render::IndexSection {
            folder: "sweep".to_string(),
            title: "Study 2".to_string(),
            about: "Slow requests under a cap.".to_string(),
            answer: sweep_reading,
            ..Default::default()
        },
    ];
    let machine = blocklab::harness::conditions::machine();
    let index = blocklab::harness::render::index(&main_job, &machine, &sections, &[]);
    assert!(index.contains("Study 2") && index.contains("<svg"), "both studies, and study 1's chart");
    assert_fits("index.html", &index, None);
    let _ = std::fs::remove_dir_all(&dir);
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
}

/// A one-target bench's `results.json` widened to the main job's shape:
/// play (a JVM, no Test ID 9) and python-neo4j beside blocklab, each
/// database figure measured, both drivers' ceilings before and after the
/// matrix, a database warm-up, two rounds of a stall on three endpoints of
/// two targets, and the link's four faults.
fn widened(mut results: Value) -> Value {
    let blocklab: Vec<Value> = results["tests"].as_array().unwrap().clone();
    let mut tests = Vec::new();
    for (target, scale) in [("blocklab", 1.0), ("play", 0.8), ("python-neo4j", 0.4)] {
        for test in &blocklab {
            let mut test = test.clone();
            test["target"] = json!(target);
            if target != "blocklab" && test["test_id"] == 9 {
                test["status"] = json!("not served");
                test["runs"] = json!([]);
            }
            for run in test["runs"].as_array_mut().unwrap() {
                run["rps"] = json!(run["rps"].as_f64().unwrap() * scale);
                run["db_cpu_per_request_us"] = json!(250.0);
                run["db_cpu_s"] = json!(0.1);
                if target == "play" {
                    run["jvm"] = json!({"heap_peak_mib": 61.5, "gc_collections": 7, "gc_pause_ms": 38.0});
                }
            }
            tests.push(test);
        }
    }
    results["tests"] = json!(tests);
    let c = &mut results["conditions"];
    c["targets"] = json!(["blocklab 0.1.0 (Rust)", "play 2.7.3 (Java 17)", "python-neo4j (Python 3.11)"]);
    c["families"] = json!({"blocklab": "blocklab", "play": "jvm", "python-neo4j": "python"});
    c["warm_up"] = json!({"seconds": 180.0, "cpu_per_read_us": [5727.0, 900.0, 420.0, 313.0], "settled": false,
                          "max_s": 180.0});
    let ceiling = |reads: f64, db_us: f64| {
        json!({"client": "128 reads in flight", "cpus": "CPU 0", "seconds": 10.0, "warmup_s": 5.0,
               "reads": (reads * 10.0) as u64, "reads_per_s": reads, "p50_ms": 40.0, "p99_ms": 95.0, "errors": 0,
               "wrong_answers": 0, "client_cpu_per_read_us": 30.0, "db_cpu_per_query_us": db_us,
               "bound": "database"})
    };
    c["ceilings"] = json!([
        {"client": "java_driver", "before": ceiling(2653.0, 384.0), "after": ceiling(2638.0, 380.0)},
        {"client": "blocklab", "before": ceiling(3900.0, 245.0), "after": ceiling(3950.0, 242.0)}
    ]);
    c["ceiling_clients"] =
        json!({"blocklab": "blocklab", "play": "java_driver", "python-neo4j": "java_driver"});
    let mut stalls = Vec::new();
    for round in [1, 2] {
        for target in ["blocklab", "play"] {
            for (id, api) in [(2, "/getData"), (3, "/getDataAsync"), (7, "/getDataAkkaAsync")] {
                stalls.push(stall(target, id, api, round));
            }
        }
    }
    results["stalls"] = json!(stalls);
    results["faults"] = json!(["reset_peer", "timeout", "limit_data", "slow_close"].map(|fault| json!({
        "target": "blocklab", "api": "/getDataAsync", "fault": fault, "what": "a fault", "held_s": 3.0,
        "during": {"right": 140, "wrong": 0, "failed": {"status 503": 10}, "longest_ms": 2100.0},
        "after": {"right": 320, "wrong": 0, "failed": {}, "longest_ms": 40.0},
        "recovered_after_s": 0.4, "survived": true
    })));
    results
}

/// One round of `target`'s endpoint through a 5 s stall of +50 ms, 20 s of seconds.
fn stall(target: &str, id: u32, api: &str, round: u32) -> Value {
    let seconds: Vec<Value> = (0..20)
        .map(|s| {
            let during = (8..13).contains(&s);
            json!({"second": s, "rps": if during { 200.0 } else { 450.0 }, "failed": 0, "p50_ms": 5.0,
                   "p99_ms": if during { 120.0 } else { 20.0 }, "threads": 40, "in_flight": 12, "waiting": 0})
        })
        .collect();
    json!({
        "target": target, "test_id": id, "api": api, "round": round,
        "stall": {"kind": {"slower": 50}, "length": 5000}, "rate": 450.0, "rate_from": "half the lowest closed-loop rate",
        "warm_s": 10.0, "starts_s": 8, "seconds": seconds, "before_rps": 450.0, "before_p99_ms": 20.0,
        "recovered_after_s": round + 1, "steady_p99_max_ms": 24.0, "recovered_in_spread_after_s": round + 1,
        "failed_during": 0, "failed_after": 0, "peak_in_flight": 12, "peak_threads": 40, "peak_waiting": 0,
        "longest_ms": 180.0, "failures": {}, "survived": true, "note": null
    })
}
