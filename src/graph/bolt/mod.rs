//! blocklab's own Bolt client: just enough of Neo4j's protocol for the
//! study's one read (and the seeding), written from the Bolt protocol and
//! PackStream specifications (neo4j.com/docs/bolt/current/).
//!
//! **Why our own.** Through `neo4rs` 0.9.0-rc.11 Neo4j spent 251 µs of CPU
//! per query where the Java driver 4.4 costs it 195 µs, and blocklab's
//! server spent ~120 µs of CPU per `/getDataAsync` request against ~10 µs
//! for `/test` (issue 25). The causes: its pool (deadpool) sends a RESET on
//! every checkout — an extra round trip and work for Neo4j on every read,
//! with no setting to turn it off — it leaves Nagle's algorithm on (no
//! TCP_NODELAY), and it allocates and decodes generously. Here a read is
//! one write (RUN and PULL pipelined) and one round trip, a connection is
//! reset only after a FAILURE, and the socket has TCP_NODELAY.
//!
//! **The rule that keeps answers right.** A connection returns to the pool
//! only when its exchange completed; a read dropped mid-exchange closes its
//! connection (`pool.rs`). Reusing such a connection made the next read
//! take the stale answers for its own (404 for nodes that exist, in a
//! shipped version: `tests/neo4j.rs::no_wrong_answer_while_clients_cut_requests_off`).
//!
//! Layout:
//! - `packstream.rs` — the value format (encode into a buffer, decode a message);
//! - `chunk.rs` — the message framing (chunks and end markers);
//! - `error.rs` — [`BoltError`], by what it means for the connection;
//! - `connection.rs` — handshake (Bolt 5.0–5.4, 4.4), login, RUN + PULL;
//! - `pool.rs` — a fixed number of connections, FIFO checkout, no reset on checkout.

mod chunk;
mod connection;
mod error;
mod packstream;
mod pool;

pub use connection::{Auth, ConnectConfig};
pub use error::BoltError;
pub use packstream::Value;
pub use pool::Pool;
