//! What a run shows while it goes, on stderr, drawn by a thread of its own
//! from the shared counters so the engine threads never draw: on a terminal
//! a live bar (indicatif); otherwise — a log file, a CI job, where a bar
//! draws nothing — a plain line every [`LINE_EVERY`].

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::counters::Shared;
use super::plan::{self, LoadPlan, Stop};

/// How often a plain progress line is printed off a terminal.
pub const LINE_EVERY: Duration = Duration::from_secs(5);

/// A running progress display (or none).
pub struct Progress {
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts showing what `plan.progress` asks for.
    pub fn start(plan: &LoadPlan, shared: Arc<Shared>) -> Progress {
        let thread = match plan.progress {
            plan::Progress::Silent => None,
            plan::Progress::Bar => Some(bar(plan, shared)),
            plan::Progress::Lines => Some(std::thread::spawn(move || lines(&shared))),
        };
        Progress { thread }
    }

    /// Waits for the display to end (the caller has set `finished`).
    pub fn finish(self) {
        if let Some(thread) = self.thread {
            let _ = thread.join();
        }
    }
}

/// The live bar: it counts requests (`-n`) or seconds (`-z`).
fn bar(plan: &LoadPlan, shared: Arc<Shared>) -> std::thread::JoinHandle<()> {
    let (length, by_time) = match plan.stop {
        Stop::Requests(n) => (n, false),
        Stop::Duration(d) => (d.as_millis() as u64, true),
    };
    let bar = ProgressBar::new(length);
    let template = if by_time {
        "{spinner} [{elapsed_precise}] {wide_bar} {msg}"
    } else {
        "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}"
    };
    bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    let started = Instant::now();
    std::thread::spawn(move || {
        while !shared.finished.load(Relaxed) {
            let ended = shared.ended.load(Relaxed);
            let elapsed = started.elapsed();
            bar.set_position(if by_time { (elapsed.as_millis() as u64).min(length) } else { ended });
            let rps = ended as f64 / elapsed.as_secs_f64().max(1e-3);
            bar.set_message(format!("{rps:.0} req/s, {} failed", shared.failed.load(Relaxed)));
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
    })
}

/// A line every [`LINE_EVERY`]: time, requests so far, the rate over the
/// last period, failures so far.
fn lines(shared: &Shared) {
    let started = Instant::now();
    let (mut next, mut before) = (started + LINE_EVERY, 0);
    while !shared.finished.load(Relaxed) {
        if Instant::now() >= next {
            let ended = shared.ended.load(Relaxed);
            eprintln!(
                "blocklab load: {:>5.0} s  {ended} requests ended, {:.0} req/s over the last {} s, {} failed",
                started.elapsed().as_secs_f64(),
                (ended - before) as f64 / LINE_EVERY.as_secs_f64(),
                LINE_EVERY.as_secs(),
                shared.failed.load(Relaxed)
            );
            (next, before) = (next + LINE_EVERY, ended);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
