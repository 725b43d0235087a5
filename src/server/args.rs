//! `blocklab serve`: its flags, validated into a [`ServeConfig`], and the
//! command: bind, load the database, print `listening on`, serve until
//! SIGINT or SIGTERM, drain, exit.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tokio::net::TcpListener;

use super::actors::ActorLimits;
use super::config::{ServeConfig, WorkerSlot, available_cores};
use super::model::{AdmissionMode, DEFAULT_POOL_THREADS, Model};
use super::runtime::build_runtime;
use super::workers;
use crate::command::shutdown_signal;
use crate::db::{DbUrl, EmbeddedRead, GraphError};
use crate::failure::Failure;
use crate::flags::{DbClientArgs, parse_addr, parse_db, parse_duration, parse_positive_duration};

/// What `blocklab serve --help` shows after the flags.
pub const SERVE_EXAMPLES: &str = "\
Endpoints (GET; every data endpoint takes ?id=N, else reads a random node):
  /test                   200 'works', no I/O
  /getData                blocking read on the HTTP worker thread
  /getDataAsync           non-blocking read, awaited
  /getDataAsync2          two non-blocking reads in sequence
  /getDataAkka            router over 4 blocking actors; handler blocks on the reply (5 s)
  /getDataAkkaAsync       one actor piping a non-blocking read back
  /getDataAkkaAsync2      two asks in sequence
  /getDataSpawnBlocking   blocking read on tokio's blocking pool
  /delay                  waits ?ms= (default 5000, at most 600000), then {\"success\":true}
  /metrics                Prometheus metrics

Server models (--model; study 2):
  reactive   tokio + hyper/axum; handlers on the async workers (all endpoints)
  lean       tokio tasks holding no buffer while idle, httparse (all endpoints)
  pool       --threads OS threads (default 200, Tomcat's maxThreads); requests beyond
             them wait for a free one; /delay sleeps its thread (/delay, /test, /getData)
  thread     a new OS thread per request (/delay, /test, /getData)

Examples:
  blocklab serve
  blocklab serve --listen 127.0.0.1:0 --db-latency 1ms --workers 1
  blocklab serve --model pool --threads 200 --max-connections 8192
  blocklab serve --model lean --max-connections 20000
  blocklab serve --model lean --processes 2          # two workers on one port (SO_REUSEPORT)
  blocklab serve --model reactive --admission off    # accept everything, as before
  blocklab serve --model pool --admission auto       # a 503 past the cgroup's memory budget
  RUST_LOG=debug blocklab serve --nodes 100000
  blocklab serve --db postgres://blocklab@127.0.0.1:5432/blocklab --nodes 10000 --db-pool 16

A networked database that cannot be reached at start does not stop the server: it answers
503 until the database is back. One that answers and refuses it (wrong password, no such
database, not the database the URL names) does: one line, exit 2.";

/// Flags of `blocklab serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the real one is printed).
    #[arg(long, default_value = "127.0.0.1:9000", value_parser = parse_addr, value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Content nodes to load: valid ids are 1..=N.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000), value_name = "N")]
    pub nodes: u64,

    /// Database: 'embedded' (Grafeo, in process), falkor://HOST:PORT[/GRAPH], bolt://HOST:PORT or
    /// postgres://[USER[:PASSWORD]@]HOST:PORT/DATABASE.
    #[arg(long, default_value = "embedded", env = "BLOCKLAB_DB", hide_env_values = true,
          value_parser = clap::builder::ValueParser::new(parse_db), value_name = "DB")]
    pub db: DbUrl,

    /// Simulated network round trip added to every read, e.g. 1ms, 500us (embedded database only).
    #[arg(long, default_value = "0ms", value_parser = parse_duration, value_name = "DUR")]
    pub db_latency: Duration,

    /// How the embedded database is read: by its property index on id (an application's
    /// read of a store it embeds) or with the Cypher query (planned on every call) [default: index].
    #[arg(long, value_enum, value_name = "index|cypher")]
    pub embedded_read: Option<EmbeddedRead>,

    /// Database client settings.
    #[command(flatten)]
    pub db_client: DbClientArgs,

    /// Worker threads of the HTTP runtime [default: the cores this process may use].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub workers: Option<u16>,

    /// Worker threads of the actor dispatcher (the seed's own actor dispatcher had 4).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub actor_threads: u16,

    /// How long /getDataAkka blocks for its reply before answering 503 (the seed's Await.result).
    #[arg(long, default_value = "5s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub await_timeout: Duration,

    /// How long /getDataAkkaAsync waits for each ask before answering 503 (the seed's ask timeout).
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub ask_timeout: Duration,

    /// On SIGINT/SIGTERM, how long to wait for in-flight requests.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DUR")]
    pub shutdown_timeout: Duration,

    /// Server model: how connections are held and where handlers run (see below).
    #[arg(long, value_enum, default_value_t = Model::Reactive, value_name = "MODEL")]
    pub model: Model,

    /// OS threads of the pool model [default: 200, Tomcat's maxThreads] (pool only).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000), value_name = "N")]
    pub threads: Option<u32>,

    /// Connections open at most; beyond it the server stops accepting until one closes
    /// [default: 8192 for pool, as Tomcat; no limit otherwise].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000), value_name = "N")]
    pub max_connections: Option<u64>,

    /// Listen backlog: connections the kernel queues unaccepted [default: 100 for pool,
    /// as Tomcat's acceptCount; 4096 otherwise; capped by net.core.somaxconn].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65_535), value_name = "N")]
    pub accept_count: Option<u32>,

    /// How long a client may take to send a request head; under every model but lean an
    /// idle keep-alive connection is closed after it too (lean answers a started head 408).
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub header_timeout: Duration,

    /// Admission control: 'auto' admits a connection only while the live memory of this
    /// process's cgroup leaves room under its cap, and past the descriptor limit accepts and
    /// closes at once; refused clients get a 503 with Retry-After. 'off' accepts all
    /// [default: auto for reactive and lean, off for pool and thread].
    #[arg(long, value_enum, value_name = "auto|off")]
    pub admission: Option<AdmissionMode>,

    /// Percent of the memory cap admission control keeps free, for what admitted
    /// connections still grow by and the churn of refusing [default: 20 for reactive, whose
    /// connections grow most once their request comes; 10 for the rest].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=90), value_name = "PERCENT")]
    pub admission_reserve: Option<u8>,

    /// Worker processes sharing the listening port (SO_REUSEPORT), each with --workers
    /// threads, under one supervisor that prints one 'listening on' line, stops them all on
    /// SIGTERM and reports a worker that dies (lean only).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256), value_name = "N")]
    pub processes: u16,

    /// Set by the supervisor of --processes on each worker it starts: which one it is (I/N).
    #[arg(long, hide = true, value_name = "I/N")]
    pub worker: Option<WorkerSlot>,
}

