//! Where the lean server's `/delay` requests wait: not in a task each, but
//! as one entry each in a heap ordered by deadline, behind one task that
//! sleeps until the earliest and hands each entry back when its time comes —
//! the timer tree of an event loop such as nginx's.
//!
//! A task per waiting request costs its whole future in tokio's task cell
//! (768 B for lean's connection) and, with its socket still registered, the
//! reactor's state for the socket; what a waiting request needs is its
//! deadline and what it will answer with. [`Parking`] holds exactly that.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

/// At most this many items are handed back before the lot's task lets the
/// tasks it started run.
const BATCH: usize = 256;

/// Items waiting for their deadline; clones share one heap.
pub struct Parking<T> {
    shared: Arc<Lot<T>>,
}

impl<T> Clone for Parking<T> {
    fn clone(&self) -> Self {
        Parking { shared: self.shared.clone() }
    }
}

struct Lot<T> {
    heap: Mutex<BinaryHeap<Reverse<Entry<T>>>>,
    /// Told when an entry becomes the earliest, so the sleeper wakes for it.
    earlier: Notify,
}

/// One waiting item and when it is due.
pub struct Entry<T> {
    due: Instant,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.due == other.due
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.due.cmp(&other.due)
    }
}

impl<T> Parking<T> {
    /// An empty lot with room for `capacity` items reserved, so that it
    /// never grows by reallocating (see [`Parking::ENTRY_BYTES`]).
    ///
    /// A heap that doubles leaves its old buffers free but still charged to
    /// the cgroup until the allocator purges them, a second or more later:
    /// under lean, 18,000 requests arriving at once left about 3 MiB so, a
    /// fifth of what they cost (measured here). Reserved and untouched, the
    /// room costs address space only; what a burst touches stays charged,
    /// its high-water mark, at most `capacity` entries.
    pub fn with_capacity(capacity: usize) -> Parking<T> {
        let heap = Mutex::new(BinaryHeap::with_capacity(capacity));
        Parking { shared: Arc::new(Lot { heap, earlier: Notify::new() }) }
    }

    /// What each waiting item costs in the heap, in bytes (its reserved
    /// room aside).
    pub const ENTRY_BYTES: usize = std::mem::size_of::<Reverse<Entry<T>>>();

    /// Leaves `item` until `due`.
    pub fn park(&self, due: Instant, item: T) {
        let mut heap = self.shared.heap.lock().unwrap_or_else(PoisonError::into_inner);
        let earliest = heap.peek().is_none_or(|Reverse(first)| due < first.due);
        heap.push(Reverse(Entry { due, item }));
        drop(heap);
        if earliest {
            // Stored as a permit when the sleeper is not waiting yet, so the
            // wake-up is never lost.
            self.shared.earlier.notify_one();
        }
    }

    /// How many items wait.
    pub fn len(&self) -> usize {
        self.shared.heap.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands each item to `due` once its time has come, in order of
    /// deadline; runs for as long as its task is polled (one such task per lot).
    pub async fn run(&self, mut due: impl FnMut(T)) {
        loop {
            let next = self.take_due(&mut due);
            if next.is_some_and(|at| at <= Instant::now()) {
                // More are due than one batch: let the tasks just started
                // run before taking more.
                tokio::task::yield_now().await;
                continue;
            }
            match next {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at.into()) => {}
                        () = self.shared.earlier.notified() => {}
                    }
                }
                None => self.shared.earlier.notified().await,
            }
        }
    }

    /// Takes every item that is due and gives it to `due`; returns the next
    /// deadline.
    fn take_due(&self, due: &mut impl FnMut(T)) -> Option<Instant> {
        let now = Instant::now();
        let mut ready = Vec::new();
        let next = {
            let mut heap = self.shared.heap.lock().unwrap_or_else(PoisonError::into_inner);
            while ready.len() < BATCH && heap.peek().is_some_and(|Reverse(first)| first.due <= now) {
                if let Some(Reverse(entry)) = heap.pop() {
                    ready.push(entry.item);
                }
            }
            heap.peek().map(|Reverse(first)| first.due)
        };
        // Outside the lock: handing an item back may start a task.
        ready.into_iter().for_each(due);
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A lot with its task running; each item handed back comes out of the
    /// receiver with the instant it came.
    fn running() -> (Parking<u32>, tokio::sync::mpsc::UnboundedReceiver<(u32, Instant)>) {
        let lot = Parking::with_capacity(16);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let runner = lot.clone();
        tokio::spawn(async move { runner.run(|item: u32| tx.send((item, Instant::now())).unwrap()).await });
        (lot, rx)
    }

    // Real time, not tokio's paused clock: the lot's deadlines are std
    // `Instant`s, which a paused clock does not move.
    #[tokio::test]
    async fn items_come_back_at_their_deadlines_in_order() {
        let (lot, mut rx) = running();
        let start = Instant::now();
        for (item, ms) in [(3, 90), (1, 30), (2, 60)] {
            lot.park(start + Duration::from_millis(ms), item);
        }
        assert_eq!(lot.len(), 3);
        for expected in 1..=3 {
            let (item, at) = rx.recv().await.unwrap();
            assert_eq!(item, expected);
            assert!(at >= start + Duration::from_millis(30 * u64::from(expected)));
        }
        assert!(lot.is_empty());
    }

    #[tokio::test]
    async fn an_earlier_item_parked_while_the_lot_sleeps_is_not_late() {
        let (lot, mut rx) = running();
        let start = Instant::now();
        lot.park(start + Duration::from_secs(60), 60);
        // Let the runner go to sleep until the one minute deadline.
        tokio::time::sleep(Duration::from_millis(10)).await;
        lot.park(start + Duration::from_millis(50), 1);
        let (item, at) = rx.recv().await.unwrap();
        assert_eq!(item, 1);
        assert!(at < start + Duration::from_secs(30), "the earlier item came at {:?}", at - start);
    }

    #[tokio::test]
    async fn a_burst_is_handed_back_in_batches_and_never_reallocates() {
        let lot = Parking::with_capacity(10_000);
        let reserved = lot.shared.heap.lock().unwrap().capacity();
        let now = Instant::now();
        for i in 0..10_000u32 {
            lot.park(now, i);
        }
        let mut got = 0;
        while got < 10_000 {
            let before = got;
            lot.take_due(&mut |_| got += 1);
            assert!(got - before <= BATCH, "{} handed back at once", got - before);
        }
        assert_eq!(lot.shared.heap.lock().unwrap().capacity(), reserved);
    }
}
