//! The embedded backend: Grafeo, an in-process graph database, queried with
//! the same Cypher text the networked backends get.
//!
//! An in-process read takes microseconds and never waits on a socket, so on its
//! own it cannot show what blocking costs. `--db-latency` adds the missing
//! network round trip: the blocking read sleeps its thread for it (as a
//! synchronous driver blocks in `recv`), the non-blocking read awaits a timer
//! (as an async driver yields until the socket is readable). The query itself
//! then runs inline in both cases.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use grafeo::{GrafeoDB, Value};

use super::backend::{CONTENT_LABEL, CONTENT_QUERY, Content, GraphBackend, GraphError, ReadFuture};
use super::dataset::content_record;

/// The Grafeo database loaded with `nodes` Content nodes, indexed on `id`.
pub struct EmbeddedGraph {
    db: GrafeoDB,
    nodes: u64,
    latency: Duration,
}

impl EmbeddedGraph {
    /// Creates an in-memory database, loads nodes `1..=nodes` and indexes `id`.
    ///
    /// `latency` is the simulated network round trip added to every read.
    pub fn load(nodes: u64, latency: Duration) -> Result<Self, GraphError> {
        let started = Instant::now();
        let db = GrafeoDB::new_in_memory();
        for id in 1..=nodes as i64 {
            let c = content_record(id);
            db.create_node_with_props(
                &[CONTENT_LABEL],
                [
                    ("id", Value::Int64(c.id)),
                    ("name", Value::from(c.name.as_str())),
                    ("code", Value::from(c.code.as_str())),
                    ("mimeType", Value::from(c.mime_type.as_str())),
                    ("contentType", Value::from(c.content_type.as_str())),
                    ("body", Value::from(c.body.as_str())),
                ],
            )
            .map_err(|e| GraphError::Query(format!("loading node {id}: {e}")))?;
        }
        // Without this index the read is a label scan: ~25 ms instead of ~25 µs.
        db.create_property_index("id");
        tracing::info!(nodes, elapsed = ?started.elapsed(), "embedded graph loaded and indexed on id");
        Ok(EmbeddedGraph { db, nodes, latency })
    }

    /// Whether the `id` property index is in place (it must be, for speed).
    pub fn is_indexed(&self) -> bool {
        self.db.has_property_index("id")
    }

    /// Runs the Cypher read on the calling thread; CPU only, no waiting.
    fn query(&self, id: i64) -> Result<Content, GraphError> {
        let params = HashMap::from([("id".to_string(), Value::Int64(id))]);
        let result = self
            .db
            .execute_cypher_with_params(CONTENT_QUERY, params)
            .map_err(|e| GraphError::Query(e.to_string()))?;
        let row = result.rows().first().ok_or(GraphError::NotFound(id))?;
        let node = row.first().ok_or_else(|| GraphError::Malformed("empty row".into()))?;
        content_from_value(node)
    }
}

impl GraphBackend for EmbeddedGraph {
    fn describe(&self) -> String {
        format!(
            "embedded Grafeo {} ({} Content nodes, indexed on id), simulated round trip {}",
            grafeo::VERSION,
            self.nodes,
            humantime::format_duration(self.latency)
        )
    }

    fn read_blocking(&self, id: i64) -> Result<Content, GraphError> {
        if !self.latency.is_zero() {
            // The thread is held for the round trip, as in a synchronous driver.
            std::thread::sleep(self.latency);
        }
        self.query(id)
    }

    fn count(&self) -> Result<u64, GraphError> {
        let result = self
            .db
            .execute_cypher("MATCH (n:Content) RETURN count(n)")
            .map_err(|e| GraphError::Query(e.to_string()))?;
        match result.rows().first().and_then(|r| r.first()) {
            Some(Value::Int64(n)) => Ok((*n).max(0) as u64),
            other => Err(GraphError::Malformed(format!("count: {other:?}"))),
        }
    }

    fn read(&self, id: i64) -> ReadFuture<'_> {
        Box::pin(async move {
            if !self.latency.is_zero() {
                // The task yields its thread for the round trip, as an async driver does.
                tokio::time::sleep(self.latency).await;
            }
            self.query(id)
        })
    }
}

/// Turns the node a `RETURN n` yields (a map of its properties) into Content.
fn content_from_value(node: &Value) -> Result<Content, GraphError> {
    let Value::Map(props) = node else {
        return Err(GraphError::Malformed(format!("expected a node, got {node:?}")));
    };
    let id = match props.get("id") {
        Some(Value::Int64(id)) => Ok(*id),
        other => Err(format!("{other:?}")),
    };
    Content::from_properties(id, |key| match props.get(key) {
        Some(Value::String(s)) => Ok(s.to_string()),
        other => Err(format!("{other:?}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_node_back_through_cypher() {
        let g = EmbeddedGraph::load(50, Duration::ZERO).unwrap();
        assert!(g.is_indexed());
        for id in [1, 17, 50] {
            assert_eq!(g.read_blocking(id).unwrap(), content_record(id));
        }
        assert!(matches!(g.read_blocking(51), Err(GraphError::NotFound(51))));
        assert_eq!(g.count().unwrap(), 50);
    }

    #[tokio::test]
    async fn non_blocking_read_matches_blocking_read() {
        let g = EmbeddedGraph::load(10, Duration::from_millis(1)).unwrap();
        assert_eq!(g.read(3).await.unwrap(), g.read_blocking(3).unwrap());
    }
}
