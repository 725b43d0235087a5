//! PostgreSQL, the database most services run, through `tokio-postgres`
//! (no TLS: a database on the machine or its network, as the study's
//! others). The seed's Content node is a row of the table
//! `content(id bigint primary key, name, code, mime_type, content_type,
//! body)`, read by one prepared statement, [`CONTENT_SQL`].
//!
//! **Non-blocking** (`--db-async-connections N`): the read awaits a pool of
//! N connections on the calling runtime (`pg_pool.rs`). Each connection's
//! other half — the task that writes its queries and reads its answers — runs
//! on the runtime that opened it. **Blocking** (`--db-pool N`): built as the
//! Neo4j client's is (`client_runtime.rs`): the query runs on the client's
//! own runtime over a pool of its own, and the calling thread parks on a std
//! channel until the answer comes. The `postgres` crate, the synchronous one,
//! is not used: it calls `block_on` on a runtime of its own, which on a Tokio
//! worker — where `/getData` makes its read — panics ("Cannot start a runtime
//! from within a runtime").
//!
//! **Why blocklab's own pool and not deadpool-postgres.** Both were measured
//! here (2026-12-07, PostgreSQL 15.18 and the load on CPU 1, `blocklab
//! serve` on CPU 0, `blocklab load -k -c 128 -z 10s` on /getDataAsync after
//! 2 s of warm-up, 128 connections, loopback, 7 pairs alternated, on a
//! machine other jobs kept at a load average of 10-25): this pool 4,369-6,822
//! req/s (median 5,467), deadpool-postgres 0.14.2 (`RecyclingMethod::Fast`,
//! `prepare_typed_cached`) 4,272-6,981 (median 6,037); server CPU per request
//! 42.6-50.6 µs (median 45.8) against 40.8-48.5 (median 45.9); each won 3 or 4
//! of the 7 pairs. No difference shows: the ranges overlap end to end. Both
//! send nothing on checkout. This pool is kept because it is the Neo4j
//! client's pool (`bolt/pool.rs`) in behaviour — FIFO waiting, reads waiting
//! counted for `/metrics`, a dead idle connection replaced within the read —
//! so the two databases differ in their protocol only, and because it
//! prepares the one read at connect instead of looking it up in a per-client
//! statement cache on every read; deadpool and its runtime crate are not
//! needed.
//!
//! Every read is bounded by `--db-timeout`, every connect (TCP, startup,
//! login, the `Parse` of the read) by the connect timeout; a read dropped
//! mid-query leaves its answer to `tokio-postgres`, which throws it away in
//! order, and every row is checked against the id asked for. A connection
//! found closed (the database was killed or restarted) is replaced on the
//! next checkout, so a restarted PostgreSQL is used again without restarting
//! blocklab. Each connection names its client in `application_name`
//! (`blocklab-async`, `blocklab-blocking`, `blocklab-seed`), for
//! `pg_stat_activity`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::Config;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

use super::backend::{Content, DbSettings, GraphBackend, GraphError, ReadFuture, SeedReport};
use super::client_runtime::ClientRuntime;
use super::dataset::content_record;
use super::pg_pool::{PgError, Pool, connect};

/// The read: one row by its key, as a prepared statement (`$1` a `bigint`).
pub const CONTENT_SQL: &str =
    "SELECT id, name, code, mime_type, content_type, body FROM content WHERE id = $1";

/// The longest a connect may take, whatever `--db-timeout` (for `seed`: a minute).
const CONNECT_LIMIT: Duration = Duration::from_secs(5);

/// The table the dataset lives in, its columns in [`CONTENT_SQL`]'s order.
const CREATE_TABLE: &str = "CREATE TABLE content (id bigint, name text, code text, mime_type text, \
     content_type text, body text)";

/// Where the PostgreSQL server is.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresTarget {
    /// `postgres` or `postgresql`.
    pub scheme: String,
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// The database; the user's name when the URL names none (as libpq does).
    pub database: Option<String>,
    /// User and password from the URL; `PGUSER` (else `postgres`) and
    /// `PGPASSWORD` otherwise. Never printed.
    pub credentials: Option<(String, String)>,
}

impl std::fmt::Debug for PostgresTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for PostgresTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)?;
        match &self.database {
            Some(database) => write!(f, "/{database}"),
            None => Ok(()),
        }
    }
}

/// The PostgreSQL backend.
pub struct PostgresGraph {
    target: PostgresTarget,
    settings: DbSettings,
    /// The connection settings, without the client's name.
    config: Config,
    /// The longest a connect may take (TCP, startup, login).
    connect_limit: Duration,
    /// For the async path: awaited by the HTTP runtime's tasks (and the actors').
    pool: Pool,
    /// For the blocking path: connections living on the client runtime.
    blocking_pool: Arc<Pool>,
    client_runtime: ClientRuntime,
}

