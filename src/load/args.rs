//! `blocklab load`: its flags, validated into a [`LoadPlan`], and the
//! commands: a run (progress, summary, JSON, HdrHistogram log) and `merge`.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use hyper::header::{HeaderName, HeaderValue};

use super::plan::{ConnectionStages, Progress, RateSchedule, Target, UrlRequest};
use super::report::LoadReport;
use super::tls::Trust;
use super::{LoadPlan, Stop};
use super::{compare, thresholds};
use crate::command::created;
use crate::failure::Failure;
use crate::flags::parse_positive_duration;
use crate::server::available_cores;

/// What `blocklab load --help` shows after the flags.
pub const LOAD_EXAMPLES: &str = "\
Examples:
  blocklab load -k -c 200 -n 100000 http://localhost:9000/test     (the seed study's ab run)
  blocklab load -k -c 50 -z 30s http://127.0.0.1:9000/getDataAsync
  blocklab load -k -c 20 -z 10s --rate 2000 http://127.0.0.1:9000/getData
  blocklab load -k -c 50 --rate 100:10s,2000:30s,2000:60s,0:10s http://127.0.0.1:9000/getData
  blocklab load -k --connections 10:10s,500:30s,0:10s http://127.0.0.1:9000/getDataAsync
  blocklab load -k -n 10000 --json result.json --quiet http://127.0.0.1:9000/test
  blocklab load -k -c 100 -z 10s --pipeline 16 http://127.0.0.1:9000/test
  blocklab load -k -z 60s --json a.json --hdr-log a.hlog http://127.0.0.1:9000/test
  blocklab load -k -z 10s -m POST -d '{\"id\":3}' -T application/json http://127.0.0.1:8080/items
  blocklab load -k -z 10s -m PUT --body-file item.json -H 'Host: api.example' http://user:pw@127.0.0.1:8080/x
  blocklab load merge a.json b.json c.json --json merged.json
  blocklab load -k -z 60s --rate 2000 --html run.html --json run.json http://127.0.0.1:9000/getData
  blocklab load -k -z 30s --fail-if 'p99>50ms,errors>0.1%,rps<1000' http://127.0.0.1:9000/test
  blocklab load compare base.json new.json --max-regression p99=10%,rps=5%
  blocklab load -k -c 50 -z 30s https://api.example.com/health          (the platform's roots)
  blocklab load -c 20 -n 2000 --cacert ca.pem https://127.0.0.1:8443/   (a handshake per request)
  blocklab load --no-keepalive -c 20 -z 10s https://127.0.0.1:8443/     (the same, said out loud)
  blocklab load -k -c 50 -z 30s --insecure https://127.0.0.1:8443/      (any certificate)
  blocklab load -k -c 50 -z 30s --urls targets.txt               (several URLs, in turn)
  blocklab load --h2 -c 4 --streams 32 -z 10s http://127.0.0.1:8080/    (HTTP/2, h2c)
  blocklab load --h2 -c 4 --streams 32 -z 10s --cacert ca.pem https://127.0.0.1:8443/

--urls FILE, vegeta's targets format: a request line, its own headers and @body-file under it,
a blank line between requests; all URLs on one scheme, host and port:
  GET http://127.0.0.1:9000/test

  POST http://127.0.0.1:9000/items
  Content-Type: application/json
  @item.json

Closed loop (default): each connection sends its next request when the previous one ends.
Open loop (--rate): requests are due at fixed intervals; latency is also measured from when
each was due ('corrected'), so a stalled server cannot hide the stall.

Exit status: 0 if at least one request got a 2xx/3xx response and no --fail-if threshold
was breached; 1 if no request succeeded (every failure is still counted and printed) or a
threshold was breached (named on stderr); 2 for a usage error.
'blocklab load compare' exits 1 on a regression past --max-regression, 2 for a usage error.";

