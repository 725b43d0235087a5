//! A target: what a study measures, one kind of thing whatever runs it —
//! blocklab's own server (one model, or each endpoint's own), a server peer
//! of any language (JVM, Go, Python, Node.js: found by their `peer.toml`,
//! never by a name written here), or a service the user runs at a URL. Databases
//! the harness starts are peers too ([`Targets::database`], started by
//! [`super::database`]).
//!
//! [`Targets`] is the one place that lists them. A study asks it for targets
//! by name or by a path they must serve; each target says what it is built
//! from, the command that starts it (which prints the `listening on` line
//! [`super::process::ServerProcess`] waits for), and what it runs on, which
//! decides how its memory is capped and its runtime figures read (a JVM's
//! heap from hsperfdata, [`super::jvm`]; a Go binary's soft memory limit; a
//! Node.js heap limit: [`super::peers::Runtime`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use super::launch::Spec;
use super::peers::{Peer, PeerKind, Peers, Runtime};
use crate::page::Family;
use crate::server::Model;

/// The name of blocklab's own server when each endpoint runs under its own model.
pub const BLOCKLAB: &str = "blocklab";

/// What a study measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `blocklab serve`: under one server model, or (None) with each endpoint
    /// under the model its study gives it.
    Blocklab(Option<Model>),
    /// A server peer, as its `peer.toml` describes it
    /// (`scripts/peers run NAME --listen HOST:PORT`).
    Peer(Peer),
    /// A service the user runs: not managed (no command, no cap), seen by
    /// its answers only.
    Url(RunningService),
}

/// A service the user runs, resolved from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningService {
    /// The URL as given.
    pub url: String,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its `Host` header.
    pub host: String,
    /// Path and query of each request.
    pub path: String,
}

impl Target {
    /// blocklab under `model`.
    pub fn model(model: Model) -> Target {
        Target::Blocklab(Some(model))
    }

    /// A service at `url` (`http://HOST[:PORT]/PATH`), resolved now.
    pub fn url(url: &str) -> Result<Target, String> {
        let rest =
            url.strip_prefix("http://").ok_or_else(|| format!("takes http://HOST:PORT/PATH, got '{url}'"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let with_port =
            if authority.contains(':') { authority.to_string() } else { format!("{authority}:80") };
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&with_port)
            .map_err(|e| format!("cannot resolve '{authority}': {e}"))?
            .next()
            .ok_or_else(|| format!("'{authority}' resolves to no address"))?;
        Ok(Target::Url(RunningService {
            url: url.to_string(),
            addr,
            host: authority.to_string(),
            path: path.to_string(),
        }))
    }

    /// Its name in every output.
    pub fn name(&self) -> String {
        match self {
            Target::Blocklab(None) => BLOCKLAB.to_string(),
            Target::Blocklab(Some(model)) => model.to_string(),
            Target::Peer(peer) => peer.name.clone(),
            Target::Url(service) => service.url.clone(),
        }
    }

    /// Its name with what it is built from, for the conditions.
    pub fn describe(&self) -> String {
        let version = env!("CARGO_PKG_VERSION");
        match self {
            Target::Blocklab(None) => format!("blocklab {version} (Rust; tokio, axum, ractor)"),
            Target::Blocklab(Some(model)) => format!("blocklab {version} --model {model} (Rust)"),
            Target::Peer(peer) => format!("{} ({})", peer.name, peer.versions),
            Target::Url(service) => format!("{} (not managed)", service.url),
        }
    }

    /// Whether it serves `path`: blocklab serves every endpoint; a peer what
    /// its manifest lists; a running service the one path it was given.
    pub fn serves(&self, path: &str) -> bool {
        match self {
            Target::Blocklab(_) => true,
            Target::Peer(peer) => peer.serves(path),
            Target::Url(service) => service.path.split('?').next() == Some(path),
        }
    }

    /// What it runs on, as far as memory settings and runtime figures go.
    pub fn runtime(&self) -> Runtime {
        match self {
            Target::Peer(peer) => peer.runtime,
            Target::Blocklab(_) | Target::Url(_) => Runtime::Native,
        }
    }

    /// Whether it runs on a JVM.
    pub fn is_jvm(&self) -> bool {
        self.runtime() == Runtime::Jvm
    }

    /// Whether it is a Go binary.
    pub fn is_go(&self) -> bool {
        self.runtime() == Runtime::Go
    }

    /// The family its series is drawn in (marker and dash of the charts).
    pub fn family(&self) -> Family {
        match self {
            Target::Blocklab(_) => Family::Blocklab,
            _ => self.runtime().family(),
        }
    }
}

/// Every target this checkout can run: blocklab's server (the binary given)
/// and the peers under `peers/`. The one place that lists them.
#[derive(Debug, Clone)]
pub struct Targets {
    /// The `blocklab` binary blocklab's targets run.
    pub exe: PathBuf,
    /// The peers, and the script that builds and runs them.
    pub peers: Peers,
}

impl Targets {
    /// The targets of this checkout ([`Peers::of_this_checkout`]), blocklab's run by `exe`.
    pub fn of_this_checkout(exe: PathBuf) -> Result<Targets, String> {
        Ok(Targets { exe, peers: Peers::of_this_checkout()? })
    }

    /// The server peers that serve `path`, as targets.
    pub fn peers_serving<'a>(&'a self, path: &'a str) -> impl Iterator<Item = Target> + 'a {
        self.peers.servers_of(path).cloned().map(Target::Peer)
    }

    /// The server peers that serve any of `paths`, each once.
    fn peers_serving_any(&self, paths: &[&str]) -> Vec<Target> {
        let mut found: Vec<Target> = Vec::new();
        for target in paths.iter().flat_map(|path| self.peers_serving(path)) {
            if !found.contains(&target) {
                found.push(target);
            }
        }
        found
    }

