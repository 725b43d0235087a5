//! Records, at build time, the versions a report must state: the compiler's
//! and those of the crates that shape what is measured (read from Cargo.lock).

use std::process::Command;

const CRATES: [&str; 8] =
    ["grafeo", "tokio", "hyper", "axum", "ractor", "hdrhistogram", "plotters", "mimalloc"];

fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=BLOCKLAB_RUSTC_VERSION={rustc_version}");

    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let mut found = Vec::new();
    let mut name = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_string());
        } else if let (Some(v), Some(n)) = (line.strip_prefix("version = "), name.take())
            && CRATES.contains(&n.as_str())
        {
            found.push(format!("{n}={}", v.trim_matches('"')));
        }
    }
    println!("cargo:rustc-env=BLOCKLAB_CRATE_VERSIONS={}", found.join(";"));

    // The binary is linked at a fixed address (not position-independent):
    // a PIE's relocated read-only data (.data.rel.ro and the GOT, 552 KiB
    // here) is written by the loader in every process, so each server
    // process, each lean worker and its supervisor alike, carried it as
    // private memory charged to its cgroup. Linked in place it stays the
    // file's clean pages, shared by every process that runs it.
    println!("cargo:rustc-link-arg-bins=-no-pie");
}
