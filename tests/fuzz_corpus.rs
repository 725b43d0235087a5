//! The fuzz corpus replayed without the fuzzer: every file under
//! `fuzz/seeds/<target>/` (real requests and responses, hand-made ones, and
//! the input of every finding, `finding-*`) and `fuzz/corpus/<target>/` (what
//! `cargo fuzz` reached beyond them, minimized with `cargo fuzz cmin`)
//! through the same property checks the fuzz targets run
//! ([`blocklab::wire_properties`]).

use std::path::Path;

/// Runs `check` on every file of the target's seeds and corpus; returns
/// how many of each.
fn replay(target: &str, check: fn(&[u8])) -> (usize, usize) {
    let seeds = replay_dir("fuzz/seeds", target, check);
    (seeds, replay_dir("fuzz/corpus", target, check))
}

fn replay_dir(dir: &str, target: &str, check: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    for file in &files {
        let input = std::fs::read(file).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| check(&input)) {
            let what = panic.downcast_ref::<String>().map_or("(no message)", String::as_str);
            panic!("{}: {what}", file.display());
        }
    }
    files.len()
}

#[test]
fn the_response_corpus_keeps_every_property() {
    let (seeds, corpus) = replay("response", blocklab::wire_properties::check_response);
    assert!(seeds >= 10 && corpus >= 10, "only {seeds} seeds and {corpus} corpus files");
}

#[test]
fn the_request_corpus_keeps_every_property() {
    let (seeds, corpus) = replay("request", blocklab::wire_properties::check_request);
    assert!(seeds >= 10 && corpus >= 10, "only {seeds} seeds and {corpus} corpus files");
}
