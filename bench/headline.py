#!/usr/bin/env python3
"""The project's headline figures, each measured in interleaved rounds with its spread.

One command measures every figure the project states as a result against a goal:

  the server beside nginx       reactive and lean `/test` ÷ nginx (wrk, and wrk pipelining
                                16 requests a write, where the servers set the rate);
                                `/getDataAsync` ÷ `/test` on the embedded database
  the load generator            blocklab load ÷ wrk, ÷ ab -k, ÷ h2load --h1 (plain GET);
                                ÷ wrk over HTTPS keep-alive; ÷ wrk POSTing 1 KiB;
                                ÷ h2load over h2c and over h2 (TLS)
  memory                        user space per waiting request under lean (N = 5000)
  study 1 on Neo4j              blocklab ÷ Play on /test; /getDataAsync ÷ Neo4j's ceiling;
                                server CPU per request and Neo4j CPU per query, blocklab ÷
                                Play; open-loop p99 at 70 % of the ceiling, blocklab ÷ Play;
                                failed answers

It measures nothing itself: it runs the side-by-side scripts of bench/ as they are, each
for one round at a time with its own flags and `--json FILE`, and reads their JSON:

  nginx            bench/serve-vs-nginx.py --rounds 1 --no-blocklab-load
  nginx-pipelined  bench/serve-vs-nginx.py --rounds 1 --no-blocklab-load --pipeline 16
  loadgen          bench/loadgen-vs-peers.py --rounds 1 --no-long-rss --big-c 0 --no-oha
  tls              bench/load-tls.py --rounds 1 --keep-alive-only
  post             bench/load-post.py --rounds 1
  h2               bench/load-h2.py --rounds 1
  memory           bench/study2-models.py --part memory -n 5000 --targets lean
  study1           bench/study1-seed-stack.py --rounds N --no-ab --warm 120 --warm-max 240

Rounds are interleaved: round 1 of every job, then round 2, and so on, so that the
machine's drift falls on every figure alike. Study 1 is the exception: Neo4j's start,
seeding and warm-up take minutes, so it runs once, after the other rounds, with --rounds N;
its own rounds interleave blocklab, Play and Neo4j's ceiling. Each of its rounds' share of
the ceiling is taken against the higher of that round's ceiling and the next one's (the
ceiling measured before and after the round's loads).

Each figure is printed with its median, min and max over the rounds, and a verdict:
"met" only when the whole range (min to max) clears the goal, "at the edge" when the range
straddles it, "missed" when no round clears it. A figure whose tool is not installed (wrk,
ab, h2load, nginx, Java and Maven for study 1, a writable cgroup v1 memory controller for
the memory figure) is a row that says "not measured: why"; so is one whose script failed
in every round (its log is in the results folder).

It writes, into --out (default results/headline-DATE/): headline.md (the dated table, with
the machine, the commit, the command and the time it took), headline.json (every round's
value), and logs/ (each script's output and JSON, per round).

Time, on the project's 2-core machine, once blocklab and the peers are built (the first run
builds blocklab with cargo, Neo4j's launcher, the Play peer and the ceiling client with
Maven): the full run (5 rounds of 3 s per tool, ~110 s a round; then study 1, 5 rounds of 4 s
after a 2–4 min Neo4j warm-up, ~9–11 min) ~18–20 minutes; --quick (3 rounds of 2 s; study 1
with 3 rounds of 3 s, Neo4j warmed 10 s) ~8 minutes, and its table says it is a first look. --only runs some jobs; --install apt-get installs wrk, ab, h2load and
nginx first (Debian, as root).

    bench/headline.py                          # every figure, 5 rounds
    bench/headline.py --quick                  # a first look
    bench/headline.py --only loadgen,tls,post,h2 --rounds 7
    bench/headline.py --only study1 --out /tmp/h
    bench/headline.py --list                   # the jobs and their figures
"""

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

from _common import BLOCKLAB, ROOT, loadavg, nginx_binary

