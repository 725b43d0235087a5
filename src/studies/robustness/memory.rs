//! Memory per in-flight request: what one more concurrent slow request costs
//! a target. The slope (least squares) of a step's peak memory over its
//! level, among the levels the target held at 100 % and was alive after —
//! beyond them requests fail and cost nothing, which would flatten the slope.
//! In KiB per request. Read it as the price of concurrency: the cap divided
//! by it is about how many requests fit.
//!
//! Three memories, each a slope of its own:
//! * `process_kib` — the whole process as its cgroup charged it at its peak
//!   (`memory.max_usage_in_bytes`, page cache included: what the cap counts);
//! * `less_cache_kib` — the cgroup's usage less page cache, sampled every 50 ms
//!   (the pages the process itself holds; steadier across targets);
//! * `heap_kib` — a JVM's heap in use at its sampled peak (its performance
//!   counters); none for the others.

use super::results::{PerRequest, Step, StepStatus};

/// What the figures mean, for the reports.
pub const MEANING: &str = "What one more concurrent slow request costs: the least-squares slope of the \
    step's peak memory over its level, among the levels answered in full (beyond them requests fail and cost \
    nothing). Process: the cgroup's peak (memory.max_usage_in_bytes, page cache included: what the cap \
    counts). Less page cache: the cgroup's usage less its page cache, sampled every 50 ms. JVM heap: the \
    heap in use at its sampled peak (garbage not yet collected included). The cap divided by it is about \
    how many requests fit.";

/// The slopes of `steps`; `None` with fewer than two levels held at 100 %.
pub fn per_request(steps: &[Step]) -> Option<PerRequest> {
    let held = held(steps);
    if held.len() < 2 {
        return None;
    }
    let slope_kib = |bytes: fn(&Step) -> Option<u64>| {
        let points: Vec<(f64, f64)> =
            held.iter().filter_map(|s| Some((s.level as f64, bytes(s)? as f64))).collect();
        slope(&points).map(|b| b / 1024.0)
    };
    Some(PerRequest {
        levels: held.iter().map(|s| s.level).collect(),
        process_kib: slope_kib(|s| s.cgroup_peak_bytes),
        less_cache_kib: slope_kib(|s| s.peak_memory_bytes),
        heap_kib: slope_kib(|s| s.peak_heap_bytes),
    })
}

/// The steps held at 100 % and alive after, in the order run.
fn held(steps: &[Step]) -> Vec<&Step> {
    steps
        .iter()
        .filter(|s| s.status == StepStatus::Run && s.success_rate == Some(1.0) && s.alive_after == Some(true))
        .collect()
}

/// About how many slow requests `cap` bytes hold (a cap, or what admission
/// control admits to under one), from what `steps` measured: the highest
/// level held at 100 %, plus what its peak left under `cap` at the
/// process's cost per request. `None` without a cap, or before two levels
/// were held (no slope yet).
pub fn cap_holds(steps: &[Step], cap: Option<u64>) -> Option<usize> {
    let kib = per_request(steps)?.process_kib.filter(|k| *k > 0.0)?;
    let top = held(steps).into_iter().max_by_key(|s| s.level)?;
    let left = cap?.saturating_sub(top.cgroup_peak_bytes?);
    Some(top.level + (left as f64 / (kib * 1024.0)) as usize)
}

/// The least-squares slope of `points` (x, y); `None` with fewer than two
/// distinct x.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(level: usize, rate: f64, cgroup_peak: u64) -> Step {
        Step {
            success_rate: Some(rate),
            cgroup_peak_bytes: Some(cgroup_peak),
            peak_memory_bytes: Some(cgroup_peak / 2),
            alive_after: Some(true),
            status: StepStatus::Run,
            ..Step::not_run(level, StepStatus::Run)
        }
    }

    #[test]
    fn the_cap_holds_the_highest_level_held_plus_what_its_peak_left_at_the_slope() {
        // 10,000 B a request: 1000 held at 20 MB; a 30 MB cap leaves 10 MB, room for 1000 more.
        let steps = [step(500, 1.0, 15_000_000), step(1000, 1.0, 20_000_000), step(2000, 0.7, 29_000_000)];
        let holds = cap_holds(&steps, Some(30_000_000)).unwrap();
        assert!((1999..=2001).contains(&holds), "{holds}");
        // Over the cap already: no more than the level held.
        assert_eq!(cap_holds(&steps, Some(18_000_000)), Some(1000));
        // No cap, or one level held (no slope): nothing to say.
        assert_eq!(cap_holds(&steps, None), None);
        assert_eq!(cap_holds(&steps[1..], Some(30_000_000)), None);
    }

    #[test]
    fn the_slope_is_taken_over_the_levels_held_at_100_percent() {
        // 10 KiB a request from 100 to 400; at 800 only 50 % answered, its memory flat.
        let steps = [
            step(100, 1.0, 10_000_000),
            step(200, 1.0, 10_000_000 + 100 * 10 * 1024),
            step(400, 1.0, 10_000_000 + 300 * 10 * 1024),
            step(800, 0.5, 10_000_000 + 300 * 10 * 1024),
        ];
        let p = per_request(&steps).unwrap();
        assert_eq!(p.levels, vec![100, 200, 400]);
        assert!((p.process_kib.unwrap() - 10.0).abs() < 1e-9, "{p:?}");
        assert!((p.less_cache_kib.unwrap() - 5.0).abs() < 1e-9, "{p:?}");
        assert_eq!(p.heap_kib, None);
        assert!(per_request(&steps[..1]).is_none(), "one level has no slope");
    }
}
