//! The launcher: the one way the harness starts a process, whatever it is —
//! a server target (blocklab under a model, a server peer), a client peer
//! (JMeter, the ceiling client), a managed database, the Toxiproxy link,
//! blocklab's own load generator or sweep agents. A study says what it wants
//! in a [`Spec`] — what to run, on which CPUs, under which memory cap,
//! with which extra environment and standard streams — and gets a running
//! process: a [`ServerProcess`] once its `listening on` line is read
//! ([`Prepared::serve`]), or a client's [`Child`] ([`Prepared::spawn`]).
//!
//! Done here and nowhere else: the pinning (`taskset -c`), the memory
//! cgroup and the wrapping that puts the process in it
//! ([`super::cgroup`]), and how a memory cap becomes the runtime's own
//! setting ([`Runtime`]: the JVM's heap flags in `JAVA_OPTS`, Go's
//! `GOMEMLIMIT`, Node's `--max-old-space-size`, nothing for CPython and
//! native code), with a line saying which setting was used
//! ([`MemoryUsed::setting`]) for every output to carry. The stop (SIGTERM,
//! then SIGKILL after a grace period, so that a JVM deaf to SIGTERM still
//! ends) is [`ServerProcess::stop`]'s.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::cgroup::{MemoryCgroup, Version};
use super::peers::{OUTSIDE_FOLDERS_VAR, Peer, Peers};
use super::process::ServerProcess;
pub use super::runtime::{Runtime, go_memory_limit, jvm_heap_flags};
use crate::db::DbUrl;

/// What a study wants started. Built from what to run ([`Spec::program`],
/// [`Spec::peer`], [`Spec::client_peer`]; a target's comes from
/// [`super::target::Targets::spec`]), then told where and how
/// ([`Spec::pinned`], [`Spec::memory`], [`Spec::env`], [`Spec::stdout`] and
/// the other streams, [`Spec::own_group`]).
#[derive(Debug)]
pub struct Spec {
    program: PathBuf,
    args: Vec<OsString>,
    runtime: Runtime,
    cpus: Option<String>,
    memory: Option<MemoryCap>,
    env: Vec<(OsString, OsString)>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
    own_group: bool,
}

/// A memory cap, and what it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryCap {
    /// The cap, in bytes.
    pub bytes: u64,
    /// Whether it caps the whole process or only the runtime's heap.
    pub covers: Covers,
    /// A JVM's heap flags (`JAVA_OPTS`), when the study gives its own
    /// (the sweep: the seed's heap, or the user's `JAVA_OPTS`); by default
    /// `-Xms` half the cap and `-Xmx` the cap ([`jvm_heap_flags`]).
    pub jvm_opts: Option<String>,
    /// The name of the cgroup that holds the process (under this process's
    /// own); `None`: no cgroup (the process is neither capped as a whole nor
    /// measured, only the runtime's own setting applies).
    pub cgroup: Option<String>,
}

/// What a [`MemoryCap`] covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Covers {
    /// The whole process (its cgroup), and under it the runtime's own limit
    /// where it has one.
    WholeProcess,
    /// The runtime's own heap where it has one (the JVM's `-Xmx`, V8's
    /// old space: as the seed capped its JVMs); its whole process is only
    /// measured in its cgroup, capped at `process` bytes when given. A
    /// runtime with no heap setting (Go, CPython, native code) is capped as
    /// a whole process at the cap.
    Heap {
        /// The whole process's cap for a runtime with a heap (`--jvm-memory`).
        process: Option<u64>,
    },
}

/// Which memory setting a process was started with, for the outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryUsed {
    /// The whole process's cap in force, bytes (`None`: uncapped).
    pub cap_bytes: Option<u64>,
    /// The cap and the runtime's setting in words, e.g. `50 MiB, whole
    /// process (cgroup V1); GOMEMLIMIT=40MiB (4/5 of the cap)`, or why
    /// there is none.
    pub setting: String,
}

