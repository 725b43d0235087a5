#!/usr/bin/env python3
"""What a Neo4j driver costs, side by side in one run: two blocklab binaries
(e.g. main's, which used neo4rs, and this checkout's, with its own Bolt client)
and the Java driver 4.4.20 with no HTTP (peers/neo4j-ceiling), on ONE warm
Neo4j, alternated round by round so that Neo4j's JIT warms for all alike.

For each blocklab binary, `blocklab serve --db-async-connections 64` on CPU 0
is loaded by `blocklab load -k -c 64` on CPU 1 (beside Neo4j) on
/getDataAsync and /getDataAkkaAsync: 5 s of warm-up, then --seconds measured.
The Java client runs on CPU 0 (where the servers run), 64 reads in flight, 10 s
of warm-up, then --seconds measured. Figures, from /proc/PID/stat over the
measured window only:

- Neo4j µs/query: Neo4j's CPU time (all its threads) ÷ reads answered. What
  the driver makes the database spend per read (extra round trips, RESETs).
- server µs/req: the blocklab server's CPU time ÷ requests answered (HTTP,
  driver and decoding together); /test costs ~10-15 µs here.

Each figure is the median over the rounds; the last lines give the second
binary's figures as a ratio of the first's, and Neo4j's CPU per query under
each binary as a ratio of the Java driver's.

    bench/bolt-client.py --base /path/to/main/blocklab            # 2 rounds of 15 s
    bench/bolt-client.py --base A --new B --rounds 3 --seconds 20 --warm 120
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEO4J = os.path.join(ROOT, "scripts", "neo4j")
PEERS = os.path.join(ROOT, "scripts", "peers")
PATHS = ["/getDataAsync", "/getDataAkkaAsync"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """User + system CPU of a process and all its threads, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def neo4j_pid(port):
    with open(os.path.join(ROOT, ".local", "neo4j", str(port), "pid")) as f:
        return int(f.read().strip())


def serve(binary, db, port):
    server = subprocess.Popen(
        ["taskset", "-c", "0", binary, "serve", "--listen", f"127.0.0.1:{port}", "--db", db,
         "--nodes", "1000", "--db-async-connections", "64"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in server.stdout:
        if "listening" in line:
            return server
    sys.exit(f"{binary} serve did not start")


def load(binary, url, seconds, out=None):
    cmd = ["taskset", "-c", "1", binary, "load", "-k", "-q", "-c", "64", "-z", f"{seconds}s", url]
    if out:
        cmd += ["--json", out]
    subprocess.run(cmd, check=True, capture_output=True)


def measure_server(binary, load_binary, db, neo, seconds):
    port = free_port()
    server = serve(binary, db, port)
    rows = {}
    try:
        for path in PATHS:
            url = f"http://127.0.0.1:{port}{path}"
            load(load_binary, url, 5)
            n0, s0 = cpu_seconds(neo), cpu_seconds(server.pid)
            load(load_binary, url, seconds, "/tmp/bolt-client-load.json")
            n1, s1 = cpu_seconds(neo), cpu_seconds(server.pid)
            with open("/tmp/bolt-client-load.json") as f:
                result = json.load(f)
            reads = max(result["completed"], 1)
            rows[path] = {
                "rps": result["rps"], "p99_ms": result["latency_ms"]["p99"],
                "failed": result["error_total"] + result["non_2xx"],
                "neo4j_us": (n1 - n0) * 1e6 / reads, "server_us": (s1 - s0) * 1e6 / reads,
            }
    finally:
        server.terminate()
        server.wait()
    return rows


def measure_java(db, neo, seconds):
    ceiling = subprocess.run([PEERS, "path", "neo4j-ceiling"], check=True, capture_output=True, text=True)
    run = os.path.join(ROOT, "peers", "neo4j-ceiling", "run")
    client = subprocess.Popen(
        ["taskset", "-c", "0", run, ceiling.stdout.strip(), "--db", db, "--nodes", "1000",
         "--concurrency", "64", "--seconds", str(seconds), "--warmup", "10"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in client.stderr:
        if "measuring" in line:
            break
    n0 = cpu_seconds(neo)
    out, _ = client.communicate()
    n1 = cpu_seconds(neo)
    result = json.loads(out.strip().splitlines()[-1])
    reads = max(result["reads"], 1)
    return {"rps": result["reads_per_s"], "p99_ms": result["p99_us"] / 1000,
            "failed": result["errors"] + result["wrong_answers"], "neo4j_us": (n1 - n0) * 1e6 / reads}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", required=True, help="the blocklab binary to compare against")
    p.add_argument("--new", default=os.path.join(ROOT, "target", "release", "blocklab"))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=int, default=15, help="length of each measured load")
    p.add_argument("--warm", type=int, default=60, help="seconds of load that warm Neo4j first")
    args = p.parse_args()
    subprocess.run([PEERS, "check", "neo4j-ceiling"], check=True)

    port = free_port()
    db = f"bolt://127.0.0.1:{port}"
    subprocess.run([NEO4J, "start", str(port)], check=True, capture_output=True, env={**os.environ, "NEO4J_CPUS": "1"})
    try:
        neo = neo4j_pid(port)
        subprocess.run([args.new, "seed", "--db", db, "--nodes", "1000"], check=True, capture_output=True)
        print(f"warming Neo4j ({db}, CPU 1) for {args.warm} s", file=sys.stderr)
        warm_port = free_port()
        server = serve(args.new, db, warm_port)
        load(args.new, f"http://127.0.0.1:{warm_port}/getDataAsync", args.warm)
        server.terminate()
        server.wait()

        seen = {"base": [], "new": [], "java": []}
        for r in range(1, args.rounds + 1):
            for name in ["base", "new"]:
                rows = measure_server(getattr(args, name), args.new, db, neo, args.seconds)
                seen[name].append(rows)
                for path, row in rows.items():
                    print(f"round {r} {name:4} {path:18} {row['rps']:6.0f} req/s  p99 {row['p99_ms']:6.1f} ms  "
                          f"failed {row['failed']}  Neo4j {row['neo4j_us']:4.0f} µs/query  "
                          f"server {row['server_us']:4.0f} µs/req  (load {os.getloadavg()[0]:.1f})")
            java = measure_java(db, neo, args.seconds)
            seen["java"].append(java)
            print(f"round {r} java {'(no HTTP)':18} {java['rps']:6.0f} reads/s p99 {java['p99_ms']:6.1f} ms  "
                  f"failed {java['failed']}  Neo4j {java['neo4j_us']:4.0f} µs/query  "
                  f"(load {os.getloadavg()[0]:.1f})")
    finally:
        subprocess.run([NEO4J, "wipe", str(port)], capture_output=True)

    median = lambda rows, key: statistics.median(row[key] for row in rows)
    java_neo = median(seen["java"], "neo4j_us")
    print(f"\nmedians over {args.rounds} rounds; Java driver: Neo4j {java_neo:.0f} µs/query")
    for path in PATHS:
        base = [rows[path] for rows in seen["base"]]
        new = [rows[path] for rows in seen["new"]]
        for key, label in [("rps", "req/s"), ("neo4j_us", "Neo4j µs/query"), ("server_us", "server µs/req")]:
            b, n = median(base, key), median(new, key)
            print(f"{path:18} {label:15} base {b:6.0f}  new {n:6.0f}  new ÷ base {n / b:4.2f}")
        print(f"{path:18} Neo4j µs/query ÷ Java driver's: base {median(base, 'neo4j_us') / java_neo:4.2f}, "
              f"new {median(new, 'neo4j_us') / java_neo:4.2f}")


if __name__ == "__main__":
    main()