BENCH = os.path.join(ROOT, "bench")
MEMORY_CGROUP = "/sys/fs/cgroup/memory"
DEBIAN_TOOLS = {"wrk": "wrk", "ab": "apache2-utils", "h2load": "nghttp2-client", "nginx": "nginx-light",
                "openssl": "openssl", "java": "openjdk-17-jdk-headless", "mvn": "maven", "taskset": "util-linux"}


# ---- reading the scripts' JSON -------------------------------------------------------------

def med(values):
    values = [v for v in values or [] if v is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    return a / b if (a is not None and b) else None


def nginx_rps(target):
    """requests/s of `target` under wrk in a serve-vs-nginx.py document."""
    def read(doc):
        for run in doc["runs"]:
            if run["target"] == target and run["client"] == "wrk":
                return med(run["rps"])
        return None
    return read


def tool_rps(tool, *path):
    """requests/s of `tool` in a document, under the keys `path` (e.g. "cases", "h2c")."""
    def read(doc):
        for key in path:
            doc = doc.get(key, {})
        return med(doc.get(tool, {}).get("rps"))
    return read


def over(a, b):
    return lambda doc: ratio(a(doc), b(doc))


def lean_user_bytes(doc):
    return med([row["user_bytes_per_request_in_flight"] for row in doc["memory"] if row["model"] == "lean"])


# ---- study 1: one run, its rounds -----------------------------------------------------------

def study1_rounds(doc):
    """Study 1's JSON as one dict of figures per round; "why" says why a figure is missing."""
    ceilings = {c["round"]: c["reads_per_s"] for c in doc["ceiling"]}
    rounds = sorted({r["round"] for r in doc["rows"]})
    found = []
    for n in rounds:
        rows = [r for r in doc["rows"] if r["round"] == n]
        why = {}

        def pick(key, server, path, mode, field):
            chosen = [r for r in rows if r["server"] == server and r["path"] == path and r["mode"] == mode]
            if not chosen:
                why.setdefault(key, f"no {mode}-loop load of {server} on {path}")
            elif not any(r["completed"] for r in chosen):
                why.setdefault(key, f"{server} answered no request on {path} ({mode} loop) in round {n}")
            return med([r[field] for r in chosen if r["completed"]])

        def both(key, path, mode, field):
            return ratio(pick(key, "blocklab", path, mode, field), pick(key, "play", path, mode, field))

        # The ceiling before the round's loads and the one after them (the next round's).
        bracket = max(c for c in (ceilings.get(n), ceilings.get(n + 1)) if c) if ceilings.get(n) else None
        figures = {"test": both("test", "/test", "closed", "rps"),
                   "ceiling": ratio(pick("ceiling", "blocklab", "/getDataAsync", "closed", "rps"), bracket),
                   "failed": sum(r["failed"] for r in rows)}
        if figures["ceiling"] and figures["ceiling"] > 1.05:
            # More reads than the ceiling is no share of it: Neo4j was warmer (or the machine
            # quieter) under the server than when its ceiling was measured.
            why["ceiling"] = (f"round {n}: blocklab got {figures['ceiling']:.2f} × the ceiling "
                              f"({bracket:,.0f} reads/s), no share: the database drifted between them")
            figures["ceiling"] = None
        for k, path in (("-async", "/getDataAsync"), ("-akka", "/getDataAkkaAsync")):
            figures["cpu" + k] = both("cpu" + k, path, "closed", "server_cpu_us_per_req")
            figures["neo4j" + k] = both("neo4j" + k, path, "closed", "neo4j_cpu_us_per_query")
            figures["p99" + k] = both("p99" + k, path, "open", "p99_ms")
        figures["why"] = why
        found.append(figures)
    return found


def study1_figure(key):
    return lambda per_round: per_round.get(key)


# ---- what is measured -----------------------------------------------------------------------

class Figure:
    def __init__(self, key, label, op, goal, read, digits=2, unit="", needs=(), text=None):
        self.key, self.label, self.op, self.goal, self.read, self.text = key, label, op, goal, read, text
        self.digits, self.unit, self.needs = digits, unit, tuple(needs)

    def goal_text(self):
        if self.text:
            return self.text
        if self.op == "≤" and self.goal == 0:
            return "0"
        shown = f"{self.goal:g}"
        return f"{self.op} {shown}{'.0' if self.digits and '.' not in shown else ''}{self.unit}"

    def show(self, v, unit=True):
        """v rounded to the figure's digits, or to more where the rounding would put it on the goal
        from the other side (0.998 against ≥ 1.0 shows as 0.998, not 1.00)."""
        if v is None:
            return "–"
        for digits in range(self.digits, self.digits + 3):
            text = f"{v:,.{digits}f}"
            if self.clears(float(text.replace(",", ""))) == self.clears(v):
                break
        return text + (self.unit if unit else "")

    def clears(self, v):
        return v >= self.goal if self.op == "≥" else v <= self.goal

    def verdict(self, values):
        cleared = [self.clears(v) for v in values]
        if all(cleared):
            return "met"
        return "at the edge" if any(cleared) else "missed"


class Job:
    """One bench script and the figures one run of it gives."""

    def __init__(self, name, script, flags, figures, needs=(), once=False):
        self.name, self.script, self.flags, self.figures = name, script, flags, figures
        self.needs, self.once = tuple(needs), once

    def command(self, args, json_file):
        return [os.path.join(BENCH, self.script)] + self.flags(args) + ["--json", json_file]

    def shown(self, args):
        return " ".join([f"bench/{self.script}"] + self.flags(args) + ["--json", "F"])


def jobs():
    s = lambda a: ["--seconds", str(a.seconds)]
    return [
        Job("nginx", "serve-vs-nginx.py", lambda a: ["--rounds", "1", *s(a), "--no-blocklab-load"], [
            Figure("nginx-reactive", "reactive `/test` ÷ nginx, req/s (wrk)", "≥", 0.9,
                   over(nginx_rps("/test"), nginx_rps("nginx"))),
            Figure("nginx-lean", "lean `/test` ÷ nginx, req/s (wrk)", "≥", 1.1,
                   over(nginx_rps("lean /test"), nginx_rps("nginx"))),
            Figure("nginx-async", "reactive `/getDataAsync` ÷ `/test`, embedded database", "≥", 0.5,
                   over(nginx_rps("/getDataAsync"), nginx_rps("/test"))),
            Figure("nginx-lean-async", "lean `/getDataAsync` ÷ `/test`, embedded database", "≥", 0.5,
                   over(nginx_rps("lean /getDataAsync"), nginx_rps("lean /test"))),
        ], needs=("wrk", "nginx")),
        Job("nginx-pipelined", "serve-vs-nginx.py",
            lambda a: ["--rounds", "1", *s(a), "--no-blocklab-load", "--pipeline", "16"], [
            Figure("pipelined-reactive", "reactive `/test` ÷ nginx, wrk pipelining 16 (the servers set the rate)",
                   "≥", 0.9, over(nginx_rps("/test"), nginx_rps("nginx"))),
            Figure("pipelined-lean", "lean `/test` ÷ nginx, wrk pipelining 16 (the servers set the rate)",
                   "≥", 1.1, over(nginx_rps("lean /test"), nginx_rps("nginx"))),
        ], needs=("wrk", "nginx")),
        Job("loadgen", "loadgen-vs-peers.py",
            lambda a: ["--rounds", "1", *s(a), "--no-long-rss", "--big-c", "0", "--no-oha"], [
            Figure("loadgen-wrk", "blocklab load ÷ wrk, GET keep-alive, -c 200", "≥", 1.0,
                   over(tool_rps("blocklab", "tools"), tool_rps("wrk", "tools")), needs=("wrk",)),
            Figure("loadgen-ab", "blocklab load ÷ ab -k, GET keep-alive, -c 200", "≥", 1.0,
                   over(tool_rps("blocklab", "tools"), tool_rps("ab", "tools")), needs=("ab",)),
            Figure("loadgen-h2load", "blocklab load ÷ h2load --h1, GET keep-alive, -c 200", "≥", 1.0,
                   over(tool_rps("blocklab", "tools"), tool_rps("h2load", "tools")), needs=("h2load",)),
        ], needs=("nginx",)),
        Job("tls", "load-tls.py", lambda a: ["--rounds", "1", *s(a), "--keep-alive-only"], [
            Figure("tls-wrk", "blocklab load ÷ wrk, HTTPS keep-alive, -c 100", "≥", 1.0,
                   over(tool_rps("blocklab", "cases", "keep-alive"), tool_rps("wrk", "cases", "keep-alive"))),
        ], needs=("wrk", "nginx", "openssl")),
        Job("post", "load-post.py", lambda a: ["--rounds", "1", *s(a)], [
            Figure("post-wrk", "blocklab load ÷ wrk, POST 1 KiB keep-alive, -c 100", "≥", 1.0,
                   over(tool_rps("blocklab", "tools"), tool_rps("wrk", "tools"))),
        ], needs=("wrk", "nginx")),
        Job("h2", "load-h2.py", lambda a: ["--rounds", "1", *s(a)], [
            Figure("h2c-h2load", "blocklab load --h2 ÷ h2load, h2c, 10 × 32 streams", "≥", 1.0,
                   over(tool_rps("blocklab", "cases", "h2c"), tool_rps("h2load", "cases", "h2c"))),
            Figure("h2-h2load", "blocklab load --h2 ÷ h2load, h2 over TLS, 10 × 32 streams", "≥", 1.0,
                   over(tool_rps("blocklab", "cases", "h2 (TLS)"), tool_rps("h2load", "cases", "h2 (TLS)"))),
        ], needs=("h2load", "nginx", "openssl")),
        Job("memory", "study2-models.py", lambda a: ["--part", "memory", "-n", "5000", "--targets", "lean"], [
            Figure("memory-lean", "lean: user space per waiting `/delay`, N = 5000 (cgroup v1)", "≤", 409.6,
                   lean_user_bytes, digits=0, unit=" B"),
        ], needs=("cgroup", "taskset")),
        Job("study1", "study1-seed-stack.py", lambda a: study1_flags(a), [
            Figure("study1-test", "study 1: `/test` blocklab ÷ Play, req/s (Neo4j stack)", "≥", 3,
                   study1_figure("test")),
            Figure("study1-ceiling", "study 1: `/getDataAsync` under blocklab ÷ Neo4j's ceiling", "≥", 0.9,
                   study1_figure("ceiling")),
            Figure("study1-cpu-async", "study 1: server CPU per `/getDataAsync`, blocklab ÷ Play", "≤", 1 / 3,
                   study1_figure("cpu-async"), text="≤ ⅓"),
            Figure("study1-cpu-akka", "study 1: server CPU per `/getDataAkkaAsync`, blocklab ÷ Play", "≤", 1 / 3,
                   study1_figure("cpu-akka"), text="≤ ⅓"),
            Figure("study1-neo4j-async", "study 1: Neo4j CPU per query, `/getDataAsync`, blocklab ÷ Play", "≤", 1.0,
                   study1_figure("neo4j-async")),
            Figure("study1-neo4j-akka", "study 1: Neo4j CPU per query, `/getDataAkkaAsync`, blocklab ÷ Play", "≤",
                   1.0, study1_figure("neo4j-akka")),
            Figure("study1-p99-async", "study 1: open-loop p99 at 70 % of the ceiling, `/getDataAsync`, "
                   "blocklab ÷ Play", "≤", 0.5, study1_figure("p99-async")),
            Figure("study1-p99-akka", "study 1: open-loop p99 at 70 % of the ceiling, `/getDataAkkaAsync`, "
                   "blocklab ÷ Play", "≤", 0.5, study1_figure("p99-akka")),
            Figure("study1-failed", "study 1: failed or non-2xx answers, all loads of a round", "≤", 0,
                   study1_figure("failed"), digits=0),
        ], needs=("java", "mvn", "taskset"), once=True),
    ]


# Stated elsewhere with a goal, too long to measure here: a row that says so.
NOT_HERE = [
    ("study 2: concurrent 5 s requests lean holds at 100 % ÷ the best JVM peer's", "≥ 5",
     "bench/study2-sweep.py (about an hour; not within this script's 20 minutes)"),
    ("study 2: concurrent 5 s requests lean holds at 100 % ÷ Go's (go-nethttp)", "≥ 2",
     "bench/study2-sweep.py (about an hour; not within this script's 20 minutes)"),
]


def study1_flags(a):
    if a.quick:
        return ["--rounds", str(a.rounds), "--seconds", "3", "--no-ab", "--warm", "10", "--warm-max", "10",
                "--server-warm", "15", "--ceiling-warmup", "2"]
    return ["--rounds", str(a.rounds), "--seconds", str(a.study1_seconds), "--no-ab", "--warm", "120",
            "--warm-max", "240"]


# ---- what is missing ------------------------------------------------------------------------

def memory_cgroup():
    """None when study2-models.py can make its child memory cgroups, else why not."""
    if os.geteuid() != 0:
        return "needs root (a child memory cgroup per server)"
    try:
        for line in open("/proc/self/cgroup"):
            _, controllers, path = line.strip().split(":", 2)
            if "memory" in controllers.split(","):
                where = os.path.join(MEMORY_CGROUP, path.lstrip("/"))
                return None if os.access(where, os.W_OK) else f"{where} is not writable"
    except OSError:
        pass
    return "no cgroup v1 memory controller (/sys/fs/cgroup/memory)"


def missing(needs):
    """Why these needs are not met, or None."""
    why = []
    for need in needs:
        if need == "cgroup":
            reason = memory_cgroup()
            if reason:
                why.append(reason)
        elif need == "nginx":
            if not nginx_binary():
                why.append("nginx not installed (Debian: nginx-light)")
        elif not shutil.which(need):
            why.append(f"{need} not installed (Debian: {DEBIAN_TOOLS.get(need, need)})")
    return "; ".join(why) or None


def install(names):
    """apt-get installs the Debian packages of `names` (as root)."""
    pkgs = sorted({DEBIAN_TOOLS[n] for n in names if n in DEBIAN_TOOLS and missing([n])})
    if not pkgs:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        print(f"--install: not root or no apt-get; left as they are: {' '.join(pkgs)}")
        return
    print(f"installing {' '.join(pkgs)} (apt-get)", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *pkgs], env=env,
                   stdout=subprocess.DEVNULL)


