//! `blocklab load`: an HTTP load generator that is as fast as wrk, as
//! faithful as wrk2 and as readable as ab.
//!
//! * [`plan`] — the validated [`LoadPlan`]: target, connections, when to
//!   stop, closed or open loop.
//! * [`schedule`] — the open loop's due times: a constant rate or stages.
//! * [`engine`] — the threads, each a single-threaded tokio runtime owning its
//!   share of the connections (as wrk's threads do), and the per-connection
//!   loop that schedules, sends and records.
//! * [`request`] — the requests a run sends (defaults, `-H`, body), encoded
//!   once per run.
//! * [`targets`] — `--urls FILE`: several requests in vegeta's targets format.
//! * [`client`] — one HTTP/1.1 connection on blocklab's own wire
//!   ([`crate::http1`], httparse), plain or TLS, and how every failure is
//!   classified into an [`ErrorKind`] that gets counted.
//! * [`http2`] — `--h2`: one HTTP/2 connection on the `h2` crate, its
//!   streams' exchanges, and how an h2 failure is classified.
//! * [`tls`] — `https://` through rustls: the roots trusted, the handshake,
//!   and the reason a handshake failed.
//! * [`outcome`] — what one thread recorded ([`ThreadStats`]) and the merged
//!   [`RunResult`] with its HdrHistograms.
//! * [`timeline`] — the run second by second, collected from the threads.
//! * [`hdr_log`] — `--hdr-log`: the latencies as an HdrHistogram interval log.
//! * [`merge`] — one report from the JSON results of simultaneous runs.
//! * [`metric`] — the figures thresholds and comparisons speak of.
//! * [`thresholds`] — `--fail-if`: conditions that fail a run (exit 1).
//! * [`compare`] — `blocklab load compare`: two runs side by side, and the
//!   regressions past `--max-regression`.
//! * [`html`], [`charts`] — `--html`: the run as one self-contained page.
//! * [`report`] — the ab-style text summary and the versioned JSON document
//!   (`schema/load-result.json`).
//!
//! Nothing goes missing: every request the plan starts ends as exactly one of
//! *completed* (a response, any status), *error* (by kind) or *in flight at
//! the deadline*, and `sent = completed + errors + in_flight` is checked and
//! printed.

pub mod args;
pub mod charts;
pub mod client;
pub mod compare;
pub mod counters;
pub mod engine;
pub mod hdr_log;
pub mod html;
pub mod http2;
pub mod merge;
pub mod metric;
pub mod outcome;
pub mod plan;
pub mod progress;
pub mod report;
pub mod request;
pub mod schedule;
pub mod targets;
pub mod thresholds;
pub mod timeline;
pub mod tls;

pub use client::ErrorKind;
pub use engine::run;
pub use outcome::{RunResult, ThreadStats};
pub use plan::{LoadPlan, Stop, Target};
