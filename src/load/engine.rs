//! The engine: engine threads, each a single-threaded tokio runtime that owns
//! its share of the connections and records into its own [`ThreadStats`]
//! (no locks, no shared histograms — as wrk's threads), merged at the end.
//!
//! Each connection runs one loop: decide whether there is a next request and
//! when it is due, send it, wait for the whole response (bounded by the
//! timeout and the `-z` deadline), record exactly one outcome. A new
//! connection's TCP connect and TLS handshake are timed apart; a timeout is
//! a connect, handshake or request timeout by where it struck. With
//! `--urls`, a connection sends the file's requests in turn.
//!
//! * Closed loop (default): a connection sends its next request as soon as
//!   the previous one ended; `-n` is shared through one atomic counter, so
//!   exactly N requests are started whatever the speed of each connection.
//! * Open loop (`--rate R`): request *i* is due at `t0 + i/R`; connection *c*
//!   of *C* owns requests c, c+C, c+2C, ... (R/C per second each). Latency is
//!   recorded twice: from the actual send (what ab and wrk report) and from
//!   the due time (corrected for coordinated omission, as wrk2 does), so a
//!   stalled server cannot hide its stall by slowing the load down.
//! * HTTP/2 (`--h2`, [`h2_connection_loop`]): the same decisions, but up to
//!   `--streams N` requests of a connection are in flight at once, each on
//!   its own stream; a request goes out when it is due and a stream is free.
//! * Pipelining (`--pipeline N`, closed loop): a connection writes N requests
//!   at once and reads their N responses in order before the next batch (as
//!   wrk's pipeline script); each request's latency runs from the batch's write.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use tokio::task::LocalSet;
use tokio::time::{Instant, Sleep};

use super::client::{self, Connection, ErrorKind};
use super::counters::Shared;
use super::http2;
use super::outcome::{RunResult, ThreadStats};
use super::plan::{LoadPlan, Stop};
use super::progress::Progress;
use super::request;
use super::timeline;
use super::tls;

/// Runs `plan` to the end and returns what it measured.
pub fn run(plan: &LoadPlan) -> anyhow::Result<RunResult> {
    run_with_log(plan, None)
}

/// [`run`], writing an HdrHistogram interval log to `log` as it goes (`--hdr-log`).
pub fn run_with_log(plan: &LoadPlan, log: Option<std::fs::File>) -> anyhow::Result<RunResult> {
    plan.validate().map_err(anyhow::Error::msg)?;
    let threads = plan.threads.min(plan.connections).max(1);
    let plan = Arc::new(plan.clone());
    let shared = Arc::new(Shared::default());
    // All threads build their runtime, then start together at t0.
    let barrier = Arc::new(Barrier::new(threads));
    let t0: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let started_at = SystemTime::now();
    let log = log.map(|file| timeline::LogFile { file, started_at, url: plan.target.url.clone() });
    let (collector, seconds) =
        timeline::Collector::start(threads, log).context("starting the timeline collector")?;
    // The requests, encoded once for the whole run, laid out for `--pipeline`.
    let wire = Arc::new(request::Wire::new(&plan));
    // --h2: the same requests as HTTP/2 stream heads, built once for the whole run too.
    let h2_requests =
        Arc::new(if plan.h2 { request::h2_all(&plan).map_err(anyhow::Error::msg)? } else { Vec::new() });
    let progress = Progress::start(&plan, shared.clone());
    let mut handles = Vec::with_capacity(threads);
    for t in 0..threads {
        // Connections are dealt out evenly: thread t gets [t*C/T, (t+1)*C/T).
        let first = t * plan.connections / threads;
        let last = (t + 1) * plan.connections / threads;
        let requests = Requests { http1: wire.clone(), h2: h2_requests.clone() };
        let (plan, shared, barrier, t0, seconds) =
            (plan.clone(), shared.clone(), barrier.clone(), t0.clone(), seconds.clone());
        let handle = std::thread::Builder::new()
            .name(format!("load-{t}"))
            .spawn(move || engine_thread(&plan, &requests, first..last, &shared, &barrier, &t0, &seconds))
            .context("starting an engine thread")?;
        handles.push(handle);
    }
    drop(seconds);
    let mut merged = ThreadStats::new(plan.rate.is_some());
    for handle in handles {
        let stats = handle.join().map_err(|_| anyhow::anyhow!("an engine thread panicked"))??;
        merged.merge(&stats);
    }
    let timeline = collector.finish().context("writing the hdr log")?;
    let end = Instant::now();
    shared.finished.store(true, Relaxed);
    progress.finish();
    let t0 = *t0.get().context("the run never started")?;
    Ok(RunResult { stats: merged, duration: end - t0, started_at, threads, timeline })
}

