#!/usr/bin/env python3
"""blocklab serve's hot path beside nginx, in one run.

nginx (`return 200 "works"`, one worker process) and `blocklab serve`
(`--workers 1`, the embedded database, no simulated latency) run at the same
time, each pinned to the same core (--server-cpu); wrk (and `blocklab load`)
run on the other core (--load-cpu). Round after round, every target takes its
turn, so the machine's noise falls on all of them alike. Per target: the
median requests/s, and the server's CPU time per request (user + system of
every thread of the server's process, from /proc/PID/stat, over the round,
divided by the requests wrk counted).

Printed ratios (medians):
  /test ÷ nginx                        goal ≥ 0.9 (reactive: hyper + axum)
  lean /test ÷ nginx                   goal ≥ 1.1
  /getDataAsync ÷ /test (0 ms)         goal ≥ 0.5, under reactive and under lean
  /getData ÷ /test (0 ms)

The embedded database is read the default way (its property index; pass
--embedded-read cypher for the Cypher path). Extra rows: `blocklab load` as
the client against nginx and /test (a check that the ratio is not wrk's alone).

--pipeline N has wrk write N requests at a time on each connection: wrk's
cost per request falls well below the servers', so the servers set the rate
(without it, wrk on its one core is the limit near 200,000 requests/s here).
Both nginx and blocklab answer pipelined requests in order.

--before BINARY adds another build of blocklab (say, main before a change)
as more targets in the same rounds, and prints after ÷ before.

--instructions then counts, for each server in turn, the user-space CPU
instructions it executes per request (valgrind's callgrind, counters zeroed
after a warm-up, -n requests over 20 keep-alive connections). Unlike
requests/s, that count does not move with the machine's noise, so it shows
what a change to the server's own code buys even when the rounds cannot;
kernel time (the socket calls, about two thirds of /test's CPU here) is not in
it, and equal counts can still run at different speeds.

It installs nothing: it uses wrk and nginx from the PATH (or /usr/sbin/nginx),
and valgrind for --instructions, and says so when they are missing.

    bench/serve-vs-nginx.py                      # 5 rounds of 5 s
    bench/serve-vs-nginx.py --rounds 3 --seconds 3
    bench/serve-vs-nginx.py --before /tmp/blocklab-main --instructions
    bench/serve-vs-nginx.py --pipeline 16 --no-blocklab-load   # the servers set the rate
    bench/serve-vs-nginx.py --rounds 1 --json F.json           # one round, machine-readable (bench/headline.py)
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from _common import BLOCKLAB, ROOT, cpu_seconds, free_port, instructions_per_request, nginx_config, wait_for


def start_nginx(nginx, cpu, tmp):
    port = free_port()
    conf = nginx_config(tmp, port)
    proc = subprocess.Popen(["taskset", "-c", str(cpu), nginx, "-c", conf, "-p", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port, proc)
    return proc, port


READ = []


def blocklab_command(binary, port, model, nodes):
    cmd = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--workers", "1", "--nodes", str(nodes)] + READ
    return cmd if model == "reactive" else cmd + ["--model", model]


def start_blocklab(cpu, model, nodes, binary=BLOCKLAB):
    port = free_port()
    cmd = ["taskset", "-c", str(cpu)] + blocklab_command(binary, port, model, nodes)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"})
    wait_for(port, proc)
    return proc, port


PIPELINE = []


def pipeline_script(tmp, depth):
    """A wrk script that writes `depth` requests at a time on each connection
    (HTTP/1.1 pipelining), so the client's cost per request falls below the
    server's."""
    path = os.path.join(tmp, f"pipeline-{depth}.lua")
    with open(path, "w") as f:
        f.write(f"init = function(args)\n  batch = string.rep(wrk.format(), {depth})\nend\n"
                "request = function()\n  return batch\nend\n")
    return path


