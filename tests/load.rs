//! `blocklab load` against scripted in-process servers: what it measures is
//! what happened (latency, counts by status and by kind of failure, nothing
//! lost), and open-loop correction shows what a closed loop hides.

mod common;

use std::time::Duration;

use blocklab::cli::{Cli, Command};
use blocklab::load::{self, ErrorKind, RunResult};
use clap::Parser;
use common::{TestServer, behaviour};

use common::{load_errors as errors, load_plan as plan, load_run as run};
fn p(result: &RunResult, h: impl Fn(&RunResult) -> &hdrhistogram::Histogram<u64>, q: f64) -> Duration {
    Duration::from_micros(h(result).value_at_quantile(q))
}

#[test]
fn median_latency_is_the_server_delay() {
    let server = TestServer::start(behaviour(|_, _| (Duration::from_millis(20), Some(200))));
    let result = run(&["-k", "-c", "10", "-n", "300", &server.url("/")]);
    let p50 = p(&result, |r| &r.stats.latency, 0.5);
    // At least the delay; far below what 10 connections queued behind each other
    // would see (200 ms), with room for a busy machine.
    assert!(p50 >= Duration::from_millis(19) && p50 < Duration::from_millis(100), "p50 {p50:?}");
    assert_eq!(result.stats.ok, 300);
}

#[test]
fn n_requests_are_exactly_n_outcomes_and_n_server_requests() {
    let server = TestServer::start(behaviour(|_, _| (Duration::ZERO, Some(200))));
    for keep_alive in [true, false] {
        let before = server.requests();
        let url = server.url("/x");
        let mut args = vec!["-c", "7", "-n", "1003", url.as_str()];
        if keep_alive {
            args.insert(0, "-k");
        }
        let result = run(&args);
        let s = &result.stats;
        assert_eq!(s.sent, 1003);
        assert_eq!(s.completed + s.error_total(), 1003);
        assert_eq!(s.completed, 1003, "errors: {:?}", s.errors);
        assert_eq!(server.requests() - before, 1003, "keep-alive {keep_alive}");
        if keep_alive {
            assert_eq!(s.connections_opened, 7);
        } else {
            assert_eq!(s.connections_opened, 1003);
            assert_eq!(s.connect.len(), 1003);
        }
    }
}

#[test]
fn every_third_request_failing_is_counted_by_status() {
    let server =
        TestServer::start(behaviour(|n, _| (Duration::ZERO, Some(if n % 3 == 2 { 500 } else { 200 }))));
    let result = run(&["-k", "-c", "4", "-n", "600", &server.url("/")]);
    assert_eq!(result.stats.statuses[500], 200);
    assert_eq!(result.stats.statuses[200], 400);
    assert_eq!(result.stats.ok, 400);
    assert_eq!(result.stats.error_total(), 0);
}

#[test]
fn open_loop_correction_reveals_the_stall_that_closed_loop_hides() {
    // Freezes for the first 500 ms of every second, like a long GC pause.
    let stall = || {
        behaviour(|_, since| {
            let phase = Duration::from_nanos((since.as_nanos() % 1_000_000_000) as u64);
            let wait = Duration::from_millis(500).saturating_sub(phase);
            (wait, Some(200))
        })
    };
    let server = TestServer::start(stall());
    let open = run(&["-k", "-c", "2", "-z", "2500ms", "--rate", "400", &server.url("/")]);
    let corrected = p(&open, |r| r.stats.corrected.as_ref().unwrap(), 0.99);
    let measured = p(&open, |r| &r.stats.latency, 0.99);
    assert!(corrected >= Duration::from_millis(250), "corrected p99 {corrected:?}");
    assert!(corrected > measured * 5, "corrected p99 {corrected:?} vs measured {measured:?}");

    let server = TestServer::start(stall());
    let closed = run(&["-k", "-c", "2", "-z", "2500ms", &server.url("/")]);
    let closed_p99 = p(&closed, |r| &r.stats.latency, 0.99);
    // Two connections wait out each stall, then thousands of fast requests follow:
    // the stall is under 1 % of the samples, so the closed loop's p99 hides it.
    assert!(closed_p99 < Duration::from_millis(150), "closed-loop p99 {closed_p99:?} (a stall is 500 ms)");
    assert!(closed.stats.latency.max() >= 300_000, "the stall should still be the max");
}