impl Spec {
    /// `program args`, a native program (no runtime memory setting).
    pub fn program<S: Into<OsString>>(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = S>,
    ) -> Spec {
        Spec {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            runtime: Runtime::Native,
            cpus: None,
            memory: None,
            env: Vec::new(),
            stdin: None,
            stdout: None,
            stderr: None,
            own_group: false,
        }
    }

    /// Any peer (a server, a database, a link) on a free loopback port:
    /// `scripts/peers run NAME --listen 127.0.0.1:0 ARGS`, told of the
    /// outside peer folders; it prints the `listening on` line.
    pub fn peer(peers: &Peers, peer: &Peer, args: &[String]) -> Spec {
        let own = ["run", &peer.name, "--listen", "127.0.0.1:0"].map(String::from);
        Spec::script(peers, peer.runtime, own.into_iter().chain(args.iter().cloned()))
    }

    /// A client peer with its own flags only (no `--listen`):
    /// `scripts/peers run NAME ARGS`; its runtime is its manifest's.
    pub fn client_peer<S: Into<OsString>>(
        peers: &Peers,
        name: &str,
        args: impl IntoIterator<Item = S>,
    ) -> Spec {
        let runtime = peers.get(name).map_or(Runtime::Native, |p| p.runtime);
        let own = ["run", name].map(OsString::from);
        Spec::script(peers, runtime, own.into_iter().chain(args.into_iter().map(Into::into)))
    }

    fn script<S: Into<OsString>>(peers: &Peers, runtime: Runtime, args: impl IntoIterator<Item = S>) -> Spec {
        let spec = Spec { runtime, ..Spec::program(&peers.script, args) };
        match peers.outside_folders() {
            Some(folders) => spec.env(OUTSIDE_FOLDERS_VAR, folders),
            None => spec,
        }
    }

    /// Pinned to `cpus` (a taskset list such as `1` or `0-3`) when given.
    pub fn pinned(mut self, cpus: Option<&str>) -> Spec {
        self.cpus = cpus.map(str::to_string);
        self
    }

    /// Under the memory cap `cap`.
    pub fn memory(mut self, cap: MemoryCap) -> Spec {
        self.memory = Some(cap);
        self
    }

    /// With `key=value` in its environment.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Spec {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Reading the database `db`: the credentials its URL carries go into
    /// the environment ([`DbUrl::credentials_env`]: `NEO4J_USER`,
    /// `NEO4J_PASSWORD`), never onto the command line, where `ps` and
    /// `/proc/PID/cmdline` show them to anyone and the outputs would keep
    /// them; the process gets the URL without them ([`DbUrl`]'s `Display`).
    pub fn database_credentials(self, db: &DbUrl) -> Spec {
        db.credentials_env().into_iter().fold(self, |spec, (key, value)| spec.env(key, value))
    }

    /// With this stdin (a client driven on it; none: inherited).
    /// [`Prepared::serve`] sets a server's streams itself.
    pub fn stdin(mut self, stdin: impl Into<Stdio>) -> Spec {
        self.stdin = Some(stdin.into());
        self
    }

    /// With this stdout (a client that writes its results; none: inherited).
    pub fn stdout(mut self, stdout: impl Into<Stdio>) -> Spec {
        self.stdout = Some(stdout.into());
        self
    }

    /// With this stderr (none: inherited).
    pub fn stderr(mut self, stderr: impl Into<Stdio>) -> Spec {
        self.stderr = Some(stderr.into());
        self
    }

    /// In a process group of its own: a ctrl-c at the terminal reaches the
    /// runner only, which ends the process itself, in order.
    pub fn own_group(mut self) -> Spec {
        self.own_group = true;
        self
    }

