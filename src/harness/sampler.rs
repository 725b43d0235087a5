//! The sampler: what a started process holds while a load runs, read every
//! 50 ms from a thread of its own and kept at its peaks — its threads (its
//! cgroup's, the whole tree's, when it has one: gunicorn's worker is a
//! child), its cgroup's memory less page cache ([`super::cgroup`]), and a
//! JVM's heap ([`super::jvm`]). A thread, not a task: each reading is a few
//! blocking `/proc`, `/sys` and hsperfdata reads, and the runner's own
//! runtime is busy sending the load.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the sampler saw at its peaks (`None`: never read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Samples {
    /// The most OS threads, of its cgroup or of its process.
    pub threads: Option<u64>,
    /// The most memory its cgroup was charged, page cache excluded, bytes.
    pub memory: Option<u64>,
    /// A JVM's largest heap in use, bytes.
    pub heap: Option<u64>,
}

/// A running sampler; [`Sampler::stop`] ends it and gives its peaks.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Samples>,
}

impl Sampler {
    /// Samples process `pid`, or the processes of the cgroup at `cgroup`
    /// when given, and the heap of the JVM `jvm` when given.
    pub fn start(pid: Option<u32>, jvm: Option<u32>, cgroup: Option<PathBuf>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Samples::default();
            let max = |peak: &mut Option<u64>, now: Option<u64>| {
                if let Some(now) = now {
                    *peak = Some(peak.unwrap_or(0).max(now));
                }
            };
            loop {
                let cgroup_threads = cgroup.as_deref().and_then(super::cgroup::threads);
                let own_threads = || pid.and_then(|pid| crate::proc::threads(crate::proc::Pid::Of(pid)));
                max(&mut seen.threads, cgroup_threads.or_else(own_threads));
                max(&mut seen.memory, cgroup.as_deref().and_then(super::cgroup::usage_less_cache));
                max(&mut seen.heap, jvm.and_then(super::jvm::heap_used));
                if stopped.load(Relaxed) {
                    return seen;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Sampler { stop, thread }
    }

    /// Ends it after one last reading; its peaks.
    pub fn stop(self) -> Samples {
        self.stop.store(true, Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_keeps_the_peaks_of_this_process() {
        let samples = Sampler::start(Some(std::process::id()), None, None).stop();
        assert!(samples.threads.is_some_and(|t| t >= 1), "{samples:?}");
        assert_eq!((samples.memory, samples.heap), (None, None));
    }
}
