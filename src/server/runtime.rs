//! The tokio runtimes the server runs on, and what each tells about itself.
//!
//! The server has two executors, as the seed had two thread pools: the HTTP
//! runtime (the request threads; `--workers`) and the actor dispatcher (the
//! actor system's own threads). Each is built here with a [`RuntimeProbe`]
//! that reads tokio's stable runtime metrics and counts the runtime's threads,
//! so `/metrics` can show which pool was busy, blocked or queueing.

use std::fmt::Write;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use tokio::runtime::{Builder, Handle, Runtime};

use super::exposition::help;

/// Reads the figures of one tokio runtime.
#[derive(Clone)]
pub struct RuntimeProbe {
    name: &'static str,
    handle: Handle,
    threads: Arc<AtomicUsize>,
}

/// Builds a multi-thread runtime with `workers` worker threads, named `name`.
pub fn build_runtime(name: &'static str, workers: usize) -> io::Result<(Runtime, RuntimeProbe)> {
    let threads = Arc::new(AtomicUsize::new(0));
    let (started, stopped) = (threads.clone(), threads.clone());
    let runtime = Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(format!("{name}-rt"))
        .on_thread_start(move || {
            started.fetch_add(1, Relaxed);
        })
        .on_thread_stop(move || {
            stopped.fetch_sub(1, Relaxed);
        })
        .enable_all()
        .build()?;
    let probe = RuntimeProbe { name, handle: runtime.handle().clone(), threads };
    Ok((runtime, probe))
}

impl RuntimeProbe {
    /// Threads of tokio's blocking pool alive now (idle ones included).
    ///
    /// tokio counts these only under `--cfg tokio_unstable`; here every thread
    /// the runtime starts is counted and its workers subtracted.
    pub fn blocking_threads(&self) -> usize {
        let workers = self.handle.metrics().num_workers();
        self.threads.load(Relaxed).saturating_sub(workers)
    }
}

/// Writes the figures of every runtime in Prometheus text format, each metric
/// family once with one sample per runtime (and per worker).
pub fn render_runtimes(w: &mut String, probes: &[&RuntimeProbe]) {
    if probes.is_empty() {
        return;
    }
    let metrics: Vec<_> = probes.iter().map(|p| (p.name, p.handle.metrics(), p)).collect();
    help(w, "tokio_workers", "gauge", "Worker threads of the runtime: the threads that poll tasks.");
    for (rt, m, _) in &metrics {
        let _ = writeln!(w, "tokio_workers{{runtime=\"{rt}\"}} {}", m.num_workers());
    }
    help(
        w,
        "tokio_worker_busy_seconds_total",
        "counter",
        "Time each worker thread spent polling tasks. A task that blocks inside its poll (a \
         blocking read, a thread sleep) counts as busy, so a rate of 1.0 per worker with low \
         throughput means the workers are blocked, not working.",
    );
    for (rt, m, _) in &metrics {
        for i in 0..m.num_workers() {
            let busy = m.worker_total_busy_duration(i).as_secs_f64();
            let _ = writeln!(w, "tokio_worker_busy_seconds_total{{runtime=\"{rt}\",worker=\"{i}\"}} {busy}");
        }
    }
    help(
        w,
        "tokio_worker_park_total",
        "counter",
        "Times each worker went idle (parked) for lack of work. A worker that stops parking \
         under load is saturated or blocked.",
    );
    for (rt, m, _) in &metrics {
        for i in 0..m.num_workers() {
            let _ = writeln!(
                w,
                "tokio_worker_park_total{{runtime=\"{rt}\",worker=\"{i}\"}} {}",
                m.worker_park_count(i)
            );
        }
    }
    help(
        w,
        "tokio_global_queue_depth",
        "gauge",
        "Ready tasks waiting in the runtime's shared queue for a worker. Staying above zero \
         means every worker is busy or blocked and new work waits.",
    );
    for (rt, m, _) in &metrics {
        let _ = writeln!(w, "tokio_global_queue_depth{{runtime=\"{rt}\"}} {}", m.global_queue_depth());
    }
    help(
        w,
        "tokio_alive_tasks",
        "gauge",
        "Tasks spawned and not yet finished: about one per open connection on the http runtime \
         (under lean, none for a connection that has sent nothing yet or waits out a /delay), \
         plus the actors and their reads on the actors runtime.",
    );
    for (rt, m, _) in &metrics {
        let _ = writeln!(w, "tokio_alive_tasks{{runtime=\"{rt}\"}} {}", m.num_alive_tasks());
    }
    help(
        w,
        "tokio_blocking_threads",
        "gauge",
        "Threads of the runtime's blocking pool (spawn_blocking), busy or idle. It grows with \
         concurrent blocking calls and shrinks after they have been idle for 10 s.",
    );
    for (rt, _, p) in &metrics {
        let _ = writeln!(w, "tokio_blocking_threads{{runtime=\"{rt}\"}} {}", p.blocking_threads());
    }
}
