//! One step sent by the seed's own client: JMeter 5.6.3, the `jmeter` peer
//! (`scripts/peers run jmeter --url URL --threads N --jtl FILE`), one thread
//! group of N threads with ramp-up 0, one `GET` each. Its CSV JTL is read
//! back into the same [`StepLoad`] blocklab's own step fills, so the report's
//! figures mean the same whichever client sent the requests.
//!
//! JMeter starts a thread group's threads one after the other (2–5 ms each
//! here), so "N at once" is spread over time; the step records that spread
//! (first to last sample start), which the report shows beside the figures.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::step::{Outcome, StepLoad};
use crate::harness::launch::{self, Spec};
use crate::harness::peers::Peers;

/// The client peer's name (its folder under `peers/`).
pub const PEER: &str = "jmeter";

/// One JTL row, the columns this reading needs (JMeter's standard CSV header;
/// `timeStamp` is the sample's start: JMeter 5.6.3's `jmeter.properties`
/// sets `sampleresult.timestamp.start=true`, and the peer loads that file).
#[derive(Debug, serde::Deserialize)]
struct Sample {
    #[serde(rename = "timeStamp")]
    time_stamp: u64,
    elapsed: u64,
    #[serde(rename = "responseCode")]
    response_code: String,
    #[serde(rename = "responseMessage", default)]
    response_message: String,
    success: String,
    #[serde(rename = "failureMessage", default)]
    failure_message: String,
    #[serde(rename = "Connect", default)]
    connect: u64,
}

