//! One step of the sweep: N connections opened first, then one request sent
//! on every one of them at the same moment (as N JMeter threads do), each
//! request ending as exactly one outcome. Beyond what one source address's
//! ephemeral ports allow, connections to a loopback target come from more
//! loopback addresses (127.0.0.2, 127.0.0.3, …).

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpSocket, TcpStream};

/// Connections one source address opens to the target before the next
/// address takes over. The kernel's ephemeral ports here are 32768–60999
/// (28,232 of them per source address and destination); 25,000 leaves room
/// for the sweep's probes and for ports still in TIME_WAIT from the last step.
pub const CONNECTIONS_PER_ADDRESS: usize = 25_000;

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A 2xx response within the timeout.
    Ok,
    /// Refused by the server, quickly and visibly: a 503 (admission
    /// control's answer), or the connection closed before the request was
    /// sent, so before the server could have read it.
    Refused,
    /// A complete response with another status.
    Status,
    /// The connection was refused by the kernel (ECONNREFUSED: nothing
    /// listening, or the accept queue refused it).
    ConnectRefused,
    /// The connection was not established within the timeout.
    ConnectTimeout,
    /// The server reset the connection.
    Reset,
    /// The server closed the connection before a whole response.
    ClosedEarly,
    /// No whole response within the timeout.
    Timeout,
    /// The load side could not open the connection (descriptors, ephemeral
    /// ports): not the server's failure.
    LoadSide,
}

impl Outcome {
    /// Every outcome, in report order.
    pub const ALL: [Outcome; 9] = [
        Outcome::Ok,
        Outcome::Refused,
        Outcome::Status,
        Outcome::ConnectRefused,
        Outcome::ConnectTimeout,
        Outcome::Reset,
        Outcome::ClosedEarly,
        Outcome::Timeout,
        Outcome::LoadSide,
    ];

    /// Its name in the outputs.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused => "refused",
            Outcome::Status => "status",
            Outcome::ConnectRefused => "connect_refused",
            Outcome::ConnectTimeout => "connect_timeout",
            Outcome::Reset => "reset",
            Outcome::ClosedEarly => "closed_early",
            Outcome::Timeout => "timeout",
            Outcome::LoadSide => "load_side",
        }
    }

    fn of_io(e: &std::io::Error) -> Outcome {
        // EMFILE, ENFILE: out of descriptors; EADDRNOTAVAIL: out of ephemeral ports.
        if matches!(e.raw_os_error(), Some(23 | 24 | 99)) {
            return Outcome::LoadSide;
        }
        match e.kind() {
            ErrorKind::ConnectionRefused => Outcome::ConnectRefused,
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
                Outcome::Reset
            }
            ErrorKind::UnexpectedEof => Outcome::ClosedEarly,
            ErrorKind::TimedOut => Outcome::Timeout,
            _ => Outcome::Reset,
        }
    }
}

