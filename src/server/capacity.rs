//! What the server admits and refuses, and the worker processes it runs as:
//! the figures of admission control ([`super::budget`], [`super::accept`])
//! and of `serve --processes` ([`super::workers`]), kept as relaxed atomics
//! (written by the accept loop and the supervisor's messages, read by
//! `/metrics`), and written into `/metrics` with how to read each.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::exposition::help;

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Admitting it would take the cgroup's live memory past the budget.
    Memory,
    /// `accept` failed for lack of descriptors (EMFILE, ENFILE); the one kept
    /// in reserve accepted it to close it.
    Descriptors,
    /// A request came on an admitted connection while the cgroup's live
    /// memory was past the budget and half the reserve: answered 503 and
    /// the connection closed (the hyper models only).
    MemoryAtRequest,
}

impl Refusal {
    /// Every reason, in the order of [`Capacity`]'s counters.
    pub const ALL: [Refusal; 3] = [Refusal::Memory, Refusal::Descriptors, Refusal::MemoryAtRequest];

    /// The `reason` label.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Memory => "memory",
            Refusal::Descriptors => "descriptors",
            Refusal::MemoryAtRequest => "memory_at_request",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The figures of admission control and of the worker processes.
#[derive(Debug)]
pub struct Capacity {
    refused: [AtomicU64; Refusal::ALL.len()],
    /// The cgroup's memory cap, bytes (0: none known).
    pub memory_limit: AtomicU64,
    /// The cap less the reserve: the budget connections are admitted under.
    pub memory_budget: AtomicU64,
    /// The cgroup's live memory at the last reading.
    pub memory_live: AtomicU64,
    /// The lowest live memory read with no connection open here.
    pub memory_idle: AtomicU64,
    /// Live memory per open connection with no request in flight, as
    /// learned from the readings.
    pub connection_cost: AtomicU64,
    /// Live memory per open connection with a request in flight (the idle
    /// cost plus what a request adds).
    pub busy_connection_cost: AtomicU64,
    /// Worker processes started (1: this process serves alone).
    pub processes: AtomicU64,
    /// Worker processes that died since start.
    pub processes_lost: AtomicU64,
}

impl Default for Capacity {
    fn default() -> Capacity {
        Capacity {
            refused: Default::default(),
            memory_limit: AtomicU64::new(0),
            memory_budget: AtomicU64::new(0),
            memory_live: AtomicU64::new(0),
            memory_idle: AtomicU64::new(0),
            connection_cost: AtomicU64::new(0),
            busy_connection_cost: AtomicU64::new(0),
            processes: AtomicU64::new(1),
            processes_lost: AtomicU64::new(0),
        }
    }
}

impl Capacity {
    /// Counts a refused connection.
    pub fn refused(&self, why: Refusal) {
        self.refused[why.index()].fetch_add(1, Relaxed);
    }

    /// Connections refused so far for `why`.
    pub fn refusals(&self, why: Refusal) -> u64 {
        self.refused[why.index()].load(Relaxed)
    }

    /// Worker processes serving now: started less lost (at least 1: this one).
    pub fn processes_alive(&self) -> u64 {
        self.processes.load(Relaxed).saturating_sub(self.processes_lost.load(Relaxed)).max(1)
    }

    /// Writes every figure in Prometheus text format.
    pub fn render(&self, w: &mut String) {
        help(
            w,
            "blocklab_connections_refused_total",
            "counter",
            "Connections accepted and closed at once with a 503 and Retry-After by admission \
             control (--admission auto), by reason: memory (admitting it would take the cgroup's \
             live memory past blocklab_admission_memory_budget_bytes) or descriptors (accept \
             failed with EMFILE and the descriptor kept in reserve took the connection to close \
             it) or memory_at_request (reactive, pool and thread: a request came on an admitted \
             connection while the live memory, with the requests admitted since the reading, was \
             past the budget and half the reserve; answered 503 and the connection closed). Not in blocklab_connections_accepted_total. Rising while the server answers \
             /test: it degrades by refusing instead of being killed.",
        );
        for why in Refusal::ALL {
            let _ = writeln!(
                w,
                "blocklab_connections_refused_total{{reason=\"{}\"}} {}",
                why.name(),
                self.refusals(why)
            );
        }
        let gauges = [
            (
                "blocklab_admission_memory_limit_bytes",
                "The memory cap of this process's own cgroup (v1 memory.limit_in_bytes, v2 \
                 memory.max), read at start; 0 when there is none or admission is off, and then \
                 no connection is refused for memory.",
                self.memory_limit.load(Relaxed),
            ),
            (
                "blocklab_admission_memory_budget_bytes",
                "The cap less --admission-reserve percent: a connection is admitted while the \
                 cgroup's live memory, with what admitted connections are yet to cost, stays \
                 under it.",
                self.memory_budget.load(Relaxed),
            ),
            (
                "blocklab_admission_memory_live_bytes",
                "The cgroup's charged memory less its inactive page cache (which the kernel \
                 reclaims before any OOM kill) at the last reading: every process of the cgroup \
                 (all workers), the kernel's socket memory included. Read at an admission \
                 decision at most once a millisecond, and always before a refusal.",
                self.memory_live.load(Relaxed),
            ),
            (
                "blocklab_admission_memory_idle_bytes",
                "The lowest live memory read while this process had no connection open: what \
                 the cgroup holds without load.",
                self.memory_idle.load(Relaxed),
            ),
            (
                "blocklab_admission_connection_cost_bytes",
                "Live memory per open connection with no request in flight, learned from the \
                 readings where almost none has one: (live - idle) / connections open in the \
                 cgroup (this worker's times the workers alive), the latest such reading's; 0 \
                 until learned.",
                self.connection_cost.load(Relaxed),
            ),
            (
                "blocklab_admission_busy_connection_cost_bytes",
                "Live memory per open connection with a request in flight: the idle cost plus \
                 what a request adds, learned from readings where 99 in 100 connections have one \
                 (not while requests arrive or answers go out), set against an idle reading of \
                 about as many; the idle cost until learned. Every connection admitted is \
                 projected at it, and every one open idle at what a request adds: a client that \
                 opens its connections first and sends its requests later is not admitted on a \
                 reading taken before the requests arrived.",
                self.busy_connection_cost.load(Relaxed),
            ),
            (
                "blocklab_worker_processes",
                "Worker processes of serve --processes serving now, this one included (1 for a \
                 server of one process).",
                self.processes_alive(),
            ),
        ];
        for (name, text, value) in gauges {
            help(w, name, "gauge", text);
            let _ = writeln!(w, "{name} {value}");
        }
        help(
            w,
            "blocklab_worker_processes_lost_total",
            "counter",
            "Worker processes of serve --processes that died since start (OOM-killed, crashed, \
             killed by hand). The supervisor reports each on its stderr and does not restart \
             it; the others keep serving the port.",
        );
        let _ = writeln!(w, "blocklab_worker_processes_lost_total {}", self.processes_lost.load(Relaxed));
    }
}
