//! What a bench run produces, as data: one record per Test ID × Run ID, the
//! run's conditions, and the seed study's published figures beside them.
//! Serialized as `results.json` (`schema/bench-results.json`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::test_id::TestId;
use super::test_id::{HasTestId, MEASURED};
pub use crate::harness::conditions::Machine;
use crate::harness::placement::Placement;
use crate::harness::scrape::ServerFigures;
use crate::server::Endpoint;

/// The version of the `results.json` shape.
pub const SCHEMA_VERSION: u32 = 3;

/// One row of the seed study's table (Play 2.7 + Neo4j + Akka, best of two runs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeedRow {
    /// Test ID.
    pub test_id: TestId,
    /// Path.
    pub api: String,
    /// Requests per second.
    pub rps: f64,
    /// Mean response time (ms).
    pub mean_ms: f64,
    /// Max response time (ms).
    pub max_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
}

/// The seed study's published figures: the better of its two runs per Test ID.
pub fn seed_table() -> Vec<SeedRow> {
    [
        (1, "/test", 39059.0, 5.0, 1142.0, 16.0),
        (2, "/getData", 3900.0, 51.0, 1478.0, 159.0),
        (3, "/getDataAsync", 5137.0, 38.0, 1112.0, 75.0),
        (4, "/getDataAsync2", 3318.0, 60.0, 1170.0, 99.0),
        (5, "/getDataAkka", 3416.0, 58.0, 1117.0, 211.0),
        (7, "/getDataAkkaAsync", 4981.0, 40.0, 1170.0, 87.0),
        (8, "/getDataAkkaAsync2", 3370.0, 59.0, 1123.0, 94.0),
    ]
    .into_iter()
    .map(|(test_id, api, rps, mean_ms, max_ms, p99_ms)| SeedRow {
        test_id: TestId(test_id),
        api: api.to_string(),
        rps,
        mean_ms,
        max_ms,
        p99_ms,
    })
    .collect()
}

/// One run (Run ID) of one API.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    /// Run ID, from 1.
    pub run_id: u32,
    /// Completed requests per second (load generator).
    pub rps: f64,
    /// Mean response time (ms).
    pub mean_ms: f64,
    /// Max response time (ms).
    pub max_ms: f64,
    /// Median (ms).
    pub p50_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// 99.9th percentile (ms).
    pub p999_ms: f64,
    /// Requests completed (any status).
    pub completed: u64,
    /// Completed with 2xx/3xx.
    pub ok: u64,
    /// Completed with a status other than 2xx.
    pub non_2xx: u64,
    /// Requests without a response, by kind.
    pub errors: BTreeMap<String, u64>,
    /// Sum of `errors`.
    pub error_total: u64,
    /// Wall time of the load (s).
    pub duration_s: f64,
    /// CPU time the server used during the run (s).
    pub server_cpu_s: f64,
    /// Server CPU time per completed request (µs).
    pub server_cpu_per_request_us: f64,
    /// Server peak RSS so far (MiB).
    pub server_peak_rss_mib: f64,
    /// The server's most OS threads seen during the run (/proc, sampled every 250 ms).
    pub server_threads_max: Option<u64>,
    /// CPU time the database process used during the run (s); None when its
    /// process is not one the bench started (`--db bolt://…` of the user's).
    pub db_cpu_s: Option<f64>,
    /// Database CPU time per completed request (µs): with the server's, it
    /// says which process was saturated.
    pub db_cpu_per_request_us: Option<f64>,
    /// Toxiproxy's CPU time per completed request (µs), when the database
    /// was reached through the link (`--db-rtt`): what the proxy cost,
    /// apart from the server's own CPU per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_cpu_per_request_us: Option<f64>,
    /// On PostgreSQL: the most connections the server held open during the
    /// run, counted in `pg_stat_activity` by its `application_name` every 250 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_connections_max: Option<u64>,
    /// On PostgreSQL: the mean time one read took inside the database during
    /// the run (ms), from `pg_stat_statements`: the query's own time, without
    /// the round trip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_query_ms: Option<f64>,
    /// The server's own figures.
    pub server: ServerFigures,
    /// A JVM peer's heap and garbage collection during the run (`null` for
    /// blocklab, or when its perf counters cannot be read).
    #[serde(default)]
    pub jvm: Option<JvmFigures>,
    /// The load generator's JSON for this run, relative to the output folder.
    pub load_json: String,
}