/// What one step measured on the load side.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StepLoad {
    /// Connections that were established.
    pub connected: usize,
    /// The slowest connect, in milliseconds (accept-queue waits and SYN retries show here).
    pub connect_max_ms: f64,
    /// Requests by how they ended; they add up to the level.
    pub outcomes: BTreeMap<&'static str, usize>,
    /// Response times of the 2xx answers, from the send to the whole response, in milliseconds.
    /// (Kept out of `results.json`; a client process's report carries them: `agents`.)
    #[serde(skip)]
    pub ok_ms: Vec<f64>,
    /// For each of `ok_ms`, in the same order: when the answer's last bytes
    /// reached the client's socket, from the send, in milliseconds (the
    /// kernel's receive timestamp, SO_TIMESTAMPNS); `None` where the kernel
    /// gave none. What follows it, to `ok_ms`, the answer waited unread for
    /// the client. (Kept out of `results.json` as `ok_ms` is.)
    #[serde(skip)]
    pub ok_arrived_ms: Vec<Option<f64>>,
    /// The slowest 2xx answer (the level's max), when it reached the client's
    /// socket, from its send: the target's share of that answer's time (and
    /// the loopback's, a few µs). `None` without a kernel timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest_arrived_ms: Option<f64>,
    /// The longest any 2xx answer waited in the client's socket, arrived but
    /// not yet read: the client's own lag. `None` without kernel timestamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread_max_ms: Option<f64>,
    /// The slowest refusal ([`Outcome::Refused`]), from its request's send
    /// to the 503 or the close, in milliseconds (0 when none): admission
    /// control is to refuse at once, not after a wait.
    #[serde(default)]
    pub refused_max_ms: f64,
    /// Refusals by the reason the server gave in its `x-refused-for` header
    /// (blocklab's admission control: `memory` or `descriptors`, counted
    /// across every worker process); `unstated` for a 503 without one,
    /// `closed` for a close before the request was sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_for: BTreeMap<String, usize>,
    /// From the first send to the last outcome, in milliseconds.
    pub wall_ms: f64,
    /// From the first request sent to the last, in milliseconds: near 0 for
    /// blocklab's client (every connection open, then every request at once);
    /// JMeter starts its threads one by one, a few ms each.
    pub send_spread_ms: f64,
    /// How many source addresses the connections came from (1 up to
    /// [`CONNECTIONS_PER_ADDRESS`] connections; 0 for JMeter, which does not say).
    pub source_addresses: usize,
    /// How many client processes sent the level's requests (1: the sweep
    /// itself; more when a level needs more descriptors than one process
    /// may hold; 0 for JMeter).
    pub processes: usize,
    /// The client's own words for its failures, counted (JMeter's
    /// `responseCode responseMessage`; empty for blocklab's client, whose
    /// outcomes are its words).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub client_messages: BTreeMap<String, usize>,
}

impl StepLoad {
    /// Share of requests answered 2xx within the timeout, 0..=1.
    pub fn success_rate(&self, level: usize) -> f64 {
        if level == 0 { 0.0 } else { self.count(Outcome::Ok) as f64 / level as f64 }
    }

    /// Requests that ended as `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.outcomes.get(outcome.name()).copied().unwrap_or(0)
    }

    /// Requests with no whole answer within the timeout, connect included
    /// ([`Outcome::Timeout`] and [`Outcome::ConnectTimeout`]).
    pub fn timed_out(&self) -> usize {
        self.count(Outcome::Timeout) + self.count(Outcome::ConnectTimeout)
    }

    /// Sets [`Self::slowest_arrived_ms`] and [`Self::unread_max_ms`] from the
    /// per-answer figures (after every client process's are in).
    pub fn settle_arrivals(&mut self) {
        let arrived =
            || self.ok_ms.iter().zip(&self.ok_arrived_ms).filter_map(|(ok, at)| Some((*ok, (*at)?)));
        self.slowest_arrived_ms = self
            .ok_ms
            .iter()
            .zip(&self.ok_arrived_ms)
            .max_by(|a, b| a.0.total_cmp(b.0))
            .and_then(|(_, at)| *at);
        self.unread_max_ms = arrived().map(|(ok, at)| (ok - at).max(0.0)).max_by(f64::total_cmp);
    }

    /// The `q` quantile (0..=1) of the 2xx response times, in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        if self.ok_ms.is_empty() {
            return None;
        }
        let mut sorted = self.ok_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let index = ((sorted.len() - 1) as f64 * q).round() as usize;
        Some(sorted[index])
    }
}

/// Opens `level` connections to `addr`, then sends `GET path` on each at
/// once, and waits for every outcome (each bounded by `timeout`). Each source
/// address opens at most `per_address` of the connections (see [`source`]).
pub async fn run(
    addr: SocketAddr,
    host: &str,
    path: &str,
    level: usize,
    timeout: Duration,
    per_address: usize,
) -> StepLoad {
    let opened = open(addr, 0..level, timeout, per_address).await;
    send(opened, host, path, timeout).await
}