/// The requests of a run as each protocol sends them, shared by every thread.
#[derive(Clone)]
struct Requests {
    /// HTTP/1.1: encoded, laid out for `--pipeline`.
    http1: Arc<request::Wire>,
    /// `--h2`: the stream heads and bodies, in the same order; empty otherwise.
    h2: Arc<Vec<request::H2Request>>,
}

fn engine_thread(
    plan: &Arc<LoadPlan>,
    requests: &Requests,
    connections: std::ops::Range<usize>,
    shared: &Arc<Shared>,
    barrier: &Barrier,
    t0: &OnceLock<Instant>,
    seconds: &timeline::Sender,
) -> anyhow::Result<ThreadStats> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    // Even if this thread cannot run, it must reach the barrier or the others wait forever.
    if barrier.wait().is_leader() {
        let _ = t0.set(Instant::now());
    }
    barrier.wait();
    let runtime = runtime.context("starting an engine runtime")?;
    let t0 = *t0.get().expect("set by the barrier leader");
    let mut own = ThreadStats::new(plan.rate.is_some());
    if requests.http1.count() > 1 {
        own.urls = vec![Default::default(); requests.http1.count()];
    }
    let stats = Rc::new(RefCell::new(own));
    // The second the ticker is in: the one the figures recorded now belong to.
    let next = Rc::new(std::cell::Cell::new(0u64));
    let local = LocalSet::new();
    local.block_on(&runtime, async {
        let tasks: Vec<_> = connections
            .map(|c| {
                let (plan, shared, stats, requests) =
                    (plan.clone(), shared.clone(), stats.clone(), requests.clone());
                tokio::task::spawn_local(async move {
                    if plan.h2 {
                        h2_connection_loop(c, &plan, &requests.h2, &shared, &stats, t0).await
                    } else {
                        connection_loop(c, &plan, &requests.http1, &shared, &stats, t0).await
                    }
                })
            })
            .collect();
        // Every second, this thread's figures of that second go to the timeline.
        let ticker = {
            let (stats, seconds, next) = (stats.clone(), seconds.clone(), next.clone());
            tokio::task::spawn_local(async move {
                for index in 0.. {
                    tokio::time::sleep_until(t0 + Duration::from_secs(index + 1)).await;
                    let interval = stats.borrow_mut().take_interval(index, Duration::from_secs(1));
                    next.set(index + 1);
                    // The collector only goes away when the run has failed already.
                    let _ = seconds.send(interval);
                }
            })
        };
        // --busy-poll: a task that only yields keeps the thread from ever
        // parking; tokio polls the sockets without blocking between its turns.
        let spinner = plan.busy_poll.then(|| {
            tokio::task::spawn_local(async {
                loop {
                    tokio::task::yield_now().await;
                }
            })
        });
        for task in tasks {
            let _ = task.await;
        }
        ticker.abort();
        if let Some(spinner) = spinner {
            spinner.abort();
        }
    });
    drop(local);
    // The rest goes in the second the ticker was in, even when the run ended
    // a hair after its tick was due (the tick never ran: its task was stopped).
    let index = next.get();
    let length = t0.elapsed().saturating_sub(Duration::from_secs(index)).min(Duration::from_secs(1));
    let last = stats.borrow_mut().take_interval(index, length);
    let _ = seconds.send(last);
    Ok(Rc::try_unwrap(stats).map_err(|_| anyhow::anyhow!("connection tasks outlived the run"))?.into_inner())
}

