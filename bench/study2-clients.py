#!/usr/bin/env python3
"""Study 2's step with both clients: JMeter (the seed's) and `blocklab load`, side by side.

A step at level N is the seed's: N clients each send ONE `GET /delay?ms=D` at the same
time (JMeter: a thread group of N threads, ramp-up 0, loop count 1; blocklab: `load -c N
-n N` without -k, one request per connection). For each target (`lean`, `spring-webflux`)
and each level the script starts a FRESH server, runs the step with one client, restarts
the server, runs the step with the other (which client goes first alternates from step
to step), and prints per level the success rate, the minimum and the maximum response
time from each client and their difference (blocklab - JMeter). With --repeats > 1 it
prints the median and the range over the repeats, so the reader can judge the noise; a
difference larger than both clients' ranges together is flagged `beyond noise`.

Beside the seed's three figures it prints what explains a difference:
  * JMeter's start spread: the first to the last sample's start, from the JTL (JMeter
    starts a thread group's threads one after the other);
  * the step's span per client: the first request's start to the last answer;
  * the peak of connections the server held open at once, sampled from /proc/net/tcp
    every 100 ms for both clients alike (N if every request was in flight together);
  * the whole client's wall time (JMeter's includes its JVM's start).

Placement: the server on --server-cpu (0), the client on --client-cpu (1), by taskset.
Memory: as root with the cgroup v1 memory controller, the server runs in a child
cgroup of this script's own: `lean` capped at --cap-mib (50 MiB, the whole process,
swap included where the kernel accounts it); the JVM capped by its own heap, the
seed's -Xms25M -Xmx50M, and its cgroup only measured (the whole JVM process does not
fit 50 MiB). The cgroup's peak and its OOM kills are printed per step.

    bench/study2-clients.py                          # levels 100,500,1000,2000; 5 s delay
    bench/study2-clients.py --quick                  # levels 10,50; 1 s delay
    bench/study2-clients.py --levels 1000 --repeats 3 --json out.json
    bench/study2-clients.py --targets lean --levels 5000,10000

Needs: target/release/blocklab (cargo build --release; $BLOCKLAB names another binary), the jmeter and spring-webflux
peers (scripts/peers build jmeter spring-webflux). Stops every process it starts.
"""

import argparse
import csv
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
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKLAB = os.environ.get("BLOCKLAB") or os.path.join(ROOT, "target", "release", "blocklab")
PEERS = os.path.join(ROOT, "scripts", "peers")
CGROUP_ROOT = "/sys/fs/cgroup/memory"
TARGETS = ["lean", "spring-webflux"]
CLIENTS = ["jmeter", "blocklab"]

RUNNING = []  # every Popen this script started and has not yet reaped


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes


def stop(proc, grace=10.0):
    """SIGTERM the process group of `proc` (it was started in its own session), then SIGKILL."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    else:
        # the leader is gone; its group may not be
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if proc in RUNNING:
        RUNNING.remove(proc)


def stop_all(*_):
    for proc in list(RUNNING):
        stop(proc, grace=3.0)


def on_signal(signum, _frame):
    log(f"\nsignal {signum}: stopping every process this script started")
    stop_all()
    Cgroup.remove_all()
    sys.exit(130)


def spawn(cmd, **kw):
    proc = subprocess.Popen(cmd, start_new_session=True, **kw)
    RUNNING.append(proc)
    return proc


# ---------------------------------------------------------------- cgroup v1


def own_memory_cgroup():
    try:
        for line in open("/proc/self/cgroup"):
            _, controllers, path = line.strip().split(":", 2)
            if "memory" in controllers.split(","):
                d = os.path.join(CGROUP_ROOT, path.lstrip("/"))
                return d if os.path.isdir(d) else None
    except OSError:
        pass
    return None


class Cgroup:
    """A child memory cgroup of this script's own (v1), removed on close."""

    LIVE = []

    def __init__(self, name, limit):
        parent = own_memory_cgroup()
        self.path = os.path.join(parent, name)
        os.mkdir(self.path)
        Cgroup.LIVE.append(self)
        self.limit = limit
        if limit:
            self.write("memory.limit_in_bytes", limit)
            try:  # swap would let a capped process live on slowly instead of dying
                self.write("memory.memsw.limit_in_bytes", limit)
            except OSError:
                pass

    @staticmethod
    def available():
        if os.geteuid() != 0:
            return "not root"
        parent = own_memory_cgroup()
        if parent is None:
            return f"no cgroup v1 memory controller under {CGROUP_ROOT}"
        probe = os.path.join(parent, f"jmcmp-probe-{os.getpid()}")
        try:
            os.mkdir(probe)
            os.rmdir(probe)
        except OSError as e:
            return f"cannot create a cgroup under {parent}: {e}"
        return None

    def write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(value))

    def read(self, name):
        try:
            with open(os.path.join(self.path, name)) as f:
                return f.read()
        except OSError:
            return ""

    def wrap(self, cmd):
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", f"echo $$ > '{procs}' && exec \"$@\"", "sh"] + cmd

    def peak(self):
        v = self.read("memory.max_usage_in_bytes").strip()
        return int(v) if v else None

    def oom_kills(self):
        for line in self.read("memory.oom_control").splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def close(self):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pids = [int(p) for p in self.read("cgroup.procs").split()]
            if not pids:
                try:
                    os.rmdir(self.path)
                    break
                except OSError:
                    pass
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        if self in Cgroup.LIVE:
            Cgroup.LIVE.remove(self)

    @staticmethod
    def remove_all():
        for cg in list(Cgroup.LIVE):
            cg.close()


