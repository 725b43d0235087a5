//! Admission control's memory budget: whether one more connection fits in
//! the memory cap of this process's cgroup.
//!
//! A Rust server over its cap gets no exception to survive on: the kernel's
//! OOM killer ends it. So under `--admission auto` the accept loop
//! ([`super::accept`]) asks [`MemoryBudget::admit`] before it keeps a
//! connection, and one that does not fit is refused at once with a 503.
//!
//! - **The cap** is read once, at start, from the process's own cgroup
//!   (`/proc/self/cgroup`): cgroup v1 `memory.limit_in_bytes`, v2
//!   `memory.max`. No cap there, no memory budget (descriptors are still
//!   guarded). The budget is the cap less `--admission-reserve` percent.
//! - **The usage is live**, never computed from a cost per request written
//!   here: the cgroup's charged memory (v1 `memory.usage_in_bytes`, v2
//!   `memory.current`), which counts every process of the cgroup (all the
//!   workers of `--processes` share one budget this way) and the kernel's
//!   memory for each socket, about nine tenths of what a waiting request
//!   costs under lean and invisible to the process itself. Less the inactive
//!   page cache (`memory.stat`), which the kernel reclaims before it kills.
//!   The file stays open and is read again at offset 0 (one `pread`), at
//!   most once a millisecond and always before a refusal.
//! - **Connections not yet grown**: a connection accepted in a burst costs
//!   little until its request arrives and is read (hyper's buffers, lean's
//!   parking entry), after the reading that admitted it. So the budget also
//!   learns, from the readings, what an open connection costs here (live
//!   less idle memory, over the connections open in the cgroup), and
//!   projects: the last reading plus what the connections admitted since
//!   will cost, and the idle memory plus what every open connection will
//!   cost. Both must stay under the budget. The cost is the highest seen
//!   over the last second or two (a window of [`WINDOW`] and the one
//!   before): a burst's peak, when the kernel and the allocator have not
//!   settled, still counts while the burst lasts, and the high ratio of the
//!   first few connections (the server's own start-up growth shared by
//!   few) is forgotten.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::metrics::Metrics;

/// How old a usage reading may be before an admission reads it again.
const FRESH: Duration = Duration::from_millis(1);
/// How old the page-cache figure may be before a reading over the budget
/// reads `memory.stat` again (it moves slowly, and the file is long).
const CACHE_FRESH: Duration = Duration::from_millis(100);
/// The learned cost is the highest ratio seen in this window or the last.
const WINDOW: Duration = Duration::from_secs(1);
/// Connections open in the cgroup before a reading teaches the cost of one:
/// below it, the allocator's and the runtime's own growth would swamp it.
const LEARN_FROM: u64 = 256;

/// The memory cap of this process's cgroup and the live usage under it.
pub struct MemoryBudget {
    /// `memory.usage_in_bytes` (v1) or `memory.current` (v2), kept open.
    usage: File,
    /// `memory.stat`, and the field of its inactive page cache.
    stat: PathBuf,
    cache_field: &'static str,
    limit: u64,
    budget: u64,
    metrics: Arc<Metrics>,
    /// A std Mutex, not a Tokio one: only the accept loop takes it, and
    /// never across an await.
    readings: Mutex<Readings>,
}

struct Readings {
    /// Live memory at the last reading, and when it was read.
    live: u64,
    read_at: Instant,
    /// Connections admitted since that reading.
    admitted_since: u64,
    /// Inactive page cache at the last `memory.stat` reading.
    cache: u64,
    cache_at: Instant,
    /// The lowest live memory read with no connection open here.
    idle: u64,
    /// What an open connection costs, learned (0: not yet): the higher of
    /// the highest ratios of this window and of the last.
    cost: u64,
    /// The highest ratio of this window, of the last, and when this began.
    window_max: u64,
    last_window_max: u64,
    window_at: Instant,
}

/// Where the memory controller of this process's cgroup keeps its files.
struct CgroupFiles {
    dir: PathBuf,
    limit: &'static str,
    usage: &'static str,
    cache_field: &'static str,
}

