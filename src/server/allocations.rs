//! The allocation counter of a bench build. With the Cargo feature
//! `count-allocations`, every call to the global allocator is counted
//! (stats_alloc around the system allocator: the count is of calls, whatever
//! allocator serves them) and `/metrics` shows the totals, so
//! `bench/allocations.py` can divide their growth under load by the requests
//! answered. The release binary is built without it and keeps mimalloc
//! (`main.rs`); a counting build is for counting, not for timing (every
//! allocation then pays for shared atomic counters).

/// Allocations and reallocations of this process since start, or `None`
/// when this build does not count them.
pub fn counts() -> Option<(u64, u64)> {
    #[cfg(feature = "count-allocations")]
    {
        let stats = COUNTING.stats();
        Some((stats.allocations as u64, stats.reallocations as u64))
    }
    #[cfg(not(feature = "count-allocations"))]
    None
}

#[cfg(feature = "count-allocations")]
#[global_allocator]
static COUNTING: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;
