#!/usr/bin/env python3
"""blocklab load beside wrk, ab, hey, h2load --h1 and oha, in one run.

The target (nginx `return 200` when nginx is installed, else blocklab's own
/test) is pinned to one core and every load generator to another, with the
same concurrency and keep-alive. The tools take turns, round after round, so
the machine's noise falls on all of them alike. Printed per tool: the median
requests/s, the ratio to wrk, and the CPU time each tool spent per request
(user + system, from the kernel's rusage of the tool's process).

Then the same at --big-c connections (default 10,000, the sweep's top level)
against `blocklab serve /test` (--workers 1), and blocklab's peak RSS for a
100k-request and a 10M-request run (they should be about equal: the
histograms are constant-size).

oha is used when on the PATH or in .local/oha; when absent the script first
runs `cargo install oha --locked --root .local/oha` (minutes; skipped with a
note if it does not build; `--no-oha` skips it). The other tools are used
when installed and named when not (Debian: wrk, apache2-utils, hey, nghttp2-client).

    bench/loadgen-vs-peers.py                    # 5 rounds of 5 s, then the RSS runs
    bench/loadgen-vs-peers.py --rounds 3 --seconds 3 --no-long-rss --big-c 0
    bench/loadgen-vs-peers.py --rounds 1 --no-long-rss --big-c 0 --no-oha --json F.json   # for bench/headline.py
"""

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

from _common import BLOCKLAB, ROOT, figures, free_port, number, wait_for


def rusage_of(cmd, cpu):
    """Runs cmd pinned to `cpu` and returns (stdout, stderr, wall, user+sys, maxrss KiB)."""
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        out = os.open(tempfile.gettempdir() + f"/bench-{os.getppid()}.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        errf = os.open(tempfile.gettempdir() + f"/bench-{os.getppid()}.err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(errf, 2)
        os.execvp("taskset", ["taskset", "-c", str(cpu)] + cmd)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - started
    with open(tempfile.gettempdir() + f"/bench-{os.getpid()}.out") as f:
        out = f.read()
    with open(tempfile.gettempdir() + f"/bench-{os.getpid()}.err") as f:
        err = f.read()
    return out, err, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, os.waitstatus_to_exitcode(status)


def start_target(cpu, tmp):
    """Starts the target pinned to `cpu`; returns (process, url, description)."""
    port = free_port()
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx:
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "works"; }}
    }}
}}
""")
        proc = subprocess.Popen(["taskset", "-c", str(cpu), nginx, "-c", conf, "-p", tmp],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        desc = "nginx `return 200` (1 worker process)"
        path = "/"
    else:
        proc = subprocess.Popen(["taskset", "-c", str(cpu), BLOCKLAB, "serve", "--listen", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        desc = "blocklab serve /test (nginx not installed)"
        path = "/test"
    wait_for(port)
    return proc, f"http://127.0.0.1:{port}{path}", desc


def tools(url, conns, seconds, tmp):
    """(name, command, how to read requests/s and request count from its output)."""
    json_file = os.path.join(tmp, "blocklab.json")

    def blocklab_read(out):
        with open(json_file) as f:
            doc = json.load(f)
        return doc["rps"], doc["completed"]

    def wrk_read(out):
        rps = number(r"Requests/sec:\s+([\d.]+)", out)
        n = number(r"(\d+) requests in", out)
        return rps, n

    def ab_read(out):
        return number(r"Requests per second:\s+([\d.]+)", out), number(r"Complete requests:\s+(\d+)", out)

    def hey_read(out):
        rps = number(r"Requests/sec:\s+([\d.]+)", out)
        n = sum(int(x) for x in re.findall(r"\[\d+\]\s+(\d+) responses", out))
        return rps, n

    def h2load_read(out):
        return number(r"finished in [^,]+, ([\d.]+) req/s", out), number(r"(\d+) succeeded", out)

    def oha_read(out):
        doc = json.loads(out)
        return doc["summary"]["requestsPerSec"], sum(doc.get("statusCodeDistribution", {}).values())

    found = [("blocklab", [BLOCKLAB, "load", "-k", "-q", "-c", str(conns), "-z", f"{seconds}s", "--threads", "1",
                           "--json", json_file, url], blocklab_read)]
    if shutil.which("wrk"):
        found.append(("wrk", ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", url], wrk_read))
    if shutil.which("ab"):
        found.append(("ab", ["ab", "-k", "-q", "-c", str(conns), "-t", str(seconds), "-n", "100000000", url], ab_read))
    if shutil.which("hey"):
        found.append(("hey", ["hey", "-c", str(conns), "-z", f"{seconds}s", url], hey_read))
    if shutil.which("h2load"):
        found.append(("h2load", ["h2load", "--h1", "-t", "1", "-c", str(conns), "-D", str(seconds), url], h2load_read))
    oha = shutil.which("oha") or (OHA if os.path.exists(OHA) else None)
    if oha:
        found.append(("oha", [oha, "--no-tui", "--output-format", "json", "-c", str(conns), "-z", f"{seconds}s", url],
                      oha_read))
    return found


OHA = os.path.join(ROOT, ".local", "oha", "bin", "oha")


def install_oha():
    if shutil.which("oha") or os.path.exists(OHA):
        return
    print("installing oha into .local/oha (cargo install oha --locked) ...", flush=True)
    r = subprocess.run(["cargo", "install", "oha", "--locked", "--root", os.path.join(ROOT, ".local", "oha")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"note: oha did not build, it is skipped: {r.stderr.strip().splitlines()[-1:]}")


def as_json(results):
    """compare's results as {tool: {"rps": [...], "cpu_us_per_request": [...]}}, one value per round it answered."""
    return {name: {"rps": [x[0] for x in runs], "cpu_us_per_request": [x[1] for x in runs]}
            for name, runs in results.items()}


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def compare(peers, rounds, load_cpu):
    """Runs every tool once per round; returns {name: [(rps, cpu us per request)]}."""
    results = {name: [] for name, _, _ in peers}
    for r in range(rounds):
        for name, cmd, read in peers:
            out, err, wall, cpu, rss, code = rusage_of(cmd, load_cpu)
            found = figures(read, out, err, code, f"round {r + 1} {name}")
            if not found:
                continue
            rps, n = found
            results[name].append((rps, cpu / n * 1e6))
            print(f"  round {r + 1} {name:<9} {rps:>10.0f} req/s  {cpu / n * 1e6:6.2f} us CPU/request")
    return results


