//! Bolt's message framing: a message travels as chunks, each a 16-bit
//! big-endian size and that many bytes, and ends with an empty chunk
//! (`00 00`). An empty chunk between messages is a NOOP (a server's
//! keep-alive) and is skipped.
//!
//! Writing: [`Framer`] encodes a message in place in the output buffer
//! behind a 2-byte header it fills in afterwards, so a message of up to
//! 64 KiB − 1 (every message blocklab sends but a huge seed query) costs no
//! copy; a longer one is split where it lies.

#[cfg(test)]
use tokio::io::{AsyncRead, AsyncReadExt};

/// The largest chunk: the size is 16 bits.
const MAX_CHUNK: usize = 0xFFFF;

/// Frames the messages written into one output buffer.
pub struct Framer {
    /// Where the current message's first chunk header is.
    start: usize,
}

impl Framer {
    /// Starts a message at the end of `out`: reserves its chunk header.
    pub fn begin(out: &mut Vec<u8>) -> Framer {
        let start = out.len();
        out.extend_from_slice(&[0, 0]);
        Framer { start }
    }

    /// Ends the message written since [`Framer::begin`]: fills in the chunk
    /// header (splitting into several chunks if it is longer than one may
    /// be) and appends the end marker.
    pub fn end(self, out: &mut Vec<u8>) {
        let body = out.len() - self.start - 2;
        if body <= MAX_CHUNK {
            out[self.start..self.start + 2].copy_from_slice(&(body as u16).to_be_bytes());
        } else {
            let message = out.split_off(self.start + 2);
            out.truncate(self.start);
            for chunk in message.chunks(MAX_CHUNK) {
                out.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
                out.extend_from_slice(chunk);
            }
        }
        out.extend_from_slice(&[0, 0]);
    }
}

/// Takes the first whole message out of `input` into `message` (cleared
/// first), joining its chunks and skipping NOOPs before it; returns how many
/// bytes of `input` it used, or `None` if no whole message is there yet (then
/// nothing counts as used: the caller reads more and asks again). Parsing from
/// bytes already read, never from the socket, is what makes a connection's
/// reading cancel-safe (`connection.rs`).
pub fn take_message(input: &[u8], message: &mut Vec<u8>) -> Option<usize> {
    message.clear();
    let mut at = 0;
    loop {
        let size = usize::from(u16::from_be_bytes(input.get(at..at + 2)?.try_into().ok()?));
        at += 2;
        if size == 0 {
            if message.is_empty() {
                continue; // a NOOP between messages
            }
            return Some(at);
        }
        message.extend_from_slice(input.get(at..at + size)?);
        at += size;
    }
}

/// Reads the next message from `input` into `message` (cleared first),
/// joining its chunks and skipping NOOPs. Not cancel-safe (a read dropped
/// midway leaves the stream mid-message): for the tests' fake servers;
/// connections parse with [`take_message`].
#[cfg(test)]
pub async fn read_message(
    input: &mut (impl AsyncRead + Unpin),
    message: &mut Vec<u8>,
) -> std::io::Result<()> {
    message.clear();
    loop {
        let size = input.read_u16().await? as usize;
        if size == 0 {
            if message.is_empty() {
                continue; // a NOOP between messages
            }
            return Ok(());
        }
        let at = message.len();
        message.resize(at + size, 0);
        input.read_exact(&mut message[at..]).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(messages: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for message in messages {
            let framer = Framer::begin(&mut out);
            out.extend_from_slice(message);
            framer.end(&mut out);
        }
        out
    }

    #[test]
    fn a_short_message_is_one_chunk_and_an_end_marker() {
        assert_eq!(framed(&[&[0xB0, 0x0F]]), [0x00, 0x02, 0xB0, 0x0F, 0x00, 0x00]);
        assert_eq!(
            framed(&[&[0xB0, 0x0F], &[0xB0, 0x02]]),
            [0, 2, 0xB0, 0x0F, 0, 0, 0, 2, 0xB0, 0x02, 0, 0],
            "pipelined messages follow each other"
        );
    }

    #[test]
    fn a_long_message_is_split_into_full_chunks() {
        let message: Vec<u8> = (0..MAX_CHUNK + 10).map(|i| i as u8).collect();
        let out = framed(&[b"x", &message]);
        assert_eq!(&out[..5], [0, 1, b'x', 0, 0]);
        let rest = &out[5..];
        assert_eq!(rest[..2], [0xFF, 0xFF]);
        assert_eq!(rest[2 + MAX_CHUNK..2 + MAX_CHUNK + 2], [0, 10]);
        assert_eq!(rest.len(), 2 + MAX_CHUNK + 2 + 10 + 2);
        assert_eq!(rest[rest.len() - 2..], [0, 0]);
    }

    #[test]
    fn taking_a_message_waits_for_all_of_it_and_uses_nothing_until_then() {
        let mut wire = vec![0, 0]; // a NOOP first
        wire.extend(framed(&[&[1, 2, 3], &[9]]));
        let mut message = Vec::new();
        // Every prefix short of the first message's end marker holds no message.
        let first_end = 2 + 2 + 3 + 2;
        for cut in 0..first_end {
            assert_eq!(take_message(&wire[..cut], &mut message), None, "cut at {cut}");
        }
        assert_eq!(take_message(&wire, &mut message), Some(first_end));
        assert_eq!(message, [1, 2, 3]);
        assert_eq!(take_message(&wire[first_end..], &mut message), Some(5));
        assert_eq!(message, [9]);
        let long: Vec<u8> = (0..MAX_CHUNK + 7).map(|i| (i % 251) as u8).collect();
        let wire = framed(&[&long]);
        assert_eq!(take_message(&wire[..wire.len() - 1], &mut message), None);
        assert_eq!(take_message(&wire, &mut message), Some(wire.len()));
        assert_eq!(message, long);
    }

    #[tokio::test]
    async fn reading_joins_chunks_and_skips_noops() {
        let long: Vec<u8> = (0..MAX_CHUNK * 2 + 3).map(|i| (i % 251) as u8).collect();
        let mut wire = vec![0, 0, 0, 0]; // two NOOPs first
        wire.extend(framed(&[&[1, 2, 3], &long]));
        wire.extend_from_slice(&[0, 0]); // a NOOP after
        wire.extend(framed(&[&[9]]));
        let mut input = &wire[..];
        let mut message = Vec::new();
        read_message(&mut input, &mut message).await.unwrap();
        assert_eq!(message, [1, 2, 3]);
        read_message(&mut input, &mut message).await.unwrap();
        assert_eq!(message, long);
        read_message(&mut input, &mut message).await.unwrap();
        assert_eq!(message, [9]);
        let end = read_message(&mut input, &mut message).await.unwrap_err();
        assert_eq!(end.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
