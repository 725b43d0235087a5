//! Where the lean server's idle connections wait for their next request:
//! not in a task each, but as one slot each in a table, their sockets in an
//! epoll set of the lot's own, behind one task that wakes when any of them
//! turns readable and hands it back to be served.
//!
//! A task per idle connection costs its future in tokio's task cell (768 B
//! for lean's connection) and its socket's registration with tokio's
//! reactor (another ~256 B); a waiting connection needs only its socket and
//! its place under `--max-connections`, so that is what a slot holds. The
//! lot's epoll set is itself registered with tokio's reactor
//! ([`AsyncFd`]), so the one task sleeps like any other.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};
use tokio::io::unix::AsyncFd;

/// At most this many connections are handed back before the lot's task
/// lets the tasks it started run.
const BATCH: usize = 256;

/// Idle items (sockets and what goes with them) waiting to turn readable.
pub struct IdleLot<T> {
    registry: Registry,
    slots: Mutex<Slots<T>>,
    poll: Mutex<Option<Poll>>,
}

struct Slots<T> {
    held: Vec<Option<T>>,
    free: Vec<usize>,
    len: usize,
    /// Set by [`IdleLot::close_all`]: nothing more is held.
    closed: bool,
}

impl<T: AsRawFd> IdleLot<T> {
    /// An empty lot with an epoll set of its own and room for `capacity`
    /// items reserved, so that its table never grows by reallocating: a
    /// doubling table's old buffers stay charged to the cgroup, free, until
    /// the allocator purges them (see [`super::parking::Parking::with_capacity`]).
    /// Untouched, the room costs address space only; the table's high-water
    /// mark stays charged, at most `capacity` slots.
    pub fn with_capacity(capacity: usize) -> io::Result<IdleLot<T>> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let (held, free) = (Vec::with_capacity(capacity), Vec::with_capacity(capacity));
        let slots = Slots { held, free, len: 0, closed: false };
        Ok(IdleLot { registry, slots: Mutex::new(slots), poll: Mutex::new(Some(poll)) })
    }

    /// What each idle item costs in the table, in bytes (its reserved room
    /// aside).
    pub const SLOT_BYTES: usize = std::mem::size_of::<Option<T>>();

    /// Keeps `item` until its socket turns readable (at once if it already
    /// is); gives it back when it cannot be kept (the lot is closed, or the
    /// kernel refused the socket).
    pub fn hold(&self, item: T) -> Result<(), T> {
        let fd = item.as_raw_fd();
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.closed {
            return Err(item);
        }
        let slot = match slots.free.pop() {
            Some(slot) => slot,
            None => {
                slots.held.push(None);
                slots.held.len() - 1
            }
        };
        // Registered under the lock, so the slot is filled before an event
        // for it can be taken.
        if self.registry.register(&mut SourceFd(&fd), Token(slot), Interest::READABLE).is_err() {
            slots.free.push(slot);
            return Err(item);
        }
        slots.held[slot] = Some(item);
        slots.len += 1;
        Ok(())
    }

    /// How many items are held.
    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).len
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Holds nothing more, and gives every item held to `last` (which may
    /// drop it, closing its socket): for a server that stops, or a lot whose
    /// task failed.
    pub fn close_all(&self, last: impl FnMut(T)) {
        let items: Vec<T> = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.closed = true;
            slots.free = Vec::new();
            slots.len = 0;
            std::mem::take(&mut slots.held).into_iter().flatten().collect()
        };
        for item in &items {
            let _ = self.registry.deregister(&mut SourceFd(&item.as_raw_fd()));
        }
        // Outside the lock: `last` may start tasks.
        items.into_iter().for_each(last);
    }

    /// Takes the item in `slot`, out of the epoll set.
    fn take(&self, slot: usize) -> Option<T> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let item = slots.held.get_mut(slot)?.take()?;
        let _ = self.registry.deregister(&mut SourceFd(&item.as_raw_fd()));
        slots.free.push(slot);
        slots.len -= 1;
        Some(item)
    }

    /// Hands each item whose socket turned readable to `ready`; runs for as
    /// long as its task is polled (the first call only: one task per lot).
    pub async fn run(&self, mut ready: impl FnMut(T)) -> io::Result<()> {
        let poll = self.poll.lock().unwrap_or_else(PoisonError::into_inner).take();
        let Some(poll) = poll else {
            return Err(io::Error::other("the idle lot already has its task"));
        };
        // `AsyncFd::new` is deprecated for types that could hand out a file
        // descriptor they do not own (its successor is `unsafe`, which this
        // crate forbids); `PollFd` owns its epoll set, which stays open and
        // the same until the `AsyncFd` is dropped, as the successor asks.
        #[allow(deprecated)]
        let mut set = AsyncFd::with_interest(PollFd(poll), tokio::io::Interest::READABLE)?;
        let mut events = Events::with_capacity(BATCH);
        loop {
            let mut guard = set.readable_mut().await?;
            events.clear();
            match guard.get_inner_mut().0.poll(&mut events, Some(Duration::ZERO)) {
                Ok(()) if events.is_empty() => {
                    // Drained: wait for tokio's reactor to see the set turn
                    // readable again.
                    guard.clear_ready();
                    continue;
                }
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            drop(guard);
            let mut taken = 0;
            for event in &events {
                taken += 1;
                if let Some(item) = self.take(event.token().0) {
                    ready(item);
                }
            }
            if taken == BATCH {
                // More may be ready: let the connections just handed back
                // run before taking more. (A smaller batch took all there
                // was; the next poll finds nothing and the task waits.)
                tokio::task::yield_now().await;
            }
        }
    }
}

