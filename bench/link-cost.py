#!/usr/bin/env python3
"""What Toxiproxy costs a server (issue 36): blocklab's own CPU per request on one
non-blocking endpoint, with Neo4j reached directly and through a Toxiproxy link with
no delay of its own, at one open-loop rate, the two paths alternating round by round.

A closed loop would compare two different rates (the link slows each read, so fewer
requests a second), and a server's CPU per request falls as its rate rises (more
requests per wakeup): holding the rate equal leaves the link as the one difference.

What it does (Python 3 standard library only):

 1. starts its own Neo4j (scripts/neo4j, pinned to --db-cpu), seeds --nodes Content
    nodes, and warms it (--warm seconds of closed-loop /getDataAsync through a direct
    blocklab; Neo4j's JIT);
 2. starts Toxiproxy (peers/toxiproxy, pinned to --db-cpu) with one proxy in front of
    Neo4j and no toxic;
 3. per round, each path in turn (direct first in odd rounds, the link first in even):
    a fresh `blocklab serve --db URL` alone on --server-cpu, --server-warm seconds of
    closed-loop load, then `blocklab load -k -c 200 --rate R -z D` on --db-cpu; the
    server's utime + stime and Toxiproxy's from /proc around the measured load, divided
    by the requests answered 2xx;
 4. prints each round's figures, the medians and ranges, the link ÷ direct ratio of the
    medians and of each round's pair against the goal (≤ 1.10: met when every round's
    pair is, at the edge when some are); --json FILE writes everything.

It stops everything it started by pid, and stops and wipes its Neo4j, also on Ctrl-C.

    bench/link-cost.py                         # 3 rounds at 1200 req/s, ~6 minutes
    bench/link-cost.py --rounds 5 --rate 2000 --json link-cost.json
    bench/link-cost.py --quick                 # smoke: 1 round of 5 s
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from _common import BLOCKLAB, ROOT, cpu_seconds, free_port, loadavg

NEO4J = os.path.join(ROOT, "scripts", "neo4j")
TOXIPROXY_OUT = os.path.join(ROOT, ".local", "peers", "toxiproxy")
GOAL = 1.10


class Fail(Exception):
    """A clear error for the user: one line, exit status 1."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def pin(cpu):
    return ["taskset", "-c", str(cpu)]


