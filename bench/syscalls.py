#!/usr/bin/env python3
"""System calls per request: `blocklab serve` (lean and reactive) beside nginx.

Each server runs alone on --server-cpu (one worker each: nginx
`worker_processes 1`, blocklab `--workers 1`), gets a warm-up, then
`strace -c -f -p PID` is attached to all its threads while `blocklab load -k`
sends --requests requests over -c keep-alive connections; the counts are
divided by the requests. strace slows every call, so only the counts mean
anything, not the time. Two thirds of /test's CPU here is the kernel's
(bench/serve-vs-nginx.py): fewer calls per request is where a faster /test
would come from.

It installs nothing: strace and nginx from the PATH (Debian: apt-get install
strace nginx-light).

    bench/syscalls.py
    bench/syscalls.py --requests 50000 -c 50
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from _common import BLOCKLAB, ROOT, free_port, nginx_config, wait_for


def nginx_command(nginx, tmp, port):
    return [nginx, "-c", nginx_config(tmp, port), "-p", tmp]


def count(name, cmd, port, path, args, tmp):
    proc = subprocess.Popen(["taskset", "-c", str(args.server_cpu)] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"})
    try:
        wait_for(port, proc)
        url = f"http://127.0.0.1:{port}{path}"
        load = ["taskset", "-c", str(args.load_cpu), BLOCKLAB, "load", "-k", "-q", "-c", str(args.connections), url]
        subprocess.run(load[:-1] + ["-n", "5000", url], capture_output=True, check=True)
        out = os.path.join(tmp, f"strace-{port}.txt")
        strace = subprocess.Popen(["strace", "-c", "-f", "-p", str(proc.pid), "-o", out],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        subprocess.run(load[:-1] + ["-n", str(args.requests), url], capture_output=True, check=True)
        strace.send_signal(signal.SIGINT)
        strace.wait(timeout=30)
        calls = {}
        with open(out) as f:
            for line in f:
                m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:(\d+)\s+)?(\w+)\s*$", line)
                if m and m.group(3) != "total":
                    calls[m.group(3)] = (int(m.group(1)), int(m.group(2) or 0))
        return calls
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("-c", "--connections", type=int, default=50)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--load-cpu", type=int, default=0)
    args = p.parse_args()
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    missing = [n for n, f in [("strace", shutil.which("strace")), ("nginx", nginx)] if not f]
    if missing:
        sys.exit(f"syscalls: {' and '.join(missing)} not found; this script installs nothing "
                 "(Debian: apt-get install strace nginx-light)")
    if not os.path.exists(BLOCKLAB):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="syscalls-")
    servers = []
    port = free_port()
    servers.append(("nginx", nginx_command(nginx, tmp, port), port, "/"))
    for model in ["lean", "reactive"]:
        port = free_port()
        servers.append((f"{model} /test", [BLOCKLAB, "serve", "--listen", f"127.0.0.1:{port}", "--workers", "1",
                                           "--nodes", "100", "--model", model], port, "/test"))
    print(f"{args.requests:,} requests over {args.connections} keep-alive connections (blocklab load on CPU "
          f"{args.load_cpu}), each server alone on CPU {args.server_cpu}; strace -c -f attached after a warm-up")
    results = {name: count(name, cmd, port, path, args, tmp) for name, cmd, port, path in servers}
    names = sorted({c for r in results.values() for c in r},
                   key=lambda c: -max(r.get(c, (0, 0))[0] for r in results.values()))
    print("\n| system call | " + " | ".join(f"{n} calls/req (errors)" for n in results) + " |")
    print("|---|" + "---|" * len(results))
    for call in names:
        cells = []
        for r in results.values():
            n, e = r.get(call, (0, 0))
            cells.append(f"{n / args.requests:.3f}" + (f" ({e / args.requests:.3f})" if e else ""))
        print(f"| {call} | " + " | ".join(cells) + " |")
    totals = [sum(n for n, _ in r.values()) / args.requests for r in results.values()]
    print("| **total** | " + " | ".join(f"**{t:.3f}**" for t in totals) + " |")


if __name__ == "__main__":
    main()
