//! `blocklab sweep`: study 2's flags, validated into a [`SweepPlan`].

use std::time::Duration;

use clap::Args;

use super::plan::{
    Client, DEFAULT_LEVELS, DELAY_PATH, QUICK_LEVELS, SweepPlan, default_targets, own_targets,
};
use crate::flags::{parse_duration, parse_positive_duration, parse_size};
use crate::harness::target::{Target, Targets};

/// What `blocklab sweep --help` shows after the flags.
pub const SWEEP_EXAMPLES: &str = "\
Each level N: N connections opened first, then one GET /delay sent on every one at once.
After each level: is the target alive, was it OOM-killed, does /test answer within 2 s?
A target that died is reported with how and where; its later levels are not run. One that
stopped answering and answered again within --recheck is reported as recovered (after how
many seconds), and its later levels run.
JVM targets are warmed up first (300 /test, 300 short /delay). Beyond 25,000 connections
a level's connections come from 127.0.0.2, 127.0.0.3, …; past one process's descriptors
(RLIMIT_NOFILE) a level is sent by several client processes, lean runs as several worker
processes, and a target without admission control is not run. A 503 or a close before the
request counts as refused, apart from timeouts.

Examples:
  blocklab sweep                                  # every target, the seed's levels, 50 MiB cap
  blocklab sweep --quick                          # 3 levels, 1 s delay, 7 targets: a minute or two
  blocklab sweep --targets lean,reactive --levels 1000,5000,10000,20000,50000
  blocklab sweep --targets spring-web,spring-webflux,node --process-memory 256MiB
  blocklab sweep --url 'http://127.0.0.1:8080/slow' --levels 100,1000
  blocklab sweep --client jmeter --targets spring-web,spring-webflux   # the seed's client

Run as root for the memory cap (a child cgroup of the sweep's own); without one, a warning
and an uncapped run. The targets are blocklab's four server models and every server peer
under peers/ that serves /delay (its peer.toml says so); a peer runs once built:
scripts/peers install && scripts/peers build NAME.";

/// Flags of `blocklab sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Targets, comma-separated: reactive, lean, pool, thread (blocklab serve --model), or a server peer's
    /// name (a folder of peers/ whose peer.toml serves /delay) [default: all of them].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub targets: Option<Vec<String>>,

    /// Concurrent requests per step, comma-separated, ascending, up to 60000 [default:
    /// 100,400,600,700,800,1000,2000,5000,10000,25000]; beyond 25,000 connections come from more loopback
    /// addresses (127.0.0.2, …).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=60_000), value_name = "LIST")]
    pub levels: Option<Vec<u32>>,

    /// The wait of each /delay request [default: 5s; 1s with --quick].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub delay: Option<Duration>,

    /// Memory cap of each target's whole process (e.g. 50MiB, 1GiB): Rust, Go (with GOMEMLIMIT at 4/5 of it)
    /// and Python; Node's heap (--max-old-space-size), its whole process only with --process-memory.
    #[arg(long, default_value = "50MiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,

    /// Memory cap of the whole process of each peer whose runtime has a heap, JVM or Node.js [default: none;
    /// the heap is capped: -Xmx50M as the seed, Node's at --memory]. Also spelt --jvm-memory.
    #[arg(long = "process-memory", visible_alias = "jvm-memory", value_parser = parse_size, value_name = "SIZE")]
    pub jvm_memory: Option<u64>,

    /// Limit for one request, connect included.
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub timeout: Duration,

    /// A first look: three levels (100, 400, 800), a 1 s delay, --recheck 5s, and of the peers only
    /// go-nethttp, node, python-asyncio, python-threads, spring-web and spring-webflux unless --targets: ~5 s a
    /// native target, ~7 s a Python or Node.js one, ~15 s a JVM.
    #[arg(long)]
    pub quick: bool,

    /// Output folder [default: results/sweep-<timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,

    /// Sweep a running service instead: each request is GET URL (no process managed, no cap).
    #[arg(long, value_name = "URL", conflicts_with = "targets")]
    pub url: Option<String>,

    /// Who sends each step's requests: blocklab's own load generator, or the seed's JMeter
    /// (the jmeter peer: scripts/peers build jmeter), whose JTL is read back into the same figures.
    #[arg(long, value_enum, default_value = "blocklab", value_name = "CLIENT")]
    pub client: Client,

    /// After a target stops answering: how long to probe /test to see whether it answers again
    /// [default: 20s, or 5s with --quick].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub recheck: Option<Duration>,

    /// Do not use cgroups: run every target uncapped (memory is then not measured).
    #[arg(long)]
    pub no_cgroup: bool,

    /// Connections one source address opens before the next loopback address
    /// takes over (a test knob: the default fits one address's ephemeral ports).
    #[arg(long, hide = true, default_value_t = super::step::CONNECTIONS_PER_ADDRESS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), value_name = "N")]
    pub connections_per_address: usize,

    /// lean's worker processes sharing its port (serve --processes) [default: as many as a level needs,
    /// each under the descriptor limit less 1024, and no more than the requests its admission budget
    /// holds need (at the memory per request of the levels held): 2 for 50000 under 50 MiB at
    /// RLIMIT_NOFILE 20000].
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64), value_name = "N")]
    pub lean_processes: Option<usize>,

    /// Stop a target's levels once one level's slowest answer took more than K × the delay: its
    /// answers came in waves (a pool of threads that each sleep the delay; Tomcat's 200 threads
    /// answer 700 requests in 4 waves), and each level more only adds waves. The main job stops at
    /// 3 to keep its time [default: every level runs].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), value_name = "K")]
    pub stop_after_waves: Option<u32>,

    /// Connections one client process holds before a level is split over more processes
    /// [default: the descriptor limit less a spare]; a test knob, as above.
    #[arg(long, hide = true, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), value_name = "N")]
    pub connections_per_process: Option<usize>,
}

