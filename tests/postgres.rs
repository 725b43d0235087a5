//! Against a real PostgreSQL (the project's own, started by `scripts/test`
//! through `scripts/postgres`, which sets `POSTGRES_URL`): seeding, every
//! endpoint through both clients under the two servers of study 1 (`reactive`
//! and `lean`), the execution models kept on a database whose every read
//! takes 50 ms, bad input refused in one line before anything is served, and
//! PostgreSQL killed under load and started again. With `BLOCKLAB_NO_SKIP=1` (scripts/test) a missing
//! server is a failure, not a skip.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blocklab::db::{DbSettings, DbUrl, GraphBackend, PostgresGraph, content_record};
use blocklab::server::{ActorLimits, Endpoint, Model, RunningServer, ServeConfig};
use common::{blocklab, get, get_concurrently, output_within, postgres_url, server_with, try_get};

/// The dataset of the shared cluster: every test here seeds it to this N.
const NODES: u64 = 1000;

/// The two servers of study 1.
const STACKS: [Model; 2] = [Model::Reactive, Model::Lean];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn backend_with(url: &str, settings: DbSettings) -> Arc<dyn GraphBackend> {
    let DbUrl::Postgres(target) = url.parse::<DbUrl>().unwrap() else { panic!("{url} is not postgres://") };
    Arc::new(PostgresGraph::new(target, settings).unwrap())
}

fn backend(url: &str) -> Arc<dyn GraphBackend> {
    backend_with(url, DbSettings { timeout: Duration::from_secs(30), ..DbSettings::default() })
}

/// Seeds `url` to `nodes` rows from a blocking thread; checks the count.
async fn seed(url: &str, nodes: u64) {
    let url = url.to_string();
    let report =
        tokio::task::spawn_blocking(move || backend(&url).seed(nodes, &|_| {}).unwrap()).await.unwrap();
    assert_eq!(report.after, nodes);
}

/// `url` with another database than its own.
fn in_database(url: &str, database: &str) -> String {
    let (server, _) = url.rsplit_once('/').unwrap();
    format!("{server}/{database}")
}

