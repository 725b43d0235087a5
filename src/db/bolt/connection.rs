//! One Bolt connection: TCP with TCP_NODELAY, the version handshake, the
//! login, and auto-commit queries sent as RUN and PULL in one write.
//!
//! A connection counts the answers it is owed. A read dropped mid-exchange
//! (the HTTP client went away, the timeout fired) leaves some owed, and the
//! next exchange on the connection first reads them and throws them away
//! ([`Connection::run`]): its own answers are then the next on the wire. This
//! works because reading is cancel-safe: bytes come off the socket into the
//! connection's own buffer, and a message is taken out of it only whole
//! ([`take_message`]), so a dropped read never leaves the stream mid-message.
//! Only a write cut off midway (the stream then holds part of a request) or
//! an I/O or protocol error makes a connection unusable.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::chunk::{Framer, take_message};
use super::error::BoltError;
use super::packstream::{
    Decoder, Value, write_int, write_map_header, write_string, write_struct_header, write_value,
};

/// How a connection logs in.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    /// No authentication (a Neo4j with `dbms.security.auth_enabled=false`).
    None,
    /// User and password.
    Basic {
        /// The user.
        user: String,
        /// The password. Never printed.
        password: String,
    },
}

/// Where and how to connect.
#[derive(Clone)]
pub struct ConnectConfig {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// How to log in.
    pub auth: Auth,
    /// Limit for the TCP connect.
    pub connect_timeout: Duration,
}

/// A negotiated Bolt version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Major version (4 or 5).
    pub major: u8,
    /// Minor version.
    pub minor: u8,
}

/// "GoGoBolt", the first four bytes a client sends.
const MAGIC: [u8; 4] = [0x60, 0x60, 0xB0, 0x17];

/// The four proposals, best first, each `[0, range, minor, major]`: 5.4 down
/// to 5.0 (what Neo4j 5.x speaks; 5.1 moved the login into LOGON), then 4.4
/// (Neo4j 4.4). Bolt 5.5 and later change FAILURE's fields and add the
/// manifest handshake: not needed for one read.
const PROPOSALS: [[u8; 4]; 4] = [[0, 4, 4, 5], [0, 0, 4, 4], [0; 4], [0; 4]];

/// The user agent sent in HELLO, also shown by Neo4j's `dbms.listConnections`.
const USER_AGENT: &str = concat!("blocklab/", env!("CARGO_PKG_VERSION"));

// Message tags (Bolt protocol, "Message").
const HELLO: u8 = 0x01;
const LOGON: u8 = 0x6A;
const RESET: u8 = 0x0F;
const RUN: u8 = 0x10;
const PULL: u8 = 0x3F;
const SUCCESS: u8 = 0x70;
const RECORD: u8 = 0x71;
const IGNORED: u8 = 0x7E;
const FAILURE: u8 = 0x7F;

/// How much of the socket's input one read asks for.
const READ_SIZE: usize = 16 * 1024;

/// One answer of the server.
enum Response {
    /// Its metadata is not decoded: nothing here needs it.
    Success,
    Record(Value),
    Ignored,
    Failure(Value),
}

/// One open, logged-in Bolt connection.
pub struct Connection {
    stream: TcpStream,
    /// Bytes read from the socket and not yet taken as whole messages, from `input_at` on.
    input: Vec<u8>,
    input_at: usize,
    /// The requests of the exchange being written, framed.
    out: Vec<u8>,
    /// The answer being read, its chunks joined.
    message: Vec<u8>,
    version: Version,
    /// Summaries (SUCCESS, FAILURE, IGNORED) owed for requests written: one
    /// per request; RECORDs come before their PULL's summary and do not count.
    owed: usize,
    /// A query failed: Neo4j ignores all but RESET until it gets one, so the
    /// next exchange starts with RESET.
    needs_reset: bool,
    /// A write was cut off midway or the stream broke: never to be reused.
    broken: bool,
}

impl Connection {
    /// Connects, negotiates a version and logs in. The TCP connect is
    /// bounded by `connect_timeout`; the handshake and the login by the
    /// caller (the read's timeout): the kernel accepts a connection however
    /// busy Neo4j is, but its JVM may take a while to answer on a loaded
    /// machine, and that is a slow read, not an unreachable database.
    pub async fn open(config: &ConnectConfig) -> Result<Connection, BoltError> {
        let connect = TcpStream::connect((config.host.as_str(), config.port));
        let mut stream = tokio::time::timeout(config.connect_timeout, connect)
            .await
            .map_err(|_| BoltError::Connect(format!("no connection within {:?}", config.connect_timeout)))?
            .map_err(|e| BoltError::Connect(e.to_string()))?;
        // Every request is one write of whole messages and each waits for
        // its answer: Nagle's algorithm would only delay them.
        stream.set_nodelay(true)?;
        let mut hello = MAGIC.to_vec();
        PROPOSALS.iter().for_each(|p| hello.extend_from_slice(p));
        stream.write_all(&hello).await?;
        let mut chosen = [0u8; 4];
        stream.read_exact(&mut chosen).await?;
        let version = Version { major: chosen[3], minor: chosen[2] };
        if !matches!(version, Version { major: 5, minor: 0..=4 } | Version { major: 4, minor: 4 }) {
            return Err(BoltError::Protocol(format!(
                "the server chose none of Bolt 5.0-5.4 and 4.4 (answered {chosen:02x?})"
            )));
        }
        let mut connection = Connection {
            stream,
            input: Vec::with_capacity(READ_SIZE),
            input_at: 0,
            out: Vec::with_capacity(512),
            message: Vec::with_capacity(1024),
            version,
            owed: 0,
            needs_reset: false,
            broken: false,
        };
        connection.log_in(&config.auth).await?;
        Ok(connection)
    }

