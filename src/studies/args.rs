//! `blocklab studies`: its flags. Each study runs with its own defaults
//! (`--out DIR/STUDY`, and `--quick` when given).

use clap::Args;

/// What `blocklab studies --help` shows after the flags.
pub const STUDIES_EXAMPLES: &str = "\
Builds the peers it can (scripts/peers build; cached in .local/), then runs 'blocklab bench'
into DIR/bench (blocklab, Play and the Python peer on Neo4j, each fresh server warmed until
its rate settles, runs of 3 s interleaved, then a database stall on blocklab and Play) and
'blocklab sweep' into DIR/sweep (the seed's levels but 700 and 800, a thread pool's levels
stopped after two waves): about 35 minutes on this 2-core machine with the seed's stack and
every peer, the build included (--quick: about three). Then it writes DIR/index.html: what ran, where, and what was skipped and why. Each study's own flags: run it alone ('blocklab bench --help',
'blocklab sweep --help').

Examples:
  blocklab studies
  blocklab studies --quick --out /tmp/first-look";

/// Flags of `blocklab studies`.
#[derive(Debug, Args)]
pub struct StudiesArgs {
    /// Both studies' --quick: a first look (about three minutes with the seed's stack).
    #[arg(long)]
    pub quick: bool,

    /// Output folder [default: results/<timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

impl StudiesArgs {
    /// The output folder: `--out`, or `results/<timestamp>`.
    pub fn out(&self) -> std::path::PathBuf {
        self.out.clone().unwrap_or_else(|| {
            let stamp =
                humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace(':', "-");
            std::path::PathBuf::from("results").join(stamp)
        })
    }
}
