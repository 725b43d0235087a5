//! The accept loop every server model shares, with admission control: at
//! most `--max-connections` connections open at once. Beyond the limit the
//! loop stops calling `accept` until a connection closes, so new clients wait
//! in the kernel's accept queue (`--accept-count` long) instead of costing the
//! server memory: a server with a limit sized to its memory degrades (slower
//! or refused connects) instead of being killed.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::metrics::Metrics;

/// Counts open connections and enforces the limit.
#[derive(Clone)]
pub struct Admission {
    limit: Option<Arc<Semaphore>>,
    metrics: Arc<Metrics>,
}

/// An admitted connection: holds its place under the limit and counts as
/// open until dropped.
pub struct Ticket {
    _permit: Option<OwnedSemaphorePermit>,
    metrics: Arc<Metrics>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.metrics.connections_open.dec();
    }
}

impl Admission {
    /// At most `max_connections` open at once (`None`: no limit).
    pub fn new(max_connections: Option<usize>, metrics: Arc<Metrics>) -> Admission {
        let limit = max_connections.map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS))));
        Admission { limit, metrics }
    }

    /// Accepts connections on `listener` and hands each to `serve` with its
    /// ticket, until `shutdown` resolves.
    pub async fn accept_until(
        &self,
        listener: &TcpListener,
        shutdown: impl Future<Output = ()>,
        mut serve: impl FnMut(TcpStream, SocketAddr, Ticket),
    ) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let permit = match &self.limit {
                Some(limit) => tokio::select! {
                    permit = limit.clone().acquire_owned() => permit.ok(),
                    () = &mut shutdown => return,
                },
                None => None,
            };
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
                () = &mut shutdown => return,
            };
            let _ = stream.set_nodelay(true);
            self.metrics.connections_open.inc();
            self.metrics.connections_accepted.fetch_add(1, Relaxed);
            serve(stream, peer, Ticket { _permit: permit, metrics: self.metrics.clone() });
        }
    }
}