/// What became of one request.
#[derive(Clone)]
enum Outcome {
    Reply(client::Reply),
    Failed(ErrorKind),
    InFlightAtDeadline,
}

async fn connection_loop(
    c: usize,
    plan: &LoadPlan,
    wire: &request::Wire,
    shared: &Shared,
    stats: &RefCell<ThreadStats>,
    t0: Instant,
) {
    let mut next = Next::new(plan, shared, c, t0);
    let deadline = next.deadline;
    let mut connection: Option<Connection> = None;
    // One timer per connection, re-armed only when it fires (see `bounded`).
    let mut watchdog = Box::pin(tokio::time::sleep_until(t0 + plan.timeout));
    let mut now = t0;
    // `--urls`: the request this connection sends next; connections start spread over them.
    let urls = wire.count();
    let mut next_url = c % urls;
    loop {
        // Connections in stages: out of the current level, close and wait until back in it.
        if let Some(stages) = &plan.connection_stages
            && !stages.is_open(c, now - t0)
        {
            if connection.take().is_some() {
                stats.borrow_mut().disconnected();
            }
            match stages.opens_at(c, now - t0) {
                Some(at) if deadline.is_none_or(|d| t0 + at < d) => {
                    tokio::time::sleep_until(t0 + at).await;
                    now = Instant::now();
                    continue;
                }
                _ => break,
            }
        }
        // How many requests go out now (more than one only when pipelining) and when they are due.
        let Some((batch, due)) = next.take(plan.pipeline, now) else { break };
        if let Some(at) = due {
            if at > now {
                tokio::time::sleep_until(at).await;
            } else {
                // Behind schedule: the connection was still busy when this one was due.
                note_late(stats, now - at);
            }
        }
        stats.borrow_mut().sent += batch as u64;
        let sent = if due.is_some() { Instant::now() } else { now };
        let mut at_deadline = false;
        // The batch's requests end in order: the n-th outcome is request first + n's.
        let first = next_url;
        let mut url = first;
        let record = |outcome: Outcome| {
            at_deadline |= record_outcome(stats, shared, urls, url, sent, due, outcome);
            url = if url + 1 == urls { 0 } else { url + 1 };
        };
        next_url = if urls == 1 { 0 } else { (first + batch) % urls };
        exchange(plan, wire, first, batch, &mut connection, stats, sent, deadline, &mut watchdog, record)
            .await;
        now = Instant::now();
        if at_deadline {
            break;
        }
    }
    stats.borrow_mut().backlog += next.backlog();
}

