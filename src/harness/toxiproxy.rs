//! The network between a server and its database: Toxiproxy (the `toxiproxy`
//! peer, of kind `link`), started as a child process like every process the
//! harness starts — through `scripts/peers run`, pinned to the CPUs asked
//! for, ready once it prints its `listening on` line, measured from /proc,
//! stopped by its own pid — and a small client of its HTTP API: a proxy in
//! front of a database ([`Toxiproxy::proxy`]), toxics added and removed
//! during a run ([`Proxy::add`], [`Proxy::remove`]), and a round trip put on
//! the link ([`Proxy::set_rtt`]).
//!
//! The API is Toxiproxy's own (v2): `POST /proxies` {name, listen, upstream,
//! enabled}; `POST /proxies/NAME/toxics` {name, type, stream, toxicity,
//! attributes}; `DELETE /proxies/NAME/toxics/TOXIC`; `GET /version`. Each
//! call is one HTTP/1.0 exchange over a blocking socket, read with the
//! crate's own HTTP/1.1 codec ([`crate::http1`]): a handful of calls per
//! run, from the runner's thread, need no HTTP client of their own.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::json;

use super::launch;
use super::process::ServerProcess;
use super::target::Targets;
use crate::db::redact_credentials;

/// The name of the link peer (`peers/toxiproxy/`).
pub const PEER: &str = "toxiproxy";

/// How long Toxiproxy may take to answer its API once started.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// How long one API call may take.
const CALL_LIMIT: Duration = Duration::from_secs(10);

/// A running Toxiproxy: its API's address, its version, its process.
pub struct Toxiproxy {
    process: ServerProcess,
    version: String,
    cpus: Option<String>,
}

impl Toxiproxy {
    /// Starts the `toxiproxy` peer on a free loopback port, pinned to `cpus`
    /// (a taskset list) when given, and reads its version from the API. The
    /// error says why (not built, with the command that builds it; did not
    /// start, with its last lines).
    pub fn start(targets: &Targets, cpus: Option<&str>) -> Result<Toxiproxy, String> {
        let peer = targets.link(PEER).ok_or_else(|| format!("no link peer '{PEER}' under peers/"))?;
        if !targets.peers.is_built(PEER) {
            let reason = targets.peers.why_not_buildable(PEER).map(|r| format!(" ({r})")).unwrap_or_default();
            return Err(format!("{PEER} is not built{reason}: scripts/peers build {PEER}"));
        }
        let spec = targets.peer_spec(peer, &[]).pinned(cpus);
        let process = launch::server(spec, READY_WITHIN).map_err(|e| format!("{PEER}: {e}"))?.process;
        let mut proxy = Toxiproxy { process, version: String::new(), cpus: cpus.map(str::to_string) };
        let (status, version) = call(proxy.api(), "GET", "/version", None)?;
        if status != 200 {
            return Err(format!("{PEER}: GET /version answered {status}: {version}"));
        }
        proxy.version = version.trim().to_string();
        Ok(proxy)
    }

    /// Where its HTTP API listens.
    pub fn api(&self) -> SocketAddr {
        self.process.addr()
    }

    /// Its version, as `GET /version` gives it (e.g. `2.5.0`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// What it is and where it runs, in one line for the conditions of a
    /// report: `Toxiproxy 2.5.0 (pid N, CPU 1)`.
    pub fn describe(&self) -> String {
        let place = self.cpus.as_deref().map_or_else(|| "not pinned".to_string(), |c| format!("CPU {c}"));
        format!("Toxiproxy {} (pid {}, {place})", self.version, self.pid())
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// CPU time it has used so far (user + system), from /proc: its cost on
    /// the machine, read before and after a run to give its CPU per read.
    pub fn cpu_time(&self) -> Option<Duration> {
        self.process.cpu_time()
    }

    /// `Err(reason)` if it has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        self.process.check_alive()
    }