/// A level's connections, open and waiting for their request, with what
/// failed to open counted.
pub struct Opened {
    load: StepLoad,
    streams: Vec<TcpStream>,
    sources: BTreeSet<IpAddr>,
}

impl Opened {
    /// Connections established.
    pub fn connected(&self) -> usize {
        self.streams.len()
    }

    /// The source addresses they came from.
    pub fn sources(&self) -> &BTreeSet<IpAddr> {
        &self.sources
    }
}

/// Opens the connections numbered `range` of a level to `addr` (the numbers
/// choose their source addresses, so that a level split over several
/// processes uses each address once), each bounded by `timeout`.
pub async fn open(
    addr: SocketAddr,
    range: std::ops::Range<usize>,
    timeout: Duration,
    per_address: usize,
) -> Opened {
    let connects: Vec<_> = range
        .clone()
        .map(|i| {
            let from = source(addr, i, per_address).map(|ip| (ip, source_port(i, per_address)));
            tokio::spawn(async move {
                let started = Instant::now();
                let result = match tokio::time::timeout(timeout, connect(from, addr)).await {
                    Ok(Ok(stream)) => Ok(stream),
                    Ok(Err(e)) => Err(Outcome::of_io(&e)),
                    Err(_) => Err(Outcome::ConnectTimeout),
                };
                (result, started.elapsed())
            })
        })
        .collect();
    let mut load = StepLoad { processes: 1, ..StepLoad::default() };
    let mut streams = Vec::with_capacity(range.len());
    let mut sources = BTreeSet::new();
    for connect in connects {
        match connect.await {
            Ok((Ok(stream), took)) => {
                load.connect_max_ms = load.connect_max_ms.max(took.as_secs_f64() * 1e3);
                if let Ok(local) = stream.local_addr() {
                    sources.insert(local.ip());
                }
                streams.push(stream);
            }
            Ok((Err(outcome), _)) => *load.outcomes.entry(outcome.name()).or_default() += 1,
            Err(_) => *load.outcomes.entry(Outcome::LoadSide.name()).or_default() += 1,
        }
    }
    load.connected = streams.len();
    load.source_addresses = sources.len();
    Opened { load, streams, sources }
}

/// Sends `GET path` on every open connection at once and waits for every
/// outcome, each bounded by `timeout`; response times run from each
/// request's own send.
pub async fn send(opened: Opened, host: &str, path: &str, timeout: Duration) -> StepLoad {
    let Opened { mut load, streams, .. } = opened;
    let request: std::sync::Arc<[u8]> =
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: blocklab-sweep\r\n\r\n")
            .into_bytes()
            .into();
    let started = Instant::now();
    let requests: Vec<_> = streams
        .into_iter()
        .map(|stream| {
            let request = request.clone();
            tokio::spawn(async move {
                let (sent, sent_wall) = (Instant::now(), SystemTime::now());
                let (outcome, why, arrived) =
                    match tokio::time::timeout(timeout, exchange(stream, &request)).await {
                        Ok(ended) => ended,
                        Err(_) => (Outcome::Timeout, None, None),
                    };
                let arrived = arrived.map(|at| at.duration_since(sent_wall).unwrap_or_default());
                (outcome, why, sent.elapsed(), arrived, sent.duration_since(started))
            })
        })
        .collect();
    for request in requests {
        let (outcome, why, took, arrived, sent_at) =
            request.await.unwrap_or((Outcome::LoadSide, None, Duration::ZERO, None, Duration::ZERO));
        load.send_spread_ms = load.send_spread_ms.max(sent_at.as_secs_f64() * 1e3);
        match outcome {
            Outcome::Ok => {
                load.ok_ms.push(took.as_secs_f64() * 1e3);
                load.ok_arrived_ms.push(arrived.map(|at| at.as_secs_f64() * 1e3));
            }
            Outcome::Refused => {
                load.refused_max_ms = load.refused_max_ms.max(took.as_secs_f64() * 1e3);
                *load.refused_for.entry(why.unwrap_or("unstated").to_string()).or_default() += 1;
            }
            _ => {}
        }
        *load.outcomes.entry(outcome.name()).or_default() += 1;
    }
    load.wall_ms = started.elapsed().as_secs_f64() * 1e3;
    load.settle_arrivals();
    load
}