/// `--h2`: one HTTP/2 connection keeping up to `--streams` requests in
/// flight, each on its own stream. The same decisions as [`connection_loop`]
/// (which request is next and when it is due, through [`Next`]), but a
/// request goes out as soon as it is due and a stream is free, without
/// waiting for the others: the streams' exchanges are futures polled
/// together by this task (a `FuturesUnordered`, no task per request). In
/// open loop a request due while every stream is busy goes out on the next
/// free one, late, and its corrected latency counts the wait. A request the
/// server did not take (a GOAWAY came first, its stream was refused) goes
/// out once more on a new connection, as HTTP/1.1 replaces a keep-alive
/// connection the server closed; a second time it is counted as failed.
async fn h2_connection_loop(
    c: usize,
    plan: &LoadPlan,
    requests: &[request::H2Request],
    shared: &Shared,
    stats: &RefCell<ThreadStats>,
    t0: Instant,
) {
    use futures_util::StreamExt;
    let mut next = Next::new(plan, shared, c, t0);
    let deadline = next.deadline;
    let urls = requests.len();
    let mut next_url = c % urls;
    let mut session: Option<http2::Session> = None;
    let mut in_flight = futures_util::stream::FuturesUnordered::new();
    // Requests the server did not take, to send once more.
    let mut unprocessed = std::collections::VecDeque::new();
    // The request that waits for its due time or a free stream.
    let mut waiting: Option<Pending> = None;
    let mut done = false;
    let settle = |ended: Ended, unprocessed: &mut std::collections::VecDeque<Pending>| match ended.outcome {
        Err(http2::Failure::Unprocessed(_)) if !ended.request.again => {
            stats.borrow_mut().sent -= 1;
            unprocessed.push_back(Pending { again: true, ..ended.request });
        }
        outcome => {
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(http2::Failure::Unprocessed(kind) | http2::Failure::Failed(kind)) => {
                    Outcome::Failed(kind)
                }
            };
            record_outcome(stats, shared, urls, ended.request.url, ended.sent, ended.request.due, outcome);
        }
    };
    loop {
        // Connections in stages: out of the current level, let the streams in flight end,
        // close, and wait until back in it (the request waiting, if any, goes out then).
        if let Some(stages) = &plan.connection_stages
            && !stages.is_open(c, Instant::now() - t0)
        {
            while let Some(ended) = next_ended(&mut session, &mut in_flight).await {
                settle(ended, &mut unprocessed);
            }
            if session.take().is_some() {
                stats.borrow_mut().disconnected();
            }
            match stages.opens_at(c, Instant::now() - t0) {
                Some(at) if deadline.is_none_or(|d| t0 + at < d) => {
                    tokio::time::sleep_until(t0 + at).await;
                    continue;
                }
                _ => break,
            }
        }
        let free = in_flight.len() < plan.streams;
        if waiting.is_none() && free {
            waiting = unprocessed.pop_front();
            if waiting.is_none() && !done {
                match next.take(1, Instant::now()) {
                    Some((_, due)) => {
                        waiting = Some(Pending { url: next_url, due, again: false, awaited: false });
                        next_url = if next_url + 1 == urls { 0 } else { next_url + 1 };
                    }
                    None => done = true,
                }
            }
        }
        let Some(request) = waiting.filter(|_| free) else {
            // Every stream busy, or nothing more to send: wait for one to end, the
            // connection's frames read and written meanwhile.
            match next_ended(&mut session, &mut in_flight).await {
                Some(ended) => settle(ended, &mut unprocessed),
                None if done && unprocessed.is_empty() => break,
                None => {}
            }
            continue;
        };
        if let Some(at) = request.due {
            let now = Instant::now();
            if at > now {
                // A stream is free and stays free while this waits: lag past `at` is the timer's.
                waiting = Some(Pending { awaited: true, ..request });
                // Streams that end meanwhile are settled as they end.
                tokio::select! {
                    biased;
                    () = drive(&mut session) => continue,
                    Some(ended) = in_flight.next() => {
                        settle(ended, &mut unprocessed);
                        continue;
                    }
                    () = tokio::time::sleep_until(at) => {}
                }
            } else if !request.again && !request.awaited {
                // Every stream was busy when it was due.
                note_late(stats, now - at);
            }
        }
        waiting = None;
        stats.borrow_mut().sent += 1;
        let sent = Instant::now();
        let limit = sent + plan.timeout;
        let cut = deadline.map_or(limit, |d| d.min(limit));
        if let Some(ended) = session.take_if(|open| open.is_closed()) {
            // Its streams still in flight finish on it, driven by a task of their own.
            ended.retire();
            stats.borrow_mut().disconnected();
        }
        if session.is_none() {
            // Opening blocks this connection's next sends; streams still in flight on a
            // connection that ended fail with it, or finish on one that is going away.
            let phase = std::cell::Cell::new(Phase::Connecting);
            let opened = tokio::time::timeout_at(cut, async {
                let stream = open_stream(plan, stats, &phase).await?;
                http2::Session::open(stream).await.inspect_err(|_| stats.borrow_mut().disconnected())
            })
            .await;
            let failed = match opened {
                Ok(Ok(open)) => {
                    session = Some(open);
                    None
                }
                Ok(Err(kind)) => Some(Outcome::Failed(kind)),
                Err(_) => Some(cut_outcome(deadline, limit, phase.get())),
            };
            if let Some(outcome) = failed {
                record_outcome(stats, shared, urls, request.url, sent, request.due, outcome);
                continue;
            }
        }
        let streams = session.as_ref().expect("opened above").streams();
        let want_server = stats.borrow().server.is_none();
        let head = &requests[request.url];
        in_flight.push(async move {
            let outcome = match tokio::time::timeout_at(cut, streams.exchange(head, want_server)).await {
                Ok(Ok(reply)) => Ok(Outcome::Reply(reply)),
                Ok(Err(failure)) => Err(failure),
                Err(_) => Ok(cut_outcome(deadline, limit, Phase::Exchanging)),
            };
            Ended { request, sent, outcome }
        });
    }
    if session.take().is_some() {
        stats.borrow_mut().disconnected();
    }
    stats.borrow_mut().backlog += next.backlog();
}

