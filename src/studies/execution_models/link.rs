//! Study 1's database one network hop away (`bench --db-rtt`): Toxiproxy
//! stands between the database and every process that reads it during the
//! matrix (each server, and the ceiling client), with a round trip put on
//! the link, half of it each way. The database is seeded and warmed
//! directly, before the link is opened: the warm-up is about its JIT, not
//! the network.
//!
//! The round trip the reads really got is measured, not assumed: sequential
//! reads, one at a time, timed straight to the database and then through
//! the link; the difference of their medians is the RTT the link added.
//! Toxiproxy's own CPU is read from /proc around every run, so a report can
//! tell the proxy's cost from the server's.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::db::{DbSettings, DbUrl, EmbeddedRead};
use crate::harness::target::Targets;
use crate::harness::toxiproxy::{Proxy, Toxiproxy, upstream_of};

/// Reads timed each way by the probe (after [`PROBE_UNTIMED`] that open the connection).
pub const PROBE_READS: usize = 40;
/// Reads before the timed ones: the connection's handshake and the first query's plan.
const PROBE_UNTIMED: usize = 5;

/// The link as `results.json` keeps it (`conditions.link`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LinkRecord {
    /// The proxy in words: `Toxiproxy 2.5.0 (pid N, CPU 1)`.
    pub proxy: String,
    /// Toxiproxy's version, as its API gives it.
    pub version: String,
    /// The round trip asked for (`--db-rtt`, ms).
    pub rtt_ms: f64,
    /// Reads timed each way.
    pub probe_reads: usize,
    /// The median time of one read straight to the database (ms).
    pub direct_read_ms: f64,
    /// The median time of one read through the link (ms).
    pub linked_read_ms: f64,
    /// The fastest read through the link (ms): the lower bound of a read's
    /// time that Little's law is applied with (0: not recorded).
    #[serde(default)]
    pub linked_read_min_ms: f64,
}

impl LinkRecord {
    /// The round trip the link really added to a read (ms): the difference of the medians.
    pub fn measured_rtt_ms(&self) -> f64 {
        self.linked_read_ms - self.direct_read_ms
    }

    /// The least time a read through the link takes (ms): the fastest probe
    /// read (a read under load takes longer, never shorter).
    pub fn least_read_ms(&self) -> f64 {
        if self.linked_read_min_ms > 0.0 { self.linked_read_min_ms } else { self.linked_read_ms }
    }

    /// One line for a report's conditions.
    pub fn describe(&self) -> String {
        format!(
            "{}; RTT asked {} ms (half each way), measured {:.2} ms: one read {:.2} ms through the link \
             against {:.2} ms directly (medians of {} sequential reads each)",
            self.proxy,
            fmt_ms(self.rtt_ms),
            self.measured_rtt_ms(),
            self.linked_read_ms,
            self.direct_read_ms,
            self.probe_reads
        )
    }
}

/// Milliseconds as given: `5`, not `5.0`; `0.5` as it is.
pub fn fmt_ms(ms: f64) -> String {
    if ms.fract() == 0.0 { format!("{ms:.0}") } else { format!("{ms}") }
}

/// A running link: Toxiproxy, its one proxy in front of the database, and
/// what was measured of it. Dropping it stops Toxiproxy.
pub struct Link {
    toxiproxy: Toxiproxy,
    proxy: Proxy,
    url: DbUrl,
    /// What the reports keep.
    pub record: LinkRecord,
}

impl Link {
    /// Starts Toxiproxy (pinned to `cpus` when given), puts a proxy in front
    /// of `db` with a round trip of `rtt`, and measures what it adds. The
    /// error says why (Toxiproxy not built or not started, the API refused,
    /// the database did not answer a probe read).
    pub fn open(
        targets: &Targets,
        db: &DbUrl,
        rtt: Duration,
        nodes: u64,
        settings: DbSettings,
        cpus: Option<&str>,
    ) -> Result<Link, String> {
        let toxiproxy = Toxiproxy::start(targets, cpus)?;
        let proxy = toxiproxy.proxy("database", &upstream_of(&db.full_url())?)?;
        proxy.set_rtt(rtt)?;
        let url: DbUrl = proxy.url_for(&db.full_url())?.parse()?;
        let record = probe(&toxiproxy, db, &url, rtt, nodes, settings)?;
        Ok(Link { toxiproxy, proxy, url, record })
    }