impl ServeArgs {
    /// The validated plan, or why the flags do not make one.
    pub fn config(&self) -> Result<ServeConfig, String> {
        if self.threads.is_some() && self.model != Model::Pool {
            return Err(format!("--threads applies to --model pool only (this is --model {})", self.model));
        }
        if self.embedded_read.is_some() && self.db != DbUrl::Embedded {
            return Err(
                "--embedded-read applies to --db embedded only (FalkorDB and Neo4j run the Cypher query)"
                    .to_string(),
            );
        }
        if self.processes > 1 && self.model != Model::Lean {
            return Err(format!("--processes applies to --model lean only (this is --model {})", self.model));
        }
        Ok(ServeConfig {
            nodes: self.nodes,
            db: self.db.clone(),
            db_latency: self.db_latency,
            embedded_read: self.embedded_read.unwrap_or_default(),
            db_settings: self.db_client.settings(),
            workers: self.workers.map_or_else(available_cores, usize::from),
            actor_threads: usize::from(self.actor_threads),
            limits: ActorLimits { await_timeout: self.await_timeout, ask_timeout: self.ask_timeout },
            shutdown_grace: self.shutdown_timeout,
            model: self.model,
            threads: self.threads.map_or(DEFAULT_POOL_THREADS, |n| n as usize),
            max_connections: self
                .max_connections
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .or(self.model.default_max_connections()),
            accept_count: self.accept_count.unwrap_or(self.model.default_accept_count()),
            header_timeout: self.header_timeout,
            admission: self.admission.unwrap_or(self.model.default_admission()),
            admission_reserve_percent: self
                .admission_reserve
                .unwrap_or(self.model.default_admission_reserve()),
            processes: self.worker.map_or(usize::from(self.processes), |slot| slot.of),
            worker: self.worker,
        })
    }
}

