//! `blocklab serve`: the seed study's endpoints, each one execution model,
//! over a graph backend.
//!
//! The server owns two executors: the HTTP runtime (`--workers` threads, the
//! request threads) and the actor dispatcher (see [`actors`]). [`serve`] runs
//! the accept loop on a listener until a shutdown future resolves;
//! [`RunningServer`] starts a whole server on its own runtime, for tests and
//! the experiment runner.

pub mod actors;
pub mod app;
pub mod endpoint;
pub mod error;
mod handlers;
pub mod metrics;
pub mod runtime;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

pub use actors::{ActorLimits, ActorSystem};
pub use app::{AppState, app};
pub use endpoint::Endpoint;
use metrics::Metrics;
use runtime::{RuntimeProbe, build_runtime};

use crate::graph::{DbSettings, DbUrl, GraphBackend};

/// Everything `serve` needs to know, validated.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Content nodes in the dataset: valid ids are 1..=nodes.
    pub nodes: u64,
    /// Which database.
    pub db: DbUrl,
    /// Simulated network round trip added to every read (embedded backend).
    pub db_latency: Duration,
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
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            nodes: 10_000,
            db: DbUrl::Embedded,
            db_latency: Duration::ZERO,
            db_settings: DbSettings::default(),
            workers: available_cores(),
            actor_threads: actors::POOL_SIZE,
            limits: ActorLimits::default(),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// The cores this process may run on (honours CPU affinity and cgroup quotas).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Pending connections the kernel may queue before the server accepts them.
/// With the default of 128, a client opening 200 connections at once (ab, the
/// bench) sees some SYNs dropped and retried a second later — a 1 s "max
/// response time" that is the listen queue, not the server. Linux caps it at
/// `net.core.somaxconn`.
pub const LISTEN_BACKLOG: i32 = 4096;

/// Binds a listening socket on `addr` with [`LISTEN_BACKLOG`].
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// Opens the database named by `config` and checks its dataset. A networked
/// database that cannot be reached is not an error here: the server starts,
/// answers 503 on the data endpoints and recovers when the database does.
pub async fn open_backend(config: &ServeConfig) -> anyhow::Result<Arc<dyn GraphBackend>> {
    let backend = crate::graph::open(&config.db, config.nodes, config.db_latency, config.db_settings)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if config.db != DbUrl::Embedded {
        let counting = backend.clone();
        match tokio::task::spawn_blocking(move || counting.count()).await? {
            Ok(n) if n >= config.nodes => tracing::info!(nodes = n, "dataset present"),
            Ok(n) => anyhow::bail!(
                "{} holds {n} Content nodes, not the {} asked for; load them with: blocklab seed --db {} --nodes {}",
                config.db,
                config.nodes,
                config.db,
                config.nodes
            ),
            Err(e) => {
                tracing::warn!(error = %e, "cannot check the dataset now; starting anyway (data endpoints answer 503 until the database is reachable)")
            }
        }
    }
    Ok(backend)
}

/// Builds the handlers' state over `backend`: starts the actor system.
pub async fn build_state(
    config: &ServeConfig,
    backend: Arc<dyn GraphBackend>,
    http: Option<RuntimeProbe>,
) -> anyhow::Result<AppState> {
    let metrics = Arc::new(Metrics::default());
    let actors = ActorSystem::start(backend.clone(), metrics.clone(), config.actor_threads, config.limits)
        .await
        .context("starting the actor system")?;
    let mut info = vec![
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("db", config.db.to_string()),
        ("db_latency_seconds", config.db_latency.as_secs_f64().to_string()),
        ("nodes", config.nodes.to_string()),
        ("workers", config.workers.to_string()),
        ("actor_threads", config.actor_threads.to_string()),
    ];
    info.extend(backend.settings());
    Ok(AppState::new(backend, config.nodes, actors, metrics, http, info))
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting and waits up to `grace` for open requests to finish.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: the listener is
                    // still good, so wait a little instead of spinning or dying.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .keep_alive(true)
            .header_read_timeout(Duration::from_secs(30))
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!("stopped accepting; waiting for open requests");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections closed"),
        () = tokio::time::sleep(grace) => tracing::warn!(?grace, "requests still open after the grace period; stopping anyway"),
    }
    Ok(())
}

/// A whole server running on its own HTTP runtime, in a thread of its own.
/// Dropping it (or calling [`RunningServer::stop`]) shuts it down.
pub struct RunningServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl RunningServer {
    /// Starts a server with `config` on `listener`, reading from `backend`.
    /// Returns once the server is accepting.
    pub fn start(
        config: ServeConfig,
        backend: Arc<dyn GraphBackend>,
        listener: std::net::TcpListener,
    ) -> anyhow::Result<RunningServer> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let (runtime, probe) = build_runtime("http", config.workers)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, is_ready) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new().name("blocklab-server".into()).spawn(move || {
            let result = runtime.block_on(async move {
                let state = build_state(&config, backend, Some(probe)).await?;
                let listener = TcpListener::from_std(listener)?;
                let _ = ready.send(());
                let shutdown = async move {
                    let _ = stopped.await;
                };
                serve(listener, app(state), shutdown, config.shutdown_grace).await?;
                Ok(())
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
            result
        })?;
        let mut server = RunningServer { addr, stop: Some(stop), thread: Some(thread) };
        if is_ready.recv().is_err() {
            // The thread ended before it was ready: report why.
            return Err(server.join().err().unwrap_or_else(|| anyhow::anyhow!("server failed to start")));
        }
        Ok(server)
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server and waits for it to finish.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.join()
    }

    fn join(&mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(thread) => thread.join().map_err(|_| anyhow::anyhow!("server thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.join();
    }
}