/// `--h2`: drives `session`'s connection (see [`http2::Session::drive`]),
/// going away or not: its last streams need it; pending for good when there
/// is none, and once it has ended.
async fn drive(session: &mut Option<http2::Session>) {
    if let Some(open) = session {
        open.drive().await;
    }
    std::future::pending::<()>().await
}

/// `--h2`: the next of the streams in flight to end, with the connection's
/// frames read and written meanwhile (biased: first, so that requests just
/// started go out before the wait); `None` when none is in flight.
async fn next_ended<F: Future<Output = Ended>>(
    session: &mut Option<http2::Session>,
    in_flight: &mut futures_util::stream::FuturesUnordered<F>,
) -> Option<Ended> {
    use futures_util::StreamExt;
    if in_flight.is_empty() {
        return None;
    }
    tokio::select! {
        biased;
        () = drive(session) => unreachable!("drive never returns"),
        ended = in_flight.next() => ended,
    }
}

/// `--h2`: a request taken from the schedule and not sent yet.
#[derive(Clone, Copy)]
struct Pending {
    /// Which of the run's requests.
    url: usize,
    /// Open loop: when it is due.
    due: Option<Instant>,
    /// It goes out a second time: the server did not take it the first.
    again: bool,
    /// Its due time was waited for with a stream free.
    awaited: bool,
}

/// `--h2`: what became of a request sent on a stream.
struct Ended {
    request: Pending,
    sent: Instant,
    outcome: Result<Outcome, http2::Failure>,
}

/// What decides a connection's next requests: the run's one `-n` counter in
/// closed loop, the connection's own slots of the schedule in open loop
/// (connection c of C owns requests c, c+C, c+2C, ...).
struct Next<'a> {
    plan: &'a LoadPlan,
    shared: &'a Shared,
    c: usize,
    t0: Instant,
    /// The `-z` deadline.
    deadline: Option<Instant>,
    /// Open loop: how many of this connection's scheduled requests were taken.
    sent_here: u64,
}

impl<'a> Next<'a> {
    fn new(plan: &'a LoadPlan, shared: &'a Shared, c: usize, t0: Instant) -> Self {
        let deadline = match plan.stop {
            Stop::Duration(d) => Some(t0 + d),
            Stop::Requests(_) => None,
        };
        Next { plan, shared, c, t0, deadline, sent_here: 0 }
    }

    /// How many requests go out now (at most `most`, and more than one
    /// only in closed loop) and when they are due; `None` when this
    /// connection sends no more.
    fn take(&mut self, most: usize, now: Instant) -> Option<(usize, Option<Instant>)> {
        let Some(rate) = &self.plan.rate else {
            let batch = match self.plan.stop {
                Stop::Requests(n) => {
                    (0..most).take_while(|_| self.shared.claimed.fetch_add(1, Relaxed) < n).count()
                }
                Stop::Duration(_) if now < self.deadline.expect("duration run") => most,
                Stop::Duration(_) => 0,
            };
            return (batch > 0).then_some((batch, None));
        };
        let slot = self.c as u64 + self.sent_here * self.plan.connections as u64;
        if matches!(self.plan.stop, Stop::Requests(n) if slot >= n) {
            return None;
        }
        // Past the last stage, nothing more is due.
        let at = self.t0 + rate.due(slot)?;
        if self.deadline.is_some_and(|d| at >= d) {
            return None;
        }
        self.sent_here += 1;
        Some((1, Some(at)))
    }

