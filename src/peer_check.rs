//! `blocklab peers check DIR`: a peer folder held to the contract of
//! `peers/README.md` before a study runs it. The folder is read (its
//! `peer.toml` by the harness's one reader), built into the checkout's
//! `.local/peers/` by `scripts/peers`, started as every study starts a peer,
//! and asked what a study will ask: its ready line, `/test`, and `/delay`
//! (a study-2 peer) or one node of a seeded Neo4j per study-1 endpoint (a
//! study-1 peer); then it must stop on SIGTERM. Each check is a line; a
//! failed one says what is wrong and how to fix it. Exit status 1 when one
//! failed, 2 for a usage error (no such folder, a name that clashes).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};

use crate::db::DbUrl;
use crate::failure::Failure;
use crate::flags::parse_positive_duration;
use crate::harness::database::{Engine, ManagedDatabase};
use crate::harness::get::{get, same_node};
use crate::harness::launch::Spec;
use crate::harness::peers::{Peer, PeerKind, Peers, outside_folders};
use crate::harness::process::ServerProcess;
use crate::harness::target::Targets;
use crate::server::Endpoint;

/// What `blocklab peers --help` shows after the commands.
pub const PEERS_EXAMPLES: &str = "\
A peer is a folder: peer.toml (what it is), build, run and README.md (peers/README.md has
the contract and a walk-through). Your own live anywhere: `--peers DIR` (or
BLOCKLAB_PEER_DIRS=DIR:DIR) adds them to sweep, bench and studies beside the checkout's.

Examples:
  blocklab peers check ~/my-server                # a study-2 server
  blocklab peers check ~/my-api --db neo4j --nodes 1000   # a study-1 server, on a Neo4j it starts
  blocklab sweep --peers ~/my-server --targets my-server,reactive --levels 100,1000";

/// What `blocklab peers check --help` shows after the flags.
pub const CHECK_EXAMPLES: &str = "\
Builds DIR into .local/peers/NAME/ (scripts/peers build), starts it on a free loopback port
(scripts/peers run NAME --listen 127.0.0.1:0) and checks, as the studies will use it:
  its ready line (`listening on http://HOST:PORT` on stdout), GET /test (200 `works`);
  study 2 (/delay in endpoints): /delay?ms=100 answers {\"success\":true} no sooner than
  100 ms, a bad ms (abc, -1, 600001) is a 400;
  study 1 (/getData… in endpoints): started with --db bolt://HOST:PORT or postgres://USER@HOST:PORT/DB
  (a database its peer.toml's db lists) --nodes N (a user and password go to its environment,
  a Neo4j's as NEO4J_USER and NEO4J_PASSWORD, a PostgreSQL's as PGUSER and PGPASSWORD, never
  on its command line), each endpoint it lists answers the node ?id= asks for, an id outside 1..N
  is a 400;
  then it stops within --stop-within of SIGTERM.
Exit status: 0 when every check passed, 1 when one failed, 2 for a usage error.

Examples:
  blocklab peers check ~/my-server
  blocklab peers check ~/my-server --ready-within 2m     # a JVM that takes its time to start
  blocklab peers check peers/python-neo4j --db neo4j --nodes 1000   # starts, seeds and wipes a Neo4j
  blocklab peers check ~/my-api --db bolt://127.0.0.1:7687 --nodes 10000   # your Neo4j, seeded
  NEO4J_PASSWORD=… blocklab peers check ~/my-api --db bolt://127.0.0.1:7687   # with authentication on
  blocklab peers check ~/my-pg-api --db postgres --nodes 1000   # starts, seeds and wipes a PostgreSQL";

/// Flags of `blocklab peers`.
#[derive(Debug, Args)]
pub struct PeersArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: PeersAction,
}

/// The `peers` commands.
#[derive(Debug, Subcommand)]
pub enum PeersAction {
    /// Build a peer folder, start it and check it against the contract of a study-1 or study-2 server.
    #[command(after_help = CHECK_EXAMPLES)]
    Check(CheckArgs),
}

