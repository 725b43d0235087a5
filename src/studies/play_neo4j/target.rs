//! What study 1 measures: blocklab's own server, or a server peer from
//! `peers/` (the seed's Play app; found by its `peer.toml`, not by a name
//! written here), as study 2's targets are chosen.

use crate::harness::peers::{Peer, Peers};
use crate::server::Endpoint;

use super::results::BLOCKLAB;

/// A server study 1 runs its Test IDs against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `blocklab serve`, one endpoint per execution model.
    Blocklab,
    /// A server peer (`scripts/peers run NAME --listen HOST:PORT --db URL --nodes N`).
    Peer {
        /// Its folder's name.
        name: String,
        /// What it is built from (its `peer.toml`'s `versions`).
        versions: String,
        /// The paths it serves.
        endpoints: Vec<String>,
    },
}

impl Target {
    /// Its name in every output.
    pub fn name(&self) -> &str {
        match self {
            Target::Blocklab => BLOCKLAB,
            Target::Peer { name, .. } => name,
        }
    }

    /// Its name with its versions, for the conditions.
    pub fn describe(&self) -> String {
        match self {
            Target::Blocklab => format!("blocklab {} (Rust; tokio, axum, ractor)", env!("CARGO_PKG_VERSION")),
            Target::Peer { name, versions, .. } => format!("{name} ({versions})"),
        }
    }

    /// Whether it serves `api`.
    pub fn serves(&self, api: Endpoint) -> bool {
        match self {
            Target::Blocklab => true,
            Target::Peer { endpoints, .. } => endpoints.iter().any(|e| e == api.path()),
        }
    }

    fn of_peer(peer: &Peer) -> Target {
        Target::Peer {
            name: peer.name.clone(),
            versions: peer.versions.clone(),
            endpoints: peer.endpoints.split_whitespace().map(String::from).collect(),
        }
    }
}

/// Parses `--target`: a comma list of `blocklab` and server peers that serve
/// `/getDataAsync` (study 1's database endpoints).
pub fn parse_targets(list: &str, peers: Option<&Peers>) -> Result<Vec<Target>, String> {
    let mut targets = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let target = if name == BLOCKLAB {
            Target::Blocklab
        } else if let Some(peer) =
            peers.and_then(|p| p.servers_of(Endpoint::GetDataAsync.path()).find(|p| p.name == name))
        {
            Target::of_peer(peer)
        } else {
            let mut known = vec![BLOCKLAB.to_string()];
            if let Some(peers) = peers {
                known.extend(peers.servers_of(Endpoint::GetDataAsync.path()).map(|p| p.name.clone()));
            }
            return Err(format!("unknown --target '{name}' ({})", known.join(", ")));
        };
        if !targets.contains(&target) {
            targets.push(target);
        }
    }
    if targets.is_empty() {
        return Err("--target names no server".to_string());
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_from_the_checkouts_peers() {
        let peers = Peers::of_this_checkout().unwrap();
        let targets = parse_targets("blocklab,play,blocklab", Some(&peers)).unwrap();
        assert_eq!(targets.len(), 2);
        assert_eq!((targets[0].name(), targets[1].name()), ("blocklab", "play"));
        assert!(
            targets[1].serves(Endpoint::GetDataAkka) && !targets[1].serves(Endpoint::GetDataSpawnBlocking)
        );
        assert!(parse_targets("tomcat", Some(&peers)).unwrap_err().contains("unknown --target 'tomcat'"));
        assert!(parse_targets(",", None).is_err());
    }
}