/// The connection settings of `target`: host, port, database, and its
/// credentials (the URL's, else `PGUSER`, else `postgres`, and `PGPASSWORD`).
pub(super) fn base_config(target: &PostgresTarget, connect_timeout: Duration) -> Config {
    let (user, password) = match target.credentials.clone() {
        Some((user, password)) => (user, Some(password).filter(|p| !p.is_empty())),
        None => (
            std::env::var("PGUSER").unwrap_or_else(|_| "postgres".to_string()),
            std::env::var("PGPASSWORD").ok(),
        ),
    };
    let mut config = Config::new();
    config
        .host(target.host.trim_start_matches('[').trim_end_matches(']'))
        .port(target.port)
        .dbname(target.database.clone().unwrap_or_else(|| user.clone()))
        .user(user)
        .connect_timeout(connect_timeout);
    if let Some(password) = password {
        config.password(password);
    }
    config
}

impl PostgresGraph {
    /// A backend for `target`. Connections open on first use, so a server
    /// can start while its database is down.
    pub fn new(target: PostgresTarget, settings: DbSettings) -> Result<PostgresGraph, GraphError> {
        let config = base_config(&target, settings.connect_timeout);
        let named = |name: &str| {
            let mut config = config.clone();
            config.application_name(name);
            config
        };
        // A PostgreSQL connection is a new backend process (fork, catalog caches, login): 128 opened
        // at once by a cold pool took more than the 500 ms that --db-timeout's connect limit gives
        // Neo4j, with PostgreSQL on one loaded CPU, so here a connect has up to the read's own limit
        // (at most CONNECT_LIMIT).
        let connect_limit = settings.timeout.min(CONNECT_LIMIT).max(settings.connect_timeout);
        let pool = |name, size| Pool::new(named(name), CONTENT_SQL, connect_limit, size);
        Ok(PostgresGraph {
            pool: pool("blocklab-async", settings.async_connections),
            blocking_pool: Arc::new(pool("blocklab-blocking", settings.pool)),
            client_runtime: ClientRuntime::start("postgres-client")?,
            config,
            connect_limit,
            target,
            settings,
        })
    }

    /// How many rows `content` holds (0 when there is no such table), by the
    /// blocking pool.
    fn count_rows(&self) -> Result<u64, GraphError> {
        let (pool, target, limit) = (self.blocking_pool.clone(), self.target.clone(), self.settings.timeout);
        self.client_runtime.wait_for(
            async move {
                let work = async {
                    let connection = pool.checkout().await?;
                    Ok::<_, PgError>(connection.client.query_one("SELECT count(*) FROM content", &[]).await?)
                };
                match tokio::time::timeout(limit, work).await {
                    Err(_) => Err(no_answer(&target, limit)),
                    Ok(Err(PgError::Postgres(e))) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(0),
                    Ok(Err(e)) => Err(classify(&target, e)),
                    Ok(Ok(row)) => {
                        let n: i64 =
                            row.try_get(0).map_err(|e| GraphError::Malformed(format!("count(*): {e}")))?;
                        Ok(n.max(0) as u64)
                    }
                }
            },
            limit,
            || no_answer(&self.target, limit),
        )
    }

    /// Whether the server at the target answers as PostgreSQL does, asked
    /// after a failure: `Some(why not)` when it plainly is something else.
    fn not_postgres(&self) -> Option<String> {
        let host = self.target.host.trim_start_matches('[').trim_end_matches(']').to_string();
        let (port, limit) = (self.target.port, self.settings.connect_timeout);
        let probe = async move { Ok(tokio::time::timeout(limit, probe(host, port)).await.ok().flatten()) };
        let wait = limit + Duration::from_millis(100);
        self.client_runtime.wait_for(probe, wait, || no_answer(&self.target, wait)).ok().flatten()
    }
}

/// The first message of a PostgreSQL client that asks for TLS (SSLRequest:
/// its length, 8, and the code 80877103). A PostgreSQL server answers it
/// with one byte, `S` or `N`, whatever its settings; anything else, or a
/// connection closed without a byte, is another kind of server.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xD2, 0x16, 0x2F];