/// Flags of `blocklab peers check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The peer folder (peer.toml, build, run, README.md), anywhere.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// A study-1 peer's database: `neo4j` or `postgres` (one the check starts, seeds with --nodes
    /// and wipes: scripts/neo4j, scripts/postgres, as bench does), or one of yours, seeded
    /// (`blocklab seed --db URL --nodes N`): bolt://[USER:PASSWORD@]HOST:PORT (the peer gets the
    /// credentials as NEO4J_USER and NEO4J_PASSWORD; without, it inherits those variables) or
    /// postgres://[USER@]HOST:PORT/DB. The peer's manifest must list it in `db`.
    #[arg(long, value_name = "neo4j|postgres|URL")]
    pub db: Option<String>,

    /// The nodes the database holds (ids 1..N), passed to a study-1 peer as --nodes.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000), value_name = "N")]
    pub nodes: u64,

    /// How long the peer may take to print its ready line.
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub ready_within: Duration,

    /// How long the peer may take to exit after SIGTERM.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration, value_name = "DUR")]
    pub stop_within: Duration,
}

/// `blocklab peers …`.
pub fn peers(args: &PeersArgs) -> Result<(), Failure> {
    match &args.action {
        PeersAction::Check(check) => self::check(check),
    }
}

/// The checks passed and failed so far, each printed as it is made.
#[derive(Default)]
struct Verdicts {
    passed: usize,
    failed: usize,
}

impl Verdicts {
    fn ok(&mut self, what: &str) {
        self.passed += 1;
        println!("  ok    {what}");
    }

    /// A failed check: what is wrong, then how to fix it.
    fn fail(&mut self, what: &str, fix: &str) {
        self.failed += 1;
        println!("  FAIL  {what}\n        fix: {fix}");
    }

    /// The command's outcome: `Err` naming the count when a check failed.
    fn outcome(&self, name: &str) -> Result<(), Failure> {
        let total = self.passed + self.failed;
        if self.failed == 0 {
            println!("{name}: all {total} checks passed");
            Ok(())
        } else {
            Err(Failure::Failed(anyhow::anyhow!("{name}: {} of {total} checks failed", self.failed)))
        }
    }
}

/// What a study asks of the peer: study 2's `/delay`, study 1's reads, or both.
struct Studies {
    delay: bool,
    reads: Vec<&'static str>,
}