/// What a JVM server's heap and collector did during one run, from its
/// hsperfdata counters (read every 250 ms; the counters `jstat -gc` prints).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JvmFigures {
    /// The most heap in use seen (MiB): live objects and garbage not collected yet.
    pub heap_peak_mib: f64,
    /// Stop-the-world collections during the run (young and full).
    pub gc_collections: u64,
    /// Their pause time (ms).
    pub gc_pause_ms: f64,
}

/// How a Test ID's runs ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Every run completed.
    Ok,
    /// The server did not start, died, or a run failed (the reason is beside it).
    Failed,
    /// Stopped by SIGINT/SIGTERM.
    Interrupted,
    /// The target does not serve this API (a peer without the endpoint).
    #[serde(rename = "not served")]
    NotServed,
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::NotServed => "not served",
        })
    }
}

/// One API (Test ID): a fresh server, `runs` loads.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TestRecord {
    /// The server measured: `blocklab`, or a peer's name (`play`).
    pub target: String,
    /// Test ID (the seed's, 9 and up for blocklab's own endpoints).
    pub test_id: TestId,
    /// Path.
    pub api: String,
    /// The execution model in a few words.
    pub model: String,
    /// How its runs ended.
    pub status: RunStatus,
    /// Why it failed, with the server's stderr tail.
    pub failure: Option<String>,
    /// The load its fresh server got before its measured runs, not counted
    /// (null: none, `--cold`, or it never started).
    #[serde(default)]
    pub warm: Option<TargetWarm>,
    /// The runs that completed.
    pub runs: Vec<RunRecord>,
}

/// The warm-up a fresh server got before its measured runs on a Test ID:
/// the same closed-loop load for every target, not counted (a JIT's
/// compilation, a pool's connections).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetWarm {
    /// Seconds of load.
    pub seconds: f64,
    /// Requests answered in it.
    pub requests: u64,
    /// Its rate over its last window's second half (req/s; null: nothing answered).
    pub rps: Option<f64>,
    /// Each window's rate over its second half (req/s), in order.
    #[serde(default)]
    pub windows_rps: Vec<f64>,
    /// Whether its rate stopped rising before `--warm` ran out.
    #[serde(default)]
    pub settled: bool,
}

impl TargetWarm {
    /// Whether neither of the last two `rates` is more than `rise` above the
    /// best before them: the server no longer gets faster under the load (one
    /// window alone is not enough: Play's JIT rose in bursts, 1542 → 2172 →
    /// 2293 → 2802 req/s, a pause of 6 % between two of them).
    pub fn has_settled(rates: &[f64], rise: f64) -> bool {
        if rates.len() < 3 {
            return false;
        }
        let (before, last) = rates.split_at(rates.len() - 2);
        let best = before.iter().copied().fold(0.0, f64::max);
        // A server that has answered nothing yet is still starting, not warm.
        best > 0.0 && last.iter().all(|r| *r <= best * (1.0 + rise))
    }

    /// In a few words, for the progress lines.
    pub fn summary(&self) -> String {
        let windows: Vec<String> = self.windows_rps.iter().map(|r| format!("{r:.0}")).collect();
        format!(
            "{:.0} s, {} requests{}{}",
            self.seconds,
            self.requests,
            if windows.len() > 1 {
                format!(", req/s by window {}", windows.join(" → "))
            } else {
                self.rps.map_or(String::new(), |r| format!(", {r:.0} req/s over its second half"))
            },
            if self.settled {
                " (stopped rising)"
            } else if windows.len() > 1 {
                " (still rising at --warm)"
            } else {
                ""
            }
        )
    }
}

/// How the matrix was run: every target warmed alike, then measured in
/// interleaved rounds, the others paused; or the seed's protocol (`--cold`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Protocol {
    /// `--cold`: each fresh server measured at once, as the seed did.
    pub cold: bool,
    /// Seconds of closed-loop load each fresh server got before its
    /// measured runs on a Test ID (0 with `--cold`).
    pub target_warm_s: f64,
    /// Why that length, in words.
    pub target_warm_why: String,
    /// The order of each round, in words (`run 1: blocklab, play; run 2:
    /// play, blocklab`): run N of every target before run N+1 of any, in
    /// alternating order.
    pub order: Vec<String>,
    /// Whether the servers not being measured were paused (SIGSTOP) meanwhile.
    pub paused: bool,
}