/// Runs one step with JMeter: `level` threads, each one `GET url`, results
/// to `jtl` (its log beside it, `.log`); `load_cpus` pins the client. Bounded
/// by `timeout` plus JMeter's start and thread spread; `interrupt` stops it
/// (`Ok(None)`). The error says what went wrong with the client itself.
pub fn run(
    peers: &Peers,
    url: &str,
    level: usize,
    timeout: Duration,
    jtl: &Path,
    load_cpus: &str,
    interrupt: &AtomicBool,
) -> Result<Option<StepLoad>, String> {
    let log = jtl.with_extension("log");
    let log_file = std::fs::File::create(&log).map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    // `scripts/peers run jmeter` takes the client's own flags (no --listen).
    let args: Vec<OsString> = [
        "--url".into(),
        url.into(),
        "--threads".into(),
        level.to_string().into(),
        "--jtl".into(),
        jtl.into(),
        "--timeout-ms".into(),
        timeout.as_millis().to_string().into(),
        "--connect-timeout-ms".into(),
        timeout.as_millis().to_string().into(),
    ]
    .into();
    let spec = Spec::client_peer(peers, PEER, args)
        .pinned(Some(load_cpus))
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
        .stderr(log_file)
        .own_group();
    let mut child = launch::client(spec).map_err(|e| format!("{PEER}: {e}"))?;
    // JVM start (~1 s), the thread spread (up to ~5 ms a thread), the requests.
    let bound = timeout + Duration::from_secs(60) + Duration::from_millis(10 * level as u64);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        let stop = interrupt.load(Relaxed);
        if stop || started.elapsed() > bound {
            // Our own child, by its pid (the run script execs the JVM).
            let _ = child.kill();
            let _ = child.wait();
            if stop {
                return Ok(None);
            }
            return Err(format!("{PEER} did not finish within {bound:?}; its log: {}", log.display()));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if !status.success() {
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = tail.lines().rev().take(3).collect();
        return Err(format!(
            "{PEER} failed ({status}): {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let text = std::fs::read_to_string(jtl).map_err(|e| format!("cannot read {}: {e}", jtl.display()))?;
    read_jtl(&text, level).map(Some)
}

/// The step's figures from a JTL of `level` samples: outcomes by kind (from
/// `success`, `responseCode`, `responseMessage`, `failureMessage`), the
/// elapsed times of the successes, the spread of the sample starts. A sample
/// missing from the JTL counts as a load-side failure.
pub fn read_jtl(text: &str, level: usize) -> Result<StepLoad, String> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut load = StepLoad::default();
    let mut messages: BTreeMap<String, usize> = BTreeMap::new();
    let (mut first_start, mut last_start, mut last_end) = (u64::MAX, 0u64, 0u64);
    let mut rows = 0;
    for row in reader.deserialize::<Sample>() {
        let sample = row.map_err(|e| format!("JTL: {e}"))?;
        rows += 1;
        first_start = first_start.min(sample.time_stamp);
        last_start = last_start.max(sample.time_stamp);
        last_end = last_end.max(sample.time_stamp + sample.elapsed);
        load.connect_max_ms = load.connect_max_ms.max(sample.connect as f64);
        let outcome = outcome_of(&sample);
        if outcome == Outcome::Refused {
            load.refused_max_ms = load.refused_max_ms.max(sample.elapsed as f64);
        }
        if outcome == Outcome::Ok {
            load.ok_ms.push(sample.elapsed as f64);
        } else {
            let message = format!("{} {}", sample.response_code, sample.response_message);
            *messages.entry(message.trim().chars().take(120).collect()).or_default() += 1;
        }
        if !matches!(outcome, Outcome::ConnectRefused | Outcome::ConnectTimeout | Outcome::LoadSide) {
            load.connected += 1;
        }
        *load.outcomes.entry(outcome.name()).or_default() += 1;
    }
    if rows > level {
        return Err(format!("JTL: {rows} samples for {level} threads"));
    }
    if rows < level {
        *load.outcomes.entry(Outcome::LoadSide.name()).or_default() += level - rows;
        messages.insert("no sample in the JTL".to_string(), level - rows);
    }
    if rows > 0 {
        load.send_spread_ms = (last_start - first_start) as f64;
        load.wall_ms = (last_end - first_start) as f64;
    }
    load.client_messages = messages;
    Ok(load)
}

/// How one JMeter sample ended, in the outcomes blocklab's own client counts.
/// JMeter names a failure without an HTTP answer by its Java exception
/// (`Non HTTP response code: java.net.ConnectException`, message
/// `Connection refused`).
fn outcome_of(sample: &Sample) -> Outcome {
    if let Ok(code) = sample.response_code.trim().parse::<u16>() {
        return if sample.success == "true" && (200..300).contains(&code) {
            Outcome::Ok
        } else if code == 503 {
            Outcome::Refused
        } else {
            Outcome::Status
        };
    }
    let text = format!("{} {} {}", sample.response_code, sample.response_message, sample.failure_message);
    let has = |s: &str| text.contains(s);
    if has("BindException")
        || has("Cannot assign requested address")
        || has("Too many open files")
        || has("OutOfMemoryError")
    {
        Outcome::LoadSide
    } else if has("ConnectTimeoutException") || has("connect timed out") {
        Outcome::ConnectTimeout
    } else if has("ConnectException") || has("Connection refused") {
        Outcome::ConnectRefused
    } else if has("SocketTimeoutException") || has("Read timed out") {
        Outcome::Timeout
    } else if has("NoHttpResponseException") || has("failed to respond") {
        Outcome::ClosedEarly
    } else {
        // Connection reset, broken pipe, and any other I/O failure.
        Outcome::Reset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,\
                          failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect\n";

    #[test]
    fn a_jtl_reads_into_the_steps_figures() {
        let jtl = format!(
            "{HEADER}\
             1000,1088,GET /delay,200,OK,t 1-1,text,true,,143,126,3,3,http://a/delay,1080,0,65\n\
             1004,1090,GET /delay,200,OK,t 1-2,text,true,,143,126,3,3,http://a/delay,1080,0,2\n\
             1009,2,GET /delay,Non HTTP response code: java.net.ConnectException,Non HTTP response message: \
             Connection refused,t 1-3,text,false,,0,0,3,3,http://a/delay,0,0,2\n\
             1010,60001,GET /delay,Non HTTP response code: java.net.SocketTimeoutException,Non HTTP response \
             message: Read timed out,t 1-4,text,false,,0,0,3,3,http://a/delay,0,0,1\n\
             1011,5,GET /delay,503,Service Unavailable,t 1-5,text,false,,0,0,3,3,http://a/delay,0,0,1\n\
             1012,7,GET /delay,500,Server Error,t 1-6,text,false,,0,0,3,3,http://a/delay,0,0,1\n"
        );
        let load = read_jtl(&jtl, 7).unwrap();
        assert_eq!(load.count(Outcome::Ok), 2);
        assert_eq!(load.count(Outcome::ConnectRefused), 1);
        assert_eq!(load.count(Outcome::Timeout), 1);
        assert_eq!(load.count(Outcome::Refused), 1, "the 503");
        assert_eq!(load.refused_max_ms, 5.0);
        assert_eq!(load.count(Outcome::Status), 1, "the 500");
        assert_eq!(load.count(Outcome::LoadSide), 1, "the missing sample");
        assert_eq!(load.outcomes.values().sum::<usize>(), 7);
        assert_eq!((load.quantile_ms(0.0), load.quantile_ms(1.0)), (Some(1088.0), Some(1090.0)));
        assert_eq!(load.send_spread_ms, 12.0);
        assert_eq!(load.wall_ms, 61_011.0 - 1000.0);
        assert_eq!(load.connect_max_ms, 65.0);
        assert!(read_jtl(&jtl, 5).is_err(), "more samples than threads");
    }
}