/// `blocklab peers check DIR`.
pub fn check(args: &CheckArgs) -> Result<(), Failure> {
    let dir = &args.dir;
    if !dir.is_dir() {
        return Err(Failure::Usage(format!(
            "{}: no such folder (peers check takes a peer folder)",
            dir.display()
        )));
    }
    println!("peers check {}", dir.display());
    let mut verdicts = Verdicts::default();
    let label =
        dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
    let Some((peer, studies)) = read_manifest(dir, args, &mut verdicts) else {
        return verdicts.outcome(&label);
    };
    let mut outside = outside_folders();
    outside.push(peer.folder.clone());
    let peers = Peers::of_this_checkout()
        .and_then(|own| Peers::discover_with(&own.root, own.script, &outside))
        .map_err(Failure::Usage)?;
    let out = peers.root.join(".local/peers").join(&peer.name);
    if let Err(e) = peers.build(&[&peer.name]) {
        verdicts.fail(
            &format!("build: {e}"),
            &format!(
                "`build OUT` must build into OUT ({}) and exit 0; try it alone: BLOCKLAB_PEER_DIRS={} \
                 scripts/peers build {}",
                out.display(),
                peer.folder.display(),
                peer.name
            ),
        );
        return verdicts.outcome(&peer.name);
    }
    verdicts.ok(&format!("build: into {}", out.display()));
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("blocklab"));
    let targets = Targets { exe, peers };
    // A managed database lives until the check ends (dropped: stopped and wiped).
    let mut managed = None;
    let database = match &args.db {
        Some(db) if !studies.reads.is_empty() => {
            let url = if let Some(engine) = Engine::parse(db) {
                match managed_database(engine, &targets, args.nodes) {
                    Ok(started) => {
                        verdicts.ok(&format!(
                            "database: {} on {}, seeded with {} nodes",
                            started.describe(),
                            started.url(),
                            args.nodes
                        ));
                        managed.insert(started).url().to_string()
                    }
                    Err(e) => {
                        let hint = match engine {
                            Engine::Neo4j => {
                                "build it (scripts/peers build neo4j, Java 17 and Maven), or give your own \
                                 seeded Neo4j: --db bolt://HOST:PORT"
                            }
                            Engine::Postgres => {
                                "install it (apt-get install postgresql, as root), or give your own seeded \
                                 PostgreSQL: --db postgres://USER@HOST:PORT/DB"
                            }
                        };
                        verdicts.fail(&format!("database: {e}"), hint);
                        return verdicts.outcome(&peer.name);
                    }
                }
            } else {
                db.clone()
            };
            // read_manifest took it as a URL of a database the peer reads; its errors never quote credentials.
            Some(url.parse::<DbUrl>().map_err(|e| Failure::Usage(format!("--db: {e}")))?)
        }
        _ => None,
    };
    // As bench starts it: `--db` without credentials, them in its environment.
    let spec = match &database {
        Some(db) => targets
            .peer_spec(
                &peer,
                &["--db".to_string(), db.to_string(), "--nodes".to_string(), args.nodes.to_string()],
            )
            .database_credentials(db),
        None => targets.peer_spec(&peer, &[]),
    };
    let started = Instant::now();
    let mut server = match crate::harness::launch::server(spec, args.ready_within) {
        Ok(server) => server.process,
        Err(reason) => {
            not_ready(&mut verdicts, &reason, args.ready_within);
            return verdicts.outcome(&peer.name);
        }
    };
    verdicts.ok(&format!(
        "ready: `listening on http://{}` after {:.1} s",
        server.addr(),
        started.elapsed().as_secs_f64()
    ));
    check_test(&mut verdicts, server.addr());
    if studies.delay {
        check_delay(&mut verdicts, server.addr());
    }
    if !studies.reads.is_empty() {
        check_reads(&mut verdicts, server.addr(), &studies.reads, args);
    }
    check_sigterm(&mut verdicts, &mut server, args.stop_within);
    drop(managed);
    verdicts.outcome(&peer.name)
}

/// The connections a checked peer may open at most, beside blocklab's seed.
const CHECK_CONNECTIONS: usize = 200;

/// A database started on a free loopback port (as `bench --db neo4j|postgres`
/// starts it) and seeded with `nodes` nodes by `blocklab seed`.
fn managed_database(engine: Engine, targets: &Targets, nodes: u64) -> Result<ManagedDatabase, String> {
    if engine == Engine::Neo4j && !targets.peers.is_built("neo4j") {
        return Err("peers/neo4j is not built".to_string());
    }
    println!("  ..    starting {engine} (scripts/{}) and seeding {nodes} nodes", engine.name());
    let started = ManagedDatabase::start(engine, targets, None, CHECK_CONNECTIONS)?;
    let seeded = Spec::program(&targets.exe, ["seed".to_string(), "--nodes".to_string(), nodes.to_string()])
        .env("BLOCKLAB_DB", started.url())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .prepare()
        .into_command()
        .output()
        .map_err(|e| format!("cannot run blocklab seed: {e}"))?;
    if !seeded.status.success() {
        return Err(format!(
            "seeding {} failed ({}): {}",
            started.url(),
            seeded.status,
            String::from_utf8_lossy(&seeded.stderr).trim()
        ));
    }
    Ok(started)
}

