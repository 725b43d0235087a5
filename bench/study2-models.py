#!/usr/bin/env python3
"""What each study-2 server model costs in memory and threads, in one run.

Part `memory` (Rust models only): each server starts alone in a child cgroup of
this script's own (cgroup v1 memory controller; run as root), pinned to
--server-cpu; this script (the client) runs on --client-cpu. For each model it
reads the cgroup's charged memory (memory.usage_in_bytes) and the process's
OS threads:
  idle          after start
  +N idle       N keep-alive connections open, no request
  +N in flight  a /delay?ms=60000 sent on each of them
and prints bytes per idle connection and per connection with a request in
flight, the latter split into what the kernel charged for its own objects
(memory.kmem.usage_in_bytes: sockets, epoll items) and the rest (user space). Per thread: `pool --threads 1` against `pool --threads 1001`, idle.

Part `concurrent` (every model, and the JVM peers when built): N connections
opened first, then one /delay (5 s) sent on each at the same moment, as N
JMeter threads do; prints the time until the last answer, answers that were
200, the cgroup's peak memory (memory.max_usage_in_bytes) and the peak OS
threads and charged memory less page cache (both sampled every 50 ms). Page
cache (the binary's pages, the JVM's jars) is charged to whichever cgroup first
reads it and is reclaimed before an OOM kill, so the figures without it are
the ones that compare.

    bench/study2-models.py                       # both parts, N=1000
    bench/study2-models.py --part memory -n 2000
    bench/study2-models.py --part concurrent --targets lean,tomcat
    bench/study2-models.py --part memory -n 5000 --targets lean --before OLD/blocklab
    bench/study2-models.py --part memory -n 5000 --targets lean --json F.json   # for bench/headline.py
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKLAB = os.environ.get("BLOCKLAB") or os.path.join(ROOT, "target", "release", "blocklab")
PEERS = os.path.join(ROOT, "scripts", "peers")
CGROUP_ROOT = "/sys/fs/cgroup/memory"
RUST_MODELS = ["reactive", "lean", "pool", "thread"]
JVM_PEERS = ["tomcat", "netty"]


def own_memory_cgroup():
    for line in open("/proc/self/cgroup"):
        _, controllers, path = line.strip().split(":", 2)
        if "memory" in controllers.split(","):
            return os.path.join(CGROUP_ROOT, path.lstrip("/"))
    return None


class Cgroup:
    """A child memory cgroup of this process's own, removed on close."""

    def __init__(self, name):
        parent = own_memory_cgroup()
        if parent is None or not os.access(parent, os.W_OK):
            sys.exit(f"needs the cgroup v1 memory controller, writable (run as root): {parent}")
        self.path = os.path.join(parent, f"blocklab-bench-{os.getpid()}-{name}")
        os.mkdir(self.path)

    def read(self, name):
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def usage(self):
        return int(self.read("memory.usage_in_bytes"))

    def peak(self):
        return int(self.read("memory.max_usage_in_bytes"))

    def kernel(self):
        """What the kernel charged for its own objects (sockets, epoll items,
        task structs): memory.kmem.usage_in_bytes, 0 where not accounted."""
        try:
            return int(self.read("memory.kmem.usage_in_bytes"))
        except (OSError, ValueError):
            return 0

    def cache(self):
        for line in self.read("memory.stat").splitlines():
            name, value = line.split()
            if name == "cache":
                return int(value)
        return 0

    def without_cache(self):
        """Charged memory less the page cache (the binary's and the jars'
        pages), which the kernel reclaims before it OOM-kills."""
        return self.usage() - self.cache()

    def join(self):
        """For preexec_fn: moves the calling (child) process into the cgroup."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def close(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def command_for(target, extra, binary=BLOCKLAB):
    if target in RUST_MODELS:
        return [binary, "serve", "--listen", "127.0.0.1:0", "--model", target, "--nodes", "100"] + extra
    return [PEERS, "run", target, "--listen", "127.0.0.1:0"]


class Server:
    def __init__(self, target, cpu, extra=(), binary=BLOCKLAB):
        self.cgroup = Cgroup(target)
        cmd = ["taskset", "-c", str(cpu)] + command_for(target, list(extra), binary)
        env = dict(os.environ, RUST_LOG="warn")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
            preexec_fn=self.cgroup.join, start_new_session=True,
        )
        line = self.proc.stdout.readline()
        m = re.match(r"listening on http://([\d.]+):(\d+)", line)
        if not m:
            self.close()
            sys.exit(f"{target} did not start: {line!r}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.pid = self.java_pid() if target in JVM_PEERS else self.proc.pid

    def java_pid(self):
        # scripts/peers execs java, so the child is the JVM itself.
        return self.proc.pid

    def threads(self):
        try:
            for line in open(f"/proc/{self.pid}/status"):
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        except OSError:
            return 0
        return 0

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.cgroup.close()


async def open_connections(host, port, n):
    conns = await asyncio.gather(*(asyncio.open_connection(host, port) for _ in range(n)))
    return list(conns)


async def request(conn, path):
    reader, writer = conn
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
    await reader.readexactly(length)
    return status


def settle(cgroup, seconds=1.0):
    time.sleep(seconds)
    return cgroup.without_cache()


def memory_part(args, found):
    print(f"\n## Memory per connection and per thread (N = {args.n}; cgroup v1 usage_in_bytes less page cache)\n")
    print("| model | idle MiB | threads idle | B per idle conn | B per conn in flight | of which kernel | of which user space | threads in flight |")
    print("|---|---|---|---|---|---|---|---|")
    builds = [("", BLOCKLAB)] + ([(" (before)", args.before)] if args.before else [])
    for model, (label, binary) in [(m, b) for m in RUST_MODELS if m in args.targets for b in builds]:
        extra = ["--workers", "1"]
        if model == "pool":
            extra += ["--threads", str(args.n + 10)]
        server = Server(model, args.server_cpu, extra, binary)
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            idle = settle(server.cgroup)
            kernel_idle = server.cgroup.kernel()
            threads_idle = server.threads()
            conns = loop.run_until_complete(open_connections(server.host, server.port, args.n))
            with_conns = settle(server.cgroup)
            tasks = [loop.create_task(request(c, "/delay?ms=60000")) for c in conns]
            loop.run_until_complete(asyncio.sleep(2.0))
            in_flight = settle(server.cgroup)
            kernel_flight = (server.cgroup.kernel() - kernel_idle) / args.n
            threads_busy = server.threads()
            for t in tasks:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            for _, w in conns:
                w.close()
            per_idle = (with_conns - idle) / args.n
            per_flight = (in_flight - idle) / args.n
            print(f"| {model}{label} | {idle / 2**20:.1f} | {threads_idle} | {per_idle:,.0f} | {per_flight:,.0f} | "
                  f"{kernel_flight:,.0f} | {per_flight - kernel_flight:,.0f} | {threads_busy} |")
            found.append({"model": model + label, "n": args.n, "idle_bytes": idle, "threads_idle": threads_idle,
                          "bytes_per_idle_connection": per_idle, "bytes_per_request_in_flight": per_flight,
                          "kernel_bytes_per_request_in_flight": kernel_flight,
                          "user_bytes_per_request_in_flight": per_flight - kernel_flight,
                          "threads_in_flight": threads_busy})
        finally:
            loop.close()
            server.close()
    if "pool" not in args.targets:
        return
    one = Server("pool", args.server_cpu, ["--workers", "1", "--threads", "1"])
    small = settle(one.cgroup, 2.0)
    one.close()
    many = Server("pool", args.server_cpu, ["--workers", "1", "--threads", "1001"])
    big = settle(many.cgroup, 2.0)
    many.close()
    print(f"\nper idle pool thread: {(big - small) / 1000:,.0f} B "
          f"(pool --threads 1: {small / 2**20:.1f} MiB; --threads 1001: {big / 2**20:.1f} MiB)")


def concurrent_part(args):
    print(f"\n## {args.n} concurrent /delay (5 s), each on its own connection, sent at once\n")
    print("| target | answered 200 | other | last answer s | peak MiB (cgroup) | peak MiB less page cache | peak threads |")
    print("|---|---|---|---|---|---|---|")
    for target in args.targets:
        if target in JVM_PEERS and subprocess.run([PEERS, "check", target], capture_output=True).returncode != 0:
            print(f"| {target} | not built: run scripts/peers install && scripts/peers build | | | | | |")
            continue
        server = Server(target, args.server_cpu)
        peak_threads = [server.threads()]
        peak_anon = [server.cgroup.without_cache()]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak_threads.append(server.threads())
                peak_anon.append(server.cgroup.without_cache())
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            conns = loop.run_until_complete(open_connections(server.host, server.port, args.n))
            started = time.monotonic()

            async def one(c):
                try:
                    return await asyncio.wait_for(request(c, "/delay"), args.timeout)
                except Exception:
                    return None

            statuses = loop.run_until_complete(asyncio.gather(*(one(c) for c in conns)))
            took = time.monotonic() - started
            for _, w in conns:
                w.close()
            ok = sum(1 for s in statuses if s == 200)
            print(f"| {target} | {ok} | {len(statuses) - ok} | {took:.2f} | "
                  f"{server.cgroup.peak() / 2**20:.1f} | {max(peak_anon) / 2**20:.1f} | {max(peak_threads)} |")
        finally:
            done.set()
            sampler.join()
            loop.close()
            server.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=["memory", "concurrent", "all"], default="all")
    p.add_argument("-n", type=int, default=1000, help="connections / concurrent requests")
    p.add_argument("--targets", default=",".join(RUST_MODELS + JVM_PEERS))
    p.add_argument("--timeout", type=float, default=120.0, help="per request, seconds")
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--before", metavar="BINARY",
                   help="part memory: also measure each Rust model under this blocklab binary, "
                        "side by side in the same run")
    p.add_argument("--json", metavar="FILE", help="part memory: also write each model's row to FILE")
    args = p.parse_args()
    args.targets = args.targets.split(",")
    if not os.path.exists(BLOCKLAB):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    if not shutil.which("taskset"):
        sys.exit("taskset not found (util-linux)")
    os.sched_setaffinity(0, {args.client_cpu})
    print(f"server on CPU {args.server_cpu}, client (this script) on CPU {args.client_cpu}; "
          f"binary {BLOCKLAB}")
    if args.part in ("memory", "all"):
        found = []
        memory_part(args, found)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"script": "study2-models", "part": "memory", "n": args.n, "memory": found}, f, indent=2)
    if args.part in ("concurrent", "all"):
        concurrent_part(args)


if __name__ == "__main__":
    main()
