//! `serve --processes N`: the server as N worker processes sharing one
//! listening port, under a supervisor (the process the user or the harness
//! started).
//!
//! **How the port is shared: SO_REUSEPORT.** Each worker binds and listens
//! on the same address with `SO_REUSEPORT` set, and the kernel spreads new
//! connections over the listening sockets by a hash of each connection's
//! addresses and ports: about evenly for many clients, with no thundering
//! herd and no lock between workers; each worker has its own accept queue.
//! The alternative, one listener inherited from the parent as nginx does,
//! would need the descriptor passed across `exec` by number, which safe Rust
//! cannot take back as a socket (this crate forbids `unsafe`), and its
//! workers would race on one queue (whoever wakes first takes the
//! connection, unevenly). What SO_REUSEPORT costs: the connections queued on
//! a worker that dies are reset, and connections already hashed to it are
//! lost with it; new ones go to the workers left.
//!
//! **The supervisor** binds the address first without listening: that
//! reserves the port (and picks it, for port 0) for as long as it runs, and,
//! since it does not listen, it takes no connection. It then starts each
//! worker as `blocklab serve … --listen ADDR --worker I/N` (the same binary,
//! the same flags), so all of them are its children in its cgroup and the
//! cap counts them all; waits for each worker's `listening on` line, and
//! prints the one line the harness waits for. It serves nothing itself: a
//! small process that the OOM killer has little reason to pick.
//!
//! **Stopping and dying.** Each worker's stdin is a pipe from the
//! supervisor. On SIGTERM or SIGINT the supervisor closes them all: each
//! worker sees end of file, stops accepting and drains as a single server
//! does on SIGTERM, and exits; the supervisor waits for them (`--shutdown-timeout`
//! plus 5 s, then kills). A supervisor killed outright closes the pipes by
//! dying, so no worker outlives it. A worker that exits while the server
//! runs (the OOM killer, a crash, `kill`) is reported on the supervisor's
//! stderr, is not restarted, and the supervisor writes `lost K` to the
//! pipes of the others so that `/metrics` shows it
//! (`blocklab_worker_processes_lost_total`). When none is left the
//! supervisor exits with a failure.

use std::ffi::OsString;
use std::future::Future;
use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::Context;
use socket2::{Domain, Socket, Type};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

use super::config::{ServeConfig, WorkerSlot};
use super::metrics::Metrics;
use crate::command::shutdown_signal;
use crate::failure::Failure;

/// How long the supervisor waits for every worker's `listening on` line.
const READY_WITHIN: Duration = Duration::from_secs(120);

/// A listening socket on `addr` that other sockets of this user may listen
/// on too (`SO_REUSEPORT`): a worker's share of the port.
pub fn bind_shared(addr: SocketAddr, backlog: u32) -> std::io::Result<std::net::TcpListener> {
    let socket = shared_socket(addr)?;
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    Ok(socket.into())
}

/// A socket bound to `addr` with `SO_REUSEADDR` and `SO_REUSEPORT`, not listening.
fn shared_socket(addr: SocketAddr) -> std::io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

/// What the supervisor knows of one worker.
struct Worker {
    slot: WorkerSlot,
    pid: u32,
    /// The pipe to its stdin: closed to stop it, `lost K` written on it.
    stdin: Option<ChildStdin>,
    /// Kills it (the last resort of a stop).
    kill: Option<oneshot::Sender<()>>,
    alive: bool,
}

/// A worker's exit, as its watcher reports it.
struct Exit {
    index: usize,
    status: std::io::Result<ExitStatus>,
}

/// Runs `config.processes` workers on `listen` until SIGTERM or SIGINT;
/// `argv` gives a worker's command line after the program (its slot, the
/// address all share).
pub fn supervise(
    config: &ServeConfig,
    listen: SocketAddr,
    argv: impl Fn(WorkerSlot, SocketAddr) -> Vec<OsString>,
) -> Result<(), Failure> {
    let reservation =
        shared_socket(listen).map_err(|e| Failure::Usage(format!("cannot listen on {listen}: {e}")))?;
    let addr =
        reservation.local_addr().ok().and_then(|a| a.as_socket()).context("reading the bound address")?;
    let exe = std::env::current_exe().context("finding this program to start its workers")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the supervisor's runtime")?;
    let result = runtime.block_on(async {
        let (exits, mut exited) = mpsc::unbounded_channel();
        let (readies, mut ready) = mpsc::unbounded_channel();
        let mut workers = Vec::with_capacity(config.processes);
        for index in 1..=config.processes {
            let slot = WorkerSlot { index, of: config.processes };
            let child = Command::new(&exe)
                .args(argv(slot, addr))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting worker {slot}"))?;
            workers.push(watch(child, slot, exits.clone(), readies.clone()));
        }
        let mut signal = std::pin::pin!(shutdown_signal());
        let mut waiting = workers.len();
        let deadline = tokio::time::sleep(READY_WITHIN);
        let mut deadline = std::pin::pin!(deadline);
        while waiting > 0 {
            tokio::select! {
                Some(_) = ready.recv() => waiting -= 1,
                Some(exit) = exited.recv() => {
                    let worker = &mut workers[exit.index];
                    worker.alive = false;
                    let why = format!("worker {} (pid {}) exited before it was ready: {}", worker.slot, worker.pid, shown(&exit.status));
                    stop(&mut workers, &mut exited, config.shutdown_grace).await;
                    anyhow::bail!(why);
                }
                () = &mut deadline => {
                    stop(&mut workers, &mut exited, config.shutdown_grace).await;
                    anyhow::bail!("the workers were not all ready within {READY_WITHIN:?}");
                }
                () = &mut signal => {
                    stop(&mut workers, &mut exited, config.shutdown_grace).await;
                    return Ok(());
                }
            }
        }
        let pids: Vec<String> = workers.iter().map(|w| w.pid.to_string()).collect();
        tracing::info!(pids = pids.join(","), "serving on one port (SO_REUSEPORT) with {} worker processes", workers.len());
        println!("listening on http://{addr}");
        let mut lost = 0;
        loop {
            tokio::select! {
                () = &mut signal => break,
                Some(exit) = exited.recv() => {
                    lost += 1;
                    let started = workers.len();
                    let worker = &mut workers[exit.index];
                    worker.alive = false;
                    worker.stdin = None;
                    let left = started - lost;
                    eprintln!(
                        "blocklab: worker {} (pid {}) died ({}); {left} of {started} workers left, not restarted",
                        worker.slot,
                        worker.pid,
                        shown(&exit.status),
                    );
                    if left == 0 {
                        anyhow::bail!("every worker died");
                    }
                    tell(&mut workers, &format!("lost {lost}\n")).await;
                }
            }
        }
        stop(&mut workers, &mut exited, config.shutdown_grace).await;
        Ok(())
    });
    drop(reservation);
    result.map_err(Failure::Failed)
}