/// The manifest read and the folder's files checked; `None` when the rest
/// cannot run (each reason already a failed check).
fn read_manifest(dir: &Path, args: &CheckArgs, verdicts: &mut Verdicts) -> Option<(Peer, Studies)> {
    let keys = Peer::KEYS.join(", ");
    if !dir.join("peer.toml").is_file() {
        let name = dir.canonicalize().ok()?.file_name()?.to_string_lossy().into_owned();
        verdicts.fail(
            &format!("no peer.toml in {}", dir.display()),
            &format!(
                "write one (peers/README.md has the contract), e.g. name = \"{name}\", kind = \"server\", \
                 runtime = \"python\", stands_for = \"…\", versions = \"…\", needs = \"python3\", \
                 endpoints = \"/test /delay\""
            ),
        );
        return None;
    }
    let peer = match Peer::read(dir) {
        Ok(peer) => peer,
        Err(e) => {
            verdicts.fail(
                &format!("peer.toml: {e}"),
                &format!("every value a one-line string; the keys are: {keys} (peers/README.md)"),
            );
            return None;
        }
    };
    let mut fine = true;
    if peer.kind != PeerKind::Server {
        verdicts.fail(
            &format!("peer.toml: kind is '{}', not 'server'", word(peer.kind)),
            "peers check checks servers, the targets of the studies: kind = \"server\"",
        );
        fine = false;
    }
    // The endpoints that read a node: the server's own list (their paths are every server's).
    let reads = Endpoint::DATA.into_iter().map(Endpoint::path).filter(|p| peer.serves(p)).collect();
    let studies = Studies { delay: peer.serves("/delay"), reads };
    if !peer.serves("/test") {
        verdicts.fail(
            &format!("peer.toml: endpoints '{}' lacks /test", peer.endpoints),
            "every server answers GET /test with `works` (the studies' liveness check): list it",
        );
        fine = false;
    }
    if !studies.delay && studies.reads.is_empty() {
        verdicts.fail(
            &format!("peer.toml: endpoints '{}' names no study's endpoint", peer.endpoints),
            "list /delay for study 2 (sweep), or study 1's it serves (/getData /getDataAsync …) for bench",
        );
        fine = false;
    }
    for file in ["build", "run"] {
        let path = dir.join(file);
        let executable = std::fs::metadata(&path).is_ok_and(|m| {
            m.is_file() && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
        });
        if !executable {
            verdicts.fail(
                &format!("{} is missing or not executable", path.display()),
                &format!("write it (peers/README.md: `{file} OUT …`) and chmod +x {}", path.display()),
            );
            fine = false;
        }
    }
    let missing = peer.missing();
    if !missing.is_empty() {
        verdicts.fail(
            &format!("needs {} , not on PATH", missing.join(" ")),
            "install them, or correct `needs` in peer.toml",
        );
        fine = false;
    }
    if !studies.reads.is_empty() {
        let engine = args
            .db
            .as_deref()
            .map(|db| Engine::parse(db).or_else(|| db.parse::<DbUrl>().ok().as_ref().and_then(Engine::of)));
        match engine {
            Some(Some(engine)) if peer.reads(engine.name()) => {}
            Some(Some(engine)) => {
                verdicts.fail(
                    &format!(
                        "peer.toml: db '{}' does not name {} ({})",
                        peer.db,
                        engine.name(),
                        if peer.db.is_empty() { "absent" } else { "the databases it reads" }
                    ),
                    "a study-1 peer lists the databases it reads in its manifest's db (neo4j postgres): give --db \
                     one of them, or add the one it reads",
                );
                fine = false;
            }
            Some(None) => {
                verdicts.fail(
                    "--db is neither neo4j, postgres, nor a Neo4j or PostgreSQL URL",
                    "a study-1 peer reads Neo4j or PostgreSQL: --db neo4j or --db postgres (one the check \
                     starts), or --db bolt://[USER:PASSWORD@]HOST:PORT or postgres://USER@HOST:PORT/DB (yours)",
                );
                fine = false;
            }
            None => {
                verdicts.fail(
                    &format!("{} serves study 1's endpoints and no --db was given", peer.name),
                    "give --db neo4j (the check starts, seeds and wipes one), or a seeded Neo4j of yours: \
                     blocklab seed --db bolt://HOST:PORT --nodes N, then blocklab peers check DIR --db \
                     bolt://HOST:PORT --nodes N",
                );
                fine = false;
            }
        }
    }
    if fine {
        let study = match (studies.delay, studies.reads.is_empty()) {
            (true, true) => "study 2".to_string(),
            (false, _) => format!("study 1: {}", studies.reads.join(" ")),
            (true, false) => format!("studies 1 and 2: /delay {}", studies.reads.join(" ")),
        };
        verdicts.ok(&format!("peer.toml: '{}', a server on {} for {study}", peer.name, word(peer.runtime)));
    }
    fine.then_some((peer, studies))
}

