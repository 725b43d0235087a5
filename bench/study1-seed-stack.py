#!/usr/bin/env python3
"""Study 1 on the seed's own stack: blocklab and the seed's Play 2.7 + Akka app side by
side on one managed Neo4j 5.26, against Neo4j's own ceiling for the query (issue 25).

What it does, in one run (Python 3 standard library only):

 1. builds what it needs (blocklab release binary if absent; the Neo4j launcher, the Play
    peer and the neo4j-ceiling client with Maven, offline after the first resolve);
 2. starts its own Neo4j (scripts/neo4j start on a free port, pinned to --db-cpu), seeds
    --nodes Content nodes with `blocklab seed`;
 3. warms Neo4j with --warm seconds of the query through the Java driver (Neo4j's CPU per
    query falls ~3x over the first ~2 minutes of load: its JIT; 120 s is the default,
    ~180 s is needed on a loaded machine), printing its CPU per query slice by slice, and
    going on in 30 s slices while that still falls by more than 15 % a slice (the JIT warms
    by work done, not by time; up to --warm-max, 600 s);
 4. starts `blocklab serve` and the Play peer, both pinned to --server-cpu, and warms each
    with --server-warm seconds of load on the measured endpoints;
 5. per round: Neo4j's ceiling (peers/neo4j-ceiling: the Java driver's async API, no HTTP,
    from the server's CPU); then per endpoint blocklab and Play in alternating order
    (closed loop, `blocklab load -k -c 200`, pinned with Neo4j on --db-cpu): requests/s,
    p99, server CPU µs per request (/proc/PID/stat of the server), Neo4j CPU µs per query
    (/proc/PID/stat of Neo4j's JVM); then open loop at 70 % of the ceiling
    (`blocklab load --rate`, coordinated-omission-corrected p99) on /getDataAsync and
    /getDataAkkaAsync; then the seed's own client, `ab -k -c 200`, beside `blocklab load`
    on /test and /getDataAsync of both servers, alternating which goes first;
 While one of them is measured (the ceiling client, a server), every other process the run
    started is frozen (SIGSTOP) and thawed after: idle JVMs on the measured server's core
    still wake, and made blocklab's CPU per /getDataAsync read ~45 µs where it is ~32 alone;
 6. prints medians over the rounds, then each goal of issue 25 as
    "figure, goal, met/not met"; --json FILE writes everything.

It stops everything it started by pid (servers SIGTERM then SIGKILL, Neo4j through
scripts/neo4j, which escalates too) and wipes its Neo4j store, also on Ctrl-C.

    bench/study1-seed-stack.py --quick             # smoke: ~3 minutes
    bench/study1-seed-stack.py                     # 3 rounds, ~15-25 minutes
    bench/study1-seed-stack.py --all --rounds 5 --warm 180 --json study1.json
    bench/study1-seed-stack.py --lean                      # blocklab under lean as well
    bench/study1-seed-stack.py --rounds 2 --db-rtt 1       # the database 1 ms away (Toxiproxy)

With --db-rtt MS, after Neo4j is seeded and warmed directly, Toxiproxy (peers/toxiproxy,
pinned with Neo4j) stands between Neo4j and every process measured from then on (both
servers and the ceiling client), with a latency toxic of half the round trip each way
(whole milliseconds: the odd one on the answers), as `blocklab bench --db-rtt` does.
"""

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from _common import BLOCKLAB, ROOT, free_port, loadavg
NEO4J = os.path.join(ROOT, "scripts", "neo4j")
LOCAL = os.path.join(ROOT, ".local", "peers")
PLAY_OUT = os.path.join(LOCAL, "play")
CEILING_OUT = os.path.join(LOCAL, "neo4j-ceiling")
TOXIPROXY_OUT = os.path.join(LOCAL, "toxiproxy")
# Processes never frozen while another is measured: the link every read crosses.
NEVER_FROZEN = {"toxiproxy"}
TICK = os.sysconf("SC_CLK_TCK")

ENDPOINTS = ["/test", "/getData", "/getDataAsync", "/getDataAsync2", "/getDataAkka",
             "/getDataAkkaAsync", "/getDataAkkaAsync2"]
DEFAULT_ENDPOINTS = ["/test", "/getDataAsync", "/getDataAkkaAsync"]
QUERIES_PER_REQUEST = {"/test": 0, "/getDataAsync2": 2, "/getDataAkkaAsync2": 2}
NON_BLOCKING_DB = ["/getDataAsync", "/getDataAsync2", "/getDataAkkaAsync", "/getDataAkkaAsync2"]
OPEN_LOOP = ["/getDataAsync", "/getDataAkkaAsync"]
SERVERS = ["blocklab", "play"]


class Fail(Exception):
    """A clear error for the user: printed as one line, exit status 1."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def cpu_seconds(pid):
    """utime + stime of a whole process (all its threads), from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        raise Fail(f"process {pid} is gone (it died during the run)")
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


