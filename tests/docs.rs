//! The words users read are checked against the code they describe: no
//! tracked file carries a merge's conflict markers, every `blocklab …`
//! example (in README.md and in every `--help`) parses with the real
//! argument parser, every subcommand's `--help` renders, README.md stays
//! a guide (at most 400 lines), and its table of peers is the manifests'.

use std::path::Path;
use std::process::Command;

use clap::{CommandFactory, Parser};

use blocklab::cli::Cli;

/// The subcommands, as `blocklab SUB --help` takes them.
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .filter(|n| n != "help")
        .collect()
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file git tracks, as text (binary files left out).
fn tracked_files() -> Vec<(String, String)> {
    let out = Command::new("git").arg("-C").arg(root()).args(["ls-files", "-z"]).output().expect("git runs");
    assert!(out.status.success(), "git ls-files failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        .filter_map(|p| std::fs::read_to_string(root().join(p)).ok().map(|text| (p.to_string(), text)))
        .collect()
}

/// The line of a conflict's start in `text`, if it has one: a `<<<<<<< ` line
/// followed by a `=======` line and then a `>>>>>>> ` line (a lone `=======`
/// is a Markdown underline).
fn conflict(text: &str) -> Option<usize> {
    let (ours, mid, theirs) = ("<".repeat(7) + " ", "=".repeat(7), ">".repeat(7) + " ");
    let lines: Vec<&str> = text.lines().collect();
    lines.iter().enumerate().find_map(|(i, line)| {
        if !line.starts_with(&ours) {
            return None;
        }
        let m = lines[i + 1..].iter().position(|l| l.trim_end() == mid)? + i + 1;
        lines[m + 1..].iter().any(|l| l.starts_with(&theirs)).then_some(i + 1)
    })
}

#[test]
fn the_conflict_check_finds_a_conflict_and_not_an_underline() {
    let (ours, mid, theirs) = ("<".repeat(7), "=".repeat(7), ">".repeat(7));
    assert_eq!(conflict(&format!("a\n{ours} HEAD\nb\n{mid}\nc\n{theirs} wt-20\n")), Some(2));
    assert_eq!(conflict(&format!("Title\n{mid}\ntext\n")), None);
    assert_eq!(conflict(&format!("{ours} HEAD\nno middle\n{theirs} x\n")), None);
}

#[test]
fn no_tracked_file_carries_conflict_markers() {
    let files = tracked_files();
    assert!(files.len() > 50, "git ls-files listed only {} files", files.len());
    let found: Vec<String> =
        files.iter().filter_map(|(path, text)| conflict(text).map(|line| format!("{path}:{line}"))).collect();
    assert!(found.is_empty(), "merge conflict markers in: {}", found.join(", "));
}

/// The argument list of a command line that runs blocklab (`blocklab …`,
/// `cargo run --release -- …`), cut at a pipe, a redirect or the next
/// command, with its comment left out; `None` for any other line.
fn blocklab_args(line: &str) -> Option<Vec<String>> {
    let line = line.trim().trim_start_matches("$ ");
    let rest = if let Some(i) = line.find("cargo run --release -- ") {
        &line[i + "cargo run --release -- ".len()..]
    } else {
        line.strip_prefix("blocklab ").or_else(|| {
            // `VAR=value blocklab …`, `sudo -E blocklab …`, `target/release/blocklab …`
            let i = line.find(" blocklab ").or_else(|| line.find("/blocklab "))?;
            Some(&line[i + line[i..].find("blocklab ")? + "blocklab ".len()..])
        })?
    };
    // A comment: `# …`, or words in brackets after two spaces (`  (a first look)`).
    let rest = rest.split(" #").next().unwrap_or(rest);
    let rest = rest.split("  (").next().unwrap_or(rest);
    let rest = [" | ", " > ", " 2>", " && ", "; ", " &"]
        .iter()
        .fold(rest, |r, cut| r.split(cut).next().unwrap_or(r));
    let words = shlex::split(rest)?;
    // A word in capitals or in angle brackets is a placeholder of the prose, not an example.
    if words.is_empty() || words.iter().any(|w| w.starts_with('<') || w == "...") {
        return None;
    }
    Some(std::iter::once("blocklab".to_string()).chain(words).collect())
}

/// Parses `args` with the real parser; the error, when it fails, as clap
/// words it (help and version requests count as parsed).
fn parses(args: &[String]) -> Result<(), String> {
    match Cli::try_parse_from(args) {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.to_string().lines().next().unwrap_or("").to_string()),
    }
}

