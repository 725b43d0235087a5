//! `--hdr-log FILE`: the run's latencies as an HdrHistogram interval log,
//! one interval per second, each histogram in the V2 deflate encoding Java's
//! `HistogramLogWriter` writes, so HdrHistogram's own tools read it (Java
//! HdrLogProcessing, Python `hdrhistogram`'s `HistogramLogReader`).
//!
//! The timeline's collector ([`super::timeline`]) hands each second here
//! as soon as every engine thread has sent it, so memory stays constant
//! whatever the length of the run. Measured latencies
//! are tagged `measured`; in open loop the corrected ones follow, tagged
//! `corrected`. Values are microseconds (the `Interval_Max` column is in
//! milliseconds: a max value divisor of 1000).

use std::io::Write;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};

use super::outcome::Interval;

/// Writes the log of a run that started at `started_at` against `url` to
/// `file`, one entry per interval (every thread's histograms of that second
/// added up), and returns how many were written.
pub fn write(
    file: std::fs::File,
    started_at: SystemTime,
    url: &str,
    intervals: impl Iterator<Item = Interval>,
) -> std::io::Result<u64> {
    let comment = format!("blocklab load {} {url}: latency in microseconds", env!("CARGO_PKG_VERSION"));
    let mut out = std::io::BufWriter::new(file);
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment(&comment)
        .with_start_time(started_at)
        .with_base_time(started_at)
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut out, &mut serializer)?;
    log.write_comment(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"",
    )?;
    let mut written = 0;
    for interval in intervals {
        let start = Duration::from_secs(interval.index);
        let error = |e| std::io::Error::other(format!("writing the hdr log: {e:?}"));
        log.write_histogram(&interval.measured, start, interval.length, Tag::new("measured"))
            .map_err(error)?;
        if let Some(corrected) = &interval.corrected {
            log.write_histogram(corrected, start, interval.length, Tag::new("corrected")).map_err(error)?;
        }
        written += 1;
    }
    drop(log);
    out.flush()?;
    Ok(written)
}