# ---- running ----------------------------------------------------------------------------------

class Interrupted(Exception):
    pass


def run_script(cmd, log_path, timeout):
    """Runs one script (a session of its own) with its output to log_path; returns (exit code, seconds,
    why it failed or None). On a timeout or Ctrl-C it sends the script SIGINT (its own clean-up
    runs), then SIGKILL to its group."""
    started = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=ROOT, start_new_session=True)
        why = None
        try:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                why = f"timed out after {timeout:.0f} s"
                stop(proc)
        except KeyboardInterrupt:
            stop(proc)
            raise Interrupted()
    took = time.monotonic() - started
    if why is None and proc.returncode != 0:
        why = f"exit {proc.returncode}: {last_line(log_path)}"
    return proc.returncode, took, why


def stop(proc):
    for sig, wait in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass


def last_line(path):
    with open(path, errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[-1][:200] if lines else "no output"


def measure(job, args, out, round_no, results, log_name):
    """One run of the job's script; adds each figure's value (or why not) for this round."""
    logs = os.path.join(out, "logs")
    json_file = os.path.join(logs, f"{log_name}.json")
    if os.path.exists(json_file):
        os.unlink(json_file)
    cmd = job.command(args, json_file)
    print(f"  {job.name:<16} {' '.join(cmd[1:])[:100]}", flush=True)
    timeout = 3600 if job.once else 300 + 60 * args.seconds
    code, took, why = run_script(cmd, os.path.join(logs, f"{log_name}.log"), timeout)
    doc = None
    if why is None:
        try:
            with open(json_file) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            why = f"no JSON from the script ({e})"
    results["runs"].append({"job": job.name, "round": round_no, "seconds": round(took, 1), "exit": code,
                            "failed": why, "log": os.path.relpath(os.path.join(logs, f"{log_name}.log"), out)})
    per_round = [doc]
    if job.once and doc is not None:
        try:
            per_round = study1_rounds(doc)
            results["study1"] = {"ceiling_reads_per_s": [c["reads_per_s"] for c in doc["ceiling"]],
                                 "neo4j_warm_s": doc.get("neo4j_warm_s")}
        except (KeyError, TypeError, ValueError) as e:
            why = f"unexpected JSON from the script ({e!r})"
            per_round = [None]
    for n, part in enumerate(per_round):
        for fig in job.figures:
            entry = results["figures"][fig.key]
            if fig.key in args.skipped:
                continue
            value = None
            if part is not None:
                try:
                    value = fig.read(part)
                except (KeyError, TypeError, ValueError):
                    value = None
            entry["values"].append(value)
            if value is None:
                said = (part or {}).get("why", {}).get(fig.key.split("-", 1)[-1]) if job.once else None
                entry["failures"].append(why or said or "no figure in the script's output")
    shown = "; ".join(f"{fig.key} {fig.show(results['figures'][fig.key]['values'][-1])}"
                      for fig in job.figures if fig.key not in args.skipped and results['figures'][fig.key]['values'])
    print(f"  {'':<16} {took:.0f} s" + (f", failed: {why}" if why else "") + (f"; {shown}" if shown else ""),
          flush=True)


# ---- the report ----------------------------------------------------------------------------------

def machine():
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
        mem = f"{mem / 2**20:.0f} GiB"
    except (OSError, StopIteration):
        mem = "?"
    return f"{socket.gethostname()}: {model}, {os.cpu_count()} CPUs, {mem}, {platform.system()} {platform.release()}"


def commit():
    def git(*a):
        r = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else ""
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + (" (with uncommitted changes)" if dirty else "")


def summarize(fig, entry):
    values = [v for v in entry["values"] if v is not None]
    if entry.get("not_measured"):
        return {"median": None, "min": None, "max": None, "rounds": 0, "verdict": f"not measured: {entry['not_measured']}"}
    if not values:
        why = entry["failures"][0] if entry["failures"] else "no round ran"
        return {"median": None, "min": None, "max": None, "rounds": 0,
                "verdict": f"not measured: {why} (see logs/)"}
    if len(values) < len(entry["values"]):
        entry["note"] = entry["failures"][0]
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "rounds": len(values), "verdict": fig.verdict(values)}


