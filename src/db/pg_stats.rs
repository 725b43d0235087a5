//! What PostgreSQL itself says of the servers reading it, for the bench:
//! the connections each one holds open (`pg_stat_activity`, by the
//! `application_name` every study-1 server sets) and the time the reads
//! took inside the database (`pg_stat_statements`, which a managed
//! PostgreSQL preloads). The database's own figures, not the client's: a
//! read's time seen by a server counts the round trip as well.
//!
//! One connection, straight to the database (never through the bench's
//! link), named `blocklab-stats` so that it counts in no server's figures.

use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use super::postgres::{PostgresTarget, base_config};

/// How long a connect or a query of the monitor may take.
const LIMIT: Duration = Duration::from_secs(5);

/// The `application_name` of the monitor's own connection.
pub const STATS_APPLICATION: &str = "blocklab-stats";

/// Reads of `content` done in the database over a span: how many, and the
/// time PostgreSQL spent executing them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatementTimes {
    /// Reads executed.
    pub calls: u64,
    /// Their total execution time (ms).
    pub total_ms: f64,
}

impl StatementTimes {
    /// The mean execution time of one read (ms), when there was one.
    pub fn mean_ms(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.total_ms / self.calls as f64)
    }
}

/// A connection to PostgreSQL's statistics views.
pub struct PgStats {
    runtime: tokio::runtime::Runtime,
    client: Client,
    /// Whether `pg_stat_statements` can be read (the extension is created).
    statements: bool,
}

impl PgStats {
    /// Connects to the PostgreSQL server at `db`. The error says why.
    pub fn connect(db: &PostgresTarget) -> Result<PgStats, String> {
        let mut config = base_config(db, LIMIT);
        config.application_name(STATS_APPLICATION);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("a runtime for PostgreSQL's statistics: {e}"))?;
        let client = runtime.block_on(async {
            let connected = tokio::time::timeout(LIMIT, config.connect(NoTls))
                .await
                .map_err(|_| format!("{db}: no connection within {LIMIT:?}"))?;
            let (client, connection) = connected.map_err(|e| format!("{db}: {e}"))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok::<_, String>(client)
        })?;
        let statements =
            runtime.block_on(client.query_opt("SELECT 1 FROM pg_stat_statements LIMIT 1", &[])).is_ok();
        Ok(PgStats { runtime, client, statements })
    }

    /// Whether read times can be had: `pg_stat_statements` is loaded and created.
    pub fn has_statements(&self) -> bool {
        self.statements
    }

    /// Connections open now whose `application_name` is one of `names`.
    pub fn connections(&self, names: &[String]) -> Result<u64, String> {
        let row = self
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE application_name = ANY($1)", &[&names])?;
        Ok(row.get::<_, i64>(0).max(0) as u64)
    }

    /// Forgets the statements counted so far (`pg_stat_statements_reset()`).
    pub fn reset_statements(&self) -> Result<(), String> {
        if !self.statements {
            return Err("pg_stat_statements is not created in this database".to_string());
        }
        self.query_one("SELECT pg_stat_statements_reset()::text", &[]).map(drop)
    }

    /// The reads of `content` counted since the last reset, whoever sent
    /// them (each driver's text of the query is a statement of its own).
    pub fn content_reads(&self) -> Result<StatementTimes, String> {
        if !self.statements {
            return Err("pg_stat_statements is not created in this database".to_string());
        }
        let row = self.query_one(
            "SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(total_exec_time), 0)::float8 \
             FROM pg_stat_statements \
             WHERE query ILIKE '%from content where id%' AND query NOT ILIKE '%pg_stat%'",
            &[],
        )?;
        Ok(StatementTimes { calls: row.get::<_, i64>(0).max(0) as u64, total_ms: row.get(1) })
    }

    fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<tokio_postgres::Row, String> {
        self.runtime.block_on(async {
            tokio::time::timeout(LIMIT, self.client.query_one(sql, params))
                .await
                .map_err(|_| format!("no answer within {LIMIT:?}"))?
                .map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mean_needs_a_call() {
        assert_eq!(StatementTimes { calls: 0, total_ms: 0.0 }.mean_ms(), None);
        assert_eq!(StatementTimes { calls: 4, total_ms: 0.1 }.mean_ms(), Some(0.025));
    }
}