    /// Open loop with `-z`: this connection's requests due before the
    /// deadline that never went out.
    fn backlog(&self) -> u64 {
        let (Some(rate), Some(deadline)) = (&self.plan.rate, self.deadline) else { return 0 };
        let due_slots = (rate.due_within(deadline - self.t0) - self.c as f64) / self.plan.connections as f64;
        let due_here = due_slots.max(0.0).ceil() as u64;
        due_here.saturating_sub(self.sent_here)
    }
}

/// A request goes out `lag` after it was due: the connection (every stream
/// of it) was still busy.
fn note_late(stats: &RefCell<ThreadStats>, lag: Duration) {
    let mut s = stats.borrow_mut();
    s.max_send_lag = s.max_send_lag.max(lag);
    if lag > Duration::from_millis(1) {
        s.late_sends += 1;
    }
}

/// Records the outcome of request `url` (of `urls`) sent at `sent` (due at
/// `due` in open loop), exactly once; true when it was in flight at the deadline.
fn record_outcome(
    stats: &RefCell<ThreadStats>,
    shared: &Shared,
    urls: usize,
    url: usize,
    sent: Instant,
    due: Option<Instant>,
    outcome: Outcome,
) -> bool {
    let ended = Instant::now();
    let mut s = stats.borrow_mut();
    let mut at_deadline = false;
    match outcome {
        Outcome::Reply(reply) => {
            if reply.status >= 400 {
                shared.failed.fetch_add(1, Relaxed);
            }
            s.response(&reply, ended - sent, due.map(|at| ended - at));
            if urls > 1 {
                s.url_response(url, reply.status, ended - sent);
            }
        }
        Outcome::Failed(kind) => {
            shared.failed.fetch_add(1, Relaxed);
            s.error(kind);
            if urls > 1 {
                s.url_error(url);
            }
        }
        Outcome::InFlightAtDeadline => {
            s.in_flight_at_deadline += 1;
            at_deadline = true;
        }
    }
    shared.ended.fetch_add(1, Relaxed);
    at_deadline
}

/// What became of a request the timeout or the deadline cut in `phase`.
fn cut_outcome(deadline: Option<Instant>, limit: Instant, phase: Phase) -> Outcome {
    if deadline.is_some_and(|d| Instant::now() >= d && d <= limit) {
        Outcome::InFlightAtDeadline
    } else {
        Outcome::Failed(match phase {
            Phase::Connecting => ErrorKind::ConnectTimeout,
            Phase::Handshaking => ErrorKind::TlsHandshakeTimeout,
            Phase::Exchanging => ErrorKind::RequestTimeout,
        })
    }
}

/// Connects to the target and, for `https://`, goes through the TLS
/// handshake (with `--h2`, one that agreed to `h2`), counting both;
/// `phase` follows along for a cut to know where it struck.
async fn open_stream(
    plan: &LoadPlan,
    stats: &RefCell<ThreadStats>,
    phase: &std::cell::Cell<Phase>,
) -> Result<client::Stream, ErrorKind> {
    phase.set(Phase::Connecting);
    let started = Instant::now();
    let tcp = client::connect(plan.target.addr, plan.timeout).await?;
    stats.borrow_mut().connected(started.elapsed());
    let Some(tls) = &plan.tls else {
        phase.set(Phase::Exchanging);
        return Ok(client::Stream::Plain(tcp));
    };
    phase.set(Phase::Handshaking);
    let started = Instant::now();
    let handshake = tls.handshake(tcp).await;
    let mut s = stats.borrow_mut();
    match handshake {
        Ok(stream) => {
            s.handshaken(started.elapsed(), tls::resumed(&stream), || tls::session(&stream));
            if plan.h2 && !tls::agreed_h2(&stream) {
                s.disconnected();
                s.tls_failed("the server did not agree to ALPN h2".to_string());
                return Err(ErrorKind::H2Refused);
            }
            phase.set(Phase::Exchanging);
            Ok(client::Stream::Tls(stream))
        }
        Err((kind, reason)) => {
            s.disconnected();
            s.tls_failed(reason);
            Err(kind)
        }
    }
}

