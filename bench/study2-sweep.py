#!/usr/bin/env python3
"""Study 2's headline, side by side in one run: `blocklab sweep` over all six
targets under the same cap, then the figures the study is about.

  - the goal: lean holds 10,000 concurrent 5 s requests at 100 % with max <= 5.1 s
    under a 50 MiB cap on the whole process;
  - reactive's highest level at 100 % and its memory per concurrent request;
  - where thread dies, and how pool degrades (its waves) and where it dies;
  - Tomcat and Netty measured the same way (heap capped at -Xmx50M, as the seed).

Needs root (the memory cap is a cgroup) and the JVM peers built
(scripts/peers install && scripts/peers build); takes about 8 minutes.

    bench/study2-sweep.py
    bench/study2-sweep.py --out /tmp/sweep --memory 50MiB
    bench/study2-sweep.py --from results/sweep-2026-12-03T04-00-00Z   # re-read a finished sweep
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKLAB = os.path.join(ROOT, "target", "release", "blocklab")


def per_request(target):
    alive = [s for s in target["steps"] if s.get("alive_after") and s.get("peak_memory_bytes") is not None]
    if len(alive) < 2 or alive[-1]["level"] <= alive[0]["level"]:
        return None
    grew = alive[-1]["peak_memory_bytes"] - alive[0]["peak_memory_bytes"]
    return max(grew, 0) / (alive[-1]["level"] - alive[0]["level"])


def step_at(target, level):
    return next((s for s in target["steps"] if s["level"] == level), None)


def describe(target, delay_ms):
    held = target.get("highest_full_success")
    died = target.get("died")
    parts = [f"100 % up to {held}" if held else "never 100 %"]
    if held:
        s = step_at(target, held)
        parts.append(f"max {s['max_ms'] / 1000:.2f} s there ({s['max_ms'] / delay_ms:.1f} x the delay)")
        if s.get("peak_memory_bytes") is not None:
            parts.append(f"{s['peak_memory_bytes'] / 2**20:.1f} MiB")
    b = per_request(target)
    if b is not None:
        parts.append(f"{b / 1024:.1f} KiB per concurrent request")
    if died:
        parts.append(f"{died['how']} at {died['level']}")
    else:
        parts.append("alive to the end")
    return "; ".join(parts)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="output folder of the sweep")
    p.add_argument("--memory", default="50MiB")
    p.add_argument("--from", dest="previous", default=None, help="read this sweep's results.json instead of running one")
    args = p.parse_args()
    if args.previous:
        out = args.previous
    else:
        if not os.path.exists(BLOCKLAB):
            subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
        out = args.out or os.path.join(ROOT, "results", time.strftime("sweep-bench-%Y%m%dT%H%M%S"))
        run = subprocess.run([BLOCKLAB, "sweep", "--memory", args.memory, "--out", out], stdout=subprocess.DEVNULL)
        if run.returncode != 0:
            sys.exit(f"blocklab sweep failed with status {run.returncode}")
    with open(os.path.join(out, "results.json")) as f:
        results = json.load(f)
    targets = {t["name"]: t for t in results["targets"]}
    delay = results["delay_ms"]
    print(f"sweep of {results['started']}, /delay {delay} ms, levels {results['levels']}, {results['wall_s']:.0f} s")
    for w in results["warnings"]:
        print(f"warning: {w}")
    lean = targets.get("lean")
    if lean:
        top = step_at(lean, 10000)
        if top and top["status"] == "run":
            if top["success_rate"] == 1.0 and top["max_ms"] <= 5100:
                verdict = "met"
            elif top["success_rate"] == 1.0:
                verdict = "missed by %.0f ms" % (top["max_ms"] - 5100)
            else:
                verdict = "missed: not 100 %"
            print(f"\nGOAL lean at 10,000: {top['success_rate'] * 100:.1f} % ok, max {top['max_ms']:.0f} ms "
                  f"(goal <= 5100: {verdict}), peak {top['peak_memory_bytes'] / 2**20:.1f} MiB under {lean['cap']}")
    print()
    for name, t in targets.items():
        print(f"{name:>9}: {describe(t, delay)}")
    pool = targets.get("pool")
    if pool and pool.get("highest_full_success"):
        level = pool["highest_full_success"]
        s = step_at(pool, level)
        waves = -(-level // 200)
        print(f"\npool at {level}: max {s['max_ms'] / 1000:.1f} s against ceil({level}/200) x {delay / 1000:.0f} s = "
              f"{waves * delay / 1000:.0f} s expected from 200 threads")
    reactive, lean_b = targets.get("reactive"), per_request(lean) if lean else None
    if reactive and lean_b:
        r = per_request(reactive)
        if r:
            print(f"memory per concurrent request: reactive {r / 1024:.1f} KiB, lean {lean_b / 1024:.1f} KiB "
                  f"({r / lean_b:.1f} x)")


if __name__ == "__main__":
    main()