#[test]
fn open_loop_that_cannot_keep_up_says_so() {
    let server = TestServer::start(behaviour(|_, _| (Duration::from_millis(50), Some(200))));
    // 2 connections at 50 ms each sustain 40/s, not 400/s.
    let result = run(&["-k", "-c", "2", "-z", "1s", "--rate", "400", &server.url("/")]);
    assert!(result.achieved_rate() < 100.0, "achieved {}", result.achieved_rate());
    assert!(result.stats.backlog > 250, "backlog {}", result.stats.backlog);
    assert!(result.stats.late_sends > 0);
}

#[test]
fn refused_connections_are_counted_by_kind() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let result = run(&["-k", "-c", "3", "-n", "30", &format!("http://127.0.0.1:{port}/")]);
    assert_eq!(errors(&result, ErrorKind::ConnectRefused), 30);
    assert_eq!((result.stats.completed, result.stats.ok), (0, 0));
}

#[test]
fn request_timeouts_and_early_closes_are_counted_by_kind() {
    let server = TestServer::start(behaviour(|n, _| match n % 2 {
        0 => (Duration::from_secs(60), Some(200)),
        _ => (Duration::ZERO, None),
    }));
    let result = run(&["-k", "-c", "4", "-n", "12", "--timeout", "200ms", &server.url("/")]);
    let (timeouts, closed) =
        (errors(&result, ErrorKind::RequestTimeout), errors(&result, ErrorKind::ClosedEarly));
    assert_eq!(timeouts + closed, 12, "{:?}", result.stats.errors);
    assert!(timeouts >= 3 && closed >= 3, "timeouts {timeouts}, closed early {closed}");
}

#[test]
fn connect_timeouts_are_counted_by_kind() {
    // A listener with a full accept queue that never accepts: the kernel drops further SYNs.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _guard = runtime.enter();
    let listener = socket.listen(0).unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let result = run(&["-k", "-c", "8", "-n", "8", "--timeout", "300ms", &url]);
    assert!(errors(&result, ErrorKind::ConnectTimeout) >= 4, "{:?}", result.stats.errors);
    assert_eq!(result.stats.completed, 0);
    drop(listener);
}

#[test]
fn duration_runs_count_requests_open_at_the_deadline() {
    let server = TestServer::start(behaviour(|_, _| (Duration::from_secs(5), Some(200))));
    let started = std::time::Instant::now();
    let result = run(&["-k", "-c", "5", "-z", "300ms", &server.url("/")]);
    assert!(started.elapsed() < Duration::from_secs(3), "the deadline was not kept");
    assert_eq!(result.stats.in_flight_at_deadline, 5);
    assert_eq!(result.stats.sent, 5);
    assert_eq!(result.stats.completed + result.stats.error_total(), 0);
}

#[test]
fn a_rate_ramp_sends_what_its_stages_say_and_corrects_a_stall_within_it() {
    // 0 → 400/s over 4 s: 50, 150, 250, 350 requests due in the four seconds, 800 in all.
    let server = TestServer::start(behaviour(|_, _| (Duration::from_millis(1), Some(200))));
    let ramp = run(&["-k", "-c", "4", "--rate", "400:4s", &server.url("/")]);
    // The stages' area, exactly: sent, or due but never sent (a connection still busy at the end).
    assert_eq!(ramp.stats.sent + ramp.stats.backlog, 800);
    assert!(ramp.stats.completed >= 790, "{} completed", ramp.stats.completed);
    let per_second: Vec<u64> = ramp.timeline.iter().take(4).map(|s| s.requests).collect();
    for (got, due) in per_second.iter().zip([50, 150, 250, 350]) {
        assert!(got.abs_diff(due) <= due / 4 + 10, "per second {per_second:?}, due 50/150/250/350");
    }
    // Nothing stalled: the due times are the ramp's, so the correction adds no lag of its own.
    let corrected = p(&ramp, |r| r.stats.corrected.as_ref().unwrap(), 0.99);
    assert!(corrected < Duration::from_millis(60), "corrected p99 {corrected:?} without a stall");

    // The server freezes for the first 500 ms of every second, within a ramp 100 → 400/s.
    let server = TestServer::start(behaviour(|_, since| {
        let phase = Duration::from_nanos((since.as_nanos() % 1_000_000_000) as u64);
        (Duration::from_millis(500).saturating_sub(phase), Some(200))
    }));
    let stalled = run(&["-k", "-c", "2", "--rate", "100,400:3s", &server.url("/")]);
    let corrected = p(&stalled, |r| r.stats.corrected.as_ref().unwrap(), 0.99);
    let measured = p(&stalled, |r| &r.stats.latency, 0.99);
    assert!(corrected >= Duration::from_millis(250), "corrected p99 {corrected:?}");
    assert!(corrected > measured * 3, "corrected p99 {corrected:?} vs measured {measured:?}");
}

