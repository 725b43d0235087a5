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
//!   most once a millisecond and always before a refusal, and every 50 ms
//!   while connections are open.
//! - **Connections admitted between two readings, and what admitted
//!   connections are still to cost**: within a millisecond a burst may
//!   bring dozens, which the last reading does not show yet, and a
//!   connection admitted idle grows when its request arrives (under
//!   `reactive`, measured here: about 12 KiB open and idle, hyper's read
//!   buffer and the connection's task, and 5 KiB more once its request is
//!   in flight; a client that opens every connection first and then sends
//!   every request at once, as the sweep's does, would have all of it
//!   admitted on the idle figure). So the budget learns two figures from
//!   the readings (live less idle memory, over the connections open in the
//!   cgroup): an **idle** connection's cost, the latest reading's ratio
//!   where almost none has a request in flight (it includes the server's
//!   own growth shared by the connections open, so it is high while few are
//!   open and settles as more are), and **what a request adds** to its
//!   connection, from readings where most do, set against an idle reading
//!   of about as many connections, and learned from as many requests in
//!   flight as possible ([`learn_extra`]). Summed, the two never fall
//!   below what a busy connection was seen to cost on average ([`busy_cost`]):
//!   requests that reuse memory an earlier level freed seem to add little.
//!   A connection is admitted while the last reading, plus what the
//!   requests still to come of the connections idle at it will add, plus
//!   what the connections admitted since it will cost when busy, stays
//!   under the budget. Until a request's addition is learned (a fresh
//!   process's first burst) only the idle cost projects.
//! - **What the reserve is for**: what admitted connections still grow by
//!   after their reading (the request read, the answer written), the
//!   kernel's charge for connections queued before `accept` (about a
//!   quarter of an accepted one's, measured here), and the churn of
//!   refusing: each refused connection is accepted, so it is charged
//!   before it is closed, and the slab pages it used stay charged a while.
//!   In a burst of 30,000 connects against 50 MiB that churn raised the
//!   peak to about 1.6 times the steady usage of the connections held.
//! - **Memory freed is returned at once** under the hyper models: their
//!   connections' buffers and tasks are freed when a level ends, and
//!   mimalloc by default keeps freed pages a while before it returns them,
//!   so the cgroup kept charging them and the next level was admitted as
//!   if they were in use (reactive after holding 1000: 32.7 MiB charged,
//!   then 62 % of 2000 admitted; with them returned, 19.6 MiB and all of
//!   2000, measured here). So `serve` under `--admission auto` in a cgroup
//!   with a memory cap starts itself again with `MIMALLOC_PURGE_DELAY=0`
//!   ([`purge_at_once`]); lean keeps its tables and frees little, and is
//!   left as it is.
//! - **When the projection errs, the request meets a line**
//!   ([`MemoryBudget::admit_request`]): under the hyper models a request is
//!   admitted too, while the live memory (read at most a millisecond
//!   before), plus what the requests admitted since that reading add, stays
//!   under the budget plus half the reserve. Past it the request is
//!   answered 503 and its connection closed, which frees what the
//!   connection held. The projection's error is what killed `reactive`:
//!   after a level whose requests reused memory the one before had left,
//!   it admitted 2329 of 5000 connections on figures that read low, and
//!   their requests took the cgroup to its cap (the main job of
//!   2026-12-07). A request is checked where its cost is paid, so no figure
//!   learned from an earlier level decides it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::metrics::Metrics;
use super::model::{AdmissionMode, Model};

/// How old a usage reading may be before an admission reads it again.
const FRESH: Duration = Duration::from_millis(1);
/// How often the accept loop reads the usage while connections are open.
pub const OBSERVE_EVERY: Duration = Duration::from_millis(50);
/// How old the page-cache figure may be before a reading over the budget
/// reads `memory.stat` again (it moves slowly, and the file is long).
const CACHE_FRESH: Duration = Duration::from_millis(100);
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
    /// The budget and half the reserve: the line a request meets.
    request_line: u64,
    metrics: Arc<Metrics>,
    /// A std Mutex, not a Tokio one: taken by the accept loop and by each
    /// request's admission, never across an await.
    readings: Mutex<Readings>,
}