    /// Whether another read may use this connection: its stream is whole
    /// (no write was cut off midway, nothing broke). Answers still owed to a
    /// dropped read are fine: the next exchange reads them first.
    pub fn is_reusable(&self) -> bool {
        !self.broken
    }

    /// Whether answers of a dropped read are still to come.
    pub fn owes_answers(&self) -> bool {
        self.owed > 0
    }

    /// Writes `self.out` whole, or marks the connection broken: a write cut
    /// off midway (its future dropped) leaves part of a request on the wire.
    async fn send(&mut self, requests: usize) -> Result<(), BoltError> {
        self.broken = true;
        self.owed += requests;
        self.stream.write_all(&self.out).await?;
        self.broken = false;
        Ok(())
    }

    /// HELLO, and LOGON from Bolt 5.1 on, written together.
    async fn log_in(&mut self, auth: &Auth) -> Result<(), BoltError> {
        let logon = self.version >= Version { major: 5, minor: 1 };
        self.out.clear();
        let framer = Framer::begin(&mut self.out);
        write_struct_header(&mut self.out, HELLO, 1);
        let agent = self.version >= Version { major: 5, minor: 3 };
        write_map_header(&mut self.out, 1 + usize::from(agent) + if logon { 0 } else { auth_entries(auth) });
        write_string(&mut self.out, "user_agent");
        write_string(&mut self.out, USER_AGENT);
        if agent {
            // Required from 5.3 on.
            write_string(&mut self.out, "bolt_agent");
            write_map_header(&mut self.out, 1);
            write_string(&mut self.out, "product");
            write_string(&mut self.out, USER_AGENT);
        }
        if !logon {
            write_auth(&mut self.out, auth);
        }
        framer.end(&mut self.out);
        if logon {
            let framer = Framer::begin(&mut self.out);
            write_struct_header(&mut self.out, LOGON, 1);
            write_map_header(&mut self.out, auth_entries(auth));
            write_auth(&mut self.out, auth);
            framer.end(&mut self.out);
        }
        self.send(1 + usize::from(logon)).await?;
        for _ in 0..1 + usize::from(logon) {
            match self.response().await? {
                Response::Success => {}
                Response::Failure(failure) => return Err(failure_of(&failure)),
                _ => return Err(BoltError::Protocol("no SUCCESS or FAILURE for the login".to_string())),
            }
        }
        Ok(())
    }

    /// Runs `query` with `params` in an auto-commit transaction and returns
    /// the fields of every record. First the answers still owed to a read
    /// that was dropped are read and thrown away; then RUN and PULL go in one
    /// write (RESET before them if a query failed), and their answers are
    /// read: one round trip. On a FAILURE every answer is still read, so the
    /// connection stays in step (it is reset with the next query). An I/O or
    /// protocol error marks it broken.
    pub async fn run(&mut self, query: &str, params: &[(&str, Value)]) -> Result<Vec<Vec<Value>>, BoltError> {
        if self.broken {
            return Err(BoltError::Protocol("a broken connection was reused".to_string()));
        }
        let answer = self.exchange(query, params).await;
        if matches!(answer, Err(BoltError::Io(_) | BoltError::Protocol(_) | BoltError::Connect(_))) {
            self.broken = true;
        }
        answer
    }