    /// Puts another round trip on the link (the curve's next one) and
    /// measures it again: `record` becomes the new one's.
    pub fn change_rtt(
        &mut self,
        db: &DbUrl,
        rtt: Duration,
        nodes: u64,
        settings: DbSettings,
    ) -> Result<&LinkRecord, String> {
        self.proxy.set_rtt(rtt)?;
        self.record = probe(&self.toxiproxy, db, &self.url, rtt, nodes, settings)?;
        Ok(&self.record)
    }

    /// The database's URL through the link: what the servers and the ceiling client get.
    pub fn url(&self) -> &DbUrl {
        &self.url
    }

    /// The proxy, whose toxics can change during a run.
    pub fn proxy(&self) -> &Proxy {
        &self.proxy
    }

    /// Toxiproxy's CPU time so far (user + system), from /proc.
    pub fn cpu_time(&self) -> Option<Duration> {
        self.toxiproxy.cpu_time()
    }

    /// `Err(reason)` if Toxiproxy has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        self.toxiproxy.check_alive()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.toxiproxy.stop();
    }
}

/// What the link at `rtt` adds to one read: reads timed straight to `db`
/// and then through `url`, the link's end.
fn probe(
    toxiproxy: &Toxiproxy,
    db: &DbUrl,
    url: &DbUrl,
    rtt: Duration,
    nodes: u64,
    settings: DbSettings,
) -> Result<LinkRecord, String> {
    let (direct, _) = timed_reads(db, nodes, settings).map_err(|e| format!("probing {db} directly: {e}"))?;
    let (linked, fastest) =
        timed_reads(url, nodes, settings).map_err(|e| format!("probing {db} through the link: {e}"))?;
    Ok(LinkRecord {
        proxy: toxiproxy.describe(),
        version: toxiproxy.version().to_string(),
        rtt_ms: rtt.as_secs_f64() * 1000.0,
        probe_reads: PROBE_READS,
        direct_read_ms: direct.as_secs_f64() * 1000.0,
        linked_read_ms: linked.as_secs_f64() * 1000.0,
        linked_read_min_ms: fastest.as_secs_f64() * 1000.0,
    })
}

/// The median and the fastest time of one read of `db`, sequential reads
/// through one connection of its non-blocking client (the first
/// [`PROBE_UNTIMED`] not timed).
fn timed_reads(db: &DbUrl, nodes: u64, settings: DbSettings) -> Result<(Duration, Duration), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("a runtime for the probe: {e}"))?;
    let settings = DbSettings { pool: 1, async_connections: 1, ..settings };
    runtime.block_on(async {
        let graph = crate::db::open(db, nodes, Duration::ZERO, settings, EmbeddedRead::default())
            .await
            .map_err(|e| e.to_string())?;
        let mut times = Vec::with_capacity(PROBE_READS);
        for i in 0..PROBE_UNTIMED + PROBE_READS {
            let id = 1 + (i as u64 % nodes.max(1)) as i64;
            let started = Instant::now();
            let content = graph.read(id).await.map_err(|e| format!("read {id}: {e}"))?;
            if content.id != id {
                return Err(format!("asked for node {id}, got {}", content.id));
            }
            if i >= PROBE_UNTIMED {
                times.push(started.elapsed());
            }
        }
        times.sort();
        Ok((times[times.len() / 2], times[0]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_rtt_is_the_difference_of_the_medians() {
        let record = LinkRecord {
            proxy: "Toxiproxy 2.5.0 (pid 1, CPU 1)".to_string(),
            version: "2.5.0".to_string(),
            rtt_ms: 1.0,
            probe_reads: PROBE_READS,
            direct_read_ms: 0.4,
            linked_read_ms: 1.55,
            linked_read_min_ms: 1.3,
        };
        assert!((record.measured_rtt_ms() - 1.15).abs() < 1e-9);
        assert_eq!(record.least_read_ms(), 1.3);
        assert_eq!(
            record.describe(),
            "Toxiproxy 2.5.0 (pid 1, CPU 1); RTT asked 1 ms (half each way), measured 1.15 ms: one read \
             1.55 ms through the link against 0.40 ms directly (medians of 40 sequential reads each)"
        );
    }
}
