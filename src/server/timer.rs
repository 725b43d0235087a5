//! The clock hyper's HTTP/1 connections time their header reads with: one
//! tokio timer per connection, moved lazily, as nginx moves its timers.
//!
//! hyper starts a header-read timeout each time it waits for a request head
//! (a fresh keep-alive wait included) and drops it once the head is in. With
//! hyper-util's `TokioTimer`, each of those is a new tokio timer: an
//! allocation, an insertion into the runtime's timer wheel under its lock,
//! and a removal under the lock again — per request, about a tenth of the
//! CPU instructions blocklab spends serving `/test` (callgrind, see
//! `bench/serve-vs-nginx.py --instructions`).
//!
//! [`ConnectionTimer`] keeps one tokio timer per connection instead. A
//! timeout asked for later than the one armed is only written down; when the
//! armed one fires, it is moved to the latest deadline asked for, and only a
//! timeout that is still being waited on at its own deadline resolves. So a
//! connection that keeps sending requests moves its timer once per timeout
//! period, not once per request, and a client that stops halfway through a
//! head is still cut off on time.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// A [`Timer`] for one connection: give each connection its own.
#[derive(Default)]
pub struct ConnectionTimer {
    /// The connection's one tokio timer, once a timeout was first waited on.
    armed: Arc<Mutex<Option<Pin<Box<tokio::time::Sleep>>>>>,
}

impl ConnectionTimer {
    /// A timer with nothing armed yet.
    pub fn new() -> ConnectionTimer {
        ConnectionTimer::default()
    }
}

impl Timer for ConnectionTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(Timeout { deadline: deadline.into(), armed: self.armed.clone() })
    }

    fn now(&self) -> Instant {
        // tokio's clock, so that tests which pause time pause this too.
        tokio::time::Instant::now().into_std()
    }
}

/// One timeout hyper waits on: resolves once its deadline has passed.
struct Timeout {
    deadline: tokio::time::Instant,
    armed: Arc<Mutex<Option<Pin<Box<tokio::time::Sleep>>>>>,
}

impl Future for Timeout {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        // Only this connection's task polls its timeouts, so the lock is never contended.
        let mut armed = self.armed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let timer = armed.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() > deadline {
            // Armed for later than this timeout: bring it forward.
            timer.as_mut().reset(deadline);
        }
        loop {
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // The armed deadline has passed. It was this timeout's, or this
            // one was asked for later: then move the timer to it.
            if timer.deadline() >= deadline {
                return Poll::Ready(());
            }
            timer.as_mut().reset(deadline);
        }
    }
}

impl Sleep for Timeout {}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(timer: &ConnectionTimer, ms: u64) -> Pin<Box<dyn Sleep>> {
        timer.sleep(Duration::from_millis(ms))
    }

    fn is_ready(sleep: &mut Pin<Box<dyn Sleep>>) -> bool {
        let waker = futures_util::task::noop_waker();
        sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_ready()
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_resolves_at_its_deadline_and_not_before() {
        let timer = ConnectionTimer::new();
        let mut timeout = after(&timer, 1_000);
        assert!(!is_ready(&mut timeout));
        tokio::time::advance(Duration::from_millis(999)).await;
        assert!(!is_ready(&mut timeout));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(is_ready(&mut timeout));
        // Awaited, it wakes its task when the time comes.
        let started = tokio::time::Instant::now();
        after(&timer, 500).await;
        assert_eq!(started.elapsed(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn later_timeouts_reuse_the_timer_and_each_keeps_its_own_deadline() {
        let timer = ConnectionTimer::new();
        // Request after request: each wait gets a timeout 1 s out, then is dropped.
        for _ in 0..10 {
            let mut timeout = after(&timer, 1_000);
            assert!(!is_ready(&mut timeout));
            tokio::time::advance(Duration::from_millis(300)).await;
            assert!(!is_ready(&mut timeout));
        }
        // 3 s have passed, more than a timeout, yet the last one is 700 ms from its end...
        let mut last = after(&timer, 1_000);
        tokio::time::advance(Duration::from_millis(999)).await;
        assert!(!is_ready(&mut last), "a later timeout must not fire at an earlier one's deadline");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(is_ready(&mut last));
        // ...and an earlier deadline than the one armed is kept too.
        let mut long = after(&timer, 5_000);
        assert!(!is_ready(&mut long));
        drop(long);
        let mut short = after(&timer, 100);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(is_ready(&mut short));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_awaited_across_a_moved_timer_wakes_at_its_own_deadline() {
        let timer = ConnectionTimer::new();
        let mut first = after(&timer, 1_000);
        assert!(!is_ready(&mut first));
        drop(first);
        tokio::time::advance(Duration::from_millis(600)).await;
        // Armed for 1 000 ms from the start; this one ends at 1 600 ms.
        let started = tokio::time::Instant::now();
        after(&timer, 1_000).await;
        assert_eq!(started.elapsed(), Duration::from_millis(1_000));
    }
}