impl MemoryBudget {
    /// The budget of this process's cgroup, keeping `reserve_percent` of the
    /// cap free; `Ok(None)` when the cgroup has no memory cap.
    pub fn of_own_cgroup(reserve_percent: u8, metrics: Arc<Metrics>) -> Result<Option<MemoryBudget>, String> {
        let files = own_cgroup_files()?;
        let limit = match std::fs::read_to_string(files.dir.join(files.limit)) {
            Ok(text) => parse_limit(&text),
            Err(e) => return Err(format!("cannot read {}: {e}", files.dir.join(files.limit).display())),
        };
        let Some(limit) = limit else { return Ok(None) };
        let usage_path = files.dir.join(files.usage);
        let usage =
            File::open(&usage_path).map_err(|e| format!("cannot open {}: {e}", usage_path.display()))?;
        let budget = limit - limit / 100 * u64::from(reserve_percent);
        let now = Instant::now();
        let readings = Readings {
            live: 0,
            read_at: now,
            admitted_since: 0,
            cache: 0,
            cache_at: now,
            idle: u64::MAX,
            cost: 0,
            window_max: 0,
            last_window_max: 0,
            window_at: now,
        };
        let budget = MemoryBudget {
            usage,
            stat: files.dir.join("memory.stat"),
            cache_field: files.cache_field,
            limit,
            budget,
            metrics,
            readings: Mutex::new(readings),
        };
        let capacity = &budget.metrics.capacity;
        capacity.memory_limit.store(limit, Relaxed);
        capacity.memory_budget.store(budget.budget, Relaxed);
        {
            let mut readings = budget.lock();
            budget.read(&mut readings, 0, true);
        }
        Ok(Some(budget))
    }

