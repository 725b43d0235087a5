//! The run second by second: every engine thread hands over its figures of
//! each second ([`Interval`]) on a channel; a collector thread adds up the
//! threads' figures of the same second as soon as all have sent it, keeps a
//! [`Second`] of the timeline (requests, errors by kind, p50, p99,
//! connections open) and, with `--hdr-log`, writes the interval's
//! histograms to the log. Memory stays constant per second of run: a row of
//! numbers, not a histogram.

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc;
use std::time::SystemTime;

use super::client::ErrorKind;
use super::hdr_log;
use super::outcome::{Interval, Second};

/// Where engine threads send their seconds.
pub type Sender = mpsc::Sender<Interval>;

/// The collector thread.
pub struct Collector {
    thread: std::thread::JoinHandle<std::io::Result<Vec<Second>>>,
}

/// The `--hdr-log` file and what its header says.
pub struct LogFile {
    /// The open file.
    pub file: std::fs::File,
    /// When the run started (the log's StartTime).
    pub started_at: SystemTime,
    /// The target, for the log's comment.
    pub url: String,
}

impl Collector {
    /// Starts collecting the seconds of `threads` engine threads.
    pub fn start(threads: usize, log: Option<LogFile>) -> std::io::Result<(Collector, Sender)> {
        let (tx, rx) = mpsc::channel::<Interval>();
        let thread = std::thread::Builder::new().name("timeline".into()).spawn(move || {
            let mut seconds = Vec::new();
            let intervals = Merged::new(&rx, threads).inspect(|i| seconds.push(second(i)));
            match log {
                Some(log) => {
                    hdr_log::write(log.file, log.started_at, &log.url, intervals)?;
                }
                None => intervals.for_each(drop),
            }
            Ok(seconds)
        })?;
        Ok((Collector { thread }, tx))
    }

    /// Waits for the last second (every sender dropped) and returns the timeline.
    pub fn finish(self) -> std::io::Result<Vec<Second>> {
        self.thread.join().map_err(|_| std::io::Error::other("the timeline collector panicked"))?
    }
}

/// A row of the timeline from a second of every thread's figures.
pub fn second(i: &Interval) -> Second {
    let ms = |h: &hdrhistogram::Histogram<u64>, q: f64| {
        if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1000.0 }
    };
    Second {
        second: i.index,
        length_s: i.length.as_secs_f64(),
        requests: i.completed,
        status_4xx_5xx: i.bad_status,
        errors: ErrorKind::ALL
            .iter()
            .filter(|k| i.errors[k.index()] > 0)
            .map(|k| (k.key().to_string(), i.errors[k.index()]))
            .collect(),
        p50_ms: ms(&i.measured, 0.5),
        p99_ms: ms(&i.measured, 0.99),
        corrected_p99_ms: i.corrected.as_ref().map(|h| ms(h, 0.99)),
        connections: i.connections,
    }
}

/// The threads' intervals added up second by second, in order: a second is
/// complete when every thread has sent it; seconds some thread never sent
/// (it had ended) come out before any later one, and the rest at the end.
struct Merged<'a> {
    rx: &'a mpsc::Receiver<Interval>,
    threads: usize,
    pending: BTreeMap<u64, (Interval, usize)>,
    ready: VecDeque<Interval>,
    done: bool,
}

impl<'a> Merged<'a> {
    fn new(rx: &'a mpsc::Receiver<Interval>, threads: usize) -> Merged<'a> {
        Merged { rx, threads, pending: BTreeMap::new(), ready: VecDeque::new(), done: false }
    }
}

impl Iterator for Merged<'_> {
    type Item = Interval;

    fn next(&mut self) -> Option<Interval> {
        loop {
            if let Some(interval) = self.ready.pop_front() {
                return Some(interval);
            }
            if self.done {
                return None;
            }
            let Ok(interval) = self.rx.recv() else {
                self.done = true;
                let rest = std::mem::take(&mut self.pending);
                self.ready.extend(rest.into_values().map(|(i, _)| i));
                continue;
            };
            let index = interval.index;
            let complete = match self.pending.get_mut(&index) {
                None => {
                    self.pending.insert(index, (interval, 1));
                    self.threads == 1
                }
                Some((sum, seen)) => {
                    sum.add(&interval);
                    *seen += 1;
                    *seen == self.threads
                }
            };
            if complete {
                let earlier: Vec<u64> = self.pending.range(..=index).map(|(k, _)| *k).collect();
                for k in earlier {
                    self.ready.push_back(self.pending.remove(&k).expect("listed").0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn seconds_are_added_across_threads_in_order() {
        let (tx, rx) = mpsc::channel();
        let at = |index, completed, connections| {
            let mut i = Interval::new(false);
            (i.index, i.length, i.completed, i.connections) =
                (index, Duration::from_secs(1), completed, connections);
            i.measured.record(1000 * completed).unwrap();
            i
        };
        // Thread A ends after second 0; thread B runs to second 2.
        for i in [at(0, 5, 2), at(0, 7, 3), at(1, 4, 3), at(2, 1, 1)] {
            tx.send(i).unwrap();
        }
        drop(tx);
        let seconds: Vec<Second> = Merged::new(&rx, 2).map(|i| second(&i)).collect();
        let got: Vec<_> = seconds.iter().map(|s| (s.second, s.requests, s.connections)).collect();
        assert_eq!(got, vec![(0, 12, 5), (1, 4, 3), (2, 1, 1)]);
        assert!(seconds[0].p99_ms >= 6.9);
    }
}
