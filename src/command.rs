//! What every subcommand shares: its output checked writable before any
//! work starts, and SIGINT/SIGTERM watched so a long run stops cleanly and
//! writes what it has. Each subcommand itself lives beside its flags
//! (`server/args.rs`, `load/args.rs`, `seed.rs`, `studies/`); [`crate::cli`]
//! dispatches to them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::failure::Failure;

/// Creates `dir` and proves it writable, before any server or load starts:
/// a bad `--out` is a usage error, never a lost run at the end.
pub fn writable_dir(dir: &std::path::Path) -> Result<(), Failure> {
    let probe = dir.join(".blocklab-write-probe");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| Failure::Usage(format!("cannot write into {}: {e}", dir.display())))
}

/// Sets `flag` on the first SIGINT or SIGTERM, from a thread of its own.
pub fn watch_for_interrupt(flag: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            return;
        };
        runtime.block_on(async {
            shutdown_signal().await;
            eprintln!("blocklab: interrupted; stopping the servers and writing partial results");
            flag.store(true, Ordering::Relaxed);
        });
    });
}

/// The output file at `path`, created now, so that a bad path is a usage
/// error before any work instead of a lost run at the end.
pub fn created(path: Option<&std::path::Path>) -> Result<Option<(&std::path::Path, std::fs::File)>, Failure> {
    path.map(|path| {
        std::fs::File::create(path)
            .map(|file| (path, file))
            .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", path.display())))
    })
    .transpose()
}

/// Resolves on the first SIGINT (ctrl-c) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT: shutting down"),
        () = term => tracing::info!("SIGTERM: shutting down"),
    }
}