/// Sends [`SSL_REQUEST`] to `host:port` and says what answered, if it is
/// plainly not PostgreSQL. `None` too when nothing answers or nothing
/// listens: an outage, not another server.
async fn probe(host: String, port: u16) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect((host.as_str(), port)).await.ok()?;
    stream.write_all(&SSL_REQUEST).await.ok()?;
    let mut answer = [0u8; 24];
    match stream.read(&mut answer).await.ok()? {
        0 => Some("it closed the connection without answering PostgreSQL's first message".to_string()),
        _ if matches!(answer[0], b'S' | b'N' | b'E') => None,
        n => Some(format!(
            "it answered PostgreSQL's first message with \"{}\"",
            String::from_utf8_lossy(&answer[..n]).escape_debug()
        )),
    }
}

fn no_answer(target: &PostgresTarget, limit: Duration) -> GraphError {
    GraphError::Unavailable(format!("{target}: no answer within {limit:?}"))
}

/// Reads row `id` through `pool`: a connection found dead on first use after
/// lying idle most likely died with its server (a restart), so the idle ones
/// go with it and the read is tried once more on a new connection.
async fn query_row(pool: &Pool, id: i64) -> Result<Option<tokio_postgres::Row>, PgError> {
    let connection = pool.checkout().await?;
    match connection.client.query_opt(&connection.read, &[&id]).await {
        Err(e) if e.is_closed() && connection.reused => {
            drop(connection);
            pool.forget_idle();
            let connection = pool.checkout().await?;
            Ok(connection.client.query_opt(&connection.read, &[&id]).await?)
        }
        answer => Ok(answer?),
    }
}

async fn read_row(
    pool: &Pool,
    target: &PostgresTarget,
    timeout: Duration,
    id: i64,
) -> Result<Content, GraphError> {
    let work = async {
        let row = query_row(pool, id).await.map_err(|e| classify(target, e))?;
        let content = content_from_row(&row.ok_or(GraphError::NotFound(id))?)?;
        // Another row than the one asked for would mean answers out of step
        // with their queries: an error, never an answer.
        if content.id != id {
            return Err(GraphError::Malformed(format!(
                "asked for row {id}, the client returned row {}",
                content.id
            )));
        }
        Ok(content)
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| no_answer(target, timeout))?
}

/// The Content of a row of [`CONTENT_SQL`].
fn content_from_row(row: &tokio_postgres::Row) -> Result<Content, GraphError> {
    let column = |key: &str| match key {
        "name" => 1,
        "code" => 2,
        "mimeType" => 3,
        "contentType" => 4,
        _ => 5,
    };
    Content::from_properties(row.try_get::<_, i64>(0).map_err(|e| e.to_string()), |key| {
        row.try_get::<_, String>(column(key)).map_err(|e| format!("{e}: {}", source_of(&e)))
    })
}

/// The causes below a `tokio-postgres` error, whose own text names only its
/// kind ("error connecting to server", "db error").
fn source_of(e: &tokio_postgres::Error) -> String {
    let mut causes = Vec::new();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        causes.push(c.to_string());
        cause = c.source();
    }
    causes.join(": ")
}

/// Maps a failure to what the server counts and answers: a server that
/// refuses this client (credentials, no such database) apart from one it
/// cannot reach or that cannot serve now (starting, shutting down, too many
/// connections), apart from a query it refused.
fn classify(target: &PostgresTarget, e: PgError) -> GraphError {
    let e = match e {
        PgError::TimedOut(limit) => {
            return GraphError::Unavailable(format!("{target}: no connection within {limit:?}"));
        }
        PgError::Postgres(e) => e,
    };
    if let Some(db) = e.as_db_error() {
        let (code, message) = (db.code().code(), db.message());
        let said = format!("{message} (SQLSTATE {code})");
        return match &code[..2] {
            // invalid_authorization_specification, invalid_password; invalid_catalog_name;
            // insufficient_privilege (a role that may not read the table).
            "28" | "3D" => GraphError::Refused(format!("{target} refuses this client: {said}")),
            _ if db.code() == &SqlState::INSUFFICIENT_PRIVILEGE => {
                GraphError::Refused(format!("{target} refuses this client: {said}"))
            }
            // connection_exception, insufficient_resources, operator_intervention, system_error.
            "08" | "53" | "57" | "58" => GraphError::Unavailable(format!("{target}: {said}")),
            _ => GraphError::Query(said),
        };
    }
    let what = format!("{e}: {}", source_of(&e));
    let what = what.trim_end_matches(": ");
    // The server asks for a password and none was given ("invalid configuration: password
    // missing"), or for a method this client does not speak ("authentication error").
    if what.starts_with("authentication error") || what.starts_with("invalid configuration") {
        return GraphError::Refused(format!("{target} refuses this client: {what}"));
    }
    GraphError::Unavailable(format!("{target}: {what}"))
}

