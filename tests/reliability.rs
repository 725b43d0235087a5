//! The edges of reliability: the descriptor limit raised at start, a server
//! out of descriptors that keeps serving and recovers by itself, and an
//! unwritable output path refused before anything runs.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{Listening, blocklab, output_within};

/// `prlimit --nofile=SOFT:HARD blocklab ARGS`.
fn limited(soft: u64, hard: u64, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new("prlimit");
    command
        .arg(format!("--nofile={soft}:{hard}"))
        .arg(env!("CARGO_BIN_EXE_blocklab"))
        .args(args)
        .env("RUST_LOG", "warn");
    command
}

fn soft_nofile(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

#[test]
fn serve_raises_its_soft_descriptor_limit_to_the_hard_one() {
    let server = Listening::start(limited(
        256,
        4096,
        &["serve", "--listen", "127.0.0.1:0", "--nodes", "10", "--workers", "1"],
    ));
    assert_eq!(soft_nofile(server.child.id()), 4096);
}

fn ask(stream: &mut TcpStream) -> std::io::Result<String> {
    stream.write_all(b"GET /test HTTP/1.1\r\nHost: x\r\n\r\n")?;
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// With 64 descriptors, 120 connections: the ones accepted are served, the
/// server does not spin on the failing accept, and once they close, new ones
/// are served again.
#[test]
fn a_server_out_of_descriptors_keeps_serving_and_recovers() {
    for model in ["reactive", "lean"] {
        let server = Listening::start(limited(
            64,
            64,
            &["serve", "--listen", "127.0.0.1:0", "--nodes", "10", "--workers", "1", "--model", model],
        ));
        let pid = server.child.id();
        let mut first = TcpStream::connect(server.addr).unwrap();
        first.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(ask(&mut first).unwrap().starts_with("HTTP/1.1 200"), "{model}");
        // More connections than descriptors: the kernel completes them all, the
        // server runs out of descriptors accepting them.
        let crowd: Vec<TcpStream> = (0..120).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(300));
        let before = cpu_ticks(pid);
        std::thread::sleep(Duration::from_secs(1));
        let spent = cpu_ticks(pid) - before;
        // Ticks are 10 ms: a spinning accept loop would burn ~100 in this second.
        assert!(spent < 30, "{model}: {spent} CPU ticks in 1 s while out of descriptors: spinning");
        assert!(
            ask(&mut first).unwrap().starts_with("HTTP/1.1 200"),
            "{model}: an open connection was not served"
        );
        drop(crowd);
        drop(first);
        let mut fresh = None;
        for _ in 0..50 {
            let mut stream = TcpStream::connect(server.addr).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            if ask(&mut stream).is_ok_and(|r| r.starts_with("HTTP/1.1 200")) {
                fresh = Some(stream);
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(fresh.is_some(), "{model}: no new connection served after the crowd left");
    }
}

#[test]
fn an_unwritable_output_path_is_a_usage_error_before_anything_runs() {
    // A path under a regular file can never be created, even by root.
    let file = std::env::temp_dir().join(format!("blocklab-not-a-dir-{}", std::process::id()));
    std::fs::write(&file, b"x").unwrap();
    let under = file.join("out");
    let under = under.to_str().unwrap();
    for args in [
        vec!["bench", "--quick", "--out", under],
        vec!["sweep", "--quick", "--out", under],
        vec!["studies", "--quick", "--out", under],
        vec!["load", "-c", "1", "-n", "1", "--json", under, "http://127.0.0.1:9/"],
    ] {
        let out = output_within(blocklab().args(&args), Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(under), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_file(&file);
}

/// `load` with fewer descriptors than connections: the connections it cannot
/// open are counted as its own limit, not as the server refusing.
#[test]
fn load_counts_its_own_descriptor_limit_apart_from_the_server() {
    let server = Listening::serve(&["--model", "lean", "--workers", "1"]);
    let json = std::env::temp_dir().join(format!("blocklab-load-limit-{}.json", std::process::id()));
    let url = format!("http://{}/test", server.addr);
    let mut command = limited(
        24,
        24,
        &["load", "-c", "60", "-n", "60", "--timeout", "5s", "--json", json.to_str().unwrap(), &url],
    );
    let out = output_within(&mut command, Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let limited = report["errors"]["load_side_limit"].as_u64().unwrap();
    assert!(limited > 0, "no load-side failures counted: {text}");
    assert_eq!(report["errors"]["connect_refused"], 0, "{text}");
    assert_eq!(report["errors"]["connect_error"], 0, "{text}");
    assert!(text.contains("load-side limit (descriptors or ports)"), "{text}");
    common::validate_schema("schema/load-result.json", &report);
    let _ = std::fs::remove_file(&json);
}