impl RunRecord {
    /// Its figures in one line, for the progress lines.
    pub fn summary(&self) -> String {
        format!(
            "{:.0} req/s, mean {:.1} ms, p99 {:.1} ms, max {:.0} ms, {} errors, {} non-2xx, server {:.0} µs/req{}",
            self.rps,
            self.mean_ms,
            self.p99_ms,
            self.max_ms,
            self.error_total,
            self.non_2xx,
            self.server_cpu_per_request_us,
            self.db_cpu_per_request_us.map_or(String::new(), |us| format!(", database {us:.0} µs/req")),
        )
    }
}

impl TestRecord {
    /// The run with the highest RPS (the seed reported the better of two).
    pub fn best(&self) -> Option<&RunRecord> {
        self.runs.iter().max_by(|a, b| a.rps.total_cmp(&b.rps))
    }

    /// The lowest and highest of a figure over its runs: the spread every
    /// comparison is read against.
    pub fn range(&self, figure: impl Fn(&RunRecord) -> f64) -> Option<Spread> {
        Spread::of(self.runs.iter().map(figure))
    }
}

/// The lowest and highest value of a figure across the runs it was made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The lowest.
    pub min: f64,
    /// The highest.
    pub max: f64,
    /// How many runs.
    pub runs: usize,
}

impl Spread {
    /// The spread of `values` (`None` when there are none).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        values.into_iter().filter(|v| v.is_finite()).fold(None, |acc, v| {
            Some(match acc {
                None => Spread { min: v, max: v, runs: 1 },
                Some(s) => Spread { min: s.min.min(v), max: s.max.max(v), runs: s.runs + 1 },
            })
        })
    }

    /// The spread of `a ÷ b`: from the lowest a over the highest b to the
    /// highest a over the lowest b.
    pub fn ratio(a: Spread, b: Spread) -> Option<Spread> {
        (b.min > 0.0).then(|| Spread { min: a.min / b.max, max: a.max / b.min, runs: a.runs.min(b.runs) })
    }

    /// Whether the two ranges share any value: if they do, no difference
    /// between them was measured.
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.min <= other.max && other.min <= self.max
    }

    /// `"(lo–hi)"` with `fmt`, or nothing for one run.
    pub fn range_text(&self, fmt: impl Fn(f64) -> String) -> String {
        if self.runs < 2 { String::new() } else { format!(" ({}–{})", fmt(self.min), fmt(self.max)) }
    }
}

/// Every parameter of the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Parameters {
    /// Test IDs run.
    pub apis: Vec<String>,
    /// Concurrent connections.
    pub connections: usize,
    /// Requests per run (0: timed runs, [`Parameters::run_s`]).
    pub requests: u64,
    /// Each run's length when the runs are timed (`--duration`); `None`: `requests` a run.
    #[serde(default)]
    pub run_s: Option<f64>,
    /// Runs per API.
    pub runs: u32,
    /// Always true: the seed used `ab -k`.
    pub keep_alive: bool,
    /// Database.
    pub db: String,
    /// Simulated round trip per read (ms).
    pub db_latency_ms: f64,
    /// blocklab's blocking client's connections (`--db-pool`; null: the embedded database).
    #[serde(default)]
    pub db_pool: Option<usize>,
    /// blocklab's non-blocking client's connections (`--db-async-connections`; null: the embedded database).
    #[serde(default)]
    pub db_async_connections: Option<usize>,
    /// blocklab's limit for one database read (`--db-timeout`, ms; null: the embedded database).
    #[serde(default)]
    pub db_timeout_ms: Option<f64>,
    /// blocklab's server stack (`--model`): `reactive` (hyper + axum) or `lean`.
    #[serde(default)]
    pub server_model: String,
    /// How the embedded database was read: `index` or `cypher` (null: a networked database).
    #[serde(default)]
    pub embedded_read: Option<String>,
    /// Content nodes.
    pub nodes: u64,
    /// HTTP workers asked for (null: the server's default, the cores it may use).
    pub workers_requested: Option<usize>,
    /// HTTP workers the servers actually ran.
    pub workers: Option<u64>,
    /// Actor dispatcher threads.
    pub actor_threads: Option<u64>,
    /// `--quick`.
    pub quick: bool,
}

