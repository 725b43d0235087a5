//! blocklab: a laboratory for one question — what do blocking calls, thread
//! pools and actors do to a web service's throughput, latency and robustness,
//! and what does the non-blocking alternative buy?
//!
//! # Layout
//!
//! * [`cli`] — the command line: raw flags, then validated plans.
//! * [`graph`] — the Content dataset, the one Cypher query, the
//!   [`graph::GraphBackend`] trait (a blocking and a non-blocking read) and the
//!   embedded Grafeo backend with its simulated round trip.
//! * [`server`] — `blocklab serve`: the router ([`server::app`]), one handler
//!   per execution model, the ractor actor system on its own executor
//!   ([`server::actors`]), the runtimes and their probes
//!   ([`server::runtime`]), `/metrics` ([`server::metrics`]), and the accept
//!   loop with graceful shutdown ([`server::serve`]).
//! * [`load`] — `blocklab load`: the load generator (closed and open loop,
//!   HdrHistogram latencies, every outcome counted, ab-style text and JSON).
//! * [`experiment`] — `blocklab bench`: the seed study end to end (fresh
//!   server process per API, pinned CPUs, repeated loads, `/metrics` sampled).
//! * [`report`] — the bench's outputs: Markdown, JSON, CSV, SVG charts, HTML.
//! * [`harness`] — what every study needs: the target as a child process,
//!   CPU placement, memory-capped cgroups, `/metrics` scrapes, conditions,
//!   the pieces of a report; studies build on it and not on each other.
//! * [`sweep`] — `blocklab sweep`: study 2, concurrency steps under a memory
//!   cap, death detected.
//! * [`command`] — what each subcommand does, and how failures become exit codes.
//!
//! The binary (`src/main.rs`) only parses the command line and calls
//! [`command::run`].

pub mod cli;
pub mod command;
pub mod experiment;
pub mod graph;
pub mod harness;
pub mod http1;
pub mod load;
pub mod report;
pub mod server;
pub mod sweep;