class Stack:
    """Everything the run starts, so that all of it is stopped, by pid, whatever happens."""

    def __init__(self):
        self.neo4j_port = None
        self.procs = {}  # name -> Popen

    def start_server(self, name, cmd, timeout=120):
        log(f"  starting {name}: {' '.join(cmd)}")
        err = tempfile.NamedTemporaryFile(prefix=f"study1-{name}-", suffix=".log", delete=False)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
                             start_new_session=True)
        self.procs[name] = p
        # The line arrives within the timeout or the process exits (a closed pipe ends readline).
        import threading
        line_box = []
        t = threading.Thread(target=lambda: line_box.append(p.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout)
        line = line_box[0] if line_box else ""
        m = re.search(r"listening on http://(\S+)", line)
        if not m:
            self.stop_server(name)
            with open(err.name) as f:
                tail = f.read()[-2000:]
            raise Fail(f"{name} did not start within {timeout} s (first line {line!r}); its stderr:\n{tail}")
        # Drain stdout so that the server never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
        log(f"  {name} listening on http://{m.group(1)} (pid {p.pid}, log {err.name})")
        return m.group(1), p.pid

    def signal_group(self, name, sig):
        """Sends `sig` to the process group of `name` (each was started in a session of its
        own, so its group is its pid: a launcher script and the JVM it runs alike)."""
        p = self.procs.get(name)
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass

    @contextlib.contextmanager
    def only(self, running):
        """Freezes (SIGSTOP) every process of the run but `running` while the block runs, and
        thaws them (SIGCONT) after, whatever happens: the idle servers and the ceiling's JVM
        share the measured server's core, and an idle JVM still wakes (its timers, GC and
        compiler threads) and evicts the measured server from its caches. Measured here
        (2026-12-05, this script, two rounds each): blocklab's server CPU per /getDataAsync
        read 45-47 µs beside the idle Play and ceiling JVMs, 29-33 µs with them frozen, and
        31-37 µs by hand with nothing else on its core; Play's 106-128 µs either way."""
        frozen = [n for n in self.procs
                  if n not in running and n not in NEVER_FROZEN and self.procs[n].poll() is None]
        for name in frozen:
            self.signal_group(name, signal.SIGSTOP)
        try:
            yield
        finally:
            for name in frozen:
                self.signal_group(name, signal.SIGCONT)

    def stop_server(self, name):
        # A frozen process would not act on SIGTERM until thawed.
        self.signal_group(name, signal.SIGCONT)
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            # A JVM can be deaf to SIGTERM: escalate.
            p.kill()
            p.wait(timeout=10)

    def stop_all(self):
        for name in list(self.procs):
            try:
                self.stop_server(name)
            except Exception as e:  # keep stopping the rest
                log(f"  stopping {name}: {e}")
        if self.neo4j_port is not None:
            subprocess.run([NEO4J, "wipe", str(self.neo4j_port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            log(f"  Neo4j on port {self.neo4j_port} stopped and its store wiped")
            self.neo4j_port = None


def run(cmd, timeout=None, check=True):
    try:
        r = subprocess.run(cmd, text=True, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Fail(f"timed out after {timeout} s: {' '.join(cmd)}")
    if check and r.returncode != 0:
        raise Fail(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.strip()[-2000:]}")
    return r


def build(args):
    for tool in ["java", "mvn", "taskset"]:
        if not shutil.which(tool):
            raise Fail(f"'{tool}' not found: Java 17 and Maven are needed for Neo4j and the Play peer "
                       "(apt-get install openjdk-17-jdk-headless maven), taskset for the placement (util-linux)")
    if not os.path.exists(BLOCKLAB):
        log("building blocklab (cargo build --release --locked; several minutes the first time)")
        if subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT).returncode != 0:
            raise Fail("cargo build --release --locked failed")
    log("building the Neo4j launcher, the Play peer and the neo4j-ceiling client (Maven, offline when resolved)")
    run([NEO4J, "build"])
    run([os.path.join(ROOT, "peers", "play", "build"), PLAY_OUT])
    run([os.path.join(ROOT, "peers", "neo4j-ceiling", "build"), CEILING_OUT])
    if args.db_rtt:
        log("building Toxiproxy (Go, offline when resolved)")
        run([os.path.join(ROOT, "peers", "toxiproxy", "build"), TOXIPROXY_OUT])
    if args.ab and not shutil.which("ab"):
        if os.geteuid() == 0 and shutil.which("apt-get"):
            log("installing ab (apt-get install apache2-utils)")
            subprocess.run(["apt-get", "install", "-y", "-q", "apache2-utils"], stdout=subprocess.DEVNULL)
        if not shutil.which("ab"):
            log("ab not found and not installable: the ab cross-check is skipped (apt-get install apache2-utils)")
            args.ab = False


def versions():
    java = run(["java", "-version"], check=False).stderr.splitlines()
    return {
        "blocklab": run([BLOCKLAB, "--version"], check=False).stdout.strip(),
        "neo4j": "Neo4j Community 5.26.19 (embedded in peers/neo4j's launcher)",
        "play": "Play 2.7.3 (Scala 2.13), Akka 2.5.23, Netty 4.1.34, neo4j-java-driver 4.4.20",
        "ceiling": "peers/neo4j-ceiling: neo4j-java-driver 4.4.20 async API",
        "java": java[0] if java else "?",
        "ab": (run(["ab", "-V"], check=False).stdout.splitlines() or ["?"])[0] if shutil.which("ab") else None,
    }


class Bench:
    def __init__(self, args, stack):
        self.a = args
        self.stack = stack
        self.tmp = tempfile.mkdtemp(prefix="study1-")
        self.bolt = None
        self.neo4j_pid = None
        self.servers = {}  # name -> (addr, pid)
        self.ceiling_proc = None

    # ---- the pieces --------------------------------------------------------------------
    def pin(self, cpu):
        return ["taskset", "-c", str(cpu)]

    def start_neo4j(self):
        port = free_port()
        env = dict(os.environ, NEO4J_CPUS=str(self.a.db_cpu))
        log(f"starting Neo4j on 127.0.0.1:{port}, pinned to CPU {self.a.db_cpu}")
        self.stack.neo4j_port = port  # from here on, stop_all wipes it
        r = subprocess.run([NEO4J, "start", str(port)], env=env, text=True, capture_output=True, timeout=180)
        if r.returncode != 0 or not r.stdout.strip().startswith("bolt://"):
            raise Fail(f"scripts/neo4j start {port} failed:\n{r.stderr.strip()[-2000:]}")
        self.bolt = r.stdout.strip().splitlines()[-1]
        with open(os.path.join(ROOT, ".local", "neo4j", str(port), "pid")) as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
        if comm != "java":
            raise Fail(f"Neo4j's pid {pid} is '{comm}', not the JVM: its CPU could not be read")
        self.neo4j_pid = pid
        log(f"  {r.stderr.strip()}")

    def open_link(self, rtt_ms):
        """Toxiproxy between Neo4j and everything measured from now on, with `rtt_ms` on the
        link (half each way, the odd millisecond on the answers). The ceiling client's JVM,
        warmed on the direct path, is stopped so that its next measurement starts through
        the link. Returns what the report keeps."""
        self.stack.stop_server("ceiling")
        self.ceiling_proc = None
        api, pid = self.stack.start_server("toxiproxy", self.pin(self.a.db_cpu) + [
            os.path.join(ROOT, "peers", "toxiproxy", "run"), TOXIPROXY_OUT, "--listen", "127.0.0.1:0"])

        def call(method, path, body=None):
            import urllib.request
            data = json.dumps(body).encode() if body is not None else None
            req = urllib.request.Request(f"http://{api}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.read().decode()
            except OSError as e:
                raise Fail(f"Toxiproxy {method} {path}: {e}")

        version = call("GET", "/version").strip()
        upstream = self.bolt.split("://", 1)[1]
        listen = f"127.0.0.1:{free_port()}"
        call("POST", "/proxies", {"name": "neo4j", "listen": listen, "upstream": upstream, "enabled": True})
        up = rtt_ms // 2
        for name, stream, ms in [("rtt_upstream", "upstream", up), ("rtt_downstream", "downstream", rtt_ms - up)]:
            if ms:
                call("POST", "/proxies/neo4j/toxics", {"name": name, "type": "latency", "stream": stream,
                                                       "toxicity": 1.0, "attributes": {"latency": ms, "jitter": 0}})
        self.bolt = f"bolt://{listen}"
        log(f"  the link: Toxiproxy {version} (pid {pid}, CPU {self.a.db_cpu}), {rtt_ms} ms round trip, "
            f"{self.bolt} -> {upstream}")
        return {"toxiproxy": version, "pid": pid, "cpu": self.a.db_cpu, "rtt_ms": rtt_ms,
                "upstream_ms": up, "downstream_ms": rtt_ms - up}

    def seed(self):
        t0 = time.time()
        out = run(self.pin(self.a.db_cpu) + [BLOCKLAB, "seed", "--db", self.bolt, "--nodes", str(self.a.nodes)],
                  timeout=600).stdout.strip()
        log(f"seeded {self.a.nodes} nodes in {time.time() - t0:.1f} s: {out.splitlines()[-1] if out else ''}")

    def ceiling(self, seconds, warmup):
        """One measurement of the ceiling client (peers/neo4j-ceiling --stdin: one JVM for
        the whole run, started at the Neo4j warm-up, so that the client is as warm as the
        database); returns its JSON plus Neo4j's CPU per query, read from Neo4j's process
        over the client's measured window only (from its "measuring" line to its JSON line:
        the drain of the last reads in flight adds < 0.1 %)."""
        import queue
        import threading
        if self.ceiling_proc is None or self.ceiling_proc.poll() is not None:
            cmd = self.pin(self.a.server_cpu) + [
                os.path.join(ROOT, "peers", "neo4j-ceiling", "run"), CEILING_OUT, "--db", self.bolt,
                "--nodes", str(self.a.nodes), "--concurrency", str(self.a.ceiling_concurrency), "--stdin"]
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, bufsize=1, start_new_session=True)
            self.stack.procs["ceiling"] = p
            self.ceiling_proc = p
            self.ceiling_err = queue.Queue()
            self.ceiling_log = []

            def pump(stream, q):
                for line in stream:
                    q.put(line)
                q.put(None)
            threading.Thread(target=pump, args=(p.stderr, self.ceiling_err), daemon=True).start()
            log(f"  ceiling client started (pid {p.pid}): {' '.join(cmd)}")
        p = self.ceiling_proc

        def failure(why):
            tail = "".join(self.ceiling_log[-30:])
            return Fail(f"the ceiling client {why}:\n{tail}")

        try:
            p.stdin.write(f"{seconds} {warmup}\n")
            p.stdin.flush()
        except BrokenPipeError:
            raise failure("exited")
        c0, deadline = None, time.time() + warmup + 120
        while c0 is None:
            try:
                line = self.ceiling_err.get(timeout=max(1, deadline - time.time()))
            except queue.Empty:
                raise failure("did not start measuring")
            if line is None:
                raise failure("exited")
            self.ceiling_log.append(line)
            if "measuring" in line:
                c0 = cpu_seconds(self.neo4j_pid)
        out = p.stdout.readline()
        c1 = cpu_seconds(self.neo4j_pid)
        if not out.strip():
            raise failure("printed no result")
        doc = json.loads(out)
        doc["neo4j_cpu_us_per_query"] = (c1 - c0) * 1e6 / doc["reads"] if doc["reads"] else None
        doc["neo4j_cpu_share"] = (c1 - c0) / doc["seconds"] if doc["seconds"] else None
        return doc

    def load(self, url, seconds=None, rate=None, requests=None):
        """blocklab load, pinned with Neo4j; returns its JSON result."""
        out = os.path.join(self.tmp, "load.json")
        cmd = self.pin(self.a.db_cpu) + [BLOCKLAB, "load", "-k", "-q", "-c", str(self.a.concurrency),
                                         "--json", out]
        if requests:
            cmd += ["-n", str(requests)]
        else:
            cmd += ["-z", f"{seconds}s"]
        if rate:
            cmd += ["--rate", str(rate)]
        cmd.append(url)
        if os.path.exists(out):
            os.unlink(out)
        # blocklab load exits non-zero when no request succeeded (a cold JVM within a short
        # load, say): that is a figure (0 requests/s), not the end of the run.
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = run(cmd, timeout=(seconds or 600) + 120, check=False)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if not os.path.exists(out):
            raise Fail(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.strip()[-2000:]}")
        with open(out) as f:
            doc = json.load(f)
        # Its own CPU time, from the kernel's rusage of the finished child.
        doc["client_cpu_s"] = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
        if r.returncode != 0:
            log(f"  (blocklab load: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode})")
        return doc

    def measure(self, server, path, seconds, rate=None):
        addr, pid = self.servers[server]
        with self.stack.only({server}):
            s0, n0 = cpu_seconds(pid), cpu_seconds(self.neo4j_pid)
            doc = self.load(f"http://{addr}{path}", seconds=seconds, rate=rate)
            s1, n1 = cpu_seconds(pid), cpu_seconds(self.neo4j_pid)
        done = doc["completed"]
        queries = done * QUERIES_PER_REQUEST.get(path, 1)
        lat = doc["corrected_latency_ms"] if rate and doc.get("corrected_latency_ms") else doc["latency_ms"]
        row = {
            "server": server, "path": path, "mode": "open" if rate else "closed", "rate": rate,
            "rps": doc["rps"], "completed": done,
            "p50_ms": lat["p50"], "p99_ms": lat["p99"], "max_ms": lat["max"],
            "p99_uncorrected_ms": doc["latency_ms"]["p99"],
            "failed": doc["error_total"] + doc["non_2xx"],
            "server_cpu_us_per_req": (s1 - s0) * 1e6 / done if done else None,
            "server_cpu_share": (s1 - s0) / doc["duration_s"] if doc["duration_s"] else None,
            "neo4j_cpu_us_per_query": (n1 - n0) * 1e6 / queries if queries else None,
            "neo4j_cpu_share": (n1 - n0) / doc["duration_s"] if doc["duration_s"] else None,
            # blocklab load shares Neo4j's core: what it takes is what Neo4j cannot have.
            "load_cpu_share": doc["client_cpu_s"] / doc["duration_s"] if doc["duration_s"] else None,
        }
        return row

    def ab_vs_load(self, server, path, requests, first):
        with self.stack.only({server}):
            return self._ab_vs_load(server, path, requests, first)

    def _ab_vs_load(self, server, path, requests, first):
        addr, _ = self.servers[server]
        url = f"http://{addr}{path}"
        rows = []
        for tool in (["ab", "blocklab load"] if first == "ab" else ["blocklab load", "ab"]):
            c0 = children_cpu()
            t0 = time.time()
            if tool == "ab":
                r = run(self.pin(self.a.db_cpu) + ["ab", "-k", "-q", "-c", str(self.a.concurrency),
                                                   "-n", str(requests), "-s", "30", url], timeout=900, check=False)
                if r.returncode != 0:
                    raise Fail(f"ab failed on {url}: {r.stderr.strip()[-500:]}")
                rps = float(re.search(r"Requests per second:\s+([\d.]+)", r.stdout).group(1))
                p99 = re.search(r"^\s*99%\s+(\d+)", r.stdout, re.M)
                failed = int(re.search(r"Failed requests:\s+(\d+)", r.stdout).group(1))
                # ab counts a body whose length differs from the first one's as failed
                # ("Length"): the nodes' JSON differs in length by id, so those are not failures.
                length = re.search(r"\(Connect: \d+, Receive: \d+, Length: (\d+), Exceptions: \d+\)", r.stdout)
                failed -= int(length.group(1)) if length else 0
                non2xx = re.search(r"Non-2xx responses:\s+(\d+)", r.stdout)
                done = int(re.search(r"Complete requests:\s+(\d+)", r.stdout).group(1))
                row = {"rps": rps, "p99_ms": float(p99.group(1)) if p99 else None,
                       "failed": failed + (int(non2xx.group(1)) if non2xx else 0), "completed": done}
            else:
                doc = self.load(url, requests=requests)
                row = {"rps": doc["rps"], "p99_ms": doc["latency_ms"]["p99"],
                       "failed": doc["error_total"] + doc["non_2xx"], "completed": doc["completed"]}
            cpu = children_cpu() - c0
            row.update({"server": server, "path": path, "tool": tool, "requests": requests,
                        "client_cpu_us_per_req": cpu * 1e6 / row["completed"] if row["completed"] else None,
                        "wall_s": time.time() - t0})
            rows.append(row)
        return rows

    # ---- the run -----------------------------------------------------------------------
    def go(self):
        a = self.a
        result = {"command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
                  "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "loadavg_start": loadavg(), "versions": versions(),
                  "placement": {
                      "neo4j": f"CPU {a.db_cpu}", "load generator (blocklab load, ab)": f"CPU {a.db_cpu}",
                      "server (blocklab serve, Play)": f"CPU {a.server_cpu}",
                      "ceiling client (Java driver)": f"CPU {a.server_cpu} (where the server runs)",
                      "seed": f"CPU {a.db_cpu}",
                      "while one is measured": "the other servers and the ceiling client are frozen (SIGSTOP)"},
                  "settings": {k: v for k, v in vars(a).items()}}
        self.result = result
        log(f"load average at start: {result['loadavg_start']}")
        self.start_neo4j()
        self.seed()

        # Warm Neo4j: the query through the Java driver, in slices, Neo4j's CPU per query each.
        log(f"warming Neo4j: {a.warm} s of the query through the Java driver "
            "(its CPU per query falls ~3x over the first ~2 minutes: JIT; ~180 s on a loaded machine)")
        # The JIT warms by work done, not by time: on a starved machine --warm seconds may
        # not be enough. After --warm, go on in 30 s slices while Neo4j's CPU per query still
        # falls by more than 15 % from one slice to the next, up to --warm-max seconds.
        warm_slices = []
        spent = 0
        while spent < a.warm:
            s = min(30, a.warm - spent)
            doc = self.ceiling(s, 0)
            cost = doc["neo4j_cpu_us_per_query"]
            warm_slices.append({"seconds": s, "reads_per_s": doc["reads_per_s"], "neo4j_cpu_us_per_query": cost})
            log(f"  {spent:>4}-{spent + s:<4} s: {doc['reads_per_s']:>8,.0f} reads/s, Neo4j {fmt(cost)} "
                f"µs CPU per query, errors {doc['errors']}")
            spent += s
            if spent >= a.warm and len(warm_slices) >= 2 and spent < a.warm_max:
                before = warm_slices[-2]["neo4j_cpu_us_per_query"]
                if cost and before and cost < 0.85 * before:
                    log(f"  Neo4j still warming ({fmt(before)} -> {fmt(cost)} µs per query): another 30 s "
                        f"(up to --warm-max {a.warm_max} s)")
                    a.warm += 30
        result["neo4j_warm"] = warm_slices
        result["neo4j_warm_s"] = spent
        if a.db_rtt:
            result["link"] = self.open_link(a.db_rtt)

        log("starting the servers (both stay up for the whole run; the idle one waits)")
        pool = [] if a.db_async_connections is None else ["--db-async-connections", str(a.db_async_connections)]
        bl = self.stack.start_server("blocklab", self.pin(a.server_cpu) + [
            BLOCKLAB, "serve", "--listen", "127.0.0.1:0", "--db", self.bolt, "--nodes", str(a.nodes)] + pool)
        self.servers["blocklab"] = bl
        if a.lean:
            self.servers["blocklab-lean"] = self.stack.start_server("blocklab-lean", self.pin(a.server_cpu) + [
                BLOCKLAB, "serve", "--model", "lean", "--listen", "127.0.0.1:0", "--db", self.bolt,
                "--nodes", str(a.nodes)] + pool)
        pl = self.stack.start_server("play", self.pin(a.server_cpu) + [
            os.path.join(ROOT, "peers", "play", "run"), PLAY_OUT, "--listen", "127.0.0.1:0",
            "--db", self.bolt, "--nodes", str(a.nodes)])
        self.servers["play"] = pl
        for name in SERVERS:
            with open(f"/proc/{self.servers[name][1]}/comm") as f:
                result.setdefault("server_process", {})[name] = {"pid": self.servers[name][1], "comm": f.read().strip()}

        per = max(1, a.server_warm // len(a.endpoints))
        log(f"warming each server: {a.server_warm} s of load over its endpoints ({per} s each)")
        for name in SERVERS:
            for path in a.endpoints:
                row = self.measure(name, path, per)
                log(f"  {name:<13} {path:<20} {row['rps']:>9,.0f} req/s (warm-up)")

        rows, ceilings, ab_rows = [], [], []
        for r in range(a.rounds):
            log(f"round {r + 1}/{a.rounds} (load average {loadavg()})")
            with self.stack.only({"ceiling"}):
                c = self.ceiling(a.seconds, a.ceiling_warmup)
            c["round"] = r + 1
            c["loadavg"] = loadavg()
            ceilings.append(c)
            log(f"  ceiling  {c['reads_per_s']:>9,.0f} reads/s  p99 {c['p99_us'] / 1000:.1f} ms  "
                f"Neo4j {fmt(c['neo4j_cpu_us_per_query'])} µs/query, its core {fmt(100 * c['neo4j_cpu_share'])} % busy  "
                f"client {fmt(c['client_cpu_us_per_read'])} µs/read  errors {c['errors']}")
            order = SERVERS if r % 2 == 0 else SERVERS[::-1]
            for path in a.endpoints:
                for name in order:
                    row = self.measure(name, path, a.seconds)
                    row["round"] = r + 1
                    rows.append(row)
                    log(f"  {name:<13} {path:<20} {row['rps']:>9,.0f} req/s  p99 {row['p99_ms']:>7.1f} ms  "
                        f"server {fmt(row['server_cpu_us_per_req'])} µs/req  "
                        f"Neo4j {fmt(row['neo4j_cpu_us_per_query'])} µs/query  failed {row['failed']}")
            rate = int(0.7 * c["reads_per_s"])
            for path in OPEN_LOOP:
                for name in order:
                    row = self.measure(name, path, a.seconds, rate=rate)
                    row["round"] = r + 1
                    rows.append(row)
                    log(f"  {name:<13} {path:<20} open loop {rate}/s: {row['rps']:>8,.0f} req/s  corrected p99 "
                        f"{row['p99_ms']:>7.1f} ms  (uncorrected {row['p99_uncorrected_ms']:.1f})  "
                        f"failed {row['failed']}")
            if a.ab:
                first = "ab" if r % 2 == 0 else "blocklab load"
                for name in order:
                    for path in ["/test", "/getDataAsync"]:
                        n = a.ab_requests if path == "/test" else a.ab_db_requests
                        for row in self.ab_vs_load(name, path, n, first):
                            row["round"] = r + 1
                            ab_rows.append(row)
                            log(f"  {row['tool']:<13} -> {name:<13} {path:<14} {row['rps']:>9,.0f} req/s  "
                                f"p99 {fmt(row['p99_ms'])} ms  client {fmt(row['client_cpu_us_per_req'], 1)} "
                                f"µs/req  failed {row['failed']}")
        result.update({"ceiling": ceilings, "rows": rows, "ab": ab_rows, "loadavg_end": loadavg(),
                       "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        self.report()
        return result

    # ---- the report ------------------------------------------------------------------------
    def report(self):
        res, a = self.result, self.a
        rows, ceil = res["rows"], res["ceiling"]
        c_rps = med([c["reads_per_s"] for c in ceil])
        c_neo = med([c["neo4j_cpu_us_per_query"] for c in ceil])
        # What Neo4j would answer with its core to itself at the ceiling's CPU per query: on a
        # shared machine the measured ceiling is also bounded by the CPU the others leave.
        c_cap = 1e6 / c_neo if c_neo else None
        summary = {"ceiling": {"reads_per_s": c_rps, "p50_us": med([c["p50_us"] for c in ceil]),
                               "p99_us": med([c["p99_us"] for c in ceil]), "neo4j_cpu_us_per_query": c_neo,
                               "neo4j_core_capacity_per_s": c_cap,
                               "neo4j_cpu_share": med([c["neo4j_cpu_share"] for c in ceil]),
                               "client_cpu_us_per_read": med([c["client_cpu_us_per_read"] for c in ceil]),
                               "errors": sum(c["errors"] for c in ceil),
                               "wrong_answers": sum(c["wrong_answers"] for c in ceil)}}

        def pick(server, path, mode, key):
            return med([r[key] for r in rows if r["server"] == server and r["path"] == path and r["mode"] == mode])

        out = []
        out.append(f"\nStudy 1 on the seed's stack — {res['started_at']} — `{res['command']}`")
        out.append(f"Placement: Neo4j + load generator on CPU {a.db_cpu}, server on CPU {a.server_cpu} "
                   f"(ceiling client on CPU {a.server_cpu}); while one of them is measured the others are frozen (SIGSTOP); load average {res['loadavg_start']} at start, "
                   f"{res['loadavg_end']} at the end; medians over {a.rounds} round(s) of {a.seconds} s; "
                   f"closed loop -k -c {a.concurrency}; Neo4j warmed {res.get('neo4j_warm_s', 0)} s, each server {a.server_warm} s.")
        link = res.get("link")
        out.append("The database: " + (
            f"{link['rtt_ms']} ms away through Toxiproxy {link['toxiproxy']} (CPU {link['cpu']}; "
            f"{link['upstream_ms']} ms on the queries, {link['downstream_ms']} ms on the answers), for the servers "
            "and the ceiling client alike; seeded and warmed directly" if link else "over loopback, no link") + ".")
        out.append("Pools: blocklab's non-blocking client " + (
            f"{a.db_async_connections} connections (--db-async-connections)" if a.db_async_connections is not None
            else "at its default (--db-async-connections not given)") + "; Play's Java driver up to 100.")
        out.append("")
        out.append(f"Neo4j's ceiling (Java driver async, {a.ceiling_concurrency} in flight, no HTTP): "
                   f"{fmt(c_rps)} reads/s, p50 {fmt(summary['ceiling']['p50_us'])} µs, "
                   f"p99 {fmt(summary['ceiling']['p99_us'])} µs, Neo4j {fmt(c_neo)} µs CPU per query "
                   f"(its core {fmt(100 * (summary['ceiling']['neo4j_cpu_share'] or 0))} % busy), "
                   f"client {fmt(summary['ceiling']['client_cpu_us_per_read'])} µs CPU per read, "
                   f"errors {summary['ceiling']['errors']}, wrong answers {summary['ceiling']['wrong_answers']}")
        out.append(f"Neo4j's core capacity at that cost (1 s ÷ its CPU per query, i.e. with its core to itself): "
                   f"{fmt(c_cap)} reads/s")
        out.append("")
        out.append("| endpoint | server | requests/s | ÷ ceiling | ÷ core capacity | p99 ms | server CPU µs/req | "
                   "server core busy | Neo4j CPU µs/query | Neo4j core busy | load generator on Neo4j's core | failed |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        table = {}
        for path in a.endpoints:
            for name in SERVERS:
                rps = pick(name, path, "closed", "rps")
                t = {k: pick(name, path, "closed", k) for k in
                     ["rps", "p99_ms", "server_cpu_us_per_req", "server_cpu_share", "neo4j_cpu_us_per_query",
                      "neo4j_cpu_share", "load_cpu_share"]}
                t["failed"] = sum(r["failed"] for r in rows if r["server"] == name and r["path"] == path
                                  and r["mode"] == "closed")
                table[(name, path)] = t
                share = rps / c_rps if (rps and c_rps and path != "/test") else None
                cshare = rps / c_cap if (rps and c_cap and path != "/test") else None
                out.append(f"| {path} | {name} | {fmt(rps)} | {fmt(share, 2)} | {fmt(cshare, 2)} | {fmt(t['p99_ms'], 1)} | "
                           f"{fmt(t['server_cpu_us_per_req'])} | {fmt(t['server_cpu_share'] and 100 * t['server_cpu_share'])} % | "
                           f"{fmt(t['neo4j_cpu_us_per_query'])} | {fmt(t['neo4j_cpu_share'] and 100 * t['neo4j_cpu_share'])} % | "
                           f"{fmt(t['load_cpu_share'] and 100 * t['load_cpu_share'])} % | {t['failed']} |")
        out.append("")
        out.append("The ceiling's client runs on the server's core and leaves Neo4j its core; under a server the "
                   "load generator shares Neo4j's core, and what it takes (its column) Neo4j cannot have.")
        out.append("")
        rate = med([r["rate"] for r in rows if r["mode"] == "open"])
        out.append(f"Open loop at 70 % of the ceiling ({fmt(rate)} requests/s), coordinated-omission-corrected:")
        out.append("")
        out.append("| endpoint | server | requests/s | p50 ms | p99 ms (corrected) | p99 ms (uncorrected) | failed |")
        out.append("|---|---|---|---|---|---|---|")
        for path in OPEN_LOOP:
            for name in SERVERS:
                fails = sum(r["failed"] for r in rows if r["server"] == name and r["path"] == path and r["mode"] == "open")
                out.append(f"| {path} | {name} | {fmt(pick(name, path, 'open', 'rps'))} | "
                           f"{fmt(pick(name, path, 'open', 'p50_ms'), 1)} | {fmt(pick(name, path, 'open', 'p99_ms'), 1)} | "
                           f"{fmt(pick(name, path, 'open', 'p99_uncorrected_ms'), 1)} | {fails} |")
        if res["ab"]:
            out.append("")
            out.append(f"The seed's client beside blocklab's (ab -k -c {a.concurrency} -n {a.ab_requests} on /test, "
                       f"-n {a.ab_db_requests} on /getDataAsync; order alternating by round):")
            out.append("")
            out.append("| server | endpoint | tool | requests/s | p99 ms | client CPU µs/req | ab ÷ blocklab load | failed |")
            out.append("|---|---|---|---|---|---|---|---|")
            for name in SERVERS:
                for path in ["/test", "/getDataAsync"]:
                    sel = lambda tool, k: med([r[k] for r in res["ab"] if r["server"] == name and r["path"] == path
                                               and r["tool"] == tool])
                    for tool in ["ab", "blocklab load"]:
                        ratio = (sel("ab", "rps") / sel("blocklab load", "rps")) if tool == "ab" and sel("blocklab load", "rps") else None
                        fails = sum(r["failed"] for r in res["ab"] if r["server"] == name and r["path"] == path
                                    and r["tool"] == tool)
                        out.append(f"| {name} | {path} | {tool} | {fmt(sel(tool, 'rps'))} | {fmt(sel(tool, 'p99_ms'), 1)} | "
                                   f"{fmt(sel(tool, 'client_cpu_us_per_req'), 1)} | {fmt(ratio, 2)} | {fails} |")

        # The goals of issue 25.
        goals = []

        def goal(name, figure, text, met):
            goals.append({"goal": name, "figure": figure, "target": text,
                          "met": None if met is None else bool(met)})

        def ratio(x, y):
            return x / y if (x is not None and y) else None

        if "/test" in a.endpoints:
            r = ratio(table[("blocklab", "/test")]["rps"], table[("play", "/test")]["rps"])
            goal("/test: blocklab ÷ Play requests/s", fmt(r, 2), "≥ 3", r is not None and r >= 3)
        if "/getDataAsync" in a.endpoints:
            r = ratio(table[("blocklab", "/getDataAsync")]["rps"], c_rps)
            goal("/getDataAsync under blocklab ÷ Neo4j's ceiling", fmt(r, 2), "≥ 0.9", r is not None and r >= 0.9)
            r = ratio(table[("blocklab", "/getDataAsync")]["rps"], c_cap)
            goal("/getDataAsync under blocklab ÷ Neo4j's core capacity (reported)", fmt(r, 2), "share", None)
        for path in [p for p in NON_BLOCKING_DB if p in a.endpoints]:
            for name in SERVERS:
                r = ratio(table[(name, path)]["rps"], c_rps)
                goal(f"{path} under {name} ÷ ceiling (reported)", fmt(r, 2), "share of the ceiling", None)
        for path in [p for p in NON_BLOCKING_DB if p in a.endpoints]:
            b, p = table[("blocklab", path)]["neo4j_cpu_us_per_query"], table[("play", path)]["neo4j_cpu_us_per_query"]
            goal(f"{path}: Neo4j CPU µs/query, blocklab vs Play's Java driver",
                 f"{fmt(b)} vs {fmt(p)} (ceiling client {fmt(c_neo)})", "blocklab ≤ Play",
                 b is not None and p is not None and b <= p)
        for path in [p for p in NON_BLOCKING_DB if p in a.endpoints]:
            b, p = table[("blocklab", path)]["server_cpu_us_per_req"], table[("play", path)]["server_cpu_us_per_req"]
            r = ratio(b, p)
            goal(f"{path}: server CPU µs/req, blocklab ÷ Play", f"{fmt(b)} / {fmt(p)} = {fmt(r, 2)}", "≤ 1/3 (0.33)",
                 r is not None and r <= 1 / 3)
            if a.lean:
                b = table[("blocklab-lean", path)]["server_cpu_us_per_req"]
                r = ratio(b, p)
                goal(f"{path}: server CPU µs/req, blocklab under lean ÷ Play (reported)",
                     f"{fmt(b)} / {fmt(p)} = {fmt(r, 2)}", "≤ 1/3 (0.33)", None)
        for path in OPEN_LOOP:
            b, p = pick("blocklab", path, "open", "p99_ms"), pick("play", path, "open", "p99_ms")
            r = ratio(b, p)
            goal(f"{path}: open-loop p99 at 70 % of the ceiling, blocklab ÷ Play",
                 f"{fmt(b, 1)} / {fmt(p, 1)} ms = {fmt(r, 2)}", "≤ 0.5", r is not None and r <= 0.5)
        failed = sum(r["failed"] for r in rows)
        goal("failed or non-2xx answers, all loads", str(failed), "0", failed == 0)
        out.append("")
        out.append("Goals of issue 25 (figure, goal, met/not met):")
        out.append("")
        out.append("| goal | figure | target | |")
        out.append("|---|---|---|---|")
        for g in goals:
            verdict = "reported" if g["met"] is None else ("met" if g["met"] else "not met")
            out.append(f"| {g['goal']} | {g['figure']} | {g['target']} | {verdict} |")
        text = "\n".join(out)
        print(text, flush=True)
        summary["table"] = {f"{k[0]} {k[1]}": v for k, v in table.items()}
        summary["goals"] = goals
        summary["markdown"] = text
        res["summary"] = summary


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="rounds; blocklab and Play alternate within each (default 3)")
    p.add_argument("--seconds", type=int, default=10, help="length of each measured load (default 10)")
    p.add_argument("--warm", type=int, default=120,
                   help="seconds of query load to warm Neo4j before measuring (default 120; ~180 on a loaded machine)")
    p.add_argument("--warm-max", type=int, default=600,
                   help="after --warm, keep warming in 30 s slices while Neo4j's CPU per query still falls "
                        ">15 %% per slice, up to this many seconds in all (default 600)")
    p.add_argument("--server-warm", type=int, default=30,
                   help="seconds of load to warm each server, over its endpoints (default 30)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 round of 3 s, 10 s of Neo4j warm-up, 6 s per server, small ab runs")
    p.add_argument("--all", action="store_true", help="all seven endpoints (default: /test /getDataAsync /getDataAkkaAsync)")
    p.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    p.add_argument("--no-ab", dest="ab", action="store_false", help="skip the ab cross-check")
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--concurrency", type=int, default=200, help="connections of the closed-loop loads (the seed's ab -c)")
    p.add_argument("--ceiling-concurrency", type=int, default=64, help="reads in flight for the ceiling (default 64)")
    p.add_argument("--ceiling-warmup", type=int, default=5,
                   help="seconds each ceiling run warms its own fresh JVM before measuring (default 5)")
    p.add_argument("--db-async-connections", type=int, default=None,
                   help="blocklab serve's async Neo4j pool (default: blocklab's own default)")
    p.add_argument("--db-rtt", type=int, default=0, metavar="MS",
                   help="put MS ms of round trip between Neo4j and the servers (Toxiproxy; default 0: none)")
    p.add_argument("--ab-requests", type=int, default=100000, help="ab -n on /test (the seed's 100000)")
    p.add_argument("--ab-db-requests", type=int, default=30000, help="ab -n on /getDataAsync (default 30000)")
    p.add_argument("--db-cpu", type=int, default=1, help="CPU of Neo4j and of the load generator (default 1)")
    p.add_argument("--server-cpu", type=int, default=0, help="CPU of the server under test (default 0)")
    p.add_argument("--lean", action="store_true",
                   help="also blocklab under --model lean (its own httparse server) as a third server, "
                        "'blocklab-lean'; the goals stay on blocklab's default model, reactive")
    a = p.parse_args()
    if a.quick:
        a.rounds, a.seconds, a.warm, a.server_warm, a.warm_max = 1, 3, 10, 6, 10
        a.ab_requests, a.ab_db_requests, a.ceiling_warmup = 10000, 3000, 2
    a.endpoints = ENDPOINTS if a.all else DEFAULT_ENDPOINTS
    if a.lean:
        SERVERS.insert(1, "blocklab-lean")
    if a.rounds < 1 or a.seconds < 1 or a.warm < 0 or a.server_warm < 0 or a.db_rtt < 0:
        p.error("--rounds and --seconds must be >= 1, --warm, --server-warm and --db-rtt >= 0")
    ncpu = os.cpu_count() or 1
    if max(a.db_cpu, a.server_cpu) >= ncpu:
        p.error(f"this machine has CPUs 0..{ncpu - 1}")

    stack = Stack()

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    status = 0
    try:
        build(a)
        bench = Bench(a, stack)
        result = bench.go()
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=2, default=str)
            log(f"wrote {a.json}")
    except Fail as e:
        log(f"study1-seed-stack: {e}")
        status = 1
    except KeyboardInterrupt:
        log("study1-seed-stack: interrupted; stopping everything it started")
        status = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the clean-up
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stack.stop_all()
    sys.exit(status)


if __name__ == "__main__":
    main()