impl Parameters {
    /// How long each run was: "8000 requests" or "3 s" (timed runs).
    pub fn run_length(&self) -> String {
        match self.run_s {
            Some(s) => format!("{s:.0} s"),
            None => format!("{} requests", self.requests),
        }
    }

    /// The load generator's stop flag for a run, as a user would type it.
    pub fn stop_flag(&self) -> String {
        match self.run_s {
            Some(s) => format!("-z {s:.0}s"),
            None => format!("-n {}", self.requests),
        }
    }
}

/// The conditions of the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Conditions {
    /// The machine.
    pub machine: Machine,
    /// The command that made this run (`blocklab bench …`, or `blocklab studies` for the main job).
    #[serde(default)]
    pub command: String,
    /// Where server and load ran.
    pub placement: Placement,
    /// Every parameter.
    pub parameters: Parameters,
    /// Compiler and crate versions.
    pub versions: BTreeMap<String, String>,
    /// The database, in words.
    pub database: String,
    /// The database's name and version, and where it ran
    /// (`Neo4j Community 5.26.19, managed, CPU 1`), as every output names it.
    pub database_name: String,
    /// How long the database was warmed before the matrix (s; 0: not warmed).
    pub db_warm_s: f64,
    /// How the warm-up went, window by window (`null`: not warmed).
    #[serde(default)]
    pub warm_up: Option<WarmUp>,
    /// The servers measured, each with its versions.
    pub targets: Vec<String>,
    /// Each peer's database client pool, as its manifest gives it (`db_pool`:
    /// a number of connections first), by target name.
    #[serde(default)]
    pub db_pools: BTreeMap<String, String>,
    /// Each peer's limit on the reads in flight, by target and path: its
    /// manifest's `db_limits`, else its pool (`--peer-pool` or `db_pool`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub db_limits: BTreeMap<String, BTreeMap<String, DbLimit>>,
    /// The link between the servers and the database (`--db-rtt`; null: reached directly).
    #[serde(default)]
    pub link: Option<super::link::LinkRecord>,
    /// The link the stalls ran through when the matrix read the database
    /// directly (`--db-stall` without `--db-rtt`: opened after the matrix,
    /// no delay on it); null otherwise.
    #[serde(default)]
    pub stall_link: Option<super::link::LinkRecord>,
    /// Each server's family (blocklab, jvm, go, python, node, other), as the charts draw it.
    #[serde(default)]
    pub families: BTreeMap<String, crate::page::Family>,
    /// How the matrix was run (null: an older run).
    #[serde(default)]
    pub protocol: Option<Protocol>,
    /// The database's own ceiling for the read, once per client it was
    /// measured with (blocklab's own driver and the Java driver on Neo4j),
    /// when the bench started the database and the client is there (empty
    /// otherwise). Each target's shares are taken against its own driver's
    /// ([`Conditions::ceiling_client`]).
    #[serde(default)]
    pub ceilings: Vec<ClientCeiling>,
    /// The client whose ceiling each target's shares are taken against, by
    /// target name (a target's own driver when one was measured).
    #[serde(default)]
    pub ceiling_clients: BTreeMap<String, super::ceiling::CeilingClient>,
}

/// One client's ceiling, measured before the matrix and again after it:
/// the two bracket the matrix, and shares are taken against the higher.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClientCeiling {
    /// The client it was measured with.
    pub client: super::ceiling::CeilingClient,
    /// Measured after the warm-up, before the matrix (null: failed, with `failure`).
    pub before: Option<super::ceiling::Ceiling>,
    /// Measured again after the matrix (null: not measured).
    #[serde(default)]
    pub after: Option<super::ceiling::Ceiling>,
    /// Why it was not measured, when it was not.
    #[serde(default)]
    pub failure: Option<String>,
}