/// The source address of the `i`-th connection to `target`: `None` (the
/// kernel's choice, 127.0.0.1 for a loopback target) for the first
/// `per_address`, then 127.0.0.2 for the next `per_address`, and so on. Every
/// 127.x.y.z is this machine's own, and each has its own ephemeral ports.
/// A target that is not IPv4 loopback always gets the kernel's choice.
pub fn source(target: SocketAddr, i: usize, per_address: usize) -> Option<IpAddr> {
    let nth = i / per_address.max(1);
    if nth == 0 || !matches!(target.ip(), IpAddr::V4(ip) if ip.is_loopback()) {
        return None;
    }
    // 127.0.0.2 … 127.255.255.254: far more than any level needs.
    let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 0, 1)) + u32::try_from(nth).ok()?);
    ip.is_loopback().then_some(IpAddr::V4(ip))
}

/// Connects to `addr`, from `from` when given: its address and the port
/// asked for, else any free port. SO_REUSEADDR lets a port whose last
/// connection is still in TIME_WAIT be bound again (the kernel reuses such
/// a pair on loopback, `tcp_tw_reuse`).
async fn connect(from: Option<(IpAddr, u16)>, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let Some((ip, port)) = from else { return TcpStream::connect(addr).await };
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    // A port of our own choosing, not 0: to find a free port the kernel scans
    // every port already bound on the address, so tens of thousands of
    // connections took minutes of system time (agents gave up at 50,000).
    // A port taken by another program falls back to the kernel's choice.
    if socket.bind(SocketAddr::new(ip, port)).is_err() {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    socket.connect(addr).await
}

/// The first source port tried for connections from 127.0.0.2 and beyond:
/// below the kernel's ephemeral range here (32768–60999), because a port
/// bound by hand is taken from that range for every address — the kernel's
/// own choice for the connections from 127.0.0.1 skips it — and those need
/// up to 25,000 of its 28,232 ports. (Measured: with ports from 32768, the
/// first client process of a 50,000 level opened 8,504 of its 18,976.)
const FIRST_SOURCE_PORT: usize = 4_000;

/// The source port of the `i`-th connection, for a source address of its
/// own: the connections of one address take consecutive ports from
/// [`FIRST_SOURCE_PORT`] (each connection's number is unique in a level, so
/// are its address and port). `None` (any free port) past 65535.
pub fn source_port(i: usize, per_address: usize) -> u16 {
    u16::try_from(FIRST_SOURCE_PORT + i % per_address.max(1)).unwrap_or(0)
}

/// `GET path` on a new connection: `Ok` if any whole response comes within
/// `limit`, else why not.
pub async fn probe(addr: SocketAddr, host: &str, path: &str, limit: Duration) -> Result<(), String> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let attempt = async {
        let stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
        match exchange(stream, request.as_bytes()).await.0 {
            // A refusal is an answer: the server is alive and says so.
            Outcome::Ok | Outcome::Refused | Outcome::Status => Ok(()),
            other => Err(format!("GET {path}: {}", other.name())),
        }
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(result) => result,
        Err(_) => Err(format!("GET {path}: no answer within {limit:?}")),
    }
}