def table(results):
    print()
    wrk_median = statistics.median(x[0] for x in results["wrk"]) if results.get("wrk") else None
    print("| tool | median requests/s | ratio to wrk | median CPU µs/request |")
    print("|---|---|---|---|")
    for name, runs in results.items():
        if not runs:
            print(f"| {name} | failed | | |")
            continue
        med = statistics.median(x[0] for x in runs)
        cpu = statistics.median(x[1] for x in runs)
        ratio = f"{med / wrk_median:.2f}" if wrk_median else "n/a"
        print(f"| {name} | {med:,.0f} | {ratio} | {cpu:.2f} |")
    if wrk_median and results.get("blocklab"):
        b = statistics.median(x[0] for x in results["blocklab"])
        print(f"\nblocklab/wrk = {b / wrk_median:.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("-c", "--connections", type=int, default=200)
    p.add_argument("--target-cpu", type=int, default=0)
    p.add_argument("--load-cpu", type=int, default=1)
    p.add_argument("--no-long-rss", action="store_true", help="skip the 10M-request RSS run")
    p.add_argument("--big-c", type=int, default=10_000, help="connections of the second comparison (0: skip it)")
    p.add_argument("--no-oha", action="store_true", help="do not install oha into .local/oha when it is absent")
    p.add_argument("--json", metavar="FILE", help="also write each tool's requests/s and CPU per request per round to FILE")
    args = p.parse_args()

    if not os.path.exists(BLOCKLAB):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    if not args.no_oha:
        install_oha()
    raise_nofile()
    tmp = tempfile.mkdtemp(prefix="loadgen-bench-")
    target, url, desc = start_target(args.target_cpu, tmp)
    try:
        peers = tools(url, args.connections, args.seconds, tmp)
        names = [t[0] for t in peers]
        missing = [t for t in ("wrk", "ab", "hey", "h2load", "oha") if t not in names]
        if missing:
            print(f"not installed, left out: {', '.join(missing)}")
        print(f"target: {desc}, pinned to CPU {args.target_cpu}; load generators pinned to CPU {args.load_cpu}")
        print(f"{args.rounds} rounds x {args.seconds} s per tool, {args.connections} connections, keep-alive, "
              f"one thread each; tools: {', '.join(t[0] for t in peers)}\n")
        results = compare(peers, args.rounds, args.load_cpu)
        table(results)
        doc = {"script": "loadgen-vs-peers", "target": desc, "rounds": args.rounds, "seconds": args.seconds,
               "connections": args.connections, "not_installed": missing, "tools": as_json(results)}
        if args.big_c:
            big_port = free_port()
            big = subprocess.Popen(["taskset", "-c", str(args.target_cpu), BLOCKLAB, "serve", "--listen",
                                    f"127.0.0.1:{big_port}", "--workers", "1"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for(big_port)
                big_url = f"http://127.0.0.1:{big_port}/test"
                print(f"\n-c {args.big_c} against blocklab serve /test (--workers 1, CPU {args.target_cpu}); "
                      f"RLIMIT_NOFILE {raise_nofile()}:")
                big_peers = tools(big_url, args.big_c, args.seconds, tmp)
                big_results = compare(big_peers, args.rounds, args.load_cpu)
                table(big_results)
                doc["big_c"] = {"connections": args.big_c, "tools": as_json(big_results)}
            finally:
                big.terminate()
                big.wait(timeout=15)

        print("\nblocklab peak RSS by run length:")
        runs = [100_000] + ([] if args.no_long_rss else [10_000_000])
        for n in runs:
            cmd = [BLOCKLAB, "load", "-k", "-q", "-c", str(args.connections), "-n", str(n), "--threads", "1", url]
            out, err, wall, cpu, rss, code = rusage_of(cmd, args.load_cpu)
            print(f"  -n {n:>10,}: peak RSS {rss / 1024:.1f} MiB, {wall:.1f} s, exit {code}")
            doc.setdefault("peak_rss_mib", {})[str(n)] = rss / 1024
        if args.json:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=2)
    finally:
        target.terminate()
        target.wait(timeout=10)


if __name__ == "__main__":
    main()