impl ClientCeiling {
    /// The measurement shares are taken against: the higher of the two (a
    /// database still warming, or slowed by the matrix, gives the lower).
    pub fn used(&self) -> Option<&super::ceiling::Ceiling> {
        [&self.before, &self.after]
            .into_iter()
            .flatten()
            .filter(|c| c.reads_per_s > 0.0)
            .max_by(|a, b| a.reads_per_s.total_cmp(&b.reads_per_s))
    }

    /// Reads per second of [`ClientCeiling::used`].
    pub fn reads_per_s(&self) -> Option<f64> {
        self.used().map(|c| c.reads_per_s)
    }

    /// The change from before the matrix to after, as a fraction of the
    /// first (`+0.20`: 20 % more reads/s after).
    pub fn drift(&self) -> Option<f64> {
        let (before, after) = (self.before.as_ref()?, self.after.as_ref()?);
        (before.reads_per_s > 0.0).then(|| after.reads_per_s / before.reads_per_s - 1.0)
    }
}

impl BenchResults {
    /// The family `target` is drawn in: blocklab's own server, or a peer by
    /// the runtime its record names (`conditions.families`).
    pub fn family(&self, target: &str) -> crate::page::Family {
        if target == BLOCKLAB {
            return crate::page::Family::Blocklab;
        }
        self.conditions.families.get(target).copied().unwrap_or(crate::page::Family::Other)
    }
}

impl Conditions {
    /// The database's engine in words (`Neo4j`, `PostgreSQL`), or `the
    /// database` when it is neither.
    pub fn database_label(&self) -> &'static str {
        crate::harness::database::Engine::ALL
            .into_iter()
            .find(|e| self.database_name.starts_with(e.label()))
            .map_or("the database", |e| e.label())
    }

    /// The ceiling of `client`, when it was measured.
    pub fn ceiling_of(&self, client: super::ceiling::CeilingClient) -> Option<&ClientCeiling> {
        self.ceilings.iter().find(|c| c.client == client)
    }

    /// The client whose ceiling `target`'s shares are taken against.
    pub fn ceiling_client(&self, target: &str) -> Option<super::ceiling::CeilingClient> {
        self.ceiling_clients.get(target).copied()
    }

    /// The ceiling `target`'s shares are taken against (its driver's).
    pub fn ceiling_for(&self, target: &str) -> Option<&ClientCeiling> {
        self.ceiling_of(self.ceiling_client(target)?)
    }

    /// `target`'s reads per second as a share of its driver's ceiling.
    pub fn share(&self, target: &str, reads_per_s: f64) -> Option<f64> {
        self.ceiling_for(target)?.reads_per_s().map(|c| reads_per_s / c)
    }

    /// The highest ceiling measured, by any client: the database's limit as
    /// far as the bench knows it (the stalls' rate is taken from it).
    pub fn ceiling_reads_per_s(&self) -> Option<f64> {
        self.ceilings.iter().filter_map(ClientCeiling::reads_per_s).reduce(f64::max)
    }
}

/// How the database was warmed: load in windows until its CPU per read
/// stopped falling, or until `--db-warm` ran out.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WarmUp {
    /// Seconds of load in all.
    pub seconds: f64,
    /// The database's CPU per read in each window (µs), in order.
    pub cpu_per_read_us: Vec<f64>,
    /// Whether its CPU per read settled (the last [`WARM_WINDOWS`] windows
    /// within [`WARM_SETTLED`] of their mean) before the maximum ran out.
    pub settled: bool,
    /// The maximum (`--db-warm`), s.
    pub max_s: f64,
}

/// How close the last windows' CPU per read must be to their mean for the
/// database to count as warm.
pub const WARM_SETTLED: f64 = 0.05;
/// How many windows in a row must agree.
pub const WARM_WINDOWS: usize = 3;

impl WarmUp {
    /// Whether the windows so far are warm: the last [`WARM_WINDOWS`] within
    /// [`WARM_SETTLED`] of their mean.
    pub fn is_settled(costs: &[f64]) -> bool {
        if costs.len() < WARM_WINDOWS {
            return false;
        }
        let last = &costs[costs.len() - WARM_WINDOWS..];
        let mean = last.iter().sum::<f64>() / WARM_WINDOWS as f64;
        mean > 0.0 && last.iter().all(|c| (c - mean).abs() <= WARM_SETTLED * mean)
    }

