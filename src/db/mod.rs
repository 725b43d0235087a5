//! The graph store: the `Content` record the seed study read, the one Cypher
//! query every graph backend answers (PostgreSQL, where the node is a row,
//! answers one SQL statement: `postgres.rs`), and the [`GraphBackend`] trait
//! that gives each backend two ways to read a node — a blocking one and a
//! non-blocking one.
//!
//! The execution models of the server differ only in *which* of the two reads
//! they call and *where* (which thread, which executor). Keeping both behind
//! one trait is what lets a networked database with a real blocking client and
//! a real async client slot in beside the embedded one.

mod backend;
mod bolt;
mod client_runtime;
mod credentials;
mod dataset;
mod embedded;
mod falkor;
mod neo4j;
mod permits;
mod pg_pool;
mod pg_stats;
mod postgres;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use url::Url;

pub use backend::{
    CONTENT_LABEL, CONTENT_QUERY, Content, DEFAULT_ASYNC_CONNECTIONS, DbSettings, GraphBackend, GraphError,
    ReadFuture, SEED_QUERY, SeedReport,
};
pub use credentials::{NEO4J_PASSWORD, NEO4J_USER, redact_credentials};
use credentials::{decode, encode, with_credentials};

pub use dataset::content_record;
pub use embedded::{EmbeddedGraph, EmbeddedRead};
pub use falkor::{FalkorGraph, FalkorTarget};
pub use neo4j::{Neo4jGraph, Neo4jTarget};
pub use pg_stats::{PgStats, STATS_APPLICATION, StatementTimes};
pub use postgres::{CONTENT_SQL, PostgresGraph, PostgresTarget};

