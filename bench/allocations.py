#!/usr/bin/env python3
"""Allocations per request of `blocklab serve`, under both server stacks.

A bench build (`cargo build --release --features count-allocations`, into
target/count-allocations/ so that the release binary stays as it is) counts
every call to the global allocator and shows the totals in /metrics
(blocklab_allocations_total, blocklab_reallocations_total). For each model
(reactive, lean) and endpoint, a fresh server (--workers 1, the embedded
database, 0 ms latency) gets a warm-up, then two keep-alive loads of
different sizes on the same number of connections, with /metrics read
before, between and after:

    per request    = (growth over the long load - growth over the short one)
                     / (requests of the long load - requests of the short one)
    per connection = what is left of a load's growth, divided by -c
                     (accepting it, its task, its first buffers; the /metrics
                     read between loads is in it too)

so the per-request figure is the steady state: what the connections' setup
and the scrapes cost cancels out. Counts do not move with the machine's
noise; the counting build is not for timing.

Goals (issue 21): lean /test 0, reactive /test <= 8 per request.

    bench/allocations.py
    bench/allocations.py --short 5000 --long 25000 -c 10
    bench/allocations.py --server /tmp/blocklab-counting-before   # another counting build
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

from _common import ROOT, free_port, wait_for
TARGET_DIR = os.path.join(ROOT, "target", "count-allocations")
COUNTING = os.path.join(TARGET_DIR, "release", "blocklab")
LOADER = os.path.join(ROOT, "target", "release", "blocklab")
PATHS = ["/test", "/getDataAsync", "/getDataAsync2", "/getDataAkkaAsync", "/getDataAkkaAsync2",
         "/getDataSpawnBlocking", "/getData", "/getDataAkka"]
NON_BLOCKING = {"/getDataAsync", "/getDataAsync2", "/getDataAkkaAsync", "/getDataAkkaAsync2"}


def counts(port):
    """(allocations, reallocations) of the server now, from /metrics."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        text = b""
        while chunk := s.recv(65536):
            text += chunk
    text = text.decode()
    found = {m.group(1): int(m.group(2)) for m in re.finditer(r"^blocklab_(\w+)_total (\d+)$", text, re.M)}
    if "allocations" not in found:
        sys.exit("this server does not count allocations: build it with --features count-allocations")
    return found["allocations"], found["reallocations"]


def load(url, cpu, connections, requests, tmp):
    out = os.path.join(tmp, "load.json")
    subprocess.run(["taskset", "-c", str(cpu), LOADER, "load", "-k", "-q", "-c", str(connections),
                    "-n", str(requests), "--json", out, url], capture_output=True, text=True, check=True)
    with open(out) as f:
        doc = json.load(f)
    if doc.get("ok", doc["completed"]) != doc["completed"] or doc["completed"] != requests:
        sys.exit(f"{url}: {doc['completed']} of {requests} completed, {doc.get('ok')} ok")
    return doc["completed"]


def measure(model, path, args, tmp):
    port = free_port()
    cmd = ["taskset", "-c", str(args.server_cpu), args.server, "serve", "--listen", f"127.0.0.1:{port}",
           "--workers", "1", "--nodes", str(args.nodes), "--model", model]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "RUST_LOG": "warn"})
    try:
        wait_for(port, proc)
        url = f"http://127.0.0.1:{port}{path}" + ("" if path == "/test" else f"?id={args.nodes // 2}")
        load(url, args.load_cpu, args.connections, args.warmup, tmp)
        a0 = counts(port)
        n1 = load(url, args.load_cpu, args.connections, args.short, tmp)
        a1 = counts(port)
        n2 = load(url, args.load_cpu, args.connections, args.long, tmp)
        a2 = counts(port)
        d1 = [x - y for x, y in zip(a1, a0)]
        d2 = [x - y for x, y in zip(a2, a1)]
        per_request = [(b - a) / (n2 - n1) for a, b in zip(d1, d2)]
        per_connection = (d1[0] - per_request[0] * n1) / args.connections
        return per_request, per_connection
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--connections", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5_000)
    p.add_argument("--short", type=int, default=10_000)
    p.add_argument("--long", type=int, default=50_000)
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--load-cpu", type=int, default=0)
    p.add_argument("--models", default="reactive,lean")
    p.add_argument("--paths", default=",".join(PATHS))
    p.add_argument("--server", default=COUNTING,
                   help="the counting build to measure (default: this tree's, built if missing)")
    args = p.parse_args()
    if args.long <= args.short:
        sys.exit("allocations: --long must be larger than --short")
    if args.server == COUNTING and not os.path.exists(COUNTING):
        print(f"building the counting build into {TARGET_DIR} (once)", file=sys.stderr)
        subprocess.run(["cargo", "build", "--release", "--locked", "--features", "count-allocations",
                        "--target-dir", TARGET_DIR], cwd=ROOT, check=True)
    if not os.path.exists(LOADER):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)

    print(f"server: {args.server} serve --workers 1 on CPU {args.server_cpu} (embedded, {args.nodes} nodes, "
          f"0 ms latency); load: blocklab load -k -c {args.connections} on CPU {args.load_cpu}; "
          f"warm-up {args.warmup}, then -n {args.short} and -n {args.long}")
    print("\n| model | endpoint | allocations / request | reallocations / request | allocations / connection |")
    print("|---|---|---|---|---|")
    tmp = tempfile.mkdtemp(prefix="allocations-")
    for model in args.models.split(","):
        for path in args.paths.split(","):
            (alloc, realloc), per_conn = measure(model, path, args, tmp)
            note = " (non-blocking)" if path in NON_BLOCKING else ""
            print(f"| {model} | {path}{note} | {alloc:.2f} | {realloc:.2f} | {per_conn:.1f} |", flush=True)


if __name__ == "__main__":
    main()
