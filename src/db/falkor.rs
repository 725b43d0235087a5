//! FalkorDB, a graph database server, through the `falkordb` crate: the
//! blocking read goes through its **synchronous** client (a pool of blocking
//! redis connections: the calling thread waits in `recv` for the answer), the
//! non-blocking read through its **async** client (multiplexed tokio
//! connections: the task yields while it waits).
//!
//! Both clients are opened lazily and reopened after a failure, so the server
//! starts while the database is down, answers 503 quickly while it stays
//! down (a connection attempt at most every [`RETRY_EVERY`], the others fail
//! at once), and recovers by itself when it returns.

use std::future::Future;
use std::num::{NonZeroU8, NonZeroUsize};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use falkordb::{
    FalkorAsyncClient, FalkorClientBuilder, FalkorConnectionInfo, FalkorDBError, FalkorSyncClient,
    FalkorValue,
};

use super::backend::{
    CONTENT_QUERY, Content, DbSettings, GraphBackend, GraphError, ReadFuture, SEED_QUERY, SeedReport,
};
use super::credentials::with_credentials;

/// How often a client that failed to open is tried again.
pub const RETRY_EVERY: Duration = Duration::from_millis(200);

/// Where the FalkorDB server is.
#[derive(Clone, PartialEq, Eq)]
pub struct FalkorTarget {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// The graph (FalkorDB holds several by name).
    pub graph: String,
    /// `user:password`, if the server wants them. Never printed.
    pub credentials: Option<(String, String)>,
}

impl std::fmt::Debug for FalkorTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for FalkorTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "falkor://{}:{}/{}", self.host, self.port, self.graph)
    }
}

impl FalkorTarget {
    /// The connection URL the crate takes, credentials included.
    /// The redis crate percent-decodes the user and password it finds there.
    fn connection_url(&self) -> String {
        with_credentials(&format!("redis://{}:{}", self.host, self.port), self.credentials.as_ref())
    }
}

/// A client opened on first use and reopened after failures.
///
/// Opening a client is more than one round trip: the crate detects the
/// server's topology and opens every connection of its pool, each bounded by
/// the connect timeout, so on a link that accepts connections but does not
/// answer an open takes several connect timeouts. A read must not wait for
/// all of them (its bound is the database timeout), so an open runs apart
/// from the reads that need it — on a thread of its own for the blocking
/// client, in a task of its own for the async one — stores its client when
/// it ends, and each read waits for it at most until its own deadline. One
/// open at a time; after a failed one the next is allowed only
/// [`RETRY_EVERY`] later and the reads in between fail at once — quick 503s
/// while the database is down, one probe per interval.
struct Lazy<C> {
    slot: Mutex<Slot<C>>,
    /// Wakes the blocking reads waiting for an open to end.
    opened: Condvar,
    /// Wakes the async reads waiting for an open to end.
    opened_async: tokio::sync::Notify,
}

struct Slot<C> {
    client: Option<Arc<C>>,
    /// When the last open failed, and why.
    failed: Option<(Instant, GraphError)>,
    /// Whether an open is under way.
    opening: bool,
}

/// What a read does next about its client.
enum Next<C> {
    /// Use this one.
    Ready(Arc<C>),
    /// Start an open: this read is the one that opens.
    Open,
    /// Wait for the open under way.
    Wait,
    /// Fail at once: the last open failed moments ago.
    Fail(GraphError),
}

/// An open of the async client, run in a task of its own.
type Opening<C> = Pin<Box<dyn Future<Output = Result<C, GraphError>> + Send>>;

