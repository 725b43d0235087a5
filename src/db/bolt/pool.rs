//! A fixed number of Bolt connections, opened on first use, lent one read at
//! a time. Checkout waits in FIFO order for a permit of a Tokio semaphore
//! (fair: no read starves under load), then takes an idle connection or
//! opens one. Nothing is sent on checkout — no RESET, no ping. A connection
//! whose read was dropped mid-exchange (the HTTP client went away, the
//! timeout fired) still has answers coming: it goes back to the pool all the
//! same, behind the others, and the read that takes it next reads those
//! answers first and throws them away (`connection.rs`), so it is never out
//! of step and nothing has to be opened again. Only a broken one (a write cut
//! off midway, an I/O or protocol error) is closed; its permit is then free
//! and a later read opens a new connection.

use std::sync::Mutex;

use tokio::sync::SemaphorePermit;

use super::connection::{ConnectConfig, Connection};
use super::error::BoltError;
use super::packstream::Value;
use crate::db::permits::Permits;

/// A pool of at most `size` connections to one server.
pub struct Pool {
    config: ConnectConfig,
    /// A std Mutex, not a Tokio one: it is held for a push or a pop, never
    /// across an await.
    idle: Mutex<Vec<Connection>>,
    /// One permit per connection that may exist; a checkout holds one.
    permits: Permits,
}

/// A connection lent by the pool. Dropped, it goes back to the pool unless it
/// is broken.
pub struct Checkout<'a> {
    pool: &'a Pool,
    connection: Option<Connection>,
    /// Whether it came from the idle list (it may have died while idle).
    reused: bool,
    _permit: SemaphorePermit<'a>,
}

impl Pool {
    /// A pool of at most `size` (at least 1) connections to `config`'s
    /// server. None is opened here.
    pub fn new(config: ConnectConfig, size: usize) -> Pool {
        Pool { config, idle: Mutex::new(Vec::new()), permits: Permits::new(size) }
    }

    /// Reads waiting for a connection now: above zero, the pool's size caps
    /// the reads in flight.
    pub fn waiting(&self) -> usize {
        self.permits.waiting()
    }

    /// Waits for a permit (FIFO), then lends an idle connection or opens one.
    pub async fn checkout(&self) -> Result<Checkout<'_>, BoltError> {
        let permit = self.permits.acquire().await;
        let idle = self.idle.lock().expect("no panic while held").pop();
        let (connection, reused) = match idle {
            Some(connection) => (connection, true),
            None => (Connection::open(&self.config).await?, false),
        };
        Ok(Checkout { pool: self, connection: Some(connection), reused, _permit: permit })
    }

    /// Runs `query` on a pooled connection (see [`Connection::run`]). A
    /// connection that broke on first use after lying idle most likely died
    /// with its server (a restart): the idle ones are closed with it and the
    /// query is tried once more on a new connection, so that a restarted
    /// Neo4j is used at once instead of failing a read per stale connection.
    /// Only for queries that may run twice (reads, MERGE).
    pub async fn run(&self, query: &str, params: &[(&str, Value)]) -> Result<Vec<Vec<Value>>, BoltError> {
        let mut checkout = self.checkout().await?;
        match checkout.run(query, params).await {
            Err(BoltError::Io(_)) if checkout.reused => {
                drop(checkout);
                self.idle.lock().expect("no panic while held").clear();
                self.checkout().await?.run(query, params).await
            }
            answer => answer,
        }
    }
}