class Processes:
    """Everything the run starts, stopped by pid whatever happens."""

    def __init__(self):
        self.procs = []
        self.neo4j_port = None

    def start(self, name, cmd, timeout=60):
        """Starts `cmd`, waits for its 'listening on http://ADDR' line; returns (addr, Popen)."""
        err = tempfile.NamedTemporaryFile(prefix=f"link-cost-{name}-", suffix=".log", delete=False)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
                             start_new_session=True)
        self.procs.append(p)
        box = []
        t = threading.Thread(target=lambda: box.append(p.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout)
        m = re.search(r"listening on http://(\S+)", box[0] if box else "")
        if not m:
            self.stop(p)
            with open(err.name) as f:
                raise Fail(f"{name} did not start within {timeout} s: {f.read()[-500:].strip()}")
        threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
        return m.group(1), p

    def stop(self, p):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self):
        for p in list(self.procs):
            try:
                self.stop(p)
            except (OSError, subprocess.SubprocessError) as e:
                log(f"  stopping pid {p.pid}: {e}")
        if self.neo4j_port is not None:
            subprocess.run([NEO4J, "wipe", str(self.neo4j_port)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            log(f"Neo4j on port {self.neo4j_port} stopped and its store wiped")
            self.neo4j_port = None


def run(cmd, timeout=None):
    r = subprocess.run(cmd, text=True, capture_output=True, timeout=timeout)
    if r.returncode != 0:
        raise Fail(f"failed ({r.returncode}): {' '.join(cmd)}: {r.stderr.strip()[-500:]}")
    return r.stdout


def load(a, url, seconds, rate=None, json_path=None):
    """blocklab load on --db-cpu; returns its JSON (or None without json_path)."""
    cmd = pin(a.db_cpu) + [BLOCKLAB, "load", "-k", "--quiet", "-c", str(a.connections), "-z", f"{seconds}s"]
    if rate:
        cmd += ["--rate", str(rate)]
    if json_path:
        cmd += ["--json", json_path]
    subprocess.run(cmd + [url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=seconds + 120)
    if json_path:
        with open(json_path) as f:
            return json.load(f)
    return None


def toxiproxy(api, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{api}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read().decode()
    except OSError as e:
        raise Fail(f"Toxiproxy {method} {path}: {e}")


def measure(a, procs, path, db, toxi_pid, tmp):
    """One measured run of a fresh server reading `db`: its CPU and Toxiproxy's per answer."""
    addr, server = procs.start("blocklab", pin(a.server_cpu) + [
        BLOCKLAB, "serve", "--listen", "127.0.0.1:0", "--db", db, "--nodes", str(a.nodes)])
    url = f"http://{addr}/getDataAsync"
    try:
        load(a, url, a.server_warm)
        s0, x0 = cpu_seconds(server.pid), cpu_seconds(toxi_pid)
        doc = load(a, url, a.seconds, rate=a.rate, json_path=os.path.join(tmp, "load.json"))
        s1, x1 = cpu_seconds(server.pid), cpu_seconds(toxi_pid)
    finally:
        procs.stop(server)
    ok = doc.get("ok") or 0
    if ok == 0:
        raise Fail(f"{path}: no request answered 2xx ({doc.get('errors')})")
    unfinished = doc.get("in_flight_at_deadline") or 0
    return {"path": path, "sent": doc.get("sent"), "ok": ok, "unfinished": unfinished,
            "failed": (doc.get("sent") or 0) - ok - unfinished,
            "errors": {k: n for k, n in (doc.get("errors") or {}).items() if n},
            "status_codes": doc.get("status_codes"),
            "rps": doc.get("rps"), "p99_ms": (doc.get("corrected_latency_ms") or doc["latency_ms"])["p99"],
            "server_cpu_us_per_req": (s1 - s0) * 1e6 / ok,
            "toxiproxy_cpu_us_per_req": (x1 - x0) * 1e6 / ok if path == "link" else None}


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="rounds; the paths alternate which goes first (default 3)")
    p.add_argument("--rate", type=int, default=1200, help="open-loop requests/s, both paths (default 1200)")
    p.add_argument("--seconds", type=int, default=20, help="length of each measured load (default 20)")
    p.add_argument("--warm", type=int, default=90, help="seconds of load to warm Neo4j first (default 90)")
    p.add_argument("--server-warm", type=int, default=10, help="seconds of closed-loop load per fresh server (default 10)")
    p.add_argument("--connections", type=int, default=200, help="the load's connections (the seed's 200)")
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--db-cpu", type=int, default=1, help="CPU of Neo4j, Toxiproxy and the load (default 1)")
    p.add_argument("--server-cpu", type=int, default=0, help="CPU of the server, alone (default 0)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 round of 5 s, 10 s of warm-up")
    p.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    a = p.parse_args()
    if a.quick:
        a.rounds, a.seconds, a.warm, a.server_warm = 1, 5, 10, 3
    if min(a.rounds, a.rate, a.seconds, a.connections, a.nodes) < 1 or min(a.warm, a.server_warm) < 0:
        p.error("--rounds, --rate, --seconds, --connections and --nodes must be >= 1, the warm-ups >= 0")
    if max(a.db_cpu, a.server_cpu) >= (os.cpu_count() or 1):
        p.error(f"this machine has CPUs 0..{(os.cpu_count() or 1) - 1}")

    procs = Processes()

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    status = 0
    try:
        if not os.path.exists(BLOCKLAB):
            raise Fail(f"{BLOCKLAB} is missing: cargo build --release")
        run([NEO4J, "build"])
        run([os.path.join(ROOT, "peers", "toxiproxy", "build"), TOXIPROXY_OUT])
        tmp = tempfile.mkdtemp(prefix="link-cost-")
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        port = free_port()
        procs.neo4j_port = port
        log(f"starting Neo4j on 127.0.0.1:{port} (CPU {a.db_cpu}); load average {loadavg()}")
        out = subprocess.run([NEO4J, "start", str(port)], env=dict(os.environ, NEO4J_CPUS=str(a.db_cpu)),
                             text=True, capture_output=True, timeout=180)
        if out.returncode != 0:
            raise Fail(f"scripts/neo4j start {port}: {out.stderr.strip()[-500:]}")
        direct = out.stdout.strip().splitlines()[-1]
        run(pin(a.db_cpu) + [BLOCKLAB, "seed", "--db", direct, "--nodes", str(a.nodes)], timeout=600)
        log(f"warming Neo4j: {a.warm} s of closed-loop /getDataAsync through a direct blocklab")
        addr, warm_server = procs.start("blocklab", pin(a.server_cpu) + [
            BLOCKLAB, "serve", "--listen", "127.0.0.1:0", "--db", direct, "--nodes", str(a.nodes)])
        load(a, f"http://{addr}/getDataAsync", a.warm)
        procs.stop(warm_server)

        api, toxi = procs.start("toxiproxy", pin(a.db_cpu) + [
            os.path.join(ROOT, "peers", "toxiproxy", "run"), TOXIPROXY_OUT, "--listen", "127.0.0.1:0"])
        version = toxiproxy(api, "GET", "/version").strip()
        listen = f"127.0.0.1:{free_port()}"
        toxiproxy(api, "POST", "/proxies", {"name": "neo4j", "listen": listen,
                                            "upstream": direct.split("://", 1)[1], "enabled": True})
        linked = f"bolt://{listen}"
        log(f"Toxiproxy {version} (pid {toxi.pid}, CPU {a.db_cpu}): {linked} -> {direct}, no toxic")

        rows = []
        for r in range(a.rounds):
            order = [("direct", direct), ("link", linked)]
            for path, db in (order if r % 2 == 0 else order[::-1]):
                row = measure(a, procs, path, db, toxi.pid, tmp)
                row["round"] = r + 1
                rows.append(row)
                toxi_text = (f", Toxiproxy {row['toxiproxy_cpu_us_per_req']:.1f} µs/req"
                             if row["toxiproxy_cpu_us_per_req"] is not None else "")
                kinds = ", ".join(f"{n} {k}" for k, n in row["errors"].items())
                log(f"  round {r + 1} {path:<6} {row['ok']:>7,} answered of {row['sent']:,} sent "
                    f"({row['failed']} failed{': ' + kinds if kinds else ''}, {row['unfinished']} in flight at the end) "
                    f"({row['rps']:,.0f} req/s), server {row['server_cpu_us_per_req']:.1f} µs/req{toxi_text}, "
                    f"p99 {row['p99_ms']:.1f} ms")

        def of(path, key):
            return [r[key] for r in rows if r["path"] == path]

        med = {path: statistics.median(of(path, "server_cpu_us_per_req")) for path in ["direct", "link"]}
        ratio = med["link"] / med["direct"]
        # Each round's pair ran back to back: their ratio is the one the machine's drift spares.
        per_round = [link / direct for link, direct in
                     zip(of("link", "server_cpu_us_per_req"), of("direct", "server_cpu_us_per_req"))]
        lo, hi = min(per_round), max(per_round)
        verdict = "met" if hi <= GOAL else ("not met" if lo > GOAL else "at the edge")
        print(f"\nWhat the link costs the server — {started} — `{' '.join(['bench/link-cost.py'] + sys.argv[1:])}`")
        print(f"blocklab serve (reactive, default pools) alone on CPU {a.server_cpu}; Neo4j, Toxiproxy {version} and "
              f"`blocklab load -k -c {a.connections} --rate {a.rate}` on CPU {a.db_cpu}; /getDataAsync, "
              f"{a.rounds} round(s) of {a.seconds} s per path, a fresh server each, the paths alternating.")
        print("")
        print("| path | server CPU µs/req, median (range) | Toxiproxy CPU µs/req | answered | failed | in flight at the end |")
        print("|---|---|---|---|---|---|")
        for path in ["direct", "link"]:
            print(f"| {path} | {spread(of(path, 'server_cpu_us_per_req'))} | {spread(of(path, 'toxiproxy_cpu_us_per_req'))} "
                  f"| {sum(of(path, 'ok')):,} | {sum(of(path, 'failed')):,} | {sum(of(path, 'unfinished')):,} |")
        print("")
        print(f"Server CPU through the link ÷ directly: {ratio:.2f} (medians); each round's pair: "
              f"{', '.join(f'{r:.2f}' for r in per_round)}; goal ≤ {GOAL:.2f}: {verdict}.")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"started_at": started, "settings": vars(a), "toxiproxy": version, "rows": rows,
                           "median_us": med, "ratio": ratio, "per_round": per_round, "verdict": verdict}, f,
                          indent=2)
            log(f"wrote {a.json}")
    except Fail as e:
        log(f"link-cost: {e}")
        status = 1
    except KeyboardInterrupt:
        log("link-cost: interrupted; stopping everything it started")
        status = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        procs.stop_all()
    sys.exit(status)


if __name__ == "__main__":
    main()