/// What the seeding task tells the thread that waits for it.
enum Seeding {
    /// Rows up to this id are written.
    Wrote(u64),
    /// The end.
    Done(Result<(), GraphError>),
}

/// How long seeding may go without writing another batch.
const SEED_STALL: Duration = Duration::from_secs(120);

/// Rows between two progress reports.
const SEED_BATCH: u64 = 10_000;

/// Writes rows 1..=`nodes` in one transaction: the table dropped and created
/// again, every row by binary COPY (the fastest way in, and no escaping),
/// then its primary key (faster built once than kept during the load), then
/// its statistics for the planner. Readers meanwhile wait on the table's lock
/// and see the old rows or the new, never a mix.
async fn write_rows(
    client: &mut tokio_postgres::Client,
    nodes: u64,
    wrote: &std::sync::mpsc::Sender<Seeding>,
) -> Result<(), tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    // A first seeding would log "table content does not exist, skipping".
    transaction
        .batch_execute(&format!(
            "SET client_min_messages = warning; DROP TABLE IF EXISTS content; {CREATE_TABLE}"
        ))
        .await?;
    let sink = transaction
        .copy_in("COPY content (id, name, code, mime_type, content_type, body) FROM STDIN (FORMAT binary)")
        .await?;
    let writer = BinaryCopyInWriter::new(
        sink,
        &[Type::INT8, Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT],
    );
    let mut writer = std::pin::pin!(writer);
    for id in 1..=nodes {
        let c = content_record(id as i64);
        let row: [&(dyn ToSql + Sync); 6] = [&c.id, &c.name, &c.code, &c.mime_type, &c.content_type, &c.body];
        writer.as_mut().write(&row).await?;
        if id % SEED_BATCH == 0 {
            let _ = wrote.send(Seeding::Wrote(id));
        }
    }
    writer.finish().await?;
    transaction.batch_execute("ALTER TABLE content ADD PRIMARY KEY (id)").await?;
    transaction.commit().await?;
    client.batch_execute("ANALYZE content").await
}

impl GraphBackend for PostgresGraph {
    fn describe(&self) -> String {
        format!(
            "PostgreSQL at {} (tokio-postgres 0.7, blocklab's pool; {})",
            self.target,
            self.settings.describe_paths()
        )
    }

    fn read_blocking(&self, id: i64) -> Result<Content, GraphError> {
        let (pool, target, timeout) =
            (self.blocking_pool.clone(), self.target.clone(), self.settings.timeout);
        let read = async move { read_row(&pool, &target, timeout, id).await };
        self.client_runtime.wait_for(read, timeout, || no_answer(&self.target, timeout))
    }

    fn read(&self, id: i64) -> ReadFuture<'_> {
        Box::pin(read_row(&self.pool, &self.target, self.settings.timeout, id))
    }

    /// Rows in `content`. A failure to reach a server that then turns out
    /// not to be PostgreSQL at all is a refusal, not an outage.
    fn count(&self) -> Result<u64, GraphError> {
        match self.count_rows() {
            Err(GraphError::Unavailable(why)) => match self.not_postgres() {
                Some(what) => Err(GraphError::Refused(format!("{} is not PostgreSQL: {what}", self.target))),
                None => Err(GraphError::Unavailable(why)),
            },
            counted => counted,
        }
    }

    fn seed(&self, nodes: u64, progress: &dyn Fn(u64)) -> Result<SeedReport, GraphError> {
        let started = Instant::now();
        let before = self.count()?;
        let mut config = self.config.clone();
        config.application_name("blocklab-seed");
        let (target, connect_limit) = (self.target.clone(), self.connect_limit);
        let (wrote, news) = std::sync::mpsc::channel();
        self.client_runtime.spawn(async move {
            let seeded = async {
                let mut client = connect(&config, connect_limit).await.map_err(|e| classify(&target, e))?;
                write_rows(&mut client, nodes, &wrote)
                    .await
                    .map_err(|e| classify(&target, PgError::Postgres(e)))
            };
            let _ = wrote.send(Seeding::Done(seeded.await));
        });
        // The progress callback runs on this thread: the task only sends numbers.
        loop {
            match news.recv_timeout(SEED_STALL) {
                Ok(Seeding::Wrote(id)) => progress(id),
                Ok(Seeding::Done(done)) => break done?,
                Err(_) => return Err(no_answer(&self.target, SEED_STALL)),
            }
        }
        progress(nodes);
        Ok(SeedReport { before, after: self.count()?, took: started.elapsed() })
    }

    fn pool_waiting(&self) -> Vec<(&'static str, usize)> {
        vec![("async", self.pool.waiting()), ("blocking", self.blocking_pool.waiting())]
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        self.settings.labels()
    }
}