    /// The cap, bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The budget (the cap less the reserve), bytes.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Whether one more connection fits, with `open_here` open in this
    /// process now; counts it as admitted if so.
    pub fn admit(&self, open_here: u64) -> bool {
        let mut readings = self.lock();
        let alive = self.metrics.capacity.processes_alive();
        // Connections open in the cgroup: the kernel spreads them evenly
        // over the workers (SO_REUSEPORT's hash), so this one's times the
        // workers alive.
        let open = open_here * alive;
        let mut fresh = false;
        if readings.read_at.elapsed() >= FRESH {
            self.read(&mut readings, open_here, open_here == 0);
            fresh = true;
        }
        if !fits(&readings, open, alive, self.budget) && !fresh {
            // Never refuse on an old reading: memory may have been freed.
            self.read(&mut readings, open_here, open_here == 0);
        }
        if fits(&readings, open, alive, self.budget) {
            readings.admitted_since += 1;
            true
        } else {
            false
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Readings> {
        self.readings.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the cgroup's usage (and its page cache when it matters), and
    /// learns from it; `idle`: no connection is open here.
    fn read(&self, readings: &mut Readings, open_here: u64, idle: bool) {
        let now = Instant::now();
        let Some(usage) = read_number_at(&self.usage) else {
            // The cgroup went away under us: admit as if there were no cap.
            readings.read_at = now;
            readings.admitted_since = 0;
            readings.live = 0;
            return;
        };
        if usage > self.budget && now.duration_since(readings.cache_at) >= CACHE_FRESH
            || readings.idle == u64::MAX
        {
            readings.cache = stat_field(&self.stat, self.cache_field).unwrap_or(0);
            readings.cache_at = now;
        }
        let live = usage.saturating_sub(readings.cache);
        readings.live = live;
        readings.read_at = now;
        readings.admitted_since = 0;
        if idle {
            readings.idle = readings.idle.min(live);
        }
        let open = open_here * self.metrics.capacity.processes_alive();
        if open >= LEARN_FROM && live > readings.idle {
            let seen = (live - readings.idle) / open;
            if now.duration_since(readings.window_at) >= WINDOW {
                readings.last_window_max = readings.window_max;
                readings.window_max = 0;
                readings.window_at = now;
            }
            readings.window_max = readings.window_max.max(seen);
            readings.cost = readings.window_max.max(readings.last_window_max);
        }
        let capacity = &self.metrics.capacity;
        capacity.memory_live.store(live, Relaxed);
        capacity.memory_idle.store(readings.idle, Relaxed);
        capacity.connection_cost.store(readings.cost, Relaxed);
    }
}

/// Whether one more connection fits: the last reading plus what the
/// connections admitted since (here, times the `alive` workers that admit
/// alike) will cost, and the idle memory plus what every open connection
/// will cost, both under `budget`.
fn fits(readings: &Readings, open: u64, alive: u64, budget: u64) -> bool {
    let cost = readings.cost;
    let since = readings.live.saturating_add(((readings.admitted_since + 1) * alive).saturating_mul(cost));
    let all = readings.idle.saturating_add((open + 1).saturating_mul(cost));
    since <= budget && (readings.idle == u64::MAX || all <= budget)
}

/// A cgroup file's number, read again from offset 0.
fn read_number_at(file: &File) -> Option<u64> {
    let mut buf = [0u8; 32];
    let n = file.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

/// A memory cap as the cgroup writes it: `max` (v2) or a figure near
/// 2^63 (v1's "no limit") is none.
fn parse_limit(text: &str) -> Option<u64> {
    let limit: u64 = text.trim().parse().ok()?;
    (limit < 1 << 62).then_some(limit)
}

/// One field of a `memory.stat` file.
fn stat_field(path: &Path, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The memory controller's directory of this process's own cgroup: the v1
/// memory hierarchy if mounted, else the v2 unified one.
fn own_cgroup_files() -> Result<CgroupFiles, String> {
    let groups = crate::proc::own_cgroups()?;
    if let Some((_, path)) = groups.iter().find(|(controllers, _)| controllers.iter().any(|c| c == "memory"))
    {
        return Ok(CgroupFiles {
            dir: Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/')),
            limit: "memory.limit_in_bytes",
            usage: "memory.usage_in_bytes",
            // Hierarchical, as memory.usage_in_bytes is.
            cache_field: "total_inactive_file",
        });
    }
    if let Some((_, path)) = groups.iter().find(|(controllers, _)| controllers.is_empty()) {
        let dir = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
        if dir.join("memory.max").exists() {
            return Ok(CgroupFiles {
                dir,
                limit: "memory.max",
                usage: "memory.current",
                cache_field: "inactive_file",
            });
        }
    }
    Err("no cgroup memory controller is visible to this process".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readings(live: u64, idle: u64, cost: u64, admitted_since: u64) -> Readings {
        let now = Instant::now();
        let (window_max, last_window_max, window_at) = (cost, 0, now);
        Readings {
            live,
            read_at: now,
            admitted_since,
            cache: 0,
            cache_at: now,
            idle,
            cost,
            window_max,
            last_window_max,
            window_at,
        }
    }

    #[test]
    fn limits_as_the_kernel_writes_them() {
        assert_eq!(parse_limit("52428800\n"), Some(52_428_800));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
    }

    #[test]
    fn without_a_learned_cost_the_reading_decides() {
        assert!(fits(&readings(900, 100, 0, 1_000_000), 5_000, 1, 1_000));
        assert!(!fits(&readings(1_001, 100, 0, 0), 0, 1, 1_000));
    }

    #[test]
    fn connections_not_yet_grown_count_at_the_learned_cost() {
        // 100 admitted since a reading of 500, at 4 each: 904 fits 1000, 1004 not.
        assert!(fits(&readings(500, 100, 4, 100), 0, 1, 1_000));
        assert!(!fits(&readings(500, 100, 4, 125), 0, 1, 1_000));
        // Two workers admit alike: each counts the other's admissions too.
        assert!(!fits(&readings(500, 100, 4, 100), 0, 2, 1_000));
        // A low reading (the requests have not arrived) does not admit past
        // what the open connections will cost: 100 + 250 × 4 > 1000.
        assert!(!fits(&readings(150, 100, 4, 0), 250, 1, 1_000));
        assert!(fits(&readings(150, 100, 4, 0), 200, 1, 1_000));
    }
}
