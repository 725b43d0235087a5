//! Study 2's server models: how connections are held and on which thread a
//! request's handler runs. `blocklab serve --model` picks one.

use std::fmt;

/// How the server holds connections and where a request's handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Model {
    /// WebFlux on Netty, in Rust's idiomatic stack: tokio + hyper/axum,
    /// handlers on the async workers; `/delay` awaits a timer.
    #[default]
    Reactive,
    /// The non-blocking model with nothing else: tokio tasks holding no buffer
    /// while idle, requests parsed with httparse, responses pre-encoded.
    Lean,
    /// Spring Web on Tomcat: a fixed pool of OS threads, a request holds one
    /// for its whole life; `/delay` sleeps its thread.
    Pool,
    /// A naive server: a new OS thread per request, no limit, never reused.
    Thread,
}

impl Model {
    /// Every model, in the order the study shows them.
    pub const ALL: [Model; 4] = [Model::Reactive, Model::Lean, Model::Pool, Model::Thread];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Model::Reactive => "reactive",
            Model::Lean => "lean",
            Model::Pool => "pool",
            Model::Thread => "thread",
        }
    }

    /// Whether the request handlers run on OS threads of their own (and
    /// `/delay` sleeps one), rather than on the async workers.
    pub fn blocks_threads(self) -> bool {
        matches!(self, Model::Pool | Model::Thread)
    }

    /// Connections accepted at most, unless `--max-connections` says
    /// otherwise: Tomcat's `maxConnections` for `pool`, no limit for the rest.
    pub fn default_max_connections(self) -> Option<usize> {
        match self {
            Model::Pool => Some(8192),
            _ => None,
        }
    }

    /// Admission control unless `--admission` says otherwise: on for the
    /// non-blocking models, which are to degrade instead of dying; off for
    /// `pool` and `thread`, the naive analogues, which die as the seed's
    /// servers did.
    pub fn default_admission(self) -> AdmissionMode {
        match self {
            Model::Reactive | Model::Lean => AdmissionMode::Auto,
            Model::Pool | Model::Thread => AdmissionMode::Off,
        }
    }

    /// Percent of the memory cap admission control keeps free unless
    /// `--admission-reserve` says otherwise: [`REACTIVE_ADMISSION_RESERVE_PERCENT`]
    /// for `reactive`, whose admitted connections grow the most after the
    /// reading that admitted them, [`DEFAULT_ADMISSION_RESERVE_PERCENT`] for
    /// the rest.
    pub fn default_admission_reserve(self) -> u8 {
        match self {
            Model::Reactive => REACTIVE_ADMISSION_RESERVE_PERCENT,
            _ => DEFAULT_ADMISSION_RESERVE_PERCENT,
        }
    }

    /// The listen backlog unless `--accept-count` says otherwise: Tomcat's
    /// `acceptCount` for `pool`, [`LISTEN_BACKLOG`] for the rest.
    pub fn default_accept_count(self) -> u32 {
        match self {
            Model::Pool => 100,
            _ => LISTEN_BACKLOG,
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--admission`: refuse what does not fit, or accept everything as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AdmissionMode {
    /// Admit a connection only while the cgroup's live memory leaves room for
    /// it, and refuse at once (a 503) past the descriptor limit.
    Auto,
    /// Accept every connection the kernel hands over (the naive server).
    Off,
}

impl AdmissionMode {
    /// The name on the command line and in `blocklab_info`.
    pub fn name(self) -> &'static str {
        match self {
            AdmissionMode::Auto => "auto",
            AdmissionMode::Off => "off",
        }
    }
}

/// Threads of the `pool` model unless `--threads` says otherwise: Tomcat's
/// and Spring Boot's `maxThreads`.
pub const DEFAULT_POOL_THREADS: usize = 200;

/// Pending connections the kernel may queue before the server accepts them,
/// unless `--accept-count` says otherwise. With the default of 128, a client
/// opening 200 connections at once (ab, the bench) sees some SYNs dropped and
/// retried a second later — a 1 s "max response time" that is the listen
/// queue, not the server. Linux caps it at `net.core.somaxconn`.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Percent of the memory cap admission control keeps free unless
/// `--admission-reserve` says otherwise: room for what admitted connections
/// still grow by after the reading that admitted them, for the churn of
/// refusing a burst, and for the server's own bursts (a `/metrics` text, a
/// worker thread's buffers); see [`super::budget`]. At 6 %, 30,000 connects
/// against lean's two workers in 50 MiB took the cgroup to 0.3 MiB of its
/// cap; at 10 % (5 MiB of 50), 2 MiB.
pub const DEFAULT_ADMISSION_RESERVE_PERCENT: u8 = 10;

/// `reactive`'s reserve: twice the default. Its connections are admitted
/// idle and grow by several KiB each when their request comes (hyper's
/// buffers, the request's task), and after a level whose requests reused
/// memory an earlier level left (about 32 MiB held between levels here),
/// what a request adds reads low. In the main job of 2026-12-07 it held 2000,
/// then admitted 2329 of 5000 within a 10 % reserve and was OOM-killed;
/// sweeps that admitted 1370–2142 there lived, the highest at 43.9 MiB of
/// 50. A fifth of the cap keeps about 2000 such connections' misprojection
/// (~2 KiB each) under the cap.
pub const REACTIVE_ADMISSION_RESERVE_PERCENT: u8 = 20;