/// Which database `--db` names. Its `Display` never shows credentials.
#[derive(Clone, PartialEq, Eq)]
pub enum DbUrl {
    /// The in-process Grafeo database (`embedded`).
    Embedded,
    /// A FalkorDB server (`falkor://[user:password@]host:port[/graph]`).
    Falkor(FalkorTarget),
    /// A Neo4j server over Bolt (`bolt://` or `neo4j://[user:password@]host:port`).
    Neo4j(Neo4jTarget),
    /// A PostgreSQL server (`postgres://` or `postgresql://[user[:password]@]host:port[/database]`).
    Postgres(PostgresTarget),
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
            DbUrl::Postgres(t) => write!(f, "{t}"),
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
        let usage = "expected 'embedded', falkor://HOST:PORT[/GRAPH], bolt://HOST:PORT or postgres://HOST:PORT/DATABASE";
        if !s.contains("://") {
            return Err(usage.to_string());
        }
        let url = Url::parse(s).map_err(|e| format!("{e} in the database URL ({usage})"))?;
        let scheme = url.scheme();
        if !matches!(scheme, "falkor" | "redis" | "bolt" | "neo4j" | "postgres" | "postgresql") {
            return Err(format!(
                "unsupported database scheme '{scheme}': use embedded, falkor://, bolt:// or postgres://"
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
            "postgres" | "postgresql" => {
                if path.contains('/') {
                    return Err(format!(
                        "{scheme}:// takes one database name after the port (got '/{path}')"
                    ));
                }
                Ok(DbUrl::Postgres(PostgresTarget {
                    scheme: scheme.to_string(),
                    host,
                    port: url.port().unwrap_or(5432),
                    database: if path.is_empty() { None } else { Some(decode(path, "database name")?) },
                    credentials,
                }))
            }
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
    /// The credentials of a URL as the environment of a process that reads
    /// it (a peer, the ceiling client): a Neo4j's as [`NEO4J_USER`] and
    /// [`NEO4J_PASSWORD`], a PostgreSQL's as `PGUSER` and `PGPASSWORD`: the
    /// variables blocklab reads itself when a URL has none. Empty for a URL
    /// without credentials (the process then reads the variables it
    /// inherits, as blocklab does) and for other databases (no peer reads
    /// them).
    pub fn credentials_env(&self) -> Vec<(&'static str, String)> {
        match self {
            DbUrl::Neo4j(Neo4jTarget { credentials: Some((user, password)), .. }) => {
                vec![(NEO4J_USER, user.clone()), (NEO4J_PASSWORD, password.clone())]
            }
            // libpq's own variables, which every PostgreSQL driver reads or a peer passes on.
            DbUrl::Postgres(PostgresTarget { credentials: Some((user, password)), .. }) => {
                let mut env = vec![("PGUSER", user.clone())];
                if !password.is_empty() {
                    env.push(("PGPASSWORD", password.clone()));
                }
                env
            }
            _ => Vec::new(),
        }
    }

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
            DbUrl::Postgres(t) => {
                let database = t.database.as_deref().map(|d| format!("/{}", encode(d))).unwrap_or_default();
                with_credentials(
                    &format!("{}://{}:{}{database}", t.scheme, t.host, t.port),
                    t.credentials.as_ref(),
                )
            }
        }
    }
}

/// Opens the database `db` names (the embedded one read by `read`).
/// Networked databases are not contacted here: their clients connect on
/// first use, so a server can start while its database is down.
pub async fn open(
    db: &DbUrl,
    nodes: u64,
    latency: Duration,
    settings: DbSettings,
    read: EmbeddedRead,
) -> Result<Arc<dyn GraphBackend>, GraphError> {
    Ok(match db {
        DbUrl::Embedded => {
            // Loading is CPU work that can take seconds for millions of nodes.
            let graph = tokio::task::spawn_blocking(move || {
                EmbeddedGraph::load(nodes, latency).map(|g| g.reading_by(read))
            })
            .await
            .map_err(|e| GraphError::Query(format!("loading the embedded graph: {e}")))??;
            Arc::new(graph)
        }
        DbUrl::Falkor(target) => Arc::new(FalkorGraph::new(target.clone(), settings)),
        DbUrl::Neo4j(target) => Arc::new(Neo4jGraph::new(target.clone(), settings)?),
        DbUrl::Postgres(target) => Arc::new(PostgresGraph::new(target.clone(), settings)?),
    })
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
            "postgres://blocklab@127.0.0.1:5432/blocklab",
            "postgresql://u:p%40ss%2Fw@db:6543/my%20db",
            "postgres://:pw@h:5432",
            "postgres://h",
            "embedded",
        ] {
            let db = url.parse::<DbUrl>().unwrap();
            assert_eq!(db.full_url().parse::<DbUrl>().unwrap(), db, "{url} survives full_url()");
        }
        for bad in [
            "mysql://x",
            "postgres://u:p#w@h:1/db",
            "postgres://h:1/db/more",
            "postgres://h:1/db?sslmode=require",
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
    fn postgres_urls_take_a_database_and_never_display_credentials() {
        let db = "postgres://blocklab:s3cr%40t@127.0.0.1:54321/blocklab".parse::<DbUrl>().unwrap();
        let DbUrl::Postgres(p) = &db else { panic!("{db:?}") };
        assert_eq!((p.host.as_str(), p.port, p.database.as_deref()), ("127.0.0.1", 54321, Some("blocklab")));
        assert_eq!(p.credentials, Some(("blocklab".to_string(), "s3cr@t".to_string())));
        assert_eq!(db.to_string(), "postgres://127.0.0.1:54321/blocklab");
        assert!(!format!("{db:?}").contains("s3cr"));
        let DbUrl::Postgres(p) = "postgresql://h".parse::<DbUrl>().unwrap() else { panic!() };
        assert_eq!((p.scheme.as_str(), p.port, p.database, p.credentials), ("postgresql", 5432, None, None));
        let DbUrl::Postgres(p) = "postgres://u@h:1/my%20db".parse::<DbUrl>().unwrap() else { panic!() };
        assert_eq!(
            (p.database.as_deref(), p.credentials),
            (Some("my db"), Some(("u".into(), String::new())))
        );
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
        // A password typed without percent-encoding: a '/' or '#' in it, a space inside quotes.
        assert_eq!(redact_credentials("'bolt://u:p/w@h:1' x"), "'bolt://***@h:1' x");
        assert_eq!(redact_credentials("bolt://u:p#w/x@h:1 and y"), "bolt://***@h:1 and y");
        assert_eq!(
            redact_credentials("invalid value 'bolt://u:p w@h:1' for '--db <DB>'"),
            "invalid value 'bolt://***@h:1' for '--db <DB>'"
        );
        assert_eq!(redact_credentials("\"neo4j://a b@h\" c@d"), "\"neo4j://***@h\" c@d");
        assert_eq!(redact_credentials("é://x é://u:p@h"), "é://x é://***@h");
    }

    #[test]
    fn a_neo4j_urls_credentials_become_the_variables_blocklab_reads() {
        let env = "bolt://neo4j:p%40ss%2Fw@h:7687".parse::<DbUrl>().unwrap().credentials_env();
        assert_eq!(env, [("NEO4J_USER", "neo4j".to_string()), ("NEO4J_PASSWORD", "p@ss/w".to_string())]);
        assert_eq!("bolt://u@h:1".parse::<DbUrl>().unwrap().credentials_env()[1].1, "");
        assert!("bolt://h:7687".parse::<DbUrl>().unwrap().credentials_env().is_empty());
        assert!("falkor://u:p@h:1".parse::<DbUrl>().unwrap().credentials_env().is_empty());
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
