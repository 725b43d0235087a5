//! A database the harness starts for a study and always ends: the project's
//! Neo4j (`scripts/neo4j`, the `neo4j` peer) or PostgreSQL
//! (`scripts/postgres`, Debian's server), on a free loopback port, pinned
//! to the CPUs asked for, its store in `.local/ENGINE/PORT/`. Dropping it
//! stops it and deletes its store (`scripts/ENGINE wipe PORT`), so an error,
//! a panic or an interrupt leaves no database running.
//!
//! The engines differ in what [`Engine`] says of them (their script, the
//! line their start prints, where their version comes from); everything
//! else — start, CPU, liveness, wipe — is one code path. A third engine is
//! a script shaped like these two and one row in [`Engine`].

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::launch::Spec;
use super::target::Targets;
use crate::db::DbUrl;

/// A database engine a study can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// Neo4j 5.26 (`scripts/neo4j`): the seed's database.
    Neo4j,
    /// PostgreSQL, Debian's (`scripts/postgres`): the database most services run.
    Postgres,
}

impl Engine {
    /// Every engine, as `--db` lists them.
    pub const ALL: [Engine; 2] = [Engine::Neo4j, Engine::Postgres];

    /// Its word: `--db`'s value, its script's name, a peer manifest's `db`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Neo4j => "neo4j",
            Engine::Postgres => "postgres",
        }
    }

    /// Its name in sentences.
    pub fn label(self) -> &'static str {
        match self {
            Engine::Neo4j => "Neo4j",
            Engine::Postgres => "PostgreSQL",
        }
    }

    /// `--db`'s word for it, if `s` is one.
    pub fn parse(s: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.name() == s || (*e == Engine::Postgres && s == "postgresql"))
    }

    /// The engine a URL speaks to (none for the embedded database or FalkorDB).
    pub fn of(url: &DbUrl) -> Option<Engine> {
        match url {
            DbUrl::Neo4j(_) => Some(Engine::Neo4j),
            DbUrl::Postgres(_) => Some(Engine::Postgres),
            DbUrl::Embedded | DbUrl::Falkor(_) => None,
        }
    }

    /// The scheme of the URL its script prints when it is up.
    fn url_prefix(self) -> &'static str {
        match self {
            Engine::Neo4j => "bolt://",
            Engine::Postgres => "postgres://",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A database started by `scripts/ENGINE start PORT`.
pub struct ManagedDatabase {
    engine: Engine,
    script: PathBuf,
    port: u16,
    pid: u32,
    url: String,
    /// Its name and version (Neo4j's from the `neo4j` peer's manifest,
    /// PostgreSQL's from the server itself).
    pub version: String,
    /// The settings that bound it, as its script names them (PostgreSQL:
    /// `max_connections 300, shared_buffers 128MB`), if any.
    pub settings: Option<String>,
}

impl ManagedDatabase {
    /// Starts one on a free loopback port, pinned to `cpus` (a taskset list)
    /// when given, and waits until it accepts. `max_connections` is the most
    /// connections it must take at once (PostgreSQL refuses past its setting;
    /// Neo4j has none). The error says why, with the script's last lines.
    pub fn start(
        engine: Engine,
        targets: &Targets,
        cpus: Option<&str>,
        max_connections: usize,
    ) -> Result<ManagedDatabase, String> {
        let root = targets.peers.root.clone();
        let script = root.join("scripts").join(engine.name());
        let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
        // Pinned by the launcher: the script, and the server it starts (a JVM;
        // a postmaster and every backend it forks), inherit the CPUs. Its own
        // process group: a ctrl-c reaches blocklab, which then wipes it in order.
        let mut command = Spec::program(&script, ["start".to_string(), port.to_string()])
            .pinned(cpus)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .own_group()
            .prepare()
            .into_command();
        match engine {
            // Authentication off, as every client blocklab starts on it
            // expects, whatever the user's shell says (scripts/neo4j reads NEO4J_AUTH).
            Engine::Neo4j => {
                command.env_remove("NEO4J_AUTH");
            }
            Engine::Postgres => {
                command.env("POSTGRES_MAX_CONNECTIONS", max_connections.max(100).to_string());
                command.env_remove("POSTGRES_CPUS");
            }
        }
        let out = command.output().map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        let pid = std::fs::read_to_string(root.join(format!(".local/{}/{port}/pid", engine.name())))
            .ok()
            .and_then(|p| p.trim().parse().ok());
        let stderr = String::from_utf8_lossy(&out.stderr);
        let (version, settings) = match engine {
            Engine::Neo4j => {
                (targets.database("neo4j").map_or_else(|| "Neo4j".to_string(), |p| p.versions.clone()), None)
            }
            // "PostgreSQL 15.18, max_connections 300, shared_buffers 128MB listening on …"
            Engine::Postgres => stderr
                .lines()
                .find_map(|l| l.split_once(" listening on "))
                .and_then(|(said, _)| said.split_once(", "))
                .map_or_else(
                    || ("PostgreSQL".to_string(), None),
                    |(version, settings)| (version.to_string(), Some(settings.to_string())),
                ),
        };
        // From here on, Drop ends whatever was started.
        let mut db = ManagedDatabase {
            engine,
            script,
            port,
            pid: pid.unwrap_or(0),
            url: String::new(),
            version,
            settings,
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().find(|l| l.starts_with(engine.url_prefix())) {
            Some(url) if out.status.success() && db.pid != 0 => {
                db.url = url.trim().to_string();
                Ok(db)
            }
            _ => {
                let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(format!(
                    "scripts/{} start {port} failed ({}): {}",
                    engine.name(),
                    out.status,
                    tail.join(" | ")
                ))
            }
        }
    }

    /// Which database it is.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// `bolt://127.0.0.1:PORT`, `postgres://blocklab@127.0.0.1:PORT/blocklab`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its main process's pid (Neo4j's JVM, PostgreSQL's postmaster).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its version and settings in one phrase.
    pub fn describe(&self) -> String {
        match &self.settings {
            Some(settings) => format!("{} ({settings})", self.version),
            None => self.version.clone(),
        }
    }

    /// CPU time its whole process tree has used, from /proc: PostgreSQL runs
    /// one process per connection, and a backend that has ended is in its
    /// postmaster's count of reaped children.
    pub fn cpu_time(&self) -> Option<Duration> {
        crate::proc::tree_cpu_time(self.pid)
    }

    /// Whether its main process is alive.
    pub fn is_alive(&self) -> bool {
        crate::proc::cpu_time(crate::proc::Pid::Of(self.pid)).is_some()
    }
}

impl Drop for ManagedDatabase {
    fn drop(&mut self) {
        // SIGTERM, SIGKILL after 30 s (a JVM out of heap can be deaf to
        // SIGTERM; a backend stuck in a query), then its store deleted.
        let _ = Command::new(&self.script)
            .args(["wipe", &self.port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .status();
    }
}

/// A database the user runs, as every output names it.
pub fn name_of(url: &DbUrl) -> String {
    match url {
        DbUrl::Embedded => format!("embedded Grafeo {}", grafeo::VERSION),
        _ => {
            let engine = Engine::of(url).map_or("FalkorDB", Engine::label);
            format!("{engine} at {url} (run by the user; its CPU not measured)")
        }
    }
}

/// A port nothing listens on now (bound and released; the script refuses a
/// port that another process has taken meanwhile).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_is_its_word_and_its_urls_scheme() {
        for engine in Engine::ALL {
            assert_eq!(Engine::parse(engine.name()), Some(engine));
        }
        assert_eq!(Engine::parse("postgresql"), Some(Engine::Postgres));
        assert_eq!(Engine::parse("mysql"), None);
        assert_eq!(Engine::of(&"bolt://127.0.0.1:7687".parse().unwrap()), Some(Engine::Neo4j));
        assert_eq!(Engine::of(&"postgres://u@127.0.0.1:5432/d".parse().unwrap()), Some(Engine::Postgres));
        assert_eq!(Engine::of(&DbUrl::Embedded), None);
    }
}