struct Readings {
    /// Live memory at the last reading, and when it was read.
    live: u64,
    read_at: Instant,
    /// Connections admitted since that reading.
    admitted_since: u64,
    /// Requests admitted since that reading.
    requests_since: u64,
    /// Inactive page cache at the last `memory.stat` reading.
    cache: u64,
    cache_at: Instant,
    /// The lowest live memory read with no connection open here.
    idle: u64,
    /// What an open connection with no request in flight costs, learned
    /// (0: not yet).
    idle_cost: u64,
    /// What a request adds to its connection once it is in (0: none
    /// learned, or none seen to add anything), and the most requests in
    /// flight it was learned with.
    busy_extra: u64,
    extra_from: u64,
    /// What a connection with its request in flight costs on average at a
    /// reading where almost all were busy (everything charged above the
    /// idle process, over the connections open; 0: none yet), and the most
    /// requests in flight it was learned with: a floor under the idle cost
    /// plus a request's addition, which memory reused from an earlier level
    /// can make read low.
    busy_cost: u64,
    busy_cost_from: u64,
    /// Connections open in the cgroup with no request in flight, at the
    /// last reading, and with one.
    open_idle: u64,
    busy: u64,
    /// Live memory and connections open at the last reading where almost
    /// none had a request in flight: what a busy reading with about as many
    /// open is set against.
    idle_reading: Option<(u64, u64)>,
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
        let Some(limit) = files.limit()? else { return Ok(None) };
        let usage_path = files.dir.join(files.usage);
        let usage =
            File::open(&usage_path).map_err(|e| format!("cannot open {}: {e}", usage_path.display()))?;
        let budget = limit - limit / 100 * u64::from(reserve_percent);
        let now = Instant::now();
        let readings = Readings {
            live: 0,
            read_at: now,
            admitted_since: 0,
            requests_since: 0,
            cache: 0,
            cache_at: now,
            idle: u64::MAX,
            idle_cost: 0,
            busy_extra: 0,
            extra_from: 0,
            busy_cost: 0,
            busy_cost_from: 0,
            open_idle: 0,
            busy: 0,
            idle_reading: None,
        };
        let budget = MemoryBudget {
            usage,
            stat: files.dir.join("memory.stat"),
            cache_field: files.cache_field,
            limit,
            budget,
            request_line: budget + (limit - budget) / 2,
            metrics,
            readings: Mutex::new(readings),
        };
        let capacity = &budget.metrics.capacity;
        capacity.memory_limit.store(limit, Relaxed);
        capacity.memory_budget.store(budget.budget, Relaxed);
        {
            let mut readings = budget.lock();
            budget.read(&mut readings);
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

    /// Whether one more connection fits beside those open in this process
    /// now; counts it as admitted if so.
    pub fn admit(&self) -> bool {
        self.admit_if(|readings, alive| fits(readings, alive, self.budget), |r| &mut r.admitted_since)
    }

    /// Whether a request that came on an admitted connection fits: the last
    /// reading, plus what each request admitted since it adds (here, times
    /// the workers alive), under the budget and half the reserve; counts it
    /// as admitted if so.
    pub fn admit_request(&self) -> bool {
        self.admit_if(
            |readings, alive| request_fits(readings, alive, self.request_line),
            |r| &mut r.requests_since,
        )
    }

    /// Whether `fits` (given the readings and the workers alive) on a
    /// reading at most a millisecond old, and never refusing on an older
    /// one: memory may have been freed since. Adds one to what `since`
    /// counts when it does.
    fn admit_if(
        &self,
        fits: impl Fn(&Readings, u64) -> bool,
        since: impl FnOnce(&mut Readings) -> &mut u64,
    ) -> bool {
        let mut readings = self.lock();
        let alive = self.metrics.capacity.processes_alive();
        let mut fresh = false;
        if readings.read_at.elapsed() >= FRESH {
            self.read(&mut readings);
            fresh = true;
        }
        if !fits(&readings, alive) && !fresh {
            self.read(&mut readings);
        }
        if fits(&readings, alive) {
            *since(&mut readings) += 1;
            true
        } else {
            false
        }
    }

    /// Reads the usage and learns from it without admitting anything: the
    /// accept loop calls it while connections are open and none arrives, so
    /// the costs are learned once requests are in flight too.
    pub fn observe(&self) {
        if self.metrics.connections_open.get() <= 0 {
            return;
        }
        let mut readings = self.lock();
        if readings.read_at.elapsed() >= OBSERVE_EVERY / 2 {
            self.read(&mut readings);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Readings> {
        self.readings.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the cgroup's usage (and its page cache when it matters), and
    /// learns from it, with the connections open in this process and the
    /// requests in flight (only here, at most once a millisecond, not at
    /// every admission).
    fn read(&self, readings: &mut Readings) {
        let open_here = u64::try_from(self.metrics.connections_open.get()).unwrap_or(0);
        let busy_here = self.metrics.requests_in_flight();
        let now = Instant::now();
        let Some(usage) = read_number_at(&self.usage) else {
            // The cgroup went away under us: admit as if there were no cap.
            readings.read_at = now;
            readings.admitted_since = 0;
            readings.requests_since = 0;
            readings.live = 0;
            return;
        };
        // Past half the budget the page cache matters to a decision: read
        // it again (lazily freed heap pages are counted there too).
        if usage > self.budget / 2 && now.duration_since(readings.cache_at) >= CACHE_FRESH
            || readings.idle == u64::MAX
        {
            readings.cache = stat_field(&self.stat, self.cache_field).unwrap_or(0);
            readings.cache_at = now;
        }
        let live = usage.saturating_sub(readings.cache);
        readings.live = live;
        readings.read_at = now;
        readings.admitted_since = 0;
        readings.requests_since = 0;
        if open_here == 0 {
            readings.idle = readings.idle.min(live);
        }
        // Connections open in the cgroup: the kernel spreads them evenly
        // over the workers (SO_REUSEPORT's hash), so this one's times the
        // workers alive.
        let alive = self.metrics.capacity.processes_alive();
        let open = open_here * alive;
        let busy = (busy_here * alive).min(open);
        learn(readings, live, open, busy);
        let capacity = &self.metrics.capacity;
        capacity.memory_live.store(live, Relaxed);
        capacity.memory_idle.store(readings.idle, Relaxed);
        capacity.connection_cost.store(readings.idle_cost, Relaxed);
        capacity.busy_connection_cost.store(busy_cost(readings), Relaxed);
    }
}

/// Learns the costs of an idle and a busy connection from a reading of
/// `live` memory with `open` connections open in the cgroup, `busy` of them
/// with a request in flight.
fn learn(readings: &mut Readings, live: u64, open: u64, busy: u64) {
    readings.open_idle = open - busy;
    // Requests arriving or waiting, not being answered: as a level's answers
    // go out, the connections they leave (back among the idle ones, or
    // closing, their sockets' memory not yet uncharged) read as more than
    // the idle reading, and a request would seem to add what it does not.
    let answering = busy < readings.busy;
    readings.busy = busy;
    if open < LEARN_FROM || live <= readings.idle {
        return;
    }
    let grown = live - readings.idle;
    // Ninety-nine in a hundred busy: the requests are in, not still
    // arriving (while they are, what reading them holds for a moment is
    // read as what each adds, and the most seen is kept), and the level's
    // tail is not read either.
    let mostly_busy = busy >= LEARN_FROM && busy * 100 >= open * 99 && !answering;
    // Almost none busy; or, with nothing learned yet, whatever is open: a
    // server kept half busy still needs a cost to project with, and one busy
    // from the start (a client that sends as it connects) has each
    // connection at its whole cost already, and that is its cost.
    let first = readings.idle_cost == 0;
    if busy * 16 <= open || first {
        readings.idle_cost = grown / open;
    }
    if busy * 16 <= open {
        readings.idle_reading = Some((live, open));
    }
    if mostly_busy && !first {
        // What the requests added, against an idle reading of about the same
        // connections (a client that connects first and sends later): the
        // margin of a request, free of the server's own growth and of memory
        // an earlier level left charged, which an average over the open
        // connections would spread over them. Kept apart from the idle
        // cost, so that the idle cost learned later, over more connections,
        // does not carry an earlier one's overhead into every projection.
        let added = readings
            .idle_reading
            .filter(|&(_, was)| was * 10 >= open * 9 && open * 10 >= was * 9)
            .map(|(was_live, _)| live.saturating_sub(was_live) / busy);
        let idle_cost = readings.idle_cost;
        let extra = added.unwrap_or_else(|| {
            (grown.saturating_sub(idle_cost * readings.open_idle) / busy).saturating_sub(idle_cost)
        });
        learn_extra(readings, extra, busy);
    }
    if mostly_busy {
        // Everything charged above the idle process, over the connections
        // open: no reading set against another, so memory an earlier level
        // freed and these requests reused cannot make it read low.
        // Learned by the same rule as what a request adds: the process's own
        // growth, spread over few connections, reads high at first.
        learn_from(&mut readings.busy_cost, &mut readings.busy_cost_from, grown / open, busy);
    }
}

/// What a connection costs once its request is in: the idle cost plus what
/// a request adds, and never less than what busy connections were seen to
/// cost on average.
///
/// Why the floor: a level's requests may reuse memory that an earlier
/// level's freed and the allocator kept, which its idle reading already
/// counted, so they seem to add little; the idle cost, learned again once
/// that memory is returned, then no longer carries it, and the two summed
/// fall short. Here `reactive`, after holding 2000 (18.9 KiB a request),
/// admitted about 3000 at 5000 on such a sum and was OOM-killed.
fn busy_cost(readings: &Readings) -> u64 {
    (readings.idle_cost + readings.busy_extra).max(readings.busy_cost)
}

/// Learns `extra`, what each of `busy` requests seemed to add to its
/// connection, against what earlier readings taught.
///
/// Part of what a process's first requests add is paid once (the
/// allocator's first pages of a size, a table's first touch): lean's first
/// 600 seemed to add 430 B each and the next 600 nothing (measured here).
/// Spread over few requests and charged to every connection open, that
/// once refused thousands. So a reading with at least twice the requests
/// in flight replaces what fewer taught. Between half and twice as many,
/// the most seen wins: requests that reuse memory an earlier level freed
/// (and the allocator kept) seem to add less than they cost, and a level
/// projected on that smaller margin could take the cgroup over its cap.
/// Fewer than half as many teach nothing.
fn learn_extra(readings: &mut Readings, extra: u64, busy: u64) {
    learn_from(&mut readings.busy_extra, &mut readings.extra_from, extra, busy);
}

/// [`learn_extra`]'s rule for any figure learned from busy readings:
/// `seen` at `busy` requests in flight replaces `figure`, learned from
/// `from`, when `busy` is at least twice `from`; between half and twice,
/// the larger is kept; fewer teach nothing.
fn learn_from(figure: &mut u64, from: &mut u64, seen: u64, busy: u64) {
    if busy >= from.saturating_mul(2) {
        *figure = seen;
        *from = busy;
    } else if busy.saturating_mul(2) >= *from {
        *figure = (*figure).max(seen);
        *from = (*from).max(busy);
    }
}

/// Whether one more connection fits: the last reading, plus the growth
/// still to come of the connections idle at it (each from the idle cost to
/// a busy one's, [`busy_cost`]), plus what the connections admitted since
/// (here, times the `alive` workers that admit alike) will cost busy, under
/// `budget`.
fn fits(readings: &Readings, alive: u64, budget: u64) -> bool {
    let full = busy_cost(readings);
    let growth = readings.open_idle.saturating_mul(full - readings.idle_cost);
    let since = (readings.admitted_since + 1).saturating_mul(alive).saturating_mul(full);
    readings.live.saturating_add(growth).saturating_add(since) <= budget
}

/// Whether one more request fits: the last reading, plus what each request
/// admitted since it (here, times the `alive` workers) adds to its
/// connection, under `line`. Nothing projects for the connections still
/// idle: each request is checked when it comes.
fn request_fits(readings: &Readings, alive: u64, line: u64) -> bool {
    let adds = busy_cost(readings).saturating_sub(readings.idle_cost);
    let since = (readings.requests_since + 1).saturating_mul(alive).saturating_mul(adds);
    readings.live.saturating_add(since) <= line
}

/// mimalloc's option for how long freed memory is kept before it is
/// returned to the system, read from the environment when it starts.
pub const PURGE_DELAY_VAR: &str = "MIMALLOC_PURGE_DELAY";

/// Whether this process should start again with mimalloc returning freed
/// memory at once ([`PURGE_DELAY_VAR`] at 0): a hyper model under
/// `--admission auto`, in a cgroup with a memory cap, started without the
/// variable set (a value the caller gave is kept).
pub fn purge_at_once(model: Model, admission: AdmissionMode) -> bool {
    model != Model::Lean
        && admission == AdmissionMode::Auto
        && std::env::var_os(PURGE_DELAY_VAR).is_none()
        && own_cgroup_files().and_then(|files| files.limit()).is_ok_and(|limit| limit.is_some())
}

impl CgroupFiles {
    /// The cgroup's memory cap; `None` when it has none.
    fn limit(&self) -> Result<Option<u64>, String> {
        let path = self.dir.join(self.limit);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(parse_limit(&text))
    }
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

    fn readings(live: u64, cost: u64, admitted_since: u64) -> Readings {
        let now = Instant::now();
        Readings {
            live,
            read_at: now,
            admitted_since,
            requests_since: 0,
            cache: 0,
            cache_at: now,
            idle: 100,
            idle_cost: cost,
            busy_extra: 0,
            extra_from: 0,
            busy_cost: 0,
            busy_cost_from: 0,
            open_idle: 0,
            busy: 0,
            idle_reading: None,
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
        assert!(fits(&readings(900, 0, 1_000_000), 1, 1_000));
        assert!(!fits(&readings(1_001, 0, 0), 1, 1_000));
    }

    #[test]
    fn connections_admitted_since_the_reading_count_at_the_learned_cost() {
        // 100 admitted since a reading of 500, at 4 each: 904 fits 1000, 1004 not.
        assert!(fits(&readings(500, 4, 100), 1, 1_000));
        assert!(!fits(&readings(500, 4, 125), 1, 1_000));
        // Two workers admit alike: each counts the other's admissions too.
        assert!(!fits(&readings(500, 4, 100), 2, 1_000));
    }

    #[test]
    fn a_request_counts_what_the_requests_admitted_since_the_reading_add() {
        // Idle 4, busy 10: each request adds 6.
        let mut r = readings(900, 4, 0);
        r.busy_cost = 10;
        // 900 + 6 for this one fits 906, not 905.
        assert!(request_fits(&r, 1, 906));
        assert!(!request_fits(&r, 1, 905));
        // Ten admitted since the reading: 900 + 11 x 6.
        r.requests_since = 10;
        assert!(request_fits(&r, 1, 966));
        assert!(!request_fits(&r, 1, 965));
        // Two workers admit alike.
        assert!(!request_fits(&r, 2, 966));
        // Connections still idle project nothing here: their requests are
        // checked when they come.
        r.open_idle = 1_000;
        assert!(request_fits(&r, 1, 966));
        // Past the line, nothing fits, whatever is learned.
        assert!(!request_fits(&readings(1_001, 0, 0), 1, 1_000));
    }

    #[test]
    fn idle_connections_are_projected_at_what_they_cost_busy() {
        // 100 idle connections at 4 each; busy, one costs 6.
        let mut r = readings(500, 4, 0);
        r.busy_extra = 2;
        r.open_idle = 100;
        // 500 + 100 x 2 still to grow + 6 for the next: 706.
        assert!(fits(&r, 1, 706));
        assert!(!fits(&r, 1, 705));
        // Without a request's addition learned, only the idle cost projects.
        r.busy_extra = 0;
        assert!(fits(&r, 1, 504));
    }

    #[test]
    fn the_costs_are_learned_from_idle_and_from_busy_readings() {
        let mut r = readings(0, 0, 0);
        // 1,000 connections open, none busy, 4,000 over idle: 4 each.
        learn(&mut r, 4_100, 1_000, 0);
        assert_eq!((r.idle_cost, r.busy_extra, r.open_idle), (4, 0, 1_000));
        // Their requests arrive: 990 busy, 5,940 more than the idle reading
        // of the same 1,000: 6 more each; the idle cost stays.
        learn(&mut r, 10_040, 1_000, 990);
        assert_eq!((r.idle_cost, r.busy_extra, r.open_idle), (4, 6, 10));
        // Half busy (a level's tail) teaches neither once something is
        // learned; too few open, nothing.
        learn(&mut r, 50_100, 1_000, 500);
        assert_eq!((r.idle_cost, r.busy_extra), (4, 6));
        learn(&mut r, 50_100, 200, 0);
        assert_eq!((r.idle_cost, r.busy_extra, r.open_idle), (4, 6, 200));
    }

    #[test]
    fn a_busy_reading_is_set_against_the_idle_one_not_averaged() {
        // An earlier level left 20,000 charged: 1,000 idle connections read
        // as 24 each (the average), though each holds 4.
        let mut r = readings(0, 0, 0);
        learn(&mut r, 24_100, 1_000, 0);
        assert_eq!(r.idle_cost, 24);
        // Their requests add 2 each: 2 more, not the average over 1,000 of
        // what is charged now.
        learn(&mut r, 26_100, 1_000, 1_000);
        assert_eq!(r.busy_extra, 2);
        // Without an idle reading of about as many, the average less the
        // idle cost decides.
        let mut r = readings(0, 0, 0);
        learn(&mut r, 4_100, 500, 0);
        learn(&mut r, 12_100, 1_000, 1_000);
        assert_eq!((r.idle_cost, r.busy_extra), (8, 12_000 / 1_000 - 8));
    }

    #[test]
    fn what_a_request_adds_is_learned_apart_from_the_idle_cost_and_from_as_many_requests() {
        // A small first level: 300 connections at 10 each idle (a fresh
        // process's own growth spread over few), their requests add 5.
        let mut r = readings(0, 0, 0);
        learn(&mut r, 3_100, 300, 0);
        learn(&mut r, 4_600, 300, 300);
        assert_eq!((r.idle_cost, r.busy_extra), (10, 5));
        // A larger level: 3,000 idle at 4 each. The whole busy cost is 4 +
        // 5, not the first level's 15: its overhead is not charged to each
        // of the 3,000.
        learn(&mut r, 12_100, 3_000, 0);
        assert_eq!((r.idle_cost, r.busy_extra), (4, 5));
        // Their requests add 1 each, measured over ten times as many: that
        // replaces the 5 that 300 requests' one-time growth made.
        learn(&mut r, 15_100, 3_000, 3_000);
        assert_eq!(r.busy_extra, 1);
        // As the answers go out, fewer are busy: nothing is learned.
        learn(&mut r, 40_100, 3_000, 2_995);
        assert_eq!(r.busy_extra, 1);
        // Busy from the start, nothing learned idle: the whole cost is the
        // connection's, and nothing is added.
        let mut r = readings(0, 0, 0);
        learn(&mut r, 9_100, 1_000, 1_000);
        assert_eq!((r.idle_cost, r.busy_extra), (9, 0));
    }

    #[test]
    fn requests_that_reuse_an_earlier_levels_memory_do_not_lower_a_busy_connections_cost() {
        // A level of 1,000: 4 each idle, 10 each busy.
        let mut r = readings(0, 0, 0);
        learn(&mut r, 4_100, 1_000, 0);
        learn(&mut r, 10_100, 1_000, 1_000);
        assert_eq!((r.idle_cost, r.busy_extra, r.busy_cost), (4, 6, 10));
        // A level of 2,000: its idle reading still counts 6,000 the first
        // level freed and the allocator kept (7 each), which its requests
        // reuse, so they seem to add 3 each; on average a busy connection
        // still costs 10.
        learn(&mut r, 14_100, 2_000, 0);
        learn(&mut r, 20_100, 2_000, 2_000);
        assert_eq!((r.idle_cost, r.busy_extra, r.busy_cost), (7, 3, 10));
        // The next level, that memory returned: 1,000 idle read 4 each
        // again. A busy connection is projected at 10, not at 4 + 3.
        learn(&mut r, 4_100, 1_000, 0);
        r.live = 4_100;
        assert_eq!(busy_cost(&r), 10);
        // 4,100 + 1,000 idle x 6 still to grow + 10: over 10,000 …
        assert!(!fits(&r, 1, 10_000));
        assert!(fits(&r, 1, 10_110));
        // … where the sum alone (4,100 + 1,000 x 3 + 7) would have admitted it.
        r.busy_cost = 0;
        assert!(fits(&r, 1, 7_107));
    }

    #[test]
    fn about_as_many_requests_keep_the_most_seen_and_fewer_teach_nothing() {
        let mut r = readings(0, 0, 0);
        learn_extra(&mut r, 5, 2_000);
        // A level that reuses memory freed before seems to add 1 each.
        learn_extra(&mut r, 1, 2_500);
        assert_eq!((r.busy_extra, r.extra_from), (5, 2_500));
        learn_extra(&mut r, 7, 1_500);
        assert_eq!(r.busy_extra, 7);
        learn_extra(&mut r, 50, 1_000);
        assert_eq!(r.busy_extra, 7);
        learn_extra(&mut r, 2, 5_000);
        assert_eq!((r.busy_extra, r.extra_from), (2, 5_000));
    }
}