# ---------------------------------------------------------------- servers


class Server:
    def __init__(self, target, args, tag):
        self.target = target
        self.cgroup = None
        if args.cgroup:
            limit = args.cap_mib * 1024 * 1024 if target == "lean" else None
            self.cgroup = Cgroup(f"jmcmp-{os.getpid()}-{tag}", limit)
        if target == "lean":
            cmd = [BLOCKLAB, "serve", "--model", "lean", "--listen", "127.0.0.1:0"]
        else:
            cmd = [PEERS, "run", target, "--listen", "127.0.0.1:0"]
        if self.cgroup:
            cmd = self.cgroup.wrap(cmd)
        cmd = ["taskset", "-c", str(args.server_cpu)] + cmd
        self.out = tempfile.TemporaryFile(mode="w+")
        self.proc = spawn(cmd, stdout=subprocess.PIPE, stderr=self.out, text=True)
        self.addr = None
        started = time.monotonic()
        found = threading.Event()

        def reader():
            for line in self.proc.stdout:
                m = re.search(r"listening on http://([\d.]+:\d+)", line)
                if m and not found.is_set():
                    self.addr = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=reader, daemon=True).start()
        found.wait(120)
        if self.addr is None:
            self.out.seek(0)
            err = self.out.read()[-2000:]
            self.close()
            sys.exit(f"{target} did not print 'listening on http://ADDR' within 120 s:\n{err}")
        self.start_s = time.monotonic() - started
        self.port = int(self.addr.rsplit(":", 1)[1])
        # liveness (the sweep's own check): /test answers
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.addr}/test", timeout=5) as r:
                    r.read()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    sys.exit(f"{target} does not answer /test")
                time.sleep(0.2)
        if self.cgroup:
            try:
                self.cgroup.write("memory.max_usage_in_bytes", 0)  # peak from here
            except OSError:
                pass

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        stop(self.proc)
        if self.cgroup:
            self.cgroup.close()


# ---------------------------------------------------------------- sampling


class ConnSampler(threading.Thread):
    """Peak of ESTABLISHED connections whose local port is the server's (server side)."""

    def __init__(self, port, every=0.1):
        super().__init__(daemon=True)
        self.needle = f":{port:04X} "
        self.every = every
        self.peak = 0
        self.done = threading.Event()

    def count(self):
        # /proc/net/tcp is read in pieces while the table changes, so one socket can be
        # listed twice: count distinct (local, remote) pairs
        seen = set()
        for name in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(name) as f:
                    next(f)
                    for line in f:
                        # "  sl  local_address rem_address   st ..."
                        parts = line.split(None, 4)
                        if parts[3] == "01" and parts[1].endswith(self.needle.strip()):
                            seen.add((parts[1], parts[2]))
            except OSError:
                pass
        return len(seen)

    def run(self):
        while not self.done.is_set():
            self.peak = max(self.peak, self.count())
            self.done.wait(self.every)

    def stop(self):
        self.done.set()
        self.join()
        return self.peak


# ---------------------------------------------------------------- clients


