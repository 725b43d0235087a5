//! What study 2 sweeps, one kind of thing whatever runs it: blocklab's own
//! server models, a server peer from `peers/` (any language; found by its
//! `peer.toml`, not by a name written here), or a URL the user runs.

use std::net::SocketAddr;

use crate::harness::peers::{Peer, Peers, Runtime};
use crate::server::Model;

/// The path every swept target must serve.
pub const DELAY_PATH: &str = "/delay";

/// What is swept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `blocklab serve --model M`.
    Model(Model),
    /// A server peer (`scripts/peers run NAME --listen HOST:PORT`).
    Peer {
        /// Its folder's name.
        name: String,
        /// What it runs on: a JVM (its heap capped at the seed's -Xmx50M, its
        /// process at `--jvm-memory`), Go (`GOMEMLIMIT` under its cap), other.
        runtime: Runtime,
    },
    /// A running service, not managed: no cap, death seen by the probe only.
    Url {
        /// The URL as given.
        url: String,
        /// Where it listens.
        addr: SocketAddr,
        /// Its `Host` header.
        host: String,
        /// Path and query of each request.
        path: String,
    },
}

impl Target {
    /// Its name in the outputs.
    pub fn name(&self) -> String {
        match self {
            Target::Model(m) => m.to_string(),
            Target::Peer { name, .. } => name.clone(),
            Target::Url { url, .. } => url.clone(),
        }
    }

    /// The target a server peer is.
    pub fn of_peer(peer: &Peer) -> Target {
        Target::Peer { name: peer.name.clone(), runtime: peer.runtime() }
    }

    /// Parses a `--targets` entry: a server model, or a server peer that serves `/delay`.
    pub fn parse(name: &str, peers: &Peers) -> Result<Target, String> {
        let name = name.trim();
        if let Some(model) = Model::ALL.into_iter().find(|m| m.name() == name) {
            return Ok(Target::Model(model));
        }
        if let Some(peer) = peers.servers_of(DELAY_PATH).find(|p| p.name == name) {
            return Ok(Target::of_peer(peer));
        }
        let mut known: Vec<String> = Model::ALL.into_iter().map(|m| m.name().to_string()).collect();
        known.extend(peers.servers_of(DELAY_PATH).map(|p| p.name.clone()));
        Err(format!("unknown target '{name}' ({})", known.join(", ")))
    }

    /// Whether it runs on a JVM.
    pub fn is_jvm(&self) -> bool {
        matches!(self, Target::Peer { runtime: Runtime::Jvm, .. })
    }

    /// Whether it is a Go binary.
    pub fn is_go(&self) -> bool {
        matches!(self, Target::Peer { runtime: Runtime::Go, .. })
    }

    /// Whether it is a peer.
    pub fn is_peer(&self) -> bool {
        matches!(self, Target::Peer { .. })
    }
}

/// Every target by default: the four server models, then every server peer
/// that serves `/delay`; with `quick`, of the peers only [`QUICK_PEERS`].
pub fn default_targets(peers: &Peers, quick: bool) -> Vec<Target> {
    let mut targets: Vec<Target> = Model::ALL.into_iter().map(Target::Model).collect();
    targets.extend(
        peers
            .servers_of(DELAY_PATH)
            .filter(|p| !quick || QUICK_PEERS.contains(&p.name.as_str()))
            .map(Target::of_peer),
    );
    targets
}

/// The peers `--quick` sweeps beside the four models: the seed's two
/// applications and Go (a JVM costs ~15 s a target to start and step, so the
/// engines and virtual threads wait for the full run).
pub const QUICK_PEERS: [&str; 3] = ["go-nethttp", "spring-web", "spring-webflux"];
