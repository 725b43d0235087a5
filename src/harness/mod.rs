//! The harness: what every study's runner needs, and no study's knowledge.
//! Every target of any study, one kind of thing, listed in one place
//! ([`target`]); every process started by one launcher ([`launch`]: pinned,
//! memory-capped in its runtime's own way); a target started as a child
//! process, ready and watched ([`process`]); the peers described by their
//! `peer.toml` ([`peers`]), its CPUs ([`placement`]), a memory-capped cgroup
//! for it ([`cgroup`]), a JVM's heap ([`jvm`]), a database it starts and
//! always ends ([`database`]), the link to it with its faults
//! ([`toxiproxy`]), what it holds while a load runs ([`sampler`]), its
//! `/metrics` read ([`scrape`]), the machine's conditions ([`conditions`]),
//! the page and chart pieces every report shares and the index page
//! ([`render`]), the descriptor limit raised and the runner pinned.
//!
//! The studies ([`crate::studies`]) build on it; it imports none of them.

pub mod cgroup;
pub mod conditions;
pub mod database;
pub mod get;
pub mod jvm;
pub mod launch;
pub mod peers;
pub mod placement;
pub mod process;
pub mod render;
pub mod runtime;
pub mod sampler;
pub mod scrape;
pub mod target;
pub mod toxiproxy;

use std::process::Command;

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit, so that
/// thousands of connections fit; children inherit it. Uses util-linux's
/// `prlimit` on our own pid. Returns the soft limit now in force.
pub fn raise_nofile() -> Option<u64> {
    raise_nofile_to(0)
}

/// As [`raise_nofile`], and also both limits to at least `wanted` when the
/// hard limit is lower (root only: CAP_SYS_RESOURCE; otherwise the soft limit
/// stops at the hard one). Returns the soft limit now in force.
pub fn raise_nofile_to(wanted: u64) -> Option<u64> {
    let pid = std::process::id().to_string();
    let read = |column: &str| -> Option<u64> {
        let out = Command::new("prlimit")
            .args(["--pid", &pid, "--nofile", "--raw", "--noheadings", "--output", column])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    let (soft, hard) = (read("SOFT")?, read("HARD")?);
    let set = |limit: u64| {
        let status = Command::new("prlimit")
            .args(["--pid", &pid, &format!("--nofile={limit}:{limit}")])
            .stderr(std::process::Stdio::null())
            .status();
        tracing::debug!(soft, hard, limit, raised = status.is_ok_and(|s| s.success()), "RLIMIT_NOFILE");
    };
    if hard < wanted {
        set(wanted);
    }
    if read("SOFT")? < read("HARD")? {
        set(read("HARD")?);
    }
    read("SOFT")
}

pub use launch::pin_self;
