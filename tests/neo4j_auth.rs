//! A Neo4j with authentication on, and a password that stays in blocklab's
//! own process: the test starts one (`NEO4J_AUTH=USER/PASSWORD
//! scripts/neo4j start PORT`, a user other than Neo4j's default), shows that
//! it refuses a client without credentials, then runs `blocklab bench --db
//! bolt://USER:PASSWORD@… --target blocklab,play` and `blocklab peers check
//! peers/python-neo4j --db bolt://USER:PASSWORD@…` on it. Both must answer
//! their reads, which they can only do with the credentials; and the
//! password (as typed, or percent-encoded as in the URL) must appear in no
//! file the bench wrote, no failure text, no output of either command, no
//! log or file of the database, and no `/proc/PID/cmdline` of any process
//! but blocklab's own (given the URL by the test), sampled every 20 ms
//! while the commands ran. The peers themselves refuse a
//! `--db` that carries credentials, in one line that does not quote them.
//!
//! Needs Java, Maven and the peers built (`scripts/peers build neo4j play
//! python-neo4j neo4j-ceiling`; scripts/test builds them): without them the
//! test fails, it never skips.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

const NODES: u64 = 300;
const USER: &str = "bench-reader";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A password no other process on the machine holds, with characters a URL
/// must percent-encode (`#`, `@`, `/`, a space), so that a leak of either
/// form is caught.
fn password() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("pw#{}@{nanos:x}/ x", std::process::id())
}

/// The password as it is typed and as it is written into a URL.
fn forms(password: &str) -> [String; 2] {
    let encoded = url::form_urlencoded::byte_serialize(password.as_bytes()).collect::<String>();
    // form encoding writes a space as '+'; a URL's user-info as %20.
    [password.to_string(), encoded.replace('+', "%20")]
}

fn holds(bytes: &[u8], forms: &[String]) -> bool {
    forms.iter().any(|f| bytes.windows(f.len()).any(|w| w == f.as_bytes()))
}

/// The Neo4j this test started; stopped and its store deleted on drop.
struct AuthNeo4j {
    port: u16,
}

impl AuthNeo4j {
    /// Starts one with authentication on, `USER`'s password `password`, on
    /// a free loopback port; `join` waits until it is up. It starts on a
    /// thread of its own: a JVM's start is most of the test's time, and the
    /// checks that need no database run meanwhile.
    fn start(password: &str) -> (AuthNeo4j, std::thread::JoinHandle<()>) {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let auth = format!("{USER}/{password}");
        let starting = std::thread::spawn(move || {
            let started = common::output_within(
                Command::new(repo().join("scripts/neo4j"))
                    .args(["start", &port.to_string()])
                    .env("NEO4J_AUTH", auth)
                    .stdin(Stdio::null()),
                Duration::from_secs(150),
            );
            assert!(
                started.status.success(),
                "scripts/neo4j start: {}",
                String::from_utf8_lossy(&started.stderr)
            );
        });
        (AuthNeo4j { port }, starting)
    }

    /// Its folder: the launcher's stdout and log, the store with Neo4j's own logs.
    fn folder(&self) -> PathBuf {
        repo().join(format!(".local/neo4j/{}", self.port))
    }
}