def write_report(args, out, all_jobs, results, started_wall, started):
    took = time.monotonic() - started
    results["seconds"] = round(took, 1)
    results["loadavg_end"] = loadavg()
    rows = []
    for job in all_jobs:
        for fig in job.figures:
            entry = results["figures"][fig.key]
            entry.update(summarize(fig, entry))
            entry.update({"label": fig.label, "goal": fig.goal_text(), "op": fig.op, "threshold": fig.goal,
                          "command": job.shown(args), "job": job.name})
            rows.append((fig, entry, job))
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started_wall))
    lines = [f"# blocklab's headline figures, {date}", ""]
    if args.quick:
        lines += [f"**A first look (`--quick`): {args.rounds} rounds of {args.seconds} s (study 1: 3 s a load, Neo4j "
                  "warmed 10 s, each server 15 s). "
                  "Too short for its figures to be quoted; the full run (`bench/headline.py`) is the measurement.**", ""]
    lines += [f"- machine: {machine()}",
              f"- commit: {commit()}; {results['blocklab']}",
              f"- command: `{results['command']}`, took {took // 60:.0f} min {took % 60:.0f} s; load average "
              f"{results['loadavg_start']} at the start, {results['loadavg_end']} at the end",
              f"- each figure in {args.rounds} rounds, interleaved (round 1 of every script, then round 2, …; "
              "study 1 in one run of its script, after the others, its rounds interleaving blocklab, Play and "
              "Neo4j's ceiling); **met** when the whole range clears the goal, **at the edge** when the range "
              "straddles it, **missed** when no round clears it", ""]
    lines += ["| figure | goal | median | min–max | rounds | verdict | command |", "|---|---|---|---|---|---|---|"]
    for fig, e, job in rows:
        spread = "–" if e["min"] is None else f"{fig.show(e['min'], unit=False)}–{fig.show(e['max'])}"
        rounds = f"{e['rounds']}" if e["rounds"] == len(e["values"]) else f"{e['rounds']} of {len(e['values'])}"
        verdict = e["verdict"] if e["verdict"].startswith("not measured") else f"**{e['verdict']}**"
        lines.append(f"| {fig.label} | {fig.goal_text()} | {fig.show(e['median'])} | {spread} | {rounds} | "
                     f"{verdict} | `{job.shown(args)}` |")
    if not args.only:
        for label, goal, where in NOT_HERE:
            lines.append(f"| {label} | {goal} | – | – | 0 | not measured here: {where} | `{where.split()[0]}` |")
    measured = [(fig, e) for fig, e, _ in rows if e["values"]]
    if measured:
        lines += ["", "Each round's value, in order:", ""]
    for fig, e in measured:
        note = f" (not measured in a round: {e['failures'][0]})" if e["failures"] and e["rounds"] else ""
        lines.append(f"- {fig.key}: " + ", ".join(fig.show(v) if v is not None else "failed" for v in e["values"])
                     + note)
    if results.get("study1"):
        s1 = results["study1"]
        lines.append(f"- study 1: Neo4j's ceiling per round (reads/s): "
                     + ", ".join(f"{c:,.0f}" for c in s1["ceiling_reads_per_s"])
                     + f"; Neo4j warmed {s1['neo4j_warm_s']} s")
    failed = [r for r in results["runs"] if r["failed"]]
    if failed:
        lines += ["", "Runs that failed:", ""]
        lines += [f"- {r['job']} round {r['round']}: {r['failed']} ({r['log']})" for r in failed]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "headline.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "headline.json"), "w") as f:
        json.dump(results, f, indent=2)
    return text


