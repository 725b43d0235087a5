//! The gate in front of a connection pool: one permit per connection that
//! may exist, taken in FIFO order (a fair Tokio semaphore: no read starves
//! under load), and a count of the reads waiting for one, which `/metrics`
//! shows (above zero, the pool's size caps the reads in flight). Both
//! blocklab's pools, Bolt's and PostgreSQL's, stand behind one.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use tokio::sync::{Semaphore, SemaphorePermit};

/// Permits for at most `size` connections, and the checkouts waiting for one.
pub struct Permits {
    permits: Semaphore,
    waiting: AtomicUsize,
}

/// Counts a checkout as waiting until dropped: when it has its permit, or
/// when its read is abandoned while it waits (its timeout).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Permits {
    /// `size` permits, at least 1.
    pub fn new(size: usize) -> Permits {
        Permits { permits: Semaphore::new(size.max(1)), waiting: AtomicUsize::new(0) }
    }

    /// Checkouts waiting for a permit now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Relaxed)
    }

    /// Waits for a permit, in FIFO order, counted as waiting meanwhile.
    pub async fn acquire(&self) -> SemaphorePermit<'_> {
        self.waiting.fetch_add(1, Relaxed);
        let _waiting = Waiting(&self.waiting);
        self.permits.acquire().await.expect("the semaphore is never closed")
    }
}
