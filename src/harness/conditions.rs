//! The conditions a report states: the machine and the versions.

use std::collections::BTreeMap;

use super::placement::allowed_cpus;
use serde::{Deserialize, Serialize};

/// The machine a study ran on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    /// CPU model name.
    pub cpu_model: String,
    /// CPUs online.
    pub cpus_online: usize,
    /// CPUs this process could use.
    pub cpus_allowed: Vec<usize>,
    /// Memory (GiB).
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// Host name.
    pub hostname: String,
}

/// Facts about this machine, from /proc and /sys.
pub fn machine() -> Machine {
    let cpu_model = crate::proc::cpu_model().unwrap_or_else(|| "unknown".to_string());
    let cpus_online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| super::placement::parse_cpu_list(s.trim()).len())
        .unwrap_or(0);
    let memory_kb = crate::proc::memory_bytes().unwrap_or(0) as f64 / 1024.0;
    Machine {
        cpu_model,
        cpus_online,
        cpus_allowed: allowed_cpus(),
        memory_gib: (memory_kb / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        kernel: crate::proc::kernel_release(),
        hostname: crate::proc::hostname(),
    }
}

/// The command that made a report, as a user would type it again:
/// `blocklab bench --db neo4j --quick` (an argument with a space or a
/// shell character is quoted).
pub fn command() -> String {
    let quote = |a: String| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c)) {
            a
        } else {
            format!("'{}'", a.replace('\'', "'\\''"))
        }
    };
    std::iter::once("blocklab".to_string())
        .chain(std::env::args().skip(1).map(|a| quote(without_credentials(&a))))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `arg` with the credentials of any URL in it replaced by `***`
/// (`--db=bolt://neo4j:secret@h:7687` → `--db=bolt://***@h:7687`): a
/// report names the command, never a password.
fn without_credentials(arg: &str) -> String {
    let Some(scheme_end) = arg.find("://") else { return arg.to_string() };
    let rest = &arg[scheme_end + 3..];
    let host_start = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..host_start].rfind('@') {
        Some(at) => format!("{}://***{}", &arg[..scheme_end], &rest[at..]),
        None => arg.to_string(),
    }
}

/// The commit of the checkout this binary was built from (git's short
/// hash, and `with uncommitted changes` when tracked files differ from
/// it), or None when git cannot say (no git, not a checkout).
pub fn commit() -> Option<String> {
    let root = std::env::var_os("BLOCKLAB_ROOT")
        .map_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")), std::path::PathBuf::from);
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").arg("-C").arg(&root).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--short", "HEAD"]).filter(|h| !h.is_empty())?;
    let changed = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if changed { format!("{head} with uncommitted changes") } else { head })
}

/// blocklab's (with its commit, when git can say), the compiler's and the
/// key crates' versions, recorded at build time.
pub fn versions() -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    v.insert("blocklab".to_string(), env!("CARGO_PKG_VERSION").to_string());
    if let Some(commit) = commit() {
        v.insert("commit".to_string(), commit);
    }
    v.insert("rustc".to_string(), env!("BLOCKLAB_RUSTC_VERSION").to_string());
    for pair in env!("BLOCKLAB_CRATE_VERSIONS").split(';').filter(|p| !p.is_empty()) {
        if let Some((name, version)) = pair.split_once('=') {
            v.insert(name.to_string(), version.to_string());
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_never_carries_a_urls_credentials() {
        assert_eq!(without_credentials("falkor://u:p%40ss@db:6379/g"), "falkor://***@db:6379/g");
        assert_eq!(without_credentials("--db=bolt://neo4j:s3cret@h:7687"), "--db=bolt://***@h:7687");
        assert_eq!(without_credentials("bolt://h:7687"), "bolt://h:7687");
        assert_eq!(without_credentials("http://h/a@b"), "http://h/a@b");
        assert_eq!(without_credentials("--quick"), "--quick");
    }

    #[test]
    fn the_command_starts_with_blocklab_and_the_commit_is_this_checkouts() {
        assert!(command().starts_with("blocklab"));
        // The tests run in a git checkout (scripts/test, CI's clean clone).
        let commit = commit().expect("a git checkout");
        assert!(commit.chars().take_while(|c| !c.is_whitespace()).all(|c| c.is_ascii_hexdigit()), "{commit}");
        assert_eq!(versions().get("commit"), Some(&commit));
    }
}