/// An exit status as the supervisor reports it ("signal: 9 (SIGKILL)": the
/// OOM killer, or kill -9).
fn shown(status: &std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(status) => status.to_string(),
        Err(e) => format!("cannot tell how: {e}"),
    }
}

/// Starts watching `child`: its `listening on` line goes to `ready`, its
/// exit to `exits`; the returned handle stops or kills it.
fn watch(
    mut child: Child,
    slot: WorkerSlot,
    exits: mpsc::UnboundedSender<Exit>,
    ready: mpsc::UnboundedSender<usize>,
) -> Worker {
    let index = slot.index - 1;
    let pid = child.id().unwrap_or(0);
    let stdin = child.stdin.take();
    if let Some(stdout) = child.stdout.take() {
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            // Its own `listening on` line; anything after it is drained
            // unread, so that the worker never blocks on a full pipe.
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with("listening on ") {
                    let _ = ready.send(index);
                }
            }
        });
    }
    let (kill, killed) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => status,
            Ok(()) = killed => {
                let _ = child.kill().await;
                child.wait().await
            }
        };
        let _ = exits.send(Exit { index, status });
    });
    Worker { slot, pid, stdin, kill: Some(kill), alive: true }
}

/// Writes `message` to every live worker's pipe.
async fn tell(workers: &mut [Worker], message: &str) {
    for worker in workers.iter_mut().filter(|w| w.alive) {
        if let Some(stdin) = &mut worker.stdin {
            let _ = stdin.write_all(message.as_bytes()).await;
        }
    }
}

/// Closes every worker's pipe, waits up to `grace` plus 5 s for them to
/// drain and exit, then kills the rest.
async fn stop(workers: &mut [Worker], exited: &mut mpsc::UnboundedReceiver<Exit>, grace: Duration) {
    for worker in workers.iter_mut() {
        worker.stdin = None;
    }
    let deadline = tokio::time::Instant::now() + grace + Duration::from_secs(5);
    while workers.iter().any(|w| w.alive) {
        match tokio::time::timeout_at(deadline, exited.recv()).await {
            Ok(Some(exit)) => workers[exit.index].alive = false,
            Ok(None) => return,
            Err(_) => {
                for worker in workers.iter_mut().filter(|w| w.alive) {
                    tracing::warn!(worker = %worker.slot, pid = worker.pid, "did not stop in time; killing it");
                    if let Some(kill) = worker.kill.take() {
                        let _ = kill.send(());
                    }
                }
                while workers.iter().any(|w| w.alive) {
                    match exited.recv().await {
                        Some(exit) => workers[exit.index].alive = false,
                        None => return,
                    }
                }
            }
        }
    }
}

/// A worker's shutdown: `shutdown`, or its supervisor closing the pipe to
/// its stdin (a stop, or the supervisor's death); meanwhile the supervisor's
/// `lost K` lines go into `/metrics`. Not a worker (`slot` is `None`):
/// `shutdown` alone.
pub async fn or_supervisor_gone(
    slot: Option<WorkerSlot>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    if slot.is_none() {
        return shutdown.await;
    }
    tokio::select! {
        () = shutdown => {}
        () = follow_supervisor(metrics) => tracing::info!("the supervisor closed the pipe: shutting down"),
    }
}

/// Reads the supervisor's lines on stdin until it closes the pipe.
async fn follow_supervisor(metrics: Arc<Metrics>) {
    use std::os::fd::AsFd;
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    let pipe = match pipe {
        Ok(pipe) => pipe,
        Err(e) => {
            tracing::warn!(error = %e, "a worker whose stdin is not its supervisor's pipe: SIGTERM alone stops it");
            return std::future::pending().await;
        }
    };
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(lost) = line.strip_prefix("lost ").and_then(|n| n.trim().parse().ok()) {
            metrics.capacity.processes_lost.store(lost, Relaxed);
        }
    }
}

/// What stops a worker besides its pipe: SIGTERM. A ctrl-c at the terminal
/// reaches the whole foreground process group, workers too; it is the
/// supervisor's to act on (it then closes the pipes), so a worker takes
/// SIGINT over from its default action (exit) and ignores it.
pub async fn worker_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let _ignored = signal(SignalKind::interrupt());
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            term.recv().await;
            tracing::info!("SIGTERM: shutting down");
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM");
            std::future::pending::<()>().await;
        }
    }
}