/// Flags of `blocklab load`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct LoadArgs {
    /// `blocklab load merge …` instead of a run.
    #[command(subcommand)]
    pub action: Option<LoadAction>,

    /// The URL to load (http:// or https://; user:password@ in it is sent as Basic auth).
    #[arg(value_name = "URL", required_unless_present = "urls")]
    pub url: Option<String>,

    /// Several requests, sent in turn on every connection: a file in vegeta's targets format
    /// (a line 'METHOD URL', under it header lines 'Name: value' and '@FILE' for a body,
    /// a blank line between requests). All go to one scheme, host and port; -H applies to
    /// all (their own headers replace it). Figures per URL in the text and the JSON.
    #[arg(long = "urls", value_name = "FILE", conflicts_with_all = ["url", "method", "body", "body_file"])]
    pub urls: Option<std::path::PathBuf>,

    /// https://: trust the certificates in this PEM file (a private CA, a self-signed
    /// certificate) instead of the platform's roots.
    #[arg(long = "cacert", value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<std::path::PathBuf>,

    /// https://: accept any certificate (issuer, name and dates unchecked).
    #[arg(long = "insecure")]
    pub insecure: bool,

    /// Concurrent connections, each with one request in flight at a time.
    #[arg(short = 'c', long = "concurrency", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000), value_name = "N")]
    pub concurrency: u32,

    /// Closed loop, connections in stages: --connections 10:10s,200:30s,0:10s ramps the
    /// number of open connections linearly from 0 (or a leading START) to each N over its
    /// DURATION; the stages set the run's length.
    #[arg(long = "connections", value_name = "[START,]N:DUR,...", conflicts_with = "concurrency",
          value_parser = ConnectionStages::parse)]
    pub connection_stages: Option<ConnectionStages>,

    /// Total requests [default: 100000 unless -z is given].
    #[arg(short = 'n', long = "requests", conflicts_with = "duration",
          value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub requests: Option<u64>,

    /// Run for this long instead of a number of requests (e.g. 30s, 2m).
    #[arg(short = 'z', long = "duration", value_parser = parse_positive_duration, value_name = "DUR")]
    pub duration: Option<Duration>,

    /// Keep connections alive (as ab -k); without it every request opens a new connection.
    #[arg(short = 'k', long = "keep-alive")]
    pub keep_alive: bool,

    /// A new connection per request (over https://, a handshake per request), to show what
    /// connecting costs. The default without -k; a flag for those who look for one
    /// (oha and hey: --disable-keepalive; wrk: -H 'Connection: close').
    #[arg(long = "no-keepalive", visible_alias = "disable-keepalive", conflicts_with = "keep_alive")]
    pub no_keepalive: bool,

    /// Open loop: total requests per second, on a fixed schedule. In stages, as k6's
    /// ramping arrival rate: --rate 100:10s,2000:30s,2000:60s,0:10s ramps linearly from 0
    /// (or from a leading START: --rate 50,2000:30s) to each RATE over its DURATION; the
    /// stages set the run's length.
    #[arg(long, value_parser = RateSchedule::parse, value_name = "R | [START,]RATE:DUR,...", allow_negative_numbers = true)]
    pub rate: Option<RateSchedule>,

    /// Limit to connect, and to get a whole response after sending.
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub timeout: Duration,

    /// Engine threads [default: the cores this process may use].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub threads: Option<u16>,

    /// Pipelining: N requests written at once per connection, their responses
    /// read in order, then the next N (as wrk's pipeline script). Closed loop
    /// with -k only; each request's latency runs from the batch's write.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub pipeline: u16,

    /// Never sleep while the run goes: each engine thread polls its sockets
    /// without blocking, using its whole core. A thread that sleeps in epoll
    /// must be woken when a response arrives, and on loopback the server's
    /// own write() pays for that wake-up (an interrupt to this core: 20-30 µs
    /// on these VMs), so an idle client makes the server it measures slower.
    /// wrk is never idle at full rate; use this when the server is the
    /// bottleneck and the client has a core of its own.
    #[arg(long)]
    pub busy_poll: bool,

    /// HTTP/2 on hyper's h2: over http:// with prior knowledge (h2c), over https:// with
    /// ALPN h2. Connections are kept (-k is implied); a server that does not speak HTTP/2
    /// there is counted as 'HTTP/2 refused'.
    #[arg(long = "h2")]
    pub h2: bool,

    /// With --h2: up to N requests in flight per connection, each on its own stream
    /// (h2load's -m); -c stays the number of connections.
    #[arg(long, default_value_t = 1, requires = "h2", value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub streams: u16,

    /// Also write the result as JSON (schema/load-result.json) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,

    /// Also write the latencies as an HdrHistogram interval log to FILE: one interval
    /// per second, tagged 'measured' (and 'corrected' in open loop), microseconds,
    /// read by HdrHistogram's own tools (HdrLogProcessing, Python hdrhistogram).
    #[arg(long = "hdr-log", value_name = "FILE")]
    pub hdr_log: Option<std::path::PathBuf>,

    /// Also write the run as one self-contained HTML page to FILE: the summary, the
    /// latency distribution and the timeline (throughput, errors, p50/p99, connections).
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,

    /// No progress (a bar on a terminal; otherwise a line on stderr every 5 s).
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// HTTP method.
    #[arg(short = 'm', long, default_value = "GET", value_name = "METHOD")]
    pub method: String,

    /// Request header, repeatable: -H 'Accept: application/json'. One named as a default
    /// (Host, User-Agent, Content-Type, Authorization, Connection) replaces it; an empty
    /// value (-H 'User-Agent:') removes it.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,

    /// Request body, sent with its Content-Length (e.g. -m POST -d '{"id":3}').
    #[arg(short = 'd', long = "body", value_name = "STRING", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Request body read from FILE (once, before the run).
    #[arg(long = "body-file", value_name = "FILE")]
    pub body_file: Option<std::path::PathBuf>,

    /// Fail the run (exit 1, the breached threshold named) when any of these holds:
    /// 'p99>50ms,errors>0.1%,rps<1000'. Figures: rps, errors (a share of the requests
    /// that ended with no response or a status >= 400, as N%, or a count), mean, p50,
    /// p90, p95, p99, p99.9, max (us, ms or s; corrected latency in open loop).
    /// Comparisons: > >= < <=.
    #[arg(long = "fail-if", value_name = "LIST")]
    pub fail_if: Option<String>,

    /// Content-Type of the body [default with a body: application/x-www-form-urlencoded, as curl -d].
    #[arg(short = 'T', long = "content-type", value_name = "TYPE")]
    pub content_type: Option<String>,
}

