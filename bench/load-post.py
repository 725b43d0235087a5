#!/usr/bin/env python3
"""blocklab load POSTing a 1 KiB body beside wrk, in one run.

nginx (`return 200 "works"`, one worker process, no master) is pinned to one
core (--server-cpu) and both load generators to another (--load-cpu), each with
one thread, the same connections and the same duration, taking turns round after
round so the machine's noise falls on both alike:

  blocklab load -k -m POST --body-file BODY -T application/octet-stream -H 'User-Agent:' --threads 1 -c C -z Ts URL
  wrk -t1 -cC -dTs -s post.lua URL     (post.lua: wrk.method = "POST", wrk.body = BODY,
                                        wrk.headers["Content-Type"] = "application/octet-stream")

BODY is a file of --body-bytes (default 1024) bytes made here; both tools send it
on every request, with the same head (Host, Content-Type, Content-Length: wrk sends
no User-Agent, so blocklab is told to send none; --with-user-agent also runs
blocklab with its default head, as 'blocklab+UA', in the same rounds).

Before the rounds, a check: each tool sends POSTs to a second nginx port whose
access log has each request's method, status, `$content_length` and
`$connection_requests`: every line must be a POST of the whole body answered 200,
and connections must carry more than one of them. nginx's `return` reads the body
and discards it (`$request_length` counts only the head when it does); had it left
the body unread, the next request on the connection would have begun with the
body's bytes (lowercase letters) and been answered 400, not 200.

Printed per tool: the median requests/s, the ratio to wrk, the CPU time the tool
spent per request (user + system from the kernel's rusage of its process), nginx's
CPU time per request (from /proc, over the tool's turn: the same work for the same
requests should cost the server the same) and the responses that were not 2xx.

It installs nothing: nginx (/usr/sbin/nginx or the PATH) and wrk are used when present.

    bench/load-post.py                       # 5 rounds of 5 s per tool, -c 100
    bench/load-post.py --rounds 3 --seconds 3 -c 50
    bench/load-post.py --before /tmp/blocklab-before   # a build before a change, in the same rounds
    bench/load-post.py --with-user-agent                # and blocklab's default User-Agent
    bench/load-post.py --rounds 1 --json F.json         # machine-readable (bench/headline.py)
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
import time

from _common import (add_run_options, builds, built, cpu_seconds, figures, free_port, now_and_load, nginx_binary,
                     nginx_config, rusage_of, wait_for)

CONTENT_TYPE = "application/octet-stream"


def start_nginx(nginx, cpu, tmp):
    """nginx on two ports: the measured one (no log) and the check one (a log of what each POST brought)."""
    port, check = free_port(), free_port()
    log = os.path.join(tmp, "posted.log")
    check_server = f"""
    log_format posted "$request_method $status $content_length $connection_requests";
    server {{
        listen 127.0.0.1:{check};
        access_log {log} posted;
        location / {{ return 200 "works"; }}
    }}"""
    conf = nginx_config(tmp, port, http_extra=check_server)
    proc = subprocess.Popen(["taskset", "-c", str(cpu), nginx, "-c", conf, "-p", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port, proc)
    wait_for(check, proc)
    return proc, port, check, log


def number(pattern, text, default=None):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else default


def tools(port, conns, seconds, tmp, body, runs):
    """(name, command, read) per tool: read(stdout) gives (requests/s, requests, responses not 2xx)."""
    url = f"http://127.0.0.1:{port}/"
    json_file = os.path.join(tmp, "blocklab.json")
    script = os.path.join(tmp, "post.lua")
    with open(script, "w") as f:
        f.write(f"""local file = io.open("{body}", "rb")
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "{CONTENT_TYPE}"
""")

    def blocklab_read(out):
        with open(json_file) as f:
            doc = json.load(f)
        return doc["rps"], doc["completed"], doc["completed"] - sum(
            n for code, n in doc["status_codes"].items() if code.startswith("2")) + doc["error_total"]

    def wrk_read(out):
        errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
        return (number(r"Requests/sec:\s+([\d.]+)", out), number(r"(\d+) requests in", out),
                number(r"Non-2xx or 3xx responses:\s+(\d+)", out, 0) + errors)

    found = [(name, [path, "load", "-k", "-q", "-m", "POST", "--body-file", body, "-T", CONTENT_TYPE,
                     "-c", str(conns), "-z", f"{seconds}s", "--threads", "1", "--json", json_file, *extra, url],
              blocklab_read) for name, path, extra in runs]
    found.append(("wrk", ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "-s", script, url], wrk_read))
    return found


def check(peers, log, body_bytes, load_cpu, tmp):
    """Each tool against the check port: every request a POST, answered 200, its body read."""
    for name, cmd, _ in peers:
        since = os.path.getsize(log) if os.path.exists(log) else 0
        _, err, _, code = rusage_of(cmd, load_cpu, tmp)
        time.sleep(0.2)
        with open(log) as f:
            f.seek(since)
            lines = [line.split() for line in f.read().splitlines()]
        bad = [line for line in lines if line[:3] != ["POST", "200", str(body_bytes)]]
        most = max((int(line[3]) for line in lines), default=0)
        if code != 0 or not lines or bad or most < 2:
            sys.exit(f"check: {name} did not POST its body as asked (exit {code}, {len(lines)} requests logged, "
                     f"at most {most} on a connection, first wrong: {bad[:1]}; stderr: {err.strip()[:200]})")
        print(f"check: {name:<16} {len(lines):>7} requests logged, all POST with Content-Length {body_bytes} "
              f"answered 200, up to {most} on one connection (so nginx read each body to its end)")


def compare(peers, rounds, load_cpu, server, tmp):
    """Every tool once per round; returns {name: [(rps, tool CPU us/request, nginx CPU us/request, not 2xx)]}."""
    results = {name: [] for name, _, _ in peers}
    for r in range(rounds):
        for name, cmd, read in peers:
            served = cpu_seconds(server.pid)
            out, err, cpu, code = rusage_of(cmd, load_cpu, tmp)
            served = cpu_seconds(server.pid) - served
            found = figures(read, out, err, code, f"round {r + 1} {name}")
            if not found:
                continue
            rps, n, not_2xx = found
            results[name].append((rps, cpu / n * 1e6, served / n * 1e6, not_2xx))
            print(f"  round {r + 1} {name:<16} {rps:>10.0f} req/s  {cpu / n * 1e6:7.2f} us CPU/request  "
                  f"nginx {served / n * 1e6:6.2f} us/request  {not_2xx:.0f} not 2xx", flush=True)
    return results


def table(results):
    wrk = statistics.median(x[0] for x in results["wrk"]) if results.get("wrk") else None
    print("| tool | median requests/s | ratio to wrk | median CPU µs/request | nginx CPU µs/request | not 2xx |")
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        if not runs:
            print(f"| {name} | failed | | | | |")
            continue
        med = statistics.median(x[0] for x in runs)
        ratio = f"{med / wrk:.2f}" if wrk else "n/a"
        print(f"| {name} | {med:,.0f} | {ratio} | {statistics.median(x[1] for x in runs):.2f} | "
              f"{statistics.median(x[2] for x in runs):.2f} | {sum(x[3] for x in runs):.0f} |")
    for name in (n for n in results if n.startswith("blocklab") and results[n]):
        if wrk:
            print(f"{name}/wrk = {statistics.median(x[0] for x in results[name]) / wrk:.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(p)
    p.add_argument("--body-bytes", type=int, default=1024)
    p.add_argument("--json", metavar="FILE", help="also write each tool's figures per round to FILE")
    args = p.parse_args()
    runs = builds(args)

    nginx = nginx_binary()
    missing = [name for name, there in (("nginx", nginx), ("wrk", shutil.which("wrk"))) if not there]
    if missing:
        sys.exit(f"bench/load-post.py needs {' and '.join(missing)} (Debian: nginx-light, wrk)")
    built(args)
    tmp = tempfile.mkdtemp(prefix="load-post-bench-")
    body = os.path.join(tmp, f"body-{args.body_bytes}")
    with open(body, "wb") as f:
        f.write(bytes(ord("a") + i % 26 for i in range(args.body_bytes)))
    server, port, check_port, log = start_nginx(nginx, args.server_cpu, tmp)
    try:
        check(tools(check_port, 4, 1, tmp, body, runs), log, args.body_bytes, args.load_cpu, tmp)
        peers = tools(port, args.connections, args.seconds, tmp, body, runs)
        print(f"\nnginx `return 200` (1 worker process) pinned to CPU {args.server_cpu}; POST with a "
              f"{args.body_bytes}-byte body; load generators pinned to CPU {args.load_cpu}, one thread each, "
              f"{args.connections} connections, keep-alive; {args.rounds} rounds x {args.seconds} s per tool; "
              f"{now_and_load()}\n")
        results = compare(peers, args.rounds, args.load_cpu, server, tmp)
        table(results)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"script": "load-post", "rounds": args.rounds, "seconds": args.seconds,
                           "connections": args.connections, "body_bytes": args.body_bytes,
                           "tools": {name: {"rps": [x[0] for x in v], "cpu_us_per_request": [x[1] for x in v],
                                            "nginx_cpu_us_per_request": [x[2] for x in v],
                                            "not_2xx": [x[3] for x in v]} for name, v in results.items()}},
                          f, indent=2)
        print(f"\n{now_and_load()}")
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