impl<C> Lazy<C> {
    fn new() -> Self {
        Lazy {
            slot: Mutex::new(Slot { client: None, failed: None, opening: false }),
            opened: Condvar::new(),
            opened_async: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot<C>> {
        self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Decides, under the lock, what a read does next.
    fn next(&self) -> Next<C> {
        let mut slot = self.lock();
        if let Some(client) = &slot.client {
            return Next::Ready(client.clone());
        }
        if slot.opening {
            return Next::Wait;
        }
        if let Some((at, e)) = &slot.failed
            && at.elapsed() < RETRY_EVERY
        {
            return Next::Fail(e.clone());
        }
        slot.opening = true;
        Next::Open
    }

    /// Records the outcome of an open and wakes every read waiting for it.
    fn finish(&self, outcome: Result<C, GraphError>) {
        let mut slot = self.lock();
        match outcome {
            Ok(client) => {
                slot.client = Some(Arc::new(client));
                slot.failed = None;
            }
            Err(e) => slot.failed = Some((Instant::now(), e)),
        }
        slot.opening = false;
        drop(slot);
        self.opened.notify_all();
        self.opened_async.notify_waiters();
    }

    /// Forgets the client after a connection failure, so the next use reopens it.
    fn reset(&self, failed: &Arc<C>) {
        let mut slot = self.lock();
        if slot.client.as_ref().is_some_and(|c| Arc::ptr_eq(c, failed)) {
            slot.client = None;
        }
    }
}

impl<C: Send + Sync + 'static> Lazy<C> {
    /// The client, opened by `open` on a thread of its own if there is none.
    /// The calling thread waits for it, blocked (this is the blocking path),
    /// until `deadline` at most; then `late()` is the error.
    fn get_blocking(
        self: &Arc<Self>,
        deadline: Instant,
        open: impl Fn() -> Result<C, GraphError> + Clone + Send + 'static,
        late: impl Fn() -> GraphError,
    ) -> Result<Arc<C>, GraphError> {
        loop {
            match self.next() {
                Next::Ready(client) => return Ok(client),
                Next::Fail(e) => return Err(e),
                Next::Open => {
                    let (lazy, open) = (self.clone(), open.clone());
                    let spawned = std::thread::Builder::new()
                        .name("falkor-connect".into())
                        .spawn(move || lazy.finish(open()));
                    if let Err(e) = spawned {
                        self.finish(Err(GraphError::Unavailable(format!(
                            "cannot start a thread to connect: {e}"
                        ))));
                    }
                }
                Next::Wait => {}
            }
            let slot = self.lock();
            if slot.opening {
                let left = deadline.checked_duration_since(Instant::now()).ok_or_else(&late)?;
                drop(self.opened.wait_timeout(slot, left).unwrap_or_else(std::sync::PoisonError::into_inner));
            }
        }
    }

    /// The client, opened by `open()` in a task of its own if there is none:
    /// the open goes on when this read is dropped (its timeout fired) and
    /// stores the client for the reads after it. The caller bounds the wait.
    async fn get(self: &Arc<Self>, open: impl Fn() -> Opening<C>) -> Result<Arc<C>, GraphError> {
        loop {
            // Registered before the state is read, so that an open ending
            // in between still wakes this read.
            let ended = self.opened_async.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            match self.next() {
                Next::Ready(client) => return Ok(client),
                Next::Fail(e) => return Err(e),
                Next::Open => {
                    let (lazy, opening) = (self.clone(), open());
                    tokio::spawn(async move { lazy.finish(opening.await) });
                }
                Next::Wait => {}
            }
            ended.await;
        }
    }
}

/// An open client and a graph handle whose schema cache is warm.
///
/// FalkorDB answers in compact form (label and property *ids*); a graph
/// handle resolves them through a schema it fetches on first use. A fresh
/// handle per read would cost extra round trips every time, so each read
/// clones this template (the schema is shared behind `Arc`s) and the first
/// successful read stores its warmed handle back.
struct Open<C, G> {
    /// Kept for as long as its graph handles are used.
    _client: C,
    template: Mutex<G>,
    warm: std::sync::atomic::AtomicBool,
}

impl<C, G: Clone> Open<C, G> {
    fn new(client: C, graph: impl FnOnce(&C) -> G) -> Self {
        let template = Mutex::new(graph(&client));
        Open { _client: client, template, warm: std::sync::atomic::AtomicBool::new(false) }
    }

    fn graph(&self) -> G {
        self.template.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn used(&self, graph: &G) {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.warm.load(Relaxed) {
            *self.template.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = graph.clone();
            self.warm.store(true, Relaxed);
        }
    }
}

type SyncOpen = Open<FalkorSyncClient, falkordb::SyncGraph>;
type AsyncOpen = Open<FalkorAsyncClient, falkordb::AsyncGraph>;

/// The FalkorDB backend.
pub struct FalkorGraph {
    target: FalkorTarget,
    settings: DbSettings,
    sync: Arc<Lazy<SyncOpen>>,
    async_: Arc<Lazy<AsyncOpen>>,
}

impl FalkorGraph {
    /// A backend for `target`; nothing is connected until the first read.
    pub fn new(target: FalkorTarget, settings: DbSettings) -> FalkorGraph {
        FalkorGraph { target, settings, sync: Arc::new(Lazy::new()), async_: Arc::new(Lazy::new()) }
    }

    /// The error of a read whose time ran out before it had an answer.
    fn no_answer(&self) -> GraphError {
        GraphError::Unavailable(format!(
            "{}: no answer within {}",
            self.target,
            humantime::format_duration(self.settings.timeout)
        ))
    }

    /// The blocking client, waited for at most until `deadline`.
    ///
    /// On a link that stops answering, one call of the synchronous client
    /// makes several waits in turn, each bounded on its own: it may open a
    /// connection for an empty slot of its pool (a connect and a PING, each
    /// within the connect timeout), wait for the answer (the response
    /// timeout), then open the replacement of the connection that timed out
    /// (two connect timeouts again), all inside the one call. So that the
    /// whole read stays within about its timeout `T` (measured in
    /// tests/toxiproxy.rs), the socket waits `T/4` for an answer, each step
    /// of an open `T/8`, and a read waits `T/4` for a client being opened.
    /// The async client needs no such split: one timer bounds its whole read.
    fn sync_client(&self, deadline: Instant) -> Result<Arc<SyncOpen>, GraphError> {
        let target = self.target.clone();
        let settings = DbSettings {
            timeout: self.settings.timeout / 4,
            connect_timeout: self.settings.connect_timeout.min(self.settings.timeout / 8),
            ..self.settings
        };
        let open = move || {
            let opened = builder(&target, &settings, FalkorClientBuilder::new(), settings.pool)
                .and_then(|b| b.build().map_err(|e| unavailable(&target, &e)))
                .map(|client| Open::new(client, |c: &FalkorSyncClient| c.select_graph(&target.graph)));
            match &opened {
                Ok(_) => tracing::info!(db = %target, "connected (blocking client)"),
                Err(e) => tracing::warn!(error = %e, "cannot connect (blocking client)"),
            }
            opened
        };
        self.sync.get_blocking(deadline, open, || self.no_answer())
    }

    /// The async client (its caller bounds the wait).
    async fn async_client(&self) -> Result<Arc<AsyncOpen>, GraphError> {
        let (target, settings) = (self.target.clone(), self.settings);
        let open = move || -> Opening<AsyncOpen> {
            let (target, settings) = (target.clone(), settings);
            Box::pin(async move {
                let connections = settings.async_connections;
                let builder = builder(&target, &settings, FalkorClientBuilder::new_async(), connections)?;
                let builder = match NonZeroUsize::new(connections * 64) {
                    Some(inflight) => builder.with_max_inflight(inflight),
                    None => builder,
                };
                let opened =
                    builder.build().await.map_err(|e| unavailable(&target, &e)).map(|client| {
                        Open::new(client, |c: &FalkorAsyncClient| c.select_graph(&target.graph))
                    });
                match &opened {
                    Ok(_) => tracing::info!(db = %target, "connected (async client)"),
                    Err(e) => tracing::warn!(error = %e, "cannot connect (async client)"),
                }
                opened
            })
        };
        self.async_.get(open).await
    }

    /// Runs a write query through the blocking client (seeding).
    fn write(&self, query: &str, params: &[(&str, i64)]) -> Result<(), GraphError> {
        let client = self.sync_client(Instant::now() + self.settings.timeout)?;
        let mut graph = client.graph();
        let mut builder = graph.query(query);
        for (k, v) in params {
            builder = builder.with_param(k, *v);
        }
        builder.execute().map(|_| ()).map_err(|e| self.failed(&self.sync, &client, e))
    }

    /// Classifies `e`, and forgets the client if the connection is the problem.
    fn failed<C>(&self, lazy: &Lazy<C>, client: &Arc<C>, e: FalkorDBError) -> GraphError {
        let error = classify(&self.target, &e);
        if matches!(error, GraphError::Unavailable(_)) {
            lazy.reset(client);
        }
        error
    }
}

impl GraphBackend for FalkorGraph {
    fn describe(&self) -> String {
        format!(
            "FalkorDB at {} (blocking client: pool of {} connections; async client: {} multiplexed connections; \
             {} timeout per read)",
            self.target,
            self.settings.pool,
            self.settings.async_connections,
            humantime::format_duration(self.settings.timeout)
        )
    }

    fn read_blocking(&self, id: i64) -> Result<Content, GraphError> {
        // A quarter of the read's timeout for the client; the query after it
        // is bounded by the socket's timeouts (see `sync_client`).
        let client = self.sync_client(Instant::now() + self.settings.timeout / 4)?;
        let mut graph = client.graph();
        // The synchronous client: this thread waits on the socket for the reply.
        let result = graph.ro_query(CONTENT_QUERY).with_param("id", id).execute();
        let mut result = result.map_err(|e| self.failed(&self.sync, &client, e))?;
        let row =
            result.data.next().ok_or(GraphError::NotFound(id))?.map_err(|e| classify(&self.target, &e))?;
        let content = content_from_values(id, row.into_values());
        drop(result);
        client.used(&graph);
        content
    }

    fn read(&self, id: i64) -> ReadFuture<'_> {
        // The whole read within the timeout, the wait for a client
        // included: on a link that stops answering, the crate's response
        // timeout alone did not bound it (tests/toxiproxy.rs).
        let read = async move {
            let client = self.async_client().await?;
            let mut graph = client.graph();
            // The async client: the task yields until the reply arrives.
            let result = graph.ro_query(CONTENT_QUERY).with_param("id", id).execute().await;
            let result = result.map_err(|e| self.failed(&self.async_, &client, e))?;
            let row = result.data.into_values_lossy().next().ok_or(GraphError::NotFound(id))?;
            client.used(&graph);
            content_from_values(id, row)
        };
        Box::pin(async move {
            tokio::time::timeout(self.settings.timeout, read).await.map_err(|_| self.no_answer())?
        })
    }

    fn count(&self) -> Result<u64, GraphError> {
        let client = self.sync_client(Instant::now() + self.settings.timeout)?;
        let mut graph = client.graph();
        let mut result = match graph.ro_query("MATCH (n:Content) RETURN count(n)").execute() {
            Ok(result) => result,
            // A graph that does not exist yet is an empty dataset, not an outage.
            Err(e) if e.to_string().contains("Invalid graph operation on empty key") => return Ok(0),
            Err(e) => return Err(self.failed(&self.sync, &client, e)),
        };
        match result.data.next().map(|r| r.map(|r| r.into_values())) {
            Some(Ok(values)) => match values.first() {
                Some(FalkorValue::I64(n)) => Ok((*n).max(0) as u64),
                other => Err(GraphError::Malformed(format!("count: {other:?}"))),
            },
            Some(Err(e)) => Err(classify(&self.target, &e)),
            None => Ok(0),
        }
    }

    fn seed(&self, nodes: u64, progress: &dyn Fn(u64)) -> Result<SeedReport, GraphError> {
        let started = Instant::now();
        // The index first, so that every MERGE below finds its node by id.
        match self.write("CREATE INDEX FOR (n:Content) ON (n.id)", &[]) {
            Ok(()) | Err(GraphError::Query(_)) => {} // "already indexed" is fine
            Err(e) => return Err(e),
        }
        let before = self.count()?;
        let batch = 5_000u64;
        let mut from = 1u64;
        while from <= nodes {
            let to = (from + batch - 1).min(nodes);
            self.write(SEED_QUERY, &[("from", from as i64), ("to", to as i64)])?;
            progress(to);
            from = to + 1;
        }
        self.write("MATCH (n:Content) WHERE n.id > $n OR n.id < 1 DELETE n", &[("n", nodes as i64)])?;
        let after = self.count()?;
        Ok(SeedReport { before, after, took: started.elapsed() })
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("db_pool", self.settings.pool.to_string()),
            ("db_async_connections", self.settings.async_connections.to_string()),
            ("db_timeout_seconds", self.settings.timeout.as_secs_f64().to_string()),
        ]
    }
}

/// The crate's builder for `target`: `connections` connections, each
/// opened within the connect timeout, each answer awaited for the read
/// timeout at most.
fn builder<const R: char>(
    target: &FalkorTarget,
    settings: &DbSettings,
    builder: FalkorClientBuilder<R>,
    connections: usize,
) -> Result<FalkorClientBuilder<R>, GraphError> {
    let info = FalkorConnectionInfo::try_from(target.connection_url().as_str())
        .map_err(|_| GraphError::Unavailable(format!("invalid address {target}")))?;
    let connections = NonZeroU8::new(connections.clamp(1, 255) as u8).expect("clamped to 1..=255");
    Ok(builder
        .with_connection_info(info)
        .with_num_connections(connections)
        .with_connect_timeout(Some(settings.connect_timeout))
        .with_response_timeout(Some(settings.timeout)))
}

/// A failure to reach the server, without the crate's long advice text.
fn unavailable(target: &FalkorTarget, e: &FalkorDBError) -> GraphError {
    let reason = match e {
        FalkorDBError::ConnectionDown | FalkorDBError::NoConnection => {
            "connection refused or lost".to_string()
        }
        other => first_sentence(&other.to_string()),
    };
    GraphError::Unavailable(format!("{target}: {reason}"))
}

/// Connection problems are `Unavailable` (503); anything else is a query failure.
fn classify(target: &FalkorTarget, e: &FalkorDBError) -> GraphError {
    let text = e.to_string();
    let connection = matches!(
        e,
        FalkorDBError::ConnectionDown | FalkorDBError::NoConnection | FalkorDBError::EmptyConnection
    ) || text.contains("onnection")
        || text.contains("imed out")
        || text.contains("broken pipe")
        || text.contains("refused");
    if connection { unavailable(target, e) } else { GraphError::Query(first_sentence(&text)) }
}

fn first_sentence(text: &str) -> String {
    let line = text.lines().next().unwrap_or(text);
    line.chars().take(200).collect()
}

/// Turns a `RETURN n` row into Content.
fn content_from_values(id: i64, values: Vec<FalkorValue>) -> Result<Content, GraphError> {
    let Some(FalkorValue::Node(node)) = values.into_iter().next() else {
        return Err(GraphError::Malformed(format!("no node for id {id}")));
    };
    let got = match node.properties.get("id") {
        Some(FalkorValue::I64(id)) => Ok(*id),
        other => Err(format!("{other:?}")),
    };
    let content = Content::from_properties(got, |key| match node.properties.get(key) {
        Some(FalkorValue::String(s)) => Ok(s.clone()),
        other => Err(format!("{other:?}")),
    })?;
    // Another node than the one asked for would be a wrong answer: an error instead.
    if content.id != id {
        return Err(GraphError::Malformed(format!(
            "asked for node {id}, the client returned node {}",
            content.id
        )));
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::DbUrl;

    /// Every reserved character a password may hold reaches the redis client
    /// as it was typed, however it was percent-encoded in `--db`.
    #[test]
    fn the_driver_gets_the_password_as_typed() {
        for (encoded, password) in [
            ("p%40ss", "p@ss"),
            ("p%3Ass", "p:ss"),
            ("p%2Fss", "p/ss"),
            ("p%23ss", "p#ss"),
            ("p%25ss", "p%ss"),
            ("p%2541", "p%41"),
            ("p%20ss", "p ss"),
            ("a%40%3A%2F%23%25%20%3F%2Bz", "a@:/#% ?+z"),
        ] {
            let DbUrl::Falkor(target) =
                format!("falkor://user%40x:{encoded}@127.0.0.1:6390/g").parse::<DbUrl>().unwrap()
            else {
                panic!()
            };
            assert_eq!(target.credentials, Some(("user@x".to_string(), password.to_string())));
            let FalkorConnectionInfo::Redis(info) =
                FalkorConnectionInfo::try_from(target.connection_url().as_str()).unwrap();
            assert_eq!(info.redis_settings().password(), Some(password), "{encoded}");
            assert_eq!(info.redis_settings().username(), Some("user@x"), "{encoded}");
            assert_eq!(info.addr().to_string(), "127.0.0.1:6390");
        }
        let DbUrl::Falkor(target) = "falkor://:only%23pw@db".parse::<DbUrl>().unwrap() else { panic!() };
        let FalkorConnectionInfo::Redis(info) =
            FalkorConnectionInfo::try_from(target.connection_url().as_str()).unwrap();
        assert_eq!(
            (info.redis_settings().username(), info.redis_settings().password()),
            (None, Some("only#pw"))
        );
    }
}
