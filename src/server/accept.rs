//! The accept loop every server model shares, with its two kinds of
//! admission control.
//!
//! - `--max-connections`: at most that many connections open at once. Beyond
//!   the limit the loop stops calling `accept` until a connection closes, so
//!   new clients wait in the kernel's accept queue (`--accept-count` long)
//!   and see slow connects, or SYNs dropped once it is full.
//! - `--admission auto`: a connection is accepted and then refused at once,
//!   with a 503 and `Retry-After`, when it does not fit: when the cgroup's
//!   live memory leaves no room for it ([`MemoryBudget`]), or when `accept`
//!   fails for lack of descriptors (EMFILE). For the latter one descriptor
//!   is kept in reserve (an open `/dev/null`): it is closed, the connection
//!   accepted into its slot and refused, and the reserve opened again, so
//!   the client sees a refusal at once instead of a connect that hangs in
//!   the accept queue. Refusals are counted by reason
//!   (`blocklab_connections_refused_total`).
//! - Under the hyper models (reactive, pool, thread) with `--admission auto`,
//!   each request on an admitted connection meets the memory budget's
//!   request line too ([`MemoryBudget::admit_request`], [`Guarded`]): past
//!   it, a 503 and the connection closed. `/metrics` always answers.

use std::convert::Infallible;
use std::fs::File;
use std::future::{Future, Ready};
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use futures_util::future::Either;
use hyper::body::Incoming;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::app::App;
use super::budget::MemoryBudget;
use super::capacity::Refusal;
use super::config::ServeConfig;
use super::endpoint::Endpoint;
use super::metrics::Metrics;
use super::model::AdmissionMode;

/// The body of every refusal.
macro_rules! refusal_body {
    () => {
        "{\"error\":\"over capacity; retry in a second\"}"
    };
}

/// The whole answer to a connection refused for `$why` ([`Refusal::name`]):
/// written before the request is read, and the connection closed after it.
/// `x-refused-for` names the reason, so a client (the sweep's) can count
/// refusals by it across every worker process.
macro_rules! refused {
    ($why:literal) => {
        concat!(
            "HTTP/1.1 503 Service Unavailable\r\n",
            "retry-after: 1\r\n",
            "x-refused-for: ",
            $why,
            "\r\n",
            "content-type: application/json\r\n",
            "content-length: 44\r\n",
            "connection: close\r\n",
            "\r\n",
            refusal_body!()
        )
        .as_bytes()
    };
}

/// The answer to a connection refused for `why`.
fn refused(why: Refusal) -> &'static [u8] {
    match why {
        Refusal::Memory => refused!("memory"),
        Refusal::Descriptors => refused!("descriptors"),
        Refusal::MemoryAtRequest => refused!("memory_at_request"),
    }
}

/// The service hyper serves on each admitted connection: `app`, behind the
/// memory budget's request line when there is a budget.
#[derive(Clone)]
pub struct Guarded {
    app: App,
    admission: Admission,
}

impl hyper::service::Service<Request<Incoming>> for Guarded {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<
        Ready<Result<Response, Infallible>>,
        <App as hyper::service::Service<Request<Incoming>>>::Future,
    >;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        // The path is looked at only for a refusal: /metrics always answers.
        let refuse = self.admission.budget.as_ref().is_some_and(|budget| {
            !budget.admit_request() && Endpoint::from_path(request.uri().path()) != Endpoint::Metrics
        });
        if !refuse {
            return Either::Right(self.app.call(request));
        }
        self.admission.metrics.capacity.refused(Refusal::MemoryAtRequest);
        // The connection header makes hyper close the connection once the
        // answer is written, and so free what it held.
        let answer = (
            StatusCode::SERVICE_UNAVAILABLE,
            [
                (header::RETRY_AFTER, "1"),
                (HeaderName::from_static("x-refused-for"), Refusal::MemoryAtRequest.name()),
                (header::CONTENT_TYPE, "application/json"),
                (header::CONNECTION, "close"),
            ],
            refusal_body!(),
        );
        Either::Left(std::future::ready(Ok(answer.into_response())))
    }
}

/// Counts open connections and enforces the limits.
#[derive(Clone)]
pub struct Admission {
    limit: Option<Arc<Semaphore>>,
    metrics: Arc<Metrics>,
    /// `--admission auto`: refuse past the descriptor limit (and past the
    /// memory budget, when the cgroup has a cap).
    guard: bool,
    budget: Option<Arc<MemoryBudget>>,
}

/// An admitted connection: holds its place under the limit and counts as
/// open until dropped.
pub struct Ticket {
    _permit: Option<OwnedSemaphorePermit>,
    metrics: Arc<Metrics>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.metrics.connections_open.dec();
    }
}

impl Admission {
    /// The service for each connection this admission admits: `app`, each
    /// request refused past the memory budget's request line.
    pub fn guard(&self, app: App) -> Guarded {
        Guarded { app, admission: self.clone() }
    }