    /// The command it runs: `taskset -c CPUS program args` (or unpinned),
    /// its extra environment set. No cgroup, no memory setting: those come
    /// with [`Spec::prepare`].
    pub fn command(&self) -> Command {
        let mut command = match &self.cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus]).arg(&self.program);
                c
            }
            None => Command::new(&self.program),
        };
        command.args(&self.args);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command
    }

    /// The process ready to start: its cgroup created (when its cap asks
    /// for one), the runtime's memory setting in its environment, the
    /// command wrapped to join the cgroup, its streams set.
    pub fn prepare(mut self) -> Prepared {
        let mut command = self.command();
        let mut cgroup = None;
        let memory = self.memory.take().map(|cap| {
            let made =
                cap.cgroup.as_deref().map(|name| MemoryCgroup::create(name, cap.process_cap(self.runtime)));
            let (env, used) = memory_setting(
                self.runtime,
                &cap,
                made.as_ref().map(|m| m.as_ref().map(MemoryCgroup::version)),
            );
            for (key, value) in env {
                command.env(key, value);
            }
            if let Some(Ok(c)) = made {
                command = c.wrap(&command);
                cgroup = Some(c);
            }
            used
        });
        if let Some(stdin) = self.stdin.take() {
            command.stdin(stdin);
        }
        if let Some(stdout) = self.stdout.take() {
            command.stdout(stdout);
        }
        if let Some(stderr) = self.stderr.take() {
            command.stderr(stderr);
        }
        if self.own_group {
            command.process_group(0);
        }
        Prepared { command, cgroup, memory }
    }
}

impl MemoryCap {
    /// The whole process's cap for `runtime`, bytes (`None`: measured only).
    pub fn process_cap(&self, runtime: Runtime) -> Option<u64> {
        match self.covers {
            Covers::WholeProcess => Some(self.bytes),
            Covers::Heap { process } if runtime.has_heap() => process,
            Covers::Heap { .. } => Some(self.bytes),
        }
    }
}

/// A process ready to start, its cgroup made.
#[derive(Debug)]
pub struct Prepared {
    command: Command,
    cgroup: Option<MemoryCgroup>,
    memory: Option<MemoryUsed>,
}

/// A server started by the launcher: its process, and the cgroup that
/// holds it (dropped in this order: the process first, then the cgroup,
/// which kills whatever is left in it).
pub struct Server {
    /// The running server.
    pub process: ServerProcess,
    /// Its memory cgroup, when its cap asked for one.
    pub cgroup: Option<MemoryCgroup>,
}

impl Prepared {
    /// Which memory setting it starts with (`None`: no cap was asked for).
    pub fn memory(&self) -> Option<&MemoryUsed> {
        self.memory.as_ref()
    }

    /// Its command as one line, for the outputs (the cgroup wrapper and
    /// `taskset` included; the environment left out).
    pub fn command_line(&self) -> String {
        command_line(&self.command)
    }

    /// Starts it as a server and waits up to `ready_within` for its
    /// `listening on http://ADDR` line ([`ServerProcess::spawn`]).
    pub fn serve(self, ready_within: Duration) -> Result<Server, String> {
        let process = ServerProcess::spawn(self.command, ready_within)?;
        Ok(Server { process, cgroup: self.cgroup })
    }

    /// Starts it as a client; the caller waits for it. A cgroup is not
    /// kept for a client (ask for none).
    pub fn spawn(mut self) -> Result<Child, String> {
        let program = self.command.get_program().to_string_lossy().into_owned();
        self.command.spawn().map_err(|e| format!("cannot start {program}: {e}"))
    }

    /// The command itself, for a client run to its end with
    /// [`Command::output`] or [`Command::status`].
    pub fn into_command(self) -> Command {
        self.command
    }
}