impl LoadArgs {
    /// The validated plan.
    pub fn plan(&self) -> Result<LoadPlan, String> {
        let staged = self
            .rate
            .as_ref()
            .and_then(RateSchedule::total)
            .or(self.connection_stages.as_ref().map(ConnectionStages::total));
        let stop = match (self.requests, self.duration, staged) {
            (None, None, Some(total)) => Stop::Duration(total),
            (_, _, Some(_)) => {
                return Err("--rate in stages sets the run's length: leave out -n and -z".to_string());
            }
            (_, Some(d), None) => Stop::Duration(d),
            (Some(n), None, None) => Stop::Requests(n),
            (None, None, None) => Stop::Requests(100_000),
        };
        let lines = match &self.urls {
            Some(path) => super::targets::read(path)?,
            None => Vec::new(),
        };
        let url = match (&self.url, lines.first()) {
            (Some(url), _) => url.as_str(),
            (None, Some(first)) => first.url.as_str(),
            (None, None) => return Err("a URL to load is needed".to_string()),
        };
        let connections = match &self.connection_stages {
            Some(stages) if stages.max() == 0 => {
                return Err("--connections: every stage has 0 connections".to_string());
            }
            Some(stages) => stages.max(),
            None => self.concurrency as usize,
        };
        let trust = match (&self.cacert, self.insecure) {
            (Some(path), _) => Trust::File(path.clone()),
            (None, true) => Trust::Insecure,
            (None, false) => Trust::Platform,
        };
        let mut plan = LoadPlan::trusting(url, connections, stop, &trust)?;
        for line in lines {
            let target = Target::parse(&line.url).map_err(|e| format!("--urls line {}: {e}", line.line))?;
            if !target.same_origin(&plan.target) {
                return Err(format!(
                    "--urls line {}: {} is not on {}: every URL must share the scheme, host and port of the \
                     first (they share the connections)",
                    line.line,
                    target.url,
                    plan.target.origin()
                ));
            }
            plan.urls.push(UrlRequest {
                target,
                method: line.method,
                headers: line.headers,
                body: line.body,
            });
        }

        plan.connection_stages = self.connection_stages.clone();
        plan.keep_alive = self.keep_alive;
        plan.rate = self.rate.clone();
        plan.timeout = self.timeout;
        plan.threads = self.threads.map_or_else(available_cores, usize::from);
        plan.pipeline = usize::from(self.pipeline);
        plan.busy_poll = self.busy_poll;
        if self.h2 {
            plan.use_h2(usize::from(self.streams));
        }
        plan.method = match plan.urls.first() {
            // For reports: the first of the file's methods.
            Some(first) => first.method.clone(),
            None => self.method.parse().map_err(|_| format!("invalid method '{}'", self.method))?,
        };
        for header in &self.headers {
            let (name, value) =
                header.split_once(':').ok_or_else(|| format!("header '{header}' is not 'Name: value'"))?;
            let name = HeaderName::try_from(name.trim())
                .map_err(|_| format!("invalid header name in '{header}'"))?;
            let value = HeaderValue::try_from(value.trim())
                .map_err(|_| format!("invalid header value in '{header}'"))?;
            plan.headers.push((name, value));
        }
        plan.body = match (&self.body, &self.body_file) {
            (Some(text), _) => Some(text.as_bytes().to_vec()),
            (None, Some(path)) => Some(
                std::fs::read(path)
                    .map_err(|e| format!("cannot read --body-file {}: {e}", path.display()))?,
            ),
            (None, None) => None,
        };
        plan.content_type = match &self.content_type {
            Some(t) => {
                Some(HeaderValue::try_from(t.trim()).map_err(|_| format!("invalid --content-type '{t}'"))?)
            }
            None => None,
        };
        plan.validate()?;
        Ok(plan)
    }
}