def jmeter_timestamp_is_start():
    """JMeter writes the sample's start in timeStamp when sampleresult.timestamp.start=true."""
    try:
        home = subprocess.run([PEERS, "path", "jmeter"], capture_output=True, text=True).stdout.strip()
        with open(os.path.join(home, "home", "bin", "jmeter.properties")) as f:
            for line in f:
                line = line.strip()
                if line.startswith("sampleresult.timestamp.start"):
                    return line.split("=", 1)[1].strip().lower() == "true"
    except OSError:
        pass
    return False  # JMeter's own default: the end


def first_decile(samples):
    """The first 10 % of samples by start time against the rest (at least one each)."""
    xs = sorted(samples)
    k = max(1, len(xs) // 10)
    head, rest = xs[:k], xs[k:]
    out = {"first10_connect_p50_ms": statistics.median(s[4] for s in head) if head else None,
           "first10_max_ms": max((s[1] for s in head if s[2]), default=None),
           "rest_connect_p50_ms": statistics.median(s[4] for s in rest) if rest else None,
           "rest_max_ms": max((s[1] for s in rest if s[2]), default=None)}
    return out


def run_jmeter(url, n, args, tmp, tag):
    jtl = os.path.join(tmp, f"{tag}.jtl")
    cmd = ["taskset", "-c", str(args.client_cpu), PEERS, "run", "jmeter", "--url", url,
           "--threads", str(n), "--jtl", jtl, "--timeout-ms", str(args.timeout_s * 1000),
           "--connect-timeout-ms", str(args.timeout_s * 1000)]
    started = time.monotonic()
    proc = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    RUNNING.remove(proc)
    wall = time.monotonic() - started
    if proc.returncode != 0 or not os.path.exists(jtl):
        sys.exit(f"jmeter failed (exit {proc.returncode}):\n{out}\n{err[-3000:]}")
    rows = list(csv.DictReader(open(jtl, newline="")))
    start_is_start = JTL_START
    samples = []
    for r in rows:
        ts, el = int(r["timeStamp"]), int(r["elapsed"])
        begin = ts if start_is_start else ts - el
        samples.append((begin, el, r["success"] == "true", r["responseCode"], int(r.get("Connect") or 0),
                        int(r.get("Latency") or 0)))
    ok = [s for s in samples if s[2]]
    failures = {}
    for s in samples:
        if not s[2]:
            failures[s[3]] = failures.get(s[3], 0) + 1
    begins = [s[0] for s in samples]
    ends = [s[0] + s[1] for s in samples]
    # most in flight at once, from the JTL's own intervals
    events = sorted([(b, 1) for b in begins] + [(e, -1) for e in ends], key=lambda x: (x[0], x[1]))
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return {
        "client": "jmeter",
        "summary": out.strip(),
        "samples": len(samples),
        "ok": len(ok),
        "success_pct": 100.0 * len(ok) / n,
        "min_ms": min(s[1] for s in ok) if ok else None,
        "max_ms": max(s[1] for s in ok) if ok else None,
        "min_all_ms": min(s[1] for s in samples) if samples else None,
        "max_all_ms": max(s[1] for s in samples) if samples else None,
        "failures": failures,
        "start_spread_ms": (max(begins) - min(begins)) if begins else None,
        "span_ms": (max(ends) - min(begins)) if begins else None,
        "max_connect_ms": max(s[4] for s in samples) if samples else None,
        "median_connect_ms": statistics.median(s[4] for s in samples) if samples else None,
        # what a sample takes beyond the server's delay: the client's own part (cold code
        # per thread, connecting) plus any queueing at the server
        "median_over_delay_ms": statistics.median(s[1] for s in ok) - args.delay_ms if ok else None,
        "median_after_first_byte_ms": statistics.median(s[1] - s[5] for s in ok) if ok else None,
        "in_flight_peak_jtl": peak,
        # JMeter's first-started threads run its sampler's code cold (class loading, JIT)
        # while the rest of the threads are still being created on the same core: their
        # figures beside the other 90 %'s
        **first_decile(samples),
        "wall_s": wall,
        "jtl": jtl,
    }


def run_blocklab(url, n, args, tmp, tag):
    js = os.path.join(tmp, f"{tag}.json")
    cmd = ["taskset", "-c", str(args.client_cpu), BLOCKLAB, "load", url, "-c", str(n), "-n", str(n),
           "--json", js, "--quiet", "--timeout", f"{args.timeout_s}s"]
    started = time.monotonic()
    proc = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    RUNNING.remove(proc)
    wall = time.monotonic() - started
    if proc.returncode == 2 or not os.path.exists(js):
        sys.exit(f"blocklab load failed (exit {proc.returncode}):\n{out}\n{err[-3000:]}")
    r = json.load(open(js))
    lat = r["latency_ms"]
    # latency_ms covers completed responses (any status); with only 2xx answers that is ok
    only_ok = r["ok"] == r["completed"]
    return {
        "client": "blocklab",
        "samples": r["sent"],
        "ok": r["ok"],
        "success_pct": 100.0 * r["ok"] / n,
        "min_ms": lat["min"] if lat["count"] else None,
        "max_ms": lat["max"] if lat["count"] else None,
        "latency_is_ok_only": only_ok,
        "failures": {k: v for k, v in r["errors"].items() if v} | (
            {f"HTTP {k}": v for k, v in r["status_codes"].items() if not k.startswith(("2", "3"))}),
        "span_ms": r["duration_s"] * 1000,
        "max_connect_ms": r["connect_ms"]["max"],
        "median_connect_ms": r["connect_ms"]["p50"],
        "median_over_delay_ms": lat["p50"] - args.delay_ms if lat["count"] else None,
        "wall_s": wall,
        "json": js,
    }


CLIENT_RUN = {"jmeter": run_jmeter, "blocklab": run_blocklab}


def step(target, level, client, args, tmp, tag):
    srv = Server(target, args, tag)
    try:
        url = f"http://{srv.addr}/delay?ms={args.delay_ms}"
        sampler = ConnSampler(srv.port)
        sampler.start()
        try:
            res = CLIENT_RUN[client](url, level, args, tmp, tag)
        finally:
            res_peak = sampler.stop()
        res["conn_peak"] = res_peak
        res["server_start_s"] = round(srv.start_s, 2)
        res["server_alive_after"] = srv.alive()
        if srv.cgroup:
            peak = srv.cgroup.peak()
            res["cgroup_peak_mib"] = round(peak / 2**20, 1) if peak else None
            res["cgroup_limit_mib"] = args.cap_mib if target == "lean" else None
            res["oom_kills"] = srv.cgroup.oom_kills()
        res["loadavg"] = open("/proc/loadavg").read().split()[:3]
    finally:
        srv.close()
    return res


# ---------------------------------------------------------------- report


def fmt(v, nd=0):
    if v is None:
        return "-"
    if isinstance(v, float) and nd:
        return f"{v:.{nd}f}"
    return f"{v:,.0f}" if isinstance(v, (int, float)) else str(v)


def summarize(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None, None, None
    return statistics.median(vals), min(vals), max(vals)


def cell(vals, nd=0):
    med, lo, hi = summarize(vals)
    if med is None:
        return "-"
    if len(vals) > 1 and lo != hi:
        return f"{fmt(float(med), nd) if nd else fmt(med)} ({fmt(lo, nd) if nd else fmt(lo)}–{fmt(hi, nd) if nd else fmt(hi)})"
    return fmt(float(med), nd) if nd else fmt(med)


def verdict(jm, bl):
    """'beyond noise' when the medians differ by more than both ranges together."""
    mj, lj, hj = summarize(jm)
    mb, lb, hb = summarize(bl)
    if mj is None or mb is None:
        return "n/a"
    diff = mb - mj
    if len(jm) < 2 or len(bl) < 2:
        return f"{diff:+,.0f} (1 run)"
    noise = (hj - lj) + (hb - lb)
    return f"{diff:+,.0f} ({'beyond noise' if abs(diff) > noise else 'within noise'}: ±{noise:,.0f})"


def report(results, args):
    lines = []
    for target in args.targets:
        lines.append(f"\n### {target} — /delay?ms={args.delay_ms}, {args.repeats} repeat(s); "
                     f"cells: median (min–max over repeats); ms; "
                     f"Δ = blocklab − JMeter\n")
        lines.append("| level | JMeter ok % | blocklab ok % | Δ ok % | JMeter min | blocklab min | Δ min | "
                     "JMeter max | blocklab max | Δ max |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for level in args.levels:
            rs = [r for r in results if r["target"] == target and r["level"] == level]
            jm = [r for r in rs if r["client"] == "jmeter"]
            bl = [r for r in rs if r["client"] == "blocklab"]
            g = lambda rr, k: [r[k] for r in rr]
            lines.append(
                f"| {level:,} | {cell(g(jm, 'success_pct'), 1)} | {cell(g(bl, 'success_pct'), 1)} | "
                f"{verdict(g(jm, 'success_pct'), g(bl, 'success_pct'))} | "
                f"{cell(g(jm, 'min_ms'))} | {cell(g(bl, 'min_ms'))} | "
                f"{verdict(g(jm, 'min_ms'), g(bl, 'min_ms'))} | "
                f"{cell(g(jm, 'max_ms'))} | {cell(g(bl, 'max_ms'))} | "
                f"{verdict(g(jm, 'max_ms'), g(bl, 'max_ms'))} |")
        lines.append("")
        lines.append("What explains it (medians): JMeter's start spread (first to last sample start, "
                     "JTL), step span (first start to last answer), peak connections the server held "
                     "at once (sampled every 100 ms, both clients), the client's wall time, server "
                     "memory peak (cgroup)")
        lines.append("")
        lines.append("| level | JMeter start spread ms | JMeter in flight peak (JTL) | JMeter span ms | "
                     "blocklab span ms | peak conns JMeter | peak conns blocklab | median − delay JM / BL ms | "
                     "connect p50 / max JM | connect p50 / max BL | JMeter wall s | "
                     "blocklab wall s | failures JMeter / blocklab | server MiB peak JM / BL | "
                     "JMeter first 10 % started: connect p50 / max elapsed | JMeter other 90 %: connect p50 / max elapsed |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for level in args.levels:
            rs = [r for r in results if r["target"] == target and r["level"] == level]
            jm = [r for r in rs if r["client"] == "jmeter"]
            bl = [r for r in rs if r["client"] == "blocklab"]
            g = lambda rr, k: [r.get(k) for r in rr]

            def fails(rr):
                tot = {}
                for r in rr:
                    for k, v in r["failures"].items():
                        tot[k] = tot.get(k, 0) + v
                return ", ".join(f"{k}: {v}" for k, v in tot.items()) or "none"

            lines.append(
                f"| {level:,} | {cell(g(jm, 'start_spread_ms'))} | {cell(g(jm, 'in_flight_peak_jtl'))} | "
                f"{cell(g(jm, 'span_ms'))} | {cell(g(bl, 'span_ms'))} | {cell(g(jm, 'conn_peak'))} | "
                f"{cell(g(bl, 'conn_peak'))} | {cell(g(jm, 'median_over_delay_ms'))} / "
                f"{cell(g(bl, 'median_over_delay_ms'))} | {cell(g(jm, 'median_connect_ms'))} / "
                f"{cell(g(jm, 'max_connect_ms'))} | {cell(g(bl, 'median_connect_ms'), 1)} / "
                f"{cell(g(bl, 'max_connect_ms'), 1)} | {cell(g(jm, 'wall_s'), 1)} | {cell(g(bl, 'wall_s'), 1)} | "
                f"{fails(jm)} / {fails(bl)} | {cell(g(jm, 'cgroup_peak_mib'), 1)} / "
                f"{cell(g(bl, 'cgroup_peak_mib'), 1)} | {cell(g(jm, 'first10_connect_p50_ms'))} / "
                f"{cell(g(jm, 'first10_max_ms'))} | {cell(g(jm, 'rest_connect_p50_ms'))} / "
                f"{cell(g(jm, 'rest_max_ms'))} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--targets", default=",".join(TARGETS), help="comma list of lean, spring-webflux")
    p.add_argument("--levels", help="comma list of concurrency levels [default: 100,500,1000,2000; --quick 10,50]")
    p.add_argument("--delay-ms", type=int, help="the server's wait [default: 5000; --quick 1000]")
    p.add_argument("--repeats", type=int, default=1, help="runs of each (target, level, client)")
    p.add_argument("--quick", action="store_true", help="levels 10,50 and a 1 s delay")
    p.add_argument("--timeout-s", type=int, default=60, help="both clients' connect and response limit")
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    p.add_argument("--cap-mib", type=int, default=50, help="lean's cgroup memory limit")
    p.add_argument("--no-cgroup", action="store_true", help="no memory cgroup even as root")
    p.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    p.add_argument("--keep", action="store_true", help="keep the JTLs and JSON results (printed dir)")
    args = p.parse_args()
    if args.levels is None:
        args.levels = "10,50" if args.quick else "100,500,1000,2000"
    if args.delay_ms is None:
        args.delay_ms = 1000 if args.quick else 5000
    args.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    for t in args.targets:
        if t not in TARGETS:
            sys.exit(f"unknown target {t!r} (one of {', '.join(TARGETS)})")
    args.levels = [int(x) for x in args.levels.split(",")]

    # what must be here
    if not os.access(BLOCKLAB, os.X_OK):
        sys.exit(f"{BLOCKLAB} is missing: run `cargo build --release --locked` first")
    for peer in ["jmeter"] + [t for t in args.targets if t != "lean"]:
        if subprocess.run([PEERS, "check", peer], capture_output=True).returncode != 0:
            sys.exit(f"the {peer} peer is not built (or out of date): run `scripts/peers build {peer}`")
    if not shutil.which("taskset"):
        sys.exit("taskset (util-linux) is needed to pin the server and the client")
    global JTL_START
    JTL_START = jmeter_timestamp_is_start()

    # file descriptors: a connection each on both sides, plus the JVMs' own
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(args.levels) * 2 + 1024
    new = hard if hard == resource.RLIM_INFINITY else min(hard, max(soft, want))
    resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    if new < want:
        log(f"note: RLIMIT_NOFILE is {new} (hard limit), below the {want} the top level may need")

    why = Cgroup.available() if not args.no_cgroup else "--no-cgroup"
    args.cgroup = why is None
    cpus = os.cpu_count()
    placement = (f"server on CPU {args.server_cpu}, client on CPU {args.client_cpu} (taskset; "
                 f"{cpus} CPUs; the script itself unpinned)")
    memory = (f"lean in a cgroup v1 capped at {args.cap_mib} MiB (memory.limit_in_bytes); "
              f"spring-webflux -Xms25M -Xmx50M, its cgroup measured only" if args.cgroup
              else f"no cgroup ({why}); spring-webflux -Xms25M -Xmx50M")
    log(f"placement: {placement}\nmemory: {memory}\nRLIMIT_NOFILE {new}; JTL timeStamp is the sample's "
        f"{'start' if JTL_START else 'end'}; load average {open('/proc/loadavg').read().strip()}")

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    tmp = tempfile.mkdtemp(prefix="study2-clients-")
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_before = open("/proc/loadavg").read().split()[:3]
    results = []
    k = 0
    try:
        for rep in range(args.repeats):
            for target in args.targets:
                for li, level in enumerate(args.levels):
                    order = CLIENTS if (li + rep) % 2 == 0 else CLIENTS[::-1]
                    for client in order:
                        k += 1
                        tag = f"{target}-{level}-{client}-r{rep}"
                        log(f"[{time.strftime('%H:%M:%S')}] {tag} ...")
                        r = step(target, level, client, args, tmp, tag)
                        r.update(target=target, level=level, repeat=rep, order=order.index(client))
                        results.append(r)
                        log(f"    ok {r['ok']}/{level}, min {fmt(r['min_ms'])} ms, max {fmt(r['max_ms'])} ms, "
                            f"span {fmt(r['span_ms'])} ms, peak conns {r['conn_peak']}"
                            + (f", JMeter start spread {r['start_spread_ms']} ms" if client == "jmeter" else "")
                            + (f", server MiB peak {r.get('cgroup_peak_mib')}, oom kills {r.get('oom_kills')}"
                               if args.cgroup else "")
                            + (", SERVER GONE" if not r["server_alive_after"] else ""))
    finally:
        stop_all()
        Cgroup.remove_all()
    load_after = open("/proc/loadavg").read().split()[:3]

    head = (f"study2-clients {started_at}: targets {', '.join(args.targets)}; levels "
            f"{', '.join(map(str, args.levels))}; /delay?ms={args.delay_ms}; timeouts {args.timeout_s} s "
            f"(both clients, connect and response); {placement}; {memory}; load average "
            f"{' '.join(load_before)} before, {' '.join(load_after)} after")
    print(head)
    print(report(results, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started_at": started_at, "placement": placement, "memory": memory,
                       "delay_ms": args.delay_ms, "levels": args.levels, "targets": args.targets,
                       "repeats": args.repeats, "timeout_s": args.timeout_s,
                       "loadavg_before": load_before, "loadavg_after": load_after,
                       "jtl_timestamp_is_start": JTL_START, "results": results}, f, indent=1)
        log(f"figures written to {args.json}")
    if args.keep:
        log(f"JTLs and load results kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


JTL_START = False

if __name__ == "__main__":
    main()
