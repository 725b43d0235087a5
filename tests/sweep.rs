//! `blocklab sweep` end to end, with small delays and levels: a death by
//! OOM detected at the level the cap implies, a target that exits by itself
//! reported as exited, `--url` against a running server, the uncapped path,
//! the JVM peers (warmed up first), connections from several source
//! addresses, levels the descriptor limit stops; and nothing left behind (no
//! child process, no cgroup).

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Listening, blocklab, output_within};

/// Runs `blocklab sweep ARGS --out DIR` with a tag in its environment, and
/// returns its output and results.json. Every process the sweep started
/// carries the tag, so the test can check none is left.
fn sweep(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (std::process::Output, serde_json::Value) {
    sweep_in(blocklab(), dir, args, env)
}

/// As [`sweep`], `command` being the blocklab binary or a wrapper of it.
fn sweep_in(
    mut command: std::process::Command,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Output, serde_json::Value) {
    let _turn = one_at_a_time();
    let tag = format!("blocklab-sweep-test-{}-{}", std::process::id(), dir.display());
    command.arg("sweep").args(args).arg("--out").arg(dir).env("BLOCKLAB_TEST_TAG", &tag);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = output_within(&mut command, Duration::from_secs(240));
    assert_no_leftovers(&tag);
    let json = std::fs::read_to_string(dir.join("results.json")).unwrap_or_else(|e| {
        panic!("no results.json ({e}); stderr: {}", String::from_utf8_lossy(&out.stderr))
    });
    (out, serde_json::from_str(&json).unwrap())
}

/// One sweep at a time: they pin targets to the same CPUs, and the leftover
/// check must not see another test's cgroups.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// No process with `tag` in its environment, no cgroup of a sweep that has
/// ended (`blocklab-sweep-PID-…` whose PID is gone: a sweep still running
/// beside the tests, a benchmark's, owns its own).
fn assert_no_leftovers(tag: &str) {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if String::from_utf8_lossy(&environ).contains(tag) {
            let cmdline = std::fs::read_to_string(entry.path().join("cmdline")).unwrap_or_default();
            panic!("left behind: pid {:?}: {}", entry.file_name(), cmdline.replace('\0', " "));
        }
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    if let Some(path) = own.lines().find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string())) {
        let dir = Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix("blocklab-sweep-") else { continue };
            let owner = rest.split('-').next().unwrap_or("");
            let running = !owner.is_empty() && Path::new("/proc").join(owner).exists();
            assert!(running, "cgroup left behind: {}", entry.path().display());
        }
    }
}

