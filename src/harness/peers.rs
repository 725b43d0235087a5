//! The peers: everything blocklab measures beside itself that is not Rust
//! (the seeds' own systems, the engines and stacks that stand beside them),
//! one folder each under `peers/`, each described by its `peer.toml`
//! (the contract is `peers/README.md`). The harness reads the manifests and
//! knows no peer by name: a study asks for a peer by the name of its folder,
//! and starts it with `scripts/peers run NAME --listen HOST:PORT`, which
//! prints the `listening on` line every target prints.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What a peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerKind {
    /// An HTTP server: a target of the studies.
    Server,
    /// A database the harness starts.
    Database,
    /// A load client.
    Client,
    /// A network link the harness puts between a server and its database
    /// (a TCP proxy that adds latency and faults).
    Link,
}

/// The runtime a peer runs on: what decides how its memory is capped (a JVM
/// gets a heap limit, Go a soft limit under its cgroup cap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// A Java virtual machine (`java` in its needs, or a Java release).
    Jvm,
    /// A Go binary (`go` in its needs).
    Go,
    /// Anything else: capped as a whole process only.
    Native,
}

/// One peer, as its `peer.toml` describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Peer {
    /// The folder's name; the target's name.
    pub name: String,
    /// Server, database or client.
    pub kind: PeerKind,
    /// What it stands for, in one line.
    pub stands_for: String,
    /// The versions of what it is built from.
    pub versions: String,
    /// The commands its build and run need, space-separated.
    #[serde(default)]
    pub needs: String,
    /// The Java release it needs, if it is a JVM peer.
    #[serde(default)]
    pub java: Option<String>,
    /// What it serves, space-separated paths (servers only).
    #[serde(default)]
    pub endpoints: String,
}

impl Peer {
    /// Whether it serves `path` (e.g. `/delay`).
    pub fn serves(&self, path: &str) -> bool {
        self.endpoints.split_whitespace().any(|e| e == path)
    }

    /// Whether it runs on a JVM.
    pub fn is_jvm(&self) -> bool {
        self.java.is_some() || self.needs.split_whitespace().any(|n| n == "java")
    }

    /// The runtime it runs on, as far as memory settings go.
    pub fn runtime(&self) -> Runtime {
        if self.is_jvm() {
            Runtime::Jvm
        } else if self.needs.split_whitespace().any(|n| n == "go") {
            Runtime::Go
        } else {
            Runtime::Native
        }
    }

    /// The commands of `needs` that are not on this machine's `PATH`.
    pub fn missing(&self) -> Vec<String> {
        self.needs.split_whitespace().filter(|n| !on_path(n)).map(String::from).collect()
    }
}

/// The peers of one checkout, and the script that builds and runs them.
#[derive(Debug, Clone)]
pub struct Peers {
    /// The checkout (its `peers/` and `scripts/`).
    pub root: PathBuf,
    /// `scripts/peers`.
    pub script: PathBuf,
    /// Every peer, by name.
    pub list: Vec<Peer>,
}

impl Peers {
    /// The peers under `root/peers/`, run by `script`.
    pub fn discover(root: &Path, script: PathBuf) -> Result<Peers, String> {
        Ok(Peers { root: root.to_path_buf(), script, list: read_manifests(&root.join("peers"))? })
    }

    /// The peers of this checkout: `BLOCKLAB_ROOT` or the source tree this
    /// binary was built from; the script is `BLOCKLAB_PEERS` or its `scripts/peers`.
    pub fn of_this_checkout() -> Result<Peers, String> {
        let root = std::env::var_os("BLOCKLAB_ROOT")
            .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
        let script =
            std::env::var_os("BLOCKLAB_PEERS").map_or_else(|| root.join("scripts/peers"), PathBuf::from);
        Peers::discover(&root, script)
    }

    /// The peer called `name`.
    pub fn get(&self, name: &str) -> Option<&Peer> {
        self.list.iter().find(|p| p.name == name)
    }

    /// The servers that serve `path`, by name.
    pub fn servers_of(&self, path: &str) -> impl Iterator<Item = &Peer> {
        self.list.iter().filter(move |p| p.kind == PeerKind::Server && p.serves(path))
    }

    /// Whether `name` is built (`scripts/peers check NAME`).
    pub fn is_built(&self, name: &str) -> bool {
        Command::new(&self.script)
            .args(["check", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Why `name` cannot be built on this machine (`scripts/peers why NAME`:
    /// a missing command, a JDK too old, a Debian package), `None` when it can.
    pub fn why_not_buildable(&self, name: &str) -> Option<String> {
        let out = Command::new(&self.script).args(["why", name]).stderr(Stdio::null()).output().ok()?;
        let reason = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (!reason.is_empty()).then_some(reason)
    }
}

/// Every `DIR/*/peer.toml`, sorted by name; a folder without one is not a peer.
pub fn read_manifests(dir: &Path) -> Result<Vec<Peer>, String> {
    let mut peers = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(peers),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    for entry in entries.flatten() {
        let manifest = entry.path().join("peer.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let peer: Peer = toml::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
        if peer.name != entry.file_name().to_string_lossy() {
            return Err(format!("{}: name = \"{}\" is not its folder's name", manifest.display(), peer.name));
        }
        peers.push(peer);
    }
    peers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(peers)
}

/// Whether `command` is an executable on `PATH`.
pub fn on_path(command: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(command)).is_ok_and(|m| {
                m.is_file() && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_and_a_bad_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("blocklab-peers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("web")).unwrap();
        std::fs::create_dir_all(dir.join("not-a-peer")).unwrap();
        std::fs::write(
            dir.join("web/peer.toml"),
            "name = \"web\"\nkind = \"server\"\nstands_for = \"a server\"\nversions = \"1.0\"\n\
             needs = \"java mvn\"\njava = \"17\"\nendpoints = \"/test /delay\"\n",
        )
        .unwrap();
        let peers = read_manifests(&dir).unwrap();
        assert_eq!(peers.len(), 1);
        let web = &peers[0];
        assert_eq!((web.name.as_str(), web.kind), ("web", PeerKind::Server));
        assert!(web.serves("/delay") && !web.serves("/getData") && web.is_jvm());
        std::fs::write(dir.join("web/peer.toml"), "name = \"other\"\nkind = \"server\"\n").unwrap();
        assert!(read_manifests(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_checkouts_peers_follow_the_contract() {
        let peers = read_manifests(&Path::new(env!("CARGO_MANIFEST_DIR")).join("peers")).unwrap();
        assert!(!peers.is_empty());
        for p in &peers {
            assert!(!p.stands_for.is_empty() && !p.versions.is_empty(), "{}", p.name);
            if p.kind == PeerKind::Server {
                assert!(p.serves("/test"), "{} does not serve /test", p.name);
            }
        }
    }
}
