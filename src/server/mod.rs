//! `blocklab serve`: the seed studies' endpoints over a graph backend, under
//! one of study 2's server models ([`Model`]).
//!
//! The reactive model owns two executors: the HTTP runtime (`--workers`
//! threads) and the actor dispatcher (see [`actors`]). The pool and thread
//! models keep the HTTP runtime as their front end and run handlers on OS
//! threads of their own ([`request_threads`]); the lean model is a server of
//! its own ([`lean`]) with the reactive model's two executors. What each data
//! endpoint does is said once, in [`data`], for every model. [`run`] serves a model on a listener until a shutdown
//! future resolves; [`RunningServer`] starts a whole server on its own
//! runtime, for tests and the experiment runner.

pub mod accept;
pub mod actors;
pub mod allocations;
pub mod app;
pub mod args;
pub mod budget;
pub mod capacity;
pub mod config;
pub mod data;
pub mod delay;
pub mod endpoint;
pub mod error;
pub mod exposition;
mod handlers;
pub mod idle;
pub mod lean;
pub mod metrics;
pub mod model;
pub mod observe;
pub mod parking;
pub mod request_threads;
pub mod runtime;
pub mod state;
pub mod timer;
pub mod workers;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use accept::Admission;
pub use actors::{ActorLimits, ActorSystem};
pub use app::{App, AppState, app};
pub use config::{HEADER_TIMEOUT, ServeConfig, available_cores, model_info};
pub use endpoint::Endpoint;
use metrics::Metrics;
pub use model::{LISTEN_BACKLOG, Model};
use request_threads::RequestThreads;
use runtime::{RuntimeProbe, build_runtime};
use timer::ConnectionTimer;

use crate::db::{DbUrl, GraphBackend, GraphError};

/// Binds a listening socket on `addr` with a listen backlog of `backlog`.
pub fn bind(addr: SocketAddr, backlog: u32) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    Ok(socket.into())
}

/// Opens the database named by `config` and checks its dataset. A networked
/// database that cannot be reached is not an error here: the server starts,
/// answers 503 on the data endpoints and recovers when the database does.
/// One that answers and refuses this server ([`GraphError::Refused`]: its
/// credentials, its database name) is: no wait would mend it.
pub async fn open_backend(config: &ServeConfig) -> anyhow::Result<Arc<dyn GraphBackend>> {
    let backend = crate::db::open(
        &config.db,
        config.nodes,
        config.db_latency,
        config.db_settings,
        config.embedded_read,
    )
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
            Err(e @ GraphError::Refused(_)) => return Err(anyhow::Error::new(e)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot check the dataset now; starting anyway (data endpoints answer 503 until the database is reachable)")
            }
        }
    }
    Ok(backend)
}

/// Builds the handlers' state over `backend`: starts the actor system (models
/// reactive and lean) or the request threads (models pool and thread).
pub async fn build_state(
    config: &ServeConfig,
    backend: Arc<dyn GraphBackend>,
    http: Option<RuntimeProbe>,
) -> anyhow::Result<AppState> {
    let metrics = Arc::new(Metrics::default());
    metrics.capacity.processes.store(config.processes as u64, std::sync::atomic::Ordering::Relaxed);
    let mut info = model_info(config);
    info.extend([
        ("db", config.db.to_string()),
        ("db_latency_seconds", config.db_latency.as_secs_f64().to_string()),
        ("nodes", config.nodes.to_string()),
    ]);
    let (mut actors, mut threads) = (None, None);
    match config.model {
        Model::Reactive | Model::Lean => {
            let system =
                ActorSystem::start(backend.clone(), metrics.clone(), config.actor_threads, config.limits)
                    .await
                    .context("starting the actor system")?;
            info.push(("actor_threads", config.actor_threads.to_string()));
            actors = Some(system);
        }
        Model::Pool => {
            let pool = RequestThreads::pool(config.threads, metrics.clone())
                .with_context(|| format!("starting {} pool threads", config.threads))?;
            threads = Some(Arc::new(pool));
        }
        Model::Thread => threads = Some(Arc::new(RequestThreads::per_request(metrics.clone()))),
    }
    info.extend(backend.settings());
    Ok(AppState::new(state::Parts {
        backend,
        nodes: config.nodes,
        model: config.model,
        actors,
        threads,
        metrics,
        http,
        info,
    }))
}

/// Serves `config.model` on `listener` until `shutdown` resolves, reading
/// `backend` or, when it is `None`, the database `config` names. `ready` is
/// called once the server accepts.
pub async fn run(
    config: &ServeConfig,
    listener: TcpListener,
    backend: Option<Arc<dyn GraphBackend>>,
    http: RuntimeProbe,
    ready: impl FnOnce(),
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let backend = match backend {
        Some(backend) => backend,
        None => open_backend(config).await.context("opening the database")?,
    };
    tracing::info!(
        model = %config.model,
        db = %backend.describe(),
        workers = config.workers,
        "starting"
    );
    let state = build_state(config, backend, Some(http)).await?;
    let shutdown = workers::or_supervisor_gone(config.worker, state.metrics().clone(), shutdown);
    if config.model == Model::Lean {
        let server = lean::LeanServer::new(config, state).context("creating the lean server's epoll set")?;
        ready();
        server.serve(listener, shutdown, config.shutdown_grace).await;
        return Ok(());
    }
    let admission = Admission::for_config(config, state.metrics().clone());
    ready();
    serve(listener, app(state), &admission, shutdown, config).await;
    Ok(())
}

/// Serves `app` on `listener` until `shutdown` resolves, then stops
/// accepting and waits up to `config.shutdown_grace` for open requests to
/// finish.
pub async fn serve(
    listener: TcpListener,
    app: App,
    admission: &Admission,
    shutdown: impl Future<Output = ()>,
    config: &ServeConfig,
) {
    let grace = config.shutdown_grace;
    let graceful = GracefulShutdown::new();
    admission
        .accept_until(&listener, shutdown, |stream, peer, ticket| {
            // The app is hyper's service itself (see `app.rs` on why), behind
            // the memory budget's request line.
            let service = admission.guard(app.clone());
            let connection = http1::Builder::new()
                .timer(ConnectionTimer::new())
                .keep_alive(true)
                // Head and body copied into one buffer and sent with one write:
                // every body here is small, and the copy costs fewer
                // instructions than queueing both for writev (callgrind).
                .writev(false)
                .header_read_timeout(config.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                drop(ticket);
            });
        })
        .await;
    drop(listener);
    tracing::info!("stopped accepting; waiting for open requests");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections closed"),
        () = tokio::time::sleep(grace) => tracing::warn!(?grace, "requests still open after the grace period; stopping anyway"),
    }
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
                let listener = TcpListener::from_std(listener)?;
                let shutdown = async move {
                    let _ = stopped.await;
                };
                let ready = move || {
                    let _ = ready.send(());
                };
                run(&config, listener, Some(backend), probe, ready, shutdown).await
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
