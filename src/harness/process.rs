//! A target as a child process — a `blocklab serve`, a peer, any command
//! that prints `listening on http://ADDR` (started by the launcher, `harness::launch`)
//! — started pinned and ready (that line read), watched while the load runs, measured from /proc
//! ([`crate::proc`]), stopped by its own pid.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines of the server's stderr kept for failure reports.
const TAIL_LINES: usize = 30;

/// A running server.
pub struct ServerProcess {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl ServerProcess {
    /// Starts any server `command` that prints `listening on http://ADDR`
    /// once it accepts (a `blocklab serve`, a JVM peer, a wrapper), and waits
    /// up to `ready_within` for that line.
    pub fn spawn(mut command: Command, ready_within: Duration) -> Result<Self, String> {
        let program = command.get_program().to_string_lossy().into_owned();
        command
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a ctrl-c at the terminal reaches the runner,
            // which stops the server itself, in order.
            .process_group(0);
        let mut child = command.spawn().map_err(|e| format!("cannot start {program}: {e}"))?;
        let stderr = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES)));
        if let Some(err) = child.stderr.take() {
            let tail = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    let mut tail = tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if tail.len() == TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            });
        }
        let (found, listening) = std::sync::mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if let Some(addr) = line.trim().strip_prefix("listening on http://") {
                        let _ = found.send(addr.to_string());
                    }
                }
            });
        }
        let mut server = ServerProcess { child, addr: "127.0.0.1:0".parse().expect("valid"), stderr };
        let started = Instant::now();
        loop {
            match listening.recv_timeout(Duration::from_millis(50)) {
                Ok(addr) => {
                    server.addr = addr.parse().map_err(|e| format!("bad listening line '{addr}': {e}"))?;
                    return Ok(server);
                }
                Err(_) => {
                    server.check_alive()?;
                    if started.elapsed() > ready_within {
                        let reason = format!("not ready within {ready_within:?}{}", server.tail_suffix());
                        server.stop(Duration::from_secs(2));
                        return Err(reason);
                    }
                }
            }
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Err(reason)` if the process has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                // Give the stderr reader a moment to collect the last lines.
                std::thread::sleep(Duration::from_millis(100));
                Err(format!("server exited ({status}){}", self.tail_suffix()))
            }
            Err(e) => Err(format!("cannot watch the server: {e}")),
        }
    }

    /// The last lines it wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    fn tail_suffix(&self) -> String {
        let tail = self.stderr_tail();
        if tail.is_empty() { String::new() } else { format!("; stderr: {tail}") }
    }

    /// CPU time (user + system) it has used, from /proc.
    pub fn cpu_time(&self) -> Option<Duration> {
        crate::proc::cpu_time(crate::proc::Pid::Of(self.pid()))
    }

    /// Its peak resident memory so far, in bytes.
    pub fn peak_rss(&self) -> Option<u64> {
        crate::proc::peak_rss_bytes(crate::proc::Pid::Of(self.pid()))
    }

    /// Pauses every process of its group (SIGSTOP) or lets them go on
    /// (SIGCONT): a server kept for later takes no CPU from the one measured
    /// meanwhile (a JVM's JIT and collector go on after its load ends).
    pub fn pause(&self, paused: bool) -> Result<(), String> {
        let signal = if paused { "-STOP" } else { "-CONT" };
        let status = Command::new("kill")
            .args([signal, "--", &format!("-{}", self.pid())])
            .status()
            .map_err(|e| format!("cannot run kill: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("kill {signal} of process group {}: {status}", self.pid()))
        }
    }

    /// SIGTERM, then up to `grace` to exit, then SIGKILL. Returns how it ended.
    /// A paused server is let go on first, so that it sees the SIGTERM.
    pub fn stop(&mut self, grace: Duration) -> String {
        if let Ok(Some(status)) = self.child.try_wait() {
            return format!("had already exited ({status})");
        }
        let _ = self.pause(false);
        let _ = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status();
        let started = Instant::now();
        while started.elapsed() < grace {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.to_string();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        format!("killed after not stopping within {grace:?}")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop(Duration::from_secs(5));
        }
    }
}