    /// Creates the proxy `name` listening on a free loopback port and
    /// forwarding to `upstream` (`HOST:PORT`), enabled, with no toxic.
    pub fn proxy(&self, name: &str, upstream: &str) -> Result<Proxy, String> {
        let body = json!({ "name": name, "listen": "127.0.0.1:0", "upstream": upstream, "enabled": true });
        let (status, answer) = call(self.api(), "POST", "/proxies", Some(&body))?;
        if status != 201 {
            return Err(format!("{PEER}: creating proxy {name}: {status} {answer}"));
        }
        let created: serde_json::Value =
            serde_json::from_str(&answer).map_err(|e| format!("{PEER}: proxy {name}: {e}: {answer}"))?;
        let listen = created["listen"]
            .as_str()
            .and_then(|l| l.parse().ok())
            .ok_or_else(|| format!("{PEER}: proxy {name}: no listen address in {answer}"))?;
        Ok(Proxy { api: self.api(), name: name.to_string(), listen, upstream: upstream.to_string() })
    }

    /// SIGTERM (Toxiproxy exits 0 at once), SIGKILL after 5 s. Returns how it ended.
    pub fn stop(&mut self) -> String {
        self.process.stop(Duration::from_secs(5))
    }
}

/// One proxy of a running Toxiproxy: a listening port in front of an
/// upstream, whose toxics can change during a run.
#[derive(Debug, Clone)]
pub struct Proxy {
    api: SocketAddr,
    name: String,
    listen: SocketAddr,
    upstream: String,
}

impl Proxy {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it listens: what a client connects to instead of the upstream.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// What it forwards to (`HOST:PORT`).
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// `url` (a database URL such as `bolt://HOST:PORT` or
    /// `falkor://user:pw@HOST:PORT/graph`) with its host and port replaced by
    /// this proxy's: the same database, reached through the link.
    pub fn url_for(&self, url: &str) -> Result<String, String> {
        through(url, self.listen)
    }

    /// Adds `toxic`: from now on, every connection through the proxy (open
    /// ones included) meets it.
    pub fn add(&self, toxic: &Toxic) -> Result<(), String> {
        let body = toxic.to_json()?;
        let path = format!("/proxies/{}/toxics", self.name);
        match call(self.api, "POST", &path, Some(&body))? {
            (200, _) => Ok(()),
            (status, answer) => {
                Err(format!("{PEER}: adding {} to {}: {status} {answer}", toxic.name, self.name))
            }
        }
    }

    /// Removes the toxic called `name`. Toxiproxy closes the connections a
    /// `timeout` toxic held when it is removed; the others carry on.
    pub fn remove(&self, name: &str) -> Result<(), String> {
        let path = format!("/proxies/{}/toxics/{name}", self.name);
        match call(self.api, "DELETE", &path, None)? {
            (204, _) => Ok(()),
            (status, answer) => Err(format!("{PEER}: removing {name} from {}: {status} {answer}", self.name)),
        }
    }

    /// Puts a round trip of `rtt` on the link (replacing any set before): a
    /// `latency` toxic of half of it on each direction, named
    /// [`RTT_TOXICS`]. Toxiproxy counts latency in whole milliseconds, so an
    /// odd RTT puts the extra millisecond on the answers (downstream) and a
    /// fraction of a millisecond is refused. Zero removes it.
    pub fn set_rtt(&self, rtt: Duration) -> Result<(), String> {
        let (up, down) = split_rtt(rtt)?;
        for name in RTT_TOXICS {
            // Absent when no RTT was set: a 404 here is the expected case.
            let _ = self.remove(name);
        }
        if rtt.is_zero() {
            return Ok(());
        }
        for (name, stream, half) in
            [(RTT_TOXICS[0], Stream::Upstream, up), (RTT_TOXICS[1], Stream::Downstream, down)]
        {
            self.add(&Toxic::new(name, stream, Fault::Latency { latency: half, jitter: Duration::ZERO }))?;
        }
        Ok(())
    }
}

/// The names of the two toxics [`Proxy::set_rtt`] adds (upstream, downstream).
pub const RTT_TOXICS: [&str; 2] = ["rtt_upstream", "rtt_downstream"];

/// `Err(why)` when `rtt` cannot be put on a link: Toxiproxy counts latency
/// in whole milliseconds.
pub fn check_rtt(rtt: Duration) -> Result<(), String> {
    split_rtt(rtt).map(drop)
}

/// The halves of `rtt` in whole milliseconds: (upstream, downstream), the
/// odd millisecond downstream.
fn split_rtt(rtt: Duration) -> Result<(Duration, Duration), String> {
    let ms = whole_millis(rtt, "an RTT")?;
    Ok((Duration::from_millis(ms / 2), Duration::from_millis(ms - ms / 2)))
}

