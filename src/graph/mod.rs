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
mod falkor;
mod neo4j;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde::Serialize;
use url::Url;

pub use dataset::content_record;
pub use embedded::EmbeddedGraph;
pub use falkor::{FalkorGraph, FalkorTarget};
pub use neo4j::{Neo4jGraph, Neo4jTarget};

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
            async_connections: 4,
            timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_millis(500),
        }
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
    /// Every value [`GraphError::kind`] returns, in metrics order.
    pub const KINDS: [&'static str; 4] = ["not_found", "unavailable", "query", "malformed"];

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
}

/// Which database `--db` names. Its `Display` never shows credentials.
#[derive(Clone, PartialEq, Eq)]
pub enum DbUrl {
    /// The in-process Grafeo database (`embedded`).
    Embedded,
    /// A FalkorDB server (`falkor://[user:password@]host:port[/graph]`).
    Falkor(FalkorTarget),
    /// A Neo4j server over Bolt (`bolt://` or `neo4j://[user:password@]host:port`).
    Neo4j(Neo4jTarget),
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbUrl::Embedded => f.write_str("embedded"),
            DbUrl::Falkor(t) => write!(f, "{t}"),
            DbUrl::Neo4j(t) => write!(f, "{t}"),
        }
    }
}

impl FromStr for DbUrl {
    type Err = String;

    /// Parses `--db`. A user or password with reserved characters (`@ : / # % ?`,
    /// a space) is percent-encoded in it, as in any URL (`p%40ss` for `p@ss`).
    /// No error message quotes the user or the password.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "embedded" {
            return Ok(DbUrl::Embedded);
        }
        let usage = "expected 'embedded', falkor://HOST:PORT[/GRAPH] or bolt://HOST:PORT";
        if !s.contains("://") {
            return Err(usage.to_string());
        }
        let url = Url::parse(s).map_err(|e| format!("{e} in the database URL ({usage})"))?;
        let scheme = url.scheme();
        if !matches!(scheme, "falkor" | "redis" | "bolt" | "neo4j") {
            return Err(format!(
                "unsupported database scheme '{scheme}': use embedded, falkor:// or bolt://"
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!(
                "{scheme}:// takes no '?' or '#' part (in a password, write them as %3F and %23)"
            ));
        }
        let host = match url.host_str() {
            Some(host) if !host.is_empty() => host.to_string(),
            _ => return Err(format!("{scheme}:// needs a host")),
        };
        let credentials = match (url.username(), url.password()) {
            ("", None) => None,
            (user, password) => Some((decode(user, "user")?, decode(password.unwrap_or(""), "password")?)),
        };
        let path = url.path().trim_start_matches('/');
        match scheme {
            "falkor" | "redis" => Ok(DbUrl::Falkor(FalkorTarget {
                host,
                port: url.port().unwrap_or(6379),
                graph: if path.is_empty() { "content".to_string() } else { decode(path, "graph name")? },
                credentials,
            })),
            _ => {
                if !path.is_empty() {
                    return Err(format!("{scheme}:// takes no path (got '/{path}')"));
                }
                Ok(DbUrl::Neo4j(Neo4jTarget {
                    scheme: scheme.to_string(),
                    host,
                    port: url.port().unwrap_or(7687),
                    credentials,
                }))
            }
        }
    }
}

impl DbUrl {
    /// The URL with its credentials, to hand to a child process through its
    /// environment (`BLOCKLAB_DB`) — never to print, log or put on a command line.
    pub fn full_url(&self) -> String {
        match self {
            DbUrl::Embedded => "embedded".to_string(),
            DbUrl::Falkor(t) => {
                let base = format!("falkor://{}:{}/{}", t.host, t.port, encode(&t.graph));
                with_credentials(&base, t.credentials.as_ref())
            }
            DbUrl::Neo4j(t) => {
                with_credentials(&format!("{}://{}:{}", t.scheme, t.host, t.port), t.credentials.as_ref())
            }
        }
    }
}

/// Everything but the URL's unreserved characters is percent-encoded in a
/// user, a password or a graph name we write into a URL; `%` included, which
/// `Url::set_password` would leave as is.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

fn encode(s: &str) -> String {
    utf8_percent_encode(s, COMPONENT).to_string()
}