fn target<'a>(results: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    results["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("blocklab-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Under a 24 MiB cap, 600 slow requests cost `thread` ~45 MiB (a thread
/// each) but `reactive` ~16 MiB and `lean` ~5: thread is OOM-killed at 600,
/// its 700 is not run, and the others hold both.
#[test]
fn thread_is_oom_killed_where_the_cap_says_and_the_others_go_on() {
    let dir = temp_dir("sweep-oom");
    let (out, results) = sweep(
        &dir,
        &[
            "--targets",
            "reactive,lean,thread",
            "--levels",
            "20,600,700",
            "--delay",
            "200ms",
            "--timeout",
            "20s",
            "--memory",
            "24MiB",
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let thread = target(&results, "thread");
    assert_eq!(thread["died"]["how"], "oom_killed", "{thread:#}");
    assert_eq!(thread["died"]["level"], 600);
    assert_eq!(thread["highest_full_success"], 20);
    assert_eq!(thread["steps"][2]["status"], "not_run_down");
    for name in ["reactive", "lean"] {
        let t = target(&results, name);
        assert!(t["died"].is_null(), "{name} died: {t:#}");
        assert_eq!(t["highest_full_success"], 700, "{t:#}");
        assert_eq!(t["cap_bytes"], 24 << 20);
        // The slowest answer, split by the kernel's receive timestamp: it reached the
        // client's socket after the 200 ms delay and no later than the client read it.
        for step in t["steps"].as_array().unwrap() {
            let (max, load) = (step["max_ms"].as_f64().unwrap(), &step["load"]);
            let arrived = load["slowest_arrived_ms"].as_f64().expect("a receive timestamp");
            assert!((200.0..=max).contains(&arrived), "{step:#}");
            assert!((0.0..=max - 200.0).contains(&load["unread_max_ms"].as_f64().unwrap()), "{step:#}");
        }
    }
    for file in [
        "results.md",
        "results.json",
        "results.csv",
        "report.html",
        "charts/success.svg",
        "charts/memory.svg",
    ] {
        assert!(dir.join(file).exists(), "{file} missing");
    }
    common::validate_schema("schema/sweep-results.json", &results);
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert!(md.contains("OOM-killed at 600") && md.contains("not run: down"), "{md}");
    assert!(md.contains("thread was OOM-killed at 600 concurrent requests under a 24 MiB cap"), "{md}");
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3 * 3, "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A wrapper that starts the real server and exits 3 a second later.
const VANISHING_SERVER: &str = r#"#!/bin/sh
"$REAL_BLOCKLAB" "$@" & pid=$!
sleep 1.5
kill -9 $pid
exit 3
"#;

#[test]
fn a_target_that_exits_by_itself_is_reported_as_exited() {
    let dir = temp_dir("sweep-exit");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("vanishing-server");
    std::fs::write(&script, VANISHING_SERVER).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&script).status().unwrap();
    let (out, results) = sweep(
        &dir,
        &[
            "--targets",
            "lean",
            "--levels",
            "5,10,20",
            "--delay",
            "1s",
            "--timeout",
            "5s",
            "--memory",
            "64MiB",
        ],
        &[
            ("BLOCKLAB_SERVER_EXE", script.to_str().unwrap()),
            ("REAL_BLOCKLAB", env!("CARGO_BIN_EXE_blocklab")),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let lean = target(&results, "lean");
    assert_eq!(lean["died"]["how"], "exited", "{lean:#}");
    assert!(lean["died"]["detail"].as_str().unwrap().contains("exit status: 3"), "{lean:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_running_service_by_url_and_the_uncapped_path() {
    let server = Listening::serve(&["--model", "lean", "--workers", "1"]);
    let dir = temp_dir("sweep-url");
    let url = format!("http://{}/delay?ms=100", server.addr);
    // A low per-address count (a test knob) makes 50 connections come from
    // 127.0.0.1, 127.0.0.2 and 127.0.0.3, as 50,000 would with the default.
    let args = ["--url", &url, "--levels", "5,50", "--timeout", "5s", "--connections-per-address", "20"];
    let (out, results) = sweep(&dir, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let t = target(&results, &url);
    assert_eq!(t["highest_full_success"], 50, "{t:#}");
    assert_eq!(t["steps"][0]["load"]["source_addresses"], 1, "{t:#}");
    assert_eq!(t["steps"][1]["load"]["source_addresses"], 3, "{t:#}");
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert!(md.contains("more than one loopback source address") && md.contains("at 50: 3"), "{md}");
    assert!(t["cap_bytes"].is_null() && t["command"].is_null());
    assert!(t["cap"].as_str().unwrap().starts_with("none"), "{t:#}");

    let dir = temp_dir("sweep-nocgroup");
    let (out, results) = sweep(
        &dir,
        &["--targets", "reactive", "--levels", "5", "--delay", "50ms", "--timeout", "5s", "--no-cgroup"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: cgroups off"));
    assert!(results["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("uncapped")));
    assert_eq!(target(&results, "reactive")["highest_full_success"], 5);
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert!(md.contains("**Warning:** cgroups off"), "{md}");
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert!(csv.lines().nth(1).unwrap().contains("cgroups off"), "{csv}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("cgroups off"), "the report does not carry the warning");
}

/// A level needing more connections than one client process holds is split
/// over several (`blocklab sweep-agent`), each from its own source addresses,
/// told to send at once; their outcomes merge into the same counts one
/// process gives: every request once, every response time kept.
#[test]
fn a_level_split_over_two_client_processes_merges_to_the_same_counts() {
    let server = Listening::serve(&["--model", "lean", "--workers", "1"]);
    let url = format!("http://{}/delay?ms=300", server.addr);
    let base = ["--url", &url, "--levels", "60,120", "--timeout", "10s", "--connections-per-address", "40"];
    let one_dir = temp_dir("sweep-one-process");
    let (out, one) = sweep(&one_dir, &base, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let split_dir = temp_dir("sweep-two-processes");
    let mut split_args = base.to_vec();
    split_args.extend(["--connections-per-process", "60"]);
    let (out, split) = sweep(&split_dir, &split_args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (one, split) = (target(&one, &url), target(&split, &url));
    for (i, level) in [(0, 60), (1, 120)] {
        let (a, b) = (&one["steps"][i]["load"], &split["steps"][i]["load"]);
        assert_eq!(a["processes"], 1, "{a:#}");
        assert_eq!(b["processes"], if level > 60 { 2 } else { 1 }, "{b:#}");
        assert_eq!(a["outcomes"], b["outcomes"], "{level}: one process {a:#}, split {b:#}");
        assert_eq!(b["outcomes"]["ok"], level, "{b:#}");
        assert_eq!(b["connected"], level, "{b:#}");
        // 120 connections, 40 per address: 127.0.0.1..3 in all, whichever process opened them.
        assert_eq!(a["source_addresses"], b["source_addresses"], "{a:#} {b:#}");
        // Every response time of the split level is kept and starts at its own send.
        let min = split["steps"][i]["min_ms"].as_f64().unwrap();
        assert!((300.0..3000.0).contains(&min), "min {min} ms for a 300 ms delay");
        assert!(b["send_spread_ms"].as_f64().unwrap() < 2000.0, "{b:#}");
    }
    assert_eq!(split["highest_full_success"], 120, "{split:#}");
    let md = std::fs::read_to_string(split_dir.join("results.md")).unwrap();
    assert!(md.contains("more than one client process") && md.contains("at 120: 2"), "{md}");
}

#[test]
fn the_jvm_peers_in_a_short_sweep() {
    let dir = temp_dir("sweep-jvm");
    let (out, results) = sweep(
        &dir,
        &[
            "--targets",
            "tomcat,netty",
            "--levels",
            "10,30",
            "--delay",
            "100ms",
            "--timeout",
            "20s",
            "--jvm-memory",
            "400MiB",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for name in ["tomcat", "netty"] {
        let t = target(&results, name);
        assert_eq!(t["highest_full_success"], 30, "{t:#}");
        assert!(t["steps"][1]["peak_threads"].as_u64().unwrap() > 5, "{t:#}");
        assert_eq!(t["cap_bytes"], 400 << 20, "--jvm-memory caps the whole JVM: {t:#}");
    }
}

/// Fails (never skips) when `name` is not built: scripts/test builds every peer first.
fn assert_built(name: &str) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/peers");
    let built = std::process::Command::new(script).args(["check", name]).status().unwrap();
    assert!(built.success(), "{name} is not built: run scripts/peers install && scripts/peers build");
}

/// A sweep with a 200 ms delay that must succeed, its results checked
/// against the schema.
fn short_sweep(dir: &Path, args: &[&str]) -> serde_json::Value {
    let args: Vec<&str> = args.iter().copied().chain(["--delay", "200ms", "--timeout", "20s"]).collect();
    let (out, results) = sweep(dir, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    common::validate_schema("schema/sweep-results.json", &results);
    results
}

/// The seed's reactive app and Go's net/http beside a model, in a short
/// sweep: each appears with its figures, Go with GOMEMLIMIT under its cap,
/// the JVM with its heap, each with its memory per in-flight request.
#[test]
fn spring_webflux_and_go_beside_a_model_in_a_short_sweep() {
    for name in ["spring-webflux", "go-nethttp"] {
        assert_built(name);
    }
    let dir = temp_dir("sweep-seed-stack");
    let results = short_sweep(&dir, &["--targets", "lean,spring-webflux,go-nethttp", "--levels", "10,30"]);
    assert_eq!(results["client"], "blocklab");
    for name in ["lean", "spring-webflux", "go-nethttp"] {
        let t = target(&results, name);
        assert_eq!(t["highest_full_success"], 30, "{t:#}");
        for step in t["steps"].as_array().unwrap() {
            assert!(step["min_ms"].as_f64().unwrap() >= 200.0, "answered before the delay: {t:#}");
            assert!(step["max_ms"].as_f64().unwrap() < 20_000.0, "{t:#}");
            assert!(step["peak_memory_bytes"].as_u64().unwrap() > 0, "{t:#}");
        }
        assert_eq!(t["per_request"]["levels"], serde_json::json!([10, 30]), "{t:#}");
        assert!(t["per_request"]["process_kib"].is_number(), "{t:#}");
    }
    let flux = target(&results, "spring-webflux");
    assert!(flux["steps"][1]["peak_heap_bytes"].as_u64().unwrap() > 1 << 20, "the JVM's heap: {flux:#}");
    assert!(flux["per_request"]["heap_kib"].is_number(), "{flux:#}");
    assert!(flux["cap"].as_str().unwrap().contains("-Xmx50M"), "{flux:#}");
    let warmup = flux["warmup"].as_str().unwrap_or_else(|| panic!("the JVM is warmed up first: {flux:#}"));
    assert!(warmup.contains("300 GET /test") && warmup.contains("answered 2xx"), "{warmup}");
    let go = target(&results, "go-nethttp");
    assert!(go["cap"].as_str().unwrap().contains("GOMEMLIMIT=40MiB"), "{go:#}");
    assert!(go["warmup"].is_null(), "no warm-up for Go: {go:#}");
    // lean learns its costs from the levels themselves: no warm-up.
    assert!(target(&results, "lean")["warmup"].is_null(), "{:#}", target(&results, "lean"));
    assert!(target(&results, "lean")["steps"][0]["peak_heap_bytes"].is_null());
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert!(md.contains("## Memory per in-flight request") && md.contains("## The seed's question"), "{md}");
    assert!(dir.join("charts/per-request.svg").is_file());
}

/// Python's and Node's peers in a short sweep, each under its runtime's own
/// memory setting: Python capped as a whole process at `--memory` (it has no
/// heap setting), Node's V8 heap at the cap (`--max-old-space-size`, the
/// JVMs' `-Xmx`) and its whole process uncapped. gunicorn's threads are
/// counted in its worker, a child of the process started.
#[test]
fn python_and_node_in_a_short_sweep_under_their_memory_settings() {
    let peers = ["python-asyncio", "python-threads", "node"];
    for name in peers {
        assert_built(name);
    }
    let dir = temp_dir("sweep-python-node");
    let results = short_sweep(&dir, &["--targets", &peers.join(","), "--levels", "10,30"]);
    for name in peers {
        let t = target(&results, name);
        assert_eq!(t["highest_full_success"], 30, "{t:#}");
        assert!(t["steps"][0]["min_ms"].as_f64().unwrap() >= 200.0, "answered before the delay: {t:#}");
        assert!(t["per_request"]["process_kib"].is_number(), "{t:#}");
        // What it holds idle, beside its cap: an interpreter is more than a megabyte.
        let idle = t["idle_bytes"].as_u64().unwrap_or(0);
        assert!(idle > 1 << 20, "{name} idle {idle} B: {t:#}");
    }
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert!(md.contains("| target | memory cap | idle | verdict |"), "{md}");
    for python in ["python-asyncio", "python-threads"] {
        let t = target(&results, python);
        assert_eq!(t["cap_bytes"], 50 << 20, "{t:#}");
        assert!(t["cap"].as_str().unwrap().starts_with("50 MiB, whole process"), "{t:#}");
    }
    let threads = target(&results, "python-threads")["steps"][1]["peak_threads"].as_u64().unwrap();
    assert!(threads >= 30, "30 requests sleep in 30 of the worker's threads, {threads} counted");
    let node = target(&results, "node");
    assert!(node["cap_bytes"].is_null(), "{node:#}");
    assert!(node["cap"].as_str().unwrap().ends_with("heap NODE_OPTIONS=--max-old-space-size=50"), "{node:#}");
}

/// The sweep's client, as the server sees it: with the per-address count
/// forced down to 4, ten connections come from three loopback addresses.
#[tokio::test]
async fn connections_beyond_the_per_address_count_come_from_the_next_loopback_address() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut peers = std::collections::BTreeSet::new();
        for _ in 0..10 {
            let (mut stream, peer) = listener.accept().await.unwrap();
            peers.insert(peer.ip().to_string());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut chunk = [0u8; 512];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
            });
        }
        peers
    });
    let run = blocklab::studies::robustness::step::run(addr, "x", "/", 10, Duration::from_secs(10), 4);
    let load = tokio::time::timeout(Duration::from_secs(20), run).await.expect("the step is bounded");
    let peers = tokio::time::timeout(Duration::from_secs(5), server).await.unwrap().unwrap();
    assert_eq!(load.count(blocklab::studies::robustness::step::Outcome::Ok), 10, "{load:?}");
    assert_eq!(load.source_addresses, 3, "{load:?}");
    let expected: std::collections::BTreeSet<String> =
        ["127.0.0.1", "127.0.0.2", "127.0.0.3"].into_iter().map(String::from).collect();
    assert_eq!(peers, expected);
}

/// `program` under a descriptor limit of `limit` (soft and hard) that it
/// cannot raise: `prlimit` lowers it, and as root `setpriv` first drops
/// CAP_SYS_RESOURCE from the bounding set and the inheritable one (root
/// regains every capability of the bounding set at exec, and with this one
/// a sweep would raise its hard limit and run every level). Anyone else
/// gains no capability at exec: prlimit alone holds.
fn limited_to(limit: u64, program: &str) -> std::process::Command {
    let euid = procfs::process::Process::myself().and_then(|me| me.status()).map(|status| status.euid);
    let mut command = if euid.unwrap() == 0 {
        let mut setpriv = std::process::Command::new("setpriv");
        setpriv.args(["--bounding-set", "-sys_resource", "--inh-caps", "-sys_resource", "prlimit"]);
        setpriv
    } else {
        std::process::Command::new("prlimit")
    };
    command.arg(format!("--nofile={limit}:{limit}")).arg(program);
    command
}

/// The blocklab binary under [`limited_to`].
fn blocklab_limited_to(limit: u64) -> std::process::Command {
    let mut command = limited_to(limit, env!("CARGO_BIN_EXE_blocklab"));
    command.env("RUST_LOG", "warn");
    command
}

/// The wrapper the two tests below rely on holds on any machine: under it,
/// even root cannot raise the hard limit by one.
#[test]
fn the_descriptor_limit_of_the_wrapper_cannot_be_raised() {
    let raised = output_within(limited_to(400, "sh").args(["-c", "ulimit -Hn 401"]), Duration::from_secs(10));
    let refused = String::from_utf8_lossy(&raised.stderr);
    assert!(!raised.status.success() && refused.contains("Operation not permitted"), "{refused}");
    let held = output_within(limited_to(400, "sh").args(["-c", "ulimit -Hn"]), Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&held.stdout).trim(), "400");
}

/// Under a descriptor limit of 1200 it cannot raise, of which 1024 are kept
/// spare: `pool`, which has no admission control, is not run at 500 (its own
/// limit, read from it, allows 176), and the report says why; `lean` runs
/// every level, restarted with as many worker processes as the level needs
/// (⌈500 / 176⌉ = 3), its 500 requests sent by as many client processes and
/// merged.
#[test]
fn a_target_without_admission_control_is_not_run_past_its_descriptors_and_lean_gets_workers() {
    let dir = temp_dir("sweep-nofile");
    let args = ["--targets", "lean,pool", "--levels", "50,500", "--delay", "100ms", "--timeout", "10s"];
    let (out, results) = sweep_in(blocklab_limited_to(1200), &dir, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    common::validate_schema("schema/sweep-results.json", &results);
    let (lean, pool) = (target(&results, "lean"), target(&results, "pool"));
    assert_eq!(results["descriptor_limit"], 1200, "the limit the sweep ran under, not raised");
    assert_eq!(pool["admission"], false);
    assert_eq!(pool["descriptor_limit"], 1200, "{pool:#}");
    assert_eq!(pool["steps"][0]["status"], "run", "{pool:#}");
    assert_eq!(pool["steps"][1]["status"], "not_run_limit", "{pool:#}");
    assert_eq!(lean["admission"], true);
    assert_eq!(lean["highest_full_success"], 500, "{lean:#}");
    assert_eq!(lean["steps"][0]["workers"], 1, "{lean:#}");
    assert_eq!(lean["steps"][1]["workers"], 3, "{lean:#}");
    assert_eq!(lean["steps"][1]["load"]["processes"], 3, "{lean:#}");
    assert_eq!(lean["steps"][1]["load"]["outcomes"]["ok"], 500, "{lean:#}");
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert!(
        md.contains("| pool | 500 |")
            && md.contains("not run: over its 1200 descriptors, no admission control"),
        "{md}"
    );
    assert!(
        md.contains("pool: held 50 ") && md.contains("500 and above not run: over its 1200 descriptors"),
        "{md}"
    );
    assert!(md.contains("| lean | 500 | 100.0 | 0 | 0 | 0 |"), "{md}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("restarted with 3 worker processes for 500"));
}

/// A 503 is a refusal, its own outcome: lean, one worker process under a
/// limit of 400 descriptors it cannot raise, sent 600 requests at once by two client
/// processes, admits what its descriptors allow and refuses the rest at
/// once, from the descriptor it keeps in reserve. Every request is served
/// or refused, none times out, lean is alive after; the table, the reading
/// and the chart count the refusals.
#[test]
fn refusals_are_counted_apart_from_timeouts_and_failures() {
    let dir = temp_dir("sweep-refused");
    let args = [
        "--targets",
        "lean",
        "--lean-processes",
        "1",
        "--levels",
        "600",
        "--delay",
        "300ms",
        "--timeout",
        "20s",
        "--connections-per-process",
        "300",
    ];
    let (out, results) = sweep_in(blocklab_limited_to(400), &dir, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    common::validate_schema("schema/sweep-results.json", &results);
    let lean = target(&results, "lean");
    assert_eq!(results["descriptor_limit"], 400, "the limit the sweep ran under, not raised");
    assert_eq!(lean["descriptor_limit"], 400, "{lean:#}");
    let step = &lean["steps"][0];
    let outcomes = &step["load"]["outcomes"];
    let count = |name: &str| outcomes[name].as_u64().unwrap_or(0);
    assert!(count("refused") >= 100, "{step:#}");
    assert!(count("ok") >= 200, "{step:#}");
    assert_eq!(count("ok") + count("refused"), 600, "nothing but served and refused: {step:#}");
    assert_eq!(step["alive_after"], true, "{step:#}");
    assert!(step["load"]["refused_max_ms"].as_f64().unwrap() < 10_000.0, "{step:#}");
    // The server's reason, from its x-refused-for header, summed over the two client processes.
    let why = step["load"]["refused_for"].as_object().expect("refusals by reason");
    assert_eq!(why.values().map(|n| n.as_u64().unwrap()).sum::<u64>(), count("refused"), "{step:#}");
    assert!(why.get("descriptors").and_then(|n| n.as_u64()).unwrap_or(0) >= 1, "{step:#}");
    // The served answers' receive timestamps came back from the client processes too.
    let arrived = step["load"]["slowest_arrived_ms"].as_f64().expect("the agents' receive timestamps");
    assert!((300.0..=step["max_ms"].as_f64().unwrap()).contains(&arrived), "{step:#}");
    let reasons: Vec<String> = why.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    let row = format!(
        "| lean | 600 | {:.1} | {} ({}) | 0 | 0 |",
        count("ok") as f64 / 6.0,
        count("refused"),
        reasons.join(", ")
    );
    assert!(md.contains(&row), "no row {row} in {md}");
    let sentence = format!("at 600: {} served, {} refused (each within", count("ok"), count("refused"));
    assert!(md.contains(&sentence), "no {sentence:?} in {md}");
    let chart = std::fs::read_to_string(dir.join("charts/outcomes.svg")).unwrap();
    assert!(chart.contains("Refused") && chart.contains("Timed out"), "outcomes.svg has no panels");
}

/// `--client jmeter`: every step sent by the seed's JMeter, its JTL read
/// back: as many samples as the level, every one counted once.
#[test]
fn the_seeds_jmeter_sends_the_steps_and_its_jtl_is_read() {
    assert_built("jmeter");
    let dir = temp_dir("sweep-jmeter");
    let results = short_sweep(&dir, &["--client", "jmeter", "--targets", "lean", "--levels", "5,20"]);
    assert_eq!(results["client"], "jmeter");
    assert!(results["client_detail"].as_str().unwrap().contains("JMeter"));
    let lean = target(&results, "lean");
    assert_eq!(lean["highest_full_success"], 20, "{lean:#}");
    for (step, level) in lean["steps"].as_array().unwrap().iter().zip([5u64, 20]) {
        let outcomes = step["load"]["outcomes"].as_object().unwrap();
        assert_eq!(outcomes.values().map(|v| v.as_u64().unwrap()).sum::<u64>(), level, "{step:#}");
        assert_eq!(outcomes["ok"], level, "{step:#}");
        assert!(step["load"]["send_spread_ms"].as_f64().unwrap() >= 0.0, "{step:#}");
        assert!(step["min_ms"].as_f64().unwrap() >= 200.0, "{step:#}");
        let jtl = std::fs::read_to_string(dir.join(format!("jtl/lean-{level}.jtl"))).unwrap();
        assert_eq!(jtl.lines().count() as u64, level + 1, "a header and a row per sample: {jtl}");
    }
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert!(md.contains("Client: **jmeter**"), "{md}");
}

#[test]
fn bad_sweep_flags_are_usage_errors() {
    for args in [
        &["sweep", "--targets", "nginx"][..],
        &["sweep", "--levels", "100,50"],
        &["sweep", "--memory", "12 parsecs"],
        &["sweep", "--delay", "10s", "--timeout", "5s"],
        &["sweep", "--url", "https://example.com/"],
        &["sweep", "--out", "/proc/nope/here"],
        &["sweep", "--client", "ab"],
    ] {
        let out = output_within(blocklab().args(args), Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn sigint_mid_sweep_writes_partial_results_and_leaves_nothing() {
    let _turn = one_at_a_time();
    let dir = temp_dir("sweep-sigint");
    let tag = format!("blocklab-sweep-test-{}-sigint", std::process::id());
    let mut child = blocklab()
        .args([
            "sweep",
            "--targets",
            "reactive,lean",
            "--levels",
            "5,10",
            "--delay",
            "3s",
            "--timeout",
            "10s",
        ])
        .arg("--out")
        .arg(&dir)
        .env("BLOCKLAB_TEST_TAG", &tag)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Inside the first step (its requests wait 3 s).
    std::thread::sleep(Duration::from_millis(2500));
    std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("the sweep did not stop within 30 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    assert_no_leftovers(&tag);
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["interrupted"], true);
    assert!(
        target(&results, "reactive")["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["status"] == "not_run_interrupted")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