/// Sends the request and reads one whole response: how it ended, for a
/// refusal the reason the server gave, and for an answer when its last bytes
/// reached the socket (the kernel's timestamp; `None` if it gave none). A
/// connection the server has already closed, before anything was sent on
/// it, is a refusal: the server cannot have read the request (admission
/// control past its descriptors accepts and closes at once).
async fn exchange(
    mut stream: TcpStream,
    request: &[u8],
) -> (Outcome, Option<&'static str>, Option<SystemTime>) {
    if closed_before_send(&stream) {
        return (Outcome::Refused, Some("closed"), None);
    }
    // What arrives from now on carries the time it came in (best effort: a
    // kernel that refuses leaves the answer without one).
    let _ = setsockopt(&stream, sockopt::ReceiveTimestampns, &true);
    if let Err(e) = stream.write_all(request).await {
        return (Outcome::of_io(&e), None, None);
    }
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 2048];
    loop {
        let arrived = match read_stamped(&stream, &mut chunk).await {
            Ok((0, _)) => return (Outcome::ClosedEarly, None, None),
            Ok((n, arrived)) => {
                buf.extend_from_slice(&chunk[..n]);
                arrived
            }
            Err(e) => return (Outcome::of_io(&e), None, None),
        };
        let outcome = match complete(&buf) {
            Some(Ok(status)) if (200..300).contains(&status) => Outcome::Ok,
            Some(Ok(503)) => return (Outcome::Refused, refused_for(&buf), None),
            Some(Ok(_)) => Outcome::Status,
            Some(Err(())) => Outcome::ClosedEarly,
            None if buf.len() > 1 << 20 => Outcome::ClosedEarly,
            None => continue,
        };
        return (outcome, None, arrived);
    }
}

/// Reads what `stream` holds into `chunk` (one `recvmsg`, when it is
/// readable), with the kernel's timestamp of the last bytes read: when they
/// reached the socket, whatever the client was doing then.
async fn read_stamped(stream: &TcpStream, chunk: &mut [u8]) -> std::io::Result<(usize, Option<SystemTime>)> {
    loop {
        stream.readable().await?;
        let read = stream.try_io(Interest::READABLE, || {
            let mut iov = [std::io::IoSliceMut::new(chunk)];
            let mut space = nix::cmsg_space!(nix::sys::time::TimeSpec);
            let message = recvmsg::<()>(stream.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::empty())
                .map_err(std::io::Error::from)?;
            let stamp = message.cmsgs().ok().and_then(|mut all| {
                all.find_map(|c| match c {
                    ControlMessageOwned::ScmTimestampns(t) => u64::try_from(t.tv_sec())
                        .ok()
                        .map(|s| SystemTime::UNIX_EPOCH + Duration::new(s, t.tv_nsec() as u32)),
                    _ => None,
                })
            });
            Ok((message.bytes, stamp))
        });
        match read {
            Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            other => return other,
        }
    }
}

/// The reason a 503 in `buf` gives in its `x-refused-for` header: `memory`
/// or `descriptors` (blocklab's admission control), `other` for any other
/// value, `None` without the header.
fn refused_for(buf: &[u8]) -> Option<&'static str> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    response.parse(buf).ok()?;
    let value = response.headers.iter().find(|h| h.name.eq_ignore_ascii_case("x-refused-for"))?.value;
    Some(match value {
        b"memory" => "memory",
        b"descriptors" => "descriptors",
        _ => "other",
    })
}

/// Whether the server closed (FIN or reset) a connection on which nothing
/// was sent yet. A peek straight through the socket (socket2), not tokio's
/// readiness, which a connection never polled for reading does not have:
/// 0 bytes is the server's close; data (a 503 written at accept) or
/// nothing yet is not.
fn closed_before_send(stream: &TcpStream) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    match socket2::SockRef::from(stream).peek(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted),
    }
}