/// How far a request had got when the timeout or the deadline cut it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    Handshaking,
    Exchanging,
}

/// Writes `batch` requests (from request `first` of `wire` on, back to back)
/// on `connection` (opening one if needed, with its TLS handshake for
/// `https://`) and reads their responses in order, each bounded by the
/// timeout from `sent` and never past the deadline; every request's outcome
/// goes to `record` as soon as it is known, exactly once.
#[allow(clippy::too_many_arguments)]
async fn exchange(
    plan: &LoadPlan,
    wire: &request::Wire,
    first: usize,
    batch: usize,
    connection: &mut Option<Connection>,
    stats: &RefCell<ThreadStats>,
    sent: Instant,
    deadline: Option<Instant>,
    watchdog: &mut Pin<Box<Sleep>>,
    mut record: impl FnMut(Outcome),
) {
    let limit = sent + plan.timeout;
    let cut = deadline.map_or(limit, |d| d.min(limit));
    let phase = std::cell::Cell::new(Phase::Exchanging);
    let mut answered = 0;
    // The request the next response answers (the batch's in turn, wrapping around).
    let mut answering = first;
    let work = async {
        // A keep-alive connection the server closed while it was idle is replaced before the write.
        if !(plan.keep_alive && connection.as_mut().is_some_and(Connection::is_open)) {
            if connection.take().is_some() {
                stats.borrow_mut().disconnected();
            }
            let stream = open_stream(plan, stats, &phase).await?;
            *connection = Some(Connection::new(stream));
        }
        let open = connection.as_mut().expect("connected above");
        open.write(wire.batch(first, batch)).await?;
        while answered < batch {
            let want_server = stats.borrow().server.is_none();
            let reply = open.read_response(wire.is_head(answering), want_server).await?;
            answering = if answering + 1 == wire.count() { 0 } else { answering + 1 };
            answered += 1;
            record(Outcome::Reply(reply));
        }
        Ok(())
    };
    let result = bounded(watchdog, cut, work).await;
    let unanswered = batch - answered;
    let close = |connection: &mut Option<Connection>| {
        if connection.take().is_some() {
            stats.borrow_mut().disconnected();
        }
    };
    match result {
        Ok(Ok(())) => {
            if !plan.keep_alive || connection.as_ref().is_some_and(Connection::is_closed) {
                close(connection);
            }
        }
        Ok(Err(kind)) => {
            close(connection);
            for _ in 0..unanswered {
                record(Outcome::Failed(kind));
            }
        }
        Err(Cut) => {
            close(connection);
            let outcome = cut_outcome(deadline, limit, phase.get());
            for _ in 0..unanswered {
                record(outcome.clone());
            }
        }
    }
}

/// `work` was cut off by the timeout or the deadline.
struct Cut;

/// Runs `work` until `cut`. Instead of a new timer per request (an insert and
/// a removal in the timer wheel each time), the connection's one `watchdog`
/// stays armed at an earlier cut; when it fires before the current cut it is
/// simply re-armed, which happens at most once per timeout period.
async fn bounded<F: Future>(watchdog: &mut Pin<Box<Sleep>>, cut: Instant, work: F) -> Result<F::Output, Cut> {
    if watchdog.deadline() > cut {
        // It must never fire late: only an earlier cut (the -z deadline) costs a re-arm.
        watchdog.as_mut().reset(cut);
    }
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            biased;
            output = &mut work => return Ok(output),
            () = watchdog.as_mut() => {
                if Instant::now() >= cut {
                    return Err(Cut);
                }
                watchdog.as_mut().reset(cut);
            }
        }
    }
}