    /// How much the CPU per read still fell over the last windows, as a
    /// fraction of the first of them (`0.12`: 12 % lower at the end; null
    /// with fewer windows).
    pub fn still_falling(&self) -> Option<f64> {
        let costs = &self.cpu_per_read_us;
        let n = costs.len().min(WARM_WINDOWS);
        let (first, last) = (costs.get(costs.len().checked_sub(n)?)?, costs.last()?);
        (n >= 2 && *first > 0.0).then(|| 1.0 - last / first)
    }
}

/// A share of the database's ceiling above which a figure is not read as one:
/// a server cannot read faster than the database answers a bare driver.
pub const SHARE_LIMIT: f64 = 1.05;

/// An API's best RPS as a fraction of `/test`, beside the seed's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NormalizedRow {
    /// Test ID.
    pub test_id: TestId,
    /// Path.
    pub api: String,
    /// blocklab: best RPS / best `/test` RPS.
    pub blocklab: Option<f64>,
    /// Seed: RPS / `/test` RPS (Play).
    pub seed: Option<f64>,
}

/// Everything a bench run produced (`results.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchResults {
    /// Always `blocklab/bench-results`.
    pub schema: String,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// blocklab's version.
    pub tool_version: String,
    /// Start, RFC 3339 UTC.
    pub started_at: String,
    /// End, RFC 3339 UTC.
    pub finished_at: String,
    /// Wall time (s).
    pub wall_s: f64,
    /// True if stopped by ctrl-c / SIGTERM before the matrix was done.
    pub interrupted: bool,
    /// Conditions.
    pub conditions: Conditions,
    /// One record per Test ID, in order.
    pub tests: Vec<TestRecord>,
    /// The seed's published figures.
    pub seed: Vec<SeedRow>,
    /// Best RPS normalized to `/test`, beside the seed's.
    pub normalized: Vec<NormalizedRow>,
    /// Each target's database endpoints through the stall of `--db-stall` (empty: none asked for).
    #[serde(default)]
    pub stalls: Vec<super::stall::StallRecord>,
    /// Each target's database endpoints through the link's faults of `--db-faults` (empty: none asked for).
    #[serde(default)]
    pub faults: Vec<super::faults::FaultRecord>,
    /// With several round trips (`--db-rtt 0,2,10ms`): the matrix at each,
    /// in order; `tests` is the first of them (empty: one round trip).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<CurveStep>,
}

/// The most reads a peer's endpoint holds in flight, and what holds them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DbLimit {
    /// How many.
    pub reads: usize,
    /// What holds them, in words.
    pub what: String,
    /// Whether they are a connection pool's (one `--peer-pool` sets).
    #[serde(default)]
    pub pool: bool,
}

/// The matrix at one round trip of the curve.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CurveStep {
    /// The round trip asked for (ms).
    pub rtt_ms: f64,
    /// The link as probed when it was set to this round trip (first Test ID).
    pub link: super::link::LinkRecord,
    /// Every target's record of every Test ID at this round trip.
    pub tests: Vec<TestRecord>,
}

pub use crate::harness::target::BLOCKLAB;

impl BenchResults {
    /// The record of `target`'s `test_id`.
    pub fn test(&self, target: &str, test_id: TestId) -> Option<&TestRecord> {
        self.tests.iter().find(|t| t.target == target && t.test_id == test_id)
    }

    /// The targets that ran, in order.
    pub fn target_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for t in &self.tests {
            if !names.contains(&t.target.as_str()) {
                names.push(&t.target);
            }
        }
        names
    }

    /// Computes `normalized` from `tests` and `seed`.
    pub fn normalize(tests: &[TestRecord], seed: &[SeedRow]) -> Vec<NormalizedRow> {
        let tests: Vec<&TestRecord> = tests.iter().filter(|t| t.target == BLOCKLAB).collect();
        let ours_test = tests.iter().find(|t| t.test_id == TestId(1)).and_then(|t| t.best()).map(|r| r.rps);
        let seed_test = seed.iter().find(|s| s.test_id == TestId(1)).map(|s| s.rps);
        tests
            .iter()
            .map(|t| NormalizedRow {
                test_id: t.test_id,
                api: t.api.clone(),
                blocklab: match (t.best(), ours_test) {
                    (Some(best), Some(base)) if base > 0.0 => Some(best.rps / base),
                    _ => None,
                },
                seed: match (seed.iter().find(|s| s.test_id == t.test_id), seed_test) {
                    (Some(row), Some(base)) => Some(row.rps / base),
                    _ => None,
                },
            })
            .collect()
    }
}

