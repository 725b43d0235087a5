//! `--hdr-log FILE`: the run's latencies as an HdrHistogram interval log,
//! one interval per second, each histogram in the V2 deflate encoding Java's
//! `HistogramLogWriter` writes, so HdrHistogram's own tools read it (Java
//! HdrLogProcessing, Python `hdrhistogram`'s `HistogramLogReader`).
//!
//! Every engine thread empties its interval histograms once a second and
//! sends them here; this thread adds the threads' histograms of the same
//! second and writes the interval as soon as every thread has sent it, so
//! memory stays constant whatever the length of the run. Measured latencies
//! are tagged `measured`; in open loop the corrected ones follow, tagged
//! `corrected`. Values are microseconds (the `Interval_Max` column is in
//! milliseconds: a max value divisor of 1000).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};

/// One thread's histograms for one second of the run.
pub struct Interval {
    /// Seconds since the start: the interval covers `[index, index + 1)`.
    pub index: u64,
    /// Its length (shorter for the last one).
    pub length: Duration,
    /// Latency from the actual send.
    pub measured: Histogram<u64>,
    /// Open loop: latency from the due time.
    pub corrected: Option<Histogram<u64>>,
}

/// Where engine threads send their intervals.
pub type Sender = mpsc::Sender<Interval>;

/// A log being written by a thread of its own.
pub struct LogWriter {
    thread: std::thread::JoinHandle<std::io::Result<u64>>,
}

impl LogWriter {
    /// Starts writing to `file` intervals from `threads` engine threads, for
    /// a run that started at `started_at` (the log's StartTime).
    pub fn start(
        file: std::fs::File,
        threads: usize,
        started_at: SystemTime,
        url: &str,
    ) -> std::io::Result<(LogWriter, Sender)> {
        let (tx, rx) = mpsc::channel::<Interval>();
        let comment = format!("blocklab load {} {url}: latency in microseconds", env!("CARGO_PKG_VERSION"));
        let thread = std::thread::Builder::new()
            .name("hdr-log".into())
            .spawn(move || write(file, &rx, threads, started_at, &comment))?;
        Ok((LogWriter { thread }, tx))
    }

    /// Waits for the last interval (every sender dropped) and returns how
    /// many were written.
    pub fn finish(self) -> std::io::Result<u64> {
        self.thread.join().map_err(|_| std::io::Error::other("the hdr-log writer panicked"))?
    }
}

fn write(
    file: std::fs::File,
    rx: &mpsc::Receiver<Interval>,
    threads: usize,
    started_at: SystemTime,
    comment: &str,
) -> std::io::Result<u64> {
    let mut out = std::io::BufWriter::new(file);
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment(comment)
        .with_start_time(started_at)
        .with_base_time(started_at)
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut out, &mut serializer)?;
    log.write_comment(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"",
    )?;
    let mut pending: BTreeMap<u64, (Interval, usize)> = BTreeMap::new();
    let mut written = 0;
    let mut emit = |interval: &Interval| -> std::io::Result<()> {
        let start = Duration::from_secs(interval.index);
        let error = |e| std::io::Error::other(format!("writing the hdr log: {e:?}"));
        log.write_histogram(&interval.measured, start, interval.length, Tag::new("measured"))
            .map_err(error)?;
        if let Some(corrected) = &interval.corrected {
            log.write_histogram(corrected, start, interval.length, Tag::new("corrected")).map_err(error)?;
        }
        written += 1;
        Ok(())
    };
    for interval in rx {
        let index = interval.index;
        let complete = match pending.get_mut(&index) {
            None => {
                pending.insert(index, (interval, 1));
                threads == 1
            }
            Some((sum, seen)) => {
                add(sum, &interval);
                *seen += 1;
                *seen == threads
            }
        };
        if complete {
            let (interval, _) = pending.remove(&index).expect("just seen");
            // Earlier seconds some thread never sent (it had ended) are written first, in order.
            let earlier: Vec<u64> = pending.range(..index).map(|(k, _)| *k).collect();
            for k in earlier {
                emit(&pending.remove(&k).expect("listed").0)?;
            }
            emit(&interval)?;
        }
    }
    for (_, (interval, _)) in pending {
        emit(&interval)?;
    }
    drop(log);
    out.flush()?;
    Ok(written)
}

fn add(sum: &mut Interval, other: &Interval) {
    sum.measured.add(&other.measured).expect("same histogram bounds");
    if let (Some(a), Some(b)) = (sum.corrected.as_mut(), other.corrected.as_ref()) {
        a.add(b).expect("same histogram bounds");
    }
    sum.length = sum.length.max(other.length);
}
