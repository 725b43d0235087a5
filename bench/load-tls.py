#!/usr/bin/env python3
"""blocklab load over https:// beside wrk and ab, in one run.

nginx (`return 200 "works"`, one worker process, TLS 1.2 and 1.3 with a
self-signed certificate made here with the openssl CLI) is pinned to one core
(--server-cpu) and every load generator to another (--load-cpu), each with
one thread and the same connections. The tools take turns, round after round,
so the machine's noise falls on all of them alike.

Two cases:
  keep-alive        blocklab load -k  beside  wrk           (one handshake per connection)
  a new connection  blocklab load     beside  ab, and wrk -H 'Connection: close'
  per request                                               (one handshake per request)

blocklab is given `-H 'User-Agent:'`, so it sends wrk's head (Host only): nginx
does measurable work for a User-Agent (bench/_common.py says how much), and the
tools, not their requests, are compared. --with-user-agent also runs blocklab with
its default head, as 'blocklab+UA', in the same rounds.

Printed per case and tool: the median requests/s, the ratio to wrk, the CPU
time the tool spent per request (user + system from the kernel's rusage of
its process), nginx's CPU time per request (from /proc over the tool's turn;
nginx runs without a master process, so its one process is the worker: the
same requests should cost it the same, whichever tool sent them) and, for the
new-connection case, the share of handshakes that
resumed an earlier TLS session, as nginx saw it (`$ssl_session_reused` in an
access log of that case's port): a resumed handshake costs both sides much
less, so tools that resume and tools that do not are not doing the same work.

It installs nothing: nginx (/usr/sbin/nginx or the PATH), wrk, ab
(apache2-utils) and openssl are used when present and named when not.

    bench/load-tls.py                      # 5 rounds of 5 s per tool and case
    bench/load-tls.py --rounds 3 --seconds 3 -c 50
    bench/load-tls.py --before /tmp/blocklab-before   # a build before a change, in the same rounds
    bench/load-tls.py --with-user-agent                # and blocklab's default User-Agent
    bench/load-tls.py --rounds 0 --instructions        # only what a User-Agent costs nginx (callgrind)
    bench/load-tls.py --rounds 1 --keep-alive-only --json F.json   # for bench/headline.py
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _common import (SAME_HEAD_AS_WRK, add_run_options, builds, built, cpu_seconds, figures, free_port,
                     instructions_per_request, nginx_binary, nginx_config, now_and_load, number, rusage_of,
                     wait_for, certificate)



def start_nginx(nginx, cpu, tmp, cert, key):
    """nginx with TLS on two ports: keep-alive (no log) and new connections (a log of session reuse)."""
    kept, fresh = free_port(), free_port()
    conf = os.path.join(tmp, "nginx.conf")
    log = os.path.join(tmp, "reused.log")
    with open(conf, "w") as f:
        f.write(f"""