#[test]
fn rate_stages_are_checked() {
    let bad = |args: &[&str]| {
        let argv = ["blocklab", "load"].iter().chain(args);
        match Cli::try_parse_from(argv) {
            Err(e) => e.to_string(),
            Ok(cli) => match cli.command {
                Command::Load(l) => l.plan().unwrap_err(),
                _ => unreachable!(),
            },
        }
    };
    assert!(bad(&["--rate", "100:10s", "-z", "5s", "http://127.0.0.1:1/"]).contains("leave out -n and -z"));
    assert!(bad(&["--rate", "100:soon", "http://127.0.0.1:1/"]).contains("not a duration"));
    assert!(bad(&["--rate", "0:5s", "http://127.0.0.1:1/"]).contains("nothing would be sent"));
    let staged = plan(&["--rate", "50,2000:30s,0:10s", "http://127.0.0.1:1/"]);
    assert_eq!(staged.stop, load::Stop::Duration(Duration::from_secs(40)));
}

#[test]
fn connections_in_stages_open_and_close_with_the_ramp() {
    // 0 → 4 connections over 2 s, 4 for 1 s, down to 0 over 1 s; each request takes ~5 ms.
    let server = TestServer::start(behaviour(|_, _| (Duration::from_millis(5), Some(200))));
    let r = run(&["-k", "--connections", "4:2s,4:1s,0:1s", &server.url("/")]);
    common::assert_follows_the_four_connection_ramp(&r);
    assert_eq!(plan(&["--connections", "4:2s,4:1s,0:1s", "http://127.0.0.1:1/"]).connections, 4);
}

/// CPU seconds (user + system) a process has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat =
        procfs::process::Process::new(pid as i32).and_then(|p| p.stat()).expect("the load's /proc stat");
    (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64
}

/// `--busy-poll` keeps the client's thread on its core for the whole run
/// (without it, a client waiting 100 ms a request sleeps), and loses nothing.
#[test]
fn busy_poll_never_sleeps_and_counts_every_request() {
    let server = TestServer::start(behaviour(|_, _| (Duration::from_millis(100), Some(200))));
    let mut used = Vec::new();
    for busy in [false, true] {
        let mut cmd = common::blocklab();
        cmd.args(["load", "-k", "-q", "-c", "2", "-z", "1500ms", "--threads", "1"]);
        if busy {
            cmd.arg("--busy-poll");
        }
        let json = std::env::temp_dir().join(format!("busy-poll-{}-{busy}.json", std::process::id()));
        cmd.arg("--json").arg(&json);
        let child = cmd.arg(server.url("/")).stdout(std::process::Stdio::null()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(1200));
        used.push(cpu_seconds(child.id()));
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "busy-poll {busy}: {:?}", out.status);
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let _ = std::fs::remove_file(&json);
        // Two connections, 100 ms a request, 1.5 s: about 30, every one answered.
        let completed = doc["completed"].as_u64().unwrap();
        assert!(completed >= 10, "busy-poll {busy}: {doc}");
        assert_eq!(doc["ok"].as_u64(), Some(completed), "busy-poll {busy}: {doc}");
    }
    // 1.2 s into the run: a sleeping client has used a few ms, a busy one
    // what it could get of its core (generous margins: other tests share the
    // two cores, so a quarter of one is enough to tell it never slept).
    assert!(used[0] < 0.15, "without --busy-poll the client used {:.2} s of CPU", used[0]);
    assert!(used[1] > 0.3, "with --busy-poll the client used only {:.2} s of CPU", used[1]);
}