impl Drop for AuthNeo4j {
    fn drop(&mut self) {
        // SIGKILL, then its store deleted: a clean shutdown would only cost time.
        for action in ["kill", "wipe"] {
            let _ = Command::new(repo().join("scripts/neo4j"))
                .args([action, &self.port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// What the /proc sampler saw.
#[derive(Default)]
struct Seen {
    /// Processes whose command line held the password: pid -> program.
    leaks: BTreeMap<u32, String>,
    /// Processes given this database by `--db` (the peers): pid -> whether
    /// NEO4J_PASSWORD in their environment was the password.
    peers: BTreeMap<u32, bool>,
}

/// The command line of `program args` as /proc/PID/cmdline holds it.
fn cmdline_of(program: &str, args: &[String]) -> Vec<u8> {
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .flat_map(|a| a.bytes().chain([0]))
        .collect()
}

/// Every process's command line, every 20 ms until `stop`, but those in
/// `own`: blocklab as the test started it, which holds the URL it was
/// given, and the copies of it that it forks a moment before each exec
/// (until the exec, a child's cmdline is its parent's). What it starts
/// must not hold the password.
fn sample_proc(
    forms: [String; 2],
    password: String,
    db_arg: String,
    own: Vec<Vec<u8>>,
    stop: Arc<AtomicBool>,
) -> Seen {
    let mut seen = Seen::default();
    let wanted = format!("NEO4J_PASSWORD={password}");
    while !stop.load(Relaxed) {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
            if own.contains(&cmdline) {
                continue;
            }
            let program =
                || String::from_utf8_lossy(cmdline.split(|b| *b == 0).next().unwrap_or(&[])).into_owned();
            if holds(&cmdline, &forms) {
                seen.leaks.insert(pid, program());
            }
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            if args.windows(2).any(|w| w[0] == b"--db" && w[1] == db_arg.as_bytes()) {
                let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
                let has = environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes());
                seen.peers.entry(pid).and_modify(|h| *h |= has).or_insert(has);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}

/// Every file under `dir` (recursively) that holds the password.
fn files_holding(dir: &Path, forms: &[String]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                folders.push(path);
            } else if std::fs::read(&path).is_ok_and(|bytes| holds(&bytes, forms)) {
                found.push(path);
            }
        }
    }
    found
}

fn assert_peers_built() {
    for name in ["neo4j", "play", "python-neo4j", "neo4j-ceiling"] {
        let check = Command::new(repo().join("scripts/peers")).args(["check", name]).output().unwrap();
        assert!(
            check.status.success(),
            "peers/{name} is not built from its sources: scripts/peers build neo4j play python-neo4j neo4j-ceiling"
        );
    }
}

#[test]
fn a_password_for_an_authenticated_neo4j_stays_in_blocklabs_own_process() {
    assert_peers_built();
    let started = std::time::Instant::now();
    let phase = |what: &str| eprintln!("neo4j_auth: {what} at {:.1} s", started.elapsed().as_secs_f64());
    let password = password();
    let forms = forms(&password);
    let (neo4j, starting) = AuthNeo4j::start(&password);
    let bare = format!("bolt://127.0.0.1:{}", neo4j.port);
    let url = format!("bolt://{USER}:{}@127.0.0.1:{}", forms[1], neo4j.port);

    // Each peer refuses a --db that carries credentials, in one line without them.
    for peer in ["play", "python-neo4j", "neo4j-ceiling"] {
        let refused = common::output_within(
            Command::new(repo().join("scripts/peers")).args(["run", peer, "--db", &url]).stdin(Stdio::null()),
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{peer}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{peer}: {stderr}");
        assert!(
            stderr.contains("NEO4J_USER and NEO4J_PASSWORD") && stderr.contains("bolt://***@"),
            "{peer}: {stderr}"
        );
        assert!(
            !holds(&refused.stderr, &forms) && !holds(&refused.stdout, &forms),
            "{peer} printed the password"
        );
    }
    phase("the peers refused");
    starting.join().expect("Neo4j started");
    phase("Neo4j up");

    // Authentication is on: without credentials the database refuses; with them it is seeded.
    let seed = |db: &str| {
        common::output_within(
            common::blocklab()
                .args(["seed", "--nodes", &NODES.to_string()])
                .env("BLOCKLAB_DB", db)
                .env_remove("NEO4J_USER")
                .env_remove("NEO4J_PASSWORD"),
            Duration::from_secs(120),
        )
    };
    let refused = seed(&bare);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("authentication failed"), "{stderr}");
    let seeded = seed(&url);
    assert!(seeded.status.success(), "{}", String::from_utf8_lossy(&seeded.stderr));

    phase("seeded");
    let out = std::env::temp_dir().join(format!("blocklab-neo4j-auth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let nodes = NODES.to_string();
    let bench_args =
        ["bench", "--db", &url, "--target", "blocklab,play", "--cold", "--apis", "3", "--runs", "1", "-n"]
            .into_iter()
            .chain(["300", "-c", "10", "--nodes", &nodes, "--out", out.to_str().unwrap()])
            .map(String::from)
            .collect::<Vec<_>>();
    let check_args =
        ["peers", "check", "peers/python-neo4j", "--db", &url, "--nodes", &nodes].map(String::from);
    let exe = env!("CARGO_BIN_EXE_blocklab");
    let own = vec![cmdline_of(exe, &bench_args), cmdline_of(exe, &check_args)];
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (forms, password, bare, stop) = (forms.clone(), password.clone(), bare.clone(), stop.clone());
        std::thread::spawn(move || sample_proc(forms, password, bare, own, stop))
    };
    let bench = common::output_within(
        common::blocklab().args(&bench_args).env_remove("NEO4J_USER").env_remove("NEO4J_PASSWORD"),
        Duration::from_secs(300),
    );
    phase("bench done");
    let check = common::output_within(
        common::blocklab()
            .args(&check_args)
            .current_dir(repo())
            .env_remove("NEO4J_USER")
            .env_remove("NEO4J_PASSWORD"),
        Duration::from_secs(300),
    );
    phase("peers check done");
    stop.store(true, Relaxed);
    let seen = sampler.join().unwrap();

    // Rows were answered: every request of each target, and every read of the check.
    let bench_err = String::from_utf8_lossy(&bench.stderr);
    assert_eq!(bench.status.code(), Some(0), "{bench_err}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let answered: Vec<(String, String, u64)> = results["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let completed = t["runs"][0]["completed"].as_u64().unwrap_or(0);
            (t["target"].as_str().unwrap().into(), t["status"].as_str().unwrap().into(), completed)
        })
        .collect();
    let expected = [("blocklab", "ok", 300), ("play", "ok", 300)].map(|(t, s, n)| (t.into(), s.into(), n));
    assert_eq!(answered, expected, "{bench_err}");
    for test in results["tests"].as_array().unwrap() {
        // At least one 200 per target: none without the credentials (a 503
        // each). Not all: on a loaded machine a read can outlast a timeout.
        assert!(test["runs"][0]["ok"].as_u64().unwrap() > 0, "no read answered: {test:#}");
    }
    let check_out = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{check_out}\n{}", String::from_utf8_lossy(&check.stderr));
    assert!(
        check_out.contains("GET /getDataAsync?id=") && check_out.contains("all 10 checks passed"),
        "{check_out}"
    );

    // The password appears nowhere but in blocklab's own process.
    assert!(seen.leaks.is_empty(), "the password was on the command line of: {:?}", seen.leaks);
    assert!(
        seen.peers.len() >= 2,
        "the sampler saw {} processes given --db {bare} (Play's and python-neo4j's at least)",
        seen.peers.len()
    );
    assert!(seen.peers.values().all(|has| *has), "a peer lacked NEO4J_PASSWORD: {:?}", seen.peers);
    for (what, bytes) in [
        ("bench's stdout", &bench.stdout),
        ("bench's stderr", &bench.stderr),
        ("peers check's stdout", &check.stdout),
        ("peers check's stderr", &check.stderr),
    ] {
        assert!(!holds(bytes, &forms), "{what} holds the password");
    }
    let failures: Vec<&serde_json::Value> =
        results["tests"].as_array().unwrap().iter().filter_map(|t| t.get("failure")).collect();
    assert!(failures.iter().all(|f| !holds(f.to_string().as_bytes(), &forms)), "{failures:?}");
    let written = files_holding(&out, &forms);
    assert!(written.is_empty(), "the bench wrote the password into {written:?}");
    let database = files_holding(&neo4j.folder(), &forms);
    assert!(database.is_empty(), "the database's files hold the password: {database:?}");
    let _ = std::fs::remove_dir_all(&out);
}
