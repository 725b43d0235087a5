//! The counters every engine thread updates while a load runs: read by the
//! progress bar ([`super::progress`]) and by the closed loop's `-n` budget
//! ([`super::engine`]). Below both, which both use it.

use std::sync::atomic::{AtomicBool, AtomicU64};

/// Counters every thread updates, for the progress bar and the `-n` budget.
#[derive(Default)]
pub struct Shared {
    /// Requests claimed so far in a closed-loop `-n` run.
    pub claimed: AtomicU64,
    /// Requests that ended (any outcome).
    pub ended: AtomicU64,
    /// Requests that ended without a response, or with status >= 400.
    pub failed: AtomicU64,
    /// Set when the run is over.
    pub finished: AtomicBool,
}