impl SweepArgs {
    /// The flags `blocklab sweep --out OUT [--quick]` gives (for the main job).
    pub fn alone(out: &std::path::Path, quick: bool) -> Result<SweepArgs, String> {
        crate::flags::parse_alone("sweep", out, quick)
    }

    /// The validated plan (the output folder is not created here).
    pub fn plan(&self) -> Result<SweepPlan, String> {
        let exe = std::env::var_os("BLOCKLAB_SERVER_EXE").map_or_else(
            || std::env::current_exe().map_err(|e| format!("cannot find the blocklab binary: {e}")),
            |exe| Ok(std::path::PathBuf::from(exe)),
        )?;
        let available = Targets::of_this_checkout(exe)?;
        let targets = match (&self.url, &self.targets) {
            (Some(url), _) => vec![Target::url(url).map_err(|e| format!("--url {e}"))?],
            (None, Some(names)) => names
                .iter()
                .map(|n| available.named(n, &own_targets(), &[DELAY_PATH], "target"))
                .collect::<Result<Vec<_>, _>>()?,
            (None, None) => default_targets(&available, self.quick),
        };
        if targets.is_empty() {
            return Err("--targets is empty".to_string());
        }
        let levels: Vec<usize> = match &self.levels {
            Some(levels) => levels.iter().map(|l| *l as usize).collect(),
            None if self.quick => QUICK_LEVELS.to_vec(),
            None => DEFAULT_LEVELS.to_vec(),
        };
        if levels.windows(2).any(|w| w[0] >= w[1]) {
            return Err("--levels must be ascending, e.g. 100,200,400".to_string());
        }
        let delay =
            self.delay.unwrap_or(if self.quick { Duration::from_secs(1) } else { Duration::from_secs(5) });
        if delay > Duration::from_millis(crate::server::delay::MAX_MS) {
            return Err(format!("--delay is at most {} ms", crate::server::delay::MAX_MS));
        }
        if delay >= self.timeout && self.url.is_none() {
            return Err(format!(
                "--timeout ({:?}) must be longer than --delay ({delay:?}), or every request times out",
                self.timeout
            ));
        }
        let out = self.out.clone().unwrap_or_else(|| {
            let stamp =
                humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace(':', "-");
            std::path::PathBuf::from("results").join(format!("sweep-{stamp}"))
        });
        Ok(SweepPlan {
            targets,
            levels,
            delay,
            memory: self.memory,
            jvm_memory: self.jvm_memory,
            jvm_opts: std::env::var("JAVA_OPTS").unwrap_or_else(|_| super::plan::JVM_OPTS.to_string()),
            timeout: self.timeout,
            out,
            available,
            placement: crate::harness::placement::Placement::detect(),
            use_cgroups: !self.no_cgroup,
            client: self.client,
            recheck: self.recheck.unwrap_or(Duration::from_secs(if self.quick { 5 } else { 20 })),
            per_address: self.connections_per_address,
            per_process: self.connections_per_process,
            quick: self.quick,
            lean_processes: self.lean_processes,
            stop_after_waves: self.stop_after_waves,
        })
    }
}