/// Which way a toxic acts: on what the client sends (`upstream`) or on what
/// the server answers (`downstream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Client to server: the requests.
    Upstream,
    /// Server to client: the answers.
    Downstream,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

/// What a toxic does to the bytes of every connection through the proxy
/// (Toxiproxy's toxic types; its times are whole milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `latency`: every chunk is delayed by `latency` ± `jitter`.
    Latency {
        /// The delay.
        latency: Duration,
        /// Its random spread.
        jitter: Duration,
    },
    /// `timeout`: no byte passes; the connection is closed after `after`, or
    /// never when it is `None` (the link that stops answering).
    Timeout {
        /// When the connection is closed, if ever.
        after: Option<Duration>,
    },
    /// `reset_peer`: once data arrives, the connection is reset (TCP RST)
    /// after `after`.
    ResetPeer {
        /// The delay before the reset.
        after: Duration,
    },
    /// `limit_data`: the connection is closed once `bytes` have passed
    /// (answers cut short).
    LimitData {
        /// Bytes let through.
        bytes: u64,
    },
    /// `slow_close`: the close is held back by `delay`.
    SlowClose {
        /// The delay before the close passes.
        delay: Duration,
    },
}

impl Fault {
    /// Toxiproxy's name for it.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Latency { .. } => "latency",
            Fault::Timeout { .. } => "timeout",
            Fault::ResetPeer { .. } => "reset_peer",
            Fault::LimitData { .. } => "limit_data",
            Fault::SlowClose { .. } => "slow_close",
        }
    }

    fn attributes(&self) -> Result<serde_json::Value, String> {
        let ms = |d: Duration| whole_millis(d, self.kind());
        Ok(match *self {
            Fault::Latency { latency, jitter } => json!({ "latency": ms(latency)?, "jitter": ms(jitter)? }),
            Fault::Timeout { after } => json!({ "timeout": after.map_or(Ok(0), ms)? }),
            Fault::ResetPeer { after } => json!({ "timeout": ms(after)? }),
            Fault::LimitData { bytes } => json!({ "bytes": bytes }),
            Fault::SlowClose { delay } => json!({ "delay": ms(delay)? }),
        })
    }
}

/// A toxic: a fault on one direction of a proxy, under a name to remove it by.
#[derive(Debug, Clone, PartialEq)]
pub struct Toxic {
    /// Its name on the proxy.
    pub name: String,
    /// The direction it acts on.
    pub stream: Stream,
    /// What it does.
    pub fault: Fault,
    /// The share of connections it applies to, 0 to 1 (1: all).
    pub toxicity: f32,
}

impl Toxic {
    /// `fault` on `stream` for every connection, called `name`.
    pub fn new(name: &str, stream: Stream, fault: Fault) -> Toxic {
        Toxic { name: name.to_string(), stream, fault, toxicity: 1.0 }
    }

    /// The body of `POST /proxies/NAME/toxics`.
    pub fn to_json(&self) -> Result<serde_json::Value, String> {
        Ok(json!({
            "name": self.name,
            "type": self.fault.kind(),
            "stream": self.stream.name(),
            "toxicity": self.toxicity,
            "attributes": self.fault.attributes()?,
        }))
    }
}

/// `d` in whole milliseconds, the unit of Toxiproxy's attributes.
fn whole_millis(d: Duration, what: &str) -> Result<u64, String> {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(format!("{what} of {d:?} is not a whole number of milliseconds (Toxiproxy's unit)"));
    }
    u64::try_from(d.as_millis()).map_err(|_| format!("{what} of {d:?} is too long"))
}

/// `url` with its host and port replaced by `addr`'s (credentials, path and
/// query kept).
pub fn through(url: &str, addr: SocketAddr) -> Result<String, String> {
    // A database URL may carry a password: an error quotes it redacted.
    let mut parsed =
        url::Url::parse(url).map_err(|e| format!("'{}' is not a URL: {e}", redact_credentials(url)))?;
    parsed
        .set_ip_host(addr.ip())
        .map_err(|()| format!("'{}' has no host to replace", redact_credentials(url)))?;
    parsed
        .set_port(Some(addr.port()))
        .map_err(|()| format!("'{}' takes no port", redact_credentials(url)))?;
    Ok(parsed.to_string())
}

