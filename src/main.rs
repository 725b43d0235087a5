//! The `blocklab` binary: parse, run, map the outcome to an exit status.

use std::process::ExitCode;

use clap::Parser;

// The server and the load generator both allocate per request; mimalloc keeps
// that off the profile (glibc's arenas were growing and trimming their heap).
// It is built without transparent huge pages (Cargo.toml, feature no_thp), so
// that a thread costs what the thread needs, not a 2 MiB huge page: study 2
// measures exactly that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use clap::error::ErrorKind;

fn main() -> ExitCode {
    let cli = match blocklab::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprintln!("blocklab: a command is required, e.g. 'blocklab serve' (see 'blocklab --help')");
            return ExitCode::from(2);
        }
        Err(e) => {
            // One line: clap's first line says what is wrong; the rest is advice.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid command line");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            // clap lists the missing arguments on the lines after the first: bring them up.
            let missing = match e.get(clap::error::ContextKind::InvalidArg) {
                Some(clap::error::ContextValue::Strings(args))
                    if e.kind() == ErrorKind::MissingRequiredArgument =>
                {
                    args.join(", ")
                }
                _ => String::new(),
            };
            let first = if missing.is_empty() {
                first.to_string()
            } else {
                format!("{} {missing}", first.trim_end())
            };
            let first = blocklab::graph::redact_credentials(&first);
            eprintln!("blocklab: {first} (see 'blocklab --help')");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match blocklab::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blocklab: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
