//! Neo4j over Bolt, through blocklab's own client (`graph/bolt`: why it
//! replaced `neo4rs` is said there). The non-blocking read awaits the
//! client's pool on the calling runtime. The blocking read is built the way
//! the official Java driver builds its synchronous session on its async
//! core: the query runs on the driver's **own client runtime** and the
//! calling thread waits for the answer on a channel — never `block_on`
//! inside a runtime worker.
//!
//! Every read is bounded by the configured timeout, and every connect by
//! the connect timeout. A read whose future is dropped mid-exchange — the
//! client closed its connection, or the timeout fired — leaves its answers
//! owed on its Bolt connection, and the next read on that connection reads
//! and throws them away before its own (`graph/bolt/connection.rs`); every
//! answer is also checked against the id asked for.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::backend::{
    CONTENT_QUERY, Content, DbSettings, GraphBackend, GraphError, ReadFuture, SEED_QUERY, SeedReport,
};
use super::bolt::{Auth, BoltError, ConnectConfig, Pool, Value};
use super::client_runtime::ClientRuntime;

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
    /// For the async path: awaited by the HTTP runtime's tasks (and the
    /// actors' runtime). A connection's socket stays registered with the
    /// runtime that opened it, whichever runtime awaits it later.
    pool: Pool,
    /// For the blocking path: connections living on the client runtime.
    blocking_pool: Arc<Pool>,
    client_runtime: ClientRuntime,
}

impl Neo4jGraph {
    /// A backend for `target`. Connections open on first use, so a server
    /// can start while its database is down.
    pub fn new(target: Neo4jTarget, settings: DbSettings) -> Result<Neo4jGraph, GraphError> {
        let credentials = target.credentials.clone().or_else(|| {
            let password = std::env::var("NEO4J_PASSWORD").ok()?;
            Some((std::env::var("NEO4J_USER").unwrap_or_else(|_| "neo4j".to_string()), password))
        });
        let auth = match credentials {
            Some((user, password)) => Auth::Basic { user, password },
            None => Auth::None,
        };
        let config = ConnectConfig {
            host: target.host.trim_start_matches('[').trim_end_matches(']').to_string(),
            port: target.port,
            auth,
            connect_timeout: settings.connect_timeout,
        };
        let client_runtime = ClientRuntime::start("neo4j-client")?;
        Ok(Neo4jGraph {
            pool: Pool::new(config.clone(), settings.async_connections),
            blocking_pool: Arc::new(Pool::new(config, settings.pool)),
            target,
            settings,
            client_runtime,
        })
    }

    /// Runs `work` on the client runtime and blocks this thread for its
    /// result, at most `limit`.
    fn wait_for<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = Result<T, GraphError>> + Send + 'static,
        limit: Duration,
    ) -> Result<T, GraphError> {
        self.client_runtime.wait_for(work, limit, || no_answer(&self.target, limit))
    }

    /// Runs `query` through the blocking pool, from the calling thread.
    fn run_blocking(
        &self,
        query: &'static str,
        params: Vec<(&'static str, Value)>,
        limit: Duration,
    ) -> Result<Vec<Vec<Value>>, GraphError> {
        let (pool, target) = (self.blocking_pool.clone(), self.target.clone());
        self.wait_for(
            async move {
                let work = pool.run(query, &params);
                tokio::time::timeout(limit, work)
                    .await
                    .map_err(|_| no_answer(&target, limit))?
                    .map_err(|e| classify(&target, e))
            },
            limit,
        )
    }
}

fn no_answer(target: &Neo4jTarget, limit: Duration) -> GraphError {
    GraphError::Unavailable(format!("{target}: no answer within {limit:?}"))
}

async fn read_node(
    pool: &Pool,
    target: &Neo4jTarget,
    timeout: Duration,
    id: i64,
) -> Result<Content, GraphError> {
    let work = async {
        let records =
            pool.run(CONTENT_QUERY, &[("id", Value::Int(id))]).await.map_err(|e| classify(target, e))?;
        let record = records.into_iter().next().ok_or(GraphError::NotFound(id))?;
        let content = content_from_record(record)?;
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
    // Dropping `work` mid-exchange (this timeout, or a client that went
    // away) leaves its answers to the connection's next read to throw away:
    // see graph/bolt/connection.rs.
    tokio::time::timeout(timeout, work).await.map_err(|_| no_answer(target, timeout))?
}

impl GraphBackend for Neo4jGraph {
    fn describe(&self) -> String {
        format!("Neo4j at {} (blocklab's Bolt client; {})", self.target, self.settings.describe_paths())
    }

    fn read_blocking(&self, id: i64) -> Result<Content, GraphError> {
        let (pool, target, timeout) =
            (self.blocking_pool.clone(), self.target.clone(), self.settings.timeout);
        self.wait_for(async move { read_node(&pool, &target, timeout, id).await }, timeout)
    }

    fn read(&self, id: i64) -> ReadFuture<'_> {
        Box::pin(read_node(&self.pool, &self.target, self.settings.timeout, id))
    }

    fn count(&self) -> Result<u64, GraphError> {
        let records =
            self.run_blocking("MATCH (n:Content) RETURN count(n) AS c", Vec::new(), self.settings.timeout)?;
        match records.first().and_then(|fields| fields.first()) {
            Some(Value::Int(n)) => Ok((*n).max(0) as u64),
            other => Err(GraphError::Malformed(format!("count(n) answered {other:?}"))),
        }
    }

    fn seed(&self, nodes: u64, progress: &dyn Fn(u64)) -> Result<SeedReport, GraphError> {
        let started = Instant::now();
        let slow = Duration::from_secs(120);
        let write = |query, params| self.run_blocking(query, params, slow).map(drop);
        write("CREATE INDEX content_id IF NOT EXISTS FOR (n:Content) ON (n.id)", Vec::new())?;
        let before = self.count()?;
        let batch = 5_000u64;
        let mut from = 1u64;
        while from <= nodes {
            let to = (from + batch - 1).min(nodes);
            write(SEED_QUERY, vec![("from", Value::Int(from as i64)), ("to", Value::Int(to as i64))])?;
            progress(to);
            from = to + 1;
        }
        write(
            "MATCH (n:Content) WHERE n.id > $n OR n.id < 1 DETACH DELETE n",
            vec![("n", Value::Int(nodes as i64))],
        )?;
        Ok(SeedReport { before, after: self.count()?, took: started.elapsed() })
    }

    fn pool_waiting(&self) -> Vec<(&'static str, usize)> {
        vec![("async", self.pool.waiting()), ("blocking", self.blocking_pool.waiting())]
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        self.settings.labels()
    }
}

