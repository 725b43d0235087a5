#!/usr/bin/env python3
"""Three load agents at once against one server, merged, beside one agent
with the same total connections: what `blocklab load merge` is for, simulated
on one machine.

The server (`blocklab serve --workers 1`, /test) runs on --server-cpu; the
three agents (each `blocklab load -k -c C/3 -z DUR --threads 1 --json ...`)
are started together, each pinned to --agent-cpu; then one agent with -c C
runs alone. Printed: each agent's figures, the merged report's, the check
that the merged counts equal the sums, and the single agent's.

    bench/merge-agents.py                 # -c 300, 10 s
    bench/merge-agents.py -c 150 --seconds 5
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from _common import BLOCKLAB, ROOT, free_port


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--connections", type=int, default=300)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--agent-cpu", type=int, default=0)
    args = p.parse_args()
    if not os.path.exists(BLOCKLAB):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="merge-agents-")
    port = free_port()
    server = subprocess.Popen(["taskset", "-c", str(args.server_cpu), BLOCKLAB, "serve", "--listen",
                               f"127.0.0.1:{port}", "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/test"
        per = args.connections // 3
        print(f"server: blocklab serve --workers 1 on CPU {args.server_cpu}; agents on CPU {args.agent_cpu}; "
              f"3 agents x -c {per} at once, then 1 agent x -c {per * 3}, -z {args.seconds}s each\n")
        agents = []
        for i in range(3):
            out = os.path.join(tmp, f"agent{i}.json")
            agents.append((out, subprocess.Popen(
                ["taskset", "-c", str(args.agent_cpu), BLOCKLAB, "load", "-q", "-k", "-c", str(per), "-z",
                 f"{args.seconds}s", "--threads", "1", "--json", out, "--hdr-log", out + ".hlog", url],
                stdout=subprocess.DEVNULL)))
        docs = []
        for out, proc in agents:
            proc.wait()
            with open(out) as f:
                docs.append(json.load(f))
        for i, d in enumerate(docs):
            print(f"agent {i}: {d['completed']:>9,} completed, {d['error_total']} errors, {d['rps']:>10,.0f} req/s, "
                  f"p50 {d['latency_ms']['p50']:.3f} ms, p99 {d['latency_ms']['p99']:.3f} ms")
        merged_file = os.path.join(tmp, "merged.json")
        text = subprocess.run([BLOCKLAB, "load", "merge", *[a[0] for a in agents], "--json", merged_file],
                              capture_output=True, text=True).stdout
        with open(merged_file) as f:
            m = json.load(f)
        print(f"merged : {m['completed']:>9,} completed, {m['error_total']} errors, {m['rps']:>10,.0f} req/s, "
              f"p50 {m['latency_ms']['p50']:.3f} ms, p99 {m['latency_ms']['p99']:.3f} ms  ({text.splitlines()[0]})")
        for key in ["sent", "completed", "ok", "error_total", "connections_opened", "connections"]:
            total = sum(d[key] for d in docs)
            print(f"  {key:<20} merged {m[key]:>10,}  sum {total:>10,}  {'equal' if m[key] == total else 'DIFFERENT'}")
        single = os.path.join(tmp, "single.json")
        subprocess.run(["taskset", "-c", str(args.agent_cpu), BLOCKLAB, "load", "-q", "-k", "-c", str(per * 3), "-z",
                        f"{args.seconds}s", "--threads", "1", "--json", single, url], stdout=subprocess.DEVNULL)
        with open(single) as f:
            s = json.load(f)
        print(f"single : {s['completed']:>9,} completed, {s['error_total']} errors, {s['rps']:>10,.0f} req/s, "
              f"p50 {s['latency_ms']['p50']:.3f} ms, p99 {s['latency_ms']['p99']:.3f} ms")
        print(f"\nmerged ÷ single, req/s: {m['rps'] / s['rps']:.2f}")
    finally:
        server.terminate()
        server.wait(timeout=15)


if __name__ == "__main__":
    sys.exit(main())
