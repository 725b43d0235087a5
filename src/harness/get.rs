//! One `GET` over a new connection and the answer read whole, for the
//! checks that look at what a server answered, not how fast it can: `peers
//! check`'s contract, and the node each request of `bench --db-faults`
//! asked for. HTTP/1.0: no chunked body, the answer ends with the close.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One answer: its status, body and the time from connect to the close.
pub struct Answer {
    /// Its status code.
    pub status: u16,
    /// Its body, as text.
    pub body: String,
    /// From the connect to the close.
    pub elapsed: Duration,
}

/// `GET path` on `addr` within `limit` (the connect, then each read). The
/// error says which step failed.
pub fn get(addr: SocketAddr, path: &str, limit: Duration) -> Result<Answer, String> {
    let started = Instant::now();
    let failed = |e: std::io::Error| format!("{e}");
    let mut stream = TcpStream::connect_timeout(&addr, limit).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(limit)).map_err(failed)?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).map_err(failed)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| format!("no whole answer within {limit:?}: {e}"))?;
    let elapsed = started.elapsed();
    let head = crate::http1::parse_response(&answer, 64 * 1024, false, false)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the connection closed before a whole HTTP answer".to_string())?;
    let rest = &answer[head.len..];
    let body = match head.framing {
        crate::http1::Framing::None => &[][..],
        crate::http1::Framing::Length(n) => &rest[..rest.len().min(n as usize)],
        _ => rest,
    };
    Ok(Answer { status: head.status, body: String::from_utf8_lossy(body).into_owned(), elapsed })
}

/// Whether `got` holds `want`'s properties with `want`'s values: the node
/// asked for, whatever else the server adds.
pub fn same_node(got: &serde_json::Value, want: &serde_json::Value) -> bool {
    let (Some(got), Some(want)) = (got.as_object(), want.as_object()) else { return false };
    want.iter().all(|(k, v)| got.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_the_same_when_every_asked_property_matches() {
        let want = serde_json::json!({"id": 7, "title": "t"});
        assert!(same_node(&serde_json::json!({"id": 7, "title": "t", "extra": 1}), &want));
        assert!(!same_node(&serde_json::json!({"id": 8, "title": "t"}), &want));
        assert!(!same_node(&serde_json::json!([7]), &want));
    }
}