/// Maps a Bolt error to what the server counts and answers: a database it
/// cannot use (connection, login, a database still starting: 503) apart
/// from a query Neo4j refused (500).
fn classify(target: &Neo4jTarget, e: BoltError) -> GraphError {
    let short = |text: String| text.chars().take(200).collect::<String>();
    match e {
        BoltError::Connect(_) | BoltError::Io(_) => GraphError::Unavailable(format!("{target}: {e}")),
        BoltError::Failure { code, .. } if code.starts_with("Neo.ClientError.Security.") => {
            GraphError::Unavailable(format!("{target}: authentication failed ({code})"))
        }
        BoltError::Failure { code, message } if code.starts_with("Neo.TransientError.") => {
            GraphError::Unavailable(short(format!("{target}: {code}: {message}")))
        }
        BoltError::Failure { code, message } => GraphError::Query(short(format!("{code}: {message}"))),
        BoltError::Protocol(_) => GraphError::Malformed(short(format!("{target}: {e}"))),
    }
}

/// The Content node of a record whose one field is a Node structure (tag
/// 0x4E: id, labels, properties, and from Bolt 5 the element id).
fn content_from_record(fields: Vec<Value>) -> Result<Content, GraphError> {
    let Some(Value::Struct(0x4E, node)) = fields.into_iter().next() else {
        return Err(GraphError::Malformed("the record holds no node".to_string()));
    };
    let Some(properties @ Value::Map(_)) = node.get(2) else {
        return Err(GraphError::Malformed("the node has no properties".to_string()));
    };
    let missing = || "missing".to_string();
    Content::from_properties(
        match properties.get("id") {
            Some(Value::Int(id)) => Ok(*id),
            Some(other) => Err(format!("a {}", other.type_name())),
            None => Err(missing()),
        },
        |key| match properties.get(key) {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(other) => Err(format!("a {}", other.type_name())),
            None => Err(missing()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::content_record;

    fn node(properties: Vec<(&str, Value)>) -> Vec<Value> {
        let properties = properties.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let labels = Value::List(vec![Value::String("Content".into())]);
        vec![Value::Struct(
            0x4E,
            vec![Value::Int(0), labels, Value::Map(properties), Value::String("4:x:0".into())],
        )]
    }

    #[test]
    fn a_node_record_becomes_content_and_anything_else_is_malformed() {
        let c = content_record(7);
        let text = |s: &str| Value::String(s.to_string());
        let full = vec![
            ("id", Value::Int(7)),
            ("name", text(&c.name)),
            ("code", text(&c.code)),
            ("mimeType", text(&c.mime_type)),
            ("contentType", text(&c.content_type)),
            ("body", text(&c.body)),
        ];
        assert_eq!(content_from_record(node(full.clone())).unwrap(), c);
        let mut no_body = full.clone();
        no_body.pop();
        let error = content_from_record(node(no_body)).unwrap_err().to_string();
        assert!(error.contains("property body: missing"), "{error}");
        let mut text_id = full;
        text_id[0].1 = text("7");
        let error = content_from_record(node(text_id)).unwrap_err().to_string();
        assert!(error.contains("property id: a string"), "{error}");
        assert!(matches!(content_from_record(vec![Value::Int(1)]), Err(GraphError::Malformed(_))));
    }

    #[test]
    fn failures_map_to_unavailable_or_query_by_their_code() {
        let target = Neo4jTarget { scheme: "bolt".into(), host: "h".into(), port: 1, credentials: None };
        let failure = |code: &str| BoltError::Failure { code: code.into(), message: "m".into() };
        let kind = |e| classify(&target, e).kind();
        assert_eq!(kind(failure("Neo.ClientError.Statement.SyntaxError")), "query");
        assert_eq!(kind(failure("Neo.ClientError.Security.Unauthorized")), "unavailable");
        assert_eq!(kind(failure("Neo.TransientError.General.DatabaseUnavailable")), "unavailable");
        assert_eq!(kind(BoltError::Io(std::io::ErrorKind::UnexpectedEof.into())), "unavailable");
        assert_eq!(kind(BoltError::Connect("refused".into())), "unavailable");
        assert_eq!(kind(BoltError::Protocol("x".into())), "malformed");
        let query = classify(&target, failure("Neo.ClientError.Statement.SyntaxError")).to_string();
        assert!(query.contains("Neo.ClientError.Statement.SyntaxError: m"), "{query}");
    }
}
