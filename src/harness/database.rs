//! A database the harness starts for a study and always ends: the project's
//! Neo4j (`scripts/neo4j`, the `neo4j` peer), on a free loopback port,
//! pinned to the CPUs asked for, its store in `.local/neo4j/PORT/`. Dropping
//! it stops it and deletes its store (`scripts/neo4j wipe PORT`), so an
//! error, a panic or an interrupt leaves no database running.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::launch::Spec;
use super::target::Targets;

/// A Neo4j started by `scripts/neo4j start PORT`.
pub struct ManagedNeo4j {
    script: PathBuf,
    port: u16,
    pid: u32,
    url: String,
    /// Its name and version, from the `neo4j` peer's manifest.
    pub version: String,
}

impl ManagedNeo4j {
    /// Starts one on a free loopback port, pinned to `cpus` (a taskset list)
    /// when given, and waits until Bolt accepts. The error says why, with the
    /// script's last lines. Its version comes from the `neo4j` database
    /// peer's manifest.
    pub fn start(targets: &Targets, cpus: Option<&str>) -> Result<ManagedNeo4j, String> {
        let root = targets.peers.root.clone();
        let script = root.join("scripts/neo4j");
        let version = targets.database("neo4j").map_or_else(|| "Neo4j".to_string(), |p| p.versions.clone());
        let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
        // Pinned by the launcher: the script, and the JVM it starts, inherit
        // the CPUs. Its own process group: a ctrl-c reaches blocklab, which
        // then wipes it in order.
        let mut command = Spec::program(&script, ["start".to_string(), port.to_string()])
            .pinned(cpus)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .own_group()
            .prepare()
            .into_command();
        // Authentication off, as every client blocklab starts on it expects,
        // whatever the user's shell says (scripts/neo4j reads NEO4J_AUTH).
        command.env_remove("NEO4J_AUTH");
        let out = command.output().map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        let pid = std::fs::read_to_string(root.join(format!(".local/neo4j/{port}/pid")))
            .ok()
            .and_then(|p| p.trim().parse().ok());
        // From here on, Drop ends whatever was started.
        let mut neo4j = ManagedNeo4j { script, port, pid: pid.unwrap_or(0), url: String::new(), version };
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().find(|l| l.starts_with("bolt://")) {
            Some(url) if out.status.success() && neo4j.pid != 0 => {
                neo4j.url = url.trim().to_string();
                Ok(neo4j)
            }
            _ => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(format!("scripts/neo4j start {port} failed ({}): {}", out.status, tail.join(" | ")))
            }
        }
    }

    /// `bolt://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its JVM's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// CPU time it has used, from /proc.
    pub fn cpu_time(&self) -> Option<Duration> {
        crate::proc::cpu_time(crate::proc::Pid::Of(self.pid))
    }

    /// Whether its process is alive.
    pub fn is_alive(&self) -> bool {
        crate::proc::cpu_time(crate::proc::Pid::Of(self.pid)).is_some()
    }
}

impl Drop for ManagedNeo4j {
    fn drop(&mut self) {
        // SIGTERM, SIGKILL after 30 s (a JVM out of heap can be deaf to
        // SIGTERM), then its store deleted.
        let _ = Command::new(&self.script)
            .args(["wipe", &self.port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .status();
    }
}

/// A port nothing listens on now (bound and released; the script refuses a
/// port that another process has taken meanwhile).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
