#!/usr/bin/env python3
"""How close blocklab's endpoints get to FalkorDB's own ceiling, in one run.

1. The ceiling: redis-benchmark (Debian redis-tools) sending the very query the
   endpoints send, `GRAPH.RO_QUERY content "MATCH (n:Content {id: $id}) RETURN n"`
   (with the parameter as FalkorDB's CYPHER prefix), over 50 connections, on
   an indexed graph of 10,000 nodes.
2. /getDataAsync, /getData and /getDataSpawnBlocking of `blocklab serve --db
   falkor://...` against the same FalkorDB, loaded by `blocklab load -k -c 200`.

Placement on a 2-core machine: FalkorDB alone on CPU 1; the client side —
redis-benchmark, or blocklab serve plus blocklab load — on CPU 0. Both
measurements therefore give FalkorDB the same core, and the endpoints' figure
includes everything the HTTP service adds. Each measurement is repeated and the
median printed, with each endpoint as a ratio of the ceiling.

    bench/falkordb-ceiling.py                    # 3 rounds
    bench/falkordb-ceiling.py --rounds 5 --seconds 5
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

from _common import BLOCKLAB, ROOT, free_port
FALKORDB = os.path.join(ROOT, "scripts", "falkordb")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=5, help="length of each load")
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--db-cpu", type=int, default=1)
    p.add_argument("--client-cpu", type=int, default=0)
    args = p.parse_args()

    if not shutil.which("redis-benchmark"):
        sys.exit("redis-benchmark not found: apt-get install redis-tools")
    if not os.path.exists(BLOCKLAB):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)

    port = free_port()
    pid = int(run([FALKORDB, "start", str(port)]).stdout.strip())
    run(["taskset", "-a", "-p", "-c", str(args.db_cpu), str(pid)])
    url = f"falkor://127.0.0.1:{port}"
    server = None
    try:
        print(run([BLOCKLAB, "seed", "--db", url, "--nodes", str(args.nodes)]).stdout.strip())
        # The ceiling: redis-benchmark's own requests/s on the endpoints' query.
        query = 'CYPHER id=42 MATCH (n:Content {id: $id}) RETURN n'
        ceiling = []
        endpoint_rps = {"/getDataAsync": [], "/getData": [], "/getDataSpawnBlocking": []}
        port_http = free_port()
        server = subprocess.Popen(
            ["taskset", "-c", str(args.client_cpu), BLOCKLAB, "serve", "--listen", f"127.0.0.1:{port_http}",
             "--db", url, "--nodes", str(args.nodes)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = server.stdout.readline()
        if "listening on" not in line:
            sys.exit(f"blocklab serve did not start: {line!r}")
        tmp = tempfile.mkdtemp(prefix="falkor-bench-")
        requests = 20000 * args.seconds
        print(f"FalkorDB pinned to CPU {args.db_cpu}; redis-benchmark, blocklab serve and blocklab load on CPU "
              f"{args.client_cpu}; {args.rounds} rounds\n")
        for r in range(args.rounds):
            out = run(["taskset", "-c", str(args.client_cpu), "redis-benchmark", "-p", str(port), "-c", "50",
                       "-n", str(requests), "-q", "--csv", "GRAPH.RO_QUERY", "content", query]).stdout
            rps = float(re.findall(r'"([\d.]+)"', out.strip().splitlines()[-1])[0])
            ceiling.append(rps)
            print(f"  round {r + 1} redis-benchmark -c 50          {rps:>10.0f} queries/s")
            for path in endpoint_rps:
                json_file = os.path.join(tmp, "load.json")
                run(["taskset", "-c", str(args.client_cpu), BLOCKLAB, "load", "-k", "-q", "-c", "200", "-z",
                     f"{args.seconds}s", "--json", json_file, f"http://127.0.0.1:{port_http}{path}?id=42"])
                with open(json_file) as f:
                    doc = json.load(f)
                endpoint_rps[path].append(doc["rps"])
                bad = doc["error_total"] + doc["non_2xx"]
                print(f"  round {r + 1} {path:<30} {doc['rps']:>10.0f} req/s" + (f"  ({bad} failed)" if bad else ""))
        c = statistics.median(ceiling)
        print(f"\n| what | median per second | ratio of the ceiling |")
        print(f"|---|---|---|")
        print(f"| FalkorDB ceiling (redis-benchmark -c 50) | {c:,.0f} | 1.00 |")
        for path, values in endpoint_rps.items():
            m = statistics.median(values)
            print(f"| {path} | {m:,.0f} | {m / c:.2f} |")
    finally:
        if server:
            server.terminate()
            server.wait(timeout=15)
        subprocess.run([FALKORDB, "stop", str(port)], capture_output=True)


if __name__ == "__main__":
    main()
