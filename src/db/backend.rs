//! What every backend shares: the `Content` record, the one query, the
//! client settings, the errors, and the [`GraphBackend`] trait (a blocking
//! and a non-blocking read). Below the backends and `graph/mod.rs`, which
//! all use it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::Serialize;

/// The read every backend answers, with `$id` as a parameter (never formatted
/// into the text): the same text goes to Grafeo, FalkorDB and Neo4j.
pub const CONTENT_QUERY: &str = "MATCH (n:Content {id: $id}) RETURN n";

/// The label of every node of the dataset.
pub const CONTENT_LABEL: &str = "Content";

/// Creates or updates nodes `$from..=$to`, computing each property from the
/// id inside the database (same shape as [`content_record`]), so that seeding
/// sends two numbers per batch instead of the data. MERGE makes it idempotent.
pub const SEED_QUERY: &str = "UNWIND range($from, $to) AS i \
     MERGE (n:Content {id: i}) \
     SET n.name = 'resource' + toString(i), n.code = 'test.lp.content.' + toString(i), \
     n.mimeType = 'application/pdf', n.contentType = 'Resource', n.body = 'body string'";

/// Connections of the async client unless told otherwise. Neo4j's pool
/// opens them on demand, so this is a ceiling on reads in flight, not a
/// count kept open. Chosen by Little's law (reads in flight = reads per
/// second × time per read) and by measurement: with the seed's 200 client
/// connections on a warm Neo4j over loopback, 4 ran `/getDataAsync` at 0.85
/// × the Play peer's rate (its driver pools up to 100) and 64 at 1.22 ×
/// (2026-12-06, `ab -k -c 200`); through a database stalled by +50 ms at
/// 1,452 reads/s, 64 left 136 reads waiting and recovered in 3 s where 128
/// left none and recovered in 1 s (2026-12-07, `blocklab bench
/// --db-stall`). 128 hold 2,500 reads/s through such a stall.
pub const DEFAULT_ASYNC_CONNECTIONS: usize = 128;

/// How a networked backend talks to its server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DbSettings {
    /// Connections of the blocking client's pool: at most this many blocking reads at once.
    pub pool: usize,
    /// Connections of the async client (multiplexed for FalkorDB, pooled for Neo4j).
    pub async_connections: usize,
    /// Limit for one read, from sending to the whole answer.
    pub timeout: Duration,
    /// Limit for opening a connection.
    pub connect_timeout: Duration,
}

impl Default for DbSettings {
    fn default() -> Self {
        DbSettings {
            pool: 16,
            async_connections: DEFAULT_ASYNC_CONNECTIONS,
            timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_millis(500),
        }
    }
}

impl DbSettings {
    /// How a pooled client's two paths are set up, for its `describe()`.
    pub fn describe_paths(&self) -> String {
        format!(
            "blocking path: pool of {} on the client's own runtime; async path: pool of {}; {} timeout per read",
            self.pool,
            self.async_connections,
            humantime::format_duration(self.timeout)
        )
    }

    /// The settings worth reporting, as metric labels (`GraphBackend::settings`).
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        vec![
            ("db_pool", self.pool.to_string()),
            ("db_async_connections", self.async_connections.to_string()),
            ("db_timeout_seconds", self.timeout.as_secs_f64().to_string()),
        ]
    }
}

/// What `blocklab seed` did.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedReport {
    /// Content nodes before.
    pub before: u64,
    /// Content nodes after.
    pub after: u64,
    /// How long it took.
    pub took: Duration,
}

/// One `Content` node: the seed's record, with the six properties it returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Content {
    /// Key of the node, 1..=N.
    pub id: i64,
    /// `resource{id}`.
    pub name: String,
    /// `test.lp.content.{id}`.
    pub code: String,
    /// Always `application/pdf`, as in the seed.
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// Always `Resource`, as in the seed.
    #[serde(rename = "contentType")]
    pub content_type: String,
    /// Always `body string`, as in the seed.
    pub body: String,
}

