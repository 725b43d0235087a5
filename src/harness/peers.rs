//! The peers: everything blocklab measures beside itself that is not Rust
//! (the seeds' own systems, the engines and stacks that stand beside them),
//! one folder each under `peers/`, each described by its `peer.toml`
//! (the contract is `peers/README.md`). The harness reads the manifests and
//! knows no peer by name: a study asks for a peer by the name of its folder,
//! and starts it with `scripts/peers run NAME --listen HOST:PORT`, which
//! prints the `listening on` line every target prints.
//!
//! A user's own peers live anywhere: the folders of `--peers DIR` (given once,
//! at the start of a command: [`add_outside_folders`]) and of
//! `BLOCKLAB_PEER_DIRS` join the checkout's, under the same contract, their
//! builds in the checkout's `.local/peers/`. Every call of `scripts/peers`
//! passes them on in `BLOCKLAB_PEER_DIRS` ([`Peers::script_command`]), so
//! that the script sees the peers the harness sees.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The environment variable that names peer folders outside the checkout,
/// colon-separated (each a peer folder, or a folder of peer folders).
pub const OUTSIDE_FOLDERS_VAR: &str = "BLOCKLAB_PEER_DIRS";

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

pub use super::runtime::Runtime;

/// One peer, as its `peer.toml` describes it. The rules (peers/README.md)
/// are also those of `scripts/peer-manifest`, the reader for bash: every key
/// a one-line string, the five first required, no other key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// The folder's name; the target's name.
    pub name: String,
    /// Server, database, client or link.
    pub kind: PeerKind,
    /// What it runs on.
    pub runtime: Runtime,
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
    /// The Debian packages it needs, space-separated (`scripts/peers install`).
    #[serde(default)]
    pub debian: String,
    /// Other peers' folders its build reads, space-separated (a change there rebuilds it).
    #[serde(default)]
    pub uses: String,
    /// What it serves, space-separated paths (servers only).
    #[serde(default)]
    pub endpoints: String,
    /// The most connections its database client opens (study-1 servers): a
    /// number, then what it is, as the study's outputs name it (`100 (the
    /// neo4j-java-driver's default pool)`).
    #[serde(default)]
    pub db_pool: Option<String>,
    /// The databases it reads (study-1 servers), space-separated: `neo4j`, `postgres`.
    #[serde(default)]
    pub db: String,
    /// The endpoints whose reads something other than its pool caps
    /// (study-1 servers): `PATH N what; PATH pool:N what`, `pool:N` being a
    /// pool of N by default that `--pool` sets (`/getData 1 the one event loop`).
    #[serde(default)]
    pub db_limits: Option<String>,
    /// The folder it was read from (not a key of the manifest).
    #[serde(skip)]
    pub folder: PathBuf,
}

impl Peer {
    /// Every key a manifest may hold, the required ones first (as
    /// `scripts/peer-manifest --keys` prints them).
    pub const KEYS: [&str; 13] = [
        "name",
        "kind",
        "runtime",
        "stands_for",
        "versions",
        "needs",
        "java",
        "debian",
        "uses",
        "endpoints",
        "db_pool",
        "db",
        "db_limits",
    ];

    /// Reads the manifest `text` of the folder called `folder`, by the contract's rules.
    pub fn parse(text: &str, folder: &str) -> Result<Peer, String> {
        let peer: Peer = toml::from_str(text).map_err(|e| match e.span() {
            // The line at fault, which names the key, when the error has one.
            Some(span) if span.start > 0 || span.end < text.len() => {
                let number = text[..span.start].matches('\n').count() + 1;
                let line = text.lines().nth(number - 1).unwrap_or("").trim();
                format!("line {number} `{line}`: {}", e.message())
            }
            _ => e.message().to_string(),
        })?;
        let values = [
            ("name", Some(&peer.name)),
            ("stands_for", Some(&peer.stands_for)),
            ("versions", Some(&peer.versions)),
            ("needs", Some(&peer.needs)),
            ("java", peer.java.as_ref()),
            ("debian", Some(&peer.debian)),
            ("uses", Some(&peer.uses)),
            ("endpoints", Some(&peer.endpoints)),
            ("db_pool", peer.db_pool.as_ref()),
            ("db", Some(&peer.db)),
            ("db_limits", peer.db_limits.as_ref()),
        ];
        if let Some((key, _)) = values.iter().find(|(_, v)| v.is_some_and(|v| v.contains(['\n', '\t']))) {
            return Err(format!("key '{key}' must be a one-line string"));
        }
        if peer.name != folder {
            return Err(format!("key 'name' is '{}', not its folder's name '{folder}'", peer.name));
        }
        Ok(peer)
    }

