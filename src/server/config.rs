//! What `serve` needs to know, validated ([`ServeConfig`]), its defaults,
//! and the labels of `blocklab_info` every server model shares. Below both
//! the server's assembly (`server/mod.rs`) and the models that read it.

use std::time::Duration;

use super::actors::{self, ActorLimits};
use super::model::{self, AdmissionMode, LISTEN_BACKLOG, Model};
use crate::db::{DbSettings, DbUrl, EmbeddedRead};

/// Everything `serve` needs to know, validated.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Content nodes in the dataset: valid ids are 1..=nodes.
    pub nodes: u64,
    /// Which database.
    pub db: DbUrl,
    /// Simulated network round trip added to every read (embedded backend).
    pub db_latency: Duration,
    /// How the embedded backend is read: its property index or Cypher.
    pub embedded_read: EmbeddedRead,
    /// Client settings of a networked database (pool sizes, timeouts).
    pub db_settings: DbSettings,
    /// Worker threads of the HTTP runtime.
    pub workers: usize,
    /// Worker threads of the actor dispatcher.
    pub actor_threads: usize,
    /// How long callers wait for actors.
    pub limits: ActorLimits,
    /// How long shutdown waits for in-flight requests before giving up on them.
    pub shutdown_grace: Duration,
    /// How connections are held and where handlers run.
    pub model: Model,
    /// OS threads of the `pool` model.
    pub threads: usize,
    /// Connections open at most (`None`: no limit).
    pub max_connections: Option<usize>,
    /// The listen backlog: connections the kernel queues before `accept`.
    pub accept_count: u32,
    /// How long a client may take to send a request head. Under hyper (all
    /// models but lean) the wait for the next request on an idle keep-alive
    /// connection counts too, and the connection is closed; lean answers a
    /// started head with 408 and lets idle connections be.
    pub header_timeout: Duration,
    /// Whether connections are admitted only while they fit in the memory
    /// cap and the descriptor limit ([`super::budget`], [`super::accept`]).
    /// Off in `Default`; `serve`'s default is the model's
    /// ([`Model::default_admission`]).
    pub admission: AdmissionMode,
    /// Percent of the memory cap admission control keeps free.
    pub admission_reserve_percent: u8,
    /// Worker processes sharing the port (`--processes`; 1: this process serves).
    pub processes: usize,
    /// Which worker this process is, when a supervisor started it.
    pub worker: Option<WorkerSlot>,
}

/// One worker among the processes of `serve --processes N`: its number
/// (1-based) and how many were started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSlot {
    /// This worker's number, 1..=of.
    pub index: usize,
    /// Workers started in all.
    pub of: usize,
}

impl std::str::FromStr for WorkerSlot {
    type Err = String;

    fn from_str(text: &str) -> Result<WorkerSlot, String> {
        let bad = || format!("'{text}' is not a worker slot like 2/4");
        let (index, of) = text.split_once('/').ok_or_else(bad)?;
        let (index, of) = (index.parse().map_err(|_| bad())?, of.parse().map_err(|_| bad())?);
        if index == 0 || index > of {
            return Err(bad());
        }
        Ok(WorkerSlot { index, of })
    }
}

impl std::fmt::Display for WorkerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.of)
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            nodes: 10_000,
            db: DbUrl::Embedded,
            db_latency: Duration::ZERO,
            embedded_read: EmbeddedRead::Index,
            db_settings: DbSettings::default(),
            workers: available_cores(),
            actor_threads: actors::POOL_SIZE,
            limits: ActorLimits::default(),
            shutdown_grace: Duration::from_secs(10),
            model: Model::Reactive,
            threads: model::DEFAULT_POOL_THREADS,
            max_connections: None,
            accept_count: LISTEN_BACKLOG,
            header_timeout: HEADER_TIMEOUT,
            admission: AdmissionMode::Off,
            admission_reserve_percent: model::DEFAULT_ADMISSION_RESERVE_PERCENT,
            processes: 1,
            worker: None,
        }
    }
}

/// The cores this process may run on (honours CPU affinity and cgroup quotas).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How long a client may take to send a request head, unless
/// `--header-timeout` says otherwise (hyper's default, nginx's is 60 s).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// The labels of `blocklab_info` every model shares: the model and its limits.
pub fn model_info(config: &ServeConfig) -> Vec<(&'static str, String)> {
    let mut info = vec![
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("model", config.model.to_string()),
        ("workers", config.workers.to_string()),
        ("max_connections", config.max_connections.map_or("unlimited".to_string(), |n| n.to_string())),
        ("accept_count", config.accept_count.to_string()),
        ("admission", config.admission.name().to_string()),
        ("processes", config.processes.to_string()),
    ];
    if let Some(slot) = config.worker {
        info.push(("worker_process", slot.to_string()));
    }
    if config.model == Model::Pool {
        info.push(("threads", config.threads.to_string()));
    }
    info
}
