//! Why a command did not succeed, and the exit status each reason maps to:
//! 2 for a usage error (bad flag, address in use, an output folder that
//! cannot be written), 1 for a failure while running, 130 when interrupted.

/// Why a command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The command line asks for something impossible; nothing was started.
    #[error("{0}")]
    Usage(String),
    /// The command started and failed.
    #[error("{0:#}")]
    Failed(#[from] anyhow::Error),
    /// Stopped by SIGINT or SIGTERM before it was done (partial results written).
    #[error("interrupted")]
    Interrupted,
}

impl Failure {
    /// The process exit status for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Failed(_) => 1,
            Failure::Interrupted => 130,
        }
    }
}
