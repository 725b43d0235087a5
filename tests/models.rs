//! Study 2's server models, as real `blocklab serve` processes: what `/delay`
//! answers under each, how many threads each uses for many slow requests,
//! the pool's waves, `--max-connections`, and a real parser (promtool) on
//! every model's `/metrics`. Small delays and generous margins: these assert
//! behaviour (overlapped against serialized, threads flat against growing),
//! never speed.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{Listening, ThreadSampler, get, get_concurrently, metric};

const MODELS: [&str; 4] = ["reactive", "lean", "pool", "thread"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_answers_the_seeds_pojo_under_every_model_and_refuses_bad_waits() {
    for model in MODELS {
        let server = Listening::serve(&["--model", model, "--workers", "1"]);
        let reply = get(server.addr, "/delay?ms=20").await;
        assert_eq!((reply.status, reply.body.as_str()), (200, r#"{"success":true}"#), "{model}");
        assert_eq!(reply.headers["content-type"], "application/json", "{model}");
        assert!(reply.elapsed >= Duration::from_millis(20), "{model}: answered before the wait");
        for bad in ["/delay?ms=abc", "/delay?ms=600001", "/delay?ms=-5"] {
            let reply = get(server.addr, bad).await;
            assert_eq!(reply.status, 400, "{model} {bad}");
            assert!(reply.json()["error"].as_str().unwrap().contains("ms must be an integer"), "{model}");
        }
        assert_eq!(get(server.addr, "/test").await.body, "works", "{model}");
        let study1 = get(server.addr, "/getDataAkkaAsync?id=3").await;
        if model == "reactive" || model == "lean" {
            assert_eq!(study1.status, 200, "{model}");
        } else {
            assert_eq!(study1.status, 404, "{model}");
            assert!(study1.json()["error"].as_str().unwrap().contains("--model reactive or lean"), "{model}");
        }
        let get_data = get(server.addr, "/getData?id=3").await.status;
        assert_eq!(get_data, 200, "{model}: /getData");
    }
}

#[test]
fn an_unknown_model_or_threads_without_pool_is_a_usage_error() {
    for args in [&["serve", "--model", "actors"][..], &["serve", "--model", "lean", "--threads", "4"]] {
        let out = common::output_within(common::blocklab().args(args), Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
}

/// 500 slow requests at once on one async worker: all overlap, and the
/// process starts no thread for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reactive_and_lean_hold_500_slow_requests_on_one_worker_with_no_new_thread() {
    for model in ["reactive", "lean"] {
        let server = Listening::serve(&["--model", model, "--workers", "1"]);
        let idle = server.threads();
        let sampler = ThreadSampler::start(server.child.id());
        let (replies, wall) = get_concurrently(server.addr, "/delay?ms=300", 500).await;
        let peak = sampler.peak();
        assert!(replies.iter().all(|r| r.status == 200), "{model}");
        // Overlapped: ≈ 300 ms. One at a time would be 150 s.
        assert!(wall < Duration::from_secs(5), "{model}: 500 waits of 300 ms took {wall:?}");
        assert_eq!(peak, idle, "{model}: threads went from {idle} to {peak}");
    }
}

/// 12 requests on a pool of 4: at most 4 at a time, so the k-th group of
/// four cannot finish before k × 300 ms; and the pool never grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_4_answers_12_slow_requests_in_three_waves() {
    let server = Listening::serve(&["--model", "pool", "--threads", "4", "--workers", "1"]);
    let idle = server.threads();
    let sampler = ThreadSampler::start(server.child.id());
    let (replies, wall) = get_concurrently(server.addr, "/delay?ms=300", 12).await;
    let peak = sampler.peak();
    assert!(replies.iter().all(|r| r.status == 200));
    let mut times: Vec<Duration> = replies.iter().map(|r| r.elapsed).collect();
    times.sort();
    for (i, t) in times.iter().enumerate() {
        let wave = (i / 4 + 1) as u32;
        // Each time runs from its own connect, and the 12 connect a few ms
        // apart: 50 ms of margin (a request of wave 2 came at 597 ms once).
        assert!(
            *t + Duration::from_millis(50) >= Duration::from_millis(300) * wave,
            "answer {i} came at {t:?}, before wave {wave}: {times:?}"
        );
    }
    // Four at a time: ≈ 900 ms; one at a time would be 3.6 s.
    assert!(wall < Duration::from_millis(3300), "12 waits on 4 threads took {wall:?}");
    assert_eq!(peak, idle, "the pool grew from {idle} to {peak} threads");
    let text = get(server.addr, "/metrics").await.body;
    assert_eq!(metric(&text, "blocklab_handler_threads_busy_peak"), 4.0);
    assert!(metric(&text, "blocklab_handler_queue_depth_peak") >= 7.0, "requests never queued:\n{text}");
}

/// The thread model: every request its own new thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thread_model_starts_a_thread_per_request() {
    let server = Listening::serve(&["--model", "thread", "--workers", "1"]);
    let idle = server.threads();
    let sampler = ThreadSampler::start(server.child.id());
    let (replies, wall) = get_concurrently(server.addr, "/delay?ms=500", 100).await;
    let peak = sampler.peak();
    assert!(replies.iter().all(|r| r.status == 200));
    assert!(wall < Duration::from_secs(5), "100 waits of 500 ms took {wall:?}");
    assert!(peak >= idle + 90, "threads went from {idle} to only {peak}");
    let text = get(server.addr, "/metrics").await.body;
    assert_eq!(metric(&text, "blocklab_handler_threads_started_total"), 100.0);
}

/// Sends `GET /test` on `stream` and reads one whole response.
fn ask_test(stream: &mut TcpStream) -> std::io::Result<String> {
    stream.write_all(b"GET /test HTTP/1.1\r\nHost: x\r\n\r\n")?;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).ends_with("works") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

#[test]
fn with_max_connections_2_a_third_waits_until_one_closes() {
    for model in MODELS {
        let server = Listening::serve(&["--model", model, "--workers", "1", "--max-connections", "2"]);
        let mut first = TcpStream::connect(server.addr).unwrap();
        let mut second = TcpStream::connect(server.addr).unwrap();
        ask_test(&mut first).unwrap();
        ask_test(&mut second).unwrap();
        // The kernel completes the handshake (the accept queue), but the
        // server does not accept it while two are open.
        let mut third = TcpStream::connect(server.addr).unwrap();
        third.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        let early = ask_test(&mut third);
        assert!(early.is_err(), "{model}: the third connection was served while two were open");
        drop(first);
        third.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 1024];
        let n = third.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "{model}");
        ask_test(&mut second).unwrap();
    }
}

/// promtool, Prometheus's own parser, accepts every model's `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_models_metrics_pass_promtool() {
    let promtool = std::process::Command::new("promtool").arg("--version").output();
    assert!(
        promtool.is_ok_and(|o| o.status.success()),
        "promtool not found: apt-get install prometheus (scripts/test installs it)"
    );
    for model in MODELS {
        let server = Listening::serve(&["--model", model, "--workers", "1"]);
        for path in ["/test", "/delay?ms=1", "/delay?ms=x", "/nope", "/getData?id=2"] {
            get(server.addr, path).await;
        }
        let text = get(server.addr, "/metrics").await.body;
        for name in ["process_threads", "blocklab_connections_open", "blocklab_handler_threads_busy"] {
            assert!(text.contains(&format!("# HELP {name} ")), "{model}: no {name}");
        }
        assert!(text.contains(&format!("model=\"{model}\"")), "{model}: blocklab_info lacks the model");
        let mut check = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        check.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = check.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{model}: promtool refused /metrics: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