/// `HOST:PORT` of a database URL: the upstream of a proxy in front of it.
pub fn upstream_of(url: &str) -> Result<String, String> {
    let parsed =
        url::Url::parse(url).map_err(|e| format!("'{}' is not a URL: {e}", redact_credentials(url)))?;
    let host = parsed.host_str().ok_or_else(|| format!("'{}' has no host", redact_credentials(url)))?;
    let port = parsed.port().ok_or_else(|| format!("'{}' has no port", redact_credentials(url)))?;
    Ok(format!("{host}:{port}"))
}

/// One call of the API: `METHOD path` with an optional JSON body, over a
/// new connection (HTTP/1.0: the answer ends with the close). Returns the
/// status and the body.
fn call(
    api: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<(u16, String), String> {
    let failed = |e: std::io::Error| format!("{PEER} API at {api}: {method} {path}: {e}");
    let mut stream = TcpStream::connect_timeout(&api, CALL_LIMIT).map_err(failed)?;
    stream.set_read_timeout(Some(CALL_LIMIT)).map_err(failed)?;
    stream.set_write_timeout(Some(CALL_LIMIT)).map_err(failed)?;
    let body = body.map(serde_json::Value::to_string).unwrap_or_default();
    // A User-Agent that is not a browser's: Toxiproxy refuses "Mozilla/…".
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {api}\r\nUser-Agent: blocklab\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(failed)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(failed)?;
    let head = crate::http1::parse_response(&answer, 64 * 1024, method == "HEAD", false)
        .map_err(|e| format!("{PEER} API: {method} {path}: {e}"))?
        .ok_or_else(|| format!("{PEER} API: {method} {path}: the answer ended inside its head"))?;
    let rest = &answer[head.len..];
    let body = match head.framing {
        crate::http1::Framing::None => &[][..],
        crate::http1::Framing::Length(n) => &rest[..rest.len().min(n as usize)],
        // HTTP/1.0 has no chunked coding; anything else runs to the close.
        _ => rest,
    };
    Ok((head.status, String::from_utf8_lossy(body).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toxics_are_written_as_toxiproxy_reads_them() {
        let reset =
            Toxic::new("cut", Stream::Downstream, Fault::ResetPeer { after: Duration::from_millis(5) });
        assert_eq!(
            reset.to_json().unwrap(),
            json!({"name": "cut", "type": "reset_peer", "stream": "downstream", "toxicity": 1.0,
                   "attributes": {"timeout": 5}})
        );
        let stall = Toxic::new("stall", Stream::Upstream, Fault::Timeout { after: None });
        assert_eq!(stall.to_json().unwrap()["attributes"], json!({"timeout": 0}));
        let short = Toxic::new("short", Stream::Downstream, Fault::LimitData { bytes: 100 });
        assert_eq!(short.to_json().unwrap()["attributes"], json!({"bytes": 100}));
        let close =
            Toxic::new("close", Stream::Downstream, Fault::SlowClose { delay: Duration::from_secs(1) });
        assert_eq!(close.to_json().unwrap()["attributes"], json!({"delay": 1000}));
        let odd = Fault::Latency { latency: Duration::from_micros(500), jitter: Duration::ZERO };
        assert!(Toxic::new("x", Stream::Upstream, odd).to_json().unwrap_err().contains("whole number"));
    }

    #[test]
    fn an_rtt_is_split_in_whole_milliseconds_the_odd_one_downstream() {
        let ms = Duration::from_millis;
        assert_eq!(split_rtt(ms(10)).unwrap(), (ms(5), ms(5)));
        assert_eq!(split_rtt(ms(1)).unwrap(), (ms(0), ms(1)));
        assert_eq!(split_rtt(ms(3)).unwrap(), (ms(1), ms(2)));
        assert!(split_rtt(Duration::from_micros(1500)).is_err());
    }

    #[test]
    fn a_database_url_is_pointed_through_the_proxy() {
        let proxy: SocketAddr = "127.0.0.1:30001".parse().unwrap();
        assert_eq!(through("bolt://127.0.0.1:7687", proxy).unwrap(), "bolt://127.0.0.1:30001");
        assert_eq!(
            through("falkor://user:p%40ss@db.example:6379/graph_1", proxy).unwrap(),
            "falkor://user:p%40ss@127.0.0.1:30001/graph_1"
        );
        assert_eq!(upstream_of("falkor://127.0.0.1:6379/g").unwrap(), "127.0.0.1:6379");
        assert!(upstream_of("bolt://127.0.0.1").unwrap_err().contains("no port"));
    }
}