/// What `blocklab load` does other than a run.
#[derive(Debug, Subcommand)]
pub enum LoadAction {
    /// One report from the --json results of runs made at the same time against the same
    /// target, on one machine or many: counts summed, histograms added losslessly, the rate
    /// over the union of their time spans.
    #[command(after_help = MERGE_EXAMPLES)]
    Merge(MergeArgs),
    /// Two --json results side by side (throughput, percentiles, errors) and the change of
    /// each; with --max-regression, exit 1 when NEW is worse than BASE past a limit.
    #[command(after_help = COMPARE_EXAMPLES)]
    Compare(CompareArgs),
}

/// What `blocklab load compare --help` shows after the flags.
pub const COMPARE_EXAMPLES: &str = "\
Examples:
  blocklab load -k -z 30s --json base.json http://127.0.0.1:9000/test    # before the change
  blocklab load -k -z 30s --json new.json http://127.0.0.1:9000/test     # after it
  blocklab load compare base.json new.json --max-regression p99=10%,rps=5%,errors=0.1%

Limits: latencies (mean, p50, p90, p95, p99, p99.9, max) and rps as the largest change for
the worse, relative (p99=10%: p99 may grow by 10 %; rps=5%: rps may fall by 5 %); errors as
the largest rise of the error rate in percentage points (errors=0.1%).
Exit status: 0 when no limit is passed; 1 on a regression past a limit (each named);
2 for a usage error.";

