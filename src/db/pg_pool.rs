//! blocklab's own pool of `tokio-postgres` connections, each with the
//! study's read prepared on it once, when it opens. At most `size`
//! connections, opened on first use (a server can start while its database
//! is down), lent one read at a time: checkout waits in FIFO order for a
//! permit of a Tokio semaphore (fair: no read starves under load), then takes
//! the most recently returned live connection, or opens one. Nothing is sent
//! on checkout or return: no ping, no reset.
//!
//! A read dropped mid-query (its timeout, an HTTP client that went away)
//! leaves nothing out of step: `tokio-postgres` reads the answer it still
//! owes and throws it away, in order, before the next query's. So such a
//! connection goes back to the pool. A closed one (its backend died, the
//! link broke) is dropped where it is found; a later checkout opens another.
//! Why this pool and not deadpool-postgres is said, with figures, in
//! `postgres.rs`.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::SemaphorePermit;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Config, NoTls, Statement};

use super::permits::Permits;

/// A connection and the read prepared on it.
pub struct Connection {
    /// The client half; its connection half runs as a task of the runtime
    /// that opened it, which reads the socket for every query.
    pub client: Client,
    /// The read, parsed and planned once per connection (`Parse` at open,
    /// then `Bind` + `Execute` per read: one round trip).
    pub read: Statement,
}

/// Why a checkout or a query failed.
#[derive(Debug)]
pub enum PgError {
    /// No connection within the connect timeout (TCP, startup and login).
    TimedOut(Duration),
    /// The database or the network failed or refused.
    Postgres(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> PgError {
        PgError::Postgres(e)
    }
}

/// Connects with `config` within `limit` (TCP, startup and login), its
/// connection half spawned on the calling runtime.
pub async fn connect(config: &Config, limit: Duration) -> Result<Client, PgError> {
    let connecting = async {
        let (client, connection) = config.connect(NoTls).await?;
        // Ends when the socket closes or the client is dropped; its error
        // reaches the queries as a closed client.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    };
    tokio::time::timeout(limit, connecting).await.map_err(|_| PgError::TimedOut(limit))?
}

/// A pool of at most `size` connections to one database.
pub struct Pool {
    config: Config,
    read_sql: &'static str,
    connect_timeout: Duration,
    /// A std Mutex, not a Tokio one: held for a push or a pop, never across an await.
    idle: Mutex<Vec<Connection>>,
    /// One permit per connection that may exist; a checkout holds one.
    permits: Permits,
}

/// A connection lent by the pool; dropped, it goes back unless it is closed.
pub struct Checkout<'a> {
    pool: &'a Pool,
    connection: Option<Connection>,
    /// Whether it came from the idle list (it may have died while idle).
    pub reused: bool,
    _permit: SemaphorePermit<'a>,
}

impl Pool {
    /// A pool of at most `size` (at least 1) connections opened with
    /// `config`, each preparing `read_sql` (one `bigint` parameter). None is
    /// opened here.
    pub fn new(config: Config, read_sql: &'static str, connect_timeout: Duration, size: usize) -> Pool {
        Pool { config, read_sql, connect_timeout, idle: Mutex::new(Vec::new()), permits: Permits::new(size) }
    }

    /// Reads waiting for a connection now: above zero, the pool's size caps
    /// the reads in flight.
    pub fn waiting(&self) -> usize {
        self.permits.waiting()
    }

    /// Opens a connection (its connection half spawned on the calling
    /// runtime) and prepares the read on it, within the connect timeout.
    async fn open(&self) -> Result<Connection, PgError> {
        let started = tokio::time::Instant::now();
        let client = connect(&self.config, self.connect_timeout).await?;
        let left = self.connect_timeout.saturating_sub(started.elapsed());
        let read = tokio::time::timeout(left, client.prepare_typed(self.read_sql, &[Type::INT8]))
            .await
            .map_err(|_| PgError::TimedOut(self.connect_timeout))??;
        Ok(Connection { client, read })
    }

    /// Waits for a permit (FIFO), then lends the most recently returned live
    /// connection, or opens one.
    pub async fn checkout(&self) -> Result<Checkout<'_>, PgError> {
        let permit = self.permits.acquire().await;
        let idle = loop {
            match self.idle.lock().expect("no panic while held").pop() {
                Some(connection) if connection.client.is_closed() => continue,
                other => break other,
            }
        };
        let (connection, reused) = match idle {
            Some(connection) => (connection, true),
            None => (self.open().await?, false),
        };
        Ok(Checkout { pool: self, connection: Some(connection), reused, _permit: permit })
    }

    /// Closes every idle connection: after one was found dead in use, the
    /// others most likely died with the same server.
    pub fn forget_idle(&self) {
        self.idle.lock().expect("no panic while held").clear();
    }
}

impl std::ops::Deref for Checkout<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.connection.as_ref().expect("present until drop")
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        // Back before the permit is released (fields drop after this), so the
        // next waiter finds it.
        if let Some(connection) = self.connection.take().filter(|c| !c.client.is_closed()) {
            self.pool.idle.lock().expect("no panic while held").push(connection);
        }
    }
}
