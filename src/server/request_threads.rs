//! The OS threads the `pool` and `thread` models run request handlers on.
//!
//! `pool` is Tomcat's shape: the event-driven front end (hyper here, Tomcat's
//! NIO poller there) parses a request and hands it to one of a fixed number of
//! worker threads; the request holds that thread until its response is built,
//! and requests beyond the pool's size wait in a queue for a free thread.
//! `thread` starts a new OS thread for every request and never reuses it.
//!
//! Either way the handler is plain blocking code (`std::thread::sleep`, a
//! synchronous database read): the async front end only awaits its result.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use axum::response::{IntoResponse, Response};

use super::error::AppError;
use super::metrics::Metrics;

/// A handler to run on a request thread.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Where blocking handlers run: a fixed pool, or a thread per request.
pub struct RequestThreads {
    kind: Kind,
    metrics: Arc<Metrics>,
}

enum Kind {
    Pool(Arc<Pool>),
    PerRequest,
}

struct Pool {
    queue: Mutex<Queue>,
    ready: Condvar,
}

struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

impl RequestThreads {
    /// Starts a pool of `threads` OS threads, all started now (Tomcat starts
    /// its `minSpareThreads` eagerly and grows to `maxThreads` under load; a
    /// pool that exists whole from the start makes its cost visible at idle).
    pub fn pool(threads: usize, metrics: Arc<Metrics>) -> std::io::Result<RequestThreads> {
        let pool = Arc::new(Pool {
            queue: Mutex::new(Queue { jobs: VecDeque::new(), closed: false }),
            ready: Condvar::new(),
        });
        for i in 0..threads {
            let (pool, metrics) = (pool.clone(), metrics.clone());
            std::thread::Builder::new().name(format!("pool-{i}")).spawn(move || pool.work(&metrics))?;
        }
        Ok(RequestThreads { kind: Kind::Pool(pool), metrics })
    }

    /// A new OS thread for every request.
    pub fn per_request(metrics: Arc<Metrics>) -> RequestThreads {
        RequestThreads { kind: Kind::PerRequest, metrics }
    }

    /// Runs `handler` on a request thread and awaits its response. A handler
    /// that panics is answered 500; a thread that cannot be started, 503.
    pub async fn run<F>(&self, handler: F) -> Response
    where
        F: FnOnce() -> Response + Send + 'static,
    {
        let (reply, replied) = tokio::sync::oneshot::channel();
        let metrics = self.metrics.clone();
        let job = move || {
            metrics.handler_threads_busy.inc();
            let response = catch_unwind(AssertUnwindSafe(handler));
            metrics.handler_threads_busy.dec();
            // The client may have gone: nobody waits for the reply then.
            let _ = reply.send(response.unwrap_or_else(|_| AppError::Panicked.into_response()));
        };
        match &self.kind {
            Kind::Pool(pool) => pool.submit(Box::new(job), &self.metrics),
            Kind::PerRequest => {
                let started = std::thread::Builder::new().name("request".into()).spawn(job);
                if let Err(e) = started {
                    return AppError::NoThread(e.to_string()).into_response();
                }
                self.metrics.handler_threads_started.fetch_add(1, Relaxed);
            }
        }
        replied.await.unwrap_or_else(|_| AppError::Panicked.into_response())
    }
}

impl Drop for RequestThreads {
    /// Lets the pool's threads end once the queue is empty.
    fn drop(&mut self) {
        if let Kind::Pool(pool) = &self.kind {
            pool.queue.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
            pool.ready.notify_all();
        }
    }
}

impl Pool {
    fn submit(&self, job: Job, metrics: &Metrics) {
        metrics.handler_queue.inc();
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).jobs.push_back(job);
        self.ready.notify_one();
    }

    /// A pool thread: take the oldest waiting request, run it, repeat.
    fn work(&self, metrics: &Metrics) {
        loop {
            let job = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if let Some(job) = queue.jobs.pop_front() {
                        break job;
                    }
                    if queue.closed {
                        return;
                    }
                    queue = self.ready.wait(queue).unwrap_or_else(PoisonError::into_inner);
                }
            };
            metrics.handler_queue.dec();
            job();
        }
    }
}