/// Flags of `blocklab load compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a `blocklab load --json` result.
    #[arg(value_name = "BASE.json")]
    pub base: std::path::PathBuf,

    /// The run judged against it.
    #[arg(value_name = "NEW.json")]
    pub new: std::path::PathBuf,

    /// Exit 1 when NEW is worse than BASE past any of these: 'p99=10%,rps=5%,errors=0.1%'.
    #[arg(long = "max-regression", value_name = "LIST")]
    pub max_regression: Option<String>,
}

/// What `blocklab load merge --help` shows after the flags.
pub const MERGE_EXAMPLES: &str = "\
Examples:
  # three agents, started together by any orchestrator (ssh, a Kubernetes Job), each writing its JSON
  blocklab load -k -c 300 -z 60s --json /shared/agent-$HOSTNAME.json http://target:9000/test
  # then, anywhere:
  blocklab load merge /shared/agent-*.json --json /shared/merged.json";

/// Flags of `blocklab load merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The `--json` results of `blocklab load` to merge.
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub files: Vec<std::path::PathBuf>,

    /// Also write the merged result as JSON (schema/load-result.json) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
}

fn read_report(path: &std::path::Path) -> Result<LoadReport, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{} is not a blocklab load --json result: {e}", path.display())))
}

/// `blocklab load compare`: both files read, the table printed, exit 1 on a regression.
pub fn load_compare(args: &CompareArgs) -> Result<(), Failure> {
    let limits = match &args.max_regression {
        Some(list) => {
            compare::parse_limits(list).map_err(|e| Failure::Usage(format!("--max-regression: {e}")))?
        }
        None => Vec::new(),
    };
    let base = read_report(&args.base)?;
    let new = read_report(&args.new)?;
    let (base_name, new_name) = (args.base.display().to_string(), args.new.display().to_string());
    let (table, regression) = compare::compare((&base_name, &base), (&new_name, &new), &limits);
    print!("{table}");
    match regression {
        Some(message) => Err(Failure::Failed(anyhow::anyhow!(message))),
        None => Ok(()),
    }
}

