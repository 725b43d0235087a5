//! The pools behind study 1's rates, and Little's law: reads in flight =
//! reads per second × time per read. Across a link (`--db-rtt`) every read
//! takes at least a round trip, so a rate needs that many reads in flight,
//! and the connections and threads that hold them cap it. The reading
//! weighs each rate against the limit its model meets (blocklab's HTTP
//! workers, `--db-pool`, `--db-async-connections`; a peer's driver pool,
//! from its manifest) and says the limit set the rate only when the reads in
//! flight reach it.

use super::results::{BLOCKLAB, BenchResults, Parameters, TestRecord, reads_per_request};
use super::tables::rps;
use super::test_id::HasTestId;
use crate::server::Endpoint;

/// Reads in flight at this share of a limit or more: the limit set the rate.
const AT_LIMIT: f64 = 0.8;

/// The most reads one target's endpoint can hold in flight, and what holds them.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// How many.
    pub reads: f64,
    /// What they are, in words (`its 4 non-blocking connections (--db-async-connections 4)`).
    pub what: String,
}

/// blocklab's limit for `endpoint`: what each of its models holds a read with.
pub fn blocklab_limit(p: &Parameters, endpoint: Endpoint) -> Option<Limit> {
    let (pool, async_connections) = (p.db_pool?, p.db_async_connections?);
    let workers = p.workers.unwrap_or(1).max(1) as usize;
    let threads = |n: usize| if n == 1 { "thread".to_string() } else { "threads".to_string() };
    let (reads, what) = match endpoint {
        Endpoint::GetData => (
            workers.min(pool),
            format!("its {workers} HTTP worker {}, each blocked for a whole read", threads(workers)),
        ),
        Endpoint::GetDataAkka => (
            workers.min(4).min(pool),
            format!(
                "its {workers} HTTP worker {} blocked on the 4 blocking actors' replies",
                threads(workers)
            ),
        ),
        Endpoint::GetDataSpawnBlocking => {
            (pool, format!("the blocking client's {pool} connections (--db-pool {pool})"))
        }
        Endpoint::GetDataAsync
        | Endpoint::GetDataAsync2
        | Endpoint::GetDataAkkaAsync
        | Endpoint::GetDataAkkaAsync2 => (
            async_connections,
            format!(
                "the non-blocking client's {async_connections} connections (--db-async-connections \
                 {async_connections})"
            ),
        ),
        _ => return None,
    };
    Some(Limit { reads: reads as f64, what })
}

/// A peer's limit: its manifest's `db_limits` for the endpoint, else its
/// driver's pool, as its manifest gives it (`db_pool`).
pub fn peer_limit(results: &BenchResults, target: &str, endpoint: Endpoint) -> Option<Limit> {
    if let Some(limit) = results.conditions.db_limits.get(target).and_then(|l| l.get(endpoint.path())) {
        return Some(Limit { reads: limit.reads as f64, what: limit.what.clone() });
    }
    let pool = results.conditions.db_pools.get(target)?;
    let reads: f64 = pool.split_whitespace().next()?.parse().ok()?;
    let blocks = if endpoint == Endpoint::GetData { "; each read also blocks a request thread" } else { "" };
    Some(Limit { reads, what: format!("its driver's pool of {pool}{blocks}") })
}

