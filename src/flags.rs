//! Flag parsers and flag groups that several subcommands share: durations,
//! sizes, addresses, database URLs, CPU lists, and the database client settings.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::{Args, FromArgMatches, Parser};

use crate::db::{DEFAULT_ASYNC_CONNECTIONS, DbSettings, DbUrl};

/// Parses `10ms`, `1s`, `500us`, `2m`, or a bare `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (expected e.g. 500us, 10ms, 1s)"))
}

/// As [`parse_duration`], but zero is refused.
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be more than zero".to_string()),
        d => Ok(d),
    }
}

/// Parses `--db`.
pub fn parse_db(s: &str) -> Result<DbUrl, String> {
    s.parse()
}

/// A CPU list given on the command line (`1`, `0-1`, `0,2-3`): every CPU in
/// it is one this process may run on, so that `taskset` cannot refuse it
/// after minutes of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl CpuList {
    /// Parses a taskset list strictly, item by item (a word that is not a
    /// number or a range is an error, not dropped), and checks it against
    /// this process's affinity ([`crate::proc::allowed_cpus`]; when that
    /// cannot be read, taskset is left to judge).
    pub fn parse(s: &str) -> Result<CpuList, String> {
        let allowed = crate::proc::allowed_cpus();
        CpuList::parse_within(s, allowed.as_deref())
    }

    /// As [`CpuList::parse`], against `allowed` (None: not checked).
    pub fn parse_within(s: &str, allowed: Option<&[usize]>) -> Result<CpuList, String> {
        let usage = "a CPU list is numbers and ranges, e.g. 1 or 0-1 or 0,2-3";
        let number =
            |word: &str| word.parse::<usize>().map_err(|_| format!("'{word}' is not a CPU number ({usage})"));
        let mut cpus = Vec::new();
        for item in s.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(format!("'{s}' has an empty item ({usage})"));
            }
            match item.split_once('-') {
                Some((first, last)) => {
                    let (first, last) = (number(first.trim())?, number(last.trim())?);
                    if first > last {
                        return Err(format!("the range {item} runs backwards ({usage})"));
                    }
                    cpus.extend(first..=last);
                }
                None => cpus.push(number(item)?),
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        if let Some(allowed) = allowed
            && let Some(outside) = cpus.iter().find(|cpu| !allowed.contains(cpu))
        {
            let allowed: Vec<String> = allowed.iter().map(usize::to_string).collect();
            return Err(format!(
                "CPU {outside} is not one this process may run on (its CPUs: {})",
                allowed.join(",")
            ));
        }
        Ok(CpuList(cpus))
    }
}

/// Parses `HOST:PORT`, resolving a name.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse() {
        return Ok(addr);
    }
    let mut addrs = s.to_socket_addrs().map_err(|e| format!("not an address (HOST:PORT): {e}"))?;
    addrs.next().ok_or_else(|| "the name resolves to no address".to_string())
}

/// Parses `50MiB`, `512KiB`, `1GiB`, `50MB` (10^6), or a number of bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("'{s}' is not a size (e.g. 50MiB)"))?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        other => return Err(format!("unknown unit '{other}' in '{s}' (B, KiB, MiB, GiB, KB, MB, GB)")),
    };
    let bytes = number * factor;
    if bytes < 1024.0 * 1024.0 {
        return Err(format!("'{s}' is below 1 MiB: no server starts in that"));
    }
    Ok(bytes as u64)
}

/// How the server's database clients connect (networked databases only).
#[derive(Debug, Args, Clone)]
pub struct DbClientArgs {
    /// Connections in the blocking client's pool: at most this many blocking reads at once. On PostgreSQL
    /// 1 ms away, 64 served /getData no faster than 16 (633 against 634 req/s: the HTTP worker it blocks binds it).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=255), value_name = "N")]
    pub db_pool: u16,

    /// Connections of the async client (multiplexed for FalkorDB; pooled for Neo4j and PostgreSQL, opened on
    /// demand): at most this many non-blocking reads at once. By Little's law N connections hold N reads in
    /// flight: 128 hold 2,500 reads/s through a +50 ms stall. 128 measured best on Neo4j (64 left reads waiting
    /// through that stall, 4 ran at 0.85 × the Play peer's rate with 200 client connections); on PostgreSQL 1 ms
    /// away, 16 served /getDataAsync at 5344 req/s against 4113 with 128 with no stall (BENCHMARKS.md).
    #[arg(long, default_value_t = DEFAULT_ASYNC_CONNECTIONS as u16, value_parser = clap::value_parser!(u16).range(1..=255), value_name = "N")]
    pub db_async_connections: u16,

    /// Limit for one database read; a read that takes longer answers 503.
    #[arg(long, default_value = "2s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub db_timeout: Duration,
}

impl DbClientArgs {
    /// The settings the backends take.
    pub fn settings(&self) -> DbSettings {
        DbSettings {
            pool: usize::from(self.db_pool),
            async_connections: usize::from(self.db_async_connections),
            timeout: self.db_timeout,
            connect_timeout: self.db_timeout.min(Duration::from_millis(500)),
        }
    }

    /// The same flags, to pass on to a `blocklab serve` child.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--db-pool".to_string(),
            self.db_pool.to_string(),
            "--db-async-connections".to_string(),
            self.db_async_connections.to_string(),
            "--db-timeout".to_string(),
            format!("{}ms", self.db_timeout.as_millis()),
        ]
    }
}

/// The flags `blocklab COMMAND --out OUT [--quick]` gives `T`, parsed on
/// their own: how the main job runs each study with its defaults.
pub fn parse_alone<T: Args + FromArgMatches>(
    command: &str,
    out: &std::path::Path,
    quick: bool,
) -> Result<T, String> {
    /// `T`'s flags, as a command of their own.
    #[derive(Parser)]
    struct Alone<T: Args + FromArgMatches> {
        #[command(flatten)]
        args: T,
    }
    let mut argv: Vec<std::ffi::OsString> = vec![command.into(), "--out".into(), out.as_os_str().to_owned()];
    if quick {
        argv.push("--quick".into());
    }
    Alone::<T>::try_parse_from(argv).map(|a| a.args).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("-1ms").is_err());
    }

    #[test]
    fn cpu_lists_parse_strictly_and_within_the_allowed_cpus() {
        let two: &[usize] = &[0, 1];
        assert_eq!(CpuList::parse_within("1", Some(two)), Ok(CpuList(vec![1])));
        assert_eq!(CpuList::parse_within("1,0-1", Some(two)), Ok(CpuList(vec![0, 1])));
        assert_eq!(CpuList::parse_within(" 0 - 3 ,7", None), Ok(CpuList(vec![0, 1, 2, 3, 7])));
        for (bad, says) in [
            ("1,x", "'x' is not a CPU number"),
            ("", "'' has an empty item"),
            ("1,", "'1,' has an empty item"),
            ("-1", "'' is not a CPU number"),
            ("3-1", "the range 3-1 runs backwards"),
            ("0-2", "CPU 2 is not one this process may run on (its CPUs: 0,1)"),
        ] {
            let err = CpuList::parse_within(bad, Some(two)).unwrap_err();
            assert!(err.starts_with(says), "{bad:?}: {err}");
        }
        // This process's own CPUs are always accepted.
        let own = crate::proc::allowed_cpus().unwrap();
        let listed: Vec<String> = own.iter().map(usize::to_string).collect();
        assert_eq!(CpuList::parse(&listed.join(",")), Ok(CpuList(own)));
    }
}