    /// Reads `dir/peer.toml`; the peer remembers `dir`. The error names the file.
    pub fn read(dir: &Path) -> Result<Peer, String> {
        let manifest = dir.join("peer.toml");
        let text = std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
        let folder = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let name = folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut peer = Peer::parse(&text, &name).map_err(|e| format!("{}: {e}", manifest.display()))?;
        peer.folder = folder;
        Ok(peer)
    }

    /// The most connections its database client opens, when its manifest says (`db_pool`).
    pub fn db_connections(&self) -> Option<u64> {
        self.db_pool.as_deref()?.split_whitespace().next()?.parse().ok()
    }

    /// The most reads `path` holds in flight, what holds them, and whether
    /// that is a connection pool: its manifest's `db_limits` entry (a
    /// `pool:N` one is `pool` when given), else its pool (`pool`, else
    /// `db_pool`'s number). None: neither says.
    pub fn db_limit(&self, path: &str, pool: Option<usize>) -> Option<(usize, String, bool)> {
        let listed = self.db_limits.as_deref().unwrap_or("").split(';').find_map(|entry| {
            let mut words = entry.trim().splitn(3, ' ');
            (words.next()? == path).then_some(())?;
            let count = words.next()?;
            let what = words.next().unwrap_or("").trim().to_string();
            match count.strip_prefix("pool:") {
                Some(default) => Some((pool.or(default.parse().ok())?, what, true)),
                None => Some((count.parse().ok()?, what, false)),
            }
        });
        listed.or_else(|| {
            let n = pool.or(self.db_connections().map(|n| n as usize))?;
            let what = match pool {
                Some(_) => "its driver's pool (--pool)".to_string(),
                None => format!("its driver's pool of {}", self.db_pool.as_deref().unwrap_or("?")),
            };
            Some((n, what, true))
        })
    }

    /// Whether it reads the database called `name` (its manifest's `db`).
    pub fn reads(&self, name: &str) -> bool {
        self.db.split_whitespace().any(|d| d == name)
    }

    /// Whether it serves `path` (e.g. `/delay`).
    pub fn serves(&self, path: &str) -> bool {
        self.endpoints.split_whitespace().any(|e| e == path)
    }

    /// Whether it runs on a JVM.
    pub fn is_jvm(&self) -> bool {
        self.runtime == Runtime::Jvm
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
    /// The folders outside the checkout its peers were also read from.
    pub outside: Vec<PathBuf>,
}

impl Peers {
    /// The peers under `root/peers/`, run by `script`.
    pub fn discover(root: &Path, script: PathBuf) -> Result<Peers, String> {
        Peers::discover_with(root, script, &[])
    }

    /// The peers under `root/peers/` and those of the `outside` folders (each
    /// a peer folder or a folder of them). A name two folders give is an error
    /// that says which and how to part them; the checkout's own folder given
    /// again is no clash.
    pub fn discover_with(root: &Path, script: PathBuf, outside: &[PathBuf]) -> Result<Peers, String> {
        let mut list = read_manifests(&root.join("peers"))?;
        for dir in outside {
            for peer in read_outside(dir)? {
                match list.iter().find(|p| p.name == peer.name) {
                    Some(seen) if same_folder(&seen.folder, &peer.folder) => {}
                    Some(seen) => {
                        return Err(format!(
                            "the peer '{}' of {} clashes with the peer of that name in {}: rename the \
                             folder and its name key",
                            peer.name,
                            peer.folder.display(),
                            seen.folder.display()
                        ));
                    }
                    None => list.push(peer),
                }
            }
        }
        list.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Peers { root: root.to_path_buf(), script, list, outside: outside.to_vec() })
    }

    /// The peers of this checkout: `BLOCKLAB_ROOT` or the source tree this
    /// binary was built from; the script is `BLOCKLAB_PEERS` or its
    /// `scripts/peers`; with the outside folders ([`outside_folders`]).
    pub fn of_this_checkout() -> Result<Peers, String> {
        let root = std::env::var_os("BLOCKLAB_ROOT")
            .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
        let script =
            std::env::var_os("BLOCKLAB_PEERS").map_or_else(|| root.join("scripts/peers"), PathBuf::from);
        Peers::discover_with(&root, script, &outside_folders())
    }

    /// `scripts/peers`, told of the outside folders (`BLOCKLAB_PEER_DIRS`).
    pub fn script_command(&self) -> Command {
        let mut command = Command::new(&self.script);
        self.pass_outside_folders(&mut command);
        command
    }

