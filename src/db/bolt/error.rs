//! Why a Bolt exchange failed, by what it means for the connection: an
//! I/O error or a protocol error leaves it unusable (discarded), a
//! `Failure` is Neo4j refusing the query on a connection that is still
//! sound (reset before its next use).

/// Why a Bolt exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum BoltError {
    /// The TCP connection could not be opened in time, or refused.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The connection broke mid-exchange (Neo4j died, the network failed).
    #[error("connection lost: {0}")]
    Io(#[from] std::io::Error),
    /// Neo4j answered FAILURE: the query (or the login) was refused.
    #[error("{code}: {message}")]
    Failure {
        /// Neo4j's status code, e.g. `Neo.ClientError.Statement.SyntaxError`.
        code: String,
        /// Neo4j's message.
        message: String,
    },
    /// The server said something the protocol does not allow here.
    #[error("Bolt protocol: {0}")]
    Protocol(String),
}

impl From<super::packstream::DecodeError> for BoltError {
    fn from(e: super::packstream::DecodeError) -> Self {
        BoltError::Protocol(e.to_string())
    }
}
