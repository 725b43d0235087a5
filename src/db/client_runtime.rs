//! The runtime a database client runs its blocking path on, and the one way
//! a blocking read waits for it. The official Java drivers build their
//! synchronous sessions on their async core this way, and so do blocklab's
//! Neo4j and PostgreSQL clients: the query runs on the client's **own**
//! runtime and the calling thread parks on a std channel until the answer
//! comes. Never `block_on` on the caller's thread: on a Tokio worker (where
//! `/getData` runs, the anti-pattern the study measures) that panics
//! ("Cannot start a runtime from within a runtime"); parked on a channel,
//! the worker is blocked for the round trip, as a synchronous driver blocks it.

use std::future::Future;
use std::time::Duration;

use super::backend::GraphError;

/// A multi-thread runtime owned by one client, shut down in the background
/// when the client is dropped (a read still waiting there must not hold the
/// caller up).
pub struct ClientRuntime {
    runtime: Option<tokio::runtime::Runtime>,
}

impl ClientRuntime {
    /// Two worker threads named `name`: the blocking path's protocol work for
    /// every blocking read at once, which is little beside the database's.
    pub fn start(name: &str) -> Result<ClientRuntime, GraphError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(name)
            .enable_all()
            .build()
            .map_err(|e| GraphError::Unavailable(format!("cannot start the {name} runtime: {e}")))?;
        Ok(ClientRuntime { runtime: Some(runtime) })
    }

    /// Runs `work` on this runtime and parks the calling thread until its
    /// result, at most `limit`; past it, `late()` is the error.
    pub fn wait_for<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, GraphError>> + Send + 'static,
        limit: Duration,
        late: impl FnOnce() -> GraphError,
    ) -> Result<T, GraphError> {
        let (done, answer) = std::sync::mpsc::sync_channel(1);
        self.spawn(async move {
            let _ = done.send(work.await);
        });
        answer.recv_timeout(limit).map_err(|_| late())?
    }

    /// Starts `work` on this runtime, detached.
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.runtime.as_ref().expect("present until drop").spawn(work);
    }
}

impl Drop for ClientRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
