//! Input the real binary rejects before it starts anything: a CPU list with a
//! word that is not a CPU, or a CPU this process may not run on; `--peers`
//! given to a command that runs no peer; a `bench --db` that names no
//! database the bench knows. Each is a usage error: exit status 2, one line
//! on stderr that names the flag and what it takes, nothing on stdout.

mod common;

use std::time::Duration;

use common::{blocklab, output_within};

/// Runs `blocklab ARGS` and returns its one line on stderr, once it is
/// checked to be a usage error.
fn usage_error(args: &[&str]) -> String {
    let out = output_within(blocklab().args(args).env_remove("BLOCKLAB_DB"), Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: not one line: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
    stderr
}

#[test]
fn a_cpu_list_is_read_whole_and_within_this_process_cpus() {
    for (list, says) in [
        ("1,x", "'x' is not a CPU number"),
        ("0,", "has an empty item"),
        ("1-0", "the range 1-0 runs backwards"),
        ("0;1", "'0;1' is not a CPU number"),
    ] {
        let line = usage_error(&["bench", "--db", "neo4j", "--db-cpus", list]);
        assert!(line.contains("--db-cpus") && line.contains(says), "{list}: {line}");
    }
    // One CPU past the last this process may use: outside its affinity, whatever the machine.
    let allowed = blocklab::proc::allowed_cpus().unwrap();
    let outside = (allowed.iter().max().unwrap() + 1).to_string();
    let line = usage_error(&["bench", "--db", "neo4j", "--db-cpus", &format!("0-{outside}")]);
    let listed: Vec<String> = allowed.iter().map(usize::to_string).collect();
    let says = format!("CPU {outside} is not one this process may run on (its CPUs: {})", listed.join(","));
    assert!(line.contains("--db-cpus") && line.contains(&says), "{line}");
    // Pinned to one CPU by taskset, the same binary refuses the other (a machine of one CPU has no
    // other to name; the check above holds there too).
    if allowed.len() >= 2 {
        let (mine, other) = (allowed[0].to_string(), allowed[1].to_string());
        let out = output_within(
            std::process::Command::new("taskset")
                .args(["-c", &mine, env!("CARGO_BIN_EXE_blocklab"), "bench", "--db", "neo4j", "--db-cpus"])
                .arg(&other),
            Duration::from_secs(30),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("CPU {other} is not one this process may run on (its CPUs: {mine})"))
        );
    }
}

#[test]
fn peers_is_refused_by_every_command_that_runs_no_peer() {
    let folder = std::env::temp_dir().to_string_lossy().into_owned();
    for (args, why) in [
        (vec!["serve", "--peers", &folder], "serve runs blocklab's own server"),
        (
            vec!["load", "--peers", &folder, "http://127.0.0.1:1/"],
            "load sends requests to the URL it is given",
        ),
        (vec!["seed", "--peers", &folder, "--db", "bolt://127.0.0.1:1"], "seed writes the dataset"),
        (vec!["--peers", &folder, "sweep", "--url", "http://127.0.0.1:1/"], "sweep --url loads the service"),
    ] {
        let line = usage_error(&args);
        assert!(
            line.starts_with("blocklab: --peers does not apply: ") && line.contains(why),
            "{args:?}: {line}"
        );
    }
}

#[test]
fn a_wrong_bench_db_lists_every_form() {
    for (db, says) in [
        ("neo4k", "not a database"),
        ("postgre", "not a database"),
        ("mysql://user:secret@127.0.0.1:3306", "no database speaks mysql://"),
        ("bolt://127.0.0.1:notaport", "invalid port number"),
    ] {
        let line = usage_error(&["bench", "--db", db]);
        assert!(line.contains("'--db <DB>'") && line.contains(says), "{db}: {line}");
        for form in blocklab::studies::execution_models::args::BENCH_DB_FORMS {
            assert!(line.contains(form), "{db}: {form} is not listed: {line}");
        }
        assert!(!line.contains("secret"), "{db}: a password echoed: {line}");
    }
}