    async fn exchange(
        &mut self,
        query: &str,
        params: &[(&str, Value)],
    ) -> Result<Vec<Vec<Value>>, BoltError> {
        // A dropped read's answers: whatever they say, they are not this read's.
        while self.owed > 0 {
            self.response().await?;
        }
        let reset = self.needs_reset;
        self.out.clear();
        if reset {
            let framer = Framer::begin(&mut self.out);
            write_struct_header(&mut self.out, RESET, 0);
            framer.end(&mut self.out);
        }
        let framer = Framer::begin(&mut self.out);
        write_struct_header(&mut self.out, RUN, 3);
        write_string(&mut self.out, query);
        write_map_header(&mut self.out, params.len());
        for (name, value) in params {
            write_string(&mut self.out, name);
            write_value(&mut self.out, value);
        }
        write_map_header(&mut self.out, 0); // extra: the home database, default mode
        framer.end(&mut self.out);
        let framer = Framer::begin(&mut self.out);
        write_struct_header(&mut self.out, PULL, 1);
        write_map_header(&mut self.out, 1);
        write_string(&mut self.out, "n");
        write_int(&mut self.out, -1); // all records
        framer.end(&mut self.out);
        // If this future is dropped from here on, the answers it leaves owed
        // are read by the next exchange (or the connection is broken, if the
        // write itself was cut off).
        self.send(2 + usize::from(reset)).await?;
        self.needs_reset = false;

        if reset {
            match self.response().await? {
                Response::Success => {}
                _ => return Err(BoltError::Protocol("RESET was not answered with SUCCESS".to_string())),
            }
        }
        // RUN's answer, then PULL's: RECORDs and a SUCCESS. After a FAILURE
        // the server ignores the requests already sent (PULL: IGNORED).
        let run = self.response().await?;
        let mut records = Vec::new();
        let pulled = loop {
            match self.response().await? {
                Response::Record(Value::List(fields)) => records.push(fields),
                Response::Record(other) => {
                    return Err(BoltError::Protocol(format!("a RECORD of a {}", other.type_name())));
                }
                done => break done,
            }
        };
        // Every answer is read: whatever they say, the stream is in step.
        match (run, pulled) {
            (Response::Success, Response::Success) => Ok(records),
            (Response::Failure(failure), Response::Ignored)
            | (Response::Success, Response::Failure(failure)) => Err(failure_of(&failure)),
            (Response::Ignored, Response::Ignored) => {
                self.needs_reset = true;
                Err(BoltError::Protocol("the query was IGNORED".to_string()))
            }
            _ => Err(BoltError::Protocol("answers out of order for RUN and PULL".to_string())),
        }
    }

    /// The next answer; a summary (SUCCESS, FAILURE, IGNORED) pays one owed,
    /// and a FAILURE means the next exchange starts with RESET.
    async fn response(&mut self) -> Result<Response, BoltError> {
        self.next_message().await?;
        let mut decoder = Decoder::new(&self.message);
        let (tag, fields) = decoder.struct_header()?;
        let mut field = || if fields >= 1 { decoder.value() } else { Ok(Value::Null) };
        let response = match tag {
            SUCCESS => Response::Success,
            RECORD => Response::Record(field()?),
            IGNORED => Response::Ignored,
            FAILURE => Response::Failure(field()?),
            other => return Err(BoltError::Protocol(format!("unknown message {other:#04x}"))),
        };
        if !matches!(response, Response::Record(_)) {
            self.owed = self.owed.checked_sub(1).ok_or_else(|| {
                BoltError::Protocol("an answer came with no request waiting for it".to_string())
            })?;
        }
        if matches!(response, Response::Failure(_)) {
            self.needs_reset = true;
        }
        Ok(response)
    }

    /// Reads the next whole message into `self.message`. Cancel-safe: the
    /// bytes come off the socket into `self.input` (tokio's `read_buf` reads
    /// nothing if dropped) and a message leaves it only whole.
    async fn next_message(&mut self) -> Result<(), BoltError> {
        loop {
            if let Some(used) = take_message(&self.input[self.input_at..], &mut self.message) {
                self.input_at += used;
                if self.input_at == self.input.len() {
                    self.input.clear();
                    self.input_at = 0;
                }
                return Ok(());
            }
            if self.input_at > 0 {
                self.input.drain(..self.input_at);
                self.input_at = 0;
            }
            self.input.reserve(READ_SIZE);
            if self.stream.read_buf(&mut self.input).await? == 0 {
                return Err(BoltError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }
}

fn auth_entries(auth: &Auth) -> usize {
    match auth {
        Auth::None => 1,
        Auth::Basic { .. } => 3,
    }
}

/// The entries of an auth map (HELLO's before 5.1, LOGON's after).
fn write_auth(out: &mut Vec<u8>, auth: &Auth) {
    write_string(out, "scheme");
    match auth {
        Auth::None => write_string(out, "none"),
        Auth::Basic { user, password } => {
            write_string(out, "basic");
            write_string(out, "principal");
            write_string(out, user);
            write_string(out, "credentials");
            write_string(out, password);
        }
    }
}

fn failure_of(metadata: &Value) -> BoltError {
    let text = |key| match metadata.get(key) {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    BoltError::Failure { code: text("code"), message: text("message") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handshake_proposes_bolt_5_4_down_to_5_0_then_4_4() {
        let mut bytes = MAGIC.to_vec();
        PROPOSALS.iter().for_each(|p| bytes.extend_from_slice(p));
        assert_eq!(bytes, [0x60, 0x60, 0xB0, 0x17, 0, 4, 4, 5, 0, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(Version { major: 5, minor: 1 } > Version { major: 4, minor: 4 });
    }
}