/// One line naming every pool of the run: blocklab's two clients and each peer's.
pub fn pools_line(results: &BenchResults) -> Option<String> {
    let p = &results.conditions.parameters;
    let mut parts = Vec::new();
    if let (Some(pool), Some(connections)) = (p.db_pool, p.db_async_connections) {
        parts.push(format!(
            "blocklab: blocking reads on a pool of {pool} connections (--db-pool), non-blocking reads on \
             {connections} (--db-async-connections)"
        ));
    }
    for (target, pool) in &results.conditions.db_pools {
        parts.push(format!("{target}: {pool}"));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The sentence for one rate: `reads_per_s` at `read_ms` per read (a read
/// alone through the link: a lower bound under load) against `limit`.
pub fn in_flight_sentence(who: &str, reads_per_s: f64, read_ms: f64, limit: Option<&Limit>) -> String {
    let in_flight = reads_per_s * read_ms / 1000.0;
    let head =
        format!("{who}: {} reads/s × {read_ms:.2} ms ≥ {in_flight:.1} reads in flight", rps(reads_per_s));
    match limit {
        None => format!("{head}."),
        Some(l) if in_flight > 1.05 * l.reads => format!(
            "{head}, more than its limit of {} ({}) can hold: its reads took less than {read_ms:.2} ms under load, \
             so the probe's time is not a bound here and no limit is named.",
            l.reads, l.what
        ),
        Some(l) if in_flight >= AT_LIMIT * l.reads => format!(
            "{head}, against at most {} ({}): the limit set this rate (it allows {} reads/s at {read_ms:.2} ms a read).",
            l.reads,
            l.what,
            rps(l.reads * 1000.0 / read_ms)
        ),
        Some(l) => {
            format!("{head}, under its limit of {} ({}): the limit did not set this rate.", l.reads, l.what)
        }
    }
}

/// The reading's sentences on pools: which pools ran, and, across a link,
/// Little's law for each target's database endpoints.
pub fn sentences(results: &BenchResults) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(line) = pools_line(results) {
        out.push(format!("Pools: {line}."));
    }
    let Some(link) = &results.conditions.link else { return out };
    let read_ms = link.least_read_ms();
    if read_ms <= 0.0 {
        return out;
    }
    out.push(format!(
        "Across the link (RTT {} ms asked, {:.2} ms measured), one read alone takes {:.2} ms (median) and never \
         less than {read_ms:.2} ms, so by Little's law (reads in flight = rate × time per read) each rate below \
         needs at least rate × {read_ms:.2} ms reads in flight; a read under load takes longer, never shorter.",
        link.rtt_ms,
        link.measured_rtt_ms(),
        link.linked_read_ms
    ));
    let p = &results.conditions.parameters;
    for test in results.tests.iter().filter(|t| !t.runs.is_empty()) {
        let Some(endpoint) = endpoint_of(test) else { continue };
        let per_request = reads_per_request(endpoint);
        let Some(best) = test.best().filter(|_| per_request > 0.0) else { continue };
        let limit = if test.target == BLOCKLAB {
            blocklab_limit(p, endpoint)
        } else {
            peer_limit(results, &test.target, endpoint)
        };
        let who = format!("{} {}", test.target, test.api);
        out.push(in_flight_sentence(&who, best.rps * per_request, read_ms, limit.as_ref()));
    }
    out
}

fn endpoint_of(test: &TestRecord) -> Option<Endpoint> {
    endpoint_of_id(test.test_id)
}

/// The measured endpoint of a Test ID.
pub fn endpoint_of_id(test_id: super::test_id::TestId) -> Option<Endpoint> {
    super::test_id::MEASURED.into_iter().find(|e| e.test_id() == Some(test_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_set_by_its_limit_only_when_its_reads_in_flight_reach_it() {
        let four = Limit { reads: 4.0, what: "4 connections".to_string() };
        // 2,600 reads/s at 1.4 ms: 3.6 in flight of 4, the connections set it.
        let s = in_flight_sentence("blocklab /getDataAsync", 2600.0, 1.4, Some(&four));
        assert!(s.contains("≥ 3.6 reads in flight") && s.contains("the limit set this rate"), "{s}");
        assert!(s.contains("allows 2,857 reads/s") || s.contains("allows 2857 reads/s"), "{s}");
        // 1,000 reads/s at 1.4 ms: 1.4 in flight, well under 4.
        let s = in_flight_sentence("blocklab /getDataAsync", 1000.0, 1.4, Some(&four));
        assert!(s.contains("≥ 1.4 reads in flight") && s.contains("did not set this rate"), "{s}");
        assert!(in_flight_sentence("x", 100.0, 1.0, None).ends_with("≥ 0.1 reads in flight."));
        // More in flight than the limit can hold: the time per read was not a bound, so no limit is named.
        let s = in_flight_sentence(
            "blocklab /getData",
            523.0,
            2.21,
            Some(&Limit { reads: 1.0, what: "1 worker".into() }),
        );
        assert!(
            s.contains("more than its limit of 1 (1 worker) can hold") && !s.contains("set this rate"),
            "{s}"
        );
    }

    #[test]
    fn each_blocklab_model_meets_its_own_limit() {
        let p: Parameters = serde_json::from_value(serde_json::json!({
            "apis": [], "connections": 200, "requests": 1, "runs": 1, "keep_alive": true, "db": "bolt://x:1",
            "db_latency_ms": 0.0, "nodes": 10, "workers_requested": null, "workers": 1, "actor_threads": 2,
            "quick": false, "db_pool": 16, "db_async_connections": 4
        }))
        .unwrap();
        let reads = |e| blocklab_limit(&p, e).map(|l| l.reads);
        assert_eq!(reads(Endpoint::GetData), Some(1.0));
        assert_eq!(reads(Endpoint::GetDataAkka), Some(1.0));
        assert_eq!(reads(Endpoint::GetDataAsync), Some(4.0));
        assert_eq!(reads(Endpoint::GetDataAkkaAsync2), Some(4.0));
        assert_eq!(reads(Endpoint::GetDataSpawnBlocking), Some(16.0));
        assert_eq!(reads(Endpoint::Test), None);
    }
}