def run_wrk(url, cpu, conns, seconds):
    out = subprocess.run(["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{conns}", f"-d{seconds}s"] + PIPELINE + [url],
                         capture_output=True, text=True).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    n = re.search(r"(\d+) requests in", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if not rps or not n:
        raise RuntimeError(f"wrk printed: {out.strip()[:300]}")
    return float(rps.group(1)), int(n.group(1)), int(errors.group(1)) if errors else 0


def run_blocklab_load(url, cpu, conns, seconds, tmp):
    json_file = os.path.join(tmp, "load.json")
    subprocess.run(["taskset", "-c", str(cpu), BLOCKLAB, "load", "-k", "-q", "-c", str(conns), "-z", f"{seconds}s",
                    "--threads", "1", "--json", json_file, url], capture_output=True, text=True)
    with open(json_file) as f:
        doc = json.load(f)
    return doc["rps"], doc["completed"], doc["completed"] - doc.get("ok", doc["completed"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("-c", "--connections", type=int, default=200)
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--load-cpu", type=int, default=0)
    p.add_argument("--no-blocklab-load", action="store_true", help="only wrk as the client")
    p.add_argument("--before", metavar="BINARY", help="another blocklab build to run beside this one")
    p.add_argument("--instructions", action="store_true",
                   help="also count user-space instructions per request under callgrind (needs valgrind)")
    p.add_argument("--requests", type=int, default=20_000, help="requests counted per server with --instructions")
    p.add_argument("--pipeline", type=int, default=1, metavar="N",
                   help="wrk writes N requests at a time on each connection (HTTP/1.1 pipelining), "
                        "so that the servers, not wrk, set the rate (default: 1, no pipelining)")
    p.add_argument("--json", metavar="FILE", help="also write each target's requests/s and server CPU per round to FILE")
    p.add_argument("--embedded-read", choices=["index", "cypher"], default="index",
                   help="how blocklab reads its embedded database (this build's flag; --before gets none)")
    args = p.parse_args()
    if args.embedded_read != "index":
        READ.extend(["--embedded-read", args.embedded_read])

    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    needed = [("wrk", shutil.which("wrk")), ("nginx", nginx)]
    if args.instructions:
        needed += [("valgrind", shutil.which("valgrind")), ("callgrind_control", shutil.which("callgrind_control"))]
    missing = [name for name, found in needed if not found]
    if missing:
        sys.exit(f"serve-vs-nginx: {' and '.join(missing)} not found on the PATH; this script installs nothing "
                 "(Debian: apt-get install wrk nginx-light valgrind)")
    if args.before and not os.access(args.before, os.X_OK):
        sys.exit(f"serve-vs-nginx: --before {args.before}: not an executable file")
    if not os.path.exists(BLOCKLAB):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)

    tmp = tempfile.mkdtemp(prefix="serve-vs-nginx-")
    if args.pipeline > 1:
        PIPELINE.extend(["-s", pipeline_script(tmp, args.pipeline)])
    procs = []
    try:
        ngx, ngx_port = start_nginx(nginx, args.server_cpu, tmp)
        procs.append(ngx)
        reactive, r_port = start_blocklab(args.server_cpu, "reactive", args.nodes)
        procs.append(reactive)
        lean, l_port = start_blocklab(args.server_cpu, "lean", args.nodes)
        procs.append(lean)
        nid = args.nodes // 2
        targets = [
            ("nginx", ngx, f"http://127.0.0.1:{ngx_port}/", "wrk"),
            ("/test", reactive, f"http://127.0.0.1:{r_port}/test", "wrk"),
            ("/getDataAsync", reactive, f"http://127.0.0.1:{r_port}/getDataAsync?id={nid}", "wrk"),
            ("/getData", reactive, f"http://127.0.0.1:{r_port}/getData?id={nid}", "wrk"),
            ("lean /test", lean, f"http://127.0.0.1:{l_port}/test", "wrk"),
            ("lean /getDataAsync", lean, f"http://127.0.0.1:{l_port}/getDataAsync?id={nid}", "wrk"),
            ("lean /getData", lean, f"http://127.0.0.1:{l_port}/getData?id={nid}", "wrk"),
        ]
        if args.before:
            before, b_port = start_blocklab(args.server_cpu, "reactive", args.nodes, args.before)
            procs.append(before)
            before_lean, bl_port = start_blocklab(args.server_cpu, "lean", args.nodes, args.before)
            procs.append(before_lean)
            targets += [
                ("before /test", before, f"http://127.0.0.1:{b_port}/test", "wrk"),
                ("before /getDataAsync", before, f"http://127.0.0.1:{b_port}/getDataAsync?id={nid}", "wrk"),
                ("before lean /test", before_lean, f"http://127.0.0.1:{bl_port}/test", "wrk"),
            ]
        if not args.no_blocklab_load:
            targets += [
                ("nginx", ngx, f"http://127.0.0.1:{ngx_port}/", "blocklab load"),
                ("/test", reactive, f"http://127.0.0.1:{r_port}/test", "blocklab load"),
            ]
        version = subprocess.run([nginx, "-v"], capture_output=True, text=True).stderr.strip()
        print(f"servers on CPU {args.server_cpu}: {version} (1 worker), blocklab serve --workers 1 "
              f"(reactive and lean; embedded Grafeo read by {args.embedded_read}, {args.nodes} nodes, 0 ms latency, id={nid})")
        print(f"clients on CPU {args.load_cpu}: wrk -t1 -c{args.connections}"
              + (f" ({args.pipeline} requests pipelined per write)" if args.pipeline > 1 else "")
              + ("" if args.no_blocklab_load else f", blocklab load -k -c {args.connections} --threads 1")
              + f"; {args.rounds} rounds x {args.seconds} s, targets alternating")
        if args.before:
            print(f"before: {args.before} (reactive, same flags)")
        print()

        results = {(name, client): [] for name, _, _, client in targets}
        for r in range(args.rounds):
            for name, proc, url, client in targets:
                before = cpu_seconds(proc.pid)
                if client == "wrk":
                    rps, n, bad = run_wrk(url, args.load_cpu, args.connections, args.seconds)
                else:
                    rps, n, bad = run_blocklab_load(url, args.load_cpu, args.connections, args.seconds, tmp)
                cpu_us = (cpu_seconds(proc.pid) - before) / max(n, 1) * 1e6
                results[(name, client)].append((rps, cpu_us))
                note = f"  ({bad} not 2xx!)" if bad else ""
                print(f"  round {r + 1}  {client:<13} {name:<20} {rps:>10,.0f} req/s  {cpu_us:6.2f} µs server CPU/request{note}")

        med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
               for k, v in results.items() if v}
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"script": "serve-vs-nginx", "rounds": args.rounds, "seconds": args.seconds,
                           "connections": args.connections, "pipeline": args.pipeline,
                           "runs": [{"client": client, "target": name, "rps": [x[0] for x in v],
                                     "server_cpu_us_per_request": [x[1] for x in v]}
                                    for (name, client), v in results.items()]}, f, indent=2)
        print("\n| client | target | median requests/s | server CPU µs/request |")
        print("|---|---|---|---|")
        for (name, client), (rps, cpu) in med.items():
            print(f"| {client} | {name} | {rps:,.0f} | {cpu:.2f} |")
        w = lambda name: med[(name, "wrk")][0]
        print("\nratios (wrk, medians):")
        print(f"  /test ÷ nginx                 = {w('/test') / w('nginx'):.2f}   (goal ≥ 0.9)")
        print(f"  /getDataAsync ÷ /test (0 ms)  = {w('/getDataAsync') / w('/test'):.2f}   (goal ≥ 0.5)")
        print(f"  /getData ÷ /test (0 ms)       = {w('/getData') / w('/test'):.2f}")
        print(f"  lean /test ÷ nginx            = {w('lean /test') / w('nginx'):.2f}   (goal ≥ 1.1)")
        print(f"  lean /getDataAsync ÷ /test    = {w('lean /getDataAsync') / w('lean /test'):.2f}   (goal ≥ 0.5)")
        print(f"  lean /getData ÷ /test         = {w('lean /getData') / w('lean /test'):.2f}")
        if ("/test", "blocklab load") in med:
            b = lambda name: med[(name, "blocklab load")][0]
            print(f"  /test ÷ nginx (blocklab load) = {b('/test') / b('nginx'):.2f}")
        if args.before:
            print(f"  /test ÷ before /test          = {w('/test') / w('before /test'):.2f}")
            print(f"  /getDataAsync ÷ before        = {w('/getDataAsync') / w('before /getDataAsync'):.2f}")
            print(f"  before: /test ÷ nginx         = {w('before /test') / w('nginx'):.2f}")
            print(f"  before: /getDataAsync ÷ /test = {w('before /getDataAsync') / w('before /test'):.2f}")
            print(f"  lean /test ÷ before lean /test = {w('lean /test') / w('before lean /test'):.2f}")

        if args.instructions:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=15)
            procs.clear()
            print(f"\nuser-space instructions per request (callgrind; {args.requests:,} requests, "
                  "20 keep-alive connections, one server at a time):")
            port = free_port()
            conf = nginx_config(tmp, port)
            runs = [("nginx", [nginx, "-c", conf, "-p", tmp], port, "/")]
            for label, binary in [("", BLOCKLAB)] + ([("before ", args.before)] if args.before else []):
                for path in ["/test", f"/getDataAsync?id={nid}"]:
                    port = free_port()
                    runs.append((f"{label}{path.split('?')[0]}", blocklab_command(binary, port, "reactive", args.nodes),
                                 port, path))
            for path in ["/test", f"/getDataAsync?id={nid}"]:
                port = free_port()
                runs.append((f"lean {path.split('?')[0]}", blocklab_command(BLOCKLAB, port, "lean", args.nodes),
                             port, path))
            counts = {}
            for name, cmd, port, path in runs:
                url = f"http://127.0.0.1:{port}{path}"
                load = lambda n, url=url: subprocess.run([BLOCKLAB, "load", "-k", "-q", "-n", str(n), "-c", "20", url],
                                                         capture_output=True, text=True, check=True)
                counts[name] = instructions_per_request(cmd, port, load, args.requests, tmp, args.server_cpu)
                print(f"  {name:<22} {counts[name]:>9,.0f}   ÷ nginx {counts[name] / counts['nginx']:.2f}")
            print(f"  /getDataAsync ÷ /test  {counts['/getDataAsync'] / counts['/test']:.2f}")
            print(f"  lean /getDataAsync ÷ /test  {counts['lean /getDataAsync'] / counts['lean /test']:.2f}")
            if args.before:
                print(f"  /test ÷ before /test   {counts['/test'] / counts['before /test']:.2f}")
                print(f"  /getDataAsync ÷ before {counts['/getDataAsync'] / counts['before /getDataAsync']:.2f}")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