/// A manifest value as the manifest writes it (`server`, `python`).
fn word(value: impl serde::Serialize) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

/// Why the peer did not get ready, as a failed check with its fix.
fn not_ready(verdicts: &mut Verdicts, reason: &str, within: Duration) {
    if reason.starts_with("not ready within") {
        verdicts.fail(
            &format!("no ready line within {within:?}: {reason}"),
            "print `listening on http://HOST:PORT` on stdout, flushed (Python: print(..., flush=True)), \
             once the socket accepts, with the real port when --listen gives port 0; a slow start: \
             --ready-within",
        );
    } else {
        verdicts.fail(
            &format!("it exited before its ready line: {reason}"),
            "`run OUT --listen HOST:PORT` must exec the server in the foreground and keep it running; \
             its stderr, above, says why it stopped",
        );
    }
}

fn check_test(verdicts: &mut Verdicts, addr: SocketAddr) {
    match get(addr, "/test", Duration::from_secs(10)) {
        Ok(a) if a.status == 200 && a.body.trim() == "works" => verdicts.ok("GET /test: 200 works"),
        Ok(a) => verdicts.fail(
            &format!("GET /test answered {} `{}`", a.status, shorten(&a.body)),
            "answer GET /test with 200 and the body `works`, doing no I/O",
        ),
        Err(e) => {
            verdicts.fail(&format!("GET /test: {e}"), "serve GET /test on the address of the ready line")
        }
    }
}

fn check_delay(verdicts: &mut Verdicts, addr: SocketAddr) {
    let asked = Duration::from_millis(100);
    match get(addr, "/delay?ms=100", Duration::from_secs(10)) {
        Ok(a) if a.status != 200 || !is_success(&a.body) => verdicts.fail(
            &format!("GET /delay?ms=100 answered {} `{}`", a.status, shorten(&a.body)),
            "answer 200 with {\"success\":true} (application/json) once the wait is over",
        ),
        Ok(a) if a.elapsed < asked => verdicts.fail(
            &format!(
                "GET /delay?ms=100 answered after {:.0} ms, sooner than the 100 ms asked",
                millis(a.elapsed)
            ),
            "wait ms milliseconds before answering, the way your model waits (a sleeping thread, a timer)",
        ),
        Ok(a) => verdicts
            .ok(&format!("GET /delay?ms=100: 200 {{\"success\":true}} after {:.0} ms", millis(a.elapsed))),
        Err(e) => verdicts.fail(&format!("GET /delay?ms=100: {e}"), "serve GET /delay?ms=N (0 to 600000)"),
    }
    let bad: Vec<String> = ["abc", "-1", "600001"]
        .iter()
        .filter_map(|ms| match get(addr, &format!("/delay?ms={ms}"), Duration::from_secs(10)) {
            Ok(a) if a.status == 400 => None,
            Ok(a) => Some(format!("ms={ms} answered {}", a.status)),
            Err(e) => Some(format!("ms={ms}: {e}")),
        })
        .collect();
    if bad.is_empty() {
        verdicts.ok("GET /delay?ms=abc, ms=-1, ms=600001: 400 each");
    } else {
        verdicts.fail(
            &format!("a bad ms is not a 400: {}", bad.join("; ")),
            "answer 400 at once for any ms that is not an integer from 0 to 600000",
        );
    }
}