impl Content {
    /// Builds a node from a driver's property lookups: `id` the integer
    /// property, `text` each string property by name. Every backend maps its
    /// own value type through this, so a missing or mistyped property is
    /// reported the same way whatever the database.
    pub fn from_properties(
        id: Result<i64, String>,
        text: impl Fn(&str) -> Result<String, String>,
    ) -> Result<Content, GraphError> {
        let text =
            |key: &str| text(key).map_err(|got| GraphError::Malformed(format!("property {key}: {got}")));
        Ok(Content {
            id: id.map_err(|got| GraphError::Malformed(format!("property id: {got}")))?,
            name: text("name")?,
            code: text("code")?,
            mime_type: text("mimeType")?,
            content_type: text("contentType")?,
            body: text("body")?,
        })
    }
}

/// Why a read failed. Each kind is counted in `/metrics` and mapped to an
/// HTTP status by the server (`NotFound` 404, `Unavailable` and `Refused`
/// 503, else 500).
#[derive(Debug, Clone, thiserror::Error)]
pub enum GraphError {
    /// The query ran and matched no node with that id.
    #[error("no Content node with id {0}")]
    NotFound(i64),
    /// The database could not be reached or refused the query.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The database answered, and refuses this client whatever it does next:
    /// wrong credentials, a database that does not exist, a server that does
    /// not speak the client's protocol. A configuration error, not an outage:
    /// `serve` and `seed` stop at it (exit 2) where they would wait out an outage.
    #[error("{0}")]
    Refused(String),
    /// The query failed inside the database.
    #[error("query failed: {0}")]
    Query(String),
    /// The database answered with something that is not a Content node.
    #[error("malformed node: {0}")]
    Malformed(String),
}

impl GraphError {
    /// Every value [`GraphError::kind`] returns, in metrics order.
    pub const KINDS: [&'static str; 5] = ["not_found", "unavailable", "refused", "query", "malformed"];

    /// A short, stable name for the kind, used as a metrics label.
    pub fn kind(&self) -> &'static str {
        match self {
            GraphError::NotFound(_) => "not_found",
            GraphError::Unavailable(_) => "unavailable",
            GraphError::Refused(_) => "refused",
            GraphError::Query(_) => "query",
            GraphError::Malformed(_) => "malformed",
        }
    }
}

/// The future a non-blocking read returns: boxed, so that backends can be
/// chosen at run time (`Arc<dyn GraphBackend>`).
pub type ReadFuture<'a> = Pin<Box<dyn Future<Output = Result<Content, GraphError>> + Send + 'a>>;

/// A graph database that can read a `Content` node in two ways.
///
/// `read_blocking` holds the calling thread until the answer is there (a
/// synchronous driver session); `read` returns a future that yields the
/// thread while it waits (an async driver session). Implementations must be
/// cheap to share between threads: the server holds one behind an `Arc`.
pub trait GraphBackend: Send + Sync + 'static {
    /// One line naming the database and its settings, for logs and reports.
    /// Never contains credentials.
    fn describe(&self) -> String;

    /// Reads node `id`, blocking the calling thread for the whole round trip.
    fn read_blocking(&self, id: i64) -> Result<Content, GraphError>;

    /// Reads node `id` without blocking: the returned future waits by yielding.
    fn read(&self, id: i64) -> ReadFuture<'_>;

    /// How many Content nodes the database holds (blocking; used at start and by `seed`).
    fn count(&self) -> Result<u64, GraphError>;

    /// Loads nodes 1..=`nodes` and the index on `id`, idempotently (blocking).
    /// `progress` is called with the highest id written so far.
    fn seed(&self, nodes: u64, progress: &dyn Fn(u64)) -> Result<SeedReport, GraphError> {
        let _ = (nodes, progress);
        Err(GraphError::Query("this database is loaded at start and cannot be seeded".to_string()))
    }

    /// Client settings worth reporting (pool sizes, timeouts), as metric labels.
    fn settings(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Reads waiting for a pooled connection now, by client (`async`,
    /// `blocking`); empty where the client has no pool to wait for.
    fn pool_waiting(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
}