/// `blocklab load merge`: read every file first, merge, print, write the JSON.
pub fn load_merge(args: &MergeArgs) -> Result<(), Failure> {
    let mut runs = Vec::with_capacity(args.files.len());
    for path in &args.files {
        runs.push((path.display().to_string(), read_report(path)?));
    }
    let json_file = created(args.json.as_deref())?;
    let merged = crate::load::merge::merge(&runs).map_err(Failure::Usage)?;
    let names: Vec<String> = runs.into_iter().map(|(name, _)| name).collect();
    print!("{}", crate::load::merge::text(&merged, &names));
    if let Some((path, file)) = json_file {
        serde_json::to_writer_pretty(std::io::BufWriter::new(file), &merged.report)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `blocklab load`: validate, run, print the summary, write the JSON.
pub fn load(args: &LoadArgs) -> Result<(), Failure> {
    match &args.action {
        Some(LoadAction::Merge(merge)) => return load_merge(merge),
        Some(LoadAction::Compare(compare)) => return load_compare(compare),
        None => {}
    }
    let mut plan = args.plan().map_err(Failure::Usage)?;
    let thresholds = args
        .fail_if
        .as_deref()
        .map(|list| thresholds::parse(list).map_err(|e| Failure::Usage(format!("--fail-if: {e}"))))
        .transpose()?;
    // A bar on a terminal; off one (a log file, CI) a plain line every few seconds.
    plan.progress = match (args.quiet, std::io::stderr().is_terminal() && std::io::stdout().is_terminal()) {
        (true, _) => Progress::Silent,
        (false, true) => Progress::Bar,
        (false, false) => Progress::Lines,
    };
    // Created before the run, so a bad path cannot lose a long run's results.
    let json_file = created(args.json.as_deref())?;
    let hdr_log = created(args.hdr_log.as_deref())?.map(|(_, file)| file);
    let html_file = created(args.html.as_deref())?;
    let result = crate::load::engine::run_with_log(&plan, hdr_log)?;
    let report = LoadReport::new(&plan, &result);
    let mut summary = crate::load::report::text(&plan, &result, &report);
    let verdict = thresholds.map(|t| thresholds::judge(&t, &report));
    if let Some((text, _)) = &verdict {
        summary += text;
    }
    print!("{summary}");
    if let Some((path, file)) = html_file {
        use std::io::Write;
        std::io::BufWriter::new(file)
            .write_all(crate::load::html::page(&report, &summary).as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some((path, file)) = json_file {
        serde_json::to_writer_pretty(std::io::BufWriter::new(file), &report)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some((_, Some(message))) = verdict {
        return Err(Failure::Failed(anyhow::anyhow!(message)));
    }
    if result.stats.ok == 0 {
        return Err(Failure::Failed(anyhow::anyhow!(
            "no request succeeded: {} failed without a response, {} non-2xx/3xx responses",
            result.stats.error_total(),
            result.stats.completed
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{LoadPlan, Stop};

    fn load(args: &[&str]) -> Result<LoadPlan, String> {
        /// `blocklab load` alone, as the command line holds it (a subcommand
        /// with subcommands of its own).
        #[derive(clap::Parser)]
        struct Cli {
            #[command(subcommand)]
            command: Command,
        }
        #[derive(clap::Subcommand)]
        enum Command {
            Load(LoadArgs),
        }
        let argv = ["blocklab", "load"].iter().chain(args);
        let Command::Load(load) =
            <Cli as clap::Parser>::try_parse_from(argv).map_err(|e| e.to_string())?.command;
        load.plan()
    }

    #[test]
    fn the_seed_invocation_parses_as_written() {
        let plan = load(&["-k", "-c", "200", "-n", "100000", "http://localhost:9000/test"]).unwrap();
        assert_eq!((plan.connections, plan.stop, plan.keep_alive), (200, Stop::Requests(100_000), true));
        assert_eq!(plan.target.path, "/test");
        assert_eq!(plan.mode(), "closed");
    }

    #[test]
    fn no_keepalive_is_the_default_said_out_loud_and_conflicts_with_k() {
        let url = "https://127.0.0.1:1/";
        assert!(!load(&["--no-keepalive", url]).unwrap().keep_alive);
        assert!(!load(&["--disable-keepalive", url]).unwrap().keep_alive);
        assert!(!load(&[url]).unwrap().keep_alive);
        assert!(load(&["-k", url]).unwrap().keep_alive);
        for both in [&["-k", "--no-keepalive", url][..], &["--no-keepalive", "--keep-alive", url]] {
            let refused = load(both).unwrap_err();
            assert!(refused.contains("cannot be used with"), "{both:?}: {refused}");
        }
    }

    #[test]
    fn bad_load_flags_are_refused() {
        for bad in [
            &["-c", "0", "http://127.0.0.1:1/"][..],
            &["-c", "10", "-n", "5", "http://127.0.0.1:1/"],
            &["-n", "10", "-z", "1s", "http://127.0.0.1:1/"],
            &["--rate", "0", "http://127.0.0.1:1/"],
            &["--rate", "-3", "http://127.0.0.1:1/"],
            &["-z", "soon", "http://127.0.0.1:1/"],
            &["--timeout", "0s", "http://127.0.0.1:1/"],
            &["ftp://127.0.0.1:1/"],
            &["--urls", "/nonexistent/targets.txt"],
            &["not a url"],
            &["-H", "nocolon", "http://127.0.0.1:1/"],
        ] {
            assert!(load(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(load(&["https://127.0.0.1:1/"]).unwrap().tls.is_some());
    }
}