    /// At most `max_connections` open at once (`None`: no limit), no other
    /// admission control.
    pub fn new(max_connections: Option<usize>, metrics: Arc<Metrics>) -> Admission {
        let limit = max_connections.map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS))));
        Admission { limit, metrics, guard: false, budget: None }
    }

    /// The limits `config` asks for: `--max-connections` and, under
    /// `--admission auto`, the descriptor reserve and the memory budget of
    /// this process's cgroup.
    pub fn for_config(config: &ServeConfig, metrics: Arc<Metrics>) -> Admission {
        let mut admission = Admission::new(config.max_connections, metrics.clone());
        if config.admission == AdmissionMode::Off {
            return admission;
        }
        admission.guard = true;
        match MemoryBudget::of_own_cgroup(config.admission_reserve_percent, metrics) {
            Ok(Some(budget)) => {
                tracing::info!(
                    cap = budget.limit(),
                    budget = budget.budget(),
                    "admission: connections are admitted while the cgroup's live memory stays under the budget"
                );
                admission.budget = Some(Arc::new(budget));
            }
            Ok(None) => {
                tracing::info!("admission: the cgroup has no memory cap; only descriptors are guarded")
            }
            Err(e) => tracing::warn!(error = %e, "admission: no memory budget; only descriptors are guarded"),
        }
        admission
    }

    /// Accepts connections on `listener` and hands each to `serve` with its
    /// ticket, until `shutdown` resolves.
    pub async fn accept_until(
        &self,
        listener: &TcpListener,
        shutdown: impl Future<Output = ()>,
        mut serve: impl FnMut(TcpStream, SocketAddr, Ticket),
    ) {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut reserve = self.guard.then(open_reserve).flatten();
        // While connections are open, the memory budget reads the usage now
        // and then, to learn what a connection costs with its request in
        // flight (no accept may come until the next burst).
        let mut observe = tokio::time::interval(super::budget::OBSERVE_EVERY);
        observe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let permit = match &self.limit {
                Some(limit) => tokio::select! {
                    permit = limit.clone().acquire_owned() => permit.ok(),
                    () = &mut shutdown => return,
                },
                None => None,
            };
            let (stream, peer) = tokio::select! {
                biased;
                () = &mut shutdown => return,
                _ = observe.tick() => {
                    if let Some(budget) = &self.budget {
                        budget.observe();
                    }
                    continue;
                }
                accepted = listener.accept() => match accepted {
                    Ok(conn) => conn,
                    Err(e) if self.guard && out_of_descriptors(&e) && reserve.is_some() => {
                        // The reserve's slot takes the connection, to refuse it.
                        drop(reserve.take());
                        if let Some(Ok((stream, _))) = listener.accept().now_or_never() {
                            self.refuse(&stream, Refusal::Descriptors);
                        }
                        reserve = open_reserve();
                        continue;
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: the listener is
                        // still good, so wait a little instead of spinning or dying.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        if self.guard && reserve.is_none() {
                            reserve = open_reserve();
                        }
                        continue;
                    }
                },
            };
            if let Some(budget) = &self.budget
                && !budget.admit()
            {
                self.refuse(&stream, Refusal::Memory);
                continue;
            }
            let _ = stream.set_nodelay(true);
            self.metrics.connections_open.inc();
            self.metrics.connections_accepted.fetch_add(1, Relaxed);
            serve(stream, peer, Ticket { _permit: permit, metrics: self.metrics.clone() });
        }
    }

    /// Answers `stream` 503 and closes it (when the caller drops it).
    ///
    /// Straight through the socket (socket2), not tokio's `try_write`: a
    /// socket just accepted has no readiness in tokio yet, so that would
    /// return WouldBlock without trying. A fresh socket's send buffer takes
    /// the whole answer. The request the client has already sent is read
    /// and dropped: a socket closed with unread bytes sends a reset instead
    /// of a clean close.
    fn refuse(&self, stream: &TcpStream, why: Refusal) {
        self.metrics.capacity.refused(why);
        let socket = socket2::SockRef::from(stream);
        let _ = socket.send(refused(why));
        let _ = socket.shutdown(std::net::Shutdown::Write);
        let mut sink = [MaybeUninit::<u8>::uninit(); 2048];
        for _ in 0..4 {
            match socket.recv(&mut sink) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }
}

/// Whether `accept` failed for lack of descriptors, the process's or the system's.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    // EMFILE and ENFILE (no libc here: the values are Linux's).
    matches!(e.raw_os_error(), Some(24 | 23))
}

/// The descriptor kept in reserve to refuse a connection with when the
/// process has no other; `None` when even that cannot be opened now.
fn open_reserve() -> Option<File> {
    File::open("/dev/null").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_http_answer_naming_its_reason() {
        for why in Refusal::ALL {
            let text = std::str::from_utf8(refused(why)).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.starts_with("HTTP/1.1 503 ") && head.contains("\r\nretry-after: 1"));
            assert!(head.contains(&format!("\r\nx-refused-for: {}\r\n", why.name())), "{head}");
            assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
            serde_json::from_str::<serde_json::Value>(body).unwrap();
        }
    }
}
