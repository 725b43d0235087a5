//! A running JVM's heap, read from its performance counters: the
//! `hsperfdata` file every HotSpot JVM keeps memory-mapped at
//! `/tmp/hsperfdata_USER/PID` (on by default, `-XX:+UsePerfData`), the very
//! counters `jstat -gc PID` prints. Read directly rather than by running
//! `jstat` or `jcmd` every 50 ms: each of those starts a JVM of its own
//! (~0.5 s of CPU on the cores the study measures), and attaching to a JVM
//! that is out of heap can hang.
//!
//! The file (HotSpot's `perfMemory.hpp`): a 32-byte prologue (magic
//! `0xcafec0c0`, byte order, version, …, the offset of the first entry and
//! the number of entries), then entries, each a 20-byte header (its length,
//! the offset of its NUL-terminated name, vector length, type, …, the offset
//! of its data) followed by the name and the data. Heap counters are
//! `long`s (type `J`) named `sun.gc.generation.G.space.S.used` (eden, the
//! survivors, old; with G1 and the serial and parallel collectors alike).

use std::path::PathBuf;

/// The heap a JVM uses now, in bytes: the sum of its generations' spaces'
/// `used` counters (what `jstat -gc` shows as EU + S0U + S1U + OU). Live
/// objects and garbage not collected yet alike; `None` when the counters
/// cannot be read (not a HotSpot JVM, `-XX:-UsePerfData`, gone).
pub fn heap_used(pid: u32) -> Option<u64> {
    let bytes = std::fs::read(perf_file(pid)?).ok()?;
    let counters = counters(&bytes)?;
    let used: Vec<u64> = counters
        .iter()
        .filter(|(name, _)| name.starts_with("sun.gc.generation.") && name.ends_with(".used"))
        .filter(|(name, _)| name.contains(".space."))
        .map(|(_, v)| *v)
        .collect();
    (!used.is_empty()).then(|| used.iter().sum())
}

/// What a JVM's collectors have done since it started: stop-the-world
/// collections and their pause time (`jstat -gc`'s YGC + FGC and YGCT +
/// FGCT: `sun.gc.collector.0` is the young collector, `.1` the full one; a
/// concurrent cycle's `.2`, not a pause, is left out).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gc {
    /// Stop-the-world collections.
    pub collections: u64,
    /// Their pause time.
    pub pause: std::time::Duration,
}

/// [`Gc`] of the JVM `pid` now; `None` when its counters cannot be read.
pub fn gc(pid: u32) -> Option<Gc> {
    let bytes = std::fs::read(perf_file(pid)?).ok()?;
    gc_of(&counters(&bytes)?)
}

fn gc_of(counters: &[(String, u64)]) -> Option<Gc> {
    let value = |name: &str| counters.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    let ticks_per_s = value("sun.os.hrt.frequency").filter(|f| *f > 0)?;
    let mut gc = Gc::default();
    let mut ticks = 0u64;
    for collector in 0..2 {
        gc.collections += value(&format!("sun.gc.collector.{collector}.invocations")).unwrap_or(0);
        ticks += value(&format!("sun.gc.collector.{collector}.time")).unwrap_or(0);
    }
    gc.pause = std::time::Duration::from_secs_f64(ticks as f64 / ticks_per_s as f64);
    Some(gc)
}

/// `/tmp/hsperfdata_*/PID` (the user's name is part of the folder).
fn perf_file(pid: u32) -> Option<PathBuf> {
    let tmp = std::env::temp_dir();
    std::fs::read_dir(&tmp)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("hsperfdata_"))
        .map(|e| e.path().join(pid.to_string()))
        .find(|p| p.is_file())
}

/// Every `long` counter of an hsperfdata file, by name.
fn counters(bytes: &[u8]) -> Option<Vec<(String, u64)>> {
    if bytes.get(..4)? != [0xca, 0xfe, 0xc0, 0xc0] {
        return None;
    }
    let little = *bytes.get(4)? == 1;
    let i32_at = |at: usize| -> Option<usize> {
        let raw: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        let v = if little { i32::from_le_bytes(raw) } else { i32::from_be_bytes(raw) };
        usize::try_from(v).ok()
    };
    let u64_at = |at: usize| -> Option<u64> {
        let raw: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
        Some(if little { u64::from_le_bytes(raw) } else { u64::from_be_bytes(raw) })
    };
    let (mut at, entries) = (i32_at(24)?, i32_at(28)?);
    let mut out = Vec::with_capacity(entries);
    for _ in 0..entries {
        let length = i32_at(at)?;
        if length == 0 {
            break;
        }
        let name_at = at + i32_at(at + 4)?;
        let vector_length = i32_at(at + 8)?;
        let data_type = *bytes.get(at + 12)?;
        let data_at = at + i32_at(at + 16)?;
        if data_type == b'J' && vector_length == 0 {
            let name_bytes = bytes.get(name_at..)?;
            let end = name_bytes.iter().position(|b| *b == 0)?;
            let name = String::from_utf8_lossy(&name_bytes[..end]).into_owned();
            out.push((name, u64_at(data_at)?));
        }
        at += length;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An hsperfdata file with the given `long` counters, little-endian.
    fn file(counters: &[(&str, u64)]) -> Vec<u8> {
        let mut b = vec![0xca, 0xfe, 0xc0, 0xc0, 1, 2, 0, 1];
        b.extend([0u8; 16]);
        b.extend(32i32.to_le_bytes());
        b.extend((counters.len() as i32).to_le_bytes());
        for (name, value) in counters {
            let name_len = name.len() + 1;
            let padded = name_len.div_ceil(8) * 8;
            let length = 20 + 4 + padded + 8; // header, pad to 8, name, data
            b.extend((length as i32).to_le_bytes());
            b.extend(24i32.to_le_bytes());
            b.extend(0i32.to_le_bytes());
            b.extend([b'J', 0, 1, 3]);
            b.extend(((24 + padded) as i32).to_le_bytes());
            b.extend([0u8; 4]);
            b.extend(name.as_bytes());
            b.extend(vec![0u8; padded - name.len()]);
            b.extend(value.to_le_bytes());
        }
        b
    }

    #[test]
    fn long_counters_are_read_by_name() {
        let bytes = file(&[
            ("sun.gc.generation.0.space.0.used", 1000),
            ("sun.gc.generation.1.space.0.used", 24),
            ("sun.gc.generation.0.capacity", 7),
        ]);
        let c = counters(&bytes).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0], ("sun.gc.generation.0.space.0.used".to_string(), 1000));
        assert_eq!(c[2].1, 7);
        assert!(counters(b"not a perf file, no magic here at all!!").is_none());
    }

    #[test]
    fn gc_pauses_are_the_young_and_full_collectors_in_seconds() {
        let bytes = file(&[
            ("sun.os.hrt.frequency", 1_000_000_000),
            ("sun.gc.collector.0.invocations", 12),
            ("sun.gc.collector.0.time", 30_000_000),
            ("sun.gc.collector.1.invocations", 1),
            ("sun.gc.collector.1.time", 20_000_000),
            ("sun.gc.collector.2.invocations", 5),
            ("sun.gc.collector.2.time", 900_000_000),
        ]);
        let gc = gc_of(&counters(&bytes).unwrap()).unwrap();
        assert_eq!(gc.collections, 13);
        assert_eq!(gc.pause, std::time::Duration::from_millis(50));
        assert!(gc_of(&[]).is_none(), "no clock frequency: no figure");
    }
}