/// Runs `sql` (several statements are one transaction) as the cluster's superuser in `database`.
async fn admin(url: &str, database: &str, sql: &str) {
    let config: tokio_postgres::Config = in_database(url, database).parse().unwrap();
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

fn server(url: &str, model: Model, workers: usize, settings: DbSettings) -> RunningServer {
    let config = ServeConfig {
        nodes: NODES,
        workers,
        model,
        db: url.parse().unwrap(),
        db_settings: settings,
        ..ServeConfig::default()
    };
    server_with(config, backend_with(url, settings))
}

/// Seeds the shared cluster to [`NODES`] twice, once per test binary (the
/// tests run at once, and a seeding drops and creates the table), and
/// returns what the second seeding reported: (rows before, rows after).
async fn seeded(url: &str) -> (u64, u64) {
    static DONE: tokio::sync::OnceCell<(u64, u64)> = tokio::sync::OnceCell::const_new();
    *DONE
        .get_or_init(|| async {
            seed(url, NODES).await;
            let url = url.to_string();
            let again = tokio::task::spawn_blocking(move || backend(&url).seed(NODES, &|_| {}).unwrap());
            let again = again.await.unwrap();
            (again.before, again.after)
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeds_twice_and_every_endpoint_answers_its_row_on_both_servers() {
    let Some(url) = postgres_url() else { return };
    assert_eq!(seeded(&url).await, (NODES, NODES), "seeding twice leaves N rows");
    for model in STACKS {
        let server = server(&url, model, 2, DbSettings::default());
        for endpoint in Endpoint::DATA {
            for id in [1, 77, NODES as i64] {
                let reply = get(server.addr(), &format!("{}?id={id}", endpoint.path())).await;
                assert_eq!(reply.status, 200, "{model} {}: {}", endpoint.path(), reply.body);
                assert_eq!(reply.json(), serde_json::to_value(content_record(id)).unwrap(), "{model}");
            }
            // Past N: refused before any read, on every endpoint.
            let reply = get(server.addr(), &format!("{}?id={}", endpoint.path(), NODES + 1)).await;
            assert_eq!(reply.status, 400, "{model} {}: {}", endpoint.path(), reply.body);
            assert!(reply.body.contains("out of range"), "{}", reply.body);
        }
    }
}

/// A database `blocklab_slow` whose `content` is a view over the seeded rows
/// that sleeps 50 ms in PostgreSQL on every read: a real database with a slow
/// read, under which the execution models show.
async fn slow_database(url: &str) -> String {
    // Two calls: DROP and CREATE DATABASE refuse to run in one (a transaction).
    admin(url, "postgres", "DROP DATABASE IF EXISTS blocklab_slow WITH (FORCE)").await;
    admin(url, "postgres", "CREATE DATABASE blocklab_slow").await;
    let slow = in_database(url, "blocklab_slow");
    seed(&slow, NODES).await;
    admin(
        url,
        "blocklab_slow",
        "ALTER TABLE content RENAME TO content_rows; \
         CREATE VIEW content AS SELECT r.* FROM content_rows r, pg_sleep(0.05)",
    )
    .await;
    slow
}

const LATENCY: Duration = Duration::from_millis(50);
const N: usize = 8;

/// The assertions of tests/execution_models.rs (there on the embedded
/// database's simulated round trip), on PostgreSQL, one HTTP worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_execution_models_keep_their_behaviour_on_postgresql() {
    let Some(url) = postgres_url() else { return };
    let slow = slow_database(&url).await;
    for model in STACKS {
        let server = server(&slow, model, 1, DbSettings::default());
        let addr = server.addr();
        // Every pool's connections opened before anything is timed.
        for path in ["/getDataAsync?id=1", "/getDataSpawnBlocking?id=1"] {
            let (replies, _) = get_concurrently(addr, path, N).await;
            assert!(replies.iter().all(|r| r.status == 200), "{model} {path}");
        }
        let one = get(addr, "/getDataAsync?id=1").await;
        assert!(one.elapsed >= LATENCY, "{model}: a read of the slow database took {:?}", one.elapsed);

        // Blocking reads on the one worker: one at a time (≈ 8 × 50 ms).
        let (replies, wall) = get_concurrently(addr, "/getData?id=2", N).await;
        assert!(replies.iter().all(|r| r.status == 200 && r.json()["id"] == 2), "{model}");
        assert!(wall >= LATENCY * (N as u32) * 3 / 4, "{model}: 8 blocking reads took only {wall:?}");

        // Non-blocking ones overlap (≈ 50 ms).
        for path in ["/getDataAsync?id=3", "/getDataSpawnBlocking?id=3", "/getDataAkkaAsync?id=3"] {
            let (replies, wall) = get_concurrently(addr, path, N).await;
            assert!(replies.iter().all(|r| r.status == 200 && r.json()["id"] == 3), "{model} {path}");
            assert!(wall < LATENCY * 4, "{model} {path}: 8 reads took {wall:?}: they did not overlap");
        }
        for path in ["/getDataAsync2?id=4", "/getDataAkkaAsync2?id=4"] {
            let reply = get(addr, path).await;
            assert_eq!(reply.status, 200, "{model} {path}");
            assert!(
                reply.elapsed >= LATENCY * 2,
                "{model} {path}: {:?} is less than two reads",
                reply.elapsed
            );
        }

        // /test waits behind blocked reads, not beside non-blocking ones.
        let spawned = Instant::now();
        let blocking = tokio::spawn(get_concurrently(addr, "/getData?id=5", N));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let sent_after = spawned.elapsed();
        let behind = get(addr, "/test").await;
        blocking.await.unwrap();
        // Which of the waiting connections the freed worker takes next is the
        // stack's choice: /test is certain to wait out the rest of the read in
        // progress, which began no sooner than the reads were sent (CI saw 31 ms
        // of a 50 ms read, 20 ms after).
        assert!(
            behind.elapsed + sent_after >= LATENCY,
            "{model}: /test in {:?}, sent {sent_after:?} after the blocked reads",
            behind.elapsed
        );
        let non_blocking = tokio::spawn(get_concurrently(addr, "/getDataAsync?id=5", N));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let beside = get(addr, "/test").await;
        non_blocking.await.unwrap();
        assert!(
            beside.elapsed < LATENCY,
            "{model}: /test took {:?} beside non-blocking reads",
            beside.elapsed
        );

        // The blocking actor pool: no deadlock with one HTTP worker, one ask at a time.
        let (replies, wall) =
            tokio::time::timeout(Duration::from_secs(10), get_concurrently(addr, "/getDataAkka?id=6", N))
                .await
                .unwrap_or_else(|_| panic!("{model}: /getDataAkka deadlocked with one HTTP worker"));
        assert!(replies.iter().all(|r| r.status == 200 && r.json()["id"] == 6), "{model}");
        assert!(wall >= LATENCY * (N as u32) * 3 / 4, "{model}: /getDataAkka {wall:?}");
    }
}

/// `blocklab ARGS` must end within 15 s with exit 2 and one line on stderr
/// that says `says` and never `password`; returns that line.
fn refused(args: &[&str], says: &str, password: &str) -> String {
    let started = Instant::now();
    let out = output_within(blocklab().args(args), Duration::from_secs(20));
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
    assert!(took < Duration::from_secs(15), "{args:?} took {took:?}");
    assert!(
        !stderr.contains(password) && !stdout.contains(password),
        "{args:?} printed the password: {stderr}"
    );
    assert!(!stdout.contains("listening on"), "{args:?} served: {stdout}");
    stderr
}

fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_one_line_and_exit_2_and_the_password_is_never_printed() {
    let Some(url) = postgres_url() else { return };
    seeded(&url).await;
    // scripts/postgres asks the members of blocklab_password for their password;
    // pg_read_all_data lets this one read the table whenever it is created again.
    admin(
        &url,
        "blocklab",
        "DROP ROLE IF EXISTS blocklab_test_login; \
         CREATE ROLE blocklab_test_login LOGIN PASSWORD 'r1ght p@ss' IN ROLE blocklab_password, pg_read_all_data",
    )
    .await;
    let addr = url.trim_start_matches("postgres://").split(['@', '/']).nth(1).unwrap().to_string();
    let with_password = |password: &str| format!("postgres://blocklab_test_login:{password}@{addr}/blocklab");
    let nodes = NODES.to_string();
    let serve = |db: &str| -> Vec<String> {
        ["serve", "--listen", "127.0.0.1:0", "--nodes", &nodes, "--db", db]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let seed_args = |db: &str| -> Vec<String> {
        ["seed", "--nodes", "10", "--db", db].iter().map(|s| s.to_string()).collect()
    };
    let run = |args: Vec<String>, says: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, says, "wr0ng")
    };

    // The right password, percent-encoded, reaches the database.
    let right = with_password("r1ght%20p%40ss");
    let server = common::Listening::serve(&["--db", &right]);
    let reply = get(server.addr, "/getDataAsync?id=3").await;
    assert_eq!((reply.status, reply.json()["id"].as_u64()), (200, Some(3)), "{}", reply.body);
    drop(server);

    let wrong = with_password("wr0ng%20p%40ss");
    for args in [serve(&wrong), seed_args(&wrong)] {
        run(args, "password authentication failed for user \"blocklab_test_login\"");
    }
    let missing = in_database(&url, "blocklab_no_such_database");
    for args in [serve(&missing), seed_args(&missing)] {
        run(args, "database \"blocklab_no_such_database\" does not exist");
    }
    let not_postgres = common::TestServer::start(common::behaviour(|_, _| (Duration::ZERO, Some(200))));
    let http = format!("postgres://blocklab:wr0ng@{}/blocklab", not_postgres.addr);
    for args in [serve(&http), seed_args(&http)] {
        run(args, "is not PostgreSQL: it answered PostgreSQL's first message with \"HTTP/1.1 ");
    }
    // Nothing behind the port: seed refuses it; serve starts (the database may
    // be on its way) and answers 503 until it is there.
    let nothing = format!("postgres://blocklab:wr0ng@127.0.0.1:{}/blocklab", dead_port());
    run(seed_args(&nothing), "Connection refused");
    let server = common::Listening::serve(&["--db", &nothing]);
    for path in ["/getData?id=1", "/getDataAsync?id=1"] {
        let reply = get(server.addr, path).await;
        assert_eq!(reply.status, 503, "{path}: {}", reply.body);
        assert!(!reply.body.contains("wr0ng"), "{}", reply.body);
    }
}

/// A cluster of the test's own (`scripts/postgres`), on a free port: the
/// shared one is not to be killed. Wiped on drop.
struct OwnPostgres {
    port: u16,
}

impl OwnPostgres {
    fn script(args: &[&str]) -> String {
        let out =
            output_within(Command::new(repo().join("scripts/postgres")).args(args), Duration::from_secs(120));
        assert!(out.status.success(), "scripts/postgres {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn start(port: u16) -> (OwnPostgres, String) {
        let url = Self::script(&["start", &port.to_string()]);
        assert_eq!(url, format!("postgres://blocklab@127.0.0.1:{port}/blocklab"));
        (OwnPostgres { port }, url)
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        Self::script(&["wipe", &self.port.to_string()]);
    }
}

/// `--db-timeout` here: small, so that the outage costs the test little time.
const DB_TIMEOUT: Duration = Duration::from_millis(500);
/// `--await-timeout`, the bound of `/getDataAkka`.
const AWAIT_TIMEOUT: Duration = Duration::from_millis(1000);
/// The margin every bound gets: scheduling on two shared cores.
const MARGIN: Duration = Duration::from_secs(1);

/// The bound within which a request to `path` is answered or failed (as
/// tests/toxiproxy.rs sets them): the read's timeout, or `/getDataAkka`'s
/// await, plus the margin. The `2`s make two reads, each bounded.
fn bound(path: &str) -> Duration {
    match path {
        "/getDataAkka" => AWAIT_TIMEOUT + MARGIN,
        "/getDataAsync2" | "/getDataAkkaAsync2" => DB_TIMEOUT * 2 + MARGIN,
        _ => DB_TIMEOUT + MARGIN,
    }
}

const NON_BLOCKING: [&str; 5] =
    ["/getDataAsync", "/getDataAsync2", "/getDataAkkaAsync", "/getDataAkkaAsync2", "/getDataSpawnBlocking"];
const BLOCKING: [&str; 2] = ["/getData", "/getDataAkka"];
/// Clients per endpoint and server, each one request at a time with a pause.
const CLIENTS: usize = 2;

/// How one request ended.
#[derive(Debug, Clone)]
struct Sent {
    model: Model,
    path: &'static str,
    at: Instant,
    took: Duration,
    /// 200 with the row asked for: Some(200); another status: Some(it);
    /// no HTTP answer: None.
    status: Option<u16>,
    /// A 200 (or 404) with another row than the one asked for.
    wrong: Option<String>,
}

async fn client(
    addr: SocketAddr,
    model: Model,
    path: &'static str,
    first: u64,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Sent>>>,
) {
    let mut n = first;
    while !stop.load(Relaxed) {
        n += 7;
        let id = (n % 200) as i64 + 1;
        let at = Instant::now();
        let reply =
            tokio::time::timeout(Duration::from_secs(10), try_get(addr, &format!("{path}?id={id}"))).await;
        let (status, wrong) = match reply {
            Ok(Ok(r)) if r.status == 200 && r.body == serde_json::to_string(&content_record(id)).unwrap() => {
                (Some(200), None)
            }
            Ok(Ok(r)) if r.status == 200 || r.status == 404 => {
                (Some(r.status), Some(format!("{path}?id={id}: {}", r.body)))
            }
            Ok(Ok(r)) => (Some(r.status), None),
            _ => (None, None),
        };
        log.lock().unwrap().push(Sent { model, path, at, took: at.elapsed(), status, wrong });
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn survives_postgresql_killed_under_load_and_recovers_without_a_restart() {
    if postgres_url().is_none() {
        return;
    }
    let port = dead_port();
    let (postgres, url) = OwnPostgres::start(port);
    let seeding = url.clone();
    tokio::task::spawn_blocking(move || backend(&seeding).seed(200, &|_| {}).unwrap()).await.unwrap();
    let settings = DbSettings { timeout: DB_TIMEOUT, ..DbSettings::default() };
    // As tests/toxiproxy.rs: the blocking endpoints get servers of their own,
    // with one HTTP worker more than the clients that block one.
    let servers: Vec<(Model, RunningServer, Vec<&'static str>)> = STACKS
        .iter()
        .flat_map(|model| [(*model, NON_BLOCKING.to_vec()), (*model, BLOCKING.to_vec())])
        .map(|(model, paths)| {
            let blocking = paths.iter().filter(|p| BLOCKING.contains(p)).count();
            let config = ServeConfig {
                nodes: 200,
                db: url.parse().unwrap(),
                db_settings: settings,
                workers: (blocking * CLIENTS + 1).max(2),
                limits: ActorLimits { await_timeout: AWAIT_TIMEOUT, ask_timeout: Duration::from_secs(2) },
                shutdown_grace: Duration::from_secs(1),
                model,
                ..ServeConfig::default()
            };
            (model, server_with(config, backend_with(&url, settings)), paths)
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Mutex::new(Vec::<Sent>::new()));
    let mut clients = Vec::new();
    for (model, server, paths) in &servers {
        for (p, path) in paths.iter().enumerate() {
            for c in 0..CLIENTS {
                let first = (p * CLIENTS + c) as u64 * 131;
                clients.push(tokio::spawn(client(
                    server.addr(),
                    *model,
                    path,
                    first,
                    stop.clone(),
                    log.clone(),
                )));
            }
        }
    }
    let every: Vec<(Model, &'static str)> =
        servers.iter().flat_map(|(m, _, paths)| paths.iter().map(move |p| (*m, *p))).collect();
    let right_since = |since: Instant| {
        let log = log.lock().unwrap();
        every.iter().all(|(m, p)| {
            log.iter().any(|s| {
                s.model == *m && s.path == *p && s.at >= since && s.status == Some(200) && s.wrong.is_none()
            })
        })
    };
    let loaded = Instant::now();
    while !right_since(loaded) {
        assert!(
            loaded.elapsed() < Duration::from_secs(30),
            "not every endpoint answered right before the kill"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed = Instant::now();
    OwnPostgres::script(&["kill", &port.to_string()]); // SIGKILL: the postmaster and every backend
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let restarted = tokio::task::spawn_blocking(move || OwnPostgres::script(&["start", &port.to_string()]));
    assert_eq!(restarted.await.unwrap(), url, "the same cluster on the same port");
    let back = Instant::now();
    while !right_since(back) {
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "not every endpoint answered right within 30 s of the restart"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recovered = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let count = |f: &dyn Fn(&Sent) -> bool| log.iter().filter(|s| f(s)).count();
    eprintln!(
        "{} requests: {} right, {} × 503, {} without an answer; killed at {:?} into the load, back {:?} later, \
         every endpoint right again {:?} after",
        log.len(),
        count(&|s| s.status == Some(200) && s.wrong.is_none()),
        count(&|s| s.status == Some(503)),
        count(&|s| s.status.is_none()),
        killed - loaded,
        back - killed,
        recovered - back
    );
    let wrong: Vec<&Sent> = log.iter().filter(|s| s.wrong.is_some()).collect();
    assert!(wrong.is_empty(), "answers with another row than asked for: {wrong:#?}");
    let unanswered: Vec<&Sent> = log.iter().filter(|s| s.status.is_none()).collect();
    assert!(unanswered.is_empty(), "requests with no HTTP answer: {unanswered:#?}");
    let late: Vec<&Sent> = log.iter().filter(|s| s.took > bound(s.path)).collect();
    assert!(late.is_empty(), "requests past their bound: {late:#?}");
    let other: Vec<&Sent> = log.iter().filter(|s| !matches!(s.status, Some(200 | 503))).collect();
    assert!(other.is_empty(), "answers other than 200 and 503: {other:#?}");
    assert!(
        count(&|s| s.at > killed && s.at < back && s.status == Some(503)) > 0,
        "no 503 during the outage"
    );
    // Once every endpoint has answered right again, every request is right: no stale connection left.
    let after: Vec<&Sent> = log
        .iter()
        .filter(|s| s.at > recovered + Duration::from_millis(500) && s.status != Some(200))
        .collect();
    assert!(after.is_empty(), "failures after the recovery: {after:#?}");
    drop(servers);
    drop(postgres);
}
