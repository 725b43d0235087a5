//! The fuzz corpus replayed without the fuzzer: every file under
//! `fuzz/corpus/<target>/` (the seeds, what `cargo fuzz` found new and kept
//! after `cargo fuzz cmin`, and every input of a finding) through the same
//! property checks the fuzz targets run ([`blocklab::wire_properties`]).

use std::path::Path;

/// Runs `check` on every file of the target's corpus; returns how many.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
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
    let files = replay("response", blocklab::wire_properties::check_response);
    assert!(files >= 10, "only {files} files in fuzz/corpus/response");
}

#[test]
fn the_request_corpus_keeps_every_property() {
    let files = replay("request", blocklab::wire_properties::check_request);
    assert!(files >= 10, "only {files} files in fuzz/corpus/request");
}