/// Database reads one request of Test ID `id` makes (0 for an unknown one).
pub fn reads_of_test(id: TestId) -> f64 {
    MEASURED.iter().find(|e| e.test_id() == Some(id)).map_or(0.0, |e| reads_per_request(*e))
}

/// Database reads one request of `endpoint` makes (the `…2` endpoints read twice, in sequence).
pub fn reads_per_request(endpoint: Endpoint) -> f64 {
    match endpoint {
        Endpoint::Test => 0.0,
        Endpoint::GetDataAsync2 | Endpoint::GetDataAkkaAsync2 => 2.0,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_up_settles_when_two_windows_in_a_row_rise_no_more_than_10_percent_over_the_best_before() {
        // Play's /getData, 2026-12-07: a pause of 6 % between two bursts is not the end.
        assert!(!TargetWarm::has_settled(&[1542.0, 2172.0, 2293.0], 0.10));
        assert!(TargetWarm::has_settled(&[2172.0, 2293.0, 2350.0, 2300.0], 0.10));
        // A drop after the best counts as not rising.
        assert!(TargetWarm::has_settled(&[566.0, 917.0, 712.0, 900.0], 0.10));
        assert!(!TargetWarm::has_settled(&[99524.0, 101221.0], 0.10), "two windows are not enough");
        // Play on /getDataAkkaAsync2, 2026-12-07: its first window answered nothing in its second half.
        assert!(
            !TargetWarm::has_settled(&[0.0, 0.0, 0.0], 0.10),
            "a server that answers nothing is not warm"
        );
        assert!(!TargetWarm::has_settled(&[0.0, 140.0, 366.0], 0.10));
    }

    fn test(id: u32, rps: &[f64]) -> TestRecord {
        TestRecord {
            target: BLOCKLAB.to_string(),
            test_id: TestId(id),
            api: format!("/api{id}"),
            model: String::new(),
            status: RunStatus::Ok,
            failure: None,
            warm: None,
            runs: rps
                .iter()
                .enumerate()
                .map(|(i, r)| RunRecord {
                    run_id: i as u32 + 1,
                    rps: *r,
                    mean_ms: 0.0,
                    max_ms: 0.0,
                    p50_ms: 0.0,
                    p99_ms: 0.0,
                    p999_ms: 0.0,
                    completed: 0,
                    ok: 0,
                    non_2xx: 0,
                    errors: BTreeMap::new(),
                    error_total: 0,
                    duration_s: 0.0,
                    server_cpu_s: 0.0,
                    server_cpu_per_request_us: 0.0,
                    server_peak_rss_mib: 0.0,
                    server_threads_max: None,
                    db_cpu_s: None,
                    db_cpu_per_request_us: None,
                    link_cpu_per_request_us: None,
                    db_connections_max: None,
                    db_query_ms: None,
                    server: ServerFigures::default(),
                    jvm: None,
                    load_json: String::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn normalization_uses_the_best_run_of_each_side() {
        let tests = vec![test(1, &[8000.0, 10000.0]), test(2, &[900.0, 1000.0]), test(9, &[5000.0])];
        let rows = BenchResults::normalize(&tests, &seed_table());
        assert_eq!(rows[0].blocklab, Some(1.0));
        assert_eq!(rows[0].seed, Some(1.0));
        assert_eq!(rows[1].blocklab, Some(0.1));
        assert!((rows[1].seed.unwrap() - 3900.0 / 39059.0).abs() < 1e-12);
        assert_eq!(rows[2].seed, None, "Test ID 9 has no seed figure");
    }

    #[test]
    fn the_seed_table_is_the_published_one() {
        let seed = seed_table();
        assert_eq!(seed.iter().map(|s| s.test_id.0).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 7, 8]);
        assert_eq!(seed[2].rps, 5137.0);
    }
}