fn check_reads(verdicts: &mut Verdicts, addr: SocketAddr, paths: &[&str], args: &CheckArgs) {
    // An id the peer cannot guess: from the clock, within 1..=N.
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    for (i, path) in paths.iter().enumerate() {
        let id = 1 + (u64::from(nanos) + i as u64 * 7919) % args.nodes;
        let asked = format!("{path}?id={id}");
        let want = serde_json::to_value(crate::db::content_record(id as i64)).unwrap_or_default();
        match get(addr, &asked, Duration::from_secs(30)) {
            Ok(a) if a.status == 200 => match serde_json::from_str::<serde_json::Value>(&a.body) {
                Ok(got) if same_node(&got, &want) => verdicts.ok(&format!("GET {asked}: node {id}")),
                _ => verdicts.fail(
                    &format!("GET {asked} answered `{}`, not node {id}", shorten(&a.body)),
                    &format!(
                        "answer the node ?id= names as JSON, its properties as blocklab answers them: {want}"
                    ),
                ),
            },
            Ok(a) if a.status == 404 => verdicts.fail(
                &format!("GET {asked} answered 404: node {id} is not in the database"),
                &format!(
                    "seed it: blocklab seed --db URL --nodes {} (and give that --nodes here)",
                    args.nodes
                ),
            ),
            Ok(a) => verdicts.fail(
                &format!("GET {asked} answered {} `{}`", a.status, shorten(&a.body)),
                "read the node from --db (Neo4j: MATCH (n:Content {id: $id}) RETURN n; PostgreSQL: SELECT id, \
                 name, code, mime_type, content_type, body FROM content WHERE id = $1) and answer 200 with its \
                 properties (503 means the database could not be reached or refused the credentials: is --db \
                 right? do you read NEO4J_USER and NEO4J_PASSWORD, or PGUSER and PGPASSWORD?)",
            ),
            Err(e) => {
                verdicts.fail(&format!("GET {asked}: {e}"), "serve each study-1 endpoint peer.toml lists")
            }
        }
    }
    let outside = format!("{}?id={}", paths[0], args.nodes + 1);
    match get(addr, &outside, Duration::from_secs(30)) {
        Ok(a) if a.status == 400 => verdicts.ok(&format!("GET {outside}: 400 (outside 1..{})", args.nodes)),
        Ok(a) => verdicts.fail(
            &format!("GET {outside} answered {}, not 400", a.status),
            "answer 400 with {\"error\":…} for an id that is not an integer from 1 to --nodes",
        ),
        Err(e) => verdicts.fail(&format!("GET {outside}: {e}"), "answer 400 for an id outside 1..N"),
    }
}

fn check_sigterm(verdicts: &mut Verdicts, server: &mut ServerProcess, within: Duration) {
    let pid = server.pid().to_string();
    let started = Instant::now();
    let _ = std::process::Command::new("kill").args(["-TERM", &pid]).status();
    while started.elapsed() < within {
        if server.check_alive().is_err() {
            verdicts.ok(&format!("SIGTERM: exited after {:.1} s", started.elapsed().as_secs_f64()));
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = server.stop(Duration::ZERO);
    verdicts.fail(
        &format!("SIGTERM: still running {within:?} after it (then {ended})"),
        "exit on SIGTERM (Python: the default, or signal.signal(signal.SIGTERM, ...) that exits; a JVM or \
         Node.js: a shutdown hook), and have `run` exec the server so that the signal reaches it",
    );
}

fn is_success(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body).is_ok_and(|v| v == serde_json::json!({"success": true}))
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn shorten(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
