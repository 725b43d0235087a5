//! blocklab: a laboratory for one question — what do blocking calls, thread
//! pools and actors do to a web service's throughput, latency and robustness,
//! and what does the non-blocking alternative buy?
//!
//! # Layout
//!
//! Three layers, imports pointing down the list and never back:
//!
//! * [`studies`] — one folder per study, each knowing nothing of the other:
//!   [`studies::execution_models`] (study 1, `blocklab bench`) and
//!   [`studies::robustness`] (study 2, `blocklab sweep`); `blocklab studies`
//!   builds the peers and runs them all.
//! * [`harness`] — what every study needs and no study's knowledge: every
//!   target, one kind of thing ([`harness::target`]), started as a child
//!   process ([`harness::process`]), the peers read from `peers/*/peer.toml`
//!   ([`harness::peers`]), CPU placement, memory-capped cgroups, `/metrics`
//!   scrapes, conditions, the pieces of a report.
//! * [`server`] — `blocklab serve`: the router, one handler per execution
//!   model, the actors on their own executor, the runtimes and their probes,
//!   `/metrics`, the server models of study 2.
//! * [`load`] — `blocklab load`: the load generator (closed and open loop,
//!   HdrHistogram latencies, every outcome counted, ab-style text and JSON).
//! * [`graph`] — the Content dataset, the one Cypher query, the
//!   [`db::GraphBackend`] trait (a blocking and a non-blocking read) and the
//!   embedded, FalkorDB and Neo4j backends.
//! * [`http1`] — the HTTP/1.1 codec blocklab owns, both sides.
//! * [`proc`] — the one place `/proc` is read (on the `procfs` crate).
//! * [`page`] — what every report page and chart is made of (the studies'
//!   reports and `blocklab load --html` alike).
//! * [`wire_properties`] — what both sides' HTTP/1.1 parsers must keep
//!   whatever bytes arrive, however split: checked by the fuzz targets
//!   (`fuzz/`) and by the corpus replay (`tests/fuzz_corpus.rs`).
//!
//! And the command line: [`cli`] (the subcommands and the dispatch; each
//! subcommand's flags live beside it: `server/args.rs`, `load/args.rs`,
//! [`seed`], each study's `args.rs`), [`flags`] (parsers several share),
//! [`command`] (what every command shares) and [`failure`] (exit statuses);
//! [`peer_check`] (`blocklab peers check`: a peer folder held to its contract);
//! [`db_ceiling`] (`blocklab db-ceiling`, hidden: a database's ceiling for the
//! read with blocklab's own client and no HTTP).
//! The binary (`src/main.rs`) only parses the command line and calls
//! [`cli::run`].

pub mod cli;
pub mod command;
pub mod db;
pub mod db_ceiling;
pub mod failure;
pub mod flags;
pub mod harness;
pub mod http1;
pub mod load;
pub mod page;
pub mod peer_check;
pub mod proc;
pub mod seed;
pub mod server;
pub mod studies;
pub mod wire_properties;
