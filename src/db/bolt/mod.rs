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
//! **The rule that keeps answers right.** A connection counts the answers it
//! is owed, and a read dropped mid-exchange leaves some owed: the next read
//! on that connection reads them and throws them away before sending its own
//! query (`connection.rs`; reading is cancel-safe, so a dropped read never
//! leaves the stream mid-message). Reusing such a connection without that
//! made the next read take the stale answers for its own (404 for nodes that
//! exist, in a shipped version:
//! `tests/neo4j.rs::no_wrong_answer_while_clients_cut_requests_off`). Until
//! 2026-12-05 such a connection was closed instead, and every load cut off
//! mid-request cost the next one up to 64 new connections (TCP, handshake,
//! HELLO, LOGON) in its first second.
//!
//! Layout:
//! - `packstream.rs` — the value format (encode into a buffer, decode a message);
//! - `chunk.rs` — the message framing (chunks and end markers);
//! - `error.rs` — [`BoltError`], by what it means for the connection;
//! - `connection.rs` — handshake (Bolt 5.0–5.4, 4.4), login, RUN + PULL, the answers owed;
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
