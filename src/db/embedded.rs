//! The embedded backend: Grafeo, an in-process graph database, read as an
//! application reads a store it embeds: by its property index on `id`, no
//! query language in between ([`EmbeddedRead::Index`], the default). With
//! [`EmbeddedRead::Cypher`] it runs the same Cypher text the networked
//! backends get instead; Grafeo 0.5 re-plans that parameterised query on
//! every call, which costs about four times the index read (BENCHMARKS.md).
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

/// How the embedded database is read (`--embedded-read`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum EmbeddedRead {
    /// Grafeo's property index on `id`, then the node's properties: the store's own API.
    #[default]
    Index,
    /// The Cypher query `MATCH (n:Content {id: $id}) RETURN n`, planned by Grafeo on every call.
    Cypher,
}

impl EmbeddedRead {
    /// The name used on the command line, in `/metrics` and in the reports.
    pub fn name(self) -> &'static str {
        match self {
            EmbeddedRead::Index => "index",
            EmbeddedRead::Cypher => "cypher",
        }
    }
}

impl std::fmt::Display for EmbeddedRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The Grafeo database loaded with `nodes` Content nodes, indexed on `id`.
pub struct EmbeddedGraph {
    db: GrafeoDB,
    nodes: u64,
    latency: Duration,
    read: EmbeddedRead,
}

impl EmbeddedGraph {
    /// Creates an in-memory database, loads nodes `1..=nodes` and indexes `id`.
    ///
    /// `latency` is the simulated network round trip added to every read.
    /// Reads go through the property index; [`EmbeddedGraph::reading_by`]
    /// chooses the Cypher path instead.
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
        Ok(EmbeddedGraph { db, nodes, latency, read: EmbeddedRead::Index })
    }

    /// The same database, read by `read`.
    pub fn reading_by(self, read: EmbeddedRead) -> Self {
        EmbeddedGraph { read, ..self }
    }

    /// Whether the `id` property index is in place (it must be, for speed).
    pub fn is_indexed(&self) -> bool {
        self.db.has_property_index("id")
    }

    /// Reads node `id` on the calling thread, the configured way; CPU only, no waiting.
    fn query(&self, id: i64) -> Result<Content, GraphError> {
        match self.read {
            EmbeddedRead::Index => self.lookup(id),
            EmbeddedRead::Cypher => self.cypher(id),
        }
    }

    /// The index read: the node ids whose `id` is `id` (one hash lookup),
    /// the first with the Content label, then its properties.
    fn lookup(&self, id: i64) -> Result<Content, GraphError> {
        let found = self.db.find_nodes_by_property("id", &Value::Int64(id));
        let node = found
            .into_iter()
            .filter_map(|n| self.db.get_node(n))
            .find(|node| node.has_label(CONTENT_LABEL))
            .ok_or(GraphError::NotFound(id))?;
        let id = match node.get_property("id") {
            Some(Value::Int64(id)) => Ok(*id),
            other => Err(format!("{other:?}")),
        };
        Content::from_properties(id, |key| match node.get_property(key) {
            Some(Value::String(s)) => Ok(s.to_string()),
            other => Err(format!("{other:?}")),
        })
    }

    /// The Cypher read, as the networked backends get it.
    fn cypher(&self, id: i64) -> Result<Content, GraphError> {
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
            "embedded Grafeo {} ({} Content nodes, indexed on id, read by {}), simulated round trip {}",
            grafeo::VERSION,
            self.nodes,
            match self.read {
                EmbeddedRead::Index => "its property index",
                EmbeddedRead::Cypher => "Cypher",
            },
            humantime::format_duration(self.latency)
        )
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![("embedded_read", self.read.to_string())]
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
    fn reads_each_node_back_by_the_index_and_through_cypher() {
        let mut g = EmbeddedGraph::load(50, Duration::ZERO).unwrap();
        assert!(g.is_indexed());
        for read in [EmbeddedRead::Index, EmbeddedRead::Cypher] {
            g = g.reading_by(read);
            assert_eq!(g.settings(), vec![("embedded_read", read.name().to_string())]);
            for id in [1, 17, 50] {
                assert_eq!(g.read_blocking(id).unwrap(), content_record(id), "{read}");
            }
            for missing in [0, 51, -3] {
                assert!(
                    matches!(g.read_blocking(missing), Err(GraphError::NotFound(n)) if n == missing),
                    "{read}"
                );
            }
        }
        assert_eq!(g.count().unwrap(), 50);
    }

    #[test]
    fn the_index_read_skips_nodes_of_other_labels() {
        let g = EmbeddedGraph::load(3, Duration::ZERO).unwrap();
        g.db.create_node_with_props(&["Other"], [("id", Value::Int64(2))]).unwrap();
        g.db.create_node_with_props(&["Other"], [("id", Value::Int64(9))]).unwrap();
        assert_eq!(g.read_blocking(2).unwrap(), content_record(2));
        assert!(matches!(g.read_blocking(9), Err(GraphError::NotFound(9))));
    }

    #[tokio::test]
    async fn non_blocking_read_matches_blocking_read() {
        let g = EmbeddedGraph::load(10, Duration::from_millis(1)).unwrap();
        assert_eq!(g.read(3).await.unwrap(), g.read_blocking(3).unwrap());
    }
}