/// `blocklab serve`: bind, load the database, print `listening on`, serve
/// until SIGINT or SIGTERM, drain, exit.
pub fn serve(args: &ServeArgs) -> Result<(), Failure> {
    let config = args.config().map_err(Failure::Usage)?;
    if super::budget::purge_at_once(config.model, config.admission) {
        // The same process (its pid, cgroup and limits), started again with
        // mimalloc returning freed memory at once: see budget.rs. exec
        // returns only when it fails, and then this process serves as it is.
        let error = std::process::Command::new(std::env::current_exe().context("finding this program")?)
            .args(std::env::args_os().skip(1))
            .env(super::budget::PURGE_DELAY_VAR, "0")
            .exec();
        tracing::warn!(%error, "could not start again with freed memory returned at once; serving as is");
    }
    if config.processes > 1 && config.worker.is_none() {
        return workers::supervise(&config, args.listen, worker_argv);
    }
    // Bound before anything slow happens, so "address in use" is immediate;
    // a worker's share of the port is bound with SO_REUSEPORT.
    let listener = match config.worker {
        None => super::bind(args.listen, config.accept_count),
        Some(_) => workers::bind_shared(args.listen, config.accept_count),
    }
    .map_err(|e| Failure::Usage(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    listener.set_nonblocking(true).context("configuring the listener")?;
    let (runtime, probe) = build_runtime("http", config.workers).context("starting the HTTP runtime")?;
    let result = runtime.block_on(async {
        let listener = TcpListener::from_std(listener).context("registering the listener")?;
        let ready = || println!("listening on http://{addr}");
        if config.worker.is_some() {
            super::run(&config, listener, None, probe, ready, workers::worker_signal()).await
        } else {
            super::run(&config, listener, None, probe, ready, shutdown_signal()).await
        }
    });
    tracing::info!("stopped");
    // Blocking-pool threads still in a read must not hold the exit up.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // A database that refuses this server is a usage error, as a bad flag is.
    result.map_err(|e| match e.chain().find_map(|c| c.downcast_ref::<GraphError>()) {
        Some(GraphError::Refused(_)) => Failure::Usage(format!("{e:#}")),
        _ => Failure::Failed(e),
    })
}

/// A worker's command line after the program: this process's own `serve`
/// flags, less `--listen` and `--processes`, plus the shared address and
/// the worker's slot.
fn worker_argv(slot: WorkerSlot, addr: SocketAddr) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["serve".into()];
    let mut own = std::env::args_os().skip_while(|arg| arg != "serve").skip(1);
    while let Some(arg) = own.next() {
        let text = arg.to_string_lossy();
        if text == "--listen" || text == "--processes" {
            own.next();
        } else if !(text.starts_with("--listen=") || text.starts_with("--processes=")) {
            argv.push(arg);
        }
    }
    argv.extend(["--listen".into(), addr.to_string().into(), "--worker".into(), slot.to_string().into()]);
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        /// `blocklab serve`'s flags alone.
        #[derive(clap::Parser)]
        struct Serve {
            #[command(flatten)]
            args: ServeArgs,
        }
        let argv = ["serve"].iter().chain(args);
        <Serve as clap::Parser>::try_parse_from(argv).map(|s| s.args)
    }

    #[test]
    fn defaults_follow_the_issue() {
        let s = serve(&[]).unwrap();
        assert_eq!(s.listen, "127.0.0.1:9000".parse().unwrap());
        let c = s.config().unwrap();
        assert_eq!((c.nodes, c.db_latency, c.actor_threads), (10_000, Duration::ZERO, 4));
        assert_eq!(c.limits.await_timeout, Duration::from_secs(5));
        assert!(c.workers >= 1);
        assert_eq!((c.model, c.max_connections, c.accept_count), (Model::Reactive, None, 4096));
    }

    #[test]
    fn pool_defaults_are_tomcats_and_threads_is_pool_only() {
        let c = serve(&["--model", "pool"]).unwrap().config().unwrap();
        assert_eq!((c.threads, c.max_connections, c.accept_count), (200, Some(8192), 100));
        let c = serve(&["--model", "lean", "--max-connections", "3", "--accept-count", "7"]).unwrap();
        let c = c.config().unwrap();
        assert_eq!((c.model, c.max_connections, c.accept_count), (Model::Lean, Some(3), 7));
        for model in ["reactive", "lean", "thread"] {
            let e = serve(&["--model", model, "--threads", "4"]).unwrap().config().unwrap_err();
            assert!(e.contains("--threads applies to --model pool only"), "{e}");
        }
    }

    #[test]
    fn admission_is_on_for_the_non_blocking_models_and_processes_is_lean_only() {
        for (model, admission) in
            [("reactive", AdmissionMode::Auto), ("lean", AdmissionMode::Auto), ("pool", AdmissionMode::Off)]
        {
            let c = serve(&["--model", model]).unwrap().config().unwrap();
            assert_eq!((c.admission, c.processes, c.worker), (admission, 1, None), "{model}");
        }
        let c = serve(&["--model", "thread", "--admission", "auto"]).unwrap().config().unwrap();
        assert_eq!(c.admission, AdmissionMode::Auto);
        let c = serve(&["--model", "lean", "--processes", "4"]).unwrap().config().unwrap();
        assert_eq!((c.processes, c.admission_reserve_percent), (4, 10));
        let c = serve(&["--model", "reactive"]).unwrap().config().unwrap();
        assert_eq!(c.admission_reserve_percent, 20, "reactive keeps a fifth free");
        let c = serve(&["--model", "reactive", "--admission-reserve", "12"]).unwrap().config().unwrap();
        assert_eq!(c.admission_reserve_percent, 12);
        let e = serve(&["--model", "reactive", "--processes", "2"]).unwrap().config().unwrap_err();
        assert!(e.contains("--processes applies to --model lean only"), "{e}");
        let c = serve(&["--model", "lean", "--worker", "2/3"]).unwrap().config().unwrap();
        assert_eq!((c.processes, c.worker), (3, Some(WorkerSlot { index: 2, of: 3 })));
        for bad in ["0/2", "3/2", "x", "1/"] {
            assert!(serve(&["--worker", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        for bad in [
            &["--nodes", "0"][..],
            &["--db-latency", "soon"],
            &["--workers", "0"],
            &["--listen", "nowhere"],
            &["--db", "mysql://x"],
            &["--await-timeout", "0s"],
            &["--model", "actors"],
            &["--threads", "0"],
            &["--max-connections", "0"],
            &["--processes", "0"],
            &["--admission", "maybe"],
            &["--admission-reserve", "95"],
        ] {
            let err = serve(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad:?}");
        }
    }
}