/// `command` as one line: its program and arguments, the environment left out.
pub fn command_line(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Starts `spec` as a server, ready within `ready_within`.
pub fn server(spec: Spec, ready_within: Duration) -> Result<Server, String> {
    spec.prepare().serve(ready_within)
}

/// Starts `spec` as a client.
pub fn client(spec: Spec) -> Result<Child, String> {
    spec.prepare().spawn()
}

/// What `cap` becomes for `runtime`, given how its cgroup went (`None`: no
/// cgroup asked for): the environment that sets the runtime's own limit,
/// and which setting was used, in words.
fn memory_setting(
    runtime: Runtime,
    cap: &MemoryCap,
    cgroup: Option<Result<Version, &String>>,
) -> (Vec<(&'static str, String)>, MemoryUsed) {
    let process = cap.process_cap(runtime);
    let (cap_bytes, mut setting) = match cgroup {
        None => (None, "none".to_string()),
        Some(Err(e)) => (None, format!("none: {e}")),
        Some(Ok(version)) => match process {
            Some(bytes) => (process, format!("{} MiB, whole process (cgroup {version:?})", bytes >> 20)),
            None => (None, "none on the whole process (measured in a cgroup)".to_string()),
        },
    };
    let mut env = Vec::new();
    if let Some((var, value, words)) = runtime.own_limit(cap.bytes, cap.jvm_opts.as_deref(), cap_bytes) {
        setting += &format!("; {words}");
        env.push((var, value));
    }
    (env, MemoryUsed { cap_bytes, setting })
}

/// Pins every thread of this process to `cpus` (a taskset list such as
/// "1" or "0-3"); threads started later inherit it.
pub fn pin_self(cpus: &str) -> bool {
    Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(command: &Command, key: &str) -> Option<String> {
        command
            .get_envs()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
    }

    #[test]
    fn a_spec_is_pinned_with_taskset_only_when_cpus_are_given() {
        let pinned =
            Spec::program("/bin/blocklab", ["load", "-k"]).pinned(Some("1-2")).env("A", "b").command();
        assert_eq!(command_line(&pinned), "taskset -c 1-2 /bin/blocklab load -k");
        assert_eq!(env_of(&pinned, "A").as_deref(), Some("b"));
        let free = Spec::program("/bin/blocklab", ["load"]).pinned(None).command();
        assert_eq!(command_line(&free), "/bin/blocklab load");
    }

    #[test]
    fn a_peer_is_run_by_the_peers_script_with_its_manifests_runtime() {
        let peers = Peers::of_this_checkout().unwrap();
        let script = peers.script.display().to_string();
        let jmeter = Spec::client_peer(&peers, "jmeter", ["--url", "http://x/"]).pinned(Some("1"));
        assert_eq!(jmeter.runtime, Runtime::Jvm);
        assert_eq!(
            command_line(&jmeter.command()),
            format!("taskset -c 1 {script} run jmeter --url http://x/")
        );
        let go = peers.get("go-nethttp").unwrap();
        let server = Spec::peer(&peers, go, &["--nodes".to_string(), "10".to_string()]);
        assert_eq!(server.runtime, Runtime::Go);
        assert_eq!(
            command_line(&server.command()),
            format!("{script} run go-nethttp --listen 127.0.0.1:0 --nodes 10")
        );
    }

    #[test]
    fn a_databases_credentials_go_into_the_environment_and_never_onto_the_command_line() {
        let db: DbUrl = "bolt://reader:s3cr%2Ft@127.0.0.1:7687".parse().unwrap();
        let command = Spec::program("/bin/peer", ["--db".to_string(), db.to_string()])
            .database_credentials(&db)
            .pinned(Some("0"))
            .prepare()
            .command;
        assert_eq!(command_line(&command), "taskset -c 0 /bin/peer --db bolt://127.0.0.1:7687");
        assert_eq!(env_of(&command, "NEO4J_USER").as_deref(), Some("reader"));
        assert_eq!(env_of(&command, "NEO4J_PASSWORD").as_deref(), Some("s3cr/t"));
        let without: DbUrl = "bolt://127.0.0.1:7687".parse().unwrap();
        let command = Spec::program("/bin/peer", ["x"]).database_credentials(&without).command();
        assert_eq!(env_of(&command, "NEO4J_PASSWORD"), None, "inherited, as blocklab reads them");
    }

    #[test]
    fn a_cap_becomes_each_runtimes_own_setting() {
        let mib = 1 << 20;
        let cap = |covers| MemoryCap { bytes: 50 * mib, covers, jvm_opts: None, cgroup: Some("x".into()) };
        let heap = cap(Covers::Heap { process: None });
        let setting = |runtime, cap: &MemoryCap, cgroup| {
            let (env, used) = memory_setting(runtime, cap, cgroup);
            (env.into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "), used)
        };
        // Go: a whole-process cap, GOMEMLIMIT at 4/5 of it.
        let (env, used) = setting(Runtime::Go, &heap, Some(Ok(Version::V1)));
        assert_eq!(env, "GOMEMLIMIT=40MiB");
        assert_eq!(used.setting, "50 MiB, whole process (cgroup V1); GOMEMLIMIT=40MiB (4/5 of the cap)");
        assert_eq!(used.cap_bytes, Some(50 * mib));
        // Without a cgroup Go has no cap to stay under, so no GOMEMLIMIT.
        assert_eq!(setting(Runtime::Go, &heap, None).0, "");
        // The JVM: its heap flags, the whole process measured only.
        let (env, used) = setting(Runtime::Jvm, &heap, Some(Ok(Version::V2)));
        assert_eq!(env, "JAVA_OPTS=-Xms25M -Xmx50M");
        assert_eq!(used.setting, "none on the whole process (measured in a cgroup); heap -Xms25M -Xmx50M");
        assert_eq!(used.cap_bytes, None);
        let given =
            MemoryCap { jvm_opts: Some("-Xmx64M".into()), ..cap(Covers::Heap { process: Some(400 * mib) }) };
        let (env, used) = setting(Runtime::Jvm, &given, Some(Ok(Version::V1)));
        assert_eq!(env, "JAVA_OPTS=-Xmx64M");
        assert_eq!(used.setting, "400 MiB, whole process (cgroup V1); heap -Xmx64M");
        // Node: V8's old space at the cap, even with no cgroup.
        let (env, used) = setting(Runtime::Node, &heap, None);
        assert_eq!(env, "NODE_OPTIONS=--max-old-space-size=50");
        assert_eq!(used.setting, "none; heap NODE_OPTIONS=--max-old-space-size=50");
        // CPython and native code: the whole process only; a failed cgroup says why.
        for runtime in [Runtime::Python, Runtime::Native] {
            let (env, used) = setting(runtime, &heap, Some(Ok(Version::V1)));
            assert_eq!((env.as_str(), used.setting.as_str()), ("", "50 MiB, whole process (cgroup V1)"));
        }
        let why = "not root".to_string();
        assert_eq!(setting(Runtime::Python, &heap, Some(Err(&why))).1.setting, "none: not root");
        assert_eq!(cap(Covers::WholeProcess).process_cap(Runtime::Jvm), Some(50 * mib));
    }

    #[test]
    fn without_a_cgroup_the_runtime_setting_is_still_in_the_command() {
        let cap = MemoryCap { bytes: 64 << 20, covers: Covers::WholeProcess, jvm_opts: None, cgroup: None };
        let mut spec = Spec::program("/usr/bin/node", ["server.js"]).pinned(Some("0")).memory(cap);
        spec.runtime = Runtime::Node;
        let prepared = spec.prepare();
        assert_eq!(prepared.command_line(), "taskset -c 0 /usr/bin/node server.js");
        assert_eq!(env_of(&prepared.command, "NODE_OPTIONS").as_deref(), Some("--max-old-space-size=64"));
        assert_eq!(prepared.memory().unwrap().setting, "none; heap NODE_OPTIONS=--max-old-space-size=64");
    }
}