/// A user or password from a URL, percent-decoded.
fn decode(s: &str, what: &str) -> Result<String, String> {
    percent_decode_str(s)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("the database URL's {what} is not UTF-8 once percent-decoded"))
}

/// `base` (a URL with a host) with `user:password@` set, each percent-encoded.
pub(crate) fn with_credentials(base: &str, credentials: Option<&(String, String)>) -> String {
    let mut url = Url::parse(base).expect("a URL built from a parsed host and port");
    if let Some((user, password)) = credentials {
        // Both only fail for URLs without a host, and `base` has one.
        let _ = url.set_username(&encode(user));
        let _ = url.set_password(Some(&encode(password)));
    }
    url.to_string()
}

/// Opens the database `db` names. Networked databases are not contacted
/// here: their clients connect on first use, so a server can start while its
/// database is down.
pub async fn open(
    db: &DbUrl,
    nodes: u64,
    latency: Duration,
    settings: DbSettings,
) -> Result<Arc<dyn GraphBackend>, GraphError> {
    Ok(match db {
        DbUrl::Embedded => {
            // Loading is CPU work that can take seconds for millions of nodes.
            let graph = tokio::task::spawn_blocking(move || EmbeddedGraph::load(nodes, latency))
                .await
                .map_err(|e| GraphError::Query(format!("loading the embedded graph: {e}")))??;
            Arc::new(graph)
        }
        DbUrl::Falkor(target) => Arc::new(FalkorGraph::new(target.clone(), settings)),
        DbUrl::Neo4j(target) => Arc::new(Neo4jGraph::new(target.clone(), settings)?),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_urls_parse_and_never_display_credentials() {
        assert_eq!("embedded".parse::<DbUrl>(), Ok(DbUrl::Embedded));
        let DbUrl::Falkor(f) = "falkor://127.0.0.1:6380".parse::<DbUrl>().unwrap() else { panic!() };
        assert_eq!(
            (f.host.as_str(), f.port, f.graph.as_str(), f.credentials),
            ("127.0.0.1", 6380, "content", None)
        );
        let DbUrl::Falkor(f) = "falkor://u:p%40ss@db/other".parse::<DbUrl>().unwrap() else { panic!() };
        assert_eq!((f.port, f.graph.as_str()), (6379, "other"));
        assert_eq!(f.credentials, Some(("u".to_string(), "p@ss".to_string())));
        let db = "bolt://neo4j:secret@host:7687".parse::<DbUrl>().unwrap();
        assert_eq!(db.to_string(), "bolt://host:7687");
        assert!(!format!("{db:?}").contains("secret"));
        let DbUrl::Neo4j(n) = "neo4j://h".parse::<DbUrl>().unwrap() else { panic!() };
        assert_eq!((n.port, n.scheme.as_str()), (7687, "neo4j"));
        let DbUrl::Falkor(f) = "falkor://[::1]:7000/g%20h".parse::<DbUrl>().unwrap() else { panic!() };
        assert_eq!((f.host.as_str(), f.port, f.graph.as_str()), ("[::1]", 7000, "g h"));
        for url in [
            "falkor://u:p%40ss%2B%20x@db:6379/other",
            "falkor://u:%40%3A%2F%23%25%20%3F@db:6379/g",
            "falkor://:pw%2541@db:6379/g%2Fh",
            "bolt://neo4j:s3:cr%2Ft@h:7687",
            "neo4j://n%40me:p%23w%25@[::1]:7687",
            "embedded",
        ] {
            let db = url.parse::<DbUrl>().unwrap();
            assert_eq!(db.full_url().parse::<DbUrl>().unwrap(), db, "{url} survives full_url()");
        }
        for bad in [
            "postgres://x",
            "falkor://",
            "falkor://h:notaport",
            "bolt://h:1/x",
            "nothing",
            "falkor://u:p#w@h:1",
            "falkor://u:p?w@h:1",
            "falkor://u:pw@h:1/g?x",
            "falkor://u:%FF@h:1",
        ] {
            let error = bad.parse::<DbUrl>().unwrap_err();
            assert!(!error.contains("p#w") && !error.contains("p?w"), "{bad}: {error} quotes the password");
        }
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