impl Checkout<'_> {
    /// Runs `query` on this connection (see [`Connection::run`]).
    pub async fn run(&mut self, query: &str, params: &[(&str, Value)]) -> Result<Vec<Vec<Value>>, BoltError> {
        self.connection.as_mut().expect("present until drop").run(query, params).await
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        // Back to the pool before the permit is released (fields drop after
        // this), so the next waiter finds it. One still owed answers goes to
        // the far end of the idle list (checkout takes from the near end): by
        // the time it is taken again its answers have most likely arrived.
        if let Some(connection) = self.connection.take().filter(Connection::is_reusable) {
            let mut idle = self.pool.idle.lock().expect("no panic while held");
            if connection.owes_answers() {
                idle.insert(0, connection);
            } else {
                idle.push(connection);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The pool against a fake Bolt server of a few lines that logs what
    //! each connection receives and answers `RETURN $id` with the id.

    use std::sync::Arc;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::db::bolt::chunk::{Framer, read_message};
    use crate::db::bolt::connection::Auth;
    use crate::db::bolt::packstream::{Decoder, write_struct_header, write_value};

    /// What the fake server received: (connection number, message tag).
    type Log = Arc<Mutex<Vec<(usize, u8)>>>;

    async fn fake_server() -> (ConnectConfig, Log) {
        fake_server_speaking([0, 0, 4, 5]).await
    }

    async fn fake_server_speaking(version: [u8; 4]) -> (ConnectConfig, Log) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let log: Log = Arc::default();
        let server_log = log.clone();
        tokio::spawn(async move {
            for n in 0.. {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(serve(n, stream, version, server_log.clone()));
            }
        });
        let config = ConnectConfig {
            host: "127.0.0.1".into(),
            port,
            auth: Auth::None,
            connect_timeout: Duration::from_secs(5),
        };
        (config, log)
    }

    /// Bolt `version` (5.4 unless a test says otherwise); a query "slow" answers after 300 ms, "fail" with FAILURE
    /// (then IGNORED until a RESET), any other with one record: `[$id]`;
    /// after "bye" the server closes the connection.
    async fn serve(n: usize, mut stream: TcpStream, version: [u8; 4], log: Log) {
        let mut handshake = [0u8; 20];
        stream.read_exact(&mut handshake).await.unwrap();
        stream.write_all(&version).await.unwrap();
        let (mut message, mut failed, mut id, mut bye) = (Vec::new(), false, Value::Null, false);
        while read_message(&mut stream, &mut message).await.is_ok() {
            let mut decoder = Decoder::new(&message);
            let (tag, _) = decoder.struct_header().unwrap();
            log.lock().unwrap().push((n, tag));
            let answers: Vec<(u8, Vec<Value>)> = match tag {
                0x10 => {
                    let Value::String(query) = decoder.value().unwrap() else { panic!() };
                    id = decoder.value().unwrap().get("id").cloned().unwrap_or(Value::Null);
                    if query == "slow" {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    failed |= query == "fail";
                    bye = query == "bye";
                    if query == "fail" {
                        let failure = vec![
                            (
                                "code".to_string(),
                                Value::String("Neo.ClientError.Statement.SyntaxError".into()),
                            ),
                            ("message".to_string(), Value::String("fail".into())),
                        ];
                        vec![(0x7F, vec![Value::Map(failure)])]
                    } else if failed {
                        vec![(0x7E, vec![])]
                    } else {
                        vec![(0x70, vec![Value::Map(vec![])])]
                    }
                }
                0x3F if failed => vec![(0x7E, vec![])],
                0x3F => vec![(0x71, vec![Value::List(vec![id.clone()])]), (0x70, vec![Value::Map(vec![])])],
                0x0F => {
                    failed = false;
                    vec![(0x70, vec![Value::Map(vec![])])]
                }
                _ => vec![(0x70, vec![Value::Map(vec![])])], // HELLO, LOGON
            };
            let mut out = Vec::new();
            for (tag, fields) in answers {
                let framer = Framer::begin(&mut out);
                write_struct_header(&mut out, tag, fields.len());
                fields.iter().for_each(|field| write_value(&mut out, field));
                framer.end(&mut out);
            }
            if stream.write_all(&out).await.is_err() || (bye && tag == 0x3F) {
                return;
            }
        }
    }

    fn tags_of(log: &Log, connection: usize) -> Vec<u8> {
        log.lock().unwrap().iter().filter(|(n, _)| *n == connection).map(|(_, tag)| *tag).collect()
    }

    async fn read(pool: &Pool, query: &str, id: i64) -> Result<Vec<Vec<Value>>, BoltError> {
        pool.run(query, &[("id", Value::Int(id))]).await
    }

    #[tokio::test]
    async fn reads_reuse_one_connection_with_no_reset_on_checkout() {
        let (config, log) = fake_server().await;
        let pool = Pool::new(config, 2);
        for id in 1..=3 {
            assert_eq!(read(&pool, "q", id).await.unwrap(), vec![vec![Value::Int(id)]]);
        }
        // HELLO, LOGON, then RUN and PULL per read: nothing else.
        assert_eq!(tags_of(&log, 0), [0x01, 0x6A, 0x10, 0x3F, 0x10, 0x3F, 0x10, 0x3F]);
        assert!(tags_of(&log, 1).is_empty(), "one connection was enough");
    }

    #[tokio::test]
    async fn reads_waiting_for_a_connection_are_counted_until_they_get_one_or_give_up() {
        let (config, _log) = fake_server().await;
        let pool = Arc::new(Pool::new(config, 1));
        let slow = tokio::spawn({
            let pool = pool.clone();
            async move { read(&pool, "slow", 1).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(pool.waiting(), 0, "the first read has the one connection");
        let next = tokio::spawn({
            let pool = pool.clone();
            async move { read(&pool, "q", 2).await }
        });
        // One that gives up while it waits is no longer counted.
        let gave_up = tokio::time::timeout(Duration::from_millis(100), read(&pool, "q", 3));
        let (gave_up, waiting) = tokio::join!(gave_up, async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            pool.waiting()
        });
        assert_eq!(waiting, 2, "two reads wait behind the slow one");
        assert!(gave_up.is_err());
        assert_eq!(pool.waiting(), 1);
        assert_eq!(slow.await.unwrap().unwrap(), vec![vec![Value::Int(1)]]);
        assert_eq!(next.await.unwrap().unwrap(), vec![vec![Value::Int(2)]]);
        assert_eq!(pool.waiting(), 0);
    }

    #[tokio::test]
    async fn a_read_dropped_mid_exchange_leaves_its_answers_to_the_next_read_to_throw_away() {
        let (config, log) = fake_server().await;
        let pool = Pool::new(config, 1);
        read(&pool, "q", 1).await.unwrap();
        // Dropped while the server takes 300 ms: its answers are still coming.
        let cut = tokio::time::timeout(Duration::from_millis(50), read(&pool, "slow", 2)).await;
        assert!(cut.is_err());
        // The next read, on the same connection, waits for node 2's answers,
        // throws them away, and gets its own.
        assert_eq!(read(&pool, "q", 3).await.unwrap(), vec![vec![Value::Int(3)]]);
        assert_eq!(read(&pool, "q", 4).await.unwrap(), vec![vec![Value::Int(4)]]);
        assert_eq!(tags_of(&log, 0), [0x01, 0x6A, 0x10, 0x3F, 0x10, 0x3F, 0x10, 0x3F, 0x10, 0x3F]);
        assert!(tags_of(&log, 1).is_empty(), "no second connection was opened");
    }

    #[tokio::test]
    async fn reads_dropped_at_every_point_of_the_exchange_never_leave_a_wrong_answer() {
        // Each read is cut off after a different delay, from before its write to after
        // its answer; every read after it must get its own id, on the one connection.
        let (config, log) = fake_server().await;
        let pool = Pool::new(config, 1);
        read(&pool, "q", -1).await.unwrap(); // opened before the cuts: a cut connect opens another
        for (n, cut_us) in (0..40u64).map(|n| (n as i64, n * 25)).chain([(40, 0), (41, 1)]) {
            let _ = tokio::time::timeout(Duration::from_micros(cut_us), read(&pool, "q", 1000 + n)).await;
            assert_eq!(
                read(&pool, "q", n).await.unwrap(),
                vec![vec![Value::Int(n)]],
                "after a cut at {cut_us} µs"
            );
        }
        // A failed query among cut ones: reset, and still in step.
        let _ = tokio::time::timeout(Duration::from_micros(1), read(&pool, "fail", 0)).await;
        assert_eq!(read(&pool, "q", 7).await.unwrap(), vec![vec![Value::Int(7)]]);
        assert!(tags_of(&log, 1).is_empty(), "no second connection was opened");
    }

    #[tokio::test]
    async fn a_failure_is_reported_and_the_connection_reset_before_its_next_read() {
        let (config, log) = fake_server().await;
        let pool = Pool::new(config, 1);
        let Err(BoltError::Failure { code, message }) = read(&pool, "fail", 1).await else { panic!() };
        assert_eq!((code.as_str(), message.as_str()), ("Neo.ClientError.Statement.SyntaxError", "fail"));
        assert_eq!(read(&pool, "q", 2).await.unwrap(), vec![vec![Value::Int(2)]]);
        assert_eq!(read(&pool, "q", 3).await.unwrap(), vec![vec![Value::Int(3)]]);
        // RESET once, pipelined before the next RUN; the same connection throughout.
        assert_eq!(tags_of(&log, 0), [0x01, 0x6A, 0x10, 0x3F, 0x0F, 0x10, 0x3F, 0x10, 0x3F]);
        assert!(tags_of(&log, 1).is_empty());
    }

    #[tokio::test]
    async fn a_connection_that_died_while_idle_is_replaced_within_the_read() {
        let (config, log) = fake_server().await;
        let pool = Pool::new(config, 1);
        // The server answers, then closes the connection (as a Neo4j that
        // restarts does): the pool holds a dead connection.
        read(&pool, "bye", 1).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(read(&pool, "q", 2).await.unwrap(), vec![vec![Value::Int(2)]]);
        assert_eq!(tags_of(&log, 1), [0x01, 0x6A, 0x10, 0x3F]);
    }

    #[tokio::test]
    async fn bolt_4_4_logs_in_within_hello_and_a_version_not_offered_is_refused() {
        let (config, log) = fake_server_speaking([0, 0, 4, 4]).await;
        let pool = Pool::new(config, 1);
        assert_eq!(read(&pool, "q", 1).await.unwrap(), vec![vec![Value::Int(1)]]);
        assert_eq!(tags_of(&log, 0), [0x01, 0x10, 0x3F], "no LOGON before Bolt 5.1");
        let (config, _) = fake_server_speaking([0, 0, 0, 3]).await;
        assert!(matches!(read(&Pool::new(config, 1), "q", 1).await, Err(BoltError::Protocol(_))));
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connect_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = ConnectConfig {
            host: "127.0.0.1".into(),
            port,
            auth: Auth::None,
            connect_timeout: Duration::from_secs(5),
        };
        assert!(matches!(read(&Pool::new(config, 1), "q", 1).await, Err(BoltError::Connect(_))));
    }
}
