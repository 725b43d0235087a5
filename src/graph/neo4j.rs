//! Neo4j over Bolt, through `neo4rs` (an async driver). The non-blocking read
//! is its async API, awaited. The blocking read is built the way the official
//! Java driver builds its synchronous session on its async core: the query
//! runs on the driver's **own client runtime** and the calling thread waits
//! for the answer on a channel — never `block_on` inside a runtime worker.
//!
//! neo4rs retries some failures with backoff for up to a minute; every read
//! here is bounded by the configured timeout instead, so nothing waits longer.
//!
//! **Why neo4rs 0.9 (a release candidate) and not 0.8.** A read whose future
//! is dropped mid-exchange — the client closed its connection, or the timeout
//! fired — left its Bolt answers unread on a pooled connection under 0.8, and
//! the next read on that connection took the stale answers for its own: under
//! load blocklab answered 404 for nodes that exist (54 wrong answers in 10,000
//! checked reads, `tests/neo4j.rs::no_wrong_answer_while_clients_cut_requests_off`).
//! 0.9.0-rc.11 counts each connection's pending answers and drains them (or
//! discards the connection) before reuse, and pipelines PULL with RUN. Every
//! answer is also checked against the id asked for.

use std::time::{Duration, Instant};

use neo4rs::{ConfigBuilder, Graph, Node, query};

use super::backend::{
    CONTENT_QUERY, Content, DbSettings, GraphBackend, GraphError, ReadFuture, SEED_QUERY, SeedReport,
};

/// Where the Neo4j server is.
#[derive(Clone, PartialEq, Eq)]
pub struct Neo4jTarget {
    /// `bolt` or `neo4j`.
    pub scheme: String,
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// From the URL; `NEO4J_USER` / `NEO4J_PASSWORD` otherwise. Never printed.
    pub credentials: Option<(String, String)>,
}

impl std::fmt::Debug for Neo4jTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for Neo4jTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}

/// The Neo4j backend.
pub struct Neo4jGraph {
    target: Neo4jTarget,
    settings: DbSettings,
    /// For the async path: used from the HTTP runtime's tasks.
    graph: Graph,
    /// For the blocking path: a separate driver living on its own runtime.
    blocking_graph: Graph,
    client_runtime: Option<tokio::runtime::Runtime>,
}

impl Neo4jGraph {
    /// A backend for `target`. Connections open on first use (neo4rs pools lazily).
    pub fn new(target: Neo4jTarget, settings: DbSettings) -> Result<Neo4jGraph, GraphError> {
        let (user, password) = target.credentials.clone().unwrap_or_else(|| {
            (
                std::env::var("NEO4J_USER").unwrap_or_else(|_| "neo4j".to_string()),
                std::env::var("NEO4J_PASSWORD").unwrap_or_default(),
            )
        });
        let uri = format!("{}:{}", target.host, target.port);
        let client_runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("neo4j-client")
            .enable_all()
            .build()
            .map_err(|e| GraphError::Unavailable(format!("cannot start the driver runtime: {e}")))?;
        // A pool of `connections` (neo4rs opens them on first use).
        let connect = |connections: usize| {
            let config = ConfigBuilder::default()
                .uri(uri.as_str())
                .user(user.as_str())
                .password(password.as_str())
                .max_connections(connections.max(1))
                .build()
                .map_err(|e| GraphError::Unavailable(format!("{target}: invalid configuration: {e}")))?;
            // The pool's timers belong to the client runtime.
            let _runtime = client_runtime.enter();
            Graph::connect(config).map_err(|e| GraphError::Unavailable(format!("{target}: {e}")))
        };
        let blocking_graph = connect(settings.pool)?;
        let graph = connect(settings.async_connections)?;
        Ok(Neo4jGraph { target, settings, graph, blocking_graph, client_runtime: Some(client_runtime) })
    }

    /// Runs `work` on the client runtime and blocks this thread for its
    /// result, at most the read timeout.
    fn wait_for<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = Result<T, GraphError>> + Send + 'static,
    ) -> Result<T, GraphError> {
        self.wait_for_long(work, self.settings.timeout)
    }
}