#[test]
fn a_flag_that_does_not_exist_fails_the_example_check() {
    let good = blocklab_args("  blocklab sweep --quick   # 3 levels").expect("an example");
    assert_eq!(good, ["blocklab", "sweep", "--quick"]);
    let bracketed = blocklab_args("  blocklab bench --quick     (a first look)").expect("an example");
    assert_eq!(bracketed, ["blocklab", "bench", "--quick"]);
    assert_eq!(parses(&good), Ok(()));
    let bad = blocklab_args("cargo run --release -- sweep --no-such-flag 2>&1 | tee x").expect("an example");
    assert!(parses(&bad).is_err(), "{bad:?} parsed");
    assert_eq!(blocklab_args("scripts/test"), None);
}

#[test]
fn every_example_in_every_help_parses() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for sub in subcommands() {
        // The examples as written (the rendered help wraps long lines).
        let help = Cli::command()
            .find_subcommand(&sub)
            .and_then(|c| c.get_after_long_help().or(c.get_after_help()).map(ToString::to_string))
            .unwrap_or_default();
        for line in help.lines().filter(|l| l.trim_start().starts_with("blocklab ")) {
            let Some(args) = blocklab_args(line) else { continue };
            checked += 1;
            if let Err(e) = parses(&args) {
                wrong.push(format!("blocklab {sub} --help: `{}`: {e}", line.trim()));
            }
        }
    }
    assert!(checked >= 20, "only {checked} examples found in the help texts");
    assert!(wrong.is_empty(), "examples that do not parse:\n{}", wrong.join("\n"));
}

#[test]
fn every_example_in_the_readme_parses() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let mut checked = 0;
    let mut wrong = Vec::new();
    // Examples are the lines of shell code blocks (```sh); prose that names blocklab is not one.
    let mut in_shell = false;
    for (i, line) in readme.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            let fence = line.trim_start().trim_start_matches('`');
            in_shell = !in_shell && matches!(fence, "sh" | "bash" | "console" | "shell");
            continue;
        }
        if !in_shell {
            continue;
        }
        let Some(args) = blocklab_args(line) else { continue };
        checked += 1;
        if let Err(e) = parses(&args) {
            wrong.push(format!("README.md:{}: `{}`: {e}", i + 1, line.trim()));
        }
    }
    assert!(checked >= 10, "only {checked} blocklab examples found in README.md");
    assert!(wrong.is_empty(), "README examples that do not parse:\n{}", wrong.join("\n"));
}

#[test]
fn every_subcommands_help_renders_with_examples() {
    for sub in subcommands() {
        let out = Command::new(env!("CARGO_BIN_EXE_blocklab")).args([&sub, "--help"]).output().expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "blocklab {sub} --help exited {}", out.status);
        assert!(text.contains(&format!("Usage: blocklab {sub}")), "blocklab {sub} --help:\n{text}");
        assert!(text.contains("Examples:"), "blocklab {sub} --help shows no examples:\n{text}");
        assert!(conflict(&text).is_none(), "blocklab {sub} --help shows conflict markers:\n{text}");
        assert!(!text.contains(&"=".repeat(7)), "blocklab {sub} --help shows a conflict's divider:\n{text}");
    }
}

#[test]
fn the_readme_is_a_guide_of_at_most_400_lines() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 400, "README.md has {lines} lines: history belongs in BENCHMARKS.md");
}

/// The README's table of peers is the manifests': every peer under its kind
/// and runtime, none that is not there.
#[test]
fn the_readmes_peer_table_is_the_manifests() {
    use blocklab::harness::peers::Peers;
    let peers = Peers::of_this_checkout().unwrap();
    let mut rows = Vec::new();
    for kind in ["server", "database", "client", "link"] {
        for runtime in ["jvm", "go", "python", "node", "native"] {
            let mut names: Vec<&str> = peers
                .list
                .iter()
                .filter(|p| json_name(&p.kind) == kind && json_name(&p.runtime) == runtime)
                .map(|p| p.name.as_str())
                .collect();
            names.sort();
            if !names.is_empty() {
                let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                rows.push(format!("| {kind} | {runtime} | {} |", names.join(", ")));
            }
        }
    }
    let table = format!("| kind | runtime | peers |\n|---|---|---|\n{}\n", rows.join("\n"));
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains(&table), "README.md's peer table should read:\n{table}");
}

/// A manifest value's name as `peer.toml` spells it (`server`, `jvm`).
fn json_name(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value).unwrap().as_str().unwrap().to_string()
}