/// `Some(Ok(status))` once `buf` holds a whole response (its body delimited
/// by Content-Length, or chunked up to the last chunk), `Some(Err)` if it is
/// not HTTP, `None` if more is needed.
fn complete(buf: &[u8]) -> Option<Result<u16, ()>> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(buf) {
        Ok(httparse::Status::Complete(head)) => head,
        Ok(httparse::Status::Partial) => return None,
        Err(_) => return Some(Err(())),
    };
    let status = response.code.unwrap_or(0);
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.to_ascii_lowercase())
    };
    let body = &buf[head..];
    if let Some(length) = header("content-length") {
        let length: usize = std::str::from_utf8(&length).ok()?.trim().parse().ok()?;
        return (body.len() >= length).then_some(Ok(status));
    }
    if header("transfer-encoding").is_some_and(|te| te.ends_with(b"chunked")) {
        return body.windows(5).any(|w| w == b"0\r\n\r\n").then_some(Ok(status));
    }
    // No length: 1xx/204/304 have no body; anything else ends at close,
    // which this sweep's single request does not wait for.
    Some(Ok(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_complete_only_with_their_whole_body() {
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab"), None);
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd"), Some(Ok(200)));
        assert_eq!(complete(b"HTTP/1.1 503 x\r\ncontent-length: 0\r\n\r\n"), Some(Ok(503)));
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"), None);
        assert_eq!(
            complete(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
            Some(Ok(200))
        );
        assert_eq!(complete(b"garbage\r\n\r\n"), Some(Err(())));
        assert_eq!(complete(b"HTTP/1.1 20"), None);
    }

    #[test]
    fn sources_take_turns_by_blocks_of_the_per_address_count() {
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(source(local, 0, 3), None);
        assert_eq!(source(local, 2, 3), None);
        assert_eq!(source(local, 3, 3), ip("127.0.0.2"));
        assert_eq!(source(local, 7, 3), ip("127.0.0.3"));
        assert_eq!(source(local, 255 * 4, 4), ip("127.0.1.0"));
        // Each connection of an address on a port of its own, in order.
        assert_eq!((source_port(3, 3), source_port(7, 3)), (4_000, 4_001));
        assert_eq!(source_port(49_999, CONNECTIONS_PER_ADDRESS), 4_000 + 24_999);
        assert!(
            usize::from(source_port(49_999, CONNECTIONS_PER_ADDRESS)) < 32_768,
            "below the ephemeral range"
        );
        assert_eq!(source_port(70_000, 70_000), 4_000, "0 (any free port) only past 65535");
        assert_eq!(source_port(69_999, 70_000), 0);
        assert_eq!(source(local, 49_999, CONNECTIONS_PER_ADDRESS), ip("127.0.0.2"));
        // Not loopback: the kernel chooses, whatever the count.
        assert_eq!(source("10.0.0.1:80".parse().unwrap(), 7, 3), None);
        assert_eq!(source("[::1]:80".parse().unwrap(), 7, 3), None);
    }

    #[test]
    fn the_slowest_answer_splits_into_its_arrival_and_its_wait_unread() {
        // The slowest (6200 ms) reached the socket at 5100 ms: 1100 ms unread, the client's.
        let mut load = StepLoad {
            ok_ms: vec![5010.0, 6200.0, 5050.0],
            ok_arrived_ms: vec![Some(5005.0), Some(5100.0), None],
            ..StepLoad::default()
        };
        load.settle_arrivals();
        assert_eq!((load.slowest_arrived_ms, load.unread_max_ms), (Some(5100.0), Some(1100.0)));
        // The slowest without a stamp: its arrival is not known, the others' waits still are.
        load.ok_arrived_ms[1] = None;
        load.settle_arrivals();
        assert_eq!((load.slowest_arrived_ms, load.unread_max_ms), (None, Some(5.0)));
    }

    #[test]
    fn quantiles_of_the_successes() {
        let load = StepLoad { ok_ms: vec![5.0, 1.0, 3.0, 2.0, 4.0], ..StepLoad::default() };
        assert_eq!(
            (load.quantile_ms(0.0), load.quantile_ms(0.5), load.quantile_ms(1.0)),
            (Some(1.0), Some(3.0), Some(5.0))
        );
        assert_eq!(StepLoad::default().quantile_ms(0.5), None);
    }
}
