//! A fixed number of Bolt connections, opened on first use, lent one read at
//! a time. Checkout waits in FIFO order for a permit of a Tokio semaphore
//! (fair: no read starves under load), then takes an idle connection or
//! opens one. Nothing is sent on checkout — no RESET, no ping: a connection
//! goes back to the pool only when its exchange completed, so it is known to
//! be in step; one whose read was dropped mid-exchange (the HTTP client went
//! away, the timeout fired) still has answers coming, and is closed instead.
//! The permit is then free and a later read opens a new connection.

use std::sync::Mutex;

use tokio::sync::{Semaphore, SemaphorePermit};

use super::connection::{ConnectConfig, Connection};
use super::error::BoltError;
use super::packstream::Value;

/// A pool of at most `size` connections to one server.
pub struct Pool {
    config: ConnectConfig,
    /// A std Mutex, not a Tokio one: it is held for a push or a pop, never
    /// across an await.
    idle: Mutex<Vec<Connection>>,
    /// One permit per connection that may exist; a checkout holds one.
    permits: Semaphore,
}

/// A connection lent by the pool. Dropped, it goes back to the pool if its
/// last exchange completed, and is closed otherwise.
pub struct Checkout<'a> {
    pool: &'a Pool,
    connection: Option<Connection>,
    /// Whether it came from the idle list (it may have died while idle).
    reused: bool,
    _permit: SemaphorePermit<'a>,
}

impl Pool {
    /// A pool of at most `size` (at least 1) connections to `config`'s
    /// server. None is opened here.
    pub fn new(config: ConnectConfig, size: usize) -> Pool {
        Pool { config, idle: Mutex::new(Vec::new()), permits: Semaphore::new(size.max(1)) }
    }

    /// Waits for a permit (FIFO), then lends an idle connection or opens one.
    pub async fn checkout(&self) -> Result<Checkout<'_>, BoltError> {
        let permit = self.permits.acquire().await.expect("the semaphore is never closed");
        let idle = self.idle.lock().expect("no panic while held").pop();
        let (connection, reused) = match idle {
            Some(connection) => (connection, true),
            None => (Connection::open(&self.config).await?, false),
        };
        Ok(Checkout { pool: self, connection: Some(connection), reused, _permit: permit })
    }

    /// Runs `query` on a pooled connection (see [`Connection::run`]). A
    /// connection that broke on first use after lying idle most likely died
    /// with its server (a restart): the idle ones are closed with it and the
    /// query is tried once more on a new connection, so that a restarted
    /// Neo4j is used at once instead of failing a read per stale connection.
    /// Only for queries that may run twice (reads, MERGE).
    pub async fn run(&self, query: &str, params: &[(&str, Value)]) -> Result<Vec<Vec<Value>>, BoltError> {
        let mut checkout = self.checkout().await?;
        match checkout.run(query, params).await {
            Err(BoltError::Io(_)) if checkout.reused => {
                drop(checkout);
                self.idle.lock().expect("no panic while held").clear();
                self.checkout().await?.run(query, params).await
            }
            answer => answer,
        }
    }
}

impl Checkout<'_> {
    /// Runs `query` on this connection (see [`Connection::run`]).
    pub async fn run(&mut self, query: &str, params: &[(&str, Value)]) -> Result<Vec<Vec<Value>>, BoltError> {
        self.connection.as_mut().expect("present until drop").run(query, params).await
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        // Back to the pool before the permit is released (fields drop after
        // this), so the next waiter finds it.
        if let Some(connection) = self.connection.take().filter(Connection::is_reusable) {
            self.pool.idle.lock().expect("no panic while held").push(connection);
        }
    }
}