    /// Tells `command` (a `scripts/peers`, or a wrapper of it such as
    /// `taskset`) of the outside folders.
    pub fn pass_outside_folders<'c>(&self, command: &'c mut Command) -> &'c mut Command {
        if let Some(joined) = self.outside_folders() {
            command.env(OUTSIDE_FOLDERS_VAR, joined);
        }
        command
    }

    /// The outside folders as `BLOCKLAB_PEER_DIRS` takes them (`None`: there are none).
    pub fn outside_folders(&self) -> Option<std::ffi::OsString> {
        std::env::join_paths(&self.outside).ok().filter(|_| !self.outside.is_empty())
    }

    /// Whether `peer` lives outside the checkout (a `--peers` folder's).
    pub fn is_outside(&self, peer: &Peer) -> bool {
        let own = self.root.join("peers");
        let own = own.canonicalize().unwrap_or(own);
        !peer.folder.starts_with(own)
    }

    /// Builds the peers called `names` (`scripts/peers build NAME…`, its
    /// lines on this process's stderr); the error says which failed.
    pub fn build(&self, names: &[&str]) -> Result<(), String> {
        if names.is_empty() {
            return Ok(());
        }
        let status = self
            .script_command()
            .arg("build")
            .args(names)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run {}: {e}", self.script.display()))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("the build of {} failed ({status}): see the lines above", names.join(" ")))
        }
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
        self.script_command()
            .args(["check", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Why `name` cannot be built on this machine (`scripts/peers why NAME`:
    /// a missing command, a JDK too old, a Debian package), `None` when it can.
    pub fn why_not_buildable(&self, name: &str) -> Option<String> {
        let out = self.script_command().args(["why", name]).stderr(Stdio::null()).output().ok()?;
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
        if entry.path().join("peer.toml").is_file() {
            peers.push(Peer::read(&entry.path())?);
        }
    }
    peers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(peers)
}

/// The peers of a folder outside the checkout: the folder itself when it
/// holds a `peer.toml`, else each of its folders that does. Their names
/// become folder names under `.local/peers/`: lower-case letters, digits and
/// dashes, as `scripts/peers` takes them.
pub fn read_outside(dir: &Path) -> Result<Vec<Peer>, String> {
    if !dir.is_dir() {
        return Err(format!(
            "{}: no such folder (--peers takes a peer folder or a folder of them)",
            dir.display()
        ));
    }
    let peers = if dir.join("peer.toml").is_file() { vec![Peer::read(dir)?] } else { read_manifests(dir)? };
    if peers.is_empty() {
        return Err(format!(
            "{} holds no peer.toml, nor folders that do (a peer folder holds peer.toml, build, run and \
             README.md: see peers/README.md)",
            dir.display()
        ));
    }
    if let Some(bad) = peers.iter().find(|p| !is_peer_name(&p.name)) {
        return Err(format!(
            "{}: the name '{}' must be lower-case letters, digits and dashes (its folder's name too)",
            bad.folder.display(),
            bad.name
        ));
    }
    Ok(peers)
}

/// Whether `name` can name a peer: `^[a-z0-9][a-z0-9-]*$`.
fn is_peer_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn same_folder(a: &Path, b: &Path) -> bool {
    a.canonicalize().ok().zip(b.canonicalize().ok()).is_some_and(|(a, b)| a == b)
}

/// The `--peers` folders given on this command line, once, at its start.
static OUTSIDE: OnceLock<Vec<PathBuf>> = OnceLock::new();

/// Adds `dirs` (the command line's `--peers`) to the outside folders every
/// later discovery reads ([`outside_folders`]). Called once, at the start of
/// a command; a second call is an error.
pub fn add_outside_folders(dirs: &[PathBuf]) -> Result<(), String> {
    let absolute = dirs.iter().map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone())).collect();
    OUTSIDE.set(absolute).map_err(|_| "the --peers folders are already set".to_string())
}