/// The lot's epoll set, as tokio's reactor sees it.
struct PollFd(Poll);

impl AsRawFd for PollFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        (client, server)
    }

    /// A lot with its task running; what it hands back comes out of the receiver.
    fn running() -> (std::sync::Arc<IdleLot<TcpStream>>, tokio::sync::mpsc::UnboundedReceiver<TcpStream>) {
        let lot = std::sync::Arc::new(IdleLot::with_capacity(16).unwrap());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let runner = lot.clone();
        tokio::spawn(async move { runner.run(|s: TcpStream| tx.send(s).unwrap()).await });
        (lot, rx)
    }

    #[tokio::test]
    async fn a_connection_comes_back_when_its_client_writes_and_not_before() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (lot, mut rx) = running();
        let mut clients = Vec::new();
        for _ in 0..3 {
            let (client, server) = pair(&listener);
            lot.hold(server).unwrap();
            clients.push(client);
        }
        assert_eq!(lot.len(), 3);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err(), "a silent connection came back");
        clients[1].write_all(b"ping").unwrap();
        let mut back = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        let mut got = [0u8; 4];
        back.set_nonblocking(false).unwrap();
        back.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        assert_eq!(lot.len(), 2);
        // Held again after being served, it comes back for its next bytes.
        back.set_nonblocking(true).unwrap();
        lot.hold(back).unwrap();
        clients[1].write_all(b"pong").unwrap();
        let back = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        assert_eq!(back.peer_addr().unwrap(), clients[1].local_addr().unwrap());
        // A client that closes makes its connection readable (the end).
        drop(clients.remove(0));
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        assert_eq!(lot.len(), 1);
        let mut closed = 0;
        lot.close_all(|_| closed += 1);
        assert_eq!(closed, 1, "close_all gives back what it held");
        assert!(lot.is_empty());
        let (_client, server) = pair(&listener);
        assert!(lot.hold(server).is_err(), "a closed lot held a connection");
    }

    #[tokio::test]
    async fn bytes_there_before_the_hold_bring_the_connection_back_at_once() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (lot, mut rx) = running();
        let (mut client, server) = pair(&listener);
        client.write_all(b"early").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        lot.hold(server).unwrap();
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
    }
}