worker_processes 1;
daemon off;
master_process off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    log_format reused "$ssl_session_reused";
    server {{
        listen 127.0.0.1:{kept} ssl;
        location / {{ return 200 "works"; }}
    }}
    server {{
        listen 127.0.0.1:{fresh} ssl;
        access_log {log} reused buffer=64k flush=1s;
        location / {{ return 200 "works"; }}
    }}
}}
""")
    proc = subprocess.Popen(["taskset", "-c", str(cpu), nginx, "-c", conf, "-p", tmp, "-e", f"{tmp}/nginx-error.log"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(kept)
    wait_for(fresh)
    return proc, kept, fresh, log



def tools(case, port, conns, seconds, tmp, cert, runs):
    """(name, command, read) for `case`: read(stdout) gives (requests/s, requests).
    `runs` are the blocklab runs, (name, binary, extra flags) each (_common.builds)."""
    url = f"https://127.0.0.1:{port}/"
    json_file = os.path.join(tmp, "blocklab.json")

    def blocklab_read(out):
        with open(json_file) as f:
            doc = json.load(f)
        return doc["rps"], doc["completed"]

    def wrk_read(out):
        return number(r"Requests/sec:\s+([\d.]+)", out), number(r"(\d+) requests in", out)

    def ab_read(out):
        return number(r"Requests per second:\s+([\d.]+)", out), number(r"Complete requests:\s+(\d+)", out)

    keep = ["-k"] if case == "keep-alive" else []
    found = [(name, [path, "load", *keep, "-q", "-c", str(conns), "-z", f"{seconds}s", "--threads", "1",
                     "--cacert", cert, "--json", json_file, *extra, url], blocklab_read) for name, path, extra in runs]
    if shutil.which("wrk"):
        close = [] if case == "keep-alive" else ["-H", "Connection: close"]
        found.append(("wrk", ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", *close, url], wrk_read))
    if case != "keep-alive" and shutil.which("ab"):
        found.append(("ab", ["ab", "-q", "-c", str(conns), "-t", str(seconds), "-n", "100000000", url], ab_read))
    return found


def reuse_share(log, since):
    """The share of handshakes nginx logged as resumed ('r') after byte `since`, once its buffer is flushed."""
    time.sleep(1.2)
    with open(log) as f:
        f.seek(since)
        marks = f.read().split()
    return (marks.count("r") / len(marks)) if marks else None


def compare(case, peers, rounds, load_cpu, tmp, log, server):
    """Every tool once per round; returns {name: [(rps, cpu us per request, resumed share or None,
    nginx cpu us per request)]}."""
    results = {name: [] for name, _, _ in peers}
    for r in range(rounds):
        for name, cmd, read in peers:
            since = os.path.getsize(log) if os.path.exists(log) else 0
            served = cpu_seconds(server.pid)
            out, err, cpu, code = rusage_of(cmd, load_cpu, tmp)
            served = cpu_seconds(server.pid) - served
            found = figures(read, out, err, code, f"{case} round {r + 1} {name}")
            if not found:
                continue
            rps, n = found
            reused = reuse_share(log, since) if case != "keep-alive" else None
            results[name].append((rps, cpu / n * 1e6, reused, served / n * 1e6))
            shown = f"  {reused * 100:5.1f} % resumed" if reused is not None else ""
            print(f"  {case} round {r + 1} {name:<16} {rps:>10.0f} req/s  {cpu / n * 1e6:7.2f} us CPU/request  "
                  f"nginx {served / n * 1e6:7.2f} us/request{shown}", flush=True)
    return results


def table(case, results):
    print(f"\n{case}:")
    wrk = statistics.median(x[0] for x in results["wrk"]) if results.get("wrk") else None
    print("| tool | median requests/s | ratio to wrk | median CPU µs/request | nginx CPU µs/request | handshakes resumed |")
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        if not runs:
            print(f"| {name} | failed | | | | |")
            continue
        med = statistics.median(x[0] for x in runs)
        cpu = statistics.median(x[1] for x in runs)
        shares = [x[2] for x in runs if x[2] is not None]
        reused = f"{statistics.median(shares) * 100:.0f} %" if shares else "(one per connection)"
        ratio = f"{med / wrk:.2f}" if wrk else "n/a"
        served = statistics.median(x[3] for x in runs)
        print(f"| {name} | {med:,.0f} | {ratio} | {cpu:.2f} | {served:.2f} | {reused} |")
    for name in (n for n in results if n.startswith("blocklab") and results[n]):
        if wrk:
            print(f"{case}: {name}/wrk = {statistics.median(x[0] for x in results[name]) / wrk:.3f}")


def instructions(binary, nginx, cpu, tmp, cert, key, requests):
    """nginx's user-space instructions per keep-alive request over TLS under callgrind, for
    blocklab's head with and without its User-Agent: what the field alone costs the server."""
    plain, port = free_port(), free_port()
    conf = nginx_config(tmp, plain, http_extra=f"""
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    server {{
        listen 127.0.0.1:{port} ssl;
        location / {{ return 200 "works"; }}
    }}""")
    print(f"nginx's user-space instructions per keep-alive request over TLS (callgrind; {requests:,} requests "
          "on 20 connections, 20 handshakes included):")
    counts = {}
    for label, extra in (("wrk's head (no User-Agent)", SAME_HEAD_AS_WRK), ("blocklab's default head", [])):
        def load(n, extra=extra):
            subprocess.run([binary, "load", "-k", "-q", "-n", str(n), "-c", "20", "--cacert", cert, *extra,
                            f"https://127.0.0.1:{port}/"], capture_output=True, text=True, check=True)
        counts[label] = instructions_per_request([nginx, "-c", conf, "-p", tmp], port, load, requests, tmp, cpu)
        print(f"  {label:<28} {counts[label]:>9,.0f}")
    base, full = counts.values()
    print(f"  the User-Agent costs nginx {full - base:,.0f} instructions per request ({(full - base) / base:.1%})")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(p)
    p.add_argument("--instructions", type=int, metavar="N", nargs="?", const=20000,
                   help="also count nginx's instructions per request under callgrind (N requests, default "
                        "%(const)s), with blocklab's head with and without its User-Agent")
    p.add_argument("--keep-alive-only", action="store_true", help="only the keep-alive case (no handshake per request)")
    p.add_argument("--json", metavar="FILE",
                   help="also write each case's and tool's figures per round to FILE")
    args = p.parse_args()
    runs = builds(args)

    nginx = nginx_binary()
    missing = [name for name, there in (("nginx", nginx), ("openssl", shutil.which("openssl"))) if not there]
    if missing:
        sys.exit(f"bench/load-tls.py needs {' and '.join(missing)} (Debian: nginx-light, openssl)")
    built(args)
    left_out = [t for t in ("wrk", "ab") if not shutil.which(t)]
    if left_out:
        print(f"not installed, left out: {', '.join(left_out)} (Debian: wrk, apache2-utils)")
    tmp = tempfile.mkdtemp(prefix="load-tls-bench-")
    cert, key = certificate(tmp)
    server, kept, fresh, log = start_nginx(nginx, args.server_cpu, tmp, cert, key)
    try:
        print(f"nginx `return 200` over TLS (1 worker process) pinned to CPU {args.server_cpu}; load generators "
              f"pinned to CPU {args.load_cpu}, one thread each, {args.connections} connections; "
              f"{args.rounds} rounds x {args.seconds} s per tool and case; {now_and_load()}\n")
        cases = (("keep-alive", kept), ("a new connection per request", fresh)) if args.rounds > 0 else ()
        if args.keep_alive_only:
            cases = cases[:1]
        doc = {"script": "load-tls", "rounds": args.rounds, "seconds": args.seconds,
               "connections": args.connections, "not_installed": left_out, "cases": {}}
        for case, port in cases:
            peers = tools(case, port, args.connections, args.seconds, tmp, cert, runs)
            results = compare(case, peers, args.rounds, args.load_cpu, tmp, log, server)
            table(case, results)
            doc["cases"][case] = {name: {"rps": [x[0] for x in v], "cpu_us_per_request": [x[1] for x in v],
                                         "resumed_share": [x[2] for x in v],
                                         "nginx_cpu_us_per_request": [x[3] for x in v]}
                                  for name, v in results.items()}
            print()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=2)
        if args.instructions:
            instructions(args.blocklab, nginx, args.server_cpu, tmp, cert, key, args.instructions)
        print(now_and_load())
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