    /// The target called `name`: one of `own` (the blocklab targets the study
    /// runs), or a server peer that serves any of `paths`. The error
    /// ("unknown `flag` 'NAME'") names them all.
    pub fn named(&self, name: &str, own: &[Target], paths: &[&str], flag: &str) -> Result<Target, String> {
        let name = name.trim();
        if let Some(target) = own.iter().find(|t| t.name() == name) {
            return Ok(target.clone());
        }
        let peers = self.peers_serving_any(paths);
        if let Some(target) = peers.iter().find(|t| t.name() == name) {
            return Ok(target.clone());
        }
        let known: Vec<String> = own.iter().cloned().chain(peers).map(|t| t.name()).collect();
        Err(format!("unknown {flag} '{name}' ({})", known.join(", ")))
    }

    /// The database peer called `name` (started by [`super::database`]).
    pub fn database(&self, name: &str) -> Option<&Peer> {
        self.peers.get(name).filter(|p| p.kind == PeerKind::Database)
    }

    /// The link peer called `name` (started by [`super::toxiproxy`]).
    pub fn link(&self, name: &str) -> Option<&Peer> {
        self.peers.get(name).filter(|p| p.kind == PeerKind::Link)
    }

    /// Whether `target` is ready to run: blocklab always; a peer once built
    /// (`scripts/peers check`); a running service is not ours to check.
    pub fn is_built(&self, target: &Target) -> bool {
        match target {
            Target::Peer(peer) => self.peers.is_built(&peer.name),
            Target::Blocklab(_) | Target::Url(_) => true,
        }
    }

    /// Why `target` is not ready, and the one command that would add it, in one line.
    pub fn why_skipped(&self, target: &Target) -> String {
        let name = target.name();
        let script = "scripts/peers";
        match self.peers.why_not_buildable(&name) {
            None => format!("skipped {name}: not built; add it with: {script} build {name}"),
            Some(reason) => {
                format!(
                    "skipped {name}: {reason}; then add it with: {script} install && {script} build {name}"
                )
            }
        }
    }

    /// What starts `target` on a free loopback port (it prints `listening
    /// on http://ADDR`), with `args` after its own, for the launcher
    /// ([`super::launch`]); `None` for a running service.
    pub fn spec(&self, target: &Target, args: &[String]) -> Option<Spec> {
        match target {
            Target::Blocklab(model) => {
                let mut own = vec!["serve".to_string(), "--listen".to_string(), "127.0.0.1:0".to_string()];
                if let Some(model) = model {
                    own.extend(["--model".to_string(), model.name().to_string()]);
                }
                Some(Spec::program(&self.exe, own.into_iter().chain(args.iter().cloned())))
            }
            Target::Peer(peer) => Some(self.peer_spec(peer, args)),
            Target::Url(_) => None,
        }
    }

    /// What starts any peer (a server, a database, a link) on a free
    /// loopback port: `scripts/peers run NAME --listen 127.0.0.1:0`, `args`
    /// after its own.
    pub fn peer_spec(&self, peer: &Peer, args: &[String]) -> Spec {
        Spec::peer(&self.peers, peer, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::launch::command_line;

    fn targets() -> Targets {
        Targets::of_this_checkout(PathBuf::from("/bin/blocklab")).unwrap()
    }

    #[test]
    fn a_study_finds_its_targets_by_name() {
        let targets = targets();
        let own: Vec<Target> = Model::ALL.into_iter().map(Target::model).collect();
        assert_eq!(targets.named("lean", &own, &["/delay"], "target").unwrap(), Target::model(Model::Lean));
        let spring = targets.named("spring-web", &own, &["/delay"], "target").unwrap();
        assert!(spring.is_jvm() && spring.serves("/delay"));
        assert!(targets.named("go-nethttp", &own, &["/delay"], "target").unwrap().is_go());
        // Play serves study 1's endpoints, not /delay.
        let err = targets.named("play", &own, &["/delay"], "target").unwrap_err();
        assert!(err.starts_with("unknown target 'play' (reactive, lean, pool, thread, "), "{err}");
        let play = targets.named("play", &[Target::Blocklab(None)], &["/getDataAsync"], "target").unwrap();
        assert!(play.serves("/getDataAkka") && !play.serves("/getDataSpawnBlocking"));
        assert!(targets.database("neo4j").is_some() && targets.database("play").is_none());
        assert!(targets.link("toxiproxy").is_some() && targets.link("neo4j").is_none());
    }

    #[test]
    fn each_managed_target_has_a_command_and_a_url_has_none() {
        let targets = targets();
        let lean = targets.spec(&Target::model(Model::Lean), &["--nodes".into(), "100".into()]);
        assert_eq!(
            command_line(&lean.unwrap().pinned(Some("0")).command()),
            "taskset -c 0 /bin/blocklab serve --listen 127.0.0.1:0 --model lean --nodes 100"
        );
        let play = targets.named("play", &[], &["/test"], "target").unwrap();
        let command = targets.spec(&play, &[]).unwrap().command();
        assert!(command.get_program().to_string_lossy().ends_with("scripts/peers"));
        assert!(command_line(&command).ends_with("scripts/peers run play --listen 127.0.0.1:0"));
        let url = Target::url("http://127.0.0.1:8080/delay?ms=10").unwrap();
        assert!(targets.spec(&url, &[]).is_none());
        assert!(url.serves("/delay") && !url.serves("/test"));
        assert_eq!(url.name(), "http://127.0.0.1:8080/delay?ms=10");
        assert!(Target::url("https://x/").unwrap_err().contains("http://HOST:PORT/PATH"));
    }
}
