//! The live progress bar (indicatif, on stderr), redrawn from the shared
//! counters by a thread of its own so the engine threads never draw.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::counters::Shared;
use super::plan::{LoadPlan, Stop};

/// A running progress bar.
pub struct Progress {
    thread: std::thread::JoinHandle<()>,
}

impl Progress {
    /// Starts drawing; the bar counts requests (`-n`) or seconds (`-z`).
    pub fn start(plan: &LoadPlan, shared: Arc<Shared>) -> Progress {
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
        bar.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let started = Instant::now();
        let thread = std::thread::spawn(move || {
            while !shared.finished.load(Relaxed) {
                let ended = shared.ended.load(Relaxed);
                let elapsed = started.elapsed();
                bar.set_position(if by_time { (elapsed.as_millis() as u64).min(length) } else { ended });
                let rps = ended as f64 / elapsed.as_secs_f64().max(1e-3);
                bar.set_message(format!("{rps:.0} req/s, {} failed", shared.failed.load(Relaxed)));
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        Progress { thread }
    }

    /// Waits for the bar to clear itself (the caller has set `finished`).
    pub fn finish(self) {
        let _ = self.thread.join();
    }
}
