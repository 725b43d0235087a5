//! The graph store: the `Content` record the seed study read, the one Cypher
//! query every backend answers, and the [`GraphBackend`] trait that gives each
//! backend two ways to read a node — a blocking one and a non-blocking one.
//!
//! The execution models of the server differ only in *which* of the two reads
//! they call and *where* (which thread, which executor). Keeping both behind
//! one trait is what lets a networked database with a real blocking client and
//! a real async client slot in beside the embedded one.

mod dataset;
mod embedded;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;

use serde::Serialize;

pub use dataset::content_record;
pub use embedded::EmbeddedGraph;

/// The read every backend answers, with `$id` as a parameter (never formatted
/// into the text): the same text goes to Grafeo, FalkorDB and Neo4j.
pub const CONTENT_QUERY: &str = "MATCH (n:Content {id: $id}) RETURN n";

/// The label of every node of the dataset.
pub const CONTENT_LABEL: &str = "Content";

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

/// Why a read failed. Each kind is counted in `/metrics` and mapped to an
/// HTTP status by the server (`NotFound` 404, `Unavailable` 503, else 500).
#[derive(Debug, Clone, thiserror::Error)]
pub enum GraphError {
    /// The query ran and matched no node with that id.
    #[error("no Content node with id {0}")]
    NotFound(i64),
    /// The database could not be reached or refused the query.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The query failed inside the database.
    #[error("query failed: {0}")]
    Query(String),
    /// The database answered with something that is not a Content node.
    #[error("malformed node: {0}")]
    Malformed(String),
}

impl GraphError {
    /// A short, stable name for the kind, used as a metrics label.
    pub fn kind(&self) -> &'static str {
        match self {
            GraphError::NotFound(_) => "not_found",
            GraphError::Unavailable(_) => "unavailable",
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
}

/// Which database `--db` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbUrl {
    /// The in-process Grafeo database (`embedded`).
    Embedded,
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbUrl::Embedded => f.write_str("embedded"),
        }
    }
}

impl FromStr for DbUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "embedded" => Ok(DbUrl::Embedded),
            other
                if other.starts_with("falkor://")
                    || other.starts_with("bolt://")
                    || other.starts_with("neo4j://") =>
            {
                Err(format!("'{}' is not supported yet: only 'embedded' is built so far", scheme_of(other)))
            }
            _ => Err("expected 'embedded'".to_string()),
        }
    }
}

/// `text` with the user-info part of every URL in it (`scheme://user:pass@`)
/// replaced by `***`, so that a message quoting a database URL never shows a
/// password.
pub fn redact_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end =
            tail.find(|c: char| c == '/' || c == '\'' || c == '"' || c.is_whitespace()).unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(userinfo_end) => {
                out.push_str("***");
                rest = &tail[userinfo_end..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// The scheme part of a URL, for messages that must not echo credentials.
fn scheme_of(url: &str) -> &str {
    url.split_once("://").map_or(url, |(scheme, _)| scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_url_parses_embedded_and_rejects_the_rest_without_echoing_them() {
        assert_eq!("embedded".parse::<DbUrl>(), Ok(DbUrl::Embedded));
        let err = "bolt://neo4j:secret@host:7687".parse::<DbUrl>().unwrap_err();
        assert!(err.contains("bolt"), "{err}");
        assert!(!err.contains("secret"), "{err}");
        assert!("postgres://x".parse::<DbUrl>().is_err());
    }

    #[test]
    fn credentials_are_redacted_wherever_a_url_appears() {
        assert_eq!(
            redact_credentials("invalid value 'bolt://neo4j:s3cret@db:7687/x' for '--db'"),
            "invalid value 'bolt://***@db:7687/x' for '--db'"
        );
        assert_eq!(redact_credentials("falkor://h:6379 and x"), "falkor://h:6379 and x");
        assert_eq!(redact_credentials("a://u@h b://v:w@i"), "a://***@h b://***@i");
        assert_eq!(redact_credentials("no url"), "no url");
    }

    #[test]
    fn content_serializes_with_the_seed_property_names() {
        let json = serde_json::to_value(content_record(7)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": 7, "name": "resource7", "code": "test.lp.content.7",
                "mimeType": "application/pdf", "contentType": "Resource", "body": "body string"
            })
        );
    }
}