impl Drop for Neo4jGraph {
    fn drop(&mut self) {
        if let Some(runtime) = self.client_runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn read_node(graph: Graph, target: String, timeout: Duration, id: i64) -> Result<Content, GraphError> {
    let work = async {
        let mut rows =
            graph.execute(query(CONTENT_QUERY).param("id", id)).await.map_err(|e| classify(&target, &e))?;
        let row = rows.next().await.map_err(|e| classify(&target, &e))?.ok_or(GraphError::NotFound(id))?;
        let node: Node = row.get("n").map_err(|e| GraphError::Malformed(e.to_string()))?;
        let content = content_from_node(&node)?;
        // A node other than the one asked for means the connection's answers
        // were out of step with its requests: an error, never an answer.
        if content.id != id {
            return Err(GraphError::Malformed(format!(
                "asked for node {id}, the driver returned node {}",
                content.id
            )));
        }
        Ok(content)
    };
    // Dropping `work` mid-exchange (this timeout, or a client that went away)
    // is safe with neo4rs 0.9: the pool drains the pending answers before the
    // connection's next use, or discards it when a read was cut mid-message.
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| GraphError::Unavailable(format!("{target}: no answer within {timeout:?}")))?
}

async fn run(graph: Graph, target: String, timeout: Duration, q: neo4rs::Query) -> Result<(), GraphError> {
    tokio::time::timeout(timeout, graph.run(q))
        .await
        .map_err(|_| GraphError::Unavailable(format!("{target}: no answer within {timeout:?}")))?
        .map_err(|e| classify(&target, &e))
}

impl GraphBackend for Neo4jGraph {
    fn describe(&self) -> String {
        format!(
            "Neo4j at {} (blocking path: pool of {} on the driver's own runtime; async path: pool of {}; {} timeout per read)",
            self.target,
            self.settings.pool,
            self.settings.async_connections,
            humantime::format_duration(self.settings.timeout)
        )
    }

    fn read_blocking(&self, id: i64) -> Result<Content, GraphError> {
        let graph = self.blocking_graph.clone();
        self.wait_for(read_node(graph, self.target.to_string(), self.settings.timeout, id))
    }

    fn read(&self, id: i64) -> ReadFuture<'_> {
        Box::pin(read_node(self.graph.clone(), self.target.to_string(), self.settings.timeout, id))
    }

    fn count(&self) -> Result<u64, GraphError> {
        let (graph, target, timeout) =
            (self.blocking_graph.clone(), self.target.to_string(), self.settings.timeout);
        self.wait_for(async move {
            let work = async {
                let mut rows = graph
                    .execute(query("MATCH (n:Content) RETURN count(n) AS c"))
                    .await
                    .map_err(|e| classify(&target, &e))?;
                let row = rows.next().await.map_err(|e| classify(&target, &e))?;
                Ok(row.and_then(|r| r.get::<i64>("c").ok()).unwrap_or(0).max(0) as u64)
            };
            tokio::time::timeout(timeout, work)
                .await
                .map_err(|_| GraphError::Unavailable(format!("{target}: no answer within {timeout:?}")))?
        })
    }

    fn seed(&self, nodes: u64, progress: &dyn Fn(u64)) -> Result<SeedReport, GraphError> {
        let started = Instant::now();
        let target = self.target.to_string();
        let slow = Duration::from_secs(120);
        let write = |q: neo4rs::Query| {
            self.wait_for_long(run(self.blocking_graph.clone(), target.clone(), slow, q), slow)
        };
        write(query("CREATE INDEX content_id IF NOT EXISTS FOR (n:Content) ON (n.id)"))?;
        let before = self.count()?;
        let batch = 5_000u64;
        let mut from = 1u64;
        while from <= nodes {
            let to = (from + batch - 1).min(nodes);
            write(query(SEED_QUERY).param("from", from as i64).param("to", to as i64))?;
            progress(to);
            from = to + 1;
        }
        write(
            query("MATCH (n:Content) WHERE n.id > $n OR n.id < 1 DETACH DELETE n").param("n", nodes as i64),
        )?;
        Ok(SeedReport { before, after: self.count()?, took: started.elapsed() })
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("db_pool", self.settings.pool.to_string()),
            ("db_async_connections", self.settings.async_connections.to_string()),
            ("db_timeout_seconds", self.settings.timeout.as_secs_f64().to_string()),
        ]
    }
}

impl Neo4jGraph {
    fn wait_for_long<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = Result<T, GraphError>> + Send + 'static,
        limit: Duration,
    ) -> Result<T, GraphError> {
        let runtime = self.client_runtime.as_ref().expect("present until drop");
        let (done, answer) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = done.send(work.await);
        });
        // A std channel: this thread parks until the driver's runtime answers.
        answer
            .recv_timeout(limit)
            .map_err(|_| GraphError::Unavailable(format!("{}: no answer within {limit:?}", self.target)))?
    }
}

fn classify(target: &str, e: &neo4rs::Error) -> GraphError {
    match e {
        neo4rs::Error::IOError { .. } | neo4rs::Error::ConnectionError => {
            GraphError::Unavailable(format!("{target}: {e}"))
        }
        neo4rs::Error::AuthenticationError(_) => {
            GraphError::Unavailable(format!("{target}: authentication failed"))
        }
        other => {
            let text = other.to_string();
            if text.contains("pool") || text.contains("onnection") {
                GraphError::Unavailable(format!("{target}: {}", text.chars().take(200).collect::<String>()))
            } else {
                GraphError::Query(text.chars().take(200).collect())
            }
        }
    }
}

fn content_from_node(node: &Node) -> Result<Content, GraphError> {
    Content::from_properties(node.get::<i64>("id").map_err(|e| e.to_string()), |key| {
        node.get::<String>(key).map_err(|e| e.to_string())
    })
}
