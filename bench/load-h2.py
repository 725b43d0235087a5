#!/usr/bin/env python3
"""blocklab load --h2 beside h2load (nghttp2's HTTP/2 load generator), in one run.

nginx (`return 200 "works"`, one worker process, HTTP/2) is pinned to one core
(--server-cpu) and each load generator to another (--load-cpu), with one
thread and the same connections (-c), concurrent streams per connection
(blocklab --streams, h2load -m) and duration. The tools take turns, round
after round, so the machine's noise falls on both alike.

Two cases:
  h2c   http://, HTTP/2 with prior knowledge (no TLS)
  h2    https://, TLS 1.3 with ALPN h2 and a self-signed certificate made here
        (blocklab trusts it with --cacert; h2load checks no certificate)

Printed per case and tool: the median requests/s over the rounds, the ratio
blocklab / h2load (the goal is at least 1.0), and the median CPU time the
tool spent per request (user + system of its process, from the kernel's
rusage when it ends).

It installs nothing: nginx (/usr/sbin/nginx or the PATH), h2load (Debian:
nghttp2-client) and openssl are used when present and named when not.

    bench/load-h2.py                                 # 5 rounds of 5 s, -c 10 -m 32
    bench/load-h2.py --rounds 3 --seconds 3 -c 4 -m 16
    bench/load-h2.py --rounds 1 --json F.json          # machine-readable (bench/headline.py)
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

from _common import BLOCKLAB, ROOT, certificate, figures, free_port, loadavg, nginx_config, number, rusage_of, wait_for


def start_nginx(nginx, cpu, tmp, listen_extra, server_extra=""):
    """A one-worker nginx with HTTP/2 on a free port, pinned to `cpu`; returns (process, port)."""
    port = free_port()
    conf = nginx_config(tmp, port, server_extra=server_extra, listen_extra=listen_extra)
    proc = subprocess.Popen(["taskset", "-c", str(cpu), nginx, "-c", conf, "-p", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port, proc)
    return proc, port


def tools(url, args, tmp, cert):
    """(name, command, read) per tool: read(stdout) gives (requests/s, requests that got a response)."""
    json_file = os.path.join(tmp, "blocklab.json")

    def blocklab_read(out):
        with open(json_file) as f:
            doc = json.load(f)
        if doc["protocol"] not in ("h2", "h2c") or doc["error_total"]:
            raise ValueError(f"protocol {doc['protocol']}, {doc['error_total']} errors")
        return doc["rps"], doc["completed"]

    def h2load_read(out):
        # "finished in 5.00s, 123456.70 req/s, ..." and "requests: N total, N started, N done, N succeeded, ..."
        if not re.search(r"Application protocol: h2", out):
            raise ValueError("h2load did not speak HTTP/2")
        return number(r"finished in [\d.]+s, ([\d.]+) req/s", out), number(r"requests: .*?(\d+) done", out)

    cacert = ["--cacert", cert] if url.startswith("https") else []
    return [
        ("blocklab", [BLOCKLAB, "load", "--h2", "-q", "-c", str(args.connections), "--streams", str(args.streams),
                      "-z", f"{args.seconds}s", "--threads", "1", *cacert, "--json", json_file, url], blocklab_read),
        ("h2load", ["h2load", "-c", str(args.connections), "-m", str(args.streams), "-t", "1",
                    "-D", str(args.seconds), url], h2load_read),
    ]


def compare(case, peers, args, tmp):
    """Every tool once per round; returns {name: [(requests/s, CPU µs per request)]}."""
    results = {name: [] for name, _, _ in peers}
    for r in range(args.rounds):
        for name, cmd, read in peers:
            out, err, cpu, code = rusage_of(cmd, args.load_cpu, tmp)
            found = figures(read, out, err, code, f"{case} round {r + 1} {name}")
            if not found:
                continue
            rps, n = found
            results[name].append((rps, cpu / n * 1e6))
            print(f"  {case} round {r + 1} {name:<9} {rps:>10.0f} req/s  {cpu / n * 1e6:7.2f} us CPU/request",
                  flush=True)
    return results


def table(case, results):
    print(f"\n{case}:")
    print("| tool | median requests/s | median CPU µs/request |")
    print("|---|---|---|")
    medians = {}
    for name, runs in results.items():
        if not runs:
            print(f"| {name} | failed | |")
            continue
        medians[name] = statistics.median(x[0] for x in runs)
        print(f"| {name} | {medians[name]:,.0f} | {statistics.median(x[1] for x in runs):.2f} |")
    if "blocklab" in medians and "h2load" in medians:
        print(f"\n{case}: blocklab / h2load = {medians['blocklab'] / medians['h2load']:.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("-c", "--connections", type=int, default=10)
    p.add_argument("-m", "--streams", type=int, default=32, help="concurrent streams per connection")
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--load-cpu", type=int, default=1)
    p.add_argument("--json", metavar="FILE", help="also write each case's and tool's figures per round to FILE")
    args = p.parse_args()

    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    needed = (("nginx", nginx), ("h2load", shutil.which("h2load")), ("openssl", shutil.which("openssl")))
    missing = [name for name, there in needed if not there]
    if missing:
        sys.exit(f"bench/load-h2.py needs {' and '.join(missing)} (Debian: nginx-light, nghttp2-client, openssl)")
    if not os.path.exists(BLOCKLAB):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="load-h2-bench-")
    cert, key = certificate(tmp)
    servers = []
    try:
        # nginx 1.22 (Debian 12) turns HTTP/2 on in the listen line; 1.25 has `http2 on;`.
        h2c, h2c_port = start_nginx(nginx, args.server_cpu, tmp, "http2")
        servers.append(h2c)
        tls = f"ssl_protocols TLSv1.3; ssl_certificate {cert}; ssl_certificate_key {key};"
        h2, h2_port = start_nginx(nginx, args.server_cpu, tmp, "ssl http2", server_extra=tls)
        servers.append(h2)
        print(f"nginx `return 200` over HTTP/2 (1 worker process) pinned to CPU {args.server_cpu}; load generators "
              f"pinned to CPU {args.load_cpu}, one thread each, {args.connections} connections x {args.streams} "
              f"streams; {args.rounds} rounds x {args.seconds} s per tool and case; load average {loadavg()}\n")
        doc = {"script": "load-h2", "rounds": args.rounds, "seconds": args.seconds, "connections": args.connections,
               "streams": args.streams, "cases": {}}
        for case, url in (("h2c", f"http://127.0.0.1:{h2c_port}/"), ("h2 (TLS)", f"https://127.0.0.1:{h2_port}/")):
            results = compare(case, tools(url, args, tmp, cert), args, tmp)
            table(case, results)
            doc["cases"][case] = {name: {"rps": [x[0] for x in v], "cpu_us_per_request": [x[1] for x in v]}
                                  for name, v in results.items()}
            print()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=2)
        print(f"load average at the end: {loadavg()}")
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