/// The peer folders outside the checkout: `BLOCKLAB_PEER_DIRS`'s, then the
/// `--peers` folders, each once.
pub fn outside_folders() -> Vec<PathBuf> {
    let from_env = std::env::var_os(OUTSIDE_FOLDERS_VAR).unwrap_or_default();
    let mut folders: Vec<PathBuf> = std::env::split_paths(&from_env)
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| std::path::absolute(&p).unwrap_or(p))
        .collect();
    for dir in OUTSIDE.get().into_iter().flatten() {
        if !folders.contains(dir) {
            folders.push(dir.clone());
        }
    }
    folders
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
            "name = \"web\"\nkind = \"server\"\nruntime = \"jvm\"\nstands_for = \"a server\"\n\
             versions = \"1.0\"\nneeds = \"java mvn\"\njava = \"17\"\nendpoints = \"/test /delay\"\n",
        )
        .unwrap();
        let peers = read_manifests(&dir).unwrap();
        assert_eq!(peers.len(), 1);
        let web = &peers[0];
        assert_eq!((web.name.as_str(), web.kind, web.runtime), ("web", PeerKind::Server, Runtime::Jvm));
        assert!(web.serves("/delay") && !web.serves("/getData") && web.is_jvm());
        let good =
            "name = \"web\"\nkind = \"link\"\nruntime = \"go\"\nstands_for = \"x\"\nversions = \"1\"\n";
        assert_eq!(Peer::parse(good, "web").unwrap().kind, PeerKind::Link);
        for (bad, says) in [
            (good.replace("\"web\"", "\"other\""), "not its folder's name"),
            (format!("{good}port = \"80\"\n"), "unknown field `port`"),
            (good.replace("runtime = \"go\"\n", ""), "missing field `runtime`"),
            (good.replace("\"go\"", "\"perl\""), "unknown variant `perl`"),
            (format!("{good}needs = \"a\\nb\"\n"), "key 'needs' must be a one-line string"),
            (format!("{good}java = 17\n"), "invalid type"),
        ] {
            let err = Peer::parse(&bad, "web").unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        std::fs::write(dir.join("web/peer.toml"), good.replace("\"web\"", "\"other\"")).unwrap();
        let err = read_manifests(&dir).unwrap_err();
        assert!(err.contains("web/peer.toml: key 'name'"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn outside_folders_join_the_checkouts_and_a_clash_is_refused() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let script = root.join("scripts/peers");
        let dir = std::env::temp_dir().join(format!("blocklab-outside-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let manifest = |name: &str| {
            format!(
                "name = \"{name}\"\nkind = \"server\"\nruntime = \"python\"\nstands_for = \"x\"\n\
                 versions = \"1\"\nendpoints = \"/test /delay\"\n"
            )
        };
        for name in ["mine", "theirs", "node", "Bad_Name"] {
            std::fs::create_dir_all(dir.join("many").join(name)).unwrap();
        }
        std::fs::write(dir.join("many/mine/peer.toml"), manifest("mine")).unwrap();
        std::fs::write(dir.join("many/theirs/peer.toml"), manifest("theirs")).unwrap();
        // One peer folder, or a folder of them; the checkout's own folder given again is no clash.
        let peers =
            Peers::discover_with(root, script.clone(), &[dir.join("many/mine"), root.join("peers/node")])
                .unwrap();
        let mine = peers.get("mine").unwrap();
        assert!(peers.is_outside(mine) && !peers.is_outside(peers.get("node").unwrap()));
        assert_eq!(peers.servers_of("/delay").filter(|p| p.name == "mine").count(), 1);
        let both = Peers::discover_with(root, script.clone(), &[dir.join("many")]).unwrap();
        assert!(both.get("mine").is_some() && both.get("theirs").is_some());
        let command = both.script_command();
        let passed: Vec<_> = command.get_envs().filter(|(k, _)| *k == OUTSIDE_FOLDERS_VAR).collect();
        assert_eq!(passed, [(OUTSIDE_FOLDERS_VAR.as_ref(), Some(dir.join("many").as_os_str()))]);
        // A name the checkout has, a folder that holds no peer, a bad name, no folder.
        std::fs::write(dir.join("many/node/peer.toml"), manifest("node")).unwrap();
        let err = Peers::discover_with(root, script.clone(), &[dir.join("many")]).unwrap_err();
        assert!(
            err.contains("the peer 'node' of ") && err.contains("clashes") && err.contains("rename"),
            "{err}"
        );
        for (folder, says) in
            [(dir.join("many/Bad_Name"), "holds no peer.toml"), (dir.join("nowhere"), "no such folder")]
        {
            let err = Peers::discover_with(root, script.clone(), &[folder]).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
        std::fs::write(dir.join("many/Bad_Name/peer.toml"), manifest("Bad_Name")).unwrap();
        let err = Peers::discover_with(root, script, &[dir.join("many/Bad_Name")]).unwrap_err();
        assert!(err.contains("lower-case letters, digits and dashes"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_runtime_with_a_heap_of_its_own_says_so() {
        assert!(Runtime::Jvm.has_heap() && Runtime::Node.has_heap());
        assert!(!Runtime::Go.has_heap() && !Runtime::Python.has_heap() && !Runtime::Native.has_heap());
        assert!(
            Runtime::Jvm.needs_warm_up() && !Runtime::Node.needs_warm_up() && !Runtime::Go.needs_warm_up()
        );
    }

    #[test]
    fn the_checkouts_peers_follow_the_contract() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers");
        let peers = read_manifests(&dir).unwrap();
        assert!(!peers.is_empty());
        for p in &peers {
            assert!(!p.stands_for.is_empty() && !p.versions.is_empty(), "{}", p.name);
            for file in ["README.md", "build", "run"] {
                assert!(dir.join(&p.name).join(file).is_file(), "peers/{} has no {file}", p.name);
            }
            if p.kind == PeerKind::Server {
                assert!(p.serves("/test"), "{} does not serve /test", p.name);
            }
        }
    }
}
