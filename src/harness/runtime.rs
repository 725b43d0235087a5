//! The table of runtimes the launcher ([`super::launch`]) consults: each
//! runtime a peer may declare in its `peer.toml`, and all the harness knows
//! of it — whether it has a heap of its own, whether it is warmed up before
//! it is measured, the family its charts draw it in, and how a memory cap
//! becomes its own setting (the JVM's heap flags, `GOMEMLIMIT`, Node's
//! `--max-old-space-size`, none).

use crate::page::Family;

/// The runtime a peer runs on, as its manifest declares it (`runtime`).
/// A new runtime is a variant here and its row in each method below, and
/// its name in `scripts/peer-manifest`'s `RUNTIMES` (the bash side's
/// reader, kept equal to [`Runtime::ALL`] by tests/peers.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// A Java virtual machine: its heap is capped (`-Xmx`), the whole process only when asked.
    Jvm,
    /// A Go binary: capped as a whole process, with `GOMEMLIMIT` under the cap.
    Go,
    /// Native code (C, C++, Rust): capped as a whole process only.
    Native,
    /// CPython: no heap setting, capped as a whole process only.
    Python,
    /// Node.js: its V8 heap is capped (`--max-old-space-size`), the whole process only when asked.
    Node,
}

impl Runtime {
    /// Every runtime, in the order `scripts/peer-manifest` lists them.
    pub const ALL: [Runtime; 5] =
        [Runtime::Jvm, Runtime::Go, Runtime::Native, Runtime::Python, Runtime::Node];

    /// Whether the runtime has a heap limit of its own (the JVM's `-Xmx`,
    /// V8's `--max-old-space-size`): such a runtime is capped by its heap,
    /// as the seed capped its JVMs, and as a whole process only when asked.
    pub fn has_heap(self) -> bool {
        matches!(self, Runtime::Jvm | Runtime::Node)
    }

    /// Whether it must be warmed up before it is measured: a JVM runs a
    /// method interpreted until it has been called often enough for the JIT
    /// to compile it, and loads classes on first use (a cold Spring Web's
    /// slowest answer at the sweep's first level was 6.4 s for a 5 s delay).
    /// V8 compiles too, but within a few calls; the others run compiled code.
    pub fn needs_warm_up(self) -> bool {
        self == Runtime::Jvm
    }

    /// The family a peer on it is drawn in (the charts' marker and dash).
    pub fn family(self) -> Family {
        match self {
            Runtime::Jvm => Family::Jvm,
            Runtime::Go => Family::Go,
            Runtime::Python => Family::Python,
            Runtime::Node => Family::Node,
            Runtime::Native => Family::Other,
        }
    }

    /// The runtime's own memory limit under a cap of `cap` bytes (`jvm_opts`:
    /// a JVM's heap flags when the study gives its own), `whole` being the
    /// whole process's cap in force: the variable that sets it, its value,
    /// and the words the outputs carry (`None`: the runtime has none).
    pub fn own_limit(
        self,
        cap: u64,
        jvm_opts: Option<&str>,
        whole: Option<u64>,
    ) -> Option<(&'static str, String, String)> {
        match self {
            // Go's GC does not see a cgroup's limit: without a soft limit under
            // it, the heap grows past the cap before a collection and the kernel
            // kills the process (measured: 77 % at 2000, then OOM-killed). Go
            // users in containers set GOMEMLIMIT; so does the launcher.
            Runtime::Go => whole.map(|bytes| {
                let value = format!("{}MiB", go_memory_limit(bytes) >> 20);
                ("GOMEMLIMIT", value.clone(), format!("GOMEMLIMIT={value} (4/5 of the cap)"))
            }),
            // The heap set here rather than left to the peer's default, so that
            // the outputs say what the JVM really ran with.
            Runtime::Jvm => {
                let opts = jvm_opts.map_or_else(|| jvm_heap_flags(cap), str::to_string);
                Some(("JAVA_OPTS", opts.clone(), format!("heap {opts}")))
            }
            // Node's heap at the cap, as the JVMs' -Xmx (V8 does not see a cgroup's limit either).
            Runtime::Node => {
                let value = format!("--max-old-space-size={}", (cap >> 20).max(1));
                Some(("NODE_OPTIONS", value.clone(), format!("heap NODE_OPTIONS={value}")))
            }
            Runtime::Native | Runtime::Python => None,
        }
    }
}

/// A JVM's heap flags for a heap of `cap` bytes: `-Xms` half of it, `-Xmx`
/// all of it, whole MiB (the seed's `-Xms25M -Xmx50M` under 50 MiB).
pub fn jvm_heap_flags(cap: u64) -> String {
    let mib = (cap >> 20).max(2);
    format!("-Xms{}M -Xmx{mib}M", mib / 2)
}

/// `GOMEMLIMIT` for a Go process under a cgroup cap of `cap` bytes: four
/// fifths of it, whole MiB (40 MiB under 50 MiB), the headroom Go's runtime
/// needs beyond its heap (stacks, runtime structures, the kernel's share).
pub fn go_memory_limit(cap: u64) -> u64 {
    (cap / 5 * 4) >> 20 << 20
}
