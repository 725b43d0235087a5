//! The studies, one folder each, each holding its whole story (its matrix or
//! levels, how it runs, its tables, charts and reading) and knowing nothing of
//! the others; all built on the [`crate::harness`], which knows no study.
//!
//! * [`execution_models`] — study 1 (`blocklab bench`): the seed's Play + Neo4j +
//!   Akka endpoints, one execution model each.
//! * [`robustness`] — study 2 (`blocklab sweep`): slow requests stepped up
//!   under a memory cap, and who survives.
//!
//! [`STUDIES`] lists them; the main job, `blocklab studies` ([`studies`]),
//! builds the peers it can, runs every study in that order, and writes one
//! index page. A third study is one more folder and one line in [`STUDIES`].

pub mod args;
pub mod execution_models;
pub mod robustness;
pub mod study;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Instant;

use anyhow::Context;

use crate::command::writable_dir;
use crate::failure::Failure;
use crate::harness::database::Engine;
use crate::harness::peers::{PeerKind, Peers};
use crate::harness::render::IndexSection;
use args::StudiesArgs;
pub use study::{Study, StudyRun};

/// Every study, in the order the main job runs them.
pub const STUDIES: [Study; 3] = [execution_models::STUDY, execution_models::CURVE, robustness::STUDY];

/// `blocklab studies`: the peers built, every study run, then an index page
/// that leads to every report. A study that fails does not stop the next;
/// the first failure is the exit status. Ctrl-C stops them all.
pub fn studies(args: &StudiesArgs) -> Result<(), Failure> {
    let out = args.out();
    // Every study's plan is checked before anything starts.
    for study in &STUDIES {
        (study.check)(&out.join(study.folder), args.quick).map_err(Failure::Usage)?;
    }
    writable_dir(&out)?;
    let names: Vec<String> = STUDIES.iter().map(|s| format!("{} ({})", s.title, s.command)).collect();
    eprintln!("studies: {}; writing into {}", names.join(", then "), out.display());
    // Before any study pins this process to its CPUs.
    let machine = crate::harness::conditions::machine();
    let mut skipped = build_peers();
    if let Err(e) = crate::harness::cgroup::available() {
        let line = format!(
            "memory caps: none ({e}); every target runs uncapped: run as root (sudo -E cargo run --release -- \
             studies) to cap them"
        );
        eprintln!("studies: {line}");
        skipped.push(line);
    }
    let mut first_failure = None;
    let mut sections = Vec::new();
    for study in &STUDIES {
        let run = if matches!(first_failure, Some(Failure::Interrupted)) {
            StudyRun {
                outcome: Err(Failure::Interrupted),
                answer: Vec::new(),
                chart: None,
                ran: Vec::new(),
                skipped: vec!["not run: interrupted".to_string()],
                versions: BTreeMap::new(),
            }
        } else {
            (study.run)(&out.join(study.folder), args.quick)
        };
        sections.push(IndexSection {
            folder: study.folder.to_string(),
            title: study.title.to_string(),
            about: study.summary.to_string(),
            answer: run.answer,
            chart: run.chart,
            ran: run.ran,
            skipped: run.skipped,
            versions: run.versions,
        });
        if let Err(e) = run.outcome
            && first_failure.is_none()
        {
            first_failure = Some(e);
        }
    }
    let index = out.join("index.html");
    let page = crate::harness::render::index(&out, &machine, &sections, &skipped);
    std::fs::write(&index, page).with_context(|| format!("writing {}", index.display()))?;
    println!("\nevery study: {}", index.display());
    first_failure.map_or(Ok(()), Err)
}

/// `scripts/peers build`: every peer whose toolchain is here, a line per
/// step with its time (the script's own lines, passed on as they come);
/// returns a line per peer it skipped or could not build, with why and the
/// command that would add it. The builds are cached in `.local/`: a second
/// run builds nothing.
fn build_peers() -> Vec<String> {
    let peers = match Peers::of_this_checkout() {
        Ok(peers) => peers,
        Err(e) => {
            let line = format!("peers: none read ({e})");
            eprintln!("studies: {line}");
            return vec![line];
        }
    };
    // The peers the studies run: study 2's servers (/delay), study 1's on Neo4j and on
    // PostgreSQL (the curve), and every database, link and client.
    let mut skipped = Vec::new();
    let mut used: Vec<&str> = Vec::new();
    for peer in peers.list.iter().filter(|p| {
        p.kind != PeerKind::Server
            || p.serves("/delay")
            || p.reads(Engine::Neo4j.name())
            || p.reads(Engine::Postgres.name())
    }) {
        // Named, the script would refuse the lot for one it cannot build: skipped here, as it says.
        match peers.why_not_buildable(&peer.name) {
            Some(reason) => {
                eprintln!("peer {}: skipped: {reason}", peer.name);
                skipped.push(format!("{} skipped: {reason}", peer.name));
            }
            None => used.push(&peer.name),
        }
    }
    eprintln!(
        "studies: building the peers the studies run ({} build {})",
        peers.script.display(),
        used.join(" ")
    );
    if used.is_empty() {
        return skipped;
    }
    let started = Instant::now();
    let child = peers
        .pass_outside_folders(&mut std::process::Command::new(&peers.script))
        .arg("build")
        .args(&used)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            let line = format!("peers: cannot run {}: {e}", peers.script.display());
            eprintln!("studies: {line}");
            return vec![line];
        }
    };
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if let Some(rest) = line.strip_prefix("peer ")
                && let Some((name, what)) = rest.split_once(": ")
            {
                if let Some(reason) = what.strip_prefix("skipped: ") {
                    skipped.push(format!("{name} skipped: {reason}"));
                } else if what.starts_with("build FAILED") {
                    skipped.push(format!("{name} skipped: its build failed: see scripts/peers build {name}"));
                }
            }
        }
    }
    let status = child.wait().map_or_else(|e| e.to_string(), |s| s.to_string());
    eprintln!("studies: peers ready in {:.1} s ({status})", started.elapsed().as_secs_f64());
    skipped
}
