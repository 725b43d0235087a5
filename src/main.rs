//! The `blocklab` binary: parse, run, map the outcome to an exit status.

use std::process::ExitCode;

// The server and the load generator both allocate per request; mimalloc keeps
// that off the profile (glibc's arenas were growing and trimming their heap).
// It is built without transparent huge pages (Cargo.toml, feature no_thp), so
// that a thread costs what the thread needs, not a 2 MiB huge page: study 2
// measures exactly that. Under admission control in a memory cap, the hyper
// models return freed memory at once (src/server/budget.rs). A bench build
// with the feature count-allocations counts allocations instead
// (src/server/allocations.rs).
#[cfg(not(feature = "count-allocations"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match blocklab::cli::parse() {
        Ok(cli) => cli,
        Err(status) => return ExitCode::from(status),
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