# ---- main ------------------------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 5; 3 with --quick)")
    p.add_argument("--seconds", type=int, help="seconds per tool and round (default 3; 2 with --quick)")
    p.add_argument("--study1-seconds", type=int, default=4, help="seconds per load in study 1 (default 4)")
    p.add_argument("--quick", action="store_true", help="a first look: 3 rounds of 2 s, Neo4j warmed 10 s")
    p.add_argument("--only", metavar="NAME,…", help="run only these jobs (see --list)")
    p.add_argument("--out", metavar="DIR", help="results folder (default results/headline-DATE/)")
    p.add_argument("--install", action="store_true",
                   help="apt-get install the missing tools first (wrk, ab, h2load, nginx; Debian, as root)")
    p.add_argument("--list", action="store_true", help="print the jobs and their figures, and exit")
    args = p.parse_args()
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.seconds = args.seconds or (2 if args.quick else 3)
    if args.rounds < 1 or args.seconds < 1:
        p.error("--rounds and --seconds must be at least 1")
    all_jobs = jobs()
    if args.list:
        for job in all_jobs:
            print(f"{job.name:<16} {job.shown(args)}")
            for fig in job.figures:
                print(f"  {fig.key:<20} {fig.label} (goal {fig.goal_text()})")
        return
    names = [j.name for j in all_jobs]
    chosen = args.only.split(",") if args.only else names
    unknown = [n for n in chosen if n not in names]
    if unknown:
        p.error(f"--only: unknown {', '.join(unknown)}; the jobs are {', '.join(names)}")
    all_jobs = [j for j in all_jobs if j.name in chosen]

    started, started_wall = time.monotonic(), time.time()
    out = args.out or os.path.join("results", "headline-" + time.strftime("%Y-%m-%d", time.gmtime(started_wall)))
    base, n = out, 2
    while os.path.exists(out) and os.listdir(out):
        out, n = f"{base}-{n}", n + 1
    out = os.path.abspath(out)
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    if args.install:
        install({need for j in all_jobs for need in j.needs + tuple(x for f in j.figures for x in f.needs)})

    # Many connections (5,000 waiting requests; -c 200 of several tools): children inherit the limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    binary = BLOCKLAB  # $BLOCKLAB, else this checkout's release build
    if not os.path.exists(binary) and binary == os.path.join(ROOT, "target", "release", "blocklab"):
        print("building blocklab (cargo build --release --locked)", flush=True)
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT)
    os.environ["BLOCKLAB"] = binary
    version = (subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
               if os.path.exists(binary) else "")
    if version and binary != os.path.join(ROOT, "target", "release", "blocklab"):
        version += f" ({binary}, not this checkout's build)"

    results = {"command": " ".join(["bench/headline.py"] + sys.argv[1:]), "quick": args.quick, "rounds": args.rounds,
               "seconds": args.seconds, "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_wall)),
               "machine": machine(), "commit": commit(), "blocklab": version or f"no blocklab binary at {binary}",
               "loadavg_start": loadavg(), "figures": {}, "runs": []}
    args.skipped = set()
    runnable = []
    for job in all_jobs:
        why_job = missing(job.needs) or (None if version else f"no blocklab binary at {binary}")
        for fig in job.figures:
            entry = results["figures"][fig.key] = {"values": [], "failures": []}
            why = why_job or missing(fig.needs)
            if why:
                entry["not_measured"] = why
                args.skipped.add(fig.key)
        if not why_job and any(f.key not in args.skipped for f in job.figures):
            runnable.append(job)
        elif why_job:
            print(f"{job.name}: not measured: {why_job}")

    print(f"headline: {args.rounds} rounds of {args.seconds} s, jobs {', '.join(j.name for j in runnable) or 'none'}; "
          f"results into {out}\n", flush=True)
    try:
        repeated = [j for j in runnable if not j.once]
        for r in range(args.rounds if repeated else 0):
            print(f"round {r + 1}/{args.rounds} (load average {loadavg()}, {time.monotonic() - started:.0f} s in)",
                  flush=True)
            for job in repeated:
                measure(job, args, out, r + 1, results, f"{job.name}-round{r + 1}")
            if r == 0 and args.rounds > 1:
                spent = time.monotonic() - started
                print(f"  round 1 took {spent:.0f} s: the other {args.rounds - 1} about "
                      f"{spent * (args.rounds - 1) / 60:.0f} min more"
                      + ("; then study 1 (~9-11 min, ~4 with --quick)" if any(j.once for j in runnable) else ""),
                      flush=True)
        for job in (j for j in runnable if j.once):
            print(f"{job.name}: {args.rounds} rounds in one run (load average {loadavg()}, "
                  f"{time.monotonic() - started:.0f} s in)", flush=True)
            measure(job, args, out, "all", results, job.name)
    except (Interrupted, KeyboardInterrupt):
        print("\ninterrupted: the table below has the rounds that finished", flush=True)
        results["interrupted"] = True
    text = write_report(args, out, all_jobs, results, started_wall, started)
    print("\n" + text)
    print(f"wrote {os.path.join(out, 'headline.md')} and headline.json")


if __name__ == "__main__":
    main()
